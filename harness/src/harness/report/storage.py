"""Where the benchmark runs of this machine are kept: run files, their pruning, the baseline, the history.

``RunStore(runs, baselines, keep)``:

- run files are ``<runs>/<UTC timestamp>[-N].json`` (e.g. ``20250102T030405Z.json``, which sorts by time; ``-2``,
  ``-3`` when taken); a run that failed is set aside as ``<name>.json.failed`` and never enters the history;
- ``prune`` keeps the newest ``keep`` run files (and likewise the newest ``keep`` set-aside ones); files named
  otherwise are never touched;
- the baseline of a machine is ``<baselines>/<machine_id>.json`` (``harness.report.machine_id`` of the run's
  ``machine_info``); saving copies a run file there atomically (a temporary file renamed into place), so a failure
  leaves any earlier baseline as it was; ``promote`` does that for a run saved before, after checking it is a
  usable run;
- ``history`` reads the other run files of the same machine, skipping (with a warning) any that cannot be used;
  the drift check judges those from the baseline's DRIFT_SINCE on (``drift_window``): saving or promoting a baseline
  with ``--accept-drift`` accepts the level of that run, and later baselines keep the mark.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from harness.bench_schema import MODE_AB, RUN_KEY
from harness.report.errors import ReportInputError, shorten
from harness.report.history import load_history
from harness.report.load import BenchmarkRun, parse_run, read_json
from harness.report.machine import machine_id

__all__ = ["DRIFT_SINCE", "RunStore", "drift_since", "drift_window"]

# RUN_KEY entry of a baseline: the ISO datetime from which drift is judged (set by --accept-drift)
DRIFT_SINCE = "drift_since"

# Run files as ``new_run_path`` names them: (timestamp, optional -N)
_RUN_NAME = re.compile(r"(?P<stamp>[0-9]{8}T[0-9]{6}Z)(?:-(?P<count>[0-9]+))?\.json(?P<failed>\.failed)?")


class RunStore:
    """The run files in ``runs``, the per-machine baselines in ``baselines``, keeping the newest ``keep`` runs.

    ``baseline_hint`` names how the baselines directory was chosen, for messages ('--baseline-dir', ...). Raises
    ValueError for ``keep`` < 1 (the new run must stay).
    """

    def __init__(self, runs: Path, baselines: Path, keep: int, baseline_hint: str = "--baseline-dir") -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 so the new run stays in {str(runs)!r}, got {keep}")
        self.runs, self.baselines, self.keep, self.hint = runs, baselines, keep, baseline_hint

    def check(self) -> None:
        """Create the runs directory; refuse a baselines path that is not a directory. Raises ReportInputError."""
        try:
            self.runs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportInputError(f"cannot create the runs directory {str(self.runs)!r}: {exc}") from None
        if self.baselines.exists() and not self.baselines.is_dir():
            raise ReportInputError(f"{self.hint} {str(self.baselines)!r} is not a directory; point it at a directory "
                                   "of <machine_id>.json baselines (one that does not exist yet is created)")

    def new_run_path(self) -> Path:
        """A free ``<runs>/<UTC timestamp>[-N].json``."""
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path, count = self.runs / f"{stamp}.json", 1
        while path.exists() or path.with_name(path.name + ".failed").exists():
            count += 1
            path = self.runs / f"{stamp}-{count}.json"
        return path

    @staticmethod
    def set_aside(run_file: Path) -> Path:
        """Rename ``run_file`` to ``<name>.json.failed`` (kept out of the history); return the new path."""
        failed = run_file.with_name(run_file.name + ".failed")
        run_file.replace(failed)
        return failed

    def prune(self) -> list[Path]:
        """Delete all but the newest ``keep`` run files (ordered by timestamp then N), and likewise all but the newest
        ``keep`` set-aside ones; return the deleted paths, oldest first. Raises ReportInputError naming a file that
        cannot be deleted."""
        found: dict[bool, list[tuple[tuple[str, int], Path]]] = {False: [], True: []}
        for path in self.runs.iterdir():
            match = _RUN_NAME.fullmatch(path.name)
            if match and path.is_file():
                found[bool(match["failed"])].append(((match["stamp"], int(match["count"] or 1)), path))
        doomed = sorted(item for kind in found.values() for item in sorted(kind)[:-self.keep])
        for _, path in doomed:
            try:
                path.unlink()
            except OSError as exc:
                raise ReportInputError(f"cannot delete the old run file {str(path)!r} (--keep-runs): {exc}") from None
        return [path for _, path in doomed]

    def baseline_path(self, run: BenchmarkRun) -> Path:
        """``<baselines>/<machine_id>.json`` of the machine ``run`` ran on."""
        return self.baselines / f"{machine_id(run.machine_info)}.json"

    def load_baseline(self, run: BenchmarkRun) -> BenchmarkRun | None:
        """The baseline of ``run``'s machine, or None when there is none. An unusable one is an error that says to
        replace it (never silently taken as "no baseline")."""
        path = self.baseline_path(run)
        if not path.exists():
            return None
        try:
            return parse_run(read_json(path, "baseline"), str(path))
        except ReportInputError as exc:
            raise ReportInputError(f"{exc}; this is the machine's stored baseline: fix or delete it, then rerun with "
                                   "--save-baseline (or --promote a saved run)") from None

    def save_baseline(self, run_file: Path, run: BenchmarkRun, drift_since: str | None = None) -> Path:
        """Copy ``run_file`` (holding ``run``) to its machine's baseline path; return that path. ``drift_since`` (an
        ISO datetime) is recorded in the copy's RUN_KEY object: the drift check then ignores earlier runs. Raises
        ReportInputError naming the baselines directory when it cannot be written."""
        target = self.baseline_path(run)
        temp: str | None = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            if drift_since is None:
                os.close(handle)
                shutil.copyfile(run_file, temp)
            else:
                doc = read_json(run_file, "run")
                doc[RUN_KEY] = {**(doc.get(RUN_KEY) or {}), DRIFT_SINCE: drift_since}
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    json.dump(doc, stream)
            os.chmod(temp, 0o644)  # mkstemp makes it 0600; a baseline is shared like the reports
            os.replace(temp, target)
        except OSError as exc:
            if temp is not None:
                Path(temp).unlink(missing_ok=True)
            raise ReportInputError(f"cannot save the baseline in {str(target.parent)!r}: {exc}; choose a writable "
                                   f"{self.hint}") from None
        return target

    def promote(self, run_file: Path, accept_drift: bool = False,
                partial: bool = False) -> tuple[Path, BenchmarkRun, BenchmarkRun | None]:
        """Make a saved run file the baseline of the machine it ran on, without running anything: (baseline path, the
        run, the baseline it replaced or None). With ``accept_drift`` the drift check starts at this run, else it
        starts where the replaced baseline said. Raises ReportInputError for an unusable run file, for one side of
        an A/B run (its rounds were timed in alternation with another tree, a planted slowdown's stretched), and,
        unless ``partial``, for a run that may cover only part of the suite: one run with pytest arguments (RUN_KEY
        ``selection``, as ``--save-baseline`` refuses them), or one that lacks benchmarks of the baseline it would
        replace (a subset chosen where the run file cannot tell, e.g. PYTEST_ADDOPTS)."""
        run = parse_run(read_json(run_file, "promoted run"), str(run_file))
        if run.harness.get("mode") == MODE_AB:
            raise ReportInputError(f"{run_file} is one side of an A/B run (--against), not a stored-mode run: promote "
                                   "a file of reports/runs/ (written by a plain `nox -s bench`)")
        try:
            previous = self.load_baseline(run)
        except ReportInputError:  # an unusable baseline is exactly what a promotion may be replacing
            previous = None
        if not partial:
            _check_whole(run_file, run, previous)
        since = run.datetime.isoformat() if accept_drift else drift_since(previous)
        return self.save_baseline(run_file, run, since), run, previous

    def history(self, current: BenchmarkRun, exclude: Path | None = None) -> tuple[list[BenchmarkRun], list[str]]:
        """(the other runs of ``current``'s machine in the runs directory, oldest first; warnings naming the files
        that were skipped as unusable or foreign)."""
        return load_history(self.runs, exclude=exclude, machine=current)


_SHOWN_CHARS = 200  # of a run's pytest arguments in a message


def _check_whole(run_file: Path, run: BenchmarkRun, previous: BenchmarkRun | None) -> None:
    """Raise ReportInputError when ``run`` may cover only part of the suite (``RunStore.promote``)."""
    selection = run.harness.get("selection")
    if selection:
        shown = shorten(shlex.join(selection), _SHOWN_CHARS)
        raise ReportInputError(f"{run_file} ran with pytest arguments ({shown}), so it may cover only part of the "
                               "suite, and it would become the machine's baseline; add --save-partial-baseline to "
                               "promote it anyway")
    lacking = sorted(set(previous.benchmarks) - set(run.benchmarks)) if previous is not None else []
    if lacking:
        raise ReportInputError(f"{run_file} lacks {len(lacking)} benchmark(s) of the baseline it would replace (e.g. "
                               f"{lacking[0]}): the baseline would become partial; add --save-partial-baseline to "
                               "promote it anyway")


def drift_since(baseline: BenchmarkRun | None) -> str | None:
    """The ISO datetime from which ``baseline`` says drift is judged (``--accept-drift``), or None."""
    value = baseline.harness.get(DRIFT_SINCE) if baseline is not None else None
    return str(value) if value else None


def drift_window(history: list[BenchmarkRun], baseline: BenchmarkRun | None) -> list[BenchmarkRun]:
    """The runs of ``history`` that the drift check judges: those from the baseline's DRIFT_SINCE on (all without)."""
    since = drift_since(baseline)
    if since is None:
        return history
    start = datetime.fromisoformat(since)
    return [run for run in history if run.datetime >= start]
