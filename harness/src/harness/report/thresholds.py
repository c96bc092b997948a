"""Regression thresholds: parsing, and the ``extra_info`` keys a benchmark uses to set its own.

A benchmark sets its own threshold with ``@pytest.mark.bench_threshold(0.25)``; the harness plugin copies the marker's
value into ``benchmark.extra_info[THRESHOLD_KEY]``, and a test may also set that key itself. The value is a fraction
(``0.25``) or a percent string (``"25%"``). A throughput benchmark may set ``extra_info[HIGHER_IS_BETTER_KEY] = True``;
the report notes it, but verdicts are always on time (lower is better).
"""

from __future__ import annotations

from harness.report.errors import ReportInputError
from harness.threshold import threshold_fraction

THRESHOLD_KEY = "threshold"
HIGHER_IS_BETTER_KEY = "higher_is_better"
RESERVED_KEYS = frozenset({THRESHOLD_KEY, HIGHER_IS_BETTER_KEY})


def parse_threshold(value: object, source: str) -> float:
    """Turn ``0.25``, ``"0.25"`` or ``"25%"`` into the fraction 0.25 (``harness.threshold.threshold_fraction``).

    ``source`` names where the value came from, for the message ('' when the caller names it, as argparse does).
    Raises ReportInputError when the value is not a finite number > 0 (booleans are refused too).
    """
    try:
        return threshold_fraction(value, source)
    except ValueError as exc:
        raise ReportInputError(str(exc)) from None
