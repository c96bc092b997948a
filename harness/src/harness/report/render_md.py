"""The Markdown report (for pull-request comments): warnings, notes, summary counts, the runs, one table per section,
and the natural-unit figures per benchmark group."""

from __future__ import annotations

import re

from harness.report import formatting as fmt
from harness.report.compare import ComparisonResult

# Characters that GitHub-flavoured Markdown would read as markup, HTML or a table cell boundary.
_MARKUP = re.compile(r"([\\`*_\[\]<>|&~])")
_CODE = re.compile(r"(`[^`\n]+`)")


def escape_prose(text: str) -> str:
    """``escape`` outside `code spans`: a note's own code stays code, text it quotes (a skip reason) stays text."""
    return "".join(part if i % 2 else escape(part) for i, part in enumerate(_CODE.split(text)))  # odd: the spans


def escape(text: str) -> str:
    """Backslash-escape Markdown/HTML markup and table pipes, and fold newlines, so any text stays in its cell."""
    return _MARKUP.sub(r"\\\1", text.replace("\r", " ").replace("\n", " "))


def render_markdown(result: ComparisonResult, history_runs: int, doc_href: str = fmt.GATE_DOC) -> str:
    """The whole report as Markdown text; ``history_runs`` is how many runs the trend plots (HTML) used; ``doc_href``
    is where the gate's design document is, as seen from the report (a link in the method sentence).

    The tables (``formatting.table``) follow the mode: A/B shows per-pair ratios, pairs, detectable change and why the
    rounds stopped; stored mode shows the raw and limit-normalized comparison ('x limit' columns when there are limits).
    """
    if result.mode == "ab":
        return _ab(result, doc_href)
    lines = [f"## Benchmark report (stored baseline): {fmt.headline(result)}", ""]
    lines += [f"> **Warning:** {escape(w)}" for w in result.warnings]
    lines += [f"> **Note:** {escape_prose(n)}" for n in result.notes]
    if result.warnings or result.notes:
        lines.append("")
    lines += _summary(result, history_runs) + [""] + _runs(result)
    for section in result.sections:
        if section.comparisons:
            head, rows, numeric = fmt.table(section.key, section.comparisons, result)
            lines += ["", f"### {section.title} ({len(section.comparisons)})", ""]
            lines += ["| " + " | ".join(head) + " |",
                      "|" + "|".join("---:" if i in numeric else "---" for i in range(len(head))) + "|"]
            lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    figures = fmt.group_figures(result)
    if figures:
        lines += ["", "### Figures by group", "", f"{fmt.X_LIMIT_LEGEND}.", ""]
        lines += ["| group | benchmark | figure | x limit |", "|---|---|---|---:|"]
        lines += [f"| {escape(g)} | {escape(name)} | {escape(fig)} | {escape(x)} |" for g, name, fig, x in figures]
    return "\n".join(lines) + "\n"


def _summary(result: ComparisonResult, history_runs: int) -> list[str]:
    counts = result.counts()
    return [
        "| " + " | ".join(fmt.SECTION_SHORT[key] for key in counts) + " |",
        "|" + "---:|" * len(counts),
        "| " + " | ".join(str(n) for n in counts.values()) + " |",
        "",
        fmt.method(result, history_runs),
    ]


def _runs(result: ComparisonResult) -> list[str]:
    rows = fmt.run_rows(result)
    if result.baseline is None:
        return ["| | current |", "|---|---|"] + [f"| {name} | {escape(now)} |" for name, now, _ in rows]
    if result.mode == "ab":  # A first, as everywhere else in an A/B report
        return ["| | A (git ref) | B (working tree) |", "|---|---|---|"] + [
            f"| {name} | {escape(a)} | {escape(b)} |" for name, b, a in rows
        ]
    return ["| | current | baseline |", "|---|---|---|"] + [
        f"| {name} | {escape(now)} | {escape(before)} |" for name, now, before in rows
    ]


def _ab(result: ComparisonResult, doc_href: str) -> str:
    """The A/B report: the verdict, the two sides, one table sorted by change, the method in one sentence, the runs."""
    lines = [f"## Benchmark report (A/B): {fmt.headline(result)}", "",
             " · ".join(f"**{label}** = {escape(text)}" for label, text in fmt.sides(result)), ""]
    lines += [f"> **Warning:** {escape(w)}" for w in result.warnings]
    lines += [f"> **Note:** {escape_prose(n)}" for n in result.notes]
    if result.warnings or result.notes:
        lines.append("")
    head, rows, numeric = fmt.ab_table(result)
    lines += ["| " + " | ".join(head) + " |",
              "|" + "|".join("---:" if i in numeric else "---" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    method = fmt.AB_METHOD.replace(fmt.GATE_DOC, f"[{fmt.GATE_DOC}]({doc_href})")
    lines += ["", f"Method: {method}", "", "<details><summary>Runs</summary>", ""]
    lines += _runs(result) + ["", "</details>"]
    return "\n".join(lines) + "\n"
