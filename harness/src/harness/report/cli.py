"""``python -m harness report``: compare pytest-benchmark JSON files and write Markdown, HTML and JSON reports.

Two files of one A/B run (``python -m harness bench --against REF`` writes them to ``<out>/ab/A.json`` and
``B.json``) are judged in A/B mode, any other pair in stored-baseline mode (``harness.report.compare``).
Exit status: 0 no regression (or ``--no-fail``), 1 an entry regressed or drifted, 2 unusable input (one line on
stderr: which input, what was wrong, what to do).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from harness.bench_schema import MODE_AB
from harness.cli_args import ArgumentParser
from harness.report.compare import DEFAULT_MIN_EFFECT, DEFAULT_THRESHOLD, ComparisonResult, compare
from harness.report.errors import ReportInputError
from harness.report.formatting import GATE_DOC
from harness.report.history import load_history
from harness.report.load import BenchmarkRun, parse_run, read_json
from harness.report.output import write_reports
from harness.report.render_html import render_html
from harness.report.render_json import render_json
from harness.report.render_md import render_markdown
from harness.report.render_text import render_text
from harness.report.thresholds import parse_threshold

__all__ = ["add_verdict_arguments", "build_parser", "finish", "main", "parse_probability_option", "threshold_of",
           "write_report"]


def add_verdict_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by ``report`` and ``bench`` that shape verdicts: --threshold (stored mode) and
    --min-effect (A/B mode), each a fraction (0.1) or a percentage ('10%')."""
    parser.add_argument(
        "--threshold",
        type=parse_fraction_option,
        default=None,
        metavar="T",
        help=f"stored-baseline mode's default regression threshold: '10%%' or 0.1 (default "
        f"{DEFAULT_THRESHOLD * 100:g}%%; a benchmark's @pytest.mark.bench_threshold overrides it)",
    )
    parser.add_argument(
        "--min-effect",
        type=parse_min_effect_option,
        default=None,
        metavar="E",
        help=f"A/B mode's smallest change worth a verdict (default: what the A/B run used, else "
             f"{DEFAULT_MIN_EFFECT * 100:g}%%)",
    )


def _check_mode_options(args: argparse.Namespace, current: BenchmarkRun) -> None:
    """Refuse an option the files' mode would ignore (ReportInputError): --threshold for the files of an A/B run,
    --min-effect for stored-mode files."""
    if current.harness.get("mode") == MODE_AB and args.threshold is not None:
        raise ReportInputError("--threshold is stored-baseline mode's; these are the files of an A/B run, judged with "
                               "--min-effect")
    if current.harness.get("mode") != MODE_AB and args.min_effect is not None:
        raise ReportInputError("--min-effect is A/B mode's; these are stored-mode files, judged with --threshold")


def threshold_of(args: argparse.Namespace) -> float:
    """The --threshold given, else DEFAULT_THRESHOLD (the option defaults to None so that a command can tell it was
    given, and refuse it where it would be ignored)."""
    return DEFAULT_THRESHOLD if args.threshold is None else args.threshold


def build_parser(prog: str = "python -m harness report") -> ArgumentParser:
    """The argument parser of the report command."""
    parser = ArgumentParser(
        prog=prog,
        description="Compare a pytest-benchmark JSON result with a baseline; write report.md, report.html and "
        "report.json; exit 1 when an entry regressed or drifted.",
    )
    parser.add_argument("--current", required=True, help="pytest-benchmark JSON of the run under test (A/B: B.json)")
    parser.add_argument("--baseline", required=True, help="pytest-benchmark JSON to compare against (A/B: A.json)")
    parser.add_argument("--history", metavar="DIR",
                        help="directory of earlier runs of the same machine, for trend plots and the drift check")
    add_verdict_arguments(parser)
    parser.add_argument("--alpha", type=parse_probability_option, default=None,
                        help="the tests' level (default: what the A/B run used, else 0.01)")
    parser.add_argument("--out", default="reports", metavar="DIR", help="output directory (default: reports/)")
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when an entry regressed")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness report") -> int:
    """Run the report command with ``argv`` (default: sys.argv[1:]) and return the exit status (0, 1 or 2)."""
    args = build_parser(prog).parse_args(argv)
    try:
        current = parse_run(read_json(args.current, "current"), args.current)
        baseline = parse_run(read_json(args.baseline, "baseline"), args.baseline)
        _check_mode_options(args, current)
        history, skipped = load_history(args.history, exclude=args.current, machine=current) if args.history else ([], [])
        for line in skipped:
            print(f"harness report: warning: {line}", file=sys.stderr)
        result, written = write_report(current, baseline, history, threshold=threshold_of(args), min_effect=args.min_effect,
                                       alpha=args.alpha, out=args.out, warnings=skipped)
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
    threshold: float = DEFAULT_THRESHOLD,
    min_effect: float | None = None,
    alpha: float | None = None,
    saved_baseline: str | None = None,
    warnings: Sequence[str] = (),
    broken: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> tuple[ComparisonResult, list[Path]]:
    """Compare ``current`` with ``baseline`` (None: no baseline, every benchmark new), write report.md, report.html and
    report.json into ``out`` (all or none), and return the result and the written paths. ``history`` (earlier runs of
    the machine, oldest first) feeds the trend plots and the drift check; ``threshold``/``min_effect`` are fractions,
    ``alpha`` the tests' level; ``saved_baseline`` the file the caller saved ``current`` to as the new baseline (the
    reports say so); ``warnings`` are added at the top; ``broken`` names benchmarks that failed on the working tree
    (listed as warnings; they fail the run); ``notes`` are added to the notes (e.g. what was not timed, and why).
    Raises ReportInputError."""
    result = compare(current, baseline, history=history, threshold=threshold, min_effect=min_effect, alpha=alpha,
                     saved_baseline=saved_baseline)
    failed_lines = [f"failed on B (the working tree): {name}" for name in broken]
    if warnings or broken:
        result = replace(result, warnings=(*failed_lines, *warnings, *result.warnings), broken=tuple(broken))
    if notes:
        result = replace(result, notes=(*result.notes, *notes))
    doc_href = gate_doc_href(out)
    files = {
        "report.md": render_markdown(result, len(history), doc_href),
        "report.html": render_html(result, history, doc_href),
        "report.json": render_json(result, len(history)),
    }
    return result, write_reports(out, files)


