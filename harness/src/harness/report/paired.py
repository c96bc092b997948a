"""Verdicts from paired rounds: per-pair log ratios, a sign test, a CI of the median ratio, a minimum effect.

A pair is two rounds of the same benchmark taken one right after the other: version A then version B of the code (A/B
mode), or an entry then its group's limit (stored-baseline mode's "x limit"). Whatever slows the machine during a pair
slows both of its rounds, so the per-pair ratio B/A cancels it; ``d_i = ln(B_i / A_i)`` per pair (times per call).

Rule (``judge``; B is the version under test, a ratio > 1 is slower):

- estimate: ``ratio = exp(median(d))``, the median per-pair ratio;
- CI: the distribution-free ``confidence`` interval of the median of ``d`` from its order statistics (the sign test
  inverted: ``[d_(k), d_(n+1-k)]`` with the largest k such that ``P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2``);
- test: the two-sided exact sign test of ``d`` against 0 (``scipy.stats.binomtest`` of the positive pairs among the
  nonzero ones, p = 1/2): under no change A and B are exchangeable, so each pair is as likely to favour either side.
  It is the test the CI inverts, so the two agree, and it counts only signs: a round preempted on a loaded machine
  (a pair of any sign, any size) weighs like any other pair. The Wilcoxon signed-rank test, which ranks the sizes,
  lost a 5% planted slowdown with a tight CI (x1.085 [1.079, 1.096] over 152 pairs, p = 0.23) to a few huge pairs of
  either sign. A run judges every entry at once, so ``harness.report.compare`` adjusts the entries' p-values by
  Holm's method (``holm``): the chance that any unchanged entry of the run is flagged stays at alpha, not alpha per
  entry;
- regressed: p < alpha AND the CI lies entirely above ratio 1 AND ``ratio >= 1 + min_effect``; improved: p < alpha AND
  the CI lies entirely below 1 AND ``ratio <= 1 / (1 + min_effect)``; else unchanged. The minimum effect is the size
  of change worth acting on; it also absorbs the small, real but irrelevant differences between two processes running
  the same code (memory layout, page placement), which no number of rounds makes disappear. The A/B runner times every
  benchmark on several process pairs at once and pools their pairs (``harness.paired.ab``), so that difference, for
  the pooled median, is that of the middle process pair, not of one unlucky one; ``harness.report.compare`` also asks
every process pair to carry the change (``process_pairs_disagree``).

Sensitivity (``Paired.detectable``): the smallest change the rule would have flagged with this run's noise, i.e. how
far the ratio must move from its estimate for the CI to leave 1 on that side, and at least the minimum effect:
``max(1 + min_effect, ratio / ci_low, ci_high / ratio) - 1`` (a fraction: 0.03 = changes of 3% and more were visible).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from harness.report.verdict import Verdict

__all__ = ["PROCESS_PAIRS_ALPHA", "SIGN_TEST", "Paired", "half_width", "holm", "judge", "log_ratios", "median_ci",
           "process_pairs_disagree", "process_ratios", "sign_test_p", "unit_log_ratios"]

SIGN_TEST = "sign-test"
# the one-sided level of the t-test across process pairs (``process_pairs_disagree``): a state-noisy benchmark passes
# the pooled sign test whenever its process pairs lean one way, so this is its chance of a false alarm
PROCESS_PAIRS_ALPHA = 0.01
OFF_STATE_EVERY = 9  # of this many process pairs, one may read short of the change (process_pairs_disagree)


@dataclass(frozen=True)
class Paired:
    """The verdict of one benchmark from ``pairs`` paired rounds.

    ``ratio``: median per-pair ratio (B / A); ``ci``: its ``confidence`` interval (ratios; (0, inf) when there are too
    few pairs for one); ``p_value``: two-sided exact sign test (NaN when it cannot be computed);
    ``detectable``: the smallest change this run could have flagged (a fraction, see the module doc).
    """

    verdict: Verdict
    ratio: float
    ci: tuple[float, float]
    p_value: float
    pairs: int
    detectable: float
    test: str = SIGN_TEST


def log_ratios(first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray) -> np.ndarray:
    """``ln(second_i / first_i)`` of each pair (seconds per call, > 0). Raises ValueError on unequal lengths or a time
    that is not > 0."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired rounds must be two 1-D sequences of equal length, got {a.shape} and {b.shape}")
    if a.size and (not np.all(a > 0) or not np.all(b > 0)):
        raise ValueError("paired round times must be > 0 seconds")
    return np.log(b / a)


