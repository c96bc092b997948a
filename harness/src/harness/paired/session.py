"""Driving benchmark workers through one benchmark: start it, time it with ``harness.paired.engine``, let it finish."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.paired.engine import Budget, Rounds, Side, calibrate, measure
from harness.paired.process import WorkerProcess

__all__ = ["Collected", "Finished", "Outcome", "collected", "start", "finish", "time_ready"]

PASSED, SKIPPED, FAILED = "passed", "skipped", "failed"


@dataclass(frozen=True)
class Collected:
    """What a worker collected: its items (nodeid -> static info: name, group, role, uses the benchmark fixture),
    and the run metadata pytest-benchmark would have saved."""

    items: dict[str, dict[str, Any]]
    machine_info: dict[str, Any]
    commit_info: dict[str, Any]
    version: str

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
    """Wait for the worker's collection report."""
    message = worker.receive("collected")
    items = {item["nodeid"]: item for item in message["items"]}
    return Collected(items, message["machine_info"], message["commit_info"], message["version"])


def start(worker: WorkerProcess, nodeid: str) -> dict[str, Any]:
    """Start ``nodeid``: the ``ready`` message when its benchmark call waits, else its ``done`` message."""
    return worker.request("start", ("ready", "done"), nodeid=nodeid)


def finish(worker: WorkerProcess, reason: str | None = None) -> Finished:
    """Let the waiting benchmark call return (or, with ``reason``, skip the test) and wait for the test to end."""
    message = worker.request("abort", ("done",), reason=reason) if reason else worker.request("finish", ("done",))
    return Finished.of(message)


def time_ready(workers: Sequence[WorkerProcess], stretches: Sequence[float], fixed: int | None, budget: Budget,
               spread: Callable[[list[np.ndarray]], float]) -> Rounds:
    """Calibrate and measure workers whose benchmarks are all ready (see ``harness.paired.engine``)."""
    sides = [Side(worker, stretch) for worker, stretch in zip(workers, stretches)]
    iterations = calibrate(sides, budget.round_s, fixed)
    return measure(sides, iterations, budget, spread)


def run_paired(workers: Sequence[WorkerProcess], nodeid: str, stretches: Sequence[float], budget: Budget,
               spread: Callable[[list[np.ndarray]], float]) -> Outcome:
    """Run ``nodeid`` on every worker (started in the given order) and time the rounds in alternation; a worker whose
    test ends before its timed call (skip, failure) makes the others skip theirs."""
    ready = [start(worker, nodeid) for worker in workers]
    if any(message["ev"] == "done" for message in ready):
        ended = [Finished.of(m) for m in ready if m["ev"] == "done"]
        why = next((f.message for f in ended if f.outcome != PASSED), "") or "it did not reach its timed call"
        finished = [Finished.of(m) if m["ev"] == "done" else finish(w, f"the other side did not run: {why}")
                    for w, m in zip(workers, ready)]
        return Outcome(nodeid, tuple(finished), None)
    fixed = {m["iterations"] for m in ready} - {None}
    rounds = time_ready(workers, stretches, max(fixed) if fixed else None, budget, spread)
    return Outcome(nodeid, tuple(finish(worker) for worker in workers), rounds)
