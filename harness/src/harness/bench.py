"""``python -m harness bench``: run the benchmark suites, keep the run, and report against this machine's baseline.

This is what ``nox -s bench`` runs. Steps:

1. ``python -m pytest --pyargs harness.benchmarks -p no:xdist -p no:cacheprovider --benchmark-only
   --benchmark-min-time=0.0005 --benchmark-max-time=1.0 --benchmark-json=<out>/runs/<UTC timestamp>.json -v`` plus the
   arguments after ``--`` (e.g. ``--backends CPU``), in a subprocess whose output goes straight to the terminal; never
   under xdist, whose workers would time concurrently. The minimum time makes pytest-benchmark calibrate each round of
   a quick benchmark to >= 0.5 ms (many iterations per round), so a round averages out timer and scheduler jitter and a
   one-second benchmark stores about 2000 rounds instead of 190000 (run files of about 1-3 MB instead of 80 MB).
   The subprocess runs with SINGLE_THREAD_ENV (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS set to 1):
   the CPU backend runs a kernel on one thread, so single-threaded numpy/BLAS is the fair practical limit beside it,
   and a multi-threaded BLAS on a loaded machine of few cores spreads its rounds by orders of magnitude (a 256 x 256
   matmul: median 270 us, p90 8.4 ms on 2 busy cores). The values are recorded in each run's ``machine_info``
   (``harness.benchmarks.threads``, ``harness.benchmarks.conftest``) and shown in the reports' runs table.
   When pytest fails (any non-zero status, 5 "no tests collected" included) the command stops with pytest's status and
   a message; the run file it may have written is renamed ``<name>.json.failed`` so it never enters the history (an
   empty one, created by pytest-benchmark before it failed, is removed).
2. The machine id (``harness.report.machine_id`` of the run's ``machine_info``) names the baseline file
   ``<baseline dir>/<machine_id>.json``. The baseline dir is ``--baseline-dir``, else the environment variable
   HARNESS_BASELINE_DIR, else ``.benchmarks/baselines`` (relative to the working directory); one that exists but is
   not a directory is refused (status 2) before pytest runs. An unusable baseline file is an error too (status 2),
   never taken as "no baseline".
3. The report (``harness.report``) compares the run with that baseline, with the earlier runs of the same machine in
   ``<out>/runs`` as trend history, and writes ``report.md``, ``report.html`` and ``report.json`` into ``<out>``
   (default ``reports/``). Without a baseline it still writes them, every benchmark "new", and says how to make this
   run the baseline.
4. ``--save-baseline`` copies the run to the baseline file (creating the directory; replacing it atomically) before
   the report is written, also when the run regressed against the previous baseline: the report and the exit status
   still say so, and the report names the file it was saved to. Pytest arguments after ``--`` (``-k launch``,
   ``--backends CPU``) may select a subset or change how it is measured, so ``--save-baseline`` with them is refused
   (status 2, before anything runs): a partial run would replace the full baseline. ``--save-partial-baseline`` saves
   it anyway.
5. Only the newest ``--keep-runs`` (default 20) run files ``<UTC timestamp>[-N].json`` stay in ``<out>/runs``; older
   ones are deleted once the new run is read, and the terminal names them. Failed runs (``*.json.failed``) are kept to
   the same number. Files named otherwise are never touched.

Exit status: 0 no regression, or no baseline yet; 1 a benchmark regressed beyond its threshold (0 with ``--no-fail``);
2 unusable input (a run or baseline file, an option); pytest's own status when the benchmark run failed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from harness.benchmarks.threads import SINGLE_THREAD_ENV
from harness.cli_args import ArgumentParser
from harness.report import ReportInputError, machine_id, parse_run, read_json
from harness.report.cli import add_threshold_argument, finish, write_report
from harness.report.history import load_history
from harness.report.load import BenchmarkRun
from harness.report.machine import machine_fields

__all__ = [
    "BASELINE_DIR_ENV",
    "DEFAULT_BASELINE_DIR",
    "KEEP_RUNS",
    "PYTEST_BENCHMARK_OPTIONS",
    "SINGLE_THREAD_ENV",
    "build_parser",
    "main",
    "prune_runs",
    "pytest_command",
    "save_baseline",
]

BASELINE_DIR_ENV = "HARNESS_BASELINE_DIR"
DEFAULT_BASELINE_DIR = Path(".benchmarks") / "baselines"
KEEP_RUNS = 20
# Each round of a calibrated benchmark lasts >= 0.5 ms (pytest-benchmark raises its iterations to reach it), and a
# benchmark's rounds together last about 1 s: see the module doc.
PYTEST_BENCHMARK_OPTIONS = ("--benchmark-min-time=0.0005", "--benchmark-max-time=1.0")
# Run files as ``_new_run_path`` names them: (timestamp, optional -N)
_RUN_NAME = re.compile(r"(?P<stamp>[0-9]{8}T[0-9]{6}Z)(?:-(?P<count>[0-9]+))?\.json(?P<failed>\.failed)?")
# What each pytest exit status means (``pytest.ExitCode``), to say why no report was written.
_PYTEST_STATUS = {
    1: "some benchmarks failed",
    2: "the run was interrupted",
    3: "pytest hit an internal error",
    4: "pytest was called wrongly: check the pytest arguments given after '--'",
    5: "no benchmark was collected: is harness.benchmarks installed, or do the arguments after '--' deselect all?",
}


def build_parser(prog: str = "python -m harness bench") -> ArgumentParser:
    """The argument parser of the bench command (the pytest arguments after ``--`` are split off before it runs)."""
    parser = ArgumentParser(
        prog=prog,
        usage=f"{prog} [options] [-- pytest arguments, e.g. --backends CPU]",
        description="Run the benchmark suites (harness.benchmarks) with pytest-benchmark, save the run as "
        "<out>/runs/<UTC timestamp>.json, compare it with this machine's baseline <baseline dir>/<machine_id>.json, "
        "and write report.md, report.html and report.json into <out>.",
        epilog=f"Baseline dir: --baseline-dir, else ${BASELINE_DIR_ENV}, else {DEFAULT_BASELINE_DIR}. Exit status: "
        "0 pass or no baseline yet, 1 regression, 2 unusable input, else pytest's own status when the run failed.",
    )
    parser.add_argument("--save-baseline", action="store_true", help="also store this run as the machine's baseline")
    parser.add_argument(
        "--save-partial-baseline",
        action="store_true",
        help="store this run as the baseline even when pytest arguments after '--' select a subset",
    )
    parser.add_argument(
        "--keep-runs",
        type=_positive_int,
        default=KEEP_RUNS,
        metavar="N",
        help=f"keep the newest N run files in <out>/runs, deleting older ones (default {KEEP_RUNS})",
    )
    parser.add_argument(
        "--baseline-dir",
        metavar="DIR",
        help=f"directory of <machine_id>.json baselines (default: ${BASELINE_DIR_ENV}, else {DEFAULT_BASELINE_DIR})",
    )
    parser.add_argument("--out", default="reports", metavar="DIR", help="reports and runs/ directory (default: reports/)")
    add_threshold_argument(parser)
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when a benchmark regressed")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness bench") -> int:
    """Run the bench command with ``argv`` (default: sys.argv[1:]); return its exit status (see the module doc)."""
    own, pytest_args = _split(list(sys.argv[1:] if argv is None else argv))
    args = build_parser(prog).parse_args(own)
    saving = args.save_baseline or args.save_partial_baseline
    if args.save_baseline and pytest_args and not args.save_partial_baseline:  # refused before minutes of benchmarks
        _refuse_partial_baseline(pytest_args)
        return 2
    runs = Path(args.out) / "runs"
    try:
        runs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"harness bench: error: --out {args.out!r}: cannot create {str(runs)!r}: {exc}", file=sys.stderr)
        return 2
    baseline_dir, source = _baseline_dir(args.baseline_dir)
    if baseline_dir.exists() and not baseline_dir.is_dir():  # checked before the benchmarks spend minutes
        print(f"harness bench: error: {source} {str(baseline_dir)!r} is not a directory; point it at a directory of "
              "<machine_id>.json baselines (one that does not exist yet is created)", file=sys.stderr)
        return 2
    run_file = _new_run_path(runs)
    status = _run_pytest(pytest_command(run_file, pytest_args), run_file)
    if status != 0:
        return status
    try:
        current = _load_current(run_file)
        _say_pruned(prune_runs(runs, args.keep_runs), runs, args.keep_runs)
        baseline_file = baseline_dir / f"{machine_id(current.machine_info)}.json"
        baseline = _load_baseline(baseline_file) if baseline_file.exists() else None
        history = _same_machine(_load_runs(runs, run_file), current)
        if saving:
            save_baseline(run_file, baseline_file)
        result, written = write_report(
            current, baseline, history, out=args.out, threshold=args.threshold,
            saved_baseline=str(baseline_file) if saving else None,
        )
    except ReportInputError as exc:
        print(f"harness bench: error: {exc}", file=sys.stderr)
        return 2
    status = finish(result, written, no_fail=args.no_fail)
    if saving:
        verb = "replaced" if baseline is not None else "saved"
        print(f"baseline: {verb} {baseline_file} with this run ({run_file})")
    return status


def pytest_command(run_file: Path, pytest_args: Sequence[str]) -> list[str]:
    """The pytest command line that runs the benchmark suites and writes their pytest-benchmark JSON to ``run_file``."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "harness.benchmarks",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "--benchmark-only",
        *PYTEST_BENCHMARK_OPTIONS,
        f"--benchmark-json={run_file}",
        "-v",
        *pytest_args,
    ]


