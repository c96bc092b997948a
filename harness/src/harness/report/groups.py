"""Benchmark groups that hold a practical-limit entry, and the natural-unit figure each benchmark reports.

Convention of the harness benchmarks (``extra_info`` keys): LIMIT_KEY (``"limit"``: ``True`` on an entry that measures
the practical limit, e.g. a numpy memcpy of the same size, and shares its pytest-benchmark ``group`` with the device
entries it bounds), VALUE_KEY and UNIT_KEY (``"value"``/``"unit"``: the benchmark's figure in its natural unit, e.g.
``12.3`` ``"GB/s"``).

The "x limit" of a device entry is its median time divided by the median time of its group's limit entry in the same
run: 1.8 means 1.8 times slower than the practical limit. Should a group hold several limit entries, the fastest one
(smallest median) is the limit, since it is the best that was shown achievable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.report.load import BenchmarkRecord, BenchmarkRun
from harness.threshold import finite_float

__all__ = ["LIMIT_KEY", "UNIT_KEY", "VALUE_KEY", "group_limits", "is_limit", "limit_ratios", "natural_figure"]

LIMIT_KEY = "limit"
VALUE_KEY = "value"
UNIT_KEY = "unit"


def is_limit(record: BenchmarkRecord) -> bool:
    """True when ``record`` is a practical-limit entry (``extra_info['limit']`` is the JSON ``true``)."""
    return record.extra_info.get(LIMIT_KEY) is True


def group_limits(run: BenchmarkRun) -> dict[str, BenchmarkRecord]:
    """group -> its limit entry in ``run`` (the one of smallest median when a group holds several; the first in file
    order on a tie), for every group that holds a limit entry."""
    limits: dict[str, BenchmarkRecord] = {}
    for record in run.benchmarks.values():
        if record.group is not None and is_limit(record):
            known = limits.get(record.group)
            if known is None or record.median < known.median:
                limits[record.group] = record
    return limits


def limit_ratios(run: BenchmarkRun) -> dict[str, float]:
    """fullname -> median / (median of its group's limit entry), for every non-limit benchmark of ``run`` whose group
    holds a limit entry; benchmarks without a group are never bounded. Both medians are seconds from the same run."""
    limits = group_limits(run)
    return {
        name: record.median / limits[record.group].median
        for name, record in run.benchmarks.items()
        if record.group in limits and not is_limit(record)
    }


def natural_figure(extra_info: Mapping[str, Any]) -> str | None:
    """'<value> <unit>' (value to 4 significant digits when numeric, e.g. '12.35 GB/s'), or None unless ``extra_info``
    has both VALUE_KEY and UNIT_KEY."""
    if VALUE_KEY not in extra_info or UNIT_KEY not in extra_info:
        return None
    value = extra_info[VALUE_KEY]
    number = finite_float(value)
    text = f"{number:.4g}" if number is not None else str(value)
    return f"{text} {extra_info[UNIT_KEY]}"
