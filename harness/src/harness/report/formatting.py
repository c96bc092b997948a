"""Text forms of the numbers and metadata that every renderer shows (plain text; renderers escape it)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.bench_schema import (
    ENTRY,
    HIGHER_IS_BETTER_KEY,
    LIMIT_KEY,
    MODE_AB,
    SINGLE_THREAD_ENV,
    THREADS_KEY,
    THRESHOLD_KEY,
    UNIT_KEY,
    VALUE_KEY,
    WORK_KEYS,
    short_name,
)
from harness.report.compare import SECTIONS, BenchmarkComparison, ComparisonResult
from harness.report.groups import median_seconds, natural_figure, record_figure
from harness.report.load import BenchmarkRun
from harness.report.machine import machine_fields

_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
# extra_info keys shown by their own column or section, not in the generic 'figures' list
_SHOWN_ELSEWHERE = {THRESHOLD_KEY, HIGHER_IS_BETTER_KEY, LIMIT_KEY, UNIT_KEY, VALUE_KEY}


def time_unit(value: float) -> tuple[float, str]:
    """(scale, unit) of the largest unit that ``value`` seconds reaches, ns at the least: 0.00123 -> (1e-3, 'ms')."""
    for scale, unit in _UNITS:
        if abs(value) >= scale:
            return scale, unit
    return _UNITS[-1]


def seconds(value: float | None) -> str:
    """A time in seconds with 3 significant digits in its unit: 0.00123 -> '1.23 ms'."""
    if value is None:
        return "–"
    scale, unit = time_unit(value)
    return f"{value / scale:.3g} {unit}"


def ratio(value: float | None) -> str:
    """A ratio of medians as 'x1.234'."""
    return "–" if value is None else f"x{value:.3f}"


def interval(ci: tuple[float, float] | None) -> str:
    """A CI of the ratio as '[1.201, 1.298]'; 'n/a' when a bound is NaN (resampled medians of 0 s on both sides)."""
    if ci is None:
        return "–"
    return "n/a" if math.isnan(ci[0]) or math.isnan(ci[1]) else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def p_value(value: float | None) -> str:
    """A p-value with 2 significant digits, 'n/a' when it could not be computed."""
    if value is None:
        return "–"
    return "n/a" if math.isnan(value) else f"{value:.2g}"


def percent(fraction: float) -> str:
    """0.25 -> '25%'."""
    return f"{fraction * 100:.4g}%"


# Column of the limit-normalized ratio and its CI in the verdict tables (see ``normalized``)
NORMALIZED_HEAD = "ratio vs limit [CI]"
X_LIMIT_LEGEND = (
    "x limit: how many times slower than its group's practical limit an entry ran in this run (1.80x = 1.8 times "
    "slower): the median of its rounds each divided by the limit round taken right beside it; marked * when the limit "
    "was measured at another moment (its median). A limit's own row shows the median of all its rounds, pooled over "
    "every entry it was timed beside, so an entry's figures and its x limit can point different ways; below 1x "
    "the entry beat the limit (another thread count, or the limit's own noise)"
)


GATE_DOC = "docs/benchmark-gate.md"  # the gate's design, from the repository root
AB_METHOD = ("Each benchmark ran in fresh process pairs (A and B rounds interleaved), each pair gave one number, and a "
             "t-test across the pairs decided at a level corrected for the run's entries (limits and peers are timed "
             "only with --references): see docs/benchmark-gate.md.")


def headline(result: ComparisonResult) -> str:
    """A/B: 'FAIL: 2 of 53 entries regressed' or 'PASS: no entry regressed (50 unchanged, 1 improved, 2 not judged)';
    stored: 'TREND: 3 entries slower than the baseline (no gate)'; 'NO BASELINE, 5 new' (counts from the sections)."""
    counts = result.counts()
    if result.baseline is None:
        return f"NO BASELINE, {counts['new']} new"
    entries = [c for c in result.comparisons if c.role == ENTRY]
    if result.broken:
        return (f"FAIL: {len(result.broken)} benchmark(s) failed on B (the working tree), "
                f"{len(result.failing)} of {len(entries)} entries regressed")
    if result.mode != MODE_AB:
        slower = sum(1 for c in entries if c.verdict.value == "regressed" or c.drift is not None)
        return f"TREND: {slower} of {len(entries)} entries slower than the baseline (a trend view: no gate)"
    if result.failed:
        return f"FAIL: {len(result.failing)} of {len(entries)} entries regressed"
    rest = ", ".join(f"{counts[key]} {SECTION_SHORT[key]}" for key in ("unchanged", "improved", "unjudged", "new",
                                                                       "missing") if counts[key])
    return f"PASS: no entry regressed ({rest})"


def sides(result: ComparisonResult) -> list[tuple[str, str]]:
    """A/B: [('A', 'HEAD~1 (37a08e2053b1)'), ('B', 'working tree (72c68d134f14, uncommitted changes)')]: each side as
    the user named it, with its commit."""
    out = []
    for label, run in (("A", result.baseline), ("B", result.current)):
        info = run.commit_info if run is not None else {}
        name = str(info.get("ref") or (run.harness.get("ref") if run is not None and label == "A" else "") or
                   ("working tree" if label == "B" else "?"))
        extra = ", uncommitted changes" if info.get("dirty") else ""
        out.append((label, f"{name} ({str(info.get('id') or '?')[:12]}{extra})"))
    return out


def change(c: BenchmarkComparison) -> str:
    """The change of B against A in percent, '+5.1%' (slower) or '-2.0%', '–' without one."""
    return "–" if c.ratio is None else f"{(c.ratio - 1) * 100:+.1f}%"


def change_interval(c: BenchmarkComparison) -> str:
    """The change's interval in percent, '[+4.0%, +6.2%]', '–' without one."""
    if c.ci is None or not all(math.isfinite(x) for x in c.ci):
        return "–"
    return f"[{(c.ci[0] - 1) * 100:+.1f}%, {(c.ci[1] - 1) * 100:+.1f}%]"


