"""Roles, the practical limit of each benchmark group, "x limit", and the natural-unit figure of each benchmark.

The keys are those of ``harness.bench_schema``. A limit shares its pytest-benchmark ``group`` with the entries it
bounds. An entry's "x limit" is how many times slower than its limit it ran:

- paired (the entry's record carries PAIRED_LIMIT_KEY, as the paired runner writes): the median over rounds of
  ``entry round / the limit round taken right beside it``, a same-moment ratio;
- otherwise (runs of plain ``pytest --benchmark-json``): its median divided by the median of its group's limit in the
  same run, measured at another moment, so machine load between the two moves it (the report says which it is).

Should a group hold several limits, the fastest one (smallest median) is the limit of the unpaired ratio, since it is
the best that was shown achievable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.bench_schema import ENTRY, LIMIT, PER_CALL_KEY, TIME_UNITS, UNIT_KEY, VALUE_KEY, finite_float, role_of
from harness.report.load import BenchmarkRecord, BenchmarkRun

__all__ = ["XLimit", "group_limits", "is_limit", "median_seconds", "natural_figure", "record_figure", "role", "x_limits"]


@dataclass(frozen=True)
class XLimit:
    """An entry's "x limit": ``ratio`` (entry / limit time), ``limit`` (the limit's fullname) and ``paired`` (True
    when from rounds taken side by side)."""

    ratio: float
    limit: str
    paired: bool


def role(record: BenchmarkRecord) -> str:
    """The record's role: ENTRY, LIMIT or PEER (``harness.bench_schema.role_of``)."""
    return role_of(record.extra_info)


def is_limit(record: BenchmarkRecord) -> bool:
    """True when ``record`` is a practical-limit entry."""
    return role(record) == LIMIT


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


def x_limits(run: BenchmarkRun) -> dict[str, XLimit]:
    """fullname -> XLimit for every entry of ``run`` that was paired with a limit or whose group holds one. Peers and
    limits have none (a peer's size need not be the entries' size)."""
    limits = group_limits(run)
    found = {}
    for name, record in run.benchmarks.items():
        if role(record) != ENTRY:
            continue
        if record.paired_limit is not None and record.paired_limit_data is not None and record.data is not None:
            ratio = float(np.exp(np.median(np.log(record.data / record.paired_limit_data))))
            found[name] = XLimit(ratio, record.paired_limit, True)
        elif record.group in limits:
            limit = limits[record.group]
            found[name] = XLimit(record.median / limit.median, limit.fullname, False)
    return found


def natural_figure(extra_info: Mapping[str, Any]) -> str | None:
    """'<value> <unit>' (value to 4 significant digits when numeric, e.g. '12.35 GB/s'), or None unless ``extra_info``
    has both VALUE_KEY and UNIT_KEY."""
    if VALUE_KEY not in extra_info or UNIT_KEY not in extra_info:
        return None
    value = extra_info[VALUE_KEY]
    number = finite_float(value)
    text = f"{number:.4g}" if number is not None else str(value)
    return f"{text} {extra_info[UNIT_KEY]}"



def median_seconds(record: BenchmarkRecord) -> float:
    """The median of ``record``'s rounds (``stats.data``), else its summary median (seconds per call)."""
    return float(np.median(record.data)) if record.data is not None and record.data.size else record.median


def record_figure(record: BenchmarkRecord, seconds: float | None = None) -> str | None:
    """The natural-unit figure of ``record`` computed from its own rounds (the median of ``stats.data``, or the
    summary median; ``seconds`` per call instead when given): '<value> <unit>' for a time unit of TIME_UNITS or a
    throughput whose amount per call the benchmark recorded (PER_CALL_KEY); else the figure the benchmark recorded
    (``natural_figure``), or None."""
    unit = record.extra_info.get(UNIT_KEY)
    median = seconds if seconds is not None else median_seconds(record)
    per_call = record.extra_info.get(PER_CALL_KEY)
    amount = finite_float(per_call.get(unit)) if isinstance(per_call, Mapping) and isinstance(unit, str) else None
    if isinstance(unit, str) and unit in TIME_UNITS:
        return f"{median * TIME_UNITS[unit]:.4g} {unit}"
    if amount is not None and median > 0:
        return f"{amount / median:.4g} {unit}"
    return natural_figure(record.extra_info)
