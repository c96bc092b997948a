"""Exact bit patterns of IR constants, shared by the C-family renderers (CPU C, CUDA C) and the PTX renderer."""

from __future__ import annotations

import math

import numpy as np

from runtime_core.dtype import DType, dtypes

__all__ = ["float_bits", "HALF"]

HALF = (dtypes.float16, dtypes.bfloat16)
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _to_f32_odd(value: float) -> np.float32:
    """``value`` rounded to float32 *to odd*: truncate toward zero, then set the last bit if anything was lost. A
    later rounding to nearest of that float32 to 16 bits equals the correct rounding of ``value`` (Boldo & Melquiond,
    2008), where rounding through a float32 rounded to nearest could round twice."""
    with np.errstate(over="ignore"):
        near = np.float32(value)
    if math.isnan(value) or float(near) == value:
        return near
    toward_zero = near if abs(float(near)) < abs(value) else np.nextafter(near, np.float32(0))
    return np.uint32(int(toward_zero.view(np.uint32)) | 1).view(np.float32)


def float_bits(value: int | float, dt: DType) -> int:
    """The bit pattern of the float ``dt`` nearest to ``value`` (round to nearest even, overflow to infinity).

    Raises ``ValueError`` for a value beyond even float64's range.
    """
    try:
        v = float(value)
    except OverflowError as e:
        raise ValueError(f"constant {value!r} does not fit a {dt.name} (nor a float64)") from e
    with np.errstate(over="ignore"):
        if dt is dtypes.float16:
            x = np.array(v, np.float64).astype(np.float16)  # numpy's double -> half conversion rounds once
        elif dt is dtypes.bfloat16:
            x = np.array(_to_f32_odd(v)).astype(dt.np)  # ml_dtypes.bfloat16
        else:
            x = np.array(v, dt.np)
    return int(x.view(_UINT[dt.itemsize]))
