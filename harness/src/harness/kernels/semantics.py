"""Independent numpy implementations of the IR semantics (``runtime_core.ir`` module docstring), for references.

Integer results are computed on Python ints (object arrays) and wrapped modulo 2**bits, so they never depend on numpy's
own overflow or shift behaviour. Float results are computed in float64 and rounded once to the result type, which is
the IR rule for float16/bfloat16 and within one rounding of the correctly rounded result for float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Ops

__all__ = ["to_ints", "wrap", "c_idiv", "c_mod", "reference_alu", "reference_cast", "round_to"]


def to_ints(x: np.ndarray) -> np.ndarray:
    """``x`` (integers or bools) as an object array of Python ints."""
    return np.asarray(x).astype(np.int64 if x.dtype.kind == "b" else x.dtype).astype(object)


def wrap(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Python ints reduced modulo 2**bits into ``dtype``'s range (two's complement for signed types)."""
    mod = 1 << dtype.bits
    out = np.array([int(v) % mod for v in np.asarray(values, dtype=object).ravel()], dtype=object)
    if not dtype.is_unsigned:
        out = np.array([v - mod if v >= mod >> 1 else v for v in out], dtype=object)
    return out.astype(dtype.np).reshape(np.shape(values))


def c_idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C99 6.5.5 quotient of Python-int arrays: truncated toward zero."""
    return np.array([(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a, b)], dtype=object)


def c_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C99 6.5.5 remainder: ``a - c_idiv(a, b) * b`` (sign of the dividend)."""
    return a - c_idiv(a, b) * b


def round_to(x64: np.ndarray, dtype: DType) -> np.ndarray:
    """A float64 array rounded once to float ``dtype`` (nearest even)."""
    return np.asarray(x64, dtype=np.float64).astype(dtype.np)


_Fn = Callable[..., Any]
_FLOAT_UNARY: dict[Ops, _Fn] = {Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt, Ops.TRUNC: np.trunc,
                Ops.RECIP: lambda x: 1.0 / x, Ops.NEG: np.negative}
_FLOAT_BINARY: dict[Ops, _Fn] = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.DIV: np.divide,
                 Ops.MAX: np.fmax, Ops.MIN: np.fmin}
_INT_BINARY: dict[Ops, _Fn] = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b,
               Ops.IDIV: c_idiv, Ops.MOD: c_mod,
               Ops.MAX: lambda a, b: np.array([max(x, y) for x, y in zip(a, b)], dtype=object),
               Ops.MIN: lambda a, b: np.array([min(x, y) for x, y in zip(a, b)], dtype=object),
               Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
               Ops.SHL: lambda a, b: np.array([x << y for x, y in zip(a, b)], dtype=object),
               Ops.SHR: lambda a, b: np.array([x >> y for x, y in zip(a, b)], dtype=object)}  # >> on ints is arithmetic


def _fma(dtype: DType, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to float64 (exact rational arithmetic; ``int / int`` rounds correctly), then to
    ``dtype``: products of float32 or narrower operands are exact in float64, so that is within one rounding."""
    def one(x: float, y: float, z: float) -> float:
        if math.isfinite(x) and math.isfinite(y) and not math.isfinite(z):
            return z  # the exact product is finite even where x * y overflows
        if not (math.isfinite(x) and math.isfinite(y)):
            return x * y + z
        exact = Fraction(x) * Fraction(y) + Fraction(z)
        return exact.numerator / exact.denominator if exact != 0 else x * y + z
    return round_to(np.array([one(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)]), dtype)


def reference_alu(op: Ops, dtype: DType, *args: np.ndarray) -> np.ndarray:
    """The IR result of ALU ``op`` on operands of ``dtype`` (``WHERE`` takes the bool condition first).

    Raises ``ValueError`` for an op this reference does not define on ``dtype``.
    """
    if op is Ops.WHERE:
        c, a, b = args
        return np.where(c.astype(bool), a, b).astype(dtype.np)
    if op in (Ops.CMPLT, Ops.CMPNE):
        a, b = (x.astype(np.float64) if dtype.is_float else to_ints(x) for x in args)
        return np.array(a < b if op is Ops.CMPLT else a != b, dtype=bool)
    if dtype.is_float:
        xs = [x.astype(np.float64) for x in args]
        if op is Ops.FMA:
            return _fma(dtype, *xs)
        fn = _FLOAT_UNARY.get(op) if len(xs) == 1 else _FLOAT_BINARY.get(op)
        if fn is None:
            raise ValueError(f"no float reference for {op.name}")
        with np.errstate(all="ignore"):
            return round_to(fn(*xs), dtype)
    if dtype is dtypes.bool:
        if op not in (Ops.AND, Ops.OR, Ops.XOR):
            raise ValueError(f"no bool reference for {op.name}")
        return _INT_BINARY[op](*(to_ints(x) for x in args)).astype(bool)
    ints = [to_ints(x) for x in args]
    if op is Ops.NEG:
        return wrap(-ints[0], dtype)
    if op not in _INT_BINARY:
        raise ValueError(f"no integer reference for {op.name}")
    return wrap(_INT_BINARY[op](*ints), dtype)


def reference_cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """The IR ``CAST`` of ``x`` (dtype ``src``) to ``dst``: truncation for float->int, nearest-even rounding into floats,
    wrap-around between ints, ``!= 0`` into bool, 0/1 out of bool. The caller keeps float->int values in range."""
    if dst is dtypes.bool:
        return (x.astype(np.float64) != 0) if src.is_float else (to_ints(x) != 0).astype(bool)
    if src.is_float and not dst.is_float:
        t = np.trunc(x.astype(np.float64))
        return wrap(np.array([int(v) for v in t], dtype=object), dst)
    if dst.is_float:
        if src.is_float:
            return round_to(x.astype(np.float64), dst)
        if dst in (dtypes.float32, dtypes.float64):  # numpy's int->float conversions round once, to nearest even
            return x.astype(np.int64 if src is dtypes.bool else x.dtype).astype(dst.np)
        # float16/bfloat16: via float64, exact for every int below 2**53 (the harness keeps these small enough)
        return round_to(np.array([float(v) for v in to_ints(x)], dtype=np.float64), dst)
    return wrap(to_ints(x), dst)