def verdict_word(c: BenchmarkComparison) -> str:
    """'regressed', 'improved', 'unchanged', 'not judged', 'new' or 'missing', with the role for a limit or peer."""
    word = "not judged" if c.verdict.value == "unjudged" else c.verdict.value
    return word if c.role == ENTRY else f"{word} ({c.role})"


def ab_table(result: ComparisonResult) -> tuple[list[str], list[list[str]], frozenset[int]]:
    """(header, rows, numeric columns) of the A/B report's one table: every benchmark, sorted by change (slowest
    first; those without a change, then new and missing, last), with its figure on A and B from its own rounds."""
    def key(c: BenchmarkComparison) -> tuple[int, float, str]:
        rank = 0 if c.ratio is not None else 1 if c.current and c.baseline else 2
        return rank, -(c.ratio or 0.0), c.fullname

    head = ["benchmark", "time change (+ = B slower)", f"{result.confidence:.0%} interval", "verdict", "A", "B", "pairs",
            "note"]
    rows = []
    for c in sorted(result.comparisons, key=key):
        note = "" if c.verdict.value == "unchanged" and c.role == ENTRY else (c.note or "")
        rows.append([short_name(c.fullname), change(c), change_interval(c), verdict_word(c), _figure(c.baseline),
                     _b_figure(c), str(c.pairs or "–"), note])
    return head, rows, frozenset({1, 4, 5, 6})


def _b_figure(c: BenchmarkComparison) -> str:
    """B's figure: A's median time scaled by the judged change (so the two figures and the change agree), else B's
    own rounds."""
    if c.baseline is None or c.ratio is None or c.current is None:
        return _figure(c.current)
    judged = median_seconds(c.baseline) * c.ratio
    return record_figure(c.current, judged) or seconds(judged)


def _figure(record: Any) -> str:
    """A side's figure in the benchmark's unit from its rounds, else its median time."""
    if record is None:
        return "–"
    return record_figure(record) or seconds(median_seconds(record))


