"""A/B mode's run: every benchmark both versions have, timed on sets of process pairs (docs/benchmark-gate.md).

The workers come in process pairs (A = the ref's tree, B = the working tree), in sets of ``Settings.process_pairs``.
For each benchmark the workers of two process pairs at a time set it up (concurrently), make the same calls per
round, and their rounds go A1 B1 A2 B2 then B1 A1 B2 A2 (``harness.paired.engine.round_order``) on the CPUs other
programs left idlest, until ROUNDS rounds per worker or the group's share of the look's time budget. Each process pair
then gives one pair value (``harness.gate.pair_value``) and ``harness.gate.decide`` judges the pair values so far; an
entry it leaves undecided is timed on the next set (opened on first need), at most ``Settings.looks`` sets, unless its
scatter says that no number of pairs up to that many could settle it (``harness.gate.worth_more_pairs``). Limits and
peers run the same code on both sides, so they are skipped unless asked for (``references``); then they get half the
first set's pairs only (``reference_pairs``). A benchmark on one side only is timed alone and listed as new or missing.

The run files keep every round (pytest-benchmark JSON; ``stats.data`` pair by pair, options ``pair_rounds``) and the
settings (RUN_KEY), so the report recomputes the same pair values and the same decisions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from harness.bench_schema import ENTRY, MODE_AB, short_name, work_change
from harness.gate import ROUND_SECONDS, ROUNDS, Decision, Settings, Verdict, decide, pair_values, worth_more_pairs
from harness.paired.cpus import CpuChooser
from harness.paired.engine import STOP_BUDGET, Budget, Calls, RoundFailed, Rounds, Side
from harness.paired.process import WorkerError, WorkerProcess, describe_status
from harness.paired.runfile import CpuUse, benchmark_record, run_document
from harness.paired.session import (
    FAILED,
    PASSED,
    SKIPPED,
    Collected,
    Finished,
    Outcome,
    finish,
    release_all,
    run_same,
    skip_reasons,
    start,
    time_alone_or_beside,
)

__all__ = ["NOT_A_CHANGE", "AbResult", "WorkerSet", "WorkerSets", "look_budget", "pair_groups", "reference_pairs", "run_ab"]

NOT_A_CHANGE = ("a limit or peer: the same code on both sides, which A/B mode does not time (--references times "
                "them, for their figures)")

WorkerSet = tuple[Sequence[WorkerProcess], Sequence[Collected]]


class WorkerSets(Protocol):
    """The worker sets of a run: ``sets(k)`` gives set k (0 = the first) as process pairs in turn (A, B, A, B, ...)
    and what each collected, starting it on its first call; ``opened()`` lists the workers of every set started so
    far (whose CPU time the CPU chooser credits); ``discard(k)`` kills set k's workers (one died or hung), so the next
    ``sets(k)`` starts the set afresh."""

    def __call__(self, k: int) -> WorkerSet: ...

    def opened(self) -> list[WorkerProcess]: ...

    def discard(self, k: int) -> None: ...


@dataclass
class AbResult:
    """The two run documents (A = the ref, B = the working tree), the tests that failed on each side (nodeid ->
    message), and the tests skipped (nodeid -> reason)."""

    documents: tuple[dict[str, Any], dict[str, Any]]
    failed: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    skipped: dict[str, str] = field(default_factory=dict)


def look_budget(seconds: float) -> Budget:
    """How one look measures: rounds of ROUND_SECONDS until ROUNDS rounds per worker or ``seconds`` of rounds (all
    workers together), but at least 4 rounds per worker (each order twice), so that one disturbed round cannot decide
    a pair's median (with 2, a 124 ms mock GPU reduction's pairs scattered by 5%, with 4 by 1.2-1.9%)."""
    return Budget(round_s=ROUND_SECONDS, min_rounds=4, max_rounds=ROUNDS, seconds=seconds, precision=1e-12)


def run_ab(open_set: WorkerSets, ref: str, progress: Callable[[str], None], settings: Settings,
           planted: float | None = None, references: bool = False) -> AbResult:
    """Time every benchmark of both sides (see the module doc) and return the run documents. ``ref`` is recorded as
    the user named it; ``planted`` stretches B's rounds by that factor (``--plant-slowdown``; A's workers spin as
    long after each round, untimed); ``references``: time the limits and peers too (else they are listed as skipped:
    the same code on both sides, they cannot regress). Raises ValueError when set 0 is not (A, B) process pairs."""
    workers, collected = open_set(0)
    if not workers or len(workers) % 2 or len(collected) != len(workers):
        raise ValueError(f"A/B workers come in (A, B) process pairs, got {len(workers)} workers")
    plan = _Plan.of(collected)
    run = _Run(open_set, settings, settings.level(plan.entries), planted, progress)
    for index, nodeid in enumerate(plan.common):
        if (reason := _skipped_on_both(collected, nodeid)) is not None:
            run.result.skipped[nodeid] = reason
        elif plan.roles[nodeid] != ENTRY and not references:
            run.result.skipped[nodeid] = NOT_A_CHANGE
        else:
            run.benchmark(nodeid, index, plan.roles[nodeid], collected)
    for side, names in enumerate(plan.one_sided):
        for nodeid in names:
            if (collected[side].items[nodeid]["role"] or ENTRY) != ENTRY and not references:
                run.result.skipped[nodeid] = NOT_A_CHANGE
            else:
                run.alone(side, nodeid, collected[side].clock)
    for reason, count in skip_reasons(run.result.skipped).items():
        progress(f"  {count} benchmark(s) skipped: {reason}")
    pairing = uuid.uuid4().hex
    for side, label in ((0, "A"), (1, "B")):
        info = {"mode": MODE_AB, "side": label, "pairing": pairing, "ref": ref, "planted": planted,
                "entries": plan.entries, **settings.as_dict()}
        run.result.documents[side].update(run_document(collected[side], run.records[side], info))
    return run.result


@dataclass(frozen=True)
class _Plan:
    """What a run times: the benchmarks both sides have (``common``, B's order) with their roles, how many of them are
    entries not skipped on both sides at collection (at least 1: the family the correction divides by), and those on
    one side only (A's, B's)."""

    common: list[str]
    roles: dict[str, str]
    entries: int
    one_sided: tuple[list[str], list[str]]

    @classmethod
    def of(cls, collected: Sequence[Collected]) -> _Plan:
        a_names, b_names = collected[0].benchmarks(), collected[1].benchmarks()
        common = [n for n in b_names if n in set(a_names)]
        roles = {n: collected[1].items[n]["role"] or collected[0].items[n]["role"] or ENTRY for n in common}
        judged = [n for n in common if _skipped_on_both(collected, n) is None]
        entries = max(1, sum(1 for n in judged if roles[n] == ENTRY))
        return cls(common, roles, entries, ([n for n in a_names if n not in set(b_names)],
                                            [n for n in b_names if n not in set(a_names)]))


@dataclass
class _Look:
    """One benchmark timed on one set of process pairs: the outcome (``outcome.rounds.times[i]`` from the worker at
    position i, of side ``sides[i]``) and other programs' CPUs during its rounds."""

    outcome: Outcome
    sides: list[int]
    others: float | None

    def side_rounds(self, side: int) -> list[list[float]]:
        """The rounds of each process pair's worker of ``side`` (seconds per call, in time order)."""
        times = self.outcome.rounds.times if self.outcome.rounds else ()
        return [list(t) for t, s in zip(times, self.sides) if s == side]

    def work_change(self) -> str | None:
        """How B's work per call differs from A's (``harness.bench_schema.work_change`` of what their first workers
        recorded), or None."""
        first = {side: self.outcome.finished[self.sides.index(side)] for side in (0, 1)}
        return work_change(first[0].extra_info, first[1].extra_info)

    def by_side(self) -> dict[int, Finished]:
        """How each side ended: a failure of one of its workers first, then a skip (a later group of the look may
        skip where an earlier one passed), then a pass."""
        rank = {FAILED: 0, SKIPPED: 1}
        finished: dict[int, Finished] = {}
        for position, side in enumerate(self.sides):
            ended = self.outcome.finished[position]
            if side not in finished or rank.get(ended.outcome, 2) < rank.get(finished[side].outcome, 2):
                finished[side] = ended
        return finished


class _Run:
    """The state of one A/B run: the worker sets, the CPU chooser, the records of both sides and the result."""

    def __init__(self, open_set: WorkerSets, settings: Settings, level: float, planted: float | None,
                 progress: Callable[[str], None]) -> None:
        self.open_set, self.settings, self.level, self.planted, self.progress = open_set, settings, level, planted, progress
        self.chooser = CpuChooser()
        self.records: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        self.result = AbResult(({}, {}))

    def benchmark(self, nodeid: str, index: int, role: str, collected: Sequence[Collected]) -> None:
        """Time ``nodeid`` on one set after another until decided (entries) or once (limits and peers)."""
        threads = max(c.items[nodeid].get("threads", 1) for c in collected[:2])
        chosen = self.chooser.choose(threads, self._own_seconds())
        pairs = self.settings.process_pairs if role == ENTRY else reference_pairs(self.settings.process_pairs)
        timed = self._looks(nodeid, index, self.settings.looks if role == ENTRY else 1, chosen, pairs)
        if timed is None:
            return
        looks, decision = timed
        for side in (0, 1):
            self.records[side].append(self._record(nodeid, looks, side, collected[side].clock, threads))
        low, high = decision.interval
        extra = "" if role == ENTRY else f", {role}"
        verdict = (f"not judged ({decision.reason.split(':')[0]})" if decision.verdict is Verdict.UNJUDGED
                   else decision.verdict.value)
        self.progress(f"  {short_name(nodeid)}  {decision.change:+.1%} [{low:+.1%}, {high:+.1%}] {verdict} "
                      f"({decision.pairs} process pairs{extra})")

    def _looks(self, nodeid: str, index: int, most: int, chosen: set[int] | None,
               pairs: int) -> tuple[list[_Look], Decision] | None:
        """Time ``nodeid`` on the first ``pairs`` process pairs of set 0, then of more sets while ``decide`` leaves it
        undecided, at most ``most`` sets; None when a look failed (recorded)."""
        looks: list[_Look] = []
        while True:
            k = len(looks)
            try:
                if k == 1:  # set 0 keeps this module's fixtures: free their memory while other sets run
                    release_all(self.open_set(0)[0])
            except WorkerError as error:
                self._lost(0, nodeid, error)
                return None
            try:
                look = self._look(k, nodeid, index, chosen, pairs)
            except WorkerError as error:
                self._lost(k, nodeid, error)
                return None
            if not look.outcome.ok:
                by_side = look.by_side()
                _not_timed(nodeid, by_side, self.result, self.progress)
                if 1 in by_side and by_side[1].outcome == PASSED:
                    return None
                self._try_b(k, nodeid)
                return None
            looks.append(look)
            values = _values(looks)
            decision = decide(values, min_effect=self.settings.min_effect, level=self.level,
                              confidence=self.settings.confidence)
            if (changed := look.work_change()) is not None:  # the report judges it so too (BenchmarkRecord)
                return looks, replace(decision, verdict=Verdict.UNJUDGED, reason=f"work changed: {changed}")
            if decision.decided or len(looks) >= most:
                return looks, decision
            if not worth_more_pairs(values, most * self.settings.process_pairs, min_effect=self.settings.min_effect,
                                    level=self.level, confidence=self.settings.confidence):
                self.progress(f"  {short_name(nodeid)}: its pairs scatter too much for {most * self.settings.process_pairs}"
                              f" process pairs to settle it: not timed further")
                return looks, decision
            low, high = decision.interval
            self.progress(f"  {short_name(nodeid)}  {decision.change:+.1%} [{low:+.1%}, {high:+.1%}] on "
                          f"{decision.pairs} pairs: undecided, timing {self.settings.process_pairs} more")

    def alone(self, side: int, nodeid: str, clock: str) -> None:
        """Time a benchmark that only ``side`` has, on that side's first worker."""
        try:
            self._alone(self.open_set(0)[0][side], side, nodeid, clock)
        except WorkerError as error:
            self._lost(0, nodeid, error)

    def _lost(self, k: int, nodeid: str, error: WorkerError) -> None:
        """A worker of set ``k`` died or hung in ``nodeid``: record it as failed on each side whose worker is gone,
        in that worker's words (on both sides when none is: the channel broke), and start the set afresh for the next
        benchmark."""
        failures: dict[int, Finished] = {}
        for position, worker in enumerate(self.open_set(k)[0]):
            if worker.exit_status is not None and position % 2 not in failures:
                failures[position % 2] = _failure(nodeid, _why_gone(worker, error))
        summary = str(error).split(" Last lines of ")[0]
        self.open_set.discard(k)
        _not_timed(nodeid, failures or {0: _failure(nodeid, summary), 1: _failure(nodeid, summary)}, self.result,
                   self.progress)
        self._try_b(k, nodeid)

    def _try_b(self, k: int, nodeid: str) -> None:
        """``nodeid`` failed on A while B's outcome is unknown (its workers were stopped before their own timed calls,
        or lost with A's): run it on a B worker of set ``k`` for one round of one call (so a benchmark that reads its
        own stats afterwards finds them) and let the test finish, so that a benchmark broken on both sides fails the
        run instead of passing as "failed on A only"."""
        if nodeid not in self.result.failed[0] or nodeid in self.result.failed[1]:
            return
        worker = self.open_set(k)[0][1]
        try:
            ready = start(worker, nodeid, keep=False)
            if ready["ev"] == "done":
                finished = Finished.of(ready)
            else:
                Side(worker).time(1)
                finished = finish(worker)
        except RoundFailed as failure:
            finished = Finished.of(failure.done)
        except WorkerError as error:
            self.open_set.discard(k)
            finished = _failure(nodeid, _why_gone(worker, error))
        if finished.outcome == FAILED:
            _not_timed(nodeid, {1: finished}, self.result, self.progress)

    def _alone(self, worker: WorkerProcess, side: int, nodeid: str, clock: str) -> None:
        ready = start(worker, nodeid)
        if ready["ev"] == "done":
            _not_timed(nodeid, {side: Finished.of(ready)}, self.result, self.progress)
            return
        budget = look_budget(self.settings.budget_seconds)
        try:
            rounds = time_alone_or_beside([Side(worker)], [Calls.of(ready)], budget, lambda _: float("inf"))
        except RoundFailed as failure:
            _not_timed(nodeid, {side: Finished.of(failure.done)}, self.result, self.progress)
            return
        finished = finish(worker)
        if finished.outcome != PASSED:
            _not_timed(nodeid, {side: finished}, self.result, self.progress)
            return
        self.progress(f"  {short_name(nodeid)}  {'new' if side else 'missing'}: on one side only, timed alone")
        self.records[side].append(benchmark_record(nodeid, finished, rounds.times[0], rounds.iterations[0], rounds,
                                                   clock=clock))

    def _look(self, k: int, nodeid: str, index: int, chosen: set[int] | None, pairs: int) -> _Look:
        """Time ``nodeid`` on the first ``pairs`` process pairs of worker set ``k``, with the look's budget in
        proportion, two process pairs at a time (``pair_groups``): only those hold the benchmark's buffers, and the
        next two reuse the memory the last ones freed (on this VM a page the kernel takes back costs far more to
        touch again: a 256 MiB copy-in's look took 17 s with all 12 workers at once, 12 s two pairs at a time).
        Set 0 runs every benchmark in turn and keeps each module's fixtures for the next; a later set runs only
        undecided ones, so it tears each down completely."""
        workers = self.open_set(k)[0][:2 * pairs]
        sides = _sides_of(pairs, index)
        order = [2 * (position // 2) + side for position, side in enumerate(sides)]
        # a planted run: B spins inside its timed span, A as long right after its own, so both load the CPU alike
        timed = [Side(workers[i], self.planted or 1.0, untimed=not side) for i, side in zip(order, sides)]
        others = _OthersOnCpus(self.chooser, self.open_set.opened())
        outcomes: list[Outcome] = []
        for group in pair_groups(pairs):
            budget = look_budget(self.settings.budget_seconds * len(group) / self.settings.process_pairs)
            positions = [2 * p + s for p in group for s in (0, 1)]
            outcomes.append(run_same([timed[i] for i in positions], nodeid, budget, lambda _: float("inf"), chosen,
                                     lambda: self.chooser.pinned(self._own_seconds()),
                                     others if chosen is not None else None, keep=k == 0))
            if not outcomes[-1].ok:
                break
        started = sum(len(o.finished) for o in outcomes)
        return _Look(_joined(nodeid, outcomes), sides[:started], others.cpus)

    def _record(self, nodeid: str, looks: Sequence[_Look], side: int, clock: str, threads: int) -> dict[str, Any]:
        """The run-file record of one side: the rounds of every process pair in turn (options ``pair_rounds``)."""
        first = looks[0]
        position = first.sides.index(side)
        rounds = first.outcome.rounds
        if rounds is None:
            raise ValueError(f"{nodeid} has no rounds to record")
        per_pair = [r for look in looks for r in look.side_rounds(side)]
        others = [look.others for look in looks if look.others is not None]
        return benchmark_record(nodeid, first.outcome.finished[position], [t for r in per_pair for t in r],
                                rounds.iterations[position], rounds, clock=clock,
                                pair_rounds=[len(r) for r in per_pair],
                                cpus=CpuUse(threads, max(others) if others else None))

    def _own_seconds(self) -> float:
        """CPU seconds used so far by every worker (and what they started) and by this controller process."""
        return _own_seconds(self.open_set.opened())


def pair_groups(pairs: int) -> list[list[int]]:
    """The process pairs of a look in the groups that are timed together: two at a time (``round_order`` needs two
    pairs so that no worker's round follows its own), an odd last pair joining the group before it (one pair alone
    when there is only one)."""
    groups = [list(range(first, min(first + 2, pairs))) for first in range(0, pairs, 2)]
    if len(groups) > 1 and len(groups[-1]) == 1:
        last = groups.pop()
        groups[-1] += last
    return groups


def _joined(nodeid: str, outcomes: Sequence[Outcome]) -> Outcome:
    """The groups' outcomes of one look as one: workers in order, rounds only when every group has them."""
    finished = tuple(f for outcome in outcomes for f in outcome.finished)
    if not all(outcome.rounds for outcome in outcomes):
        return Outcome(nodeid, finished, None)
    rounds = [outcome.rounds for outcome in outcomes if outcome.rounds]
    stop = next((r.stop for r in rounds if r.stop == STOP_BUDGET), rounds[-1].stop)  # the budget, if any group hit it
    return Outcome(nodeid, finished, Rounds(tuple(t for r in rounds for t in r.times),
                                            tuple(i for r in rounds for i in r.iterations), stop,
                                            sum(r.seconds for r in rounds)))


def reference_pairs(process_pairs: int) -> int:
    """Process pairs a limit or a peer is timed on (with ``--references``): half a look's, rounded up, and at least two
    (a t-test needs two values; ``pair_groups`` times two together). Their verdicts never fail a run (the same code on
    both sides, timed for the report's figures), so they get half the workers and budget of an entry's look, once."""
    return max(2, (process_pairs + 1) // 2)


def _failure(nodeid: str, message: str) -> Finished:
    """How ``nodeid`` ended on a side whose worker was lost: failed, with ``message``."""
    return Finished(FAILED, message, nodeid.rsplit("::", 1)[-1], None, None, None, {})


def _why_gone(worker: WorkerProcess, error: WorkerError) -> str:
    """Why ``worker`` is gone, with its log: the error's own words when it is the worker that raised it (a hang),
    else how it exited."""
    said = str(error).split(" Last lines of ")[0]
    if said.startswith(f"the {worker.label} "):
        return f"{said} (log: {worker.log})"
    return f"the {worker.label} benchmark worker exited: {describe_status(worker.exit_status or 0)} (log: {worker.log})"


def _values(looks: Sequence[_Look]) -> np.ndarray:
    """The pair value of every process pair of ``looks``, in order."""
    a = [r for look in looks for r in look.side_rounds(0)]
    b = [r for look in looks for r in look.side_rounds(1)]
    return pair_values(a, b)


def _skipped_on_both(collected: Sequence[Collected], nodeid: str) -> str | None:
    """B's reason when ``nodeid`` carries an unconditional skip on both sides (``Collected.items``' ``skip``), so it
    is recorded without being started; None when either side would run it."""
    reasons = [c.items[nodeid].get("skip") for c in collected[:2]]
    return reasons[1] if all(reasons) else None


def _sides_of(pairs: int, index: int) -> list[int]:
    """The side (0 = A, 1 = B) of each worker position of ``pairs`` process pairs: A first in every pair for the
    even-numbered benchmarks, B first for the others."""
    return [side for _ in range(pairs) for side in ((0, 1) if index % 2 == 0 else (1, 0))]


@dataclass
class _OthersOnCpus:
    """``run_same``'s ``measured``: ``cpus`` = how many CPUs' worth of time other programs took on the benchmark's
    CPUs during its rounds, the most over a look's groups (``CpuChooser.others_cpus``; None where unknown), recorded
    in the run file as information."""

    chooser: CpuChooser
    workers: Sequence[WorkerProcess]
    cpus: float | None = None

    def __call__(self) -> None:
        cpus = self.chooser.others_cpus(_own_seconds(self.workers))
        if cpus is not None:
            self.cpus = cpus if self.cpus is None else max(self.cpus, cpus)


def _own_seconds(workers: Sequence[WorkerProcess]) -> float:
    """CPU seconds used so far by ``workers`` (and what they started) and by this controller process."""
    return sum(worker.cpu_seconds() for worker in workers) + time.process_time()


def _not_timed(nodeid: str, finished: dict[int, Finished], result: AbResult, progress: Callable[[str], None]) -> None:
    """Record and say why ``nodeid`` was not timed: a failure on each side that failed (``finished``: side -> how
    one of its workers ended, a failure first), else the skip reason."""
    failed = False
    for side, label in ((0, "A"), (1, "B")):
        if side in finished and finished[side].outcome == FAILED:
            result.failed[side][nodeid] = finished[side].message
            progress(f"  {short_name(nodeid)}  FAILED on {label}: {finished[side].message.strip().splitlines()[-1][:200]}")
            failed = True
    if failed:
        return
    result.skipped[nodeid] = next((f.message for f in finished.values() if f.message), "not run")
