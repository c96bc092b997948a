"""Drift: a benchmark whose level crept up over the stored runs, in steps that each stayed under the threshold.

Comparing with the baseline alone cannot see it when the baseline is replaced on every merge. So the report also
judges each entry's series over the stored history (the earlier runs of the same machine, oldest first, then the
current run), in its machine-independent form where there is one: the paired "x limit" (entry / the limit round
beside it), else the median time.

Rule (``find_drift``): with at least MIN_RUNS runs, the Theil-Sen slope of ln(value) against the run index
(``scipy.stats.theilslopes``: the median of all pairwise slopes, robust to a few wild runs) must have its
``confidence`` interval entirely above 0, and the cumulative change it implies over the series,
``exp(slope * (runs - 1))``, must exceed 1 + threshold. The drift names the first and the last run of the series.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from scipy import stats as sps

from harness.report.groups import XLimit
from harness.report.load import BenchmarkRun

__all__ = ["MIN_RUNS", "Drift", "find_drift", "series"]

MIN_RUNS = 5


@dataclass(frozen=True)
class Drift:
    """A cumulative regression: ``ratio`` (fitted last / fitted first value), over ``runs`` runs from ``first`` to
    ``last`` (run sources) at ``first_at``/``last_at``; ``measure`` is 'x limit' or 'median'."""

    ratio: float
    runs: int
    first: str
    last: str
    first_at: datetime
    last_at: datetime
    measure: str


def series(runs: Sequence[BenchmarkRun], limits: Sequence[Mapping[str, XLimit]],
           fullname: str) -> tuple[list[BenchmarkRun], list[float], str]:
    """The runs (in the given order) that hold ``fullname`` doing the same work as in the last of them (a run whose
    problem size differs from the last run's is left out: ``BenchmarkRecord.work_change``), its value in each, and what
    the values are: the paired 'x limit' when every one of those runs has it, else the 'median' time. ``limits[i]``
    is ``harness.report.groups.x_limits(runs[i])``."""
    holding = [(run, xs) for run, xs in zip(runs, limits) if fullname in run.benchmarks]
    if holding:
        last = holding[-1][0].benchmarks[fullname]
        holding = [(run, xs) for run, xs in holding if last.work_change(run.benchmarks[fullname]) is None]
    ratios = [xs.get(fullname) for _, xs in holding]
    kept = [run for run, _ in holding]
    if holding and all(x is not None and x.paired for x in ratios):
        return kept, [x.ratio for x in ratios if x is not None], "x limit"
    return kept, [run.benchmarks[fullname].median for run in kept], "median"


def find_drift(runs: Sequence[BenchmarkRun], limits: Sequence[Mapping[str, XLimit]], fullname: str, *,
               threshold: float, confidence: float = 0.95) -> Drift | None:
    """The drift of ``fullname`` over ``runs`` (oldest first, the current run last; ``limits`` as for ``series``)
    by the module rule, or None."""
    holding, values, measure = series(runs, limits, fullname)
    if len(values) < MIN_RUNS:
        return None
    y = np.log(np.asarray(values))
    slope, _, low, _ = sps.theilslopes(y, np.arange(y.size), alpha=confidence)
    ratio = math.exp(slope * (y.size - 1))
    if not (low > 0 and ratio > 1.0 + threshold):
        return None
    first, last = holding[0], holding[-1]
    return Drift(ratio, len(holding), first.source, last.source, first.datetime, last.datetime, measure)