def summary(result: ComparisonResult) -> str:
    """One line of every section's count: '2 regressed, 0 drifted, 1 improved, 3 limits/peers moved, ...' (the
    "not judged" count only when some benchmark was not)."""
    counts = result.counts()
    return ", ".join(f"{counts[key]} {SECTION_SHORT[key]}" for key, _ in SECTIONS if counts[key] or key != "unjudged")


# the short name of each section in summary lines and count tables
SECTION_SHORT = {key: {"moved": "limits/peers moved", "unjudged": "not judged"}.get(key, key) for key, _ in SECTIONS}


def method(result: ComparisonResult, history_runs: int) -> str:
    """The sentences under the summary counts: how this report's verdicts were decided."""
    if result.baseline is None:
        return f"No baseline: every benchmark is new and nothing is judged; {history_runs} history run(s)."
    if result.mode == MODE_AB:
        return AB_METHOD
    return (
        "Trend view (informs, never fails the run; an A/B run decides: docs/benchmark-gate.md). "
        f"Slower/faster: the ratio current/baseline median is beyond the threshold (default "
        f"{percent(result.threshold)}), significant at {result.alpha:g} (two-sided Mann-Whitney U on per-round times) "
        f"and its {result.confidence:.0%} bootstrap CI lies entirely beyond 1. An entry in a group with a practical "
        "limit must pass this both raw and normalized by the limit (per-round ratios to the limit round taken beside "
        "it), else it is unchanged: a change that moves the limit too is the machine's. Drifted: its level crept up "
        "beyond the threshold over the stored runs (Theil-Sen trend, over the runs of the same work). A benchmark "
        f"whose work ({', '.join(WORK_KEYS)}) changed is not judged, and an entry whose limit's work changed is "
        f"compared raw only; {history_runs} history run(s)."
    )


def normalized(comparison: BenchmarkComparison) -> str:
    """The limit-normalized ratio and its CI, 'x1.020 [0.951, 1.090]', or '–' without one."""
    if comparison.normalized_ratio is None:
        return "–"
    return f"{ratio(comparison.normalized_ratio)} {interval(comparison.normalized_ci)}"


def threads(run: BenchmarkRun) -> str:
    """The BLAS/OpenMP thread variables the run recorded (``harness.bench_schema.THREADS_KEY``), e.g.
    '1 (OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1, MKL_NUM_THREADS=1): numpy limits single-threaded like the CPU
    backend'; 'not recorded' for a run without them."""
    found = run.machine_info.get(THREADS_KEY)
    if not isinstance(found, Mapping):
        return "not recorded"
    values = ", ".join(f"{name}={found.get(name) or 'unset'}" for name in SINGLE_THREAD_ENV)
    if all(found.get(name) == "1" for name in SINGLE_THREAD_ENV):
        return f"1 ({values}): numpy/BLAS limits single-threaded, like the CPU backend's kernels"
    return f"library default or as set ({values}): multi-threaded limits are noisy on a loaded machine"


def run_rows(result: ComparisonResult) -> list[tuple[str, str, str]]:
    """(label, current, baseline) rows describing both runs; baseline cells are '' without a baseline."""
    describe: tuple[tuple[str, Callable[[BenchmarkRun], str]], ...] = (
        ("commit", commit),
        ("datetime", lambda run: run.datetime.isoformat()),
        ("machine", machine),
        ("runtime", runtime),
        ("BLAS/OpenMP threads", threads),
        ("pytest-benchmark", lambda run: run.version),
        ("file", lambda run: run.source),
    )
    base = result.baseline
    return [(label, text(result.current), text(base) if base else "") for label, text in describe]


def x_limit(comparison: BenchmarkComparison) -> str:
    """The 'x limit' cell: '1.80x' (paired: median of per-round ratios to the limit round beside it), '1.80x*' (the
    limit measured at another moment), 'limit' for a limit, else '–'."""
    x = comparison.x_limit
    if x is not None:
        return f"{x.ratio:.2f}x" + ("" if x.paired else "*")
    return "limit" if comparison.is_limit and comparison.current else "–"


