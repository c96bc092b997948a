"""8-bit float conversions of cvt (PTX ISA 9.7.9.21, sm_89+): f32/f16x2 -> e4m3x2/e5m2x2 with .rn.satfinite and
e4m3x2/e5m2x2 -> f16x2, internal to ``convert``.

Formats (OCP FP8): e4m3 has 3 mantissa bits, bias 7, largest finite 448 and NaN 0x7f (no infinity); e5m2 has 2
mantissa bits, bias 15, largest finite 57344, infinity 0x7c and NaN 0x7f. Rounding is to nearest even; .satfinite
clamps overflow and infinity to the largest finite value of the sign and keeps NaN (as the canonical NaN 0x7f);
.relu turns negative results into +0. Every fp8 value is exact in f16, so widening does not round.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FP8_TYPES", "to_fp8", "from_fp8"]

# name -> (mantissa bits, exponent bias, largest finite value)
FP8_TYPES = {"e4m3x2": (3, 7, 448.0), "e5m2x2": (2, 15, 57344.0)}
_NAN = 0x7F


def to_fp8(x: np.ndarray, fmt: str, relu: bool) -> np.ndarray:
    """Round float64 values to fp8 ``fmt`` bytes (np.uint8) with .rn.satfinite (and .relu)."""
    mbits, bias, largest = FP8_TYPES[fmt]
    nan = np.isnan(x)
    sign = np.signbit(x) & ~nan
    ax = np.where(nan, 0.0, np.abs(x))
    if relu:
        ax = np.where(sign, 0.0, ax)
        sign = np.zeros_like(sign)
    emin = 1 - bias
    finite = np.where(np.isinf(ax), largest * 2, ax)  # beyond the largest finite value: saturates below
    exp = np.where(finite > 0, np.floor(np.log2(np.where(finite > 0, finite, 1.0))), emin)
    quantum = np.exp2(np.maximum(exp, emin) - mbits)
    r = np.rint(finite / quantum) * quantum
    r = np.minimum(r, largest)
    _, e2 = np.frexp(r)
    e = e2.astype(np.int64) - 1
    normal = (r > 0) & (e >= emin)
    mant = np.where(normal, r / np.exp2(e - mbits) - (1 << mbits), r / 2.0 ** (emin - mbits))
    field = np.where(normal, e + bias, 0).astype(np.int64)
    code = (field << mbits) | np.rint(mant).astype(np.int64)
    code = np.where(sign, code | 0x80, code)
    return np.where(nan, _NAN, code).astype(np.uint8)


def from_fp8(code: np.ndarray, fmt: str) -> np.ndarray:
    """Decode fp8 ``fmt`` bytes to float64 (exact)."""
    mbits, bias, _ = FP8_TYPES[fmt]
    c = code.astype(np.int64)
    field = (c >> mbits) & ((1 << (7 - mbits)) - 1)
    mant = c & ((1 << mbits) - 1)
    value = np.where(field == 0, mant * 2.0 ** (1 - bias - mbits),
                     (1.0 + mant / (1 << mbits)) * np.exp2(field - bias))
    top = (1 << (7 - mbits)) - 1
    if fmt == "e4m3x2":
        value = np.where((field == top) & (mant == (1 << mbits) - 1), np.nan, value)
    else:
        value = np.where(field == top, np.where(mant == 0, np.inf, np.nan), value)
    return np.where(c & 0x80, -value, value)
