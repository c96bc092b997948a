"""Regression thresholds of stored-baseline mode as benchmarks give them (``harness.bench_schema.THRESHOLD_KEY``).

A benchmark sets its own threshold with ``@pytest.mark.bench_threshold(0.25)``; the harness plugin copies the marker's
value into ``benchmark.extra_info[THRESHOLD_KEY]``, and a test may also set that key itself. The value is a fraction
(``0.25``) or a percent string (``"25%"``).
"""

from __future__ import annotations

from harness.bench_schema import threshold_fraction
from harness.report.errors import ReportInputError

__all__ = ["parse_threshold"]


def parse_threshold(value: object, source: str) -> float:
    """Turn ``0.25``, ``"0.25"`` or ``"25%"`` into the fraction 0.25 (``harness.bench_schema.threshold_fraction``).

    ``source`` names where the value came from, for the message ('' when the caller names it, as argparse does).
    Raises ReportInputError when the value is not a finite number > 0 (booleans are refused too).
    """
    try:
        return threshold_fraction(value, source)
    except ValueError as exc:
        raise ReportInputError(str(exc)) from None
