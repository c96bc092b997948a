"""The benchmark gate's statistics: one process pair gives one number, and one function decides.

The design, its derivation and its error rates are in ``docs/benchmark-gate.md``; this module is that document in code.

A benchmark is timed on K process pairs: a fresh worker process of each version (A = the ref, B = the working tree),
their rounds interleaved. Process pair k reduces to its **pair value** ``y_k``, the median of its per-round log ratios
``ln(B_r / A_r)`` (``pair_value``). Rounds of one process share its state (where its buffers landed), so they are not
independent replicates; process pairs are. ``decide`` runs a one-sample t-test across the pair values:

- the change is ``exp(mean(y)) - 1`` and its CONFIDENCE interval is the Student-t interval of ``mean(y)``;
- **regressed**: the mean change is at least the minimum effect AND the t-test puts it above zero at the corrected
  level ``alpha / (entries * LOOKS)`` (Bonferroni over the run's entries and over the looks the runner may take);
  **improved**: the mirror image;
- **unchanged**: the CONFIDENCE interval lies inside plus or minus the minimum effect (an equivalence test);
- otherwise undecided: the runner times the entry on PROCESS_PAIRS more process pairs, at most LOOKS sets in all; the
  report calls an entry still undecided "not judged (inconclusive)".

A false alarm needs a corrected-level rejection at one of at most ``entries * LOOKS`` tests, so the chance of any false
alarm in a run is at most ``alpha`` whatever the stopping rule does (the union bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import TypeGuard

import numpy as np
from scipy import stats as sps

__all__ = [
    "ALPHA", "BUDGET_SECONDS", "CONFIDENCE", "LOOKS", "LOOKS_RANGE", "MIN_EFFECT", "PAIRS_RANGE", "PROCESS_PAIRS",
    "ROUNDS", "ROUND_SECONDS",
    "Decision", "Settings", "Verdict", "corrected_level", "decide", "log_ratios", "pair_value", "pair_values",
    "split_pairs", "whole_within", "worth_more_pairs",
]

# The gate's tunable constants: all of them (docs/benchmark-gate.md, "Knobs").
MIN_EFFECT = 0.03  # the smallest change worth a verdict, as a fraction (--min-effect)
ALPHA = 0.01  # the chance that a run of unchanged code flags anything (--alpha)
CONFIDENCE = 0.95  # the interval shown for each change, and the one "unchanged" must fit inside the minimum effect
PROCESS_PAIRS = 4  # process pairs per look (--process-pairs)
LOOKS = 5  # sets of process pairs an undecided entry may get (--looks)
ROUNDS = 24  # rounds per process pair and side at most
ROUND_SECONDS = 0.002  # target length of one round: calls per round are calibrated to it
BUDGET_SECONDS = 1.0  # seconds of rounds per entry and look, all process pairs together (--budget)

# What a run may set them to (bounds, not knobs): a t-test needs two pair values; each look of each process pair
# holds two worker processes for the rest of the run, so a run holds at most 2 * 16 * 6 = 192 of them.
PAIRS_RANGE = (2, 16)
LOOKS_RANGE = (1, 6)


class Verdict(str, Enum):
    """The outcome for one benchmark: REGRESSED, IMPROVED, UNCHANGED (``decide``); UNJUDGED: compared but not judged
    (inconclusive, or the work changed, or the rounds do not pair up); NEW/MISSING: on one side only."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    UNJUDGED = "unjudged"
    NEW = "new"
    MISSING = "missing"


@dataclass(frozen=True)
class Settings:
    """The gate's knobs as one run uses them (defaults: the module constants). Raises ValueError for a value out of
    range: ``min_effect`` in [0, 1), ``alpha`` and ``confidence`` in (0, 1), ``process_pairs`` and ``looks`` integers
    within PAIRS_RANGE and LOOKS_RANGE, a finite budget above 0 seconds."""

    min_effect: float = MIN_EFFECT
    alpha: float = ALPHA
    confidence: float = CONFIDENCE
    process_pairs: int = PROCESS_PAIRS
    looks: int = LOOKS
    budget_seconds: float = BUDGET_SECONDS

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_effect < 1.0:
            raise ValueError(f"min_effect must be a fraction in [0, 1), got {self.min_effect!r}")
        if not (0.0 < self.alpha < 1.0 and 0.0 < self.confidence < 1.0):
            raise ValueError(f"alpha and confidence must be in (0, 1), got {self.alpha!r} and {self.confidence!r}")
        if not (whole_within(self.process_pairs, PAIRS_RANGE) and whole_within(self.looks, LOOKS_RANGE)
                and 0.0 < self.budget_seconds < math.inf):
            raise ValueError(f"need process pairs in {PAIRS_RANGE}, looks in {LOOKS_RANGE} (integers) and a finite "
                             f"budget > 0 s, got {self}")

    def level(self, entries: int) -> float:
        """The corrected level of each test of a run that judges ``entries`` entries (``corrected_level``)."""
        return corrected_level(self.alpha, entries, self.looks)

    def as_dict(self) -> dict[str, float | int]:
        """The settings as JSON-ready fields (a run file's RUN_KEY)."""
        return {"min_effect": self.min_effect, "alpha": self.alpha, "confidence": self.confidence,
                "process_pairs": self.process_pairs, "looks": self.looks, "budget_seconds": self.budget_seconds}