def median_ci(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The distribution-free ``confidence`` CI of the median of ``values`` (order statistics; see the module doc);
    (-inf, inf) when there are too few values to reach that confidence."""
    n = values.size
    tail = (1.0 - confidence) / 2.0
    # the smallest k with P(X <= k) >= tail, X ~ Binomial(n, 1/2), is the largest with P(X <= k - 1) < tail
    k = int(sps.binom.ppf(tail, n, 0.5)) if n else 0
    if k < 1:
        return -math.inf, math.inf
    ordered = np.sort(values)
    return float(ordered[k - 1]), float(ordered[n - k])


def half_width(values: np.ndarray, confidence: float) -> float:
    """The larger distance (log ratio) from the median of ``values`` to a bound of its CI; inf without a CI."""
    if values.size == 0:
        return math.inf
    low, high = median_ci(values, confidence)
    middle = float(np.median(values))
    return max(middle - low, high - middle)


def judge(d: np.ndarray, *, alpha: float, confidence: float, min_effect: float,
          p_value: float | None = None) -> Paired:
    """The verdict of per-pair log ratios ``d`` (see the module rule); ``alpha`` and ``confidence`` in (0, 1),
    ``min_effect`` a fraction >= 0; ``p_value`` replaces the sign test's own (e.g. its Holm-adjusted value,
    ``holm``). Raises ValueError for an empty ``d``."""
    if d.size == 0:
        raise ValueError("judge needs at least one pair")
    middle = float(np.median(d))
    low, high = median_ci(d, confidence)
    p_value = sign_test_p(d) if p_value is None else p_value
    ratio, ci = math.exp(middle), (math.exp(low), math.exp(high))
    floor = math.log1p(min_effect)
    verdict = Verdict.UNCHANGED
    if p_value < alpha and low > 0 and middle >= floor:
        verdict = Verdict.REGRESSED
    elif p_value < alpha and high < 0 and middle <= -floor:
        verdict = Verdict.IMPROVED
    spread = max(middle - low, high - middle)
    detectable = math.expm1(max(floor, spread))
    return Paired(verdict, ratio, ci, p_value, int(d.size), detectable)


def sign_test_p(d: np.ndarray) -> float:
    """The two-sided exact sign test's p-value of ``d`` against 0: the positive values among the nonzero ones against
    Binomial(n, 1/2) (``scipy.stats.binomtest``); NaN with fewer than 2 nonzero values."""
    nonzero = d[d != 0]
    if nonzero.size < 2:
        return math.nan
    return float(sps.binomtest(int(np.count_nonzero(nonzero > 0)), int(nonzero.size), 0.5).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (Holm 1979): the i-th smallest becomes
    ``max over j <= i of (m - j) * p_(j)``, at most 1; NaN stays NaN. Rejecting where an adjusted value is below
    alpha keeps the chance of any false rejection among the ``m`` tests at alpha."""
    order = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running, m = 0.0, len(order)
    for rank, (p, index) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def unit_log_ratios(first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per unit of four rounds taken in the order A B B A: ``(ln(B_1/A_1) + ln(B_2/A_2)) / 2``, given each side's
    rounds in time order (two per unit). Both orders of a pair occur once per unit, so an effect of going first or
    second cancels, and so does a drift that is linear over the unit."""
    d = log_ratios(first, second)
    if d.size % 2:
        raise ValueError(f"rounds of A B B A units come in twos per side, got {d.size}")
    return (d[0::2] + d[1::2]) / 2.0


def process_ratios(d: np.ndarray, pairs: int, blocks: Sequence[tuple[int, int]] | None = None) -> tuple[float, ...]:
    """The median ratio of each process pair, given pooled per-pair log ratios ``d`` in the A/B runner's layout:
    ``blocks`` of (process pairs, rounds each) one after the other (a benchmark timed on more process pairs later:
    ``harness.paired.ab``), element i of a block from its process pair i % its pairs; None = one block of ``pairs``.
    Raises ValueError when the blocks do not cover ``d``."""
    blocks = [(pairs, d.size // pairs if pairs else 0)] if blocks is None else list(blocks)
    if any(count < 1 or each < 1 for count, each in blocks) or sum(c * e for c, e in blocks) != d.size:
        raise ValueError(f"process-pair blocks {blocks} do not cover {d.size} pairs of rounds")
    ratios, start = [], 0
    for count, each in blocks:
        block = d[start:start + count * each]
        ratios += [math.exp(float(np.median(block[g::count]))) for g in range(count)]
        start += count * each
    return tuple(ratios)


def process_pairs_disagree(processes: Sequence[float], slower: bool, min_effect: float, rounds_each: int = 8,
                           alpha: float = PROCESS_PAIRS_ALPHA) -> str | None:
    """Why the process pairs' median ratios ``processes`` do not carry a change of the pooled rounds (``slower``: a
    regression, else an improvement), or None when they do. Each process pair is an independent replicate of the
    comparison: a change of the code shows in every one, while a state that some processes fall into (a CLOUD server
    whose two threads hand over slowly: 472 and 535 us per launch in two workers of the same tree) shows in some, so
    the pooled rounds, which count every round as independent, overstate the evidence wherever such states differ.

    The median of the pairs' ratios must be beyond the minimum effect, and either every pair beyond a third of it on
    the change's side (one pair in ``OFF_STATE_EVERY`` may fall short: a process in a rare state, x0.567 among eight
    pairs at x1.07-1.11 in a planted run, must not hide a change the others all show; the rule needs at least 8
    rounds per pair, ``rounds_each``: with fewer a pair's median is too noisy to veto) or, with three pairs or more,
    their log ratios beyond 0 on that side by a one-sided t-test at ``alpha``, the pairs as replicates, so its level
    holds however far the process states scatter. The first carries a change through one pair far off on its own
    side (x1.32, 1.05, 1.05), the second through one pair that a state holds back (x1.009, 1.04, 1.041, 1.05, 1.045,
    1.055). A ratio of 0 (an underflow) counts as infinitely faster."""
    sign = 1.0 if slower else -1.0
    logs = np.array([sign * (math.log(r) if r > 0 else -math.inf) for r in processes])
    middle = float(np.median(logs))
    if middle < math.log1p(min_effect):
        return f"the median of the process pairs' ratios (x{math.exp(sign * middle):.3f}) is within the minimum effect"
    short = int(np.count_nonzero(logs < math.log1p(min_effect / 3)))
    every = rounds_each < 8 or short <= logs.size // OFF_STATE_EVERY
    p = _t_test_p(logs)
    carried = p < alpha or (math.isnan(p) and logs.size < 3)
    if every or carried:
        return None
    scatter = f"the {logs.size} pairs scatter too widely to carry it (t-test across them: p = {p:.2g})"
    worst = processes[int(np.argmin(logs))]
    why = (f"one process pair reads x{worst:.3f}, short of a third of the minimum effect" if short == 1 else
           f"{short} process pairs read short of a third of the minimum effect (the farthest x{worst:.3f})")
    return f"{why}, and {scatter}" if math.isfinite(p) else why


def _t_test_p(logs: np.ndarray) -> float:
    """The one-sided p-value of the t-test of ``logs`` > 0 (``scipy.stats.ttest_1samp``); NaN with fewer than three
    values or a non-finite one."""
    if logs.size < 3 or not np.all(np.isfinite(logs)):
        return math.nan
    if float(np.ptp(logs)) == 0.0:
        return 0.0 if logs[0] > 0 else 1.0
    return float(sps.ttest_1samp(logs, 0.0, alternative="greater").pvalue)
