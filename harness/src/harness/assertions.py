"""``assert_close``: compare a device result with a numpy reference under a per-dtype tolerance.

Integers and bool compare exactly. Floats pass where ``|actual - expected| <= atol + rtol * |expected|`` (the
``numpy.isclose`` convention), NaN only where the reference is NaN, and infinities only where the reference has the
same infinity. The default tolerances allow about two units in the last place of each float type, which covers one
rounding difference (e.g. a libm ``sin`` against a correctly rounded reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_core.dtype import DType, dtypes

__all__ = ["Tolerance", "TOLERANCES", "tolerance", "assert_close"]

_SHOWN = 5  # mismatching elements listed in a failure message
_CHUNK = 1 << 16  # elements checked at once on the passing path


@dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance of a float comparison (both 0 for exact comparison)."""

    rtol: float
    atol: float

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0


_EXACT = Tolerance(0.0, 0.0)
TOLERANCES: dict[DType, Tolerance] = {
    dtypes.float16: Tolerance(rtol=2e-3, atol=1e-3),     # eps 9.8e-4
    dtypes.bfloat16: Tolerance(rtol=1.6e-2, atol=1e-2),  # eps 7.8e-3
    dtypes.float32: Tolerance(rtol=1e-5, atol=1e-6),     # eps 1.2e-7, with room for summation order
    dtypes.float64: Tolerance(rtol=1e-12, atol=1e-14),   # eps 2.2e-16
}
"""Default tolerance per float dtype; every other dtype (ints, bool) compares exactly."""


