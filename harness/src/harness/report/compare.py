"""Comparing a current pytest-benchmark run with a baseline run: one verdict per benchmark, keyed by fullname."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.report.errors import ReportInputError
from harness.report.groups import is_limit, limit_ratios
from harness.report.load import BenchmarkRecord, BenchmarkRun, parse_run
from harness.report.machine import machine_id, machine_mismatch
from harness.report.stats import Verdict, compare_records
from harness.report.thresholds import HIGHER_IS_BETTER_KEY, THRESHOLD_KEY, parse_threshold

VERDICT_ORDER = (Verdict.REGRESSED, Verdict.IMPROVED, Verdict.UNCHANGED, Verdict.NEW, Verdict.MISSING)
# The note every report carries when there is no baseline (``compare(current, None)``); the bench command prints it too.
NO_BASELINE_NOTE = "no baseline for machine {machine}: this run can become the baseline with `nox -s bench -- --save-baseline`"


@dataclass(frozen=True)
class BenchmarkComparison:
    """The verdict and statistics of one benchmark.

    ``current``/``baseline`` are None for a missing/new benchmark, and so are ``ratio`` (current median / baseline
    median), ``ci`` (bootstrap CI of the ratio, also None without per-round data), ``p_value`` and ``test``.
    ``threshold`` is the fraction that applied (the benchmark's own ``extra_info['threshold']`` or the default).
    ``x_limit``: current median / the current median of its group's practical-limit entry (see ``harness.report.groups``),
    None when the group has no limit entry, for the limit entry itself, and for a missing benchmark.
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
    ``notes``: informational lines printed at the top too (NO_BASELINE_NOTE when ``baseline`` is None).
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
    def failed(self) -> bool:
        """True when any benchmark regressed beyond its threshold."""
        return any(c.verdict is Verdict.REGRESSED for c in self.comparisons)


def compare(
    current: Mapping[str, Any] | BenchmarkRun,
    baseline: Mapping[str, Any] | BenchmarkRun | None,
    *,
    threshold: float = 0.10,
    alpha: float = 0.01,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> ComparisonResult:
    """Compare two pytest-benchmark results (decoded JSON dicts, or runs from ``parse_run``).

    ``baseline=None`` (no baseline stored for the machine): every benchmark is NEW, nothing fails, and the result's
    ``notes`` hold NO_BASELINE_NOTE naming the current run's ``machine_id``.

    ``threshold``: default fraction a median may grow before a significant change counts (0.10 = 10%); a benchmark's
    ``extra_info['threshold']`` overrides it (current side first, else baseline). ``alpha``: significance level of the
    test; ``confidence``: level of the bootstrap CI; ``n_resamples``: bootstrap resamples; ``seed``: makes the CI
    reproducible (each benchmark draws from its own generator seeded by ``seed`` and its fullname).
    See ``harness.report.stats`` for the rule. Raises ReportInputError for an invalid document, option or
    per-benchmark threshold.
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
    comparisons = [
        replace(_compare_one(name, cur, before, threshold, alpha, confidence, n_resamples, seed), x_limit=x_limits.get(name))
        for name in sorted(set(cur.benchmarks) | set(before.benchmarks))
    ]
    comparisons.sort(key=lambda c: (VERDICT_ORDER.index(c.verdict), c.fullname))
    return ComparisonResult(
        current=cur,
        baseline=base,
        comparisons=tuple(comparisons),
        warnings=_warnings(cur, base) if base is not None else (),
        threshold=threshold,
        alpha=alpha,
        confidence=confidence,
        notes=(NO_BASELINE_NOTE.format(machine=machine_id(cur.machine_info)),) if base is None else (),
    )


def _empty_like(run: BenchmarkRun) -> BenchmarkRun:
    """A run without benchmarks: comparing against it makes every benchmark NEW."""
    return replace(run, source="(no baseline)", benchmarks={})


def _compare_one(
    name: str,
    cur: BenchmarkRun,
    base: BenchmarkRun,
    default: float,
    alpha: float,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> BenchmarkComparison:
    now, before = cur.benchmarks.get(name), base.benchmarks.get(name)
    threshold = _threshold_of(now, before, default)
    if before is None:
        return BenchmarkComparison(name, Verdict.NEW, threshold, current=now, baseline=None)
    if now is None:
        return BenchmarkComparison(name, Verdict.MISSING, threshold, current=None, baseline=before)
    rng = np.random.default_rng([seed, int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")])
    stats = compare_records(
        now, before, threshold=threshold, alpha=alpha, confidence=confidence, n_resamples=n_resamples, rng=rng
    )
    return BenchmarkComparison(
        name,
        stats.verdict,
        threshold,
        current=now,
        baseline=before,
        ratio=stats.ratio,
        ci=stats.ci,
        p_value=stats.p_value,
        test=stats.test,
        note=stats.note,
    )


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
