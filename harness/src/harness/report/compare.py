"""Comparing a current pytest-benchmark run with a baseline run: one verdict per benchmark, keyed by fullname.

Verdict rule (``harness.report.stats`` gives the rule of one comparison: significant at ``alpha``, ratio beyond the
threshold, bootstrap CI of the ratio entirely beyond 1):

- a device entry whose group holds a practical-limit entry (``harness.report.groups``) is compared twice: raw
  (current vs baseline round times) and limit-normalized (each round divided by the median of the group's limit in the
  same run). It is "regressed" or "improved" only when BOTH comparisons say so; when they disagree it is "unchanged"
  with a note. Raw slower but normalized not means the limit moved as well: the machine changed (load, clock,
  memory bandwidth), not the code. Normalized slower but raw not means the limit got faster while the entry did not.
- a limit entry gets the raw verdict, labelled in its note ("limit moved: the machine was x1.40 slower"), and never
  fails the run: it measures the machine, not our code. ``ComparisonResult.failed`` counts device entries only.
- any other benchmark gets the raw verdict.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

import numpy as np

from harness.report.errors import ReportInputError
from harness.report.groups import group_limits, is_limit, limit_ratios
from harness.report.load import BenchmarkRecord, BenchmarkRun, parse_run
from harness.report.machine import machine_id, machine_mismatch
from harness.report.stats import SampleComparison, Verdict, compare_normalized, compare_records
from harness.report.thresholds import HIGHER_IS_BETTER_KEY, THRESHOLD_KEY, parse_threshold

VERDICT_ORDER = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.NEW, Verdict.MISSING)
# The note every report carries when there is no baseline (``compare(current, None)``); the bench command prints it too.
NO_BASELINE_NOTE = "no baseline for machine {machine}: this run can become the baseline with `nox -s bench -- --save-baseline`"
# The note instead of NO_BASELINE_NOTE when the caller saves this run as the baseline (``compare(saved_baseline=...)``).
SAVED_BASELINE_NOTE = "this run was saved as the baseline of machine {machine}: {path}"


@dataclass(frozen=True)
class BenchmarkComparison:
    """The verdict and statistics of one benchmark.

    ``current``/``baseline`` are None for a missing/new benchmark, and so are ``ratio`` (current median / baseline
    median), ``ci`` (bootstrap CI of the ratio, also None without per-round data), ``p_value`` and ``test``.
    ``threshold`` is the fraction that applied (the benchmark's own ``extra_info['threshold']`` or the default).
    ``x_limit``: current median / the current median of its group's practical-limit entry (see ``harness.report.groups``),
    None when the group has no limit entry, for the limit entry itself, and for a missing benchmark.
    ``normalized_ratio``/``normalized_ci``/``normalized_p_value``: the limit-normalized comparison (see the module
    rule), None unless the benchmark is a device entry of a group with a limit entry in both runs, all with per-round
    data. ``limit_ratio``: current / baseline median of that limit entry (how much the machine moved), None likewise
    (for a limit entry itself see ``ratio``).
    """

    fullname: str
    verdict: Verdict
    threshold: float
    current: BenchmarkRecord | None
    baseline: BenchmarkRecord | None
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    test: str | None = None
    note: str | None = None
    x_limit: float | None = None
    normalized_ratio: float | None = None
    normalized_ci: tuple[float, float] | None = None
    normalized_p_value: float | None = None
    limit_ratio: float | None = None

    @property
    def is_limit(self) -> bool:
        """True for a practical-limit entry (``extra_info['limit'] is True``), which bounds its group's other entries."""
        return is_limit(self.record)

    @property
    def record(self) -> BenchmarkRecord:
        """The current record if there is one, else the baseline record."""
        record = self.current or self.baseline
        if record is None:
            raise ValueError(f"benchmark {self.fullname!r} has neither a current nor a baseline record")
        return record

    @property
    def higher_is_better(self) -> bool:
        """True when the benchmark declares a throughput figure (``extra_info['higher_is_better']``)."""
        return bool(self.record.extra_info.get(HIGHER_IS_BETTER_KEY, False))


@dataclass(frozen=True)
class ComparisonResult:
    """All verdicts of current vs baseline, ordered by verdict (regressed first) then fullname, plus run metadata.

    ``warnings``: lines every report prints at the top (different machines, different pytest-benchmark majors).
    ``notes``: informational lines printed at the top too (NO_BASELINE_NOTE when ``baseline`` is None, or
    SAVED_BASELINE_NOTE when the run was saved as the baseline).
    """

    current: BenchmarkRun
    baseline: BenchmarkRun | None
    comparisons: tuple[BenchmarkComparison, ...]
    warnings: tuple[str, ...]
    threshold: float
    alpha: float
    confidence: float
    notes: tuple[str, ...] = ()

    def of(self, verdict: Verdict) -> list[BenchmarkComparison]:
        """The comparisons with this verdict."""
        return [c for c in self.comparisons if c.verdict is verdict]

    @property
    def has_limits(self) -> bool:
        """True when any benchmark is a practical-limit entry or is bounded by one (the reports then add 'x limit')."""
        return any(c.is_limit or c.x_limit is not None for c in self.comparisons)

    def counts(self) -> dict[Verdict, int]:
        """Number of benchmarks per verdict, every verdict present (in VERDICT_ORDER)."""
        return {verdict: len(self.of(verdict)) for verdict in VERDICT_ORDER}

    @property
    def regressions(self) -> list[BenchmarkComparison]:
        """The regressed benchmarks that fail the run: every regressed one except practical-limit entries."""
        return [c for c in self.of(Verdict.REGRESSED) if not c.is_limit]

    @property
    def limit_moves(self) -> list[BenchmarkComparison]:
        """The practical-limit entries judged regressed or improved: the machine moved (never a failure)."""
        return [c for c in self.comparisons if c.is_limit and c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)]

    @property
    def failed(self) -> bool:
        """True when any benchmark other than a practical-limit entry regressed beyond its threshold."""
        return bool(self.regressions)