def prune_runs(runs: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` run files of ``runs`` (names ``<UTC timestamp>[-N].json``, ordered by
    timestamp then N), and likewise all but the newest ``keep`` ``*.json.failed``; return the deleted paths, oldest
    first. Files named otherwise are left alone. Raises ValueError for ``keep`` < 1 (the new run must stay) and
    ReportInputError naming the file when one cannot be deleted."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1 so the new run stays in {str(runs)!r}, got {keep}")
    found: dict[bool, list[tuple[tuple[str, int], Path]]] = {False: [], True: []}
    for path in runs.iterdir():
        match = _RUN_NAME.fullmatch(path.name)
        if match and path.is_file():
            order = (match["stamp"], int(match["count"] or 1))
            found[bool(match["failed"])].append((order, path))
    doomed = sorted(item for kind in found.values() for item in sorted(kind)[:-keep])
    for _, path in doomed:
        try:
            path.unlink()
        except OSError as exc:
            raise ReportInputError(f"cannot delete the old run file {str(path)!r} (--keep-runs): {exc}") from None
    return [path for _, path in doomed]


def save_baseline(run_file: Path, baseline_file: Path) -> None:
    """Copy ``run_file`` to ``baseline_file``, creating its directory; a temporary file renamed into place means a
    failure leaves any earlier baseline untouched. Raises ReportInputError naming the baseline dir when it fails."""
    temp: str | None = None
    try:
        baseline_file.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{baseline_file.name}.", dir=baseline_file.parent)
        os.close(handle)
        shutil.copyfile(run_file, temp)
        os.chmod(temp, 0o644)  # mkstemp makes it 0600; a baseline is shared like the reports
        os.replace(temp, baseline_file)
    except OSError as exc:
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        where = str(baseline_file.parent)
        raise ReportInputError(
            f"cannot save the baseline in {where!r}: {exc}; choose a writable --baseline-dir or ${BASELINE_DIR_ENV}"
        ) from None


def _refuse_partial_baseline(pytest_args: Sequence[str]) -> None:
    print(f"harness bench: error: --save-baseline with pytest arguments ({' '.join(pytest_args)}): a partial run "
          "would replace the full baseline; pass --save-partial-baseline to do it anyway", file=sys.stderr)


def _positive_int(text: str) -> int:
    """argparse ``type`` of --keep-runs: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 (the new run is always kept), got {text!r}")
    return value


def _say_pruned(deleted: list[Path], runs: Path, keep: int) -> None:
    if deleted:
        names = ", ".join(path.name for path in deleted)
        print(f"harness bench: deleted {len(deleted)} old run file(s) from {runs} (keeping the newest {keep}, "
              f"--keep-runs): {names}")


def _baseline_dir(option: str | None) -> tuple[Path, str]:
    """(baseline dir, where it came from): ``--baseline-dir``, else $HARNESS_BASELINE_DIR, else the default."""
    if option:
        return Path(option), "--baseline-dir"
    if os.environ.get(BASELINE_DIR_ENV):
        return Path(os.environ[BASELINE_DIR_ENV]), f"${BASELINE_DIR_ENV}"
    return DEFAULT_BASELINE_DIR, "the default baseline dir"


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(own options, pytest arguments): everything after the first '--' goes to pytest."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def _new_run_path(runs: Path) -> Path:
    """``runs/<UTC timestamp>.json`` (e.g. 20250102T030405Z.json, which sorts by time); '-2', '-3'... when taken."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path, count = runs / f"{stamp}.json", 1
    while path.exists() or path.with_name(path.name + ".failed").exists():
        count += 1
        path = runs / f"{stamp}-{count}.json"
    return path


def _run_pytest(command: list[str], run_file: Path) -> int:
    """Run ``command`` with its output on this terminal; on failure set the run file aside and say why."""
    print("harness bench: " + " ".join(command), flush=True)
    status = subprocess.run(command, check=False, env={**os.environ, **SINGLE_THREAD_ENV}).returncode
    if status == 0:
        return 0
    why = _PYTEST_STATUS.get(status, "pytest failed")
    aside = ""
    if run_file.exists() and run_file.stat().st_size == 0:  # pytest-benchmark creates the file when it parses options
        run_file.unlink()
    elif run_file.exists():
        failed = run_file.with_name(run_file.name + ".failed")
        run_file.replace(failed)
        aside = f"; its partial results are in {failed}, kept out of the history"
    print(f"harness bench: error: pytest exited with status {status} ({why}); no report written{aside}", file=sys.stderr)
    return status


def _load_current(run_file: Path) -> BenchmarkRun:
    """The run pytest just wrote; an unusable one is renamed ``<name>.json.failed`` before the error propagates."""
    if not run_file.exists():
        raise ReportInputError(
            f"pytest passed but wrote no benchmark results to {str(run_file)!r}: every benchmark was skipped or "
            "deselected (see the pytest summary above, e.g. no backend available)"
        )
    try:
        return parse_run(read_json(run_file, "current"), str(run_file))
    except ReportInputError:
        run_file.replace(run_file.with_name(run_file.name + ".failed"))  # an unusable run must not enter the history
        raise


def _load_baseline(baseline_file: Path) -> BenchmarkRun:
    """This machine's baseline; an unusable one is an error that says to replace it (never silently ignored)."""
    try:
        return parse_run(read_json(baseline_file, "baseline"), str(baseline_file))
    except ReportInputError as exc:
        raise ReportInputError(
            f"{exc}; this is the machine's stored baseline: fix or delete it, then rerun with --save-baseline"
        ) from None


def _load_runs(runs: Path, run_file: Path) -> list[BenchmarkRun]:
    """The earlier runs in ``runs`` (all but ``run_file``); an unusable one is an error that says how to set it aside."""
    try:
        return load_history(runs, exclude=run_file)
    except ReportInputError as exc:
        raise ReportInputError(
            f"{exc}; it is an earlier run in {str(runs)!r}: rename it to <name>.json.failed (or delete it) to keep it "
            "out of the history"
        ) from None


def _same_machine(runs: list[BenchmarkRun], current: BenchmarkRun) -> list[BenchmarkRun]:
    """The runs made on the machine of ``current`` (same node, cpu and machine), so a trend never mixes machines."""
    ours = machine_fields(current.machine_info)
    return [run for run in runs if machine_fields(run.machine_info) == ours]
