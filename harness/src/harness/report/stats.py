"""The statistics behind a verdict: a significance test, an effect size (ratio of medians) and its bootstrap CI.

Rule of one comparison (``decide``; time, lower is better; ``t`` is the benchmark's threshold as a fraction):
- regressed: the test rejects "same distribution" at ``alpha`` AND current/baseline median > 1 + t AND the bootstrap
  CI of that ratio lies entirely above 1;
- improved:  the test rejects at ``alpha`` AND the ratio < 1 / (1 + t) (the same distance in log scale) AND the CI lies
  entirely below 1;
- unchanged: otherwise. Requiring all three keeps noise from raising alarms (a tiny but significant shift over
  thousands of rounds stays "unchanged"), keeps one unlucky round from doing so (a large but insignificant shift too),
  and keeps a verdict from resting on a median that a resample of the same rounds could put on the other side of 1
  (a rank test can reject while the CI of the medians' ratio, e.g. [0.74, 1.42], still holds 1).

An entry whose group holds a practical limit (``harness.report.groups``) gets a second comparison, normalized by its
limit, so a change of the whole machine (load, frequency, memory bandwidth), which moves the limit as much as the
entry, cancels out: ``compare_samples`` on the per-round ratios entry / paired limit round when both runs timed the
entry beside its limit (the paired runner), else ``compare_normalized``: each round divided by the median of the
limit in the same run (measured at another moment, so it cancels only a change that lasted the whole run).
``harness.report.compare`` asks both comparisons to agree (see there).

Test: with per-round data on both sides, the two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``) on the
rounds, and a percentile bootstrap CI of the ratio of medians (both sides resampled independently, seeded numpy).
Without per-round data on either side, the weaker fallback is Welch's t-test on the summary mean/stddev/rounds
(``scipy.stats.ttest_ind_from_stats``, equal_var=False), which assumes roughly normal round times and tests means, not
medians; no CI is given then, so the CI condition cannot apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from harness.gate import Verdict, log_ratios
from harness.report.load import BenchmarkRecord

MANN_WHITNEY = "mann-whitney-u"
WELCH_SUMMARY = "welch-t-summary"
# Bootstrap resamples are drawn in chunks of at most this many elements to bound memory (8 bytes each).
_BOOTSTRAP_CHUNK_ELEMENTS = 4_000_000
# Above this many rounds, bootstrap medians come from their exact order-statistic distribution (see bootstrap_medians).
DIRECT_RESAMPLE_LIMIT = 5000


@dataclass(frozen=True)
class SampleComparison:
    """The statistics of one benchmark present on both sides.

    ``ratio``: current median / baseline median (> 1 is slower). ``ci``: bootstrap confidence interval of ``ratio`` or
    None (summary fallback). ``p_value``: two-sided, NaN when the test cannot be computed. ``test``: MANN_WHITNEY or
    WELCH_SUMMARY. ``note``: why the evidence is weak, or None.
    """

    verdict: Verdict
    ratio: float
    ci: tuple[float, float] | None
    p_value: float
    test: str
    note: str | None


def compare_records(
    current: BenchmarkRecord,
    baseline: BenchmarkRecord,
    *,
    threshold: float,
    alpha: float,
    confidence: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> SampleComparison:
    """Decide the verdict of one benchmark from its current and baseline records (see the module rule).

    ``threshold`` is a fraction > 0, ``alpha`` the test level in (0, 1), ``confidence`` the CI level in (0, 1),
    ``n_resamples`` the number of bootstrap resamples, ``rng`` the generator they are drawn from.
    """
    if current.data is not None and baseline.data is not None and min(current.data.size, baseline.data.size) >= 2:
        return compare_samples(current.data, baseline.data, threshold=threshold, alpha=alpha, confidence=confidence,
                               n_resamples=n_resamples, rng=rng)
    ratio = current.median / baseline.median
    p_value = welch_p_value(current, baseline)
    note = "per-round data missing on one or both sides: Welch t-test on summary stats (weaker)"
    if math.isnan(p_value):
        note = "too few rounds or no spread: significance cannot be tested"
    verdict = decide(ratio, None, p_value, threshold=threshold, alpha=alpha)
    return SampleComparison(verdict=verdict, ratio=ratio, ci=None, p_value=p_value, test=WELCH_SUMMARY, note=note)


def compare_samples(
    current: np.ndarray,
    baseline: np.ndarray,
    *,
    threshold: float,
    alpha: float,
    confidence: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> SampleComparison:
    """The module rule on two samples of per-round values (>= 2 each): Mann-Whitney U, ratio of medians, bootstrap
    CI; the values are times, or per-round ratios of an entry to its paired limit."""
    p_value = float(sps.mannwhitneyu(current, baseline, alternative="two-sided").pvalue)
    ratio = float(np.median(current) / np.median(baseline))
    ci = bootstrap_ratio_ci(current, baseline, confidence=confidence, n_resamples=n_resamples, rng=rng)
    note = "too few rounds or no spread: significance cannot be tested" if math.isnan(p_value) else None
    verdict = decide(ratio, ci, p_value, threshold=threshold, alpha=alpha)
    return SampleComparison(verdict=verdict, ratio=ratio, ci=ci, p_value=p_value, test=MANN_WHITNEY, note=note)


def decide(
    ratio: float, ci: tuple[float, float] | None, p_value: float, *, threshold: float, alpha: float
) -> Verdict:
    """The verdict of one comparison by the module rule: ``ratio`` is current/baseline median, ``ci`` its bootstrap
    CI (None: no per-round data, the CI condition is skipped; a NaN bound never counts as beyond 1), ``p_value`` the
    two-sided test's (NaN: not significant), ``threshold`` a fraction > 0, ``alpha`` the test level."""
    if not p_value < alpha:
        return Verdict.UNCHANGED
    if ratio > 1.0 + threshold and (ci is None or ci[0] > 1.0):
        return Verdict.REGRESSED
    if ratio < 1.0 / (1.0 + threshold) and (ci is None or ci[1] < 1.0):
        return Verdict.IMPROVED
    return Verdict.UNCHANGED