def compare(
    current: Mapping[str, Any] | BenchmarkRun,
    baseline: Mapping[str, Any] | BenchmarkRun | None,
    *,
    threshold: float = 0.10,
    alpha: float = 0.01,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    saved_baseline: str | None = None,
) -> ComparisonResult:
    """Compare two pytest-benchmark results (decoded JSON dicts, or runs from ``parse_run``).

    ``baseline=None`` (no baseline stored for the machine): every benchmark is NEW, nothing fails, and the result's
    ``notes`` hold NO_BASELINE_NOTE naming the current run's ``machine_id``.

    ``threshold``: default fraction a median may grow before a significant change counts (0.10 = 10%); a benchmark's
    ``extra_info['threshold']`` overrides it (current side first, else baseline). ``alpha``: significance level of the
    test; ``confidence``: level of the bootstrap CI; ``n_resamples``: bootstrap resamples; ``seed``: makes the CI
    reproducible (each benchmark draws from its own generator seeded by ``seed`` and its fullname).
    ``saved_baseline``: where the caller saved ``current`` as the baseline; the notes then hold SAVED_BASELINE_NOTE
    instead of NO_BASELINE_NOTE. See the module doc and ``harness.report.stats`` for the rule.
    Raises ReportInputError for an invalid document, option or per-benchmark threshold.
    """
    cur = current if isinstance(current, BenchmarkRun) else parse_run(current, "current")
    base = baseline if baseline is None or isinstance(baseline, BenchmarkRun) else parse_run(baseline, "baseline")
    threshold = parse_threshold(threshold, "--threshold")
    _check_level(alpha, "--alpha")
    _check_level(confidence, "confidence")
    if n_resamples < 100:
        raise ReportInputError(f"n_resamples must be >= 100 for a usable CI, got {n_resamples}")
    x_limits = limit_ratios(cur)
    before = base if base is not None else _empty_like(cur)
    settings = _Settings(threshold, alpha, confidence, n_resamples, seed)
    comparisons = [
        replace(_compare_one(name, cur, before, settings), x_limit=x_limits.get(name))
        for name in sorted(set(cur.benchmarks) | set(before.benchmarks))
    ]
    machine = machine_id(cur.machine_info)
    if saved_baseline is not None:
        notes: tuple[str, ...] = (SAVED_BASELINE_NOTE.format(machine=machine, path=saved_baseline),)
    else:
        notes = (NO_BASELINE_NOTE.format(machine=machine),) if base is None else ()
    comparisons.sort(key=lambda c: (VERDICT_ORDER.index(c.verdict), c.fullname))
    return ComparisonResult(
        current=cur,
        baseline=base,
        comparisons=tuple(comparisons),
        warnings=_warnings(cur, base) if base is not None else (),
        threshold=threshold,
        alpha=alpha,
        confidence=confidence,
        notes=notes,
    )


def _empty_like(run: BenchmarkRun) -> BenchmarkRun:
    """A run without benchmarks: comparing against it makes every benchmark NEW."""
    return replace(run, source="(no baseline)", benchmarks={})


@dataclass(frozen=True)
class _Settings:
    """The options of ``compare`` that every benchmark's comparison uses."""

    threshold: float
    alpha: float
    confidence: float
    n_resamples: int
    seed: int


