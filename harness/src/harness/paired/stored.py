"""Stored-baseline mode's run: every benchmark of the working tree, each entry timed beside its group's limit.

Two workers of the same tree: one runs the entries (and peers), the other holds a limit waiting in its timed call.
An entry whose group has a limit (``@pytest.mark.bench_role("limit")``, whose group must be known at collection:
``@pytest.mark.benchmark(group=...)``, parameters allowed) is timed in alternation with it, round for round (entry,
limit, limit, entry, ...), and its record carries the limit's rounds under PAIRED_LIMIT_KEY: its "x limit" is then a
ratio of rounds taken at the same moment. The limit stays waiting while the next entries of its group are timed;
entries are taken group by group to keep the switches few. Every limit's own record gathers all its rounds; a limit
that no entry needed, peers, and entries of groups without a limit are timed alone. Rounds stop when the confidence
interval of the median (of the per-pair ratio, when paired) is narrow enough or the benchmark's time budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.bench_schema import ENTRY, LIMIT, PAIRED_LIMIT_KEY, short_name
from harness.gate import log_ratios
from harness.paired.cpus import CpuChooser
from harness.paired.engine import Budget, Calls, RoundFailed, Rounds, Side, half_width
from harness.paired.process import WorkerProcess
from harness.paired.runfile import benchmark_record
from harness.paired.session import PASSED, Collected, Finished, finish, skip_reasons, start, time_alone_or_beside
from harness.report.groups import natural_figure

__all__ = ["ENTRY_BUDGET", "OTHER_BUDGET", "Progress", "StoredResult", "run_stored"]

# 16 rounds at least: an entry's limit-normalized comparison runs on its A B B A units, half as many as its rounds,
# and the two-sided Mann-Whitney test of 4 units against 4 cannot go below p = 0.029 (of 5 against 5: 0.008), so with
# 8 rounds a slow entry could never be flagged at alpha 0.01, however much slower (a run against a copy of itself
# with one entry 25% slower missed the cold DISK reads and the PYTHON kernels); 8 units reach 1.6e-4
ENTRY_BUDGET = Budget(seconds=2.0, confidence=0.95, min_rounds=16)
OTHER_BUDGET = Budget(seconds=1.0, confidence=0.95)

Progress = Callable[[str], None]


@dataclass
class StoredResult:
    """The records of the benchmarks that were timed (pytest-benchmark ``benchmarks`` entries, in collection order),
    and the tests that failed (nodeid -> message) or were skipped (nodeid -> reason)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass
class _Held:
    """The limit waiting in the limit worker, and the rounds it has given while waiting."""

    nodeid: str
    calls: Calls
    rounds: list[Rounds] = field(default_factory=list)


def run_stored(workers: Sequence[WorkerProcess], collected: Collected, progress: Progress,
               entry_budget: Budget = ENTRY_BUDGET, other_budget: Budget = OTHER_BUDGET) -> StoredResult:
    """Time every benchmark ``collected`` found, with ``workers`` = (entry worker, limit worker) of the same tree."""
    return _StoredRun(workers, collected, progress, entry_budget, other_budget).run()


