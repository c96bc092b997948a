"""Earlier runs for trends and drift: every ``*.json`` of a directory, ordered by the run's ``datetime``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from harness.report.errors import ReportInputError
from harness.report.load import BenchmarkRecord, BenchmarkRun, parse_run, read_json
from harness.report.machine import machine_fields

__all__ = ["load_history", "median_series"]


def load_history(directory: str | Path, exclude: str | Path | None = None,
                 machine: BenchmarkRun | None = None) -> tuple[list[BenchmarkRun], list[str]]:
    """(runs, warnings): every ``*.json`` directly in ``directory`` read as a pytest-benchmark run, oldest first,
    without the file ``exclude`` (the current run when it is written there). A file that cannot be used (corrupt, not
    a pytest-benchmark run) or, with ``machine``, that ran on another machine (node, cpu, machine differ) is skipped
    and named in a warning: a trend never mixes machines, and one bad file never costs the run that was just made.

    Ties in ``datetime`` keep file-name order. Raises ReportInputError when the directory does not exist.
    """
    path = Path(directory)
    if not path.is_dir():
        raise ReportInputError(f"--history {str(directory)!r} is not a directory of pytest-benchmark JSON files")
    skip = Path(exclude).resolve() if exclude is not None else None
    ours = machine_fields(machine.machine_info) if machine is not None else None
    runs, warnings = [], []
    for file in sorted(path.glob("*.json")):
        if file.resolve() == skip:
            continue
        try:
            run = parse_run(read_json(file, "history"), f"history file {str(file)!r}")
        except ReportInputError as exc:
            warnings.append(f"skipped an unusable history file: {exc}")
            continue
        if ours is not None and machine_fields(run.machine_info) != ours:
            warnings.append(f"skipped history file {str(file)!r}: it ran on another machine "
                            f"({machine_fields(run.machine_info)['node'] or '?'})")
            continue
        runs.append(run)
    return sorted(runs, key=lambda run: run.datetime), warnings


def median_series(runs: Sequence[BenchmarkRun], fullname: str,
                  like: BenchmarkRecord | None = None) -> list[tuple[datetime, float]]:
    """(datetime, median seconds) of ``fullname`` in each run that has it, in the order of ``runs``; with ``like``,
    only the runs where it did the same work (``BenchmarkRecord.work_change``), as the drift check counts them."""
    return [(run.datetime, run.benchmarks[fullname].median) for run in runs if fullname in run.benchmarks
            and (like is None or like.work_change(run.benchmarks[fullname]) is None)]
