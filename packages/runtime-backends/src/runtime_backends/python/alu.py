"""numpy implementations of the IR's ALU ops and casts, exactly as ``runtime_core.ir`` defines them."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Ops

__all__ = ["alu", "cast", "bitcast", "fma"]

_LOW_PRECISION = (dtypes.float16, dtypes.bfloat16)


def _idiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C99 6.5.5 division: the quotient truncated toward zero (numpy's // floors)."""
    q = np.floor_divide(a, b)
    if np.dtype(q.dtype).kind == "i":
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        q = q + fix.astype(q.dtype)
    return q


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C99 6.5.5 remainder: ``a - (a/b)*b``, so it takes the sign of the dividend."""
    return np.subtract(a, np.multiply(_idiv(a, b), b))


def _float_math(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """Half types compute in float32 and round the result once, as the IR says."""
    def run(x: np.ndarray) -> np.ndarray:
        dt = np.asarray(x).dtype
        if dt.itemsize == 2:
            return fn(np.asarray(x, dtype=np.float32)).astype(dt)
        return fn(x)
    return run


_BINARY: dict[Ops, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.DIV: np.true_divide, Ops.IDIV: _idiv,
    Ops.MOD: _mod, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or,
    Ops.XOR: np.bitwise_xor, Ops.SHL: np.left_shift, Ops.SHR: np.right_shift,
}
_UNARY: dict[Ops, Callable[[np.ndarray], np.ndarray]] = {
    Ops.EXP2: _float_math(np.exp2), Ops.LOG2: _float_math(np.log2), Ops.SIN: _float_math(np.sin),
    Ops.SQRT: _float_math(np.sqrt), Ops.TRUNC: _float_math(np.trunc),
    Ops.RECIP: _float_math(lambda x: np.true_divide(np.ones((), x.dtype), x)),
}


def alu(op: Ops, dtype: DType, *srcs: np.ndarray) -> np.ndarray:
    """Apply ALU ``op`` whose operands have ``dtype`` (for WHERE: the value dtype) to numpy arrays or scalars."""
    if op is Ops.WHERE:
        return np.where(srcs[0], srcs[1], srcs[2])
    if op is Ops.FMA:
        return fma(dtype, *srcs)
    if op is Ops.NEG:
        return np.negative(srcs[0])
    if op in (Ops.MAX, Ops.MIN):
        if dtype.is_float:  # IEEE maxNum/minNum: a NaN operand loses to a number
            return (np.fmax if op is Ops.MAX else np.fmin)(*srcs)
        return (np.maximum if op is Ops.MAX else np.minimum)(*srcs)
    if op in _UNARY:
        return _UNARY[op](srcs[0])
    if dtype in _LOW_PRECISION and op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV):
        a, b = (np.asarray(s, dtype=np.float32) for s in srcs)
        return _BINARY[op](a, b).astype(dtype.np)
    return _BINARY[op](*srcs)


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """Convert values as ``Ops.CAST`` defines: float->int truncates, anything->bool is ``!= 0``, others round to even."""
    x = np.asarray(x)
    if dst is dtypes.bool:
        return x != 0
    if src in _LOW_PRECISION and not dst.is_float:
        x = x.astype(np.float32)  # exact; avoids relying on ml_dtypes' direct half->int conversions
    if dst is dtypes.bfloat16 and src is dtypes.float64:
        return _f64_to_bf16(x)
    if dst is dtypes.bfloat16 and src.is_int and src.itemsize >= 4:
        return _int_to_bf16(x)
    return x.astype(dst.np)


def _int_to_bf16(x: np.ndarray) -> np.ndarray:
    """32/64-bit integers -> bfloat16 rounded once to nearest even, in integer arithmetic (float32 would round twice)."""
    neg = x < 0
    mag = np.where(neg, np.negative(x.astype(np.int64)).astype(np.uint64), x.astype(np.uint64)) \
        if x.dtype.kind == "i" else x.astype(np.uint64)
    top = np.zeros(mag.shape, dtype=np.int64)  # index of the highest set bit
    for bit in (32, 16, 8, 4, 2, 1):
        big = (mag >> np.uint64(top + bit).clip(0, 63).astype(np.uint64)) > 0
        top = np.where(big & (top + bit < 64), top + bit, top)
    shift = np.clip(top - 7, 0, 63).astype(np.uint64)  # bfloat16 keeps 8 significant bits
    q = mag >> shift
    rem = mag - (q << shift)
    half = np.where(shift > 0, np.uint64(1) << np.maximum(shift, np.uint64(1)) - np.uint64(1), np.uint64(0))
    up = (shift > 0) & ((rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1)))
    value = np.ldexp((q + up).astype(np.float64), shift.astype(np.int64))  # <= 9 significant bits: exact
    return np.where(neg, -value, value).astype(dtypes.bfloat16.np)


def _f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> bfloat16 with one round-to-nearest-even (going through float32 would round twice)."""
    f32 = x.astype(np.float32)
    back = f32.astype(np.float64)
    # nudge ties created by the float32 rounding toward the exact value before the second rounding
    bits = f32.view(np.uint32)
    tie = (bits & 0xFFFF) == 0x8000
    nudge = tie & np.isfinite(x) & (back != x)
    adjusted = np.where(nudge & (back < x), bits + 1, np.where(nudge & (back > x), bits - 1, bits)).astype(np.uint32)
    return adjusted.view(np.float32).astype(dtypes.bfloat16.np)