def tolerance(dtype: DType, rtol: float | None = None, atol: float | None = None) -> Tolerance:
    """The tolerance used for ``dtype``: :data:`TOLERANCES` (exact for ints and bool), each part overridable.

    Raises ``TypeError`` for an override that is not a real number, ``ValueError`` for a negative or non-finite one
    (NaN would fail, infinity pass, every element) or an override on an exact (integer or bool) dtype.
    """
    base = TOLERANCES.get(dtype, _EXACT)
    for name, value in (("rtol", rtol), ("atol", atol)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a real number, got {value!r}")
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not dtype.is_float:
            raise ValueError(f"{dtype.name} compares exactly; a {name} override makes no sense for it")
    return Tolerance(base.rtol if rtol is None else rtol, base.atol if atol is None else atol)


def assert_close(actual: Any, expected: Any, dtype: DType, *, rtol: float | None = None, atol: float | None = None,
                 what: str = "") -> None:
    """Raise ``AssertionError`` unless ``actual`` matches ``expected`` for element type ``dtype``.

    Args:
        actual: the device result, array-like of any shape.
        expected: the reference, same shape; for floats it may be of a wider float type (compared in float64).
        dtype: the runtime dtype of the result; selects the tolerance (:func:`tolerance`).
        rtol, atol: override the float tolerance of ``dtype``.
        what: a label for the message (e.g. ``"output 2 of kernel 'alu_float32'"``).

    The message gives the number of mismatching elements out of the total, the largest absolute and relative error, and
    the first few bad indices with their actual and expected values. An ``actual`` numpy array (or scalar) of floats
    for an integer or bool ``dtype``, or of ints or bools for a float ``dtype``, fails as a dtype mismatch (the device
    returned another kind of element; a wider float type is fine). Raises ``TypeError`` if ``dtype`` is not a DType
    or an input is not numeric (None, strings, complex, ragged lists).
    """
    if not isinstance(dtype, DType):
        raise TypeError(f"dtype must be a runtime DType (e.g. dtypes.float32), got {dtype!r}")
    tol = tolerance(dtype, rtol, atol)
    a, e = _numeric_array(actual, "actual", dtype), _numeric_array(expected, "expected", dtype)
    label = f"{what}: " if what else ""
    if isinstance(actual, (np.ndarray, np.generic)) and _is_float(a.dtype) != dtype.is_float:
        raise AssertionError(f"{label}dtype mismatch: actual holds {a.dtype} values, expected {dtype.name} values")
    if a.shape != e.shape:
        raise AssertionError(f"{label}shape mismatch: actual {a.shape}, expected {e.shape}")
    if dtype.is_float:
        if _floats_close(a.reshape(-1), e.reshape(-1), tol):
            return
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        bad = _float_mismatches(a64, e64, tol)
    else:
        a64, e64 = _exact_values(a, dtype, "actual"), _exact_values(e, dtype, "expected")
        bad = a64 != e64
    if bad.any():
        with np.errstate(over="ignore", invalid="ignore"):  # differences of huge or infinite values
            raise AssertionError(label + _summary(a64, e64, bad, dtype, tol))


def _is_float(np_dtype: np.dtype) -> bool:
    # ml_dtypes' bfloat16 has numpy kind 'V', not 'f'; matched by name so that ml_dtypes is imported only when used
    return np_dtype.kind == "f" or any(np_dtype.name == d.name and np_dtype == d.np for d in TOLERANCES)


def _numeric_array(x: Any, side: str, dtype: DType) -> np.ndarray:
    """``x`` as a numpy array of bools, ints or floats (or, for an exact ``dtype``, Python ints beyond int64 in an
    object array); ``TypeError`` naming ``side`` for anything else."""
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise TypeError(f"{side} is not an array of numbers: {exc}") from None
    big_ints = arr.dtype == object and not dtype.is_float and all(isinstance(v, (int, np.integer)) for v in arr.flat)
    if arr.dtype.kind not in "biu" and not _is_float(arr.dtype) and not big_ints:
        raise TypeError(f"{side} must hold bools, ints or floats, got {arr.dtype} values ({x!r:.60})")
    return arr


def _exact_values(x: np.ndarray, dtype: DType, side: str) -> np.ndarray:
    """``x`` as Python ints (object array), so values of any integer type compare and subtract exactly."""
    if x.dtype != object and x.dtype.kind not in "biu":
        if not np.all(np.isfinite(x)) or not np.all(x == np.trunc(x)):
            raise AssertionError(f"{dtype.name} compares exactly, but {side} holds non-integral float values ({x.dtype})")
    return x.astype(object) if x.dtype.kind in "biuO" else np.vectorize(int, otypes=[object])(x)


def _floats_close(a: np.ndarray, e: np.ndarray, tol: Tolerance) -> bool:
    """True when every element of the flat ``a`` matches ``e`` (``_float_mismatches``), compared _CHUNK elements at a
    time: the float64 copies and masks of a whole 16 Mi-element result are faulted in afresh each time (1.4 s of the
    2.3 s setup of a 64 MiB benchmark), those of a chunk are reused."""
    return not any(_float_mismatches(a[i:i + _CHUNK].astype(np.float64), e[i:i + _CHUNK].astype(np.float64), tol).any()
                   for i in range(0, a.size, _CHUNK))


def _float_mismatches(a: np.ndarray, e: np.ndarray, tol: Tolerance) -> np.ndarray:
    a_nan, e_nan = np.isnan(a), np.isnan(e)
    a_inf, e_inf = np.isinf(a), np.isinf(e)
    finite = ~(a_nan | e_nan | a_inf | e_inf)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(a - e) <= tol.atol + tol.rtol * np.abs(e)
    same_inf = a_inf & e_inf & (a == e)
    return ~((finite & close) | (a_nan & e_nan) | same_inf)


def _summary(a: np.ndarray, e: np.ndarray, bad: np.ndarray, dtype: DType, tol: Tolerance) -> str:
    nbad, total = int(bad.sum()), bad.size
    how = "exact comparison" if tol.exact else f"rtol={tol.rtol:g}, atol={tol.atol:g}"
    lines = [f"{nbad} of {total} {dtype.name} elements differ ({100 * nbad / total:.3g}%; {how})"]
    idx = np.argwhere(bad)
    diffs = [(abs(a[tuple(i)] - e[tuple(i)]), tuple(int(j) for j in i)) for i in idx[:10000]]
    finite = [(d, i) for d, i in diffs if np.isfinite(float(d))]
    if finite:
        dmax, imax = max(finite, key=lambda t: t[0])
        rel = [(float(d) / abs(float(e[i])), i) for d, i in finite if e[i] != 0]
        rel_text = "n/a (expected 0)" if not rel else "{:.4g} at index {}".format(*max(rel, key=lambda t: t[0]))
        lines.append(f"max abs error {float(dmax):.6g} at index {imax}; max rel error {rel_text}")
    nan_diff = int((np.isnan(a) != np.isnan(e)).sum()) if dtype.is_float else 0
    if nan_diff:
        lines.append(f"NaN positions differ at {nan_diff} element(s)")
    for _, i in diffs[:_SHOWN]:
        lines.append(f"  index {i}: actual {_fmt(a[i])}, expected {_fmt(e[i])}")
    if nbad > _SHOWN:
        lines.append(f"  ... and {nbad - _SHOWN} more")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v))
