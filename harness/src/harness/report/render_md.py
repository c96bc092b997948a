"""The Markdown report (for pull-request comments): warnings, notes, summary counts, the runs, one table per verdict,
and the natural-unit figures per benchmark group."""

from __future__ import annotations

import re

from harness.report import formatting as fmt
from harness.report.compare import VERDICT_ORDER, BenchmarkComparison, ComparisonResult
from harness.report.stats import Verdict

# Characters that GitHub-flavoured Markdown would read as markup, HTML or a table cell boundary.
_MARKUP = re.compile(r"([\\`*_\[\]<>|&~])")


def escape(text: str) -> str:
    """Backslash-escape Markdown/HTML markup and table pipes, and fold newlines, so any text stays in its cell."""
    return _MARKUP.sub(r"\\\1", text.replace("\r", " ").replace("\n", " "))


def render_markdown(result: ComparisonResult, history_runs: int) -> str:
    """The whole report as Markdown text; ``history_runs`` is how many runs the trend plots (HTML) used.

    With practical-limit groups (``result.has_limits``) the tables get an 'x limit' column and a 'Figures by group'
    section lists each group's natural-unit figures.
    """
    lines = [f"## Benchmark report: {fmt.headline(result)}", ""]
    lines += [f"> **Warning:** {escape(w)}" for w in result.warnings]
    lines += [f"> **Note:** {n}" for n in result.notes]  # the report's own sentences: their `code` stays code
    if result.warnings or result.notes:
        lines.append("")
    lines += _summary(result, history_runs) + [""] + _runs(result)
    for verdict in VERDICT_ORDER:
        group = result.of(verdict)
        if group:
            lines += ["", f"### {verdict.value.capitalize()} ({len(group)})", ""] + _table(verdict, group, result.has_limits)
    figures = fmt.group_figures(result)
    if figures:
        lines += ["", "### Figures by group", "", f"{fmt.X_LIMIT_LEGEND}.", ""]
        lines += ["| group | benchmark | figure | x limit |", "|---|---|---|---:|"]
        lines += [f"| {escape(g)} | {escape(name)} | {escape(fig)} | {x} |" for g, name, fig, x in figures]
    return "\n".join(lines) + "\n"


def _summary(result: ComparisonResult, history_runs: int) -> list[str]:
    counts = result.counts()
    return [
        "| " + " | ".join(v.value for v in VERDICT_ORDER) + " |",
        "|" + "---:|" * len(VERDICT_ORDER),
        "| " + " | ".join(str(counts[v]) for v in VERDICT_ORDER) + " |",
        "",
        fmt.method(result, history_runs),
    ]


def _runs(result: ComparisonResult) -> list[str]:
    rows = fmt.run_rows(result)
    if result.baseline is None:
        return ["| | current |", "|---|---|"] + [f"| {name} | {escape(now)} |" for name, now, _ in rows]
    return ["| | current | baseline |", "|---|---|---|"] + [
        f"| {name} | {escape(now)} | {escape(before)} |" for name, now, before in rows
    ]


def _table(verdict: Verdict, group: list[BenchmarkComparison], limits: bool) -> list[str]:
    at: int | None  # where the 'x limit' column goes
    if verdict is Verdict.NEW:
        head = ["benchmark", "current median", "rounds", "figures"]
        align = ["---", "---:", "---:", "---"]
        rows = [[escape(c.fullname), fmt.seconds(c.record.median), str(c.record.rounds), escape(fmt.figures(c))] for c in group]
        at = 3
    elif verdict is Verdict.MISSING:
        head, align = ["benchmark", "baseline median", "rounds"], ["---", "---:", "---:"]
        rows = [[escape(c.fullname), fmt.seconds(c.record.median), str(c.record.rounds)] for c in group]
        at = None  # nothing current to relate to a limit
    else:
        head = ["benchmark", "baseline median", "current median", "ratio", "CI", "p-value", "threshold", "notes"]
        align = ["---", "---:", "---:", "---:", "---", "---:", "---:", "---"]
        rows = [_compared_cells(c) for c in group]
        at = 4
        if limits:  # the limit-normalized ratio beside the raw one's CI
            head.insert(5, fmt.NORMALIZED_HEAD)
            align.insert(5, "---")
            for row, c in zip(rows, group):
                row.insert(5, fmt.normalized(c))
    if limits and at is not None:
        head.insert(at, "x limit")
        align.insert(at, "---:")
        for row, c in zip(rows, group):
            row.insert(at, fmt.x_limit(c))
    return ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"] + ["| " + " | ".join(row) + " |" for row in rows]


def _compared_cells(c: BenchmarkComparison) -> list[str]:
    base = c.baseline.median if c.baseline else None
    now = c.current.median if c.current else None
    notes = "; ".join(text for text in (fmt.figures(c), c.note or "") if text)
    return [
        escape(c.fullname),
        fmt.seconds(base),
        fmt.seconds(now),
        fmt.ratio(c.ratio),
        fmt.interval(c.ci),
        fmt.p_value(c.p_value),
        fmt.percent(c.threshold),
        escape(notes),
    ]
