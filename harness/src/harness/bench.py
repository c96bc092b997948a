"""``python -m harness bench``: run the benchmark suites and judge them, in one of two modes (what ``nox -s bench`` runs).

**Stored-baseline mode** (the default): the working tree's benchmarks run in two long-lived pytest workers
(``harness.paired.stored``): each entry is timed in alternating rounds beside its group's practical limit, so its "x
limit" is a same-moment ratio. The run is saved as ``<out>/runs/<UTC timestamp>.json`` (pytest-benchmark JSON) and
compared with this machine's baseline ``<baseline dir>/<machine_id>.json`` and with the earlier runs of the machine in
``<out>/runs`` (trend plots, drift). ``--save-baseline`` also makes the run the baseline (refused, before anything
runs, when pytest selection arguments make it partial, unless ``--save-partial-baseline``); ``--promote RUN.json``
makes a saved run the baseline without running anything (a partial run only with ``--save-partial-baseline``); with
``--accept-drift`` either one also accepts that run's level, so the drift check starts there. Only the newest
``--keep-runs`` runs are kept.

**A/B mode** (``--against [REF]``): the git ref REF (default: the merge base with the main branch, or the stored
baseline's commit when on it) is checked out beside the working tree, each side with a twin environment
(``harness.paired.reftree``), and every entry runs on both versions in process pairs, their rounds alternating, never
two at once (``harness.paired.ab``; limits and peers only with ``--references``). The two run files go to
``<out>/ab/A.json`` and ``B.json``; the verdicts come from the per-pair ratios. ``--plant-slowdown F`` stretches every
round of the working tree by F: a sensitivity check, after which every entry should be flagged.

Both modes write ``report.md``, ``report.html`` and ``report.json`` into ``<out>`` (default ``reports/``). Pytest
selection passes through: ``-k EXPR``, ``-m MARKEXPR`` and ``--backends NAMES`` directly, anything else after ``--``.
The benchmark processes run with SINGLE_THREAD_ENV (``harness.bench_schema``).

Exit status: 0 no regression (or no baseline yet); 1 an entry regressed or drifted (0 with ``--no-fail``), or a
benchmark failed or crashed its worker; 2 unusable input (a run or baseline file, an option, the ref); 130
interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.bench_schema import ENTRY, MODE_STORED, SHARED_DIR_ENV, SINGLE_THREAD_ENV, role_of
from harness.cli_args import ArgumentParser
from harness.config import HARNESS_BASELINE_DIR, child_environ
from harness.gate import ALPHA, BUDGET_SECONDS, LOOKS, LOOKS_RANGE, MIN_EFFECT, PAIRS_RANGE, PROCESS_PAIRS, Settings, whole_within
from harness.paired.ab import WorkerSet, run_ab
from harness.paired.process import ANSWER_SECONDS, WorkerError, WorkerProcess
from harness.paired.reftree import RefError, Sides, default_ref, prepare_sides
from harness.paired.runfile import run_document
from harness.paired.session import WorkerSpec, not_timed, open_workers
from harness.paired.stored import ENTRY_BUDGET, run_stored
from harness.report import ReportInputError, parse_run
from harness.report.cli import add_verdict_arguments, finish, parse_probability_option, threshold_of, write_report
from harness.report.storage import RunStore, drift_since, drift_window

__all__ = ["AB_CACHE", "BASELINE_DIR_ENV", "DEFAULT_BASELINE_DIR", "KEEP_RUNS", "build_parser", "main", "worker_args"]

BASELINE_DIR_ENV = HARNESS_BASELINE_DIR.name
DEFAULT_BASELINE_DIR = Path(".benchmarks") / "baselines"
AB_CACHE = Path(".benchmarks") / "ab"
KEEP_RUNS = 20
DEFAULT_SUITE = "harness.benchmarks"
_SELECTION = ("-k", "-m", "--backends")
_INTERRUPTED = 130


def build_parser(prog: str = "python -m harness bench") -> ArgumentParser:
    """The argument parser of the bench command (the pytest arguments after ``--`` are split off before it runs)."""
    parser = ArgumentParser(
        prog=prog,
        usage=f"{prog} [options] [-k EXPR] [-m MARKEXPR] [--backends NAMES] [-- other pytest arguments]",
        description="Run the benchmark suites (harness.benchmarks) and judge them: against this machine's stored "
        "baseline (default), or against a git ref in alternating rounds (--against). Writes report.md, report.html "
        "and report.json into <out>.",
        epilog=f"Baseline dir: --baseline-dir, else ${BASELINE_DIR_ENV}, else {DEFAULT_BASELINE_DIR}. Exit status: "
        "0 pass or no baseline yet, 1 regression or a failed benchmark, 2 unusable input, 130 interrupted.",
    )
    parser.add_argument("--against", nargs="?", const="", metavar="REF",
                        help="A/B mode: compare with git ref REF (default: the merge base with the main branch; on the main "
                        "branch, the stored baseline's commit when it is another commit than HEAD), run in "
                        "alternating rounds")
    parser.add_argument("--plant-slowdown", type=_factor, metavar="F",
                        help="A/B mode: stretch every round of the working tree by F (e.g. 1.05), to check that the "
                        "gate sees a change of that size")
    parser.add_argument("--budget", type=_seconds, metavar="S",
                        help=f"seconds of rounds per entry (default: {ENTRY_BUDGET.seconds:g} stored; A/B: "
                        f"{BUDGET_SECONDS:g} per look)")
    parser.add_argument("--process-pairs", type=_pairs, metavar="N",
                        help=f"A/B mode: process pairs (A, B) per look; each gives one value to the test "
                        f"(default {PROCESS_PAIRS}; docs/benchmark-gate.md)")
    parser.add_argument("--references", action="store_true",
                        help="A/B mode: also time the limits and peers (the same code on both sides: they cannot "
                        "regress; timed for their figures, one look on half the pairs)")
    parser.add_argument("--looks", type=_looks, metavar="L",
                        help=f"A/B mode: sets of process pairs an undecided entry may get (default {LOOKS})")
    parser.add_argument("--alpha", type=parse_probability_option, metavar="P",
                        help=f"A/B mode: the chance that a run of unchanged code flags anything (default {ALPHA:g})")
    parser.add_argument("--suite", default=DEFAULT_SUITE, metavar="TARGET",
                        help=f"the benchmarks to run: an importable package (collected with --pyargs) or a path "
                        f"(default {DEFAULT_SUITE})")
    parser.add_argument("--promote", metavar="RUN.json", help="make a saved run the baseline of its machine; runs nothing")
    parser.add_argument("--save-baseline", action="store_true", help="also store this run as the machine's baseline")
    parser.add_argument("--accept-drift", action="store_true",
                        help="with --save-baseline or --promote: accept this run's level, so the drift check starts here")
    parser.add_argument("--save-partial-baseline", action="store_true",
                        help="store this run as the baseline even when pytest arguments select a subset (with --promote: "
                        "promote a run that ran a selection)")
    parser.add_argument("--keep-runs", type=_positive_int, metavar="N",
                        help=f"keep the newest N run files in <out>/runs, deleting older ones (default {KEEP_RUNS})")
    parser.add_argument("--baseline-dir", metavar="DIR",
                        help=f"directory of <machine_id>.json baselines (default: ${BASELINE_DIR_ENV}, else "
                        f"{DEFAULT_BASELINE_DIR})")
    parser.add_argument("--worker-timeout", type=_timeout, default=ANSWER_SECONDS, metavar="S",
                        help=f"seconds a benchmark worker may take to answer (a setup, a round, a teardown) before the "
                        f"benchmark counts as hung: the worker is killed, the benchmark fails, the run goes on "
                        f"(default {ANSWER_SECONDS:g})")
    parser.add_argument("--out", default="reports", metavar="DIR", help="reports, runs/ and ab/ directory (default: reports/)")
    add_verdict_arguments(parser)
    parser.add_argument("--no-fail", action="store_true", help="exit 0 even when an entry regressed")
    for flag, meta, what in (("-k", "EXPR", "pytest -k: select benchmarks by name"),
                             ("-m", "MARKEXPR", "pytest -m: select benchmarks by marker")):
        parser.add_argument(flag, dest=f"select_{flag.strip('-')}", metavar=meta, help=what,
                            type=_keyword_expression if flag == "-k" else _expression)
    parser.add_argument("--backends", dest="select_backends", metavar="NAMES",
                        help="run the device benchmarks on these backends, e.g. CPU,PYTHON")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness bench") -> int:
    """Run the bench command with ``argv`` (default: sys.argv[1:]); return its exit status (see the module doc)."""
    own, after = _split(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(prog)
    args, unknown = parser.parse_known_args(own)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}; pytest options other than -k, -m and --backends "
                     f"go after '--' ({prog} -- {' '.join(unknown)}; with nox: nox -s bench -- -- {' '.join(unknown)})")
    pytest_args = [*(a for flag in _SELECTION for a in _selected(args, flag)), *after]
    signal.signal(signal.SIGTERM, _terminated)  # as Ctrl-C: the workers and what they started are stopped
    try:
        _check_backends(args.select_backends)
        store = _store(args)
        if args.promote is not None:
            _check_promote(args, pytest_args)
            return _promote(store, Path(args.promote), args.accept_drift, args.save_partial_baseline)
        _check_run(args, pytest_args)
        return _ab(args, store, pytest_args) if args.against is not None else _stored(args, store, pytest_args)
    except (ReportInputError, RefError) as exc:
        print(f"harness bench: error: {exc}", file=sys.stderr)
        return 2
    except WorkerError as exc:
        print(f"harness bench: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        how = "SIGTERM" if isinstance(exc, _Terminated) else "Ctrl-C"
        print(f"harness bench: interrupted ({how}): the benchmark workers were stopped; nothing of this run was saved",
              file=sys.stderr)
        return _TERMINATED if isinstance(exc, _Terminated) else _INTERRUPTED


class _Terminated(KeyboardInterrupt):
    """SIGTERM received: unwinds as Ctrl-C does."""


_TERMINATED = 143  # 128 + SIGTERM


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


def _check_promote(args: argparse.Namespace, pytest_args: list[str]) -> None:
    """Refuse options that ``--promote`` (which runs nothing) cannot take: ReportInputError."""
    if given := _given(args, "--against", "--process-pairs", "--looks", "--references", "--plant-slowdown", "--alpha",
                       "--min-effect", "--budget", "--threshold", "--keep-runs"):
        raise ReportInputError(f"--promote runs nothing: it takes no {', '.join(given)}")
    if pytest_args or args.save_baseline:
        raise ReportInputError("--promote runs nothing and promotes the whole file: it takes no pytest "
                               f"arguments or --save-baseline (got {' '.join(pytest_args) or '--save-baseline'})")
    if not args.promote.strip():
        raise ReportInputError("--promote needs the path of a saved run, e.g. reports/runs/<file>.json")


def _check_run(args: argparse.Namespace, pytest_args: list[str]) -> None:
    """Refuse options that belong to the other mode and an ``--out`` that cannot take the reports, before anything
    runs (ReportInputError); then remove the reports an earlier run left in ``--out``, so a run that fails leaves
    none that could be taken for its own."""
    _check_mode_options(args, pytest_args)
    if not args.out.strip():
        raise ReportInputError("--out needs a directory, e.g. reports (an empty one would write into the working "
                               "directory; say . for that)")
    _clear_reports(Path(args.out))


def _check_mode_options(args: argparse.Namespace, pytest_args: list[str]) -> None:
    """``_check_run``'s refusals: options of the other mode, or that contradict each other (ReportInputError)."""
    if args.accept_drift and not (args.save_baseline or args.save_partial_baseline):
        raise ReportInputError("--accept-drift goes with --save-baseline or --promote: it marks the baseline "
                               "from which drift is judged")
    if args.save_baseline and pytest_args and not args.save_partial_baseline:
        raise ReportInputError(f"--save-baseline with pytest arguments ({' '.join(pytest_args)}): a partial run "
                               "would replace the full baseline; pass --save-partial-baseline to do it anyway")
    if args.against is not None:
        if args.save_baseline or args.save_partial_baseline:
            raise ReportInputError("--save-baseline belongs to stored-baseline mode: an A/B run judges the working "
                                   "tree against a ref and stores no run; drop --against, or --save-baseline")
        why = {"--threshold": "A/B mode judges with --min-effect", "--keep-runs": "an A/B run keeps no run files"}
        if given := _given(args, *why):
            raise ReportInputError("; ".join(f"{flag} is stored-baseline mode's: {why[flag]}" for flag in given))
        min_effect = MIN_EFFECT if args.min_effect is None else args.min_effect
        if args.plant_slowdown and args.plant_slowdown < 1 + min_effect:
            raise ReportInputError(f"--plant-slowdown {args.plant_slowdown:g} is below the minimum effect "
                                   f"({min_effect:.0%}): no entry could be flagged; plant at least "
                                   f"{1 + min_effect:g}, e.g. 1.05")
        return
    if given := _given(args, "--process-pairs", "--looks", "--references", "--alpha", "--min-effect"):
        raise ReportInputError(f"{', '.join(given)}: A/B mode's (--against REF), not stored-baseline mode's, which "
                               "times each entry beside its limit in one pair of workers of the working tree and "
                               "judges against --threshold")
    if args.plant_slowdown:
        raise ReportInputError("--plant-slowdown needs A/B mode (--against REF): it stretches the working tree's "
                               "rounds against the unchanged ref")


