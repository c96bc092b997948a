"""Which A/B entries get extra rounds: those that look changed but are not yet a verdict (``Undecided``), and the
timing loop that gives them the extra time."""

from __future__ import annotations

import math
import time

import numpy as np

from harness.paired.ab import ENTRY_BUDGET, Undecided, _time_more, entry_precision, more_pairs_budget
from harness.paired.engine import STOP_BUDGET, STOP_EXTENDED, Budget, measure

SIDES = [0, 1, 0, 1, 0, 1]  # three process pairs: A1 B1 A2 B2 A3 B3


def rounds(ratios_per_pair, n, noise=0.0, seed=0):
    """Per-worker round times: A workers take 1 ms, B workers ``ratio`` ms, times lognormal noise."""
    rng = np.random.default_rng(seed)
    times = []
    for ratio in ratios_per_pair:
        times.append(list(1e-3 * rng.lognormal(0.0, noise, n)))
        times.append(list(ratio * 1e-3 * rng.lognormal(0.0, noise, n)))
    return [np.asarray(t) for t in times]


RULE = Undecided(SIDES, confidence=0.95, min_effect=0.03, alpha=0.01 / 50)


def test_a_median_ratio_within_the_minimum_effect_is_decided_however_wide_its_ci():
    a = np.full(9, 1e-3)
    b = a * np.array([0.5, 2.0, 1.01] * 3)  # the median pair x1.01, the CI spans x0.5 to x2
    assert not RULE([a, b] * 3)


def test_a_clear_change_in_every_process_pair_is_decided():
    assert not RULE(rounds([1.10, 1.10, 1.10], 40, noise=0.01))


def test_a_change_beyond_the_minimum_effect_without_significance_is_undecided():
    # 8 pairs per process pair, 1.06 with 10% noise: the median is beyond 3%, the sign test is far from 0.01 / 50
    assert RULE(rounds([1.06, 1.06, 1.06], 8, noise=0.1, seed=3))


def test_a_pooled_change_that_a_process_pair_does_not_share_is_undecided():
    assert RULE(rounds([1.30, 1.30, 1.0], 60, noise=0.01))
    assert not RULE(rounds([1.30, 1.0, 1.0], 400, noise=0.001, seed=1))  # the pooled median within 3%: decided


def test_a_ratio_near_the_minimum_effect_is_undecided():
    # x1.028: a 5% change of a noisy entry read low, or no change at all; more rounds tell which
    assert RULE(rounds([1.028, 1.028, 1.028], 40, noise=0.001))
    assert not RULE(rounds([1.02, 1.02, 1.02], 40, noise=0.001))


def test_decided_unchanged_only_within_most_of_the_minimum_effect():
    # what the A/B runner times on no more process pairs; a change, decided or not, is confirmed on more
    assert RULE.unchanged(np.log([1.02, 1.025, 0.98]))
    assert not RULE.unchanged(np.log([1.028, 1.03, 1.028]))
    assert not RULE.unchanged(np.log([0.96, 0.97, 0.95]))


class Side:
    def __init__(self, per_call: float) -> None:
        self.per_call = per_call

    def time(self, iterations: int, warmup: bool = False) -> float:
        time.sleep(0.002)
        return iterations * self.per_call


def spread(times):
    return float("inf")  # never precise: only the budget ends it


def test_an_undecided_benchmark_runs_on_for_its_extra_seconds_and_a_decided_one_stops_at_its_budget():
    budget = Budget(min_rounds=4, seconds=0.1, undecided_seconds=0.2)
    decided = measure([Side(1e-3), Side(1e-3)], [1, 1], budget, spread, lambda times: False)
    assert decided.stop == STOP_BUDGET and 0.1 <= decided.seconds < 0.2
    undecided = measure([Side(1e-3), Side(1e-3)], [1, 1], budget, spread, lambda times: True)
    assert undecided.stop == STOP_EXTENDED and 0.3 <= undecided.seconds < 0.45


def test_extra_rounds_end_as_soon_as_the_benchmark_is_decided():
    budget = Budget(min_rounds=4, seconds=0.1, undecided_seconds=5.0)
    asked: list[int] = []

    def undecided(times):
        asked.append(len(times[0]))
        return len(asked) < 3
    result = measure([Side(1e-3), Side(1e-3)], [1, 1], budget, spread, undecided)
    assert result.stop == STOP_EXTENDED and len(asked) == 3 and result.seconds < 2.0
    assert asked == sorted(asked) and len(result.times[0]) >= asked[-1]


def test_an_entry_is_precise_enough_at_half_the_minimum_effect_or_its_budget_s_own_precision():
    assert ENTRY_BUDGET.precision == 0.015
    assert entry_precision(ENTRY_BUDGET, 0.03).precision == math.log1p(0.03) / 2  # 0.01478
    assert entry_precision(ENTRY_BUDGET, 0.01).precision == math.log1p(0.01) / 2
    assert entry_precision(ENTRY_BUDGET, 0.10).precision == 0.015
    assert entry_precision(ENTRY_BUDGET, 0.0) == ENTRY_BUDGET


def test_a_later_set_of_process_pairs_takes_no_more_rounds_per_pair_than_the_first():
    """Pooled, a later set that ran on where the first stopped would outweigh it (190 rounds per pair against 40)."""
    budget = ENTRY_BUDGET  # 24 pairs at least, 12 s of extension
    assert more_pairs_budget(budget, 3, 40) == Budget(seconds=6.0, confidence=0.95, min_rounds=8, max_rounds=40,
                                                     undecided_seconds=0.0, precision=0.015)
    assert more_pairs_budget(budget, 3, 5).max_rounds == 8  # never below its least rounds
    assert more_pairs_budget(budget, 3, 10**6).max_rounds == budget.max_rounds
    assert more_pairs_budget(budget, 6, 40).min_rounds == 4


class _Block:
    """What ``_time_more`` asks of a block: its pooled log ratios and its process pairs."""

    def __init__(self, d: np.ndarray, pairs: int = 3) -> None:
        self.d, self.pairs = d, pairs

    def log_ratios(self) -> np.ndarray:
        return self.d


def test_an_entry_that_reads_unchanged_gets_more_process_pairs_unless_its_ci_rules_out_the_minimum_effect():
    tight = np.log(np.linspace(1.0, 1.02, 60))  # x1.01, CI [1.007, 1.013]
    wide = np.log(np.linspace(0.94, 1.10, 60))  # x1.02, CI [0.997, 1.043]: a 5% change is not ruled out
    assert RULE.unchanged(tight) and RULE.rules_out_min_effect(tight)
    assert RULE.unchanged(wide) and not RULE.rules_out_min_effect(wide)
    assert _time_more([_Block(tight)], RULE) is None  # type: ignore[list-item]
    assert _time_more([_Block(wide)], RULE) == "undecided"  # type: ignore[list-item]
