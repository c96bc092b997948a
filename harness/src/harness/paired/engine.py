"""Timing benchmarks that wait in their workers: calibration, then rounds in alternation until precise or out of time.

Each round is one ``time`` request to one worker, answered before the next is sent, so the two rounds of a pair run
back to back and never at the same time. Rounds of a pair use the same number of iterations (calls of the benchmarked
function), chosen so that a round of the faster side lasts about ``Budget.round_s``: long enough to average the
timer's and the scheduler's jitter, short enough that few rounds are hit by a preemption on a loaded machine (a
preempted round is an outlier that medians and the sign test shrug off).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from harness.paired.process import WorkerProcess

__all__ = ["STOP_BUDGET", "STOP_MAX", "STOP_PRECISION", "Budget", "Calls", "RoundFailed", "Rounds", "Side", "calibrate",
           "half_width", "iterations_for", "measure", "median_ci", "round_order"]

STOP_PRECISION = "precision"  # the CI became narrow enough
STOP_BUDGET = "budget"  # the time budget of the benchmark was spent first
STOP_MAX = "max-rounds"  # the round cap was reached first
_MAX_ITERATIONS = 10**7


@dataclass(frozen=True)
class Budget:
    """How one benchmark is measured.

    ``round_s``: target seconds of one round (of the faster side); ``min_rounds``: rounds per side before stopping is
    considered (8 is the least for which a two-sided sign-test p-value can go below 0.01); ``max_rounds``: a cap;
    ``seconds``: the time budget for the rounds of one benchmark, all sides together (setup and calibration excluded);
    ``precision``: stop once the CI half-width, in log ratio, is at most this; ``confidence``: the CI's level.
    """

    round_s: float = 0.002
    min_rounds: int = 8
    max_rounds: int = 2000
    seconds: float = 4.0
    precision: float = 0.01
    confidence: float = 0.99

    def __post_init__(self) -> None:
        if not (self.round_s > 0 and self.seconds > 0 and self.precision > 0
                and 0 < self.confidence < 1):
            raise ValueError(f"invalid measurement budget {self}")
        if not 2 <= self.min_rounds <= self.max_rounds:
            raise ValueError(f"need 2 <= min_rounds <= max_rounds, got {self.min_rounds} and {self.max_rounds}")


@dataclass(frozen=True)
class Calls:
    """The calls a ready benchmark asked for (its ``ready`` message): ``fixed`` calls per round (pedantic's
    ``iterations``, or 1 with a ``setup``; None: the controller calibrates them) and, with fixed calls, the
    ``warmup_rounds`` run before the timed ones (pedantic's own: pytest-benchmark runs that many, default 0; 1 when the
    benchmark did not say)."""

    fixed: int | None = None
    warmup_rounds: int = 1

    @classmethod
    def of(cls, ready: Mapping[str, Any]) -> Calls:
        warmup = ready.get("warmup_rounds")
        return cls(ready.get("iterations"), 1 if warmup is None else int(warmup))


class RoundFailed(Exception):
    """The benchmarked function raised during a round: the worker's test ended; ``done`` is its ``done`` message."""

    def __init__(self, worker: WorkerProcess, done: dict[str, Any]) -> None:
        super().__init__(f"{worker.label}: {done.get('nodeid')} failed in a timed round")
        self.worker, self.done = worker, done


@dataclass
class Side:
    """A worker whose benchmark is ready to be timed; ``stretch`` > 1 plants a slowdown of that factor, or with
    ``untimed`` makes the worker spin as long after each round without counting it (the worker's ``time`` op)."""

    worker: WorkerProcess
    stretch: float = 1.0
    untimed: bool = False

    def time(self, iterations: int, warmup: bool = False) -> float:
        """Seconds of one round of ``iterations`` calls (``warmup``: not one of the benchmark's rounds)."""
        answer = self.worker.request("time", ("times", "done"), iterations=iterations, rounds=1, stretch=self.stretch,
                                     untimed=self.untimed, warmup=warmup)
        if answer["ev"] == "done":
            raise RoundFailed(self.worker, answer)
        return float(answer["t"][0])


@dataclass(frozen=True)
class Rounds:
    """Seconds per call of each round, one list per side in the order given to ``measure`` (round i of every side
    forms pair i), the calls per round of each side, why measuring stopped (STOP_*), and its wall seconds."""

    times: tuple[list[float], ...]
    iterations: tuple[int, ...]
    stop: str
    seconds: float