def whole_within(value: object, bounds: tuple[int, int]) -> TypeGuard[int]:
    """True when ``value`` is an integer (not a bool) within ``bounds``, both included."""
    return isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]


_MAX_LOG_RATIO = 50.0  # a pair value beyond this (a ratio of 5e21) is a broken measurement, not a change


@dataclass(frozen=True)
class Decision:
    """The verdict of one benchmark from its pair values.

    ``verdict``: REGRESSED, IMPROVED, UNCHANGED or UNJUDGED (undecided: the runner times more process pairs, the report
    says "inconclusive"); ``change``: ``exp(mean(y)) - 1``, the geometric-mean change of B against A as a fraction
    (0.05 = B 5% slower); ``interval``: its CONFIDENCE interval (fractions; (-1, inf) without one); ``p_value``: the
    two-sided t-test's p-value of "no change" (NaN without one); ``level``: the corrected level it was judged at;
    ``pairs``: how many pair values; ``reason``: one sentence that says why this verdict.
    """

    verdict: Verdict
    change: float
    interval: tuple[float, float]
    p_value: float
    level: float
    pairs: int
    reason: str

    @property
    def decided(self) -> bool:
        """True unless the entry is still undecided (then more process pairs may settle it)."""
        return self.verdict is not Verdict.UNJUDGED


def pair_value(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """One process pair's number: the median of ``ln(b_i / a_i)`` over its rounds, given the seconds per call of
    round i on side A and on side B (the rounds taken next to each other). Raises ValueError for unequal or empty
    sequences or a time that is not > 0."""
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a_.ndim != 1 or a_.shape != b_.shape or a_.size == 0:
        raise ValueError(f"a process pair needs rounds on both sides, equally many, got {a_.shape} and {b_.shape}")
    if not (np.all(np.isfinite(a_)) and np.all(np.isfinite(b_)) and np.all(a_ > 0) and np.all(b_ > 0)):
        raise ValueError("round times must be finite and > 0 seconds")
    return float(np.median(np.log(b_ / a_)))


def log_ratios(first: Sequence[float] | np.ndarray, second: Sequence[float] | np.ndarray) -> np.ndarray:
    """``ln(second_i / first_i)`` of each pair of rounds (seconds per call, > 0). Raises ValueError on unequal lengths
    or a time that is not > 0."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired rounds must be two 1-D sequences of equal length, got {a.shape} and {b.shape}")
    if a.size and (not np.all(a > 0) or not np.all(b > 0)):
        raise ValueError("paired round times must be > 0 seconds")
    return np.log(b / a)


def pair_values(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> np.ndarray:
    """``pair_value`` of each process pair k, given the rounds of its A worker ``a[k]`` and of its B worker ``b[k]``.
    Raises ValueError when the two sides do not have the same process pairs and rounds."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} A workers against {len(b)} B workers: they come in process pairs")
    return np.array([pair_value(x, y) for x, y in zip(a, b)], dtype=np.float64)


def split_pairs(data: Sequence[float], pair_rounds: Sequence[int]) -> list[list[float]]:
    """The rounds of each process pair from a run file's ``stats.data`` (every pair's rounds in turn) and options
    ``pair_rounds`` (rounds of each pair). Raises ValueError when they do not match."""
    counts = [int(n) for n in pair_rounds]
    if any(n < 1 for n in counts) or sum(counts) != len(data):
        raise ValueError(f"pair_rounds {counts} do not cover {len(data)} rounds")
    bounds = np.cumsum([0, *counts])
    return [list(data[int(lo):int(hi)]) for lo, hi in zip(bounds[:-1], bounds[1:])]


