"""The gate's statistics on simulated pair values (fixed seeds): its false-alarm rate, its power, and its rule.

The simulation follows docs/benchmark-gate.md: a run judges ENTRIES entries; each entry's pair values are normal with
the spread SIGMA that process states and rounds give (docs: "What it promises"), PROCESS_PAIRS of them per look, and
an entry that ``decide`` leaves undecided gets PROCESS_PAIRS more, at most LOOKS looks, as the runner does.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.gate import (
    ALPHA,
    LOOKS,
    MIN_EFFECT,
    PROCESS_PAIRS,
    Settings,
    Verdict,
    corrected_level,
    decide,
    pair_value,
    pair_values,
    split_pairs,
    worth_more_pairs,
)

ENTRIES = 50
SIGMA = 0.02  # spread of one pair value (log ratio), within what the doc's power promise covers (2.5%)


def _sequential(rng: np.random.Generator, shift: float, sigma: float, level: float) -> Verdict:
    """One entry judged as the runner judges it: a look of PROCESS_PAIRS pair values at a time until decided."""
    values = np.empty(0)
    for _ in range(LOOKS):
        values = np.concatenate([values, rng.normal(shift, sigma, PROCESS_PAIRS)])
        decision = decide(values, level=level)
        if decision.decided or not worth_more_pairs(values, LOOKS * PROCESS_PAIRS, level=level):
            break
    return decision.verdict


def _run_flags(rng: np.random.Generator, shift: float, sigma: float) -> list[Verdict]:
    level = corrected_level(ALPHA, ENTRIES)
    return [_sequential(rng, shift, sigma, level) for _ in range(ENTRIES)]


def test_unchanged_code_flags_at_most_alpha_of_runs() -> None:
    """2,000 simulated runs of 50 unchanged entries (100,000 null entries): the share of runs with any regressed or
    improved entry is at most ALPHA, within three binomial standard errors."""
    rng = np.random.default_rng(20261203)
    runs = 2000
    flagged = 0
    entries_flagged = 0
    for _ in range(runs):
        verdicts = _run_flags(rng, 0.0, SIGMA)
        hits = sum(v in (Verdict.REGRESSED, Verdict.IMPROVED) for v in verdicts)
        entries_flagged += hits
        flagged += hits > 0
    rate = flagged / runs
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs), f"false-alarm rate per run {rate}"
    assert entries_flagged / (runs * ENTRIES) <= ALPHA / ENTRIES * 3


def test_unchanged_code_is_mostly_decided_unchanged() -> None:
    """Unchanged entries of the doc's spread end "unchanged", not "not judged", in at least 95% of cases."""
    rng = np.random.default_rng(7)
    verdicts = [v for _ in range(100) for v in _run_flags(rng, 0.0, SIGMA)]
    assert sum(v is Verdict.UNCHANGED for v in verdicts) / len(verdicts) >= 0.95


@pytest.mark.parametrize("change", [1.05, 1 / 1.05])
def test_a_five_percent_change_is_flagged_with_the_promised_power(change: float) -> None:
    """A 5% change (either way) at the doc's spread is flagged in at least 95% of 5,000 entries."""
    rng = np.random.default_rng(5)
    expected = Verdict.REGRESSED if change > 1 else Verdict.IMPROVED
    verdicts = [v for _ in range(100) for v in _run_flags(rng, math.log(change), SIGMA)]
    assert sum(v is expected for v in verdicts) / len(verdicts) >= 0.95


def test_a_change_below_the_minimum_effect_is_never_flagged() -> None:
    """A real 1% change, however precisely measured, is below the 3% minimum effect: unchanged."""
    decision = decide(np.full(8, math.log(1.01)) + np.linspace(-1e-4, 1e-4, 8), level=1e-4)
    assert decision.verdict is Verdict.UNCHANGED
    assert decision.change == pytest.approx(0.01, abs=1e-4)


def test_process_state_scatter_makes_an_entry_inconclusive_not_regressed() -> None:
    """Pair values that scatter by 10% (process states) around +6% are not enough for a verdict at a level of 1e-4:
    the entry is not judged, and the interval says how wide the scatter is."""
    values = np.log([1.20, 0.95, 1.02, 1.10, 0.97, 1.14])
    decision = decide(values, level=1e-4)
    assert decision.verdict is Verdict.UNJUDGED
    assert decision.reason.startswith("inconclusive")
    low, high = decision.interval
    assert low < 0 < MIN_EFFECT < high


def test_decide_matches_a_hand_computed_t_test() -> None:
    """Mean, interval and p-value of four pair values against the textbook formulas (t quantiles from tables)."""
    values = np.log([1.10, 1.12, 1.09, 1.11])
    decision = decide(values, level=0.01, confidence=0.95)
    mean, sd = values.mean(), values.std(ddof=1)
    half = 3.182446 * sd / 2  # t(0.975, 3) = 3.182446
    assert decision.change == pytest.approx(math.expm1(mean))
    assert decision.interval[0] == pytest.approx(math.expm1(mean - half), rel=1e-6)
    assert decision.interval[1] == pytest.approx(math.expm1(mean + half), rel=1e-6)
    t = mean / (sd / 2)
    assert t > 5.840909  # t(0.995, 3): significant at 0.01
    assert decision.p_value < 0.01
    assert decision.verdict is Verdict.REGRESSED


