"""Driving benchmark workers through one benchmark: start it, time it with ``harness.paired.engine``, let it finish."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.paired.engine import Budget, Calls, RoundFailed, Rounds, Side, calibrate, iterations_for, measure
from harness.paired.process import ANSWER_SECONDS, WorkerError, WorkerProcess, close_all

__all__ = ["FAILED", "PASSED", "SKIPPED", "Collected", "Finished", "Outcome", "WorkerSpec", "collected", "finish", "finish_all",
           "not_timed", "one_line", "open_workers", "release_all", "run_same", "skip_reasons", "start", "start_all",
           "time_alone_or_beside"]

PASSED, SKIPPED, FAILED = "passed", "skipped", "failed"


@dataclass(frozen=True)
class Collected:
    """What a worker collected: its items (nodeid -> static info: name, group, role, uses the benchmark fixture,
    the reason of an unconditional skip), the run metadata pytest-benchmark would have saved, and the clock its
    rounds are timed with (``harness.paired.worker.RunClock``)."""

    items: dict[str, dict[str, Any]]
    machine_info: dict[str, Any]
    commit_info: dict[str, Any]
    version: str
    clock: str = "perf_counter"

    def benchmarks(self) -> list[str]:
        """The nodeids of the items that use the ``benchmark`` fixture, in collection order."""
        return [nodeid for nodeid, item in self.items.items() if item["benchmark"]]


@dataclass(frozen=True)
class Finished:
    """How one test ended in one worker: outcome (PASSED, SKIPPED, FAILED), message, and what the benchmark
    recorded (name, group, params, param, extra_info)."""

    outcome: str
    message: str
    name: str
    group: str | None
    params: Any
    param: str | None
    extra_info: dict[str, Any]

    @classmethod
    def of(cls, message: dict[str, Any]) -> Finished:
        return cls(message["outcome"], message["message"], message["name"], message["group"], message["params"],
                   message["param"], message["extra_info"])


@dataclass(frozen=True)
class Outcome:
    """One benchmark measured on several workers: how each finished and, when all reached the timed call, the rounds
    (``rounds.times[i]`` belongs to worker i of the call)."""

    nodeid: str
    finished: tuple[Finished, ...]
    rounds: Rounds | None

    @property
    def ok(self) -> bool:
        """True when every worker passed and rounds were taken."""
        return self.rounds is not None and all(f.outcome == PASSED for f in self.finished)


def collected(worker: WorkerProcess) -> Collected:
    """Wait for the worker's collection report. Raises WorkerError when a module could not be collected (an import
    error): a run without its benchmarks would pass while checking less than it says."""
    message = worker.receive("collected")
    errors = message.get("errors") or []
    if errors:
        lines = [f"  {e['nodeid']}: {(e['message'].strip().splitlines() or ['?'])[-1][:300]}" for e in errors]
        raise WorkerError(f"the {worker.label} benchmark worker could not collect {len(errors)} module(s), so nothing "
                          f"was run (see {worker.log}):\n" + "\n".join(lines))
    items = {item["nodeid"]: item for item in message["items"]}
    return Collected(items, message["machine_info"], message["commit_info"], message["version"],
                     message.get("clock", "perf_counter"))


def start(worker: WorkerProcess, nodeid: str, keep: bool = True) -> dict[str, Any]:
    """Start ``nodeid``: the ``ready`` message when its benchmark call waits, else its ``done`` message. ``keep``:
    its module's fixtures stay set up after it for the worker's next test of that module (``harness.paired.worker``);
    false for a worker that may not run another test of that module soon (their memory would stay held)."""
    return worker.request("start", ("ready", "done"), nodeid=nodeid, keep=keep)


def start_all(workers: Sequence[WorkerProcess], nodeid: str, keep: bool = True) -> list[dict[str, Any]]:
    """``start`` on every worker at once: their setups run concurrently (the controller sends every request before
    it waits for the first answer); the answers in the order of ``workers``."""
    for worker in workers:
        worker.send("start", nodeid=nodeid, keep=keep)
    return [worker.receive("ready", "done") for worker in workers]


def release_all(workers: Sequence[WorkerProcess]) -> None:
    """Have every worker tear down the fixtures it keeps (``start``'s ``keep``), at once, and wait for all."""
    for worker in workers:
        worker.send("release")
    for worker in workers:
        worker.receive("released")


def finish(worker: WorkerProcess, reason: str | None = None) -> Finished:
    """Let the waiting benchmark call return (or, with ``reason``, skip the test) and wait for the test to end."""
    return finish_all([worker], reason)[0]


def finish_all(workers: Sequence[WorkerProcess], reason: str | None = None) -> list[Finished]:
    """``finish`` on every worker at once: their teardowns (and the checks after the timed call) run concurrently,
    as ``start_all``'s setups do; how each ended, in the order of ``workers``."""
    for worker in workers:
        if reason:
            worker.send("abort", reason=reason)
        else:
            worker.send("finish")
    return [Finished.of(worker.receive("done")) for worker in workers]


def run_same(sides: Sequence[Side], nodeid: str, budget: Budget, spread: Callable[[list[np.ndarray]], float],
             cpus: set[int] | None = None, pinned: Callable[[], None] | None = None,
             measured: Callable[[], None] | None = None, keep: bool = True) -> Outcome:
    """Run ``nodeid`` on the worker of every side (set up concurrently on all the CPUs this process may use,
    ``start_all``) and time its rounds in alternation, in the order of ``sides``, with every worker pinned to ``cpus``
    (None: left where it is; ``pinned`` is called once they are, ``measured`` after the last round, before the
    tests finish); a worker whose test ends before its timed call (skip, failure) makes
    the others skip theirs.

    Every side makes the same calls per round (``time_alone_or_beside``'s ``same_calls``); ``keep`` as ``start``'s."""
    workers = [side.worker for side in sides]
    ready = _start_pinned(workers, nodeid, cpus, pinned, keep)
    if any(message["ev"] == "done" for message in ready):
        return Outcome(nodeid, _not_reached(workers, ready), None)
    try:
        rounds = time_alone_or_beside(sides, [Calls.of(m) for m in ready], budget, spread, same_calls=True)
    except RoundFailed as failure:
        failed = Finished.of(failure.done)
        why = f"it failed in a timed round on {failure.worker.label}"
        return Outcome(nodeid, tuple(failed if w is failure.worker else finish(w, why) for w in workers), None)
    if measured is not None:
        measured()
    if cpus is not None:
        _unpin(workers)
    return Outcome(nodeid, tuple(finish_all(workers)), rounds)


def _start_pinned(workers: Sequence[WorkerProcess], nodeid: str, cpus: set[int] | None,
                  pinned: Callable[[], None] | None, keep: bool) -> list[dict[str, Any]]:
    """``start_all`` on every CPU this process may use, then pin every worker to ``cpus`` (if given) and call
    ``pinned``; the workers' answers."""
    if cpus is not None:
        _unpin(workers)
    ready = start_all(workers, nodeid, keep)
    if cpus is not None:
        for worker in workers:
            worker.pin(cpus)
        if pinned is not None:
            pinned()
    return ready


def _not_reached(workers: Sequence[WorkerProcess], ready: Sequence[dict[str, Any]]) -> tuple[Finished, ...]:
    """How each worker ended when some test ended before its timed call: the others skip theirs, saying why."""
    ended = [Finished.of(m) for m in ready if m["ev"] == "done"]
    why = next((f.message for f in ended if f.outcome != PASSED), "") or "it did not reach its timed call"
    return tuple(Finished.of(m) if m["ev"] == "done" else finish(w, f"another worker did not run it: {why}")
                 for w, m in zip(workers, ready))


def _unpin(workers: Sequence[WorkerProcess]) -> None:
    """Let ``workers`` run on every CPU this process may use (for their setups and teardowns)."""
    for worker in workers:
        worker.pin(set(os.sched_getaffinity(0)))


def time_alone_or_beside(sides: Sequence[Side], asked: Sequence[Calls], budget: Budget,
                         spread: Callable[[list[np.ndarray]], float], same_calls: bool = False) -> Rounds:
    """Time ready benchmarks in alternation (or one alone), each side with its own calls per round (``asked[i].fixed``
    when the benchmark set them, else calibrated to ``budget.round_s``), or with ``same_calls`` (the sides run the
    same benchmark) all with the calls that make a round of the quickest side last ``budget.round_s``.

    A benchmark's time per call can depend on how many calls a round makes (the first call of a round finds the
    caches as the other worker left them; a server's reply overlaps the next request), so sides of one benchmark
    calibrated apart compare rounds of different shapes, and calibration noise alone sets their calls apart: a
    planted x1.1 read x1.249 on a CLOUD exec-wait at 5 calls per round of A against 3 of B, and x1.102 at the same
    calls. Rounds of a slower side are then longer, which the run-queue-corrected clock
    (``harness.paired.worker.RunClock``) keeps from counting its neighbours' time."""
    per_call = [calibrate([side], budget.round_s, own)[0] for side, own in zip(sides, asked)]
    shared = iterations_for(min(per_call), budget.round_s)
    calls = [own.fixed if own.fixed is not None else shared if same_calls else iterations_for(t, budget.round_s)
             for own, t in zip(asked, per_call)]
    return measure(sides, calls, budget, spread)


@dataclass(frozen=True)
class WorkerSpec:
    """How to start one worker: its label in messages, interpreter, working directory, log file, hash seed and the
    seconds it may take to answer (``WorkerProcess``)."""

    label: str
    python: str
    cwd: Path
    log: Path
    hash_seed: int = 0
    answer_seconds: float = ANSWER_SECONDS


@contextmanager
def open_workers(specs: Sequence[WorkerSpec], pytest_args: Sequence[Sequence[str]],
                 env: Mapping[str, str]) -> Iterator[tuple[list[WorkerProcess], list[Collected]]]:
    """Start one worker per spec with its pytest arguments (``pytest_args[i]`` for ``specs[i]``), wait for each to
    collect, and yield them with what they collected; on leaving (also by an exception or Ctrl-C) every worker is
    stopped."""
    workers: list[WorkerProcess] = []
    try:
        for spec, args in zip(specs, pytest_args, strict=True):
            workers.append(WorkerProcess(spec.label, spec.python, spec.cwd, args, env, spec.log, spec.hash_seed,
                                         spec.answer_seconds))
        yield workers, [collected(worker) for worker in workers]
    except BaseException:
        for worker in workers:
            worker.kill()
        raise
    finally:
        close_all(workers)


def not_timed(skipped: dict[str, str]) -> list[str]:
    """The reports' lines for ``skipped`` (nodeid -> reason): one per reason, with its count."""
    return [f"{count} benchmark(s) not timed: {reason}" for reason, count in skip_reasons(skipped).items()]


def skip_reasons(skipped: dict[str, str]) -> dict[str, int]:
    """How many benchmarks were skipped for each reason (``one_line``), in order of first appearance."""
    counts: dict[str, int] = {}
    for reason in skipped.values():
        line = one_line(reason) or "not run"
        counts[line] = counts.get(line, 0) + 1
    return counts


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def one_line(reason: str, most: int = 200) -> str:
    """A skip ``reason`` as one line: its lines joined, pytest's "Skipped: " prefix and control characters (terminal
    escapes) dropped, at most ``most`` characters (cut with "...")."""
    text = " ".join(part.strip() for part in reason.splitlines() if part.strip()).removeprefix("Skipped: ")
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= most else text[:most - 3] + "..."