def _given(args: argparse.Namespace, *flags: str) -> list[str]:
    """Those of ``flags`` given on the command line: their options default to None (or False, for a switch)."""
    return [flag for flag in flags if getattr(args, flag.lstrip("-").replace("-", "_")) not in (None, False)]


_REPORT_FILES = ("report.md", "report.html", "report.json", "ab/A.json", "ab/B.json")
_RUN_DIRS = ("logs", "runs", "ab", "ab/shared")  # what a run creates inside --out


def _clear_reports(out: Path) -> None:
    """Make ``out`` a directory this process can write, and remove the reports of an earlier run from it.
    Raises ReportInputError naming what is wrong with ``out``: not a writable directory, or a file where the run
    needs a directory of its own (``_RUN_DIRS``)."""
    for name in _RUN_DIRS:
        if (out / name).exists() and not (out / name).is_dir():
            raise ReportInputError(f"--out {out}: {out / name} is a file, where the run keeps its {name}/ directory; "
                                   "move it, or choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise ReportInputError(f"--out {out}: the directory is not writable")
        for name in _REPORT_FILES:
            (out / name).unlink(missing_ok=True)
    except OSError as exc:
        raise ReportInputError(f"--out {out}: {exc.strerror or exc}: the reports need a writable directory") from None


def _check_backends(names: str | None) -> None:
    """Refuse a ``--backends`` name that is neither registered nor one of the project's backends (a typo), before
    anything runs: every device benchmark would skip and the run would measure nothing of ours."""
    if not names:
        return
    from harness.markers import backend_typo  # noqa: PLC0415 - imports the runtime, only when asked

    for name in (n.strip() for n in names.split(",")):
        if (problem := backend_typo(name)) is not None:
            raise ReportInputError(f"--backends names {name!r}, {problem}")


def worker_args(suite: str | Path, pytest_args: Sequence[str]) -> list[str]:
    """The pytest command line of a benchmark worker: ``suite`` (a path, or a package name collected with --pyargs),
    without xdist (its workers would time concurrently) or the cache provider, plus the user's ``pytest_args``. The
    project's own suite (DEFAULT_SUITE) also runs without Hypothesis's plugin, which it does not use: importing
    Hypothesis is 0.5 s of the 1.1 s a worker takes to start here, and an A/B run starts up to 40 workers (another
    suite keeps its plugins: its configuration may pass Hypothesis's options)."""
    target = [str(suite)] if isinstance(suite, Path) else ["--pyargs", suite]
    unused = ["-p", "no:hypothesispytest"] if suite == DEFAULT_SUITE else []
    return [*target, "-p", "no:xdist", "-p", "no:cacheprovider", *unused, "-q", *pytest_args]


def _suite(text: str) -> str | Path:
    """``--suite`` as an absolute path when it names one, else as the package name it is."""
    path = Path(text)
    return path.resolve() if path.exists() else text


def _stored(args: argparse.Namespace, store: RunStore, pytest_args: list[str]) -> int:
    store.check()
    run_file = store.new_run_path()
    logs = Path(args.out) / "logs"
    specs = [WorkerSpec(label, sys.executable, Path.cwd(), logs / f"{label}.log", answer_seconds=args.worker_timeout)
             for label in ("entries", "limits")]
    budget = replace(ENTRY_BUDGET, seconds=args.budget) if args.budget else ENTRY_BUDGET
    started = time.perf_counter()
    print(f"harness bench: stored-baseline mode, workers log to {logs}/", flush=True)
    with open_workers(specs, [worker_args(_suite(args.suite), pytest_args)] * 2, _env()) as (workers, collected):
        _warn_randomized(workers)
        result = run_stored(workers, collected[0], _progress, entry_budget=budget)
        document = run_document(collected[0], result.records, {"mode": MODE_STORED, "selection": pytest_args})
    print(f"harness bench: measured {len(result.records)} benchmarks in {time.perf_counter() - started:.0f} s")
    if not any(role_of(r.get("extra_info") or {}) == ENTRY for r in result.records):
        raise ReportInputError(f"no entry (our code) was timed, only {len(result.records)} limit(s)/peer(s): every "
                               "entry was skipped or deselected (see above, e.g. no backend available, or "
                               "-k/-m/--backends select nothing); nothing was saved")
    _write_json(run_file, document)
    if result.failed:
        aside = store.set_aside(run_file)
        return _failures(result.failed, f"the run is kept out of the history as {aside}; no report written")
    current = parse_run(document, str(run_file))
    deleted = store.prune()
    if deleted:
        print(f"harness bench: deleted {len(deleted)} old run file(s) from {store.runs} (keeping the newest "
              f"{store.keep}, --keep-runs): {', '.join(p.name for p in deleted)}")
    baseline = store.load_baseline(current)
    history, skipped = store.history(current, exclude=run_file)
    saved = None
    if args.save_baseline or args.save_partial_baseline:
        since = current.datetime.isoformat() if args.accept_drift else drift_since(baseline)
        saved = store.save_baseline(run_file, current, since)
    report, written = write_report(current, baseline, drift_window(history, baseline), out=args.out,
                                   threshold=threshold_of(args), min_effect=args.min_effect,
                                   saved_baseline=str(saved) if saved else None, warnings=skipped,
                                   notes=(said := not_timed(result.skipped)))
    status = finish(report, written, no_fail=args.no_fail, printed=said)
    if saved is not None:
        print(f"baseline: {'replaced' if baseline is not None else 'saved'} {saved} with this run ({run_file})")
    return status


def _ab(args: argparse.Namespace, store: RunStore, pytest_args: list[str]) -> int:
    with _cache_lock(AB_CACHE):
        return _ab_locked(args, store, pytest_args)


@contextlib.contextmanager
def _cache_lock(cache: Path) -> Iterator[None]:
    """Hold ``cache/lock`` (``flock``) for a whole A/B run: two runs would check different refs out into the one
    ``treeA`` and measure each other's. Raises ReportInputError when another run holds it."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReportInputError(f"another A/B run is using {cache.resolve()} (its checkout of the ref and its "
                                   f"environments): wait for it to end, or run from another clone") from None
        yield


def _ab_locked(args: argparse.Namespace, store: RunStore, pytest_args: list[str]) -> int:
    out = Path(args.out)
    ref = args.against or default_ref(_baseline_commit(store))
    started = time.perf_counter()
    sides = prepare_sides(ref, AB_CACHE, _progress)
    if sides.shared_interpreter and not isinstance(_suite(args.suite), Path):
        raise ReportInputError(f"A/B mode needs this repository's packages installed editable in this interpreter "
                               f"({sys.executable}): without that both sides import the one installed "
                               f"{args.suite}, and A would run B's code. Run `nox -s bench -- --against {ref}`, which "
                               "installs them editable, or `pip install -e` them here")
    print(f"harness bench: A/B mode: A = {ref} ({sides.sha[:12]}), B = the working tree ({sides.b_commit[:12]}"
          f"{', with uncommitted changes' if sides.b_dirty else ''}) (ready in {time.perf_counter() - started:.0f} s)",
          flush=True)
    settings = Settings(min_effect=MIN_EFFECT if args.min_effect is None else args.min_effect,
                        alpha=ALPHA if args.alpha is None else args.alpha,
                        process_pairs=args.process_pairs or PROCESS_PAIRS,
                        looks=args.looks or LOOKS, budget_seconds=args.budget or BUDGET_SECONDS)
    args_of = _side_args(sides, _suite(args.suite), pytest_args) * settings.process_pairs
    shared = (out / "ab" / "shared").resolve()
    shutil.rmtree(shared, ignore_errors=True)
    shared.mkdir(parents=True)
    env = {**_env(), SHARED_DIR_ENV: str(shared)}
    try:
        with contextlib.ExitStack() as stack:
            sets = _WorkerSets(stack, sides, settings.process_pairs, out / "logs", args_of, env, args.worker_timeout)
            _progress(f"harness bench: starting {2 * settings.process_pairs} benchmark workers (logs in {out / 'logs'})")
            sets(0)
            result = run_ab(sets, ref, _progress, settings, planted=args.plant_slowdown,
                            references=args.references)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    print(f"harness bench: A/B run took {time.perf_counter() - started:.0f} s")
    for document, commit in zip(result.documents, sides.commit_infos()):
        document["commit_info"] = commit
    files = [out / "ab" / "A.json", out / "ab" / "B.json"]
    for path, document in zip(files, result.documents):
        _write_json(path, document)
    if not result.documents[1]["benchmarks"]:
        if result.failed[1]:
            return _failures(result.failed[1], "no benchmark was timed, no report written")
        chosen = f"the selection {' '.join(pytest_args)!r}" if pytest_args else "the suite"
        raise ReportInputError(f"no benchmark was timed on both sides: {chosen} holds no benchmark both sides have "
                               f"that was not skipped (reasons above, if any); no report was written")
    if not any(role_of(r.get("extra_info") or {}) == ENTRY for r in result.documents[1]["benchmarks"]):
        if result.failed[1]:
            return _failures(result.failed[1], "no entry was timed, no report written")
        raise ReportInputError("no entry (our code) was timed on both sides, only limits/peers: every entry was "
                               "skipped or deselected (see above); no report was written")
    baseline, current = (parse_run(doc, str(path)) for path, doc in zip(files, result.documents))
    warnings = [f"failed on A (the ref) only: {name}" for name in result.failed[0] if name not in result.failed[1]]
    report, written = write_report(current, baseline, [], out=out, min_effect=args.min_effect, alpha=settings.alpha,
                                   warnings=warnings, broken=sorted(result.failed[1]), notes=(said := not_timed(result.skipped)))
    status = finish(report, written, no_fail=args.no_fail, printed=said)
    if result.failed[1]:
        return _failures(result.failed[1], "the report above covers the benchmarks that ran")
    return status


def _side_args(sides: Sides, suite: str | Path, pytest_args: list[str]) -> list[list[str]]:
    """The pytest arguments of an A worker and of a B worker: the same rootdir path on both sides gives the same
    nodeids, and each side reads its own tree's pytest configuration."""
    suites: list[str | Path] = ([side.inside(suite) for side in (sides.a, sides.b)] if isinstance(suite, Path)
                                else [suite, suite])
    return [worker_args(suite_of, [f"--rootdir={side.root}", *([f"--config-file={side.config}"] if side.config else []),
                                   *pytest_args])
            for suite_of, side in zip(suites, (sides.a, sides.b))]


class _WorkerSets:
    """``run_ab``'s worker sets: set k holds process pairs k * pairs + 1 ... (k + 1) * pairs, A then B, started on
    the first call for k and stopped with ``stack``; a set started again after ``discard`` logs to new files
    (``B1.restart1.log``), so the log of the worker that died stays."""

    def __init__(self, stack: contextlib.ExitStack, sides: Sides, pairs: int, logs: Path, args_of: list[list[str]],
                 env: dict[str, str], answer_seconds: float = ANSWER_SECONDS) -> None:
        self._stack, self._sides, self._pairs, self._logs, self._args, self._env = stack, sides, pairs, logs, args_of, env
        self._answer_seconds = answer_seconds
        self._opened: dict[int, WorkerSet] = {}
        self._restarts: dict[int, int] = {}

    def __call__(self, k: int) -> WorkerSet:
        if k not in self._opened:
            self._opened[k] = self._stack.enter_context(open_workers(self._specs(k), self._args, self._env))
            _warn_randomized(self._opened[k][0])
        return self._opened[k]

    def opened(self) -> list[WorkerProcess]:
        return [worker for workers, _ in self._opened.values() for worker in workers]

    def discard(self, k: int) -> None:
        for worker in self._opened.pop(k, ([], []))[0]:
            worker.kill()
        self._restarts[k] = self._restarts.get(k, 0) + 1

    def _specs(self, k: int) -> list[WorkerSpec]:
        first = k * self._pairs + 1
        restart = f".restart{self._restarts[k]}" if self._restarts.get(k) else ""
        return [WorkerSpec(f"{label}{n} ({what})", str(side.python), side.workdir_of(n),
                           self._logs / f"{label}{n}{restart}.log", n - 1, self._answer_seconds)
                for n in range(first, first + self._pairs)
                for label, what, side in (("A", "ref", self._sides.a), ("B", "working tree", self._sides.b))]


def _promote(store: RunStore, run_file: Path, accept_drift: bool, partial: bool) -> int:
    store.check()
    path, run, previous = store.promote(run_file, accept_drift=accept_drift, partial=partial)
    commit = str(run.commit_info.get("id") or "?")[:12]
    verb = "replaced" if previous is not None else "saved"
    print(f"baseline: {verb} {path} with {run_file} (commit {commit}, {run.datetime:%Y-%m-%d %H:%M} UTC, "
          f"{len(run.benchmarks)} benchmarks)")
    return 0


def _store(args: argparse.Namespace) -> RunStore:
    if args.baseline_dir:
        baselines, hint = Path(args.baseline_dir), "--baseline-dir"
    elif from_env := HARNESS_BASELINE_DIR.get():
        baselines, hint = Path(from_env), f"${BASELINE_DIR_ENV}"
    else:
        baselines, hint = DEFAULT_BASELINE_DIR, "the default baseline dir"
    return RunStore(Path(args.out) / "runs", baselines, KEEP_RUNS if args.keep_runs is None else args.keep_runs, hint)


def _baseline_commit(store: RunStore) -> str | None:
    """The commit of the newest stored baseline (the default A/B ref on the main branch), or None."""
    if not store.baselines.is_dir():
        return None
    files = sorted(store.baselines.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for path in reversed(files):
        try:
            commit = json.loads(path.read_text(encoding="utf-8")).get("commit_info", {}).get("id")
        except (OSError, ValueError, AttributeError):
            continue
        if commit:
            return str(commit)
    return None


def _env() -> dict[str, str]:
    return child_environ(dict(SINGLE_THREAD_ENV))


def _progress(line: str) -> None:
    print(line, flush=True)


def _warn_randomized(workers: Sequence[Any]) -> None:
    if any(worker.randomized for worker in workers):
        print("harness bench: warning: address-space randomization could not be turned off for the workers (a "
              "seccomp profile?): two processes of the same code may differ by a few percent", file=sys.stderr)


def _failures(failed: dict[str, str], what: str) -> int:
    print(f"harness bench: {len(failed)} benchmark(s) failed; {what}:", file=sys.stderr)
    for nodeid, message in failed.items():
        print(f"--- {nodeid}\n{message.rstrip()}", file=sys.stderr)
    return 1


def _write_json(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically (a temporary file renamed into place)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream)
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except OSError as exc:
        raise ReportInputError(f"cannot write {str(path)!r}: {exc}") from None


def _selected(args: argparse.Namespace, flag: str) -> list[str]:
    value = getattr(args, f"select_{flag.strip('-')}")
    return [flag, value] if value is not None else []


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(own options, pytest arguments): everything after the first '--' goes to pytest."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def _pairs(text: str) -> int:
    """argparse ``type`` of --process-pairs: an integer in ``PAIRS_RANGE`` (a t-test needs two values)."""
    return _bounded(text, PAIRS_RANGE, "pairs of worker processes per look")


def _looks(text: str) -> int:
    """argparse ``type`` of --looks: an integer in ``LOOKS_RANGE``."""
    return _bounded(text, LOOKS_RANGE, "sets of process pairs")


def _bounded(text: str, bounds: tuple[int, int], what: str) -> int:
    """``text`` as an integer within ``bounds``; argparse's ArgumentTypeError naming ``what`` it counts otherwise."""
    stripped = text.strip()
    # ASCII digits only: int() also reads other scripts' digits ("١" is 1)
    value = int(stripped) if stripped.isascii() and stripped.isdigit() and len(stripped) < 4 else bounds[0] - 1
    if not whole_within(value, bounds):
        shown = text if len(text) <= 20 else f"{text[:20]}... ({len(text)} characters)"
        raise argparse.ArgumentTypeError(f"must be an integer from {bounds[0]} to {bounds[1]} ({what}), got {shown!r}")
    return value


def _positive_int(text: str) -> int:
    """argparse ``type`` of --keep-runs: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 (the new run is always kept), got {text!r}")
    return value


def _factor(text: str) -> float:
    """argparse ``type`` of --plant-slowdown: a factor > 1 and at most 10."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1.0 < value <= 10.0:
        raise argparse.ArgumentTypeError(f"must be a factor in (1, 10], e.g. 1.05 for 5% slower, got {text!r}")
    return value


def _expression(text: str) -> str:
    """argparse ``type`` of -m: an expression pytest can parse (checked with pytest's own parser, so a typo is a
    usage error here rather than a collection error in every worker)."""
    _compiled(text)
    return text


def _keyword_expression(text: str) -> str:
    """argparse ``type`` of -k: ``_expression``, without call parameters (``name(x=1)``), which pytest's -k refuses
    when it matches (only -m markers take them)."""
    expression = _compiled(text)
    if expression is not None:
        for answer in (True, False):  # every name is evaluated under one of the two (and/or short-circuit)
            expression.evaluate(functools.partial(_no_call_parameters, text, answer))
    return text


def _compiled(text: str) -> Any:
    """``text`` compiled by pytest's expression parser (None for a pytest without it: the workers report errors);
    argparse.ArgumentTypeError when it cannot be parsed."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:
        return None
    try:
        return Expression.compile(text)
    except Exception as exc:  # pytest 8+: SyntaxError; earlier: its own ParseError
        raise argparse.ArgumentTypeError(f"pytest cannot parse {text!r}: {exc}") from None


def _no_call_parameters(text: str, answer: bool, name: str, **parameters: object) -> bool:
    """``_keyword_expression``'s matcher: ``answer`` for every name, a usage error for one with call parameters."""
    if parameters:
        raise argparse.ArgumentTypeError(f"pytest -k takes names, not call parameters: {text!r}")
    return answer


def _timeout(text: str) -> float:
    """argparse ``type`` of --worker-timeout: seconds in [1, 86400]."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 1 to 86400, got {text!r}")
    return value


def _seconds(text: str) -> float:
    """argparse ``type`` of --budget: seconds in (0, 600]."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 600], got {text!r}")
    return value
