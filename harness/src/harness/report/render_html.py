"""The self-contained HTML report: the Markdown report's content plus one embedded PNG per benchmark."""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from html import escape

from harness.report import formatting as fmt
from harness.report.compare import BenchmarkComparison, ComparisonResult
from harness.report.history import median_series
from harness.report.load import BenchmarkRun
from harness.report.plots import benchmark_figure, changes_figure

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
img { max-width: 100%; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; font-size: 0.9em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warning { background: #fff3cd; border: 1px solid #e0b400; padding: 0.6em; margin: 0.5em 0; }
.note { background: #e8f1fb; border: 1px solid #6a9fd8; padding: 0.6em; margin: 0.5em 0; }
.regressed, .drifted { color: #b00020; } .improved { color: #1b7f2a; }
figure { margin: 1em 0 2em; } figcaption { font-family: monospace; margin-bottom: 0.3em; }
"""


def render_html(result: ComparisonResult, history: Sequence[BenchmarkRun], doc_href: str = fmt.GATE_DOC) -> str:
    """The whole report as one HTML document; ``history`` (oldest first) feeds the trend plots; ``doc_href`` is where
    the gate's design document is, as seen from the report (a link in the method sentence)."""
    if result.mode == "ab":
        return _ab(result, doc_href)
    mode = "stored baseline"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/><title>Benchmark report</title>',
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Benchmark report ({mode}): {escape(fmt.headline(result))}</h1>",
        *(f'<p class="warning"><strong>Warning:</strong> {escape(w)}</p>' for w in result.warnings),
        *(f'<p class="note"><strong>Note:</strong> {_code(n)}</p>' for n in result.notes),
        _summary(result, len(history)),
        _runs(result),
    ]
    for section in result.sections:
        if section.comparisons:
            parts.append(f'<h2 class="{section.key}">{escape(section.title)} ({len(section.comparisons)})</h2>')
            head, rows, numeric = fmt.table(section.key, section.comparisons, result)
            parts.append("<table>" + _row(head, tag="th") + "".join(_row(r, numeric) for r in rows) + "</table>")
    parts.append(_group_figures(result))
    parts.append("<h2>Plots</h2>")
    parts += [_figure(c, history, result.current) for c in result.comparisons]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _row(cells: Sequence[str], numeric: frozenset[int] = frozenset(), tag: str = "td") -> str:
    out = []
    for index, cell in enumerate(cells):
        attr = ' class="num"' if index in numeric and tag == "td" else ""
        out.append(f"<{tag}{attr}>{escape(cell)}</{tag}>")
    return "<tr>" + "".join(out) + "</tr>"


def _summary(result: ComparisonResult, history_runs: int) -> str:
    counts = result.counts()
    return (
        "<table>"
        + _row([fmt.SECTION_SHORT[key] for key in counts], tag="th")
        + _row([str(n) for n in counts.values()], frozenset(range(len(counts))))
        + "</table>"
        + f"<p>{escape(fmt.method(result, history_runs))}</p>"
    )


def _runs(result: ComparisonResult) -> str:
    rows = fmt.run_rows(result)
    now, before = ("B (working tree)", "A (git ref)") if result.mode == "ab" else ("current", "baseline")
    if result.baseline is None:
        head, body = ["", now], [_row([label, a]) for label, a, _ in rows]
    elif result.mode == "ab":  # A first, as everywhere else in an A/B report
        head, body = ["", before, now], [_row([label, a, b]) for label, b, a in rows]
    else:
        head, body = ["", now, before], [_row(list(r)) for r in rows]
    return "<h2>Runs</h2><table>" + _row(head, tag="th") + "".join(body) + "</table>"


def _code(note: str) -> str:
    """A note of the report's own (Markdown's inline `code` marks its commands) as HTML: escaped, code as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(note))


def _group_figures(result: ComparisonResult) -> str:
    figures = fmt.group_figures(result)
    if not figures:
        return ""
    rows = "".join(_row(list(r), frozenset({3})) for r in figures)
    head = _row(["group", "benchmark", "figure", "x limit"], tag="th")
    return f"<h2>Figures by group</h2><p>{escape(fmt.X_LIMIT_LEGEND)}.</p><table>{head}{rows}</table>"


def _figure(c: BenchmarkComparison, history: Sequence[BenchmarkRun], current: BenchmarkRun,
            labels: tuple[str, str] = ("baseline", "current")) -> str:
    png = benchmark_figure(c, median_series(history, c.fullname, c.current), current.datetime, labels)
    data = base64.b64encode(png).decode("ascii")
    name = escape(c.fullname)
    return (
        f'<figure><figcaption class="{c.verdict.value}">{name} ({c.verdict.value}, {c.role})</figcaption>'
        f'<img alt="plot of {name}" src="data:image/png;base64,{data}"/></figure>'
    )


def _ab(result: ComparisonResult, doc_href: str) -> str:
    """The A/B report: verdict, sides, one table sorted by change, a plot of every change with its interval, the
    method in one sentence, the runs, and each benchmark's rounds on A and B."""
    head, rows, numeric = fmt.ab_table(result)
    method = escape(fmt.AB_METHOD).replace(fmt.GATE_DOC, f'<a href="{escape(doc_href)}">{fmt.GATE_DOC}</a>')
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/><title>Benchmark report (A/B)</title>',
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Benchmark report (A/B): {escape(fmt.headline(result))}</h1>",
        "<p>" + " &middot; ".join(f"<strong>{label}</strong> = {escape(text)}" for label, text in fmt.sides(result))
        + "</p>",
        *(f'<p class="warning"><strong>Warning:</strong> {escape(w)}</p>' for w in result.warnings),
        *(f'<p class="note"><strong>Note:</strong> {_code(n)}</p>' for n in result.notes),
        "<table>" + _row(head, tag="th") + "".join(_row(r, numeric) for r in rows) + "</table>",
        _changes(result),
        f"<p>Method: {method}</p>",
        _runs(result),
        "<h2>Rounds of each benchmark</h2>",
        *(_figure(c, [], result.current, ("A", "B")) for c in result.comparisons),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _changes(result: ComparisonResult) -> str:
    """The plot of every judged change with its interval, slowest on top; '' when nothing was judged."""
    judged = [c for c in result.comparisons if c.ratio is not None and c.ci is not None]
    judged.sort(key=lambda c: -(c.ratio or 0.0))
    if not judged:
        return ""
    png = changes_figure([fmt.short_name(c.fullname) for c in judged], [(c.ratio or 0.0) - 1 for c in judged],
                         [(c.ci[0] - 1, c.ci[1] - 1) if c.ci else (0.0, 0.0) for c in judged], result.min_effect)
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="change of every benchmark with its interval" src="data:image/png;base64,{data}"/>'