def bitcast(x: np.ndarray, dst: DType) -> np.ndarray:
    """Reinterpret the bits of ``x`` (same itemsize) as ``dst``."""
    return np.ascontiguousarray(x).view(dst.np)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s = fl(a + b)`` and the exact error ``e`` (``s + e == a + b``; Knuth's TwoSum, any magnitudes)."""
    s = a + b
    bp = s - a
    return s, (a - (s - bp)) + (b - bp)


def _round_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``s + e`` (``s = fl(s + e)``, ``e`` its exact error) rounded to odd: an inexact ``s`` with an even significand
    moves one ulp toward ``e``. Rounding such a value again to 2 or more bits fewer is correctly rounded."""
    bits = s.view(np.int64)
    fix = (e != 0) & np.isfinite(s) & ((bits & 1) == 0)
    step = np.where((e > 0) == (s > 0), 1, -1)
    return np.where(fix, bits + step, bits).view(np.float64)


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p = fl(a * b)`` and its exact error (Dekker/Veltkamp splitting; exact while no product under/overflows)."""
    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = x * 134217729.0  # 2**27 + 1
        hi = t - (t - x)
        return hi, x - hi
    p = a * b
    (ah, al), (bh, bl) = split(a), split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma_exact(a: float, b: float, c: float) -> float:
    """One float64 FMA in exact rational arithmetic (``int / int`` division is correctly rounded)."""
    if np.isfinite(a) and np.isfinite(b) and not np.isfinite(c):
        return c  # the exact product is finite, even where a * b would overflow
    if not all(map(np.isfinite, (a, b, c))):
        return a * b + c  # an infinite or NaN product: the same result as a fused operation
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the sign of an exact zero follows IEEE addition of the (exact) zero product and c
    try:
        return exact.numerator / exact.denominator
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float64 FMA: Boldo & Melquiond's emulation (IEEE TC 57(4), 2008, "Emulation of FMA and correctly rounded sums:
    proved algorithms using rounding to odd"): ``a*b = uh + ul`` exactly, ``c + uh = th + tl`` exactly, then
    ``RN(th + RO(tl + ul))``. Operands outside the range where that is proven (possible under/overflow, inf/NaN, zero
    products) are computed exactly one by one."""
    a, b, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        ma, mb, mc = np.abs(a), np.abs(b), np.abs(c)
        safe = (ma >= 2.0**-450) & (ma <= 2.0**450) & (mb >= 2.0**-450) & (mb <= 2.0**450) \
            & ((mc == 0) | ((mc >= 2.0**-900) & (mc <= 2.0**1000)))
        uh, ul = _two_prod(a, b)
        th, tl = _two_sum(c, uh)
        v = _round_odd(*_two_sum(tl, ul))
        out = np.where(c == 0, uh, th + v)
    if not safe.all():
        slow = np.flatnonzero(~safe.ravel())
        flat = out.ravel().copy()
        flat[slow] = [_fma_exact(float(x), float(y), float(z)) for x, y, z in
                      zip(a.ravel()[slow], b.ravel()[slow], c.ravel()[slow])]
        out = flat.reshape(out.shape)
    return out


def fma(dtype: DType, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to ``dtype`` (IR ``FMA``). Below float64 the product is exact in float64 and the sum
    is rounded to odd there, so the one rounding to the type is correct; float64 uses ``_fma64``."""
    if dtype is dtypes.float64:
        return _fma64(a, b, c)
    a64, b64, c64 = (np.asarray(x, dtype=np.float32).astype(np.float64) for x in (a, b, c))
    with np.errstate(all="ignore"):
        odd = _round_odd(*_two_sum(a64 * b64, c64))
        odd = np.where(np.isfinite(a64 * b64) & np.isfinite(c64), odd, a64 * b64 + c64)
    if dtype is dtypes.bfloat16:
        return _f64_to_bf16(odd)
    return odd.astype(dtype.np)
