"""Regression thresholds as benchmarks give them: a fraction (``0.25``) or a percent string (``"25%"``).

Shared by the ``bench_threshold`` marker (``harness.markers``) and the report (``harness.report.thresholds``). It
imports nothing beyond the standard library: the plugin uses it inside test runs, where loading the report package
(scipy, matplotlib) would cost half a second.
"""

from __future__ import annotations

import math

__all__ = ["finite_float", "threshold_fraction"]


def finite_float(value: object) -> float | None:
    """``value`` as a float when it is a JSON number (not a bool) that is finite as a float, else None (an integer of
    more than ~309 digits does not fit a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def threshold_fraction(value: object, source: str) -> float:
    """Turn ``0.25``, ``"0.25"`` or ``"25%"`` into the fraction 0.25.

    A bare number is a fraction of the baseline median (0.1 = 10%); a string ending in ``%`` is a percent.
    ``source`` names where the value came from, for the message ('' when the caller names it, as argparse does).
    Raises ValueError when the value is not a finite number > 0 (booleans are refused too).
    """
    where = f"{source}: " if source else ""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where}threshold {value!r} is not a number or a percent string like '10%'")
    fraction: float
    if isinstance(value, str):
        text = value.strip()
        scale = 100.0 if text.endswith("%") else 1.0
        try:
            fraction = float(text.rstrip("%").strip()) / scale
        except ValueError:
            raise ValueError(f"{where}threshold {value!r} is not a number or a percent string like '10%'") from None
    else:
        number = finite_float(value)  # None for an integer too large for a float
        fraction = math.nan if number is None else number
    if not math.isfinite(fraction) or fraction <= 0:
        raise ValueError(f"{where}threshold {value!r} must be a fraction > 0 (e.g. 0.1 or '10%')")
    return fraction
