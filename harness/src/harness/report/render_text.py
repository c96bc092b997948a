"""The short terminal summary printed after the reports are written."""

from __future__ import annotations

from harness.report import formatting as fmt
from harness.report.compare import VERDICT_ORDER, ComparisonResult
from harness.report.stats import Verdict


def render_text(result: ComparisonResult) -> str:
    """Warnings, notes, one status line with the counts (and how many limit entries moved), one line per regressed or
    improved benchmark (a limit entry labelled LIMIT, with its note; a device entry with its ratio relative to the
    limit), then the natural-unit figures of each group with a practical-limit entry or figures (and each entry's
    'x limit')."""
    counts = result.counts()
    lines = [f"WARNING: {w}" for w in result.warnings] + [f"NOTE: {n}" for n in result.notes]
    status = "NO BASELINE" if result.baseline is None else "FAIL" if result.failed else "PASS"
    summary = ", ".join(f"{counts[v]} {v.value}" for v in VERDICT_ORDER)
    lines.append(f"benchmark report: {status}: {summary}{fmt.limit_moves(result)}")
    for c in result.of(Verdict.REGRESSED) + result.of(Verdict.IMPROVED):
        limit = f", {fmt.x_limit(c)} limit" if c.x_limit is not None else ""
        vs_limit = f" vs limit {fmt.normalized(c)}" if c.normalized_ratio is not None else ""
        label = "LIMIT" if c.is_limit else c.verdict.value.upper()
        lines.append(
            f"  {label:9} {c.fullname}  {fmt.ratio(c.ratio)} CI {fmt.interval(c.ci)}{vs_limit} "
            f"p={fmt.p_value(c.p_value)} (threshold {fmt.percent(c.threshold)}{limit})"
            + (f": {c.note}" if c.is_limit and c.note else "")
        )
    lines += _group_figures(result)
    return "\n".join(lines)


def _group_figures(result: ComparisonResult) -> list[str]:
    rows = fmt.group_figures(result)
    if not rows:
        return []
    name_width = max(len(name) for _, name, _, _ in rows)
    figure_width = max(len(figure) for _, _, figure, _ in rows)
    legend = " (x limit = median time / the limit's median time, same group and run)" if result.has_limits else ""
    lines = [f"figures by group{legend}:"]
    previous = None
    for group, name, figure, x in rows:
        if group != previous:
            lines.append(f"  {group}")
            previous = group
        limit = "" if x == "–" else x if x == "limit" else f"{x} limit"
        lines.append(f"    {name:<{name_width}}  {figure:>{figure_width}}  {limit}".rstrip())
    return lines
