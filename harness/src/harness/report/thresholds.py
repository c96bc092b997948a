"""Regression thresholds: parsing, and the ``extra_info`` keys a benchmark uses to set its own.

A benchmark sets its own threshold with ``@pytest.mark.bench_threshold(0.25)``; the harness plugin copies the marker's
value into ``benchmark.extra_info[THRESHOLD_KEY]``, and a test may also set that key itself. The value is a fraction
(``0.25``) or a percent string (``"25%"``). A throughput benchmark may set ``extra_info[HIGHER_IS_BETTER_KEY] = True``;
the report notes it, but verdicts are always on time (lower is better).
"""

from __future__ import annotations

import math

from harness.report.errors import ReportInputError

THRESHOLD_KEY = "threshold"
HIGHER_IS_BETTER_KEY = "higher_is_better"
RESERVED_KEYS = frozenset({THRESHOLD_KEY, HIGHER_IS_BETTER_KEY})


def parse_threshold(value: object, source: str) -> float:
    """Turn ``0.25``, ``"0.25"`` or ``"25%"`` into the fraction 0.25.

    A bare number is a fraction of the baseline median (0.1 = 10%); a string ending in ``%`` is a percent.
    ``source`` names where the value came from, for the message.
    Raises ReportInputError when the value is not a finite number > 0 (booleans are refused too).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ReportInputError(f"{source}: threshold {value!r} is not a number or a percent string like '10%'")
    fraction: float
    if isinstance(value, str):
        text = value.strip()
        scale = 100.0 if text.endswith("%") else 1.0
        try:
            fraction = float(text.rstrip("%").strip()) / scale
        except ValueError:
            raise ReportInputError(f"{source}: threshold {value!r} is not a number or a percent string like '10%'") from None
    else:
        fraction = float(value)
    if not math.isfinite(fraction) or fraction <= 0:
        raise ReportInputError(f"{source}: threshold {value!r} must be a fraction > 0 (e.g. 0.1 or '10%')")
    return fraction
