"""Exact float references for the backend tests: rational arithmetic rounded once into a float format."""

from __future__ import annotations

import math
from fractions import Fraction

from runtime_core.dtype import DType, dtypes

# (significand bits, smallest normal exponent, largest exponent) of each float type
FLOAT_FORMAT = {dtypes.float16: (11, -14, 15), dtypes.bfloat16: (8, -126, 127), dtypes.float32: (24, -126, 127),
                dtypes.float64: (53, -1022, 1023)}


def round_float(x: Fraction | int, dt: DType) -> float:
    """``x`` rounded to nearest-even into float type ``dt`` (exact rational arithmetic; overflow gives inf)."""
    p, emin, emax = FLOAT_FORMAT[dt]
    m = abs(Fraction(x))
    if m == 0:
        return 0.0
    e = m.numerator.bit_length() - m.denominator.bit_length()
    e = e - 1 if Fraction(2) ** e > m else e
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    r = round(m / ulp) * ulp  # Fraction.__round__ rounds half to even
    value = math.inf if r >= Fraction(2) ** (emax + 1) else float(r)
    return value if x > 0 else -value


def fma_reference(a: float, b: float, c: float, dt: DType) -> float:
    """IR ``FMA``: ``a * b + c`` rounded once into ``dt``; inf/NaN operands as IEEE 754 fusedMultiplyAdd gives them."""
    if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c):
        return c  # the exact product is finite, even where a * b would overflow
    if not all(math.isfinite(v) for v in (a, b, c)):
        return a * b + c  # an infinite or NaN product: inf/NaN propagate as in the unfused expression
    product = Fraction(a) * Fraction(b)
    if product + Fraction(c) != 0:
        return round_float(product + Fraction(c), dt)
    if product != 0:
        return 0.0  # x + (-x) is +0 (IEEE 754-2008 6.3)
    zero_product = math.copysign(0.0, math.copysign(1.0, a) * math.copysign(1.0, b))
    return zero_product + c  # two zeros: -0 only when both are -0