class _StoredRun:
    def __init__(self, workers: Sequence[WorkerProcess], collected: Collected, progress: Progress,
                 entry_budget: Budget, other_budget: Budget) -> None:
        self.entries, self.limits = workers
        self.items = collected.items
        self.clock = collected.clock
        self.progress = progress
        self.entry_budget, self.other_budget = entry_budget, other_budget
        self.result = StoredResult()
        self.held: _Held | None = None
        self.cpus = CpuChooser()
        self.by_nodeid: dict[str, dict[str, Any]] = {}
        names = collected.benchmarks()
        self.limit_names = [n for n in names if self.items[n]["role"] == LIMIT]
        self.group_limit: dict[str, str] = {}
        for name in self.limit_names:
            self.group_limit.setdefault(self.items[name]["group"], name)
        self.others = _grouped([n for n in names if n not in self.limit_names], self.items)
        self.order = names

    def run(self) -> StoredResult:
        for nodeid in self.others:
            self._entry(nodeid)
        self._release()
        for nodeid in self.limit_names:
            if nodeid not in self.by_nodeid and nodeid not in self.result.failed and nodeid not in self.result.skipped:
                self._alone(self.limits, nodeid, self.other_budget)
        self.result.records = [self.by_nodeid[n] for n in self.order if n in self.by_nodeid]
        for reason, count in skip_reasons(self.result.skipped).items():
            self.progress(f"  {count} benchmark(s) skipped: {reason}")
        return self.result

    def _pin(self, *nodeids: str) -> None:
        """Both workers on the idlest CPUs, as many as the benchmarks ``nodeids`` run threads at once."""
        cpus = self.cpus.choose(max(self.items[n].get("threads", 1) for n in nodeids), self._own_seconds())
        if cpus is not None:
            self.entries.pin(cpus)
            self.limits.pin(cpus)
            self.cpus.pinned(self._own_seconds())

    def _own_seconds(self) -> float:
        return self.entries.cpu_seconds() + self.limits.cpu_seconds()

    def _entry(self, nodeid: str) -> None:
        ready = start(self.entries, nodeid)
        if ready["ev"] == "done":
            self._ended(nodeid, Finished.of(ready))
            return
        limit = self.group_limit.get(ready["group"])
        held = self._hold(limit) if limit is not None else None
        role = self.items[nodeid]["role"]
        budget = self.entry_budget if role in (None, ENTRY) else self.other_budget
        self._pin(nodeid, *([held.nodeid] if held is not None else []))
        if held is None:
            try:
                rounds = time_alone_or_beside([Side(self.entries)], [Calls.of(ready)], budget, _alone_spread(budget))
            except RoundFailed as failure:
                self._ended(nodeid, Finished.of(failure.done))
                return
            self._store(nodeid, finish(self.entries), rounds.times[0], rounds.iterations[0], rounds)
            return
        sides = [Side(self.entries), Side(self.limits)]
        try:
            rounds = time_alone_or_beside(sides, [Calls.of(ready), held.calls], budget, _paired_spread(budget))
        except RoundFailed as failure:
            self._round_failed(nodeid, held, failure)
            return
        held.rounds.append(rounds)
        paired = {PAIRED_LIMIT_KEY: {"fullname": held.nodeid, "data": rounds.times[1]}}
        self._store(nodeid, finish(self.entries), rounds.times[0], rounds.iterations[0], rounds, paired)

    def _round_failed(self, nodeid: str, held: _Held, failure: RoundFailed) -> None:
        """A timed round raised: in the entry (it failed; the limit keeps waiting) or in the limit (it failed; the
        entry is skipped, and so are the limit's other entries, timed alone as if it had no limit)."""
        if failure.worker is self.entries:
            self._ended(nodeid, Finished.of(failure.done))
            return
        self.held = None
        self._ended(held.nodeid, Finished.of(failure.done))
        self.group_limit = {g: n for g, n in self.group_limit.items() if n != held.nodeid}
        self._ended(nodeid, finish(self.entries, f"its limit {held.nodeid} failed in a timed round"))

    def _hold(self, limit: str) -> _Held | None:
        """The limit ``limit`` waiting in the limit worker (started now unless it already is); None when it could
        not be started (it skipped or failed: its entries are then timed alone)."""
        if self.held is not None and self.held.nodeid == limit:
            return self.held
        self._release()
        ready = start(self.limits, limit)
        if ready["ev"] == "done":
            self._ended(limit, Finished.of(ready))
            self.group_limit = {g: n for g, n in self.group_limit.items() if n != limit}
            return None
        self.held = _Held(limit, Calls.of(ready))
        return self.held

    def _release(self) -> None:
        """Let the waiting limit finish and store the record of its rounds (added to those of an earlier wait)."""
        held, self.held = self.held, None
        if held is None:
            return
        finished = finish(self.limits)
        if not held.rounds:  # its entry stopped before timing: the limit is timed alone at the end
            return
        times = (self.by_nodeid[held.nodeid]["stats"]["data"] if held.nodeid in self.by_nodeid else [])
        times += [t for rounds in held.rounds for t in rounds.times[1]]
        last = held.rounds[-1]
        self._store(held.nodeid, finished, times, last.iterations[1], last)

    def _alone(self, worker: WorkerProcess, nodeid: str, budget: Budget) -> None:
        ready = start(worker, nodeid)
        if ready["ev"] == "done":
            self._ended(nodeid, Finished.of(ready))
            return
        self._pin(nodeid)
        try:
            rounds = time_alone_or_beside([Side(worker)], [Calls.of(ready)], budget, _alone_spread(budget))
        except RoundFailed as failure:
            self._ended(nodeid, Finished.of(failure.done))
            return
        self._store(nodeid, finish(worker), rounds.times[0], rounds.iterations[0], rounds)

    def _store(self, nodeid: str, finished: Finished, times: list[float], calls: int, rounds: Rounds,
               extra: dict[str, Any] | None = None) -> None:
        if finished.outcome != PASSED:
            self._ended(nodeid, finished)
            return
        again = nodeid in self.by_nodeid  # a limit timed beside another entry of its group: its rounds add up
        record = benchmark_record(nodeid, finished, times, calls, rounds, extra, self.clock)
        self.by_nodeid[nodeid] = record
        figure = natural_figure(finished.extra_info) or ""
        counted = f"{len(times)} rounds in all, beside each entry of its group" if again else f"{len(times)} rounds"
        self.progress(f"  {short_name(nodeid)}  {figure}  {counted} ({rounds.stop})")

    def _ended(self, nodeid: str, finished: Finished) -> None:
        if finished.outcome == PASSED:
            finished = Finished("skipped", "it never called its benchmark fixture", finished.name, finished.group,
                                finished.params, finished.param, finished.extra_info)
        if finished.outcome == "failed":
            self.result.failed[nodeid] = finished.message
            self.progress(f"  {short_name(nodeid)}  FAILED: {_first_line(finished.message)}")
        else:
            self.result.skipped[nodeid] = finished.message  # said once per reason at the end


def _grouped(names: list[str], items: dict[str, dict[str, Any]]) -> list[str]:
    """``names`` with the benchmarks of one static group together, groups in order of first appearance."""
    first: dict[Any, int] = {}
    for index, name in enumerate(names):
        first.setdefault(items[name]["group"] or name, index)
    return sorted(names, key=lambda n: first[items[n]["group"] or n])


def _paired_spread(budget: Budget) -> Callable[[list[np.ndarray]], float]:
    return lambda times: half_width(log_ratios(times[1], times[0]), budget.confidence)


def _alone_spread(budget: Budget) -> Callable[[list[np.ndarray]], float]:
    return lambda times: half_width(np.log(times[0]), budget.confidence)


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
