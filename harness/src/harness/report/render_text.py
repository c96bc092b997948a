"""The short terminal summary printed after the reports are written."""

from __future__ import annotations

from harness.report import formatting as fmt
from harness.report.compare import BenchmarkComparison, ComparisonResult


def render_text(result: ComparisonResult) -> str:
    """Warnings, notes, one status line with every section's count, one line per benchmark that fails the run,
    moved (regressed, drifted, improved; limits and peers labelled by role) or was not judged, then the natural-unit
    figures of each group with a practical limit or figures (and each entry's 'x limit')."""
    if result.mode == "ab":
        return _ab(result)
    lines = [f"WARNING: {w}" for w in result.warnings] + [f"NOTE: {n}" for n in result.notes]
    status = "NO BASELINE" if result.baseline is None else "TREND (no gate)"
    lines.append(f"benchmark report ({'A/B' if result.mode == 'ab' else 'stored baseline'}): {status}: "
                 f"{fmt.summary(result)}")
    for section in result.sections:
        if section.key not in ("regressed", "drifted", "improved", "moved", "unjudged"):
            continue
        for c in section.comparisons:
            label = (c.role if section.key == "moved" else section.key).upper()
            lines.append(f"  {label:9} {fmt.short_name(c.fullname)}  {_numbers(result, c)}")
    lines += _group_figures(result)
    return "\n".join(lines)


def _numbers(result: ComparisonResult, c: BenchmarkComparison) -> str:
    vs_limit = f" vs limit {fmt.normalized(c)}" if c.normalized_ratio is not None else ""
    text = (f"{fmt.ratio(c.ratio)} CI {fmt.interval(c.ci)}{vs_limit} p={fmt.p_value(c.p_value)} "
            f"(threshold {fmt.percent(c.threshold)})")
    extra = fmt.drift(c) or (c.note if (c.role != "entry" or c.verdict.value == "unjudged") and c.note else "")
    return text + (f": {extra}" if extra else "")


def _group_figures(result: ComparisonResult) -> list[str]:
    rows = fmt.group_figures(result)
    if not rows:
        return []
    name_width = max(len(name) for _, name, _, _ in rows)
    figure_width = max(len(figure) for _, _, figure, _ in rows)
    legend = " (x limit = entry time / its limit's time, rounds side by side; * = limit timed apart)" if result.has_limits else ""
    lines = [f"figures by group{legend}:"]
    previous = None
    for group, name, figure, x in rows:
        if group != previous:
            lines.append(f"  {group}")
            previous = group
        limit = "" if x == "–" else x if x in ("limit", "peer") else f"{x} limit"
        lines.append(f"    {name:<{name_width}}  {figure:>{figure_width}}  {limit}".rstrip())
    return lines


def _ab(result: ComparisonResult) -> str:
    """The verdict, the sides, then one line per benchmark that is not plainly unchanged, slowest first."""
    lines = [f"WARNING: {w}" for w in result.warnings] + [f"NOTE: {n}" for n in result.notes]
    lines.append(f"benchmark report (A/B): {fmt.headline(result)}")
    lines.append("  " + ", ".join(f"{label} = {text}" for label, text in fmt.sides(result)))
    _, rows, _ = fmt.ab_table(result)
    shown = [r for r in rows if not r[3].startswith("unchanged")]
    width = max((len(r[0]) for r in shown), default=0)
    for name, change, interval, verdict, a, b, _, note in shown:
        lines.append(f"  {verdict.upper():<22} {name:<{width}}  {change:>7} {interval:<18} A {a}  B {b}"
                     + (f"  ({note})" if note else ""))
    unchanged = sum(1 for r in rows if r[3].startswith("unchanged"))
    if unchanged:
        lines.append(f"  {unchanged} unchanged benchmark{'' if unchanged == 1 else 's'} not listed; the table of "
                     "every benchmark is in report.md and report.html")
    return "\n".join(lines)