def calibrate(sides: Sequence[Side], round_s: float, calls: Calls = Calls()) -> list[float]:
    """Seconds per call of each side, estimated by rounds that double as warm-up: one call, then one round of about
    ``round_s``. With ``calls.fixed`` (iterations the benchmark set itself) there is nothing to calibrate: its
    ``warmup_rounds`` rounds of that many calls, the last one's time per call (inf after none)."""
    if calls.fixed is not None:
        return [_warm_up(side, calls.fixed, calls.warmup_rounds) for side in sides]
    per_call = []
    for side in sides:
        first = side.time(1, warmup=True)
        if first >= round_s:
            per_call.append(first)
            continue
        guess = min(_MAX_ITERATIONS, max(1, int(round_s / max(first, 1e-9))))
        # at most a thousand times quicker than the first call: a round misread as ~0 s must not ask for millions
        per_call.append(max(side.time(guess, warmup=True) / guess, first / 1000))
    return per_call


def _warm_up(side: Side, fixed: int, rounds: int) -> float:
    """``rounds`` warm-up rounds of ``fixed`` calls on ``side``: the last one's seconds per call (inf after none)."""
    per_call = math.inf
    for _ in range(rounds):
        per_call = side.time(fixed, warmup=True) / fixed
    return per_call


def iterations_for(per_call: float, round_s: float) -> int:
    """Calls per round so that a round lasts about ``round_s`` seconds (at least one call)."""
    return min(_MAX_ITERATIONS, max(1, math.ceil(round_s / per_call)))


def round_order(count: int) -> list[int]:
    """The side of each round in one repeat of ``measure``'s loop (two rounds per side): every pair of sides in turn,
    then again with each pair swapped. Two sides give A B B A; four give A1 B1 A2 B2 B1 A1 B2 A2. With two pairs or
    more no side ever follows itself: a round right after one of its own finds its caches warm (measured on a CLOUD
    round trip: 25-50% faster), and when turning back (A1 B1 A2 B2 B2 A2 B1 A1) that favoured the first and the last
    side in every repeat, pulling the first and the last process pair's ratios apart."""
    forward = list(range(count))
    swapped = [i ^ 1 if (i ^ 1) < count else i for i in forward]
    return forward + swapped


def measure(sides: Sequence[Side], iterations: Sequence[int], budget: Budget,
            spread: Callable[[list[np.ndarray]], float]) -> Rounds:
    """Rounds on ``sides`` (``iterations[i]`` calls per round of side i) until ``spread`` of the per-call times (a CI
    half-width in log ratio) is at most ``budget.precision``, the time budget is spent, or ``max_rounds`` is reached;
    never fewer than ``min_rounds``. ``spread`` is asked after ``min_rounds`` and then after every quarter more. Sides
    come in pairs (0 and 1, 2 and 3, ...; an odd last side on its own), and rounds go in cycles (``round_order``):
    consecutive rounds never run at once, and each side of a pair goes first in every other cycle, so an advantage of
    going first or second cancels."""
    times: list[list[float]] = [[] for _ in sides]
    start = time.perf_counter()
    check = budget.min_rounds
    order = round_order(len(sides))
    while True:
        for index in order:
            times[index].append(sides[index].time(iterations[index]) / iterations[index])
        count = len(times[0])
        elapsed = time.perf_counter() - start
        if count < budget.min_rounds:
            continue
        if count >= check:
            check = count + max(2, count // 4)
            if spread([np.asarray(t) for t in times]) <= budget.precision:
                return Rounds(tuple(times), tuple(iterations), STOP_PRECISION, elapsed)
        if elapsed >= budget.seconds:
            return Rounds(tuple(times), tuple(iterations), STOP_BUDGET, elapsed)
        if count >= budget.max_rounds:
            return Rounds(tuple(times), tuple(iterations), STOP_MAX, elapsed)


def median_ci(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The distribution-free ``confidence`` interval of the median of ``values`` from its order statistics (the sign
    test inverted); (-inf, inf) when there are too few values to reach that confidence."""
    n = values.size
    k = int(sps.binom.ppf((1.0 - confidence) / 2.0, n, 0.5)) if n else 0
    if k < 1:
        return -math.inf, math.inf
    ordered = np.sort(values)
    return float(ordered[k - 1]), float(ordered[n - k])


def half_width(values: np.ndarray, confidence: float) -> float:
    """The larger distance from the median of ``values`` to a bound of its ``median_ci``; inf without one. Stored
    mode's stopping rule: rounds stop once this is at most ``Budget.precision``."""
    if values.size == 0:
        return math.inf
    low, high = median_ci(values, confidence)
    middle = float(np.median(values))
    return max(middle - low, high - middle)