def role(comparison: BenchmarkComparison) -> str:
    """The role cell: 'entry', 'limit' or 'peer'."""
    return comparison.role


def drift(comparison: BenchmarkComparison) -> str:
    """'crept up x1.18 (x limit) over 7 runs, <first> .. <last>', or ''."""
    d = comparison.drift
    if d is None:
        return ""
    return (f"crept up x{d.ratio:.3f} ({d.measure}) over {d.runs} runs, {d.first_at:%Y-%m-%d %H:%M} ({d.first}) .. "
            f"{d.last_at:%Y-%m-%d %H:%M} ({d.last})")


def natural(comparison: BenchmarkComparison, other: str = "baseline") -> str:
    """The natural-unit figure, '12.3 GB/s (baseline 12.1 GB/s)', or '' when the benchmark reports none; ``other``
    names the compared side ('A' in A/B mode)."""
    now = natural_figure(comparison.current.extra_info) if comparison.current else None
    before = natural_figure(comparison.baseline.extra_info) if comparison.baseline else None
    if now is None and before is None:
        return ""
    return (now or "–") + (f" ({other} {before})" if before is not None else "")


def group_figures(result: ComparisonResult) -> list[tuple[str, str, str, str]]:
    """Stored mode's figures: (group, short name, natural figure, x limit) of every current benchmark in a group where
    some entry reports a natural figure or is a limit; ordered by group, the limit entries first, then by name. (An
    A/B report shows each side's figure in its one table, from the rounds its verdict used.)"""
    shown = {
        c.record.group
        for c in result.comparisons
        if c.current and c.record.group is not None and (c.is_limit or natural_figure(c.current.extra_info))
    }
    rows = [c for c in result.comparisons if c.current and c.record.group in shown]
    rows.sort(key=lambda c: (str(c.record.group), not c.is_limit, c.fullname))
    return [(str(c.record.group), short_name(c.fullname), natural(c) or "–", x_limit(c)) for c in rows]


def other_side(result: ComparisonResult) -> str:
    """What the reports call the compared run: 'A' (the git ref) in A/B mode, else 'baseline'."""
    return "A" if result.mode == MODE_AB else "baseline"


def figures(comparison: BenchmarkComparison, other: str = "baseline") -> str:
    """The natural-unit figure (see ``natural``), then the other numeric ``extra_info`` entries, 'name=current
    (baseline)'; for those the keys are the units by convention, and a key named like the natural figure's unit is
    left out (it repeats the figure)."""
    now = _numeric(comparison.current.extra_info) if comparison.current else {}
    before = _numeric(comparison.baseline.extra_info) if comparison.baseline else {}
    parts = [natural(comparison, other)] if natural(comparison) else []
    for record in (comparison.current, comparison.baseline):
        if record is not None and natural_figure(record.extra_info):  # a key named by the unit repeats the figure
            now.pop(str(record.extra_info[UNIT_KEY]), None)
            before.pop(str(record.extra_info[UNIT_KEY]), None)
    for key in sorted(set(now) | set(before)):
        text = f"{key}={_num(now[key])}" if key in now else f"{key}=–"
        if key in before:
            text += f" ({other} {_num(before[key])})"
        parts.append(text)
    if comparison.higher_is_better:
        parts.append("higher is better (verdict on time)")
    return "; ".join(parts)


def commit(run: BenchmarkRun) -> str:
    """'<id[:12]> (<ref as given>)' or '<id[:12]> on <branch>', ', dirty' when it had uncommitted changes."""
    info = run.commit_info
    where = f"({info['ref']})" if info.get("ref") else f"on {info.get('branch') or '?'}"
    return f"{str(info.get('id') or '?')[:12]} {where}" + (", dirty" if info.get("dirty") else "")


