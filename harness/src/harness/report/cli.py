"""``python -m harness report``: compare pytest-benchmark JSON files and write Markdown, HTML and JSON reports.

Exit status: 0 no regression (or ``--no-fail``), 1 a benchmark regressed beyond its threshold, 2 unusable input (one
line on stderr: which input, what was wrong, what to do).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.cli_args import ArgumentParser
from harness.report.compare import ComparisonResult, compare
from harness.report.errors import ReportInputError
from harness.report.history import load_history
from harness.report.load import BenchmarkRun, parse_run, read_json
from harness.report.output import write_reports
from harness.report.render_html import render_html
from harness.report.render_json import render_json
from harness.report.render_md import render_markdown
from harness.report.render_text import render_text
from harness.report.thresholds import parse_threshold


def add_threshold_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--threshold`` option shared by ``report`` and ``bench``: a fraction (0.1) or a percentage ('10%')."""
    parser.add_argument(
        "--threshold",
        type=parse_threshold_option,
        default=0.10,
        metavar="T",
        help="default regression threshold: '10%%' or 0.1 (a benchmark's extra_info['threshold'] overrides it)",
    )


def build_parser(prog: str = "python -m harness report") -> ArgumentParser:
    """The argument parser of the report command."""
    parser = ArgumentParser(
        prog=prog,
        description="Compare a pytest-benchmark JSON result with a baseline; write report.md, report.html and "
        "report.json; exit 1 on a regression beyond the threshold.",
    )
    parser.add_argument("--current", required=True, help="pytest-benchmark JSON of the run under test")
    parser.add_argument("--baseline", required=True, help="pytest-benchmark JSON to compare against")
    parser.add_argument("--history", metavar="DIR", help="directory of earlier pytest-benchmark JSON for trend plots")
    add_threshold_argument(parser)
    parser.add_argument("--alpha", type=float, default=0.01, help="significance level of the test (default 0.01)")
    parser.add_argument("--out", default="reports", metavar="DIR", help="output directory (default: reports/)")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a benchmark regressed")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness report") -> int:
    """Run the report command with ``argv`` (default: sys.argv[1:]) and return the exit status (0, 1 or 2)."""
    args = build_parser(prog).parse_args(argv)
    try:
        current = parse_run(read_json(args.current, "current"), args.current)
        baseline = parse_run(read_json(args.baseline, "baseline"), args.baseline)
        history = load_history(args.history) if args.history else []
        result, written = write_report(current, baseline, history, threshold=args.threshold, alpha=args.alpha, out=args.out)
    except ReportInputError as exc:
        print(f"harness report: error: {exc}", file=sys.stderr)
        return 2
    return finish(result, written, no_fail=args.no_fail)


def write_report(
    current: BenchmarkRun,
    baseline: BenchmarkRun | None,
    history: Sequence[BenchmarkRun],
    *,
    out: str | Path,
    threshold: float = 0.10,
    alpha: float = 0.01,
    saved_baseline: str | None = None,
) -> tuple[ComparisonResult, list[Path]]:
    """Compare ``current`` with ``baseline`` (None: no baseline, every benchmark new), write report.md, report.html and
    report.json into ``out`` (all or none), and return the result and the written paths. ``history`` (oldest first)
    feeds the trend plots; ``threshold`` is a fraction, ``alpha`` the test level; ``saved_baseline`` the file the
    caller saved ``current`` to as the new baseline (the reports say so). Raises ReportInputError."""
    result = compare(current, baseline, threshold=threshold, alpha=alpha, saved_baseline=saved_baseline)
    files = {
        "report.md": render_markdown(result, len(history)),
        "report.html": render_html(result, history),
        "report.json": render_json(result, len(history)),
    }
    return result, write_reports(out, files)


def finish(result: ComparisonResult, written: Sequence[Path], *, no_fail: bool) -> int:
    """Print the terminal summary and the report paths; return 1 when a benchmark regressed (unless ``no_fail``)."""
    print(render_text(result))
    print("reports: " + ", ".join(str(path) for path in written))
    return 1 if result.failed and not no_fail else 0


def parse_threshold_option(text: str) -> float:
    """argparse ``type`` for a threshold option: '10%' or 0.1 -> 0.1; a bad value is an argparse error."""
    try:
        return parse_threshold(text, "")
    except ReportInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
