"""Earlier runs for trend plots: every ``*.json`` in a directory, ordered by the run's ``datetime``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from harness.report.errors import ReportInputError
from harness.report.load import BenchmarkRun, parse_run, read_json


def load_history(directory: str | Path, exclude: str | Path | None = None) -> list[BenchmarkRun]:
    """Read every ``*.json`` directly in ``directory`` as a pytest-benchmark run, oldest first, skipping the file
    ``exclude`` (the current run when it is written into the history directory).

    Ties in ``datetime`` keep file-name order. An empty directory gives []. Raises ReportInputError when the directory
    does not exist or any file in it is unusable (the message names the file), so a trend is never drawn from a
    silently shortened history.
    """
    path = Path(directory)
    if not path.is_dir():
        raise ReportInputError(f"--history {str(directory)!r} is not a directory of pytest-benchmark JSON files")
    skip = Path(exclude).resolve() if exclude is not None else None
    files = [file for file in sorted(path.glob("*.json")) if file.resolve() != skip]
    runs = [parse_run(read_json(file, "history"), f"history file {str(file)!r}") for file in files]
    return sorted(runs, key=lambda run: run.datetime)


def median_series(runs: Sequence[BenchmarkRun], fullname: str) -> list[tuple[datetime, float]]:
    """(datetime, median seconds) of ``fullname`` in each run that has it, in the order of ``runs``."""
    return [(run.datetime, run.benchmarks[fullname].median) for run in runs if fullname in run.benchmarks]
