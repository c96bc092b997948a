"""Comparing a run with a baseline: one verdict per benchmark (keyed by fullname), and one set of counts for all outputs.

The mode follows from the runs:

- **A/B** (the two files of one paired A/B run: RUN_KEY mode "ab" and the same pairing id; baseline = side A, the git
  ref, current = side B, the working tree): the gate (docs/benchmark-gate.md). Each benchmark's rounds are split into
  its process pairs (options ``pair_rounds``), each pair gives one value (``harness.gate.pair_value``), and
  ``harness.gate.decide`` gives the verdict, at the corrected level of the run (``harness.gate.corrected_level`` of
  its recorded entries and looks): the same function, on the same data, as the runner used. Only entries fail the run.
- **stored baseline** (any other pair of runs, taken at different moments): a **trend view** that informs and never
  fails the run. Each benchmark's rounds are compared with the baseline's (``harness.report.stats``), raw and, for an
  entry in a group with a practical limit, normalized by it; with ``history`` the trend over the stored runs is shown
  (``harness.report.drift``). A change seen here is confirmed or refuted with an A/B run against the baseline's commit.

Roles (``harness.bench_schema``): entries (our code), limits and peers. ``ComparisonResult.sections`` puts every
benchmark in exactly one section; every count that a report prints is the length of one of them.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

import numpy as np

from harness.bench_schema import ENTRY, HIGHER_IS_BETTER_KEY, LIMIT, MODE_AB, PEER, THRESHOLD_KEY, finite_float
from harness.gate import (
    LOOKS,
    LOOKS_RANGE,
    MIN_EFFECT,
    PAIRS_RANGE,
    PROCESS_PAIRS,
    Decision,
    Verdict,
    corrected_level,
    decide,
    pair_values,
    split_pairs,
    whole_within,
)
from harness.report.drift import Drift, find_drift
from harness.report.errors import ReportInputError, shorten
from harness.report.groups import XLimit, group_limits, role, x_limits
from harness.report.load import MIN_SECONDS, BenchmarkRecord, BenchmarkRun, parse_run
from harness.report.machine import machine_id, machine_mismatch
from harness.report.stats import SampleComparison, compare_normalized, compare_records, compare_samples, unit_log_ratios
from harness.report.thresholds import parse_threshold

__all__ = ["DEFAULT_MIN_EFFECT", "DEFAULT_THRESHOLD", "NO_BASELINE_NOTE", "SECTIONS", "BenchmarkComparison",
           "ComparisonResult", "Section", "compare"]

# The note every report carries when there is no baseline (``compare(current, None)``); the bench command prints it too.
NO_BASELINE_NOTE = ("no baseline for machine {machine}: this run can become the baseline without a rerun: "
                    "`nox -s bench -- --promote {run}{partial}` (or rerun with --save-baseline)")
# NO_BASELINE_NOTE's ``partial`` for a run with pytest arguments (RUN_KEY ``selection``): --promote asks for it
PARTIAL_PROMOTE = " --save-partial-baseline"
# The note instead of NO_BASELINE_NOTE when the caller saves this run as the baseline (``compare(saved_baseline=...)``).
SAVED_BASELINE_NOTE = "this run was saved as the baseline of machine {machine}: {path}"
DEFAULT_MIN_EFFECT = MIN_EFFECT
DEFAULT_THRESHOLD = 0.10  # stored-baseline mode: the change beyond which an entry is listed (a marker overrides it)


@dataclass(frozen=True)
class BenchmarkComparison:
    """The verdict and statistics of one benchmark.

    ``role``: ENTRY, LIMIT or PEER (from the current record, else the baseline's). ``current``/``baseline`` are None
    for a new/missing benchmark, and so are the statistics. ``ratio``: current / baseline (A/B: the median per-pair
    ratio; stored: the ratio of medians), ``ci`` its confidence interval, ``p_value``/``test`` the test's.
    ``threshold``: the stored-baseline threshold that applied (the benchmark's own or the default).
    ``x_limit``: the current run's "x limit" of an entry (``harness.report.groups.XLimit``), or None.
    ``normalized_*``: the limit-normalized comparison of stored mode (``normalized_paired``: from paired rounds),
    ``limit_ratio``: current / baseline median of that limit. A/B: ``pairs`` (rounds per side), ``stop`` (why the
    rounds ended, ``harness.paired.engine.STOP_*``), ``detectable`` (the smallest change this run could flag, a
    fraction), ``process_ratios`` (the median per-pair ratio of each process pair, when there were several).
    ``drift``: a cumulative regression over the stored runs, or None.
    """

    fullname: str
    verdict: Verdict
    role: str
    threshold: float
    current: BenchmarkRecord | None
    baseline: BenchmarkRecord | None
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None
    test: str | None = None
    note: str | None = None
    x_limit: XLimit | None = None
    normalized_ratio: float | None = None
    normalized_ci: tuple[float, float] | None = None
    normalized_p_value: float | None = None
    normalized_paired: bool = False
    limit_ratio: float | None = None
    pairs: int | None = None
    stop: str | None = None
    detectable: float | None = None
    process_ratios: tuple[float, ...] | None = None
    drift: Drift | None = None

    @property
    def record(self) -> BenchmarkRecord:
        """The current record if there is one, else the baseline record."""
        record = self.current or self.baseline
        if record is None:
            raise ValueError(f"benchmark {self.fullname!r} has neither a current nor a baseline record")
        return record

    @property
    def is_limit(self) -> bool:
        return self.role == LIMIT

    @property
    def higher_is_better(self) -> bool:
        """True when the benchmark declares a throughput figure (``extra_info['higher_is_better']``)."""
        return bool(self.record.extra_info.get(HIGHER_IS_BETTER_KEY, False))

    @property
    def fails(self) -> bool:
        """True for an entry that regressed in an A/B run: the benchmarks that fail the run (stored mode's verdicts,
        ``pairs`` None, are a trend view and fail nothing)."""
        return self.role == ENTRY and self.verdict is Verdict.REGRESSED and self.pairs is not None


@dataclass(frozen=True)
class Section:
    """One part of every report: ``key`` (also the JSON count's name), ``title``, and its benchmarks."""

    key: str
    title: str
    comparisons: tuple[BenchmarkComparison, ...]


def _section_of(c: BenchmarkComparison) -> str:
    if c.verdict in (Verdict.NEW, Verdict.MISSING, Verdict.UNJUDGED):
        return c.verdict.value
    if c.role != ENTRY:
        return "moved" if c.verdict in (Verdict.REGRESSED, Verdict.IMPROVED) else "unchanged"
    if c.verdict is Verdict.UNCHANGED and c.drift is not None:
        return "drifted"
    return c.verdict.value


# (key, title) of every section in report order; the first two fail the run
SECTIONS = (
    ("regressed", "Regressed"),
    ("drifted", "Drifted (crept up over the stored runs)"),
    ("improved", "Improved"),
    ("moved", "Limits and peers that moved (never fail the run)"),
    ("unjudged", "Not judged: the work changed, or other programs used the CPUs of a multi-threaded benchmark (never "
                 "fail the run)"),
    ("unchanged", "Unchanged"),
    ("new", "New (no baseline to compare with)"),
    ("missing", "Missing (in the baseline only)"),
)


@dataclass(frozen=True)
class ComparisonResult:
    """All verdicts of current vs baseline, ordered by section then fullname, plus run metadata.

    ``mode``: "ab" or "stored". ``warnings``/``notes``: lines every report prints at the top. ``threshold`` (stored
    mode's default), ``min_effect`` (A/B), ``alpha``, ``confidence``: the settings that applied. ``broken``: the
    benchmarks that failed (raised, crashed) on the working tree's side: they fail the run like a regression.
    """

    current: BenchmarkRun
    baseline: BenchmarkRun | None
    comparisons: tuple[BenchmarkComparison, ...]
    warnings: tuple[str, ...]
    threshold: float
    alpha: float
    confidence: float
    notes: tuple[str, ...] = ()
    mode: str = "stored"
    min_effect: float = DEFAULT_MIN_EFFECT
    broken: tuple[str, ...] = ()

    @property
    def sections(self) -> tuple[Section, ...]:
        """Every section (SECTIONS order), each benchmark in exactly one."""
        return tuple(Section(key, title, tuple(c for c in self.comparisons if _section_of(c) == key))
                     for key, title in SECTIONS)

    def counts(self) -> dict[str, int]:
        """Benchmarks per section key, every key present: the one source of every count in every output."""
        return {section.key: len(section.comparisons) for section in self.sections}

    @property
    def failing(self) -> list[BenchmarkComparison]:
        """The entries that fail the run (regressed or drifted)."""
        return [c for c in self.comparisons if c.fails]

    @property
    def failed(self) -> bool:
        """True when an entry regressed or drifted, or a benchmark failed on the working tree."""
        return bool(self.failing or self.broken)

    @property
    def has_limits(self) -> bool:
        """True when some benchmark is a limit or has an "x limit" (the reports then add that column)."""
        return any(c.is_limit or c.x_limit is not None for c in self.comparisons)


def compare(
    current: Mapping[str, Any] | BenchmarkRun,
    baseline: Mapping[str, Any] | BenchmarkRun | None,
    *,
    history: Sequence[BenchmarkRun] = (),
    threshold: float = DEFAULT_THRESHOLD,
    min_effect: float | None = None,
    alpha: float | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    saved_baseline: str | None = None,
) -> ComparisonResult:
    """Compare two pytest-benchmark results (decoded JSON dicts, or runs from ``parse_run``); see the module doc.

    ``baseline=None`` (no baseline stored for the machine): every benchmark is NEW, nothing fails, and the result's
    ``notes`` hold NO_BASELINE_NOTE naming the current run's ``machine_id``. ``history``: earlier runs of the same
    machine, oldest first, for the drift check of stored mode. ``threshold``: stored mode's default fraction a median
    may grow before a significant change counts (a benchmark's ``extra_info['threshold']`` overrides it, current side
    first); ``min_effect``: A/B mode's smallest change worth a verdict, ``alpha``: the tests' level (None: what an
    A/B run recorded, else DEFAULT_MIN_EFFECT and 0.01); ``confidence``:
    the CIs' level; ``n_resamples``/``seed``: the bootstrap's (each benchmark draws from its own generator seeded by
    ``seed`` and its fullname). ``saved_baseline``: where the caller saved ``current`` as the baseline (the notes say
    so). Raises ReportInputError for an invalid document, option or per-benchmark threshold.
    """
    cur = current if isinstance(current, BenchmarkRun) else parse_run(current, "current")
    base = baseline if baseline is None or isinstance(baseline, BenchmarkRun) else parse_run(baseline, "baseline")
    threshold = parse_threshold(threshold, "--threshold")
    before = base if base is not None else replace(cur, source="(no baseline)", benchmarks={}, harness={})
    paired = base is not None and _paired(cur, base)
    min_effect = _recorded(cur, "min_effect", min_effect, DEFAULT_MIN_EFFECT, paired)
    alpha = _recorded(cur, "alpha", alpha, 0.01, paired)
    _check_level(alpha, "--alpha")
    _check_level(confidence, "confidence")
    if not 0.0 <= min_effect < 1.0:
        raise ReportInputError(f"--min-effect must be a fraction in [0, 1), got {min_effect!r}")
    if n_resamples < 100:
        raise ReportInputError(f"n_resamples must be >= 100 for a usable CI, got {n_resamples}")
    settings = _Settings(threshold, min_effect, alpha, confidence, n_resamples, seed)
    names = sorted(set(cur.benchmarks) | set(before.benchmarks))
    replaced: list[str] = []
    if paired:
        level, most_pairs = _run_level(names, cur, before, settings, replaced)
        comparisons = [_ab_one(name, cur, before, settings, level, most_pairs) for name in names]
    else:
        judge_one = _StoredJudge(cur, before, history, settings)
        comparisons = [judge_one(name, cur, before) for name in names]
    keys = [key for key, _ in SECTIONS]
    comparisons.sort(key=lambda c: (keys.index(_section_of(c)), c.fullname))
    return ComparisonResult(
        current=cur,
        baseline=base,
        comparisons=tuple(comparisons),
        warnings=(_warnings(cur, base) if base is not None else ()) + tuple(replaced),
        threshold=threshold,
        alpha=alpha,
        confidence=confidence,
        notes=_notes(cur, base, saved_baseline),
        mode=MODE_AB if paired else "stored",
        min_effect=min_effect,
    )


@dataclass(frozen=True)
class _Settings:
    """The options of ``compare`` that every benchmark's comparison uses."""

    threshold: float
    min_effect: float
    alpha: float
    confidence: float
    n_resamples: int
    seed: int


def _recorded(run: BenchmarkRun, key: str, given: float | None, default: float, paired: bool) -> float:
    """``given``, else (an A/B run) the value the runner recorded under RUN_KEY ``key`` when it is a number, else
    ``default``."""
    if given is not None:
        return given
    value = finite_float(run.harness.get(key)) if paired else None
    return default if value is None else value


def _paired(cur: BenchmarkRun, base: BenchmarkRun) -> bool:
    """True when the runs are the two sides of one A/B run: A as the baseline, B as the current run. Raises
    ReportInputError for A/B files of two different runs, or given the wrong way round."""
    modes = [run.harness.get("mode") for run in (cur, base)]
    if modes != [MODE_AB, MODE_AB]:
        return False
    if cur.harness.get("pairing") != base.harness.get("pairing") or cur.harness.get("pairing") is None:
        raise ReportInputError("the two A/B files come from different A/B runs (their harness.pairing differ): "
                               "compare A.json and B.json of one run")
    if (cur.harness.get("side"), base.harness.get("side")) != ("B", "A"):
        raise ReportInputError("an A/B run is reported with --current B.json (the working tree) and --baseline A.json "
                               f"(the ref); got sides {cur.harness.get('side')!r} and {base.harness.get('side')!r}")
    return True


def _one_sided(name: str, now: BenchmarkRecord | None, before: BenchmarkRecord | None,
               threshold: float) -> BenchmarkComparison:
    record = now or before
    if record is None:
        raise ValueError(f"benchmark {name!r} is on neither side")
    verdict = Verdict.NEW if before is None else Verdict.MISSING
    return BenchmarkComparison(name, verdict, role(record), threshold, current=now, baseline=before)


_MOST_ENTRIES = 10**6  # a larger count is no run's


def _run_level(names: Sequence[str], cur: BenchmarkRun, base: BenchmarkRun, settings: _Settings,
               said: list[str]) -> tuple[float, int]:
    """(the corrected level of each test, the most process pairs a benchmark can have) of an A/B run: ``alpha`` over
    the entries and looks the runner recorded (RUN_KEY ``entries``, ``looks``, ``process_pairs``), each within what
    the files and the runner allow, else over the entries on both sides, LOOKS and PROCESS_PAIRS (``said`` gets a
    warning for each value replaced)."""
    counted = sum(1 for n in names if n in cur.benchmarks and n in base.benchmarks and role(cur.benchmarks[n]) == ENTRY)
    # the runner counts entries before they run: those that skip while running are in the count, not in the files
    entries = _recorded_whole(cur, "entries", (max(1, counted), _MOST_ENTRIES), counted, said)
    looks = _recorded_whole(cur, "looks", LOOKS_RANGE, LOOKS, said)
    pairs = _recorded_whole(cur, "process_pairs", PAIRS_RANGE, PROCESS_PAIRS, said)
    return corrected_level(settings.alpha, max(1, entries), looks), pairs * looks


def _recorded_whole(cur: BenchmarkRun, key: str, bounds: tuple[int, int], default: int, said: list[str]) -> int:
    """The run file's setting ``key`` when it is an integer within ``bounds``, else ``default`` (saying so in
    ``said``: the verdicts are then judged at another level than the run's)."""
    value = cur.harness.get(key)
    if whole_within(value, bounds):
        return value
    said.append(f"the current run file records no usable {key} ({shorten(repr(value), 40)}, expected an integer from "
                f"{bounds[0]} to {bounds[1]}): judged with {default}, so the levels may differ from the run's")
    return default


def _ab_one(name: str, cur: BenchmarkRun, base: BenchmarkRun, settings: _Settings, level: float,
            most_pairs: int) -> BenchmarkComparison:
    """A/B: the verdict of ``harness.gate.decide`` on the benchmark's pair values (see the module doc)."""
    now, before = cur.benchmarks.get(name), base.benchmarks.get(name)
    threshold = _threshold_of(now, before, settings.threshold)
    if now is None or before is None:
        return _one_sided(name, now, before, threshold)
    kind = role(now)
    if (changed := _work_changed(now, before)) is not None:
        return BenchmarkComparison(name, Verdict.UNJUDGED, kind, threshold, now, before, note=changed)
    if role(before) != kind:
        note = f"not judged: its role differs between the sides (A: {role(before)}, B: {kind})"
        return BenchmarkComparison(name, Verdict.UNJUDGED, ENTRY, threshold, now, before, note=note)
    try:
        values = _pair_values(now, before, most_pairs)
        decision: Decision = decide(values, min_effect=settings.min_effect, level=level,
                                    confidence=settings.confidence)
    except ValueError as exc:
        note = f"not judged: its rounds do not split into process pairs ({exc})"
        return BenchmarkComparison(name, Verdict.UNJUDGED, kind, threshold, now, before, note=note)
    return BenchmarkComparison(
        name, decision.verdict, kind, threshold, now, before, ratio=1.0 + decision.change,
        ci=(1.0 + decision.interval[0], 1.0 + decision.interval[1]), p_value=decision.p_value,
        test="t-test across process pairs", note=_ab_note(decision, kind, bool(cur.harness.get("planted"))),
        pairs=decision.pairs, stop=str(now.options.get("stop") or "") or None,
        process_ratios=tuple(float(x) for x in np.exp(values)),
    )


def _pair_values(now: BenchmarkRecord, before: BenchmarkRecord, most_pairs: int) -> np.ndarray:
    """The pair values of an A/B benchmark from both records (``stats.data`` and options ``pair_rounds``). Raises
    ValueError when the two sides' process pairs or rounds do not match, there are more pairs than the run could take
    (``most_pairs``) or the data is missing; ReportInputError for a round of (nearly) 0 s, which no timer gives."""
    layout = now.options.get("pair_rounds")
    if layout != before.options.get("pair_rounds"):
        raise ValueError("the two sides' options.pair_rounds differ")
    if not isinstance(layout, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in layout):
        raise ValueError(f"options.pair_rounds must be a list of round counts, got {shorten(repr(layout), 60)}")
    if len(layout) > most_pairs:
        raise ValueError(f"{len(layout)} process pairs, more than the run's process pairs x looks ({most_pairs})")
    if now.data is None or before.data is None:
        raise ValueError("no per-round data on one side")
    for data in (now.data, before.data):
        if float(data.min()) < MIN_SECONDS:
            raise ReportInputError(f"{now.fullname}: a round of {float(data.min())!r} s in an A/B run file: no timer "
                                   "gives that; is the file corrupt?")
    return pair_values(split_pairs(list(before.data), layout), split_pairs(list(now.data), layout))


def _work_changed(now: BenchmarkRecord, before: BenchmarkRecord) -> str | None:
    """Why a benchmark is not judged, or None: one call does other work on the two sides (``work_change``: a
    problem size the benchmark changed), so its times measure different things."""
    change = now.work_change(before)
    return None if change is None else f"not judged: the work changed ({change}), so the times are not comparable"


def _ab_note(decision: Decision, kind: str, planted: bool) -> str:
    """The note of an A/B verdict: the decision's reason, and for a limit or peer that moved, why it moved."""
    if kind != ENTRY and decision.verdict in (Verdict.REGRESSED, Verdict.IMPROVED):
        why = ("the planted slowdown stretched its rounds too" if planted else
               "the same code on both sides, so the two environments or processes differ")
        return f"a {kind} moved: {why} (never fails the run)"
    return decision.reason


class _StoredJudge:
    """Stored mode's verdict of each benchmark (see the module doc), with what every benchmark shares computed once."""

    def __init__(self, cur: BenchmarkRun, base: BenchmarkRun, history: Sequence[BenchmarkRun],
                 settings: _Settings) -> None:
        self.settings, self.cur = settings, cur
        self.x_limits = x_limits(cur)
        self.limits = group_limits(cur)
        self.trend = [*history, cur] if history else []
        self.trend_limits = [x_limits(run) for run in history] + [self.x_limits] if history else []

    def __call__(self, name: str, cur: BenchmarkRun, base: BenchmarkRun) -> BenchmarkComparison:
        now, before = cur.benchmarks.get(name), base.benchmarks.get(name)
        threshold = _threshold_of(now, before, self.settings.threshold)
        if now is None or before is None:
            return replace(_one_sided(name, now, before, threshold), x_limit=self.x_limits.get(name))
        if (changed := _work_changed(now, before)) is not None:
            return BenchmarkComparison(name, Verdict.UNJUDGED, role(now), threshold, now, before, note=changed,
                                       x_limit=self.x_limits.get(name))
        rng = np.random.default_rng([self.settings.seed, int.from_bytes(hashlib.sha256(name.encode()).digest()[:8],
                                                                         "little")])
        options = partial(_with_options, threshold=threshold, settings=self.settings, rng=rng)
        raw = options(compare_records, now, before)
        kind = role(now)
        verdict, notes = raw.verdict, [raw.note] if raw.note else []
        found: dict[str, Any] = {}
        if kind == ENTRY:
            verdict = self._normalized(now, before, base, raw, options, threshold, notes, found)
        else:
            notes += _moved_note(kind, raw)
        drift = None
        if kind == ENTRY and self.trend:
            drift = find_drift(self.trend, self.trend_limits, name, threshold=threshold)
        x_limit = self.x_limits.get(name)
        if x_limit is not None and x_limit.ratio < 1.0:
            notes.append(_faster_than_limit(x_limit))
        return BenchmarkComparison(
            name, verdict, kind, threshold, current=now, baseline=before, ratio=raw.ratio, ci=raw.ci,
            p_value=raw.p_value, test=raw.test, note="; ".join(notes) or None, x_limit=x_limit, drift=drift, **found,
        )

    def _normalized(self, now: BenchmarkRecord, before: BenchmarkRecord, base: BenchmarkRun, raw: SampleComparison,
                    options: Callable[..., Any], threshold: float, notes: list[str], found: dict[str, Any]) -> Verdict:
        """The entry's verdict after its limit-normalized comparison (filled into ``found``), if it has a limit
        that did the same work on both sides."""
        if (changed := self._limit_work_change(now, base)) is not None:
            notes.append(f"its limit's work changed ({changed}): raw comparison only")
            return raw.verdict
        if _both_paired(now, before):
            ratios_now = _unit_ratios(now.data, now.paired_limit_data)  # type: ignore[arg-type]
            ratios_before = _unit_ratios(before.data, before.paired_limit_data)  # type: ignore[arg-type]
            normalized = options(compare_samples, ratios_now, ratios_before)
            limit_now = float(np.median(now.paired_limit_data))  # type: ignore[arg-type]
            limit_before = float(np.median(before.paired_limit_data))  # type: ignore[arg-type]
            found["normalized_paired"] = True
        else:
            limit = self.limits.get(now.group) if now.group is not None else None
            limit_old = base.benchmarks.get(limit.fullname) if limit is not None else None
            if limit is None:
                return raw.verdict
            if limit_old is None:
                notes.append(f"its group's limit {limit.fullname!r} is not in the baseline: raw comparison only")
                return raw.verdict
            normalized = options(compare_normalized, now, before, limit, limit_old)
            if normalized is None:
                notes.append("no per-round data for the limit-normalized comparison: raw comparison only")
                return raw.verdict
            limit_now, limit_before = limit.median, limit_old.median
        found.update(normalized_ratio=normalized.ratio, normalized_ci=normalized.ci,
                     normalized_p_value=normalized.p_value, limit_ratio=limit_now / limit_before)
        verdict, agreement = _agree(raw, normalized, limit_now / limit_before, threshold)
        notes += agreement
        return verdict


    def _limit_work_change(self, now: BenchmarkRecord, base: BenchmarkRun) -> str | None:
        """How the work of the limit ``now`` is normalized by (the one timed beside it, else its group's) changed
        since ``base``, or None."""
        limit = self.limits.get(now.group) if now.group is not None else None
        name = now.paired_limit or (limit.fullname if limit is not None else None)
        limit_now, limit_before = self.cur.benchmarks.get(name or ""), base.benchmarks.get(name or "")
        return limit_now.work_change(limit_before) if limit_now and limit_before else None


def _unit_ratios(entry: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Entry / limit per unit of four rounds (entry, limit, limit, entry: ``unit_log_ratios``), where the rounds come
    in whole units (an even count of at least 4 per side); else per pair. A limit round right after an entry round
    can run slower than one right after another limit round (its caches are cold: measured 1.5x for a 0.2 ms numpy
    add beside a 50 ms emulated kernel), which makes per-pair ratios alternate; a unit holds one pair of each order."""
    if entry.size >= 4 and entry.size % 2 == 0:
        return np.exp(unit_log_ratios(limit, entry))
    return entry / limit


def _both_paired(now: BenchmarkRecord, before: BenchmarkRecord) -> bool:
    return all(r.paired_limit_data is not None and r.data is not None for r in (now, before)) and \
        now.paired_limit == before.paired_limit


_Result = TypeVar("_Result")


def _with_options(
    function: Callable[..., _Result], *records: Any, threshold: float, settings: _Settings, rng: np.random.Generator,
) -> _Result:
    """``function(*records, ...)`` with the comparison options of ``settings`` and this benchmark's threshold/rng."""
    return function(*records, threshold=threshold, alpha=settings.alpha, confidence=settings.confidence,
                    n_resamples=settings.n_resamples, rng=rng)


def _moved_note(kind: str, raw: SampleComparison) -> list[str]:
    """The label of a limit or peer that moved: it is not our code, so it never fails the run."""
    what = "the machine" if kind == LIMIT else "the peer" if kind == PEER else kind
    if raw.verdict is Verdict.REGRESSED:
        return [f"{kind} moved: {what} was x{raw.ratio:.2f} slower (never fails the run)"]
    if raw.verdict is Verdict.IMPROVED:
        return [f"{kind} moved: {what} was x{1.0 / raw.ratio:.2f} faster (never fails the run)"]
    return []


def _faster_than_limit(x_limit: XLimit) -> str:
    """Why an entry can beat its own limit: the limit is a reference way of doing the same work, not a proof of the
    fastest way (e.g. numpy.copyto pays for its dispatch where a raw memmove does not)."""
    how = "in rounds taken beside it" if x_limit.paired else "its limit was measured at another moment"
    return (f"faster than its limit ({x_limit.ratio:.2f}x, {how}): the limit is a reference implementation of the "
            "same work, not a bound this entry cannot beat")


def _agree(
    raw: SampleComparison, normalized: SampleComparison, limit_ratio: float, threshold: float
) -> tuple[Verdict, list[str]]:
    """The verdict of an entry from its raw and limit-normalized comparisons (both must agree), and a note saying why
    when they do not: the other ratio stayed within the threshold (the limit moved with the entry, or moved alone),
    or it went the same way without being conclusive (p-value or CI). One exception: a change whose other ratio goes
    the same way beyond the threshold without being conclusive stands when the limit did not move (its median within
    a tenth of the threshold): the machine was not slower, and what left the other comparison open is noise of its
    own. Raw: the limit's round-to-round noise (a 3 ms numpy limit beside a 0.3 s entry); normalized: an entry of two
    modes, whose median falls between them and whose bootstrap CI spans both (a PYTHON compile at 0.09 and 0.15 ms,
    CI [0.87, 1.80] of a planted x1.25 that the ratio to its limit beside each round holds to [1.23, 1.27])."""
    if raw.verdict is normalized.verdict:
        return raw.verdict, []
    numbers = f"limit x{limit_ratio:.3f}, raw x{raw.ratio:.3f}, normalized x{normalized.ratio:.3f}"
    moved, other, kind, other_kind = (raw, normalized, "raw", "normalized") if raw.verdict is not Verdict.UNCHANGED \
        else (normalized, raw, "normalized", "raw")
    if _beyond(other.ratio, moved.verdict, threshold) and abs(math.log(limit_ratio)) <= math.log1p(threshold / 10):
        return moved.verdict, [f"{kind} {moved.verdict.value}; the {other_kind} comparison is not conclusive but goes "
                               f"the same way and the limit did not move ({numbers})"]
    if 1.0 / (1.0 + threshold) <= other.ratio <= 1.0 + threshold:
        why = "machine-wide change: the limit moved too" if kind == "raw" else "the limit moved, the benchmark did not"
    else:
        ci = "–" if other.ci is None else f"[{other.ci[0]:.3f}, {other.ci[1]:.3f}]"
        why = f"the {other_kind} comparison is not conclusive (p={other.p_value:.2g}, CI {ci})"
    return Verdict.UNCHANGED, [f"{kind} {moved.verdict.value} only: {why} ({numbers}), so no verdict"]


def _beyond(ratio: float, verdict: Verdict, threshold: float) -> bool:
    """True when ``ratio`` is beyond the threshold the way ``verdict`` (regressed or improved) goes."""
    return ratio > 1.0 + threshold if verdict is Verdict.REGRESSED else ratio < 1.0 / (1.0 + threshold)


def _threshold_of(now: BenchmarkRecord | None, before: BenchmarkRecord | None, default: float) -> float:
    for record in (now, before):
        if record is not None and record.extra_info.get(THRESHOLD_KEY) is not None:
            return parse_threshold(record.extra_info[THRESHOLD_KEY], f"benchmark {record.fullname!r} extra_info")
    return default


def _check_level(value: float, name: str) -> None:
    if not 0.0 < value < 1.0:
        raise ReportInputError(f"{name} must be a probability strictly between 0 and 1, got {value!r}")


def _notes(cur: BenchmarkRun, base: BenchmarkRun | None, saved_baseline: str | None) -> tuple[str, ...]:
    machine = machine_id(cur.machine_info)
    notes = []
    if saved_baseline is not None:
        notes.append(SAVED_BASELINE_NOTE.format(machine=machine, path=saved_baseline))
    elif base is None:
        partial = PARTIAL_PROMOTE if cur.harness.get("selection") else ""
        run = cur.source if cur.source.endswith(".json") else "reports/runs/<this run's file>.json"
        notes.append(NO_BASELINE_NOTE.format(machine=machine, run=run, partial=partial))
    planted = cur.harness.get("planted")
    if planted:
        notes.append(f"planted slowdown: every round of the working tree was stretched x{planted} (--plant-slowdown), "
                     "so every entry should be flagged regressed")
    return tuple(notes)


def _warnings(cur: BenchmarkRun, base: BenchmarkRun) -> tuple[str, ...]:
    found = list(cur.harness.get("warnings") or [])
    machines = machine_mismatch(cur.machine_info, base.machine_info)
    if machines:
        found.append(machines)
    if cur.major_version != base.major_version:
        found.append(
            f"current was written by pytest-benchmark {cur.version} and baseline by {base.version}; "
            "statistics are compared as if equivalent"
        )
    return tuple(str(w) for w in found)