def compare_normalized(
    current: BenchmarkRecord,
    baseline: BenchmarkRecord,
    current_limit: BenchmarkRecord,
    baseline_limit: BenchmarkRecord,
    *,
    threshold: float,
    alpha: float,
    confidence: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> SampleComparison | None:
    """The limit-normalized comparison: ``current``'s per-round seconds divided by the median of ``current_limit``
    (same run) against ``baseline``'s divided by ``baseline_limit``'s median, judged by ``decide``.

    The ratio is (current median / current limit median) / (baseline median / baseline limit median). Its bootstrap CI
    resamples all four round sets, so the noise of the limit medians widens it too. Mann-Whitney runs on the scaled
    rounds (dividing one side by a constant keeps its ranks). Returns None unless all four records hold per-round data
    with at least 2 rounds (the harness's runs always do); arguments as in ``compare_records``.
    """
    records = (current, baseline, current_limit, baseline_limit)
    if any(r.data is None or r.data.size < 2 for r in records):
        return None
    now, before, limit_now, limit_before = (r.data for r in records if r.data is not None)
    scaled_now, scaled_before = now / np.median(limit_now), before / np.median(limit_before)
    p_value = float(sps.mannwhitneyu(scaled_now, scaled_before, alternative="two-sided").pvalue)
    ratio = float(np.median(scaled_now) / np.median(scaled_before))
    draws = [bootstrap_medians(values, n_resamples, rng) for values in (now, limit_now, before, limit_before)]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (draws[0] / draws[1]) / (draws[2] / draws[3])
    ci = _percentile_ci(ratios, confidence)
    note = "too few rounds or no spread: significance cannot be tested" if math.isnan(p_value) else None
    verdict = decide(ratio, ci, p_value, threshold=threshold, alpha=alpha)
    return SampleComparison(verdict=verdict, ratio=ratio, ci=ci, p_value=p_value, test=MANN_WHITNEY, note=note)


def welch_p_value(current: BenchmarkRecord, baseline: BenchmarkRecord) -> float:
    """Two-sided Welch t-test p-value from summary mean, stddev and rounds; NaN with < 2 rounds or zero spread."""
    if min(current.rounds, baseline.rounds) < 2 or current.stddev == baseline.stddev == 0.0:
        return math.nan
    result = sps.ttest_ind_from_stats(
        current.mean, current.stddev, current.rounds, baseline.mean, baseline.stddev, baseline.rounds, equal_var=False
    )
    return float(result.pvalue)


def bootstrap_ratio_ci(
    current: np.ndarray,
    baseline: np.ndarray,
    *,
    confidence: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Percentile bootstrap CI of median(current) / median(baseline), resampling each side independently.

    ``current`` and ``baseline`` are 1-D arrays of per-round seconds.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = bootstrap_medians(current, n_resamples, rng) / bootstrap_medians(baseline, n_resamples, rng)
    return _percentile_ci(ratios, confidence)


def _percentile_ci(ratios: np.ndarray, confidence: float) -> tuple[float, float]:
    """The central ``confidence`` interval of the bootstrap ``ratios`` (percentiles)."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_medians(values: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` medians of resamples (with replacement, same size) of the 1-D array ``values``.

    Up to DIRECT_RESAMPLE_LIMIT values the resamples are drawn (cost O(count * n)). Above it, the median of a resample
    is drawn from its exact distribution instead (cost O(n log n + count log n)): the k-th smallest of a resample,
    k = (n + 1) // 2, is at most the j-th smallest value iff at least k of the n draws are, so
    P(median* <= x_(j)) = P(Binomial(n, j / n) >= k). For even n this is the lower median, which differs from the
    average of the middle two by one spacing, negligible at that size.
    """
    size = values.size
    if size <= DIRECT_RESAMPLE_LIMIT:
        chunk = max(1, _BOOTSTRAP_CHUNK_ELEMENTS // size)
        parts = [
            np.median(rng.choice(values, size=(min(chunk, count - start), size)), axis=1) for start in range(0, count, chunk)
        ]
        return np.concatenate(parts)
    ordered = np.sort(values)
    cdf = sps.binom.sf((size + 1) // 2 - 1, size, np.arange(1, size + 1) / size)
    cdf[-1] = 1.0
    return ordered[np.searchsorted(cdf, rng.random(count), side="left")]


def unit_log_ratios(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per unit of four rounds taken in the order A B B A: ``(ln(B_1/A_1) + ln(B_2/A_2)) / 2``, given each side's
    rounds in time order (two per unit). Both orders of a pair occur once per unit, so an effect of going first or
    second cancels, and so does a drift that is linear over the unit. Raises ValueError for an odd count."""
    d = log_ratios(first, second)
    if d.size % 2:
        raise ValueError(f"rounds of A B B A units come in twos per side, got {d.size}")
    return (d[0::2] + d[1::2]) / 2.0
