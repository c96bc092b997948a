"""A/B mode's run: every benchmark that both versions have, timed on both in alternating rounds.

The A workers run the git ref's tree in its own environment (``harness.paired.reftree``), the B workers the working
tree. Workers come in process pairs (A, B): two processes of the same code differ by a few percent in ways no number
of rounds removes (where their buffers and objects landed: measured on the 2-core reference VM, a 4 KiB copy 6.3% and
numpy.copyto of 1 MiB 12.5% apart in one pair of processes, while the next pair agreed), so each benchmark is timed
on several pairs at once and their per-pair ratios are pooled. The median of the pooled ratios moves only when most
process pairs agree; one unlucky pair cannot make a verdict.

For each benchmark every worker sets it up (concurrently), every worker makes the same calls per round (calibrated so
that a round of the quickest lasts ``Budget.round_s``), and rounds go A1 B1 A2 B2 ... then B1 A1 B2 A2 ...
(``harness.paired.engine.round_order``), so the two rounds of a pair are always adjacent, each side goes first in
every other pair, and no worker follows itself, on the same CPUs (as many as the benchmark runs threads), until the
CI of the median per-pair ratio is narrow enough or the benchmark's time budget is spent. Entries get ENTRY_BUDGET on
every process pair; limits and peers, the same code on both sides, only show whether the two environments differ and
get CONTROL_BUDGET on the first process pair (their setup costs as much on every worker, and a verdict of theirs
never fails the run). An entry still undecided after its budget and extension (``Undecided``), or that looks changed,
is timed again on as many process pairs more, started for the first such entry, and its rounds from both blocks are
pooled: a change seen on one set of process pairs counts only once a second set shows it too, as three pairs of
unchanged code that a state scatters can agree by chance (x1.072, 1.069, 1.058 on a CLOUD launch under a CPU hog);
one still undecided on those gets a third set (MORE_BLOCKS). A benchmark on one side only is timed alone on that
side's first worker, so the report lists it as new or missing with its figures, never judged.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from harness.bench_schema import ENTRY, MODE_AB
from harness.paired.cpus import CpuChooser
from harness.paired.engine import Budget, RoundFailed, Side
from harness.paired.process import WorkerProcess
from harness.paired.runfile import CpuUse, benchmark_record, run_document
from harness.paired.session import FAILED, PASSED, Collected, Finished, Outcome, finish, run_same, start, time_alone_or_beside
from harness.report.paired import half_width, judge, log_ratios, median_ci, process_pairs_disagree, process_ratios, sign_test_p

__all__ = ["CONTROL_BUDGET", "ENTRY_BUDGET", "MORE_BLOCKS", "PROCESS_PAIRS", "AbResult", "MorePairs", "Undecided",
           "entry_precision", "more_pairs_budget", "run_ab"]

# 20 pairs at least: the run's p-values are Holm-adjusted over its ~50 entries, so an entry needs p < 0.01 / 50, and
# a two-sided sign test of n pairs cannot go below 2 / 2**n (n = 14: 1.2e-4, reached only when every pair
# agrees); with 14 pairs and a 4 s budget, slow entries (0.1-0.3 s a call) planted 5% slower missed alpha by a
# little (p 0.01-0.2), so they get 20 pairs and 6 s; 24 in fact, so that each of three process pairs has the 8
# rounds that let its median count in ``process_pairs_disagree``
# an entry that looks changed but is not yet significant (a slow one planted 5% slower: p 0.02-0.06 after 24 pairs)
# gets up to 12 s more: 20 more pairs of a 0.3 s call
# precise enough at a CI half-width of half the minimum effect (run_ab: 1.5% for the default 3%): an unchanged
# entry's interval then stays inside the minimum effect and a 5% change's clears 1 by 3.5%; 1% cost 50 s more of a
# self-A/B run (220 s of rounds) for no verdict that changed
ENTRY_BUDGET = Budget(seconds=6.0, confidence=0.95, min_rounds=24, undecided_seconds=12.0, precision=0.015)
CONTROL_BUDGET = Budget(seconds=1.0, confidence=0.95, precision=0.02, min_rounds=6)
# process pairs per run: with three, the pooled median follows the two that agree, so a false alarm needs two pairs
# of unchanged code that err the same way by more than the minimum effect
PROCESS_PAIRS = 3
# an entry undecided or changed on its first process pairs is timed on as many again (``run_ab``'s ``more_pairs``),
# and once more if still undecided: with six pairs the t-test across them (``process_pairs_disagree``) carries a 5%
# change through process states that scatter by 3% (t = 4.1 where 3.36 is needed), with three it needs them within
# 1.5%; planted 5% slowdowns left undecided on six (a CLOUD copy at p = 0.018) get nine. States that scatter the
# pairs by 6% carry a change that is not there on three pairs (both rules) 1.7% of the time, and still on six
# 0.3% (simulated, 20000 runs)
MORE_BLOCKS = 2
_UNDECIDED = "undecided"


# ``more_pairs(k)``: the k-th set of more process pairs (k = 1, 2, ...; opened on the first call for k, the same set
# after): the workers A, B, A, B, ... and what they collected
MorePairs = Callable[[int], tuple[Sequence[WorkerProcess], Sequence[Collected]]]


@dataclass
class AbResult:
    """The two run documents (A = the ref, B = the working tree), and the tests that failed on each side
    (nodeid -> message) or were skipped (nodeid -> reason)."""

    documents: tuple[dict[str, Any], dict[str, Any]]
    failed: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    skipped: dict[str, str] = field(default_factory=dict)


def run_ab(workers: Sequence[WorkerProcess], collected: Sequence[Collected], ref: str, progress: Callable[[str], None],
           *, planted: float | None = None, entry_budget: Budget = ENTRY_BUDGET,
           control_budget: Budget = CONTROL_BUDGET, min_effect: float = 0.03, alpha: float = 0.01,
           more_pairs: MorePairs | None = None) -> AbResult:
    """Time every benchmark that the A workers (the ref) and the B workers both collected. ``workers`` and
    ``collected`` hold process pairs in turn: A1, B1, A2, B2, ... (at least one pair). A budget's ``min_rounds`` and
    ``seconds`` count pairs and seconds of all process pairs together; an entry is precise enough at a CI half-width
    of half ``min_effect`` (in log ratio) where that is below ``entry_budget.precision`` (``entry_precision``).
    ``planted`` stretches B's rounds by that factor (``--plant-slowdown``; A's workers spin as long after each
    round, untimed). ``min_effect``/``alpha`` shape the progress lines' CI and which entries are still undecided
    (``Undecided``); the report decides the verdicts from
    the run files (all entries together: ``harness.report.compare``). ``more_pairs`` opens more process pairs for the
    entries still undecided after their budget and its extension: each is then timed on a set of them too, and on a
    second set if still undecided (MORE_BLOCKS), and their rounds join the pooled ones (the process pairs' states are
    what such an entry lacks). Raises ValueError for an odd or empty ``workers``."""
    if not workers or len(workers) % 2 or len(collected) != len(workers):
        raise ValueError(f"A/B workers come in (A, B) process pairs, got {len(workers)} workers")
    pairs = len(workers) // 2
    entry_budget = entry_precision(entry_budget, min_effect)
    a_names, b_names = collected[0].benchmarks(), collected[1].benchmarks()
    common = [n for n in b_names if n in set(a_names)]
    roles = {n: collected[1].items[n]["role"] or collected[0].items[n]["role"] or ENTRY for n in common}
    entries = sum(1 for role in roles.values() if role == ENTRY)
    records: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    result = AbResult(({}, {}))
    timer = _Timer(CpuChooser(), list(workers), planted)
    skipped_at_collection: dict[str, int] = {}
    for index, nodeid in enumerate(common):
        if (skip := _skipped_on_both(collected, nodeid)) is not None:
            result.skipped[nodeid] = skip
            skipped_at_collection[skip] = skipped_at_collection.get(skip, 0) + 1
            continue
        role = roles[nodeid]
        # a limit or peer never fails the run: one process pair shows enough (its rounds go A B B A, so a benchmark
        # whose round after its own runs warm reads noisier there, which can only hide a move, never make one)
        used = pairs if role == ENTRY else 1
        budget = _per_pair(entry_budget if role == ENTRY else control_budget, used)
        threads = max(c.items[nodeid].get("threads", 1) for c in collected[:2])
        chosen = timer.chooser.choose(threads, _own_seconds(timer.pool))
        undecided = Undecided(_sides_of(used, index), budget.confidence, min_effect, alpha / max(1, entries))
        blocks = [timer.block(workers[:2 * used], nodeid, index, budget, chosen, undecided)]
        while (blocks[-1].outcome.ok and role == ENTRY and more_pairs is not None and len(blocks) <= MORE_BLOCKS
               and (why := _time_more(blocks, undecided))):
            verb = "timing" if why == _UNDECIDED else "confirming"
            extra, _ = more_pairs(len(blocks))
            timer.join(extra)
            progress(f"  {nodeid}  {why} on {sum(b.pairs for b in blocks)} process pairs: {verb} it on "
                     f"{len(extra) // 2} more")
            blocks.append(timer.block(extra, nodeid, index, more_pairs_budget(entry_budget, len(extra) // 2,
                                                                              blocks[0].rounds_per_pair), chosen, None))
        failed = next((b for b in blocks if not b.outcome.ok), None)
        if failed is not None:
            _not_timed(nodeid, failed.by_side(), result, progress)
            continue
        for side in (0, 1):
            records[side].append(_record(nodeid, blocks, side, collected[side].clock, CpuUse(threads, blocks[0].others)))
        d = np.concatenate([block.log_ratios() for block in blocks])
        verdict = judge(d, alpha=alpha, confidence=budget.confidence, min_effect=min_effect)
        others = blocks[0].others
        shared = f" (other programs: {others:.2f} CPU of its {len(chosen or ())})" if (others or 0) >= 0.05 else ""
        progress(f"  {nodeid}  x{verdict.ratio:.3f} [{verdict.ci[0]:.3f}, {verdict.ci[1]:.3f}] {verdict.pairs} pairs "
                 f"({blocks[0].stop})" + ("" if role == ENTRY else f" ({role})") + shared)
    for reason, count in skipped_at_collection.items():
        progress(f"  {count} benchmark(s) SKIPPED on both sides at collection: {reason}")
    for side, names in ((1, [n for n in b_names if n not in set(a_names)]), (0, [n for n in a_names if n not in set(b_names)])):
        for nodeid in names:  # on one side only: timed alone, shown as new or missing, never judged
            record = _alone(workers[side], side, nodeid, control_budget, result, progress, collected[side].clock)
            if record is not None:
                records[side].append(record)
    pairing = uuid.uuid4().hex
    for side, label in ((0, "A"), (1, "B")):
        info = {"mode": MODE_AB, "side": label, "pairing": pairing, "ref": ref, "planted": planted,
                "process_pairs": pairs}
        result.documents[side].update(run_document(collected[side], records[side], info))
    return result


def more_pairs_budget(budget: Budget, pairs: int, first_rounds: int) -> Budget:
    """The budget of an entry on a later set of ``pairs`` process pairs: ``budget`` spread over them, without the
    extension for an undecided entry, and at most the ``first_rounds`` per pair that the first set took (at least
    its least rounds). The pooled median weighs every round alike, so a later set that ran on where the first stopped
    outweighed it: a planted 5% slowdown read x1.061 on three process pairs, then x1.015 pooled with three more, as 190
    rounds per pair of the second set (one of them a process in a rare state at x0.801) met 40 of the first."""
    spread = _per_pair(replace(budget, undecided_seconds=0.0), pairs)
    return replace(spread, max_rounds=max(spread.min_rounds, min(spread.max_rounds, first_rounds)))


def entry_precision(budget: Budget, min_effect: float) -> Budget:
    """``budget`` precise enough at a CI half-width (in log ratio) of half the minimum effect ``min_effect`` (a
    fraction) where that is narrower than its own precision."""
    if min_effect <= 0:
        return budget
    return replace(budget, precision=min(budget.precision, math.log1p(min_effect) / 2))


def _time_more(blocks: Sequence[_Block], undecided: Undecided) -> str | None:
    """Why ``blocks`` (one benchmark timed on sets of process pairs) need another set, or None: after the first,
    whatever is not decided unchanged with a CI that rules out the minimum effect (a change there is confirmed on a
    second set; a noisy entry whose median reads unchanged may still hide one: a planted 5% CLOUD copy read x1.022
    [0.989, 1.046] on three pairs); after more, still undecided."""
    if len(blocks) == 1:
        d = blocks[0].log_ratios()
        if undecided.unchanged(d):
            return None if undecided.rules_out_min_effect(d) else _UNDECIDED
        return _UNDECIDED if _still_undecided(blocks, undecided) else f"x{math.exp(float(np.median(d))):.3f}"
    return _UNDECIDED if _still_undecided(blocks, undecided) else None


def _still_undecided(blocks: Sequence[_Block], undecided: Undecided) -> bool:
    """``undecided`` asked of every block's rounds pooled, their process pairs side by side."""
    logs = [block.log_ratios() for block in blocks]
    processes = [r for block, d in zip(blocks, logs) for r in process_ratios(d, block.pairs)]
    return undecided.of(np.concatenate(logs), processes, min(d.size // b.pairs for b, d in zip(blocks, logs)))


def _skipped_on_both(collected: Sequence[Collected], nodeid: str) -> str | None:
    """B's reason when ``nodeid`` carries an unconditional skip on both sides (``Collected.items``' ``skip``), so it
    is recorded without being started; None when either side would run it."""
    reasons = [c.items[nodeid].get("skip") for c in collected[:2]]
    return reasons[1] if all(reasons) else None


def _sides_of(pairs: int, index: int) -> list[int]:
    """The side (0 = A, 1 = B) of each worker position of a block of ``pairs`` process pairs: A first in every pair
    for the even-numbered benchmarks, B first for the others."""
    return [side for _ in range(pairs) for side in ((0, 1) if index % 2 == 0 else (1, 0))]


@dataclass
class _Block:
    """One benchmark timed on some process pairs: the outcome (``outcome.rounds.times[i]`` from the worker at
    position i, of side ``sides[i]``) and other programs' CPUs during its rounds (``_OthersOnCpus``)."""

    outcome: Outcome
    sides: list[int]
    others: float | None

    @property
    def times(self) -> list[Any]:
        return list(self.outcome.rounds.times) if self.outcome.rounds else []

    @property
    def pairs(self) -> int:
        return len(self.sides) // 2

    @property
    def rounds_per_pair(self) -> int:
        """Rounds each of its workers took."""
        return len(self.times[0]) if self.times else 0

    @property
    def stop(self) -> str:
        return self.outcome.rounds.stop if self.outcome.rounds else ""

    def log_ratios(self) -> np.ndarray:
        return _pooled(self.times, self.sides)

    def side_rounds(self, side: int) -> list[float]:
        """This side's rounds in the order ``_interleaved`` stores them."""
        return _interleaved([t for t, s in zip(self.times, self.sides) if s == side])

    def by_side(self) -> dict[int, Finished]:
        """How each side ended: a failure of one of its workers first."""
        finished: dict[int, Finished] = {}
        for position, side in enumerate(self.sides):
            if side not in finished or self.outcome.finished[position].outcome == FAILED:
                finished[side] = self.outcome.finished[position]
        return finished


@dataclass
class _Timer:
    """Times one benchmark on a block of process pairs, on the CPUs ``chooser`` chose; ``pool``: every worker of the
    run, whose CPU seconds the chooser credits."""

    chooser: CpuChooser
    pool: list[WorkerProcess]
    planted: float | None

    def join(self, workers: Sequence[WorkerProcess]) -> None:
        self.pool += [w for w in workers if w not in self.pool]

    def block(self, workers: Sequence[WorkerProcess], nodeid: str, index: int, budget: Budget, chosen: set[int] | None,
              undecided: Undecided | None) -> _Block:
        sides = _sides_of(len(workers) // 2, index)
        order = [2 * (position // 2) + side for position, side in enumerate(sides)]
        # a planted run: B spins inside its timed span, A as long right after its own, so both load the CPU alike
        timed = [Side(workers[i], self.planted or 1.0, untimed=not side) for i, side in zip(order, sides)]
        others = _OthersOnCpus(self.chooser, self.pool)
        outcome = run_same(timed, nodeid, budget, _spread(budget, sides), chosen,
                           lambda: self.chooser.pinned(_own_seconds(self.pool)), undecided,
                           others if chosen is not None else None)
        return _Block(outcome, sides, others.cpus)


def _record(nodeid: str, blocks: Sequence[_Block], side: int, clock: str, cpus: CpuUse) -> dict[str, Any]:
    """The run-file record of one side: every block's rounds in turn (``pair_blocks`` says how, when more than one)."""
    first = blocks[0]
    position = first.sides.index(side)
    rounds = first.outcome.rounds
    if rounds is None:
        raise ValueError(f"{nodeid} has no rounds to record")
    rounds_of = [block.side_rounds(side) for block in blocks]
    times = [t for block_rounds in rounds_of for t in block_rounds]
    layout = [(b.pairs, len(r) // b.pairs) for b, r in zip(blocks, rounds_of)] if len(blocks) > 1 else None
    return benchmark_record(nodeid, first.outcome.finished[position], times, rounds.iterations[position], rounds,
                            clock=clock, process_pairs=sum(block.pairs for block in blocks), cpus=cpus,
                            pair_blocks=layout)


@dataclass
class _OthersOnCpus:
    """``run_same``'s ``measured``: ``cpus`` = how many CPUs' worth of time other programs took on the benchmark's
    CPUs during its rounds (``CpuChooser.others_cpus``; None where unknown). Asked before the tests finish: a server
    that a test stops takes its CPU seconds out of the workers' sum."""

    chooser: CpuChooser
    workers: Sequence[WorkerProcess]
    cpus: float | None = None

    def __call__(self) -> None:
        self.cpus = self.chooser.others_cpus(_own_seconds(self.workers))


def _own_seconds(workers: Sequence[WorkerProcess]) -> float:
    """CPU seconds used so far by the workers (and what they started) and by this controller process."""
    return sum(worker.cpu_seconds() for worker in workers) + time.process_time()


def _per_pair(budget: Budget, pairs: int) -> Budget:
    """``budget`` for rounds that each give ``pairs`` pairs: its least pairs spread over the process pairs."""
    return replace(budget, min_rounds=max(2, -(-budget.min_rounds // pairs)))


def _interleaved(rounds: Sequence[Sequence[float]]) -> list[float]:
    """The rounds of several workers of one side in the order they were taken: round 0 of each, round 1 of each, ..."""
    return [t for taken in zip(*rounds) for t in taken]


def _pooled(times: Sequence[Sequence[float]], sides: Sequence[int]) -> np.ndarray:
    """The per-pair log ratios B/A of every process pair, in the order ``_interleaved`` stores the rounds, given the
    rounds of each worker (``times[i]``, side ``sides[i]``; a pair's two workers are adjacent)."""
    a = _interleaved([t for t, side in zip(times, sides) if side == 0])
    b = _interleaved([t for t, side in zip(times, sides) if side == 1])
    return log_ratios(a, b)


def _alone(worker: WorkerProcess, side: int, nodeid: str, budget: Budget, result: AbResult,
           progress: Callable[[str], None], clock: str) -> dict[str, Any] | None:
    """Time a benchmark that only ``side`` has; None when it did not run (said in ``result`` and the progress)."""
    ready = start(worker, nodeid)
    if ready["ev"] == "done":
        _not_timed(nodeid, {side: Finished.of(ready)}, result, progress)
        return None
    try:
        rounds = time_alone_or_beside([Side(worker)], [ready["iterations"]], budget,
                                      lambda times: half_width(np.log(times[0]), budget.confidence))
    except RoundFailed as failure:
        _not_timed(nodeid, {side: Finished.of(failure.done)}, result, progress)
        return None
    finished = finish(worker)
    if finished.outcome != PASSED:
        _not_timed(nodeid, {side: finished}, result, progress)
        return None
    progress(f"  {nodeid}  {'new' if side else 'missing'}: on one side only, timed alone ({len(rounds.times[0])} rounds)")
    return benchmark_record(nodeid, finished, rounds.times[0], rounds.iterations[0], rounds, clock=clock)


_NEAR = 0.9  # of the minimum effect (in log ratio): nearer to it, an entry within the minimum effect is still undecided


@dataclass(frozen=True)
class Undecided:
    """``measure``'s ``undecided`` for A/B rounds: True while the pooled per-pair ratio is beyond the minimum effect
    but the verdict the report would give is not yet a change: the sign test's p-value is not below ``alpha`` (the
    run's level over its entries, Bonferroni: what Holm asks of the most significant entry), the CI still holds 1, or
    the process pairs do not carry it (``process_pairs_disagree``); or it is within the minimum effect but beyond
    _NEAR of it (x1.027-1.03 for 3%: planted 5% slowdowns of noisy or process-state entries read that low). A ratio
    closer to 1 is decided (unchanged, ``unchanged``), so only entries that look changed, or nearly, get the extra
    rounds, which a self-A/B run seldom pays (0-2 entries per run, measured)."""

    sides: Sequence[int]
    confidence: float
    min_effect: float
    alpha: float

    def __call__(self, times: list[Any]) -> bool:
        d = _pooled(times, self.sides)
        pairs = len(self.sides) // 2  # round i of a side came from its worker i % pairs (``_interleaved``)
        return self.of(d, process_ratios(d, pairs), d.size // pairs)

    def of(self, d: np.ndarray, processes: Sequence[float], rounds_each: int) -> bool:
        """The same question of pooled log ratios ``d`` whose process pairs' ratios are ``processes`` (each of at
        least ``rounds_each`` rounds)."""
        floor, middle = math.log1p(self.min_effect), float(np.median(d))
        if self.unchanged(d):
            return False
        if abs(middle) < floor:  # near the minimum effect: the verdict turns on the last rounds' noise
            return True
        low, high = median_ci(d, self.confidence)
        agree = len(processes) < 2 or process_pairs_disagree(processes, middle > 0, self.min_effect, rounds_each) is None
        return not (sign_test_p(d) < self.alpha and (low > 0 or high < 0) and agree)

    def rules_out_min_effect(self, d: np.ndarray) -> bool:
        """True when the CI of the median of the pooled log ratios ``d`` lies within the minimum effect either way."""
        floor = math.log1p(self.min_effect)
        low, high = median_ci(d, self.confidence)
        return -floor < low and high < floor

    def unchanged(self, d: np.ndarray) -> bool:
        """True when the pooled log ratios ``d`` are decided unchanged: their median ratio nearer to 1 than _NEAR of
        the minimum effect."""
        return abs(float(np.median(d))) < _NEAR * math.log1p(self.min_effect)


def _spread(budget: Budget, sides: Sequence[int]) -> Callable[[list[Any]], float]:
    """The stopping rule's CI half-width of the pooled per-pair log ratios B/A (``_pooled``)."""
    return lambda times: half_width(_pooled(times, sides), budget.confidence)


def _not_timed(nodeid: str, finished: dict[int, Finished], result: AbResult, progress: Callable[[str], None]) -> None:
    """Record and say why ``nodeid`` was not timed: a failure on each side that failed (``finished``: side -> how
    one of its workers ended, a failure first), else the skip reason."""
    failed = False
    for side, label in ((0, "A"), (1, "B")):
        if side in finished and finished[side].outcome == FAILED:
            result.failed[side][nodeid] = finished[side].message
            progress(f"  {nodeid}  FAILED on {label}: {finished[side].message.strip().splitlines()[-1][:200]}")
            failed = True
    if failed:
        return
    reason = next((f.message for f in finished.values() if f.message), "not run")
    result.skipped[nodeid] = reason
    progress(f"  {nodeid}  SKIPPED: {reason.strip().splitlines()[-1][:200] if reason.strip() else reason}")