def corrected_level(alpha: float, entries: int, looks: int = LOOKS) -> float:
    """The two-sided level of each test: ``alpha / (entries * looks)`` (Bonferroni). Raises ValueError for an
    ``alpha`` outside (0, 1) or fewer than one entry or look."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if entries < 1 or looks < 1:
        raise ValueError(f"need at least one entry and one look, got {entries} and {looks}")
    return alpha / (entries * looks)


def decide(pair_values: Sequence[float] | np.ndarray, *, min_effect: float = MIN_EFFECT, level: float,
           confidence: float = CONFIDENCE) -> Decision:
    """The verdict of one benchmark from its pair values (``pair_value`` of each process pair; log ratios B/A),
    judged at the corrected two-sided ``level`` (``corrected_level``). See the module doc for the rule.

    Raises ValueError for a non-finite pair value, a ``min_effect`` outside [0, 1), or a ``level`` or ``confidence``
    outside (0, 1)."""
    y = _log_ratios_checked(pair_values)
    if not 0.0 <= min_effect < 1.0:
        raise ValueError(f"min_effect must be a fraction in [0, 1), got {min_effect!r}")
    if not (0.0 < level < 1.0 and 0.0 < confidence < 1.0):
        raise ValueError(f"level and confidence must be in (0, 1), got {level!r} and {confidence!r}")
    k = int(y.size)
    if k < 2:
        return Decision(Verdict.UNJUDGED, math.expm1(float(y.mean())) if k else math.nan, (-1.0, math.inf), math.nan,
                        level, k, f"{k} process pair(s): a t-test needs two or more")
    mean, se = float(y.mean()), float(y.std(ddof=1)) / math.sqrt(k)
    shown = _interval(mean, se, k, 1.0 - confidence)
    tested = _interval(mean, se, k, level)
    p = _p_value(mean, se, k)
    floor = math.log1p(min_effect)
    verdict, reason = _rule(mean, floor, shown, tested, k, level, min_effect)
    return Decision(verdict, math.expm1(mean), (math.expm1(shown[0]), math.expm1(shown[1])), p, level, k, reason)


def worth_more_pairs(pair_values: Sequence[float] | np.ndarray, final_pairs: int, *, min_effect: float = MIN_EFFECT,
                     level: float, confidence: float = CONFIDENCE) -> bool:
    """Whether timing more process pairs, up to ``final_pairs`` in all, could still settle an undecided entry, were
    its pair values to keep their present scatter ``s``: at ``final_pairs`` pairs the CONFIDENCE interval would fit
    inside plus or minus the minimum effect (so "unchanged" is reachable), or the t-test at ``level`` would reach a
    change as large as the present mean or the minimum effect, whichever is larger (so a verdict of change is). False
    means the runner stops: the entry is "not judged" now rather than after every look (docs/benchmark-gate.md,
    "Stopping rule"). Stopping early never adds a false alarm. Raises ValueError as ``decide`` does."""
    decide(pair_values, min_effect=min_effect, level=level, confidence=confidence)  # the same checks
    y = _log_ratios_checked(pair_values)
    k = int(y.size)
    if final_pairs <= k:
        return False
    if k < 2:
        return True
    se = float(y.std(ddof=1)) / math.sqrt(final_pairs)
    floor = math.log1p(min_effect)
    unchanged_reachable = _t_quantile(1.0 - (1.0 - confidence) / 2.0, final_pairs - 1) * se < floor
    change_reachable = _t_quantile(1.0 - level / 2.0, final_pairs - 1) * se < max(abs(float(y.mean())), floor)
    return unchanged_reachable or change_reachable


def _log_ratios_checked(pair_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """``pair_values`` as a float64 array; ValueError unless a 1-D sequence of finite log ratios within the bound."""
    raw = np.asarray(pair_values)
    if raw.ndim != 1 or raw.dtype.kind not in "iuf":
        raise ValueError(f"pair values must be a 1-D sequence of numbers (log ratios), got {raw.dtype} of shape "
                         f"{raw.shape}")
    y = raw.astype(np.float64)
    if not np.all(np.isfinite(y)) or np.any(np.abs(y) > _MAX_LOG_RATIO):
        raise ValueError(f"pair values must be finite log ratios within ±{_MAX_LOG_RATIO:g} (a ratio of e^{_MAX_LOG_RATIO:g})")
    return y


def _rule(mean: float, floor: float, shown: tuple[float, float], tested: tuple[float, float], k: int, level: float,
          min_effect: float) -> tuple[Verdict, str]:
    """The verdict and its reason from the mean pair value, the minimum effect ``floor`` (log), the shown and the
    tested interval (log)."""
    m = f"{min_effect:.0%}"
    if tested[0] > 0 and mean >= floor:
        return Verdict.REGRESSED, f"slower by at least {m} on average, and above zero at level {level:.1g} ({k} pairs)"
    if tested[1] < 0 and mean <= -floor:
        return Verdict.IMPROVED, f"faster by at least {m} on average, and below zero at level {level:.1g} ({k} pairs)"
    if -floor < shown[0] and shown[1] < floor:
        return Verdict.UNCHANGED, f"the interval lies within ±{m} ({k} pairs)"
    return Verdict.UNJUDGED, f"inconclusive: the interval reaches past ±{m} and no change is established ({k} pairs)"


def _interval(mean: float, se: float, k: int, two_sided: float) -> tuple[float, float]:
    """The Student-t interval of ``mean`` (standard error ``se``, ``k`` values) that misses with chance ``two_sided``."""
    half = _t_quantile(1.0 - two_sided / 2.0, k - 1) * se
    return mean - half, mean + half


@lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    return float(sps.t.ppf(q, df))


def _p_value(mean: float, se: float, k: int) -> float:
    """The two-sided one-sample t-test's p-value of ``mean == 0``; 0 or 1 when every pair value is the same."""
    if se == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return float(2.0 * sps.t.sf(abs(mean) / se, k - 1))