def test_one_pair_value_is_never_a_verdict() -> None:
    assert decide([0.5], level=0.01).verdict is Verdict.UNJUDGED


def test_identical_pair_values_are_decided_by_their_mean() -> None:
    assert decide([0.1, 0.1, 0.1], level=0.01).verdict is Verdict.REGRESSED
    assert decide([0.0, 0.0], level=0.01).verdict is Verdict.UNCHANGED


def test_pair_value_is_the_median_log_ratio_of_its_rounds() -> None:
    a = [1.0, 2.0, 1.0, 4.0, 1.0]
    b = [1.1, 2.0, 1.3, 4.4, 0.5]
    assert pair_value(a, b) == pytest.approx(math.log(1.1))


@pytest.mark.parametrize("a, b", [([], []), ([1.0], [1.0, 2.0]), ([1.0, 0.0], [1.0, 1.0]), ([1.0], [math.nan])])
def test_pair_value_refuses_rounds_that_do_not_pair(a: list[float], b: list[float]) -> None:
    with pytest.raises(ValueError):
        pair_value(a, b)


def test_split_pairs_cuts_a_run_files_rounds_per_process_pair() -> None:
    assert split_pairs([1, 2, 3, 4, 5], [2, 3]) == [[1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="do not cover"):
        split_pairs([1, 2, 3], [2, 2])
    with pytest.raises(ValueError):
        pair_values([[1.0]], [[1.0], [2.0]])


def test_the_level_divides_alpha_over_entries_and_looks() -> None:
    assert corrected_level(0.01, 50, 3) == pytest.approx(0.01 / 150)
    assert corrected_level(0.01, 50) == pytest.approx(0.01 / (50 * LOOKS))
    assert Settings(looks=2).level(10) == pytest.approx(ALPHA / 20)
    for bad in (0.0, 1.0, -1.0):
        with pytest.raises(ValueError):
            corrected_level(bad, 5)
    with pytest.raises(ValueError):
        corrected_level(0.01, 0)


@pytest.mark.parametrize("bad", [{"min_effect": 1.0}, {"alpha": 0.0}, {"process_pairs": 1}, {"process_pairs": 17},
                                 {"process_pairs": True}, {"process_pairs": 4.5}, {"looks": 0}, {"looks": 7},
                                 {"budget_seconds": math.inf}, {"confidence": 1.0}])
def test_settings_refuse_values_out_of_range(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Settings(**bad)  # type: ignore[arg-type]


def test_decide_refuses_non_finite_values() -> None:
    with pytest.raises(ValueError, match="finite"):
        decide([0.1, math.inf], level=0.01)


@pytest.mark.parametrize("bad", [[[0.1, 0.2], [0.1, 0.2]], ["0.1", "0.2"], [True, False], [1e300, 1e300], 0.5])
def test_decide_refuses_what_is_no_list_of_log_ratios(bad: object) -> None:
    """2-D arrays, strings, booleans, a scalar and ratios beyond e^50 are broken input, never a verdict."""
    with pytest.raises(ValueError, match="pair values must be"):
        decide(bad, level=0.01)  # type: ignore[arg-type]


def test_more_pairs_are_timed_only_while_they_could_settle_the_entry() -> None:
    """Pair values scattering by 20% (a noisy entry) cannot be settled by 20 pairs: the runner stops after one look;
    at 2% they can; and a look that already reached the final count is never extended."""
    rng = np.random.default_rng(11)
    level = corrected_level(ALPHA, ENTRIES)
    final = LOOKS * PROCESS_PAIRS
    noisy, quiet = rng.normal(0.0, 0.20, PROCESS_PAIRS), rng.normal(0.04, 0.02, PROCESS_PAIRS)
    assert not worth_more_pairs(noisy, final, level=level)
    assert worth_more_pairs(quiet, final, level=level)
    assert not worth_more_pairs(quiet, PROCESS_PAIRS, level=level)
    # a large change with a wide scatter is still worth timing: the t-test may reach it
    assert worth_more_pairs(np.log([1.9, 1.3, 2.4, 1.5, 2.1, 1.2]), final, level=level)


def test_stopping_for_futility_loses_no_power_at_the_promised_spread() -> None:
    """At 3% scatter (beyond the promise) the rule stops almost no entry that more pairs would flag: 5,000 entries
    with a 5% change are flagged about as often as the doc says (94%, within 3 points; without the rule 93%)."""
    rng = np.random.default_rng(3)
    verdicts = [v for _ in range(100) for v in _run_flags(rng, math.log(1.05), 0.03)]
    assert sum(v is Verdict.REGRESSED for v in verdicts) / len(verdicts) >= 0.91