def gate_doc_href(out: str | Path) -> str:
    """Where the report links the gate's design document. From a checkout whose ``origin`` is on GitHub or GitLab: its
    page there (``blob/HEAD``, the default branch), so the link still works in report.md pasted into a pull request's
    comment; from another checkout: the path relative to the report directory ``out`` (it works where the reports are
    opened); without the document (an installed harness): the path from the repository root."""
    root = Path(__file__).resolve().parents[4]
    if not (root / GATE_DOC).is_file():
        return GATE_DOC
    return forge_file_url(_origin(root), GATE_DOC) or os.path.relpath(root / GATE_DOC, Path(out).resolve())


_FORGE = re.compile(r"^(?:(?:https://(?:[^@/\s]+@)?|ssh://git@)(github\.com|gitlab\.com)(?::\d+)?/|git@(github\.com|gitlab\.com):)"
                    r"(.+?)(?:\.git)?/?$", re.IGNORECASE)
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # an owner, group or repository name on both forges


def forge_file_url(remote: str | None, path: str) -> str | None:
    """The web page of file ``path`` (from the repository root) on the default branch of a GitHub or GitLab repository
    whose git remote URL is ``remote`` (https, ``ssh://git@`` or scp-like ``git@host:owner/repo.git``), e.g.
    'https://github.com/owner/repo/blob/HEAD/docs/x.md'; None for another host or no remote."""
    match = _FORGE.match(remote.strip()) if remote else None
    if match is None:
        return None
    host = (match.group(1) or match.group(2)).lower()
    segments = match.group(3).split("/")
    if not all(_SEGMENT.fullmatch(s) for s in segments) or len(segments) < 2 or (host == "github.com" and
                                                                                   len(segments) != 2):
        return None
    return f"https://{host}/{'/'.join(segments)}{'/-' if host == 'gitlab.com' else ''}/blob/HEAD/{path}"


def _origin(root: Path) -> str | None:
    """``git remote get-url origin`` of the checkout at ``root``; None without git, a repository or that remote."""
    try:
        done = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def finish(result: ComparisonResult, written: Sequence[Path], *, no_fail: bool, printed: Sequence[str] = ()) -> int:
    """Print the terminal summary (without the notes in ``printed``: the run said them already) and the report paths;
    return 1 when an entry fails the run (unless ``no_fail``)."""
    print(render_text(replace(result, notes=tuple(n for n in result.notes if n not in printed))))
    print("reports: " + ", ".join(str(path) for path in written))
    return 1 if result.failed and not no_fail else 0


def parse_probability_option(text: str) -> float:
    """argparse ``type`` of --alpha: a probability from 1e-6 to 0.5."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1e-6 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"must be a probability from 1e-6 to 0.5, e.g. 0.01, got {text!r}")
    return value


def parse_min_effect_option(text: str) -> float:
    """argparse ``type`` for --min-effect: a fraction in (0, 1) ('3%' or 0.03), refused before anything runs (0
    would leave no change small enough to call unchanged)."""
    try:
        value = parse_threshold(text, "")
    except ReportInputError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1) such as 0.03 or '3%', got {text!r}")
    return value


def parse_fraction_option(text: str) -> float:
    """argparse ``type`` for a fraction option: '10%' or 0.1 -> 0.1; a bad value is an argparse error."""
    try:
        return parse_threshold(text, "")
    except ReportInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