def machine(run: BenchmarkRun) -> str:
    """'node / cpu / machine, system release, Python version' from machine_info."""
    fields = machine_fields(run.machine_info)
    info = run.machine_info
    head = " / ".join(fields[k] or "?" for k in ("node", "cpu", "machine"))
    return f"{head}, {info.get('system', '?')} {info.get('release', '')}".rstrip() + (
        f", Python {info.get('python_version', '?')}"
    )


def runtime(run: BenchmarkRun) -> str:
    """The ``machine_info['runtime']`` facts (``harness.machine_info.machine_facts``) in one line, e.g.
    'GPU NVIDIA H200, 550.54 (CUDA 12.4); CC=clang (Ubuntu clang version 18.1.3); numpy 2.1.0; 16 cores, 125.8 GiB';
    'not recorded' when the run has none (the harness's machine-info hook was not active)."""
    facts = run.machine_info.get("runtime")
    if not isinstance(facts, Mapping):
        return "not recorded"
    gpu = f"GPU {facts['gpu']}" if facts.get("gpu") else "no GPU"
    if facts.get("cuda"):
        gpu += f" (CUDA {facts['cuda']})"
    cc = str(facts.get("cc") or "?")
    version = facts.get(cc) if cc in ("clang", "gcc") else None  # machine_facts asks only these two for a version
    memory = facts.get("memory_bytes")
    size = f"{memory / 2**30:.1f} GiB" if isinstance(memory, (int, float)) else "? GiB"
    cc_text = f"CC={cc}" + (f" ({version})" if version else "")
    return f"{gpu}; {cc_text}; numpy {facts.get('numpy', '?')}; {facts.get('cpu_count', '?')} cores, {size}"


def _numeric(extra_info: Mapping[str, Any]) -> dict[str, float]:
    return {
        str(k): _as_float(v)
        for k, v in extra_info.items()
        if k not in _SHOWN_ELSEWHERE and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _as_float(value: float) -> float:
    """``float(value)``, or an infinity of its sign for an integer too large for a float (JSON allows any length)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _num(value: float) -> str:
    return f"{value:.4g}"


def table(key: str, comparisons: Sequence[BenchmarkComparison],
          result: ComparisonResult) -> tuple[list[str], list[list[str]], frozenset[int]]:
    """(header, rows, indexes of numeric columns) of one section's table, as plain text for every renderer."""
    other = other_side(result)

    def notes(c: BenchmarkComparison) -> str:
        return _notes(c, other)

    if key == "new":
        columns = [("benchmark", False, _name), ("role", False, role),
                   ("current median", True, lambda c: seconds(c.record.median)),
                   ("rounds", True, lambda c: str(c.record.rounds))]
        if result.has_limits:
            columns.append(("x limit", True, x_limit))
        columns.append(("figures", False, lambda c: figures(c, other)))
    elif key == "missing":
        columns = [("benchmark", False, _name), ("role", False, role),
                   ("baseline median", True, lambda c: seconds(c.record.median)),
                   ("rounds", True, lambda c: str(c.record.rounds))]
    else:
        columns = [("benchmark", False, _name), ("role", False, role),
                   ("baseline median", True, lambda c: seconds(c.baseline.median if c.baseline else None)),
                   ("current median", True, lambda c: seconds(c.current.median if c.current else None)),
                   ("ratio", True, lambda c: ratio(c.ratio)), ("CI", False, lambda c: interval(c.ci)),
                   ("p-value", True, lambda c: p_value(c.p_value))]
        if result.has_limits:
            columns += [("x limit", True, x_limit), (NORMALIZED_HEAD, False, normalized)]
        columns += [("threshold", True, lambda c: percent(c.threshold)), ("notes", False, notes)]
    head = [name for name, _, _ in columns]
    rows = [[cell(c) for _, _, cell in columns] for c in comparisons]
    return head, rows, frozenset(i for i, (_, numeric, _) in enumerate(columns) if numeric)


def _name(comparison: BenchmarkComparison) -> str:
    return comparison.fullname


def _notes(comparison: BenchmarkComparison, other: str) -> str:
    return "; ".join(text for text in (drift(comparison), figures(comparison, other), comparison.note or "") if text)