def _compare_one(name: str, cur: BenchmarkRun, base: BenchmarkRun, settings: _Settings) -> BenchmarkComparison:
    now, before = cur.benchmarks.get(name), base.benchmarks.get(name)
    threshold = _threshold_of(now, before, settings.threshold)
    if before is None:
        return BenchmarkComparison(name, Verdict.NEW, threshold, current=now, baseline=None)
    if now is None:
        return BenchmarkComparison(name, Verdict.MISSING, threshold, current=None, baseline=before)
    rng = np.random.default_rng([settings.seed, int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")])
    options = partial(_with_options, threshold=threshold, settings=settings, rng=rng)
    raw = options(compare_records, now, before)
    verdict, notes = raw.verdict, [raw.note] if raw.note else []
    normalized, limit_ratio = None, None
    limit = group_limits(cur).get(now.group) if now.group is not None and not is_limit(now) else None
    if is_limit(now):
        notes += _limit_note(raw)
    elif limit is not None:
        limit_before = base.benchmarks.get(limit.fullname)
        if limit_before is None:
            notes.append(f"its group's limit {limit.fullname!r} is not in the baseline: raw comparison only")
        else:
            limit_ratio = limit.median / limit_before.median
            normalized = options(compare_normalized, now, before, limit, limit_before)
            if normalized is None:
                notes.append("no per-round data for the limit-normalized comparison: raw comparison only")
            else:
                verdict, agreement = _agree(raw, normalized, limit_ratio, threshold)
                notes += agreement
    return BenchmarkComparison(
        name,
        verdict,
        threshold,
        current=now,
        baseline=before,
        ratio=raw.ratio,
        ci=raw.ci,
        p_value=raw.p_value,
        test=raw.test,
        note="; ".join(notes) or None,
        normalized_ratio=normalized.ratio if normalized else None,
        normalized_ci=normalized.ci if normalized else None,
        normalized_p_value=normalized.p_value if normalized else None,
        limit_ratio=limit_ratio,
    )


_Result = TypeVar("_Result")


def _with_options(
    function: Callable[..., _Result], *records: BenchmarkRecord, threshold: float, settings: _Settings,
    rng: np.random.Generator,
) -> _Result:
    """``function(*records, ...)`` with the comparison options of ``settings`` and this benchmark's threshold/rng."""
    return function(*records, threshold=threshold, alpha=settings.alpha, confidence=settings.confidence,
                    n_resamples=settings.n_resamples, rng=rng)


def _limit_note(raw: SampleComparison) -> list[str]:
    """The label of a limit entry that moved: it measures the machine, so it never fails the run."""
    if raw.verdict is Verdict.REGRESSED:
        return [f"limit moved: the machine was x{raw.ratio:.2f} slower (a limit never fails the run)"]
    if raw.verdict is Verdict.IMPROVED:
        return [f"limit moved: the machine was x{1.0 / raw.ratio:.2f} faster (a limit never fails the run)"]
    return []


def _agree(
    raw: SampleComparison, normalized: SampleComparison, limit_ratio: float, threshold: float
) -> tuple[Verdict, list[str]]:
    """The verdict of a device entry from its raw and limit-normalized comparisons (both must agree), and a note
    saying why when they do not: the other ratio stayed within the threshold (the limit moved with the entry, or moved
    alone), or it went the same way without being conclusive (p-value or CI)."""
    if raw.verdict is normalized.verdict:
        return raw.verdict, []
    numbers = f"limit x{limit_ratio:.3f}, raw x{raw.ratio:.3f}, normalized x{normalized.ratio:.3f}"
    moved, other, kind = (raw, normalized, "raw") if raw.verdict is not Verdict.UNCHANGED else (normalized, raw, "normalized")
    if 1.0 / (1.0 + threshold) <= other.ratio <= 1.0 + threshold:
        why = "machine-wide change: the limit moved too" if kind == "raw" else "the limit moved, the benchmark did not"
    else:
        ci = "–" if other.ci is None else f"[{other.ci[0]:.3f}, {other.ci[1]:.3f}]"
        why = f"the {'normalized' if kind == 'raw' else 'raw'} comparison is not conclusive (p={other.p_value:.2g}, CI {ci})"
    return Verdict.UNCHANGED, [f"{kind} {moved.verdict.value} only: {why} ({numbers}), so no verdict"]


def _threshold_of(now: BenchmarkRecord | None, before: BenchmarkRecord | None, default: float) -> float:
    for record in (now, before):
        if record is not None and record.extra_info.get(THRESHOLD_KEY) is not None:
            return parse_threshold(record.extra_info[THRESHOLD_KEY], f"benchmark {record.fullname!r} extra_info")
    return default


def _check_level(value: float, name: str) -> None:
    if not 0.0 < value < 1.0:
        raise ReportInputError(f"{name} must be a probability strictly between 0 and 1, got {value!r}")


def _warnings(cur: BenchmarkRun, base: BenchmarkRun) -> tuple[str, ...]:
    found = []
    machines = machine_mismatch(cur.machine_info, base.machine_info)
    if machines:
        found.append(machines)
    if cur.major_version != base.major_version:
        found.append(
            f"current was written by pytest-benchmark {cur.version} and baseline by {base.version}; "
            "statistics are compared as if equivalent"
        )
    return tuple(found)
