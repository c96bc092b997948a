"""A/B mode's run: every benchmark that both versions have, timed on both in alternating rounds.

Worker A runs the git ref's tree in its own environment (``harness.paired.reftree``), worker B the working tree. For
each benchmark both are started (which one first alternates), each side's calls per round are calibrated to rounds of
the same length, and rounds alternate A B B A ... on the same CPU (as many CPUs as the benchmark runs threads) until
the CI of the median per-pair ratio is narrow enough or the benchmark's time budget is spent. Entries get
ENTRY_BUDGET; limits and peers, the same code on both sides, only show whether the two environments differ and get
CONTROL_BUDGET. A benchmark on one side only is timed alone there, so the report lists it as new or missing with its
figures, never judged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.bench_schema import ENTRY, MODE_AB
from harness.paired.cpus import CpuChooser
from harness.paired.engine import Budget, Side
from harness.paired.process import WorkerProcess
from harness.paired.runfile import benchmark_record, run_document
from harness.paired.session import FAILED, PASSED, Collected, Finished, finish, run_same, start, time_alone_or_beside
from harness.report.paired import half_width, judge, log_ratios

__all__ = ["CONTROL_BUDGET", "ENTRY_BUDGET", "AbResult", "run_ab"]

# 20 pairs at least: the run's p-values are Holm-adjusted over its ~50 entries, so an entry needs p < 0.01 / 50, and
# a two-sided sign test of n pairs cannot go below 2 / 2**n (n = 14: 1.2e-4, reached only when every pair
# agrees); with 14 pairs and a 4 s budget, slow entries (0.1-0.3 s a call) planted 5% slower missed alpha by a
# little (p 0.01-0.2), so they get 20 pairs and 6 s
ENTRY_BUDGET = Budget(seconds=6.0, confidence=0.95, min_rounds=20)
CONTROL_BUDGET = Budget(seconds=1.0, confidence=0.95, precision=0.02)


@dataclass
class AbResult:
    """The two run documents (A = the ref, B = the working tree), and the tests that failed on each side
    (nodeid -> message) or were skipped (nodeid -> reason)."""

    documents: tuple[dict[str, Any], dict[str, Any]]
    failed: tuple[dict[str, str], dict[str, str]] = field(default_factory=lambda: ({}, {}))
    skipped: dict[str, str] = field(default_factory=dict)


def run_ab(workers: Sequence[WorkerProcess], collected: Sequence[Collected], ref: str, progress: Callable[[str], None],
           *, planted: float | None = None, entry_budget: Budget = ENTRY_BUDGET,
           control_budget: Budget = CONTROL_BUDGET, min_effect: float = 0.03, alpha: float = 0.01) -> AbResult:
    """Time every benchmark that ``collected[0]`` (A, the ref) and ``collected[1]`` (B) both have; ``planted``
    stretches B's rounds by that factor (``--plant-slowdown``). ``min_effect``/``alpha`` only shape the progress
    lines' CI; the report decides the verdicts from the run files (all entries together: ``harness.report.compare``)."""
    a_names, b_names = collected[0].benchmarks(), collected[1].benchmarks()
    common = [n for n in b_names if n in set(a_names)]
    records: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    result = AbResult(({}, {}))
    cpus = CpuChooser()
    stretch = (1.0, planted or 1.0)
    for index, nodeid in enumerate(common):
        role = collected[1].items[nodeid]["role"] or collected[0].items[nodeid]["role"] or ENTRY
        budget = entry_budget if role == ENTRY else control_budget
        chosen = cpus.choose(max(c.items[nodeid].get("threads", 1) for c in collected))
        if chosen is not None:
            for worker in workers:
                worker.pin(chosen)
        order = (0, 1) if index % 2 == 0 else (1, 0)  # who starts (and sets up) first alternates
        outcome = run_same([workers[i] for i in order], nodeid, [stretch[i] for i in order], budget,
                           _spread(budget, order))
        finished = {side: outcome.finished[position] for position, side in enumerate(order)}
        if not outcome.ok or outcome.rounds is None:
            _not_timed(nodeid, finished, result, progress)
            continue
        times = {side: outcome.rounds.times[position] for position, side in enumerate(order)}
        for side in (0, 1):
            calls = outcome.rounds.iterations[order.index(side)]
            records[side].append(benchmark_record(nodeid, finished[side], times[side], calls, outcome.rounds,
                                                  clock=collected[side].clock))
        verdict = judge(log_ratios(times[0], times[1]), alpha=alpha, confidence=budget.confidence,
                        min_effect=min_effect)
        progress(f"  {nodeid}  x{verdict.ratio:.3f} [{verdict.ci[0]:.3f}, {verdict.ci[1]:.3f}] {verdict.pairs} pairs "
                 f"({outcome.rounds.stop})" + ("" if role == ENTRY else f" ({role})"))
    for side, names in ((1, [n for n in b_names if n not in set(a_names)]), (0, [n for n in a_names if n not in set(b_names)])):
        for nodeid in names:  # on one side only: timed alone, shown as new or missing, never judged
            record = _alone(workers[side], side, nodeid, control_budget, result, progress, collected[side].clock)
            if record is not None:
                records[side].append(record)
    pairing = uuid.uuid4().hex
    for side, label in ((0, "A"), (1, "B")):
        info = {"mode": MODE_AB, "side": label, "pairing": pairing, "ref": ref, "planted": planted}
        result.documents[side].update(run_document(collected[side], records[side], info))
    return result


def _alone(worker: WorkerProcess, side: int, nodeid: str, budget: Budget, result: AbResult,
           progress: Callable[[str], None], clock: str) -> dict[str, Any] | None:
    """Time a benchmark that only ``side`` has; None when it did not run (said in ``result`` and the progress)."""
    ready = start(worker, nodeid)
    if ready["ev"] == "done":
        _not_timed(nodeid, {side: Finished.of(ready)}, result, progress)
        return None
    rounds = time_alone_or_beside([Side(worker)], [ready["iterations"]], budget,
                                  lambda times: half_width(np.log(times[0]), budget.confidence))
    finished = finish(worker)
    if finished.outcome != PASSED:
        _not_timed(nodeid, {side: finished}, result, progress)
        return None
    progress(f"  {nodeid}  {'new' if side else 'missing'}: on one side only, timed alone ({len(rounds.times[0])} rounds)")
    return benchmark_record(nodeid, finished, rounds.times[0], rounds.iterations[0], rounds, clock=clock)


def _spread(budget: Budget, order: tuple[int, int]) -> Callable[[list[Any]], float]:
    """The stopping rule's CI half-width of the per-pair log ratios B/A, for workers given in ``order``."""
    a, b = order.index(0), order.index(1)
    return lambda times: half_width(log_ratios(times[a], times[b]), budget.confidence)


def _not_timed(nodeid: str, finished: dict[int, Finished], result: AbResult, progress: Callable[[str], None]) -> None:
    """Record and say why ``nodeid`` was not timed: a failure on a side (``finished``: side -> how it ended), else
    the skip reason."""
    for side, label in ((0, "A"), (1, "B")):
        if side in finished and finished[side].outcome == FAILED:
            result.failed[side][nodeid] = finished[side].message
            progress(f"  {nodeid}  FAILED on {label}: {finished[side].message.strip().splitlines()[-1][:200]}")
            return
    reason = next((f.message for f in finished.values() if f.message), "not run")
    result.skipped[nodeid] = reason
    progress(f"  {nodeid}  SKIPPED: {reason.strip().splitlines()[-1][:200] if reason.strip() else reason}")
