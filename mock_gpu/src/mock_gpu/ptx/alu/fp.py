"""Floating-point formats and exact rounding helpers for the PTX ALU (internal to ``alu``).

Every PTX float value is widened to float64 (exact for f16, bf16 and f32), the operation computes the exact result as
an unevaluated sum ``hi + lo`` of float64 values (error-free transforms), and ``round_pair`` rounds that exact value
once to the destination format with the IEEE 754 rounding direction the PTX instruction names (.rn/.rz/.rm/.rp, PTX
ISA 9.7.3 "Floating-Point Instructions", rounding modifiers table).

Storage: f16 -> np.float16, bf16 -> np.uint16 raw bits (numpy has no bfloat16), f32 -> np.float32, f64 -> np.float64.
Results that are NaN are the canonical NaN of the format (all ones except the sign: 0x7fff, 0x7fffffff, ...),
which is what NVIDIA hardware produces for arithmetic NaN results.
"""

from __future__ import annotations

import numpy as np

FLOAT_FORMATS = ("f16", "bf16", "f32", "f64")
ROUND_MODES = ("rn", "rz", "rm", "rp")

STORAGE: dict[str, np.dtype] = {"f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16), "f32": np.dtype(np.float32),
           "f64": np.dtype(np.float64)}
MIN_NORMAL = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126, "f64": 2.0**-1022}
_CANONICAL_NAN_BITS = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF, "f64": 0x7FFFFFFFFFFFFFFF}
_UINT_OF: dict[str, type] = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}
_F32_MAX = float(np.finfo(np.float32).max)
_SPLITTER = float(2**27 + 1)


def canonical_nan(fmt: str) -> np.ndarray:
    """The canonical NaN of ``fmt`` as a 0-d array of its storage dtype."""
    bits: np.ndarray = np.array(_CANONICAL_NAN_BITS[fmt], dtype=_UINT_OF[fmt])
    return bits if fmt == "bf16" else bits.view(STORAGE[fmt])


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen bf16 raw bits (np.uint16) to np.float32 exactly (bf16 is the upper half of an f32)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_f64(x: np.ndarray, fmt: str) -> np.ndarray:
    """Widen a storage array of float format ``fmt`` to float64 (exact)."""
    if fmt == "bf16":
        return bf16_to_f32(x).astype(np.float64)
    return np.asarray(x).astype(np.float64)


def flush_f64(x: np.ndarray, fmt: str) -> np.ndarray:
    """Flush values subnormal in ``fmt`` to sign-preserving zero (.ftz, PTX ISA 9.7.3 "subnormal numbers")."""
    return np.where((np.abs(x) < MIN_NORMAL[fmt]) & (x != 0), np.copysign(0.0, x), x)


def finish(result64: np.ndarray, fmt: str, *, ftz: bool = False, sat: bool = False) -> np.ndarray:
    """Apply .ftz and .sat to an already-rounded float64 result and narrow it (exactly) to ``fmt`` storage.

    .sat clamps to [0.0, 1.0] and turns NaN into +0.0 (PTX ISA 9.7.3 "saturation modifier").
    """
    x = result64
    if ftz:
        x = flush_f64(x, fmt)
    if sat:
        x = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
        x = np.where(x == 0, 0.0, x)  # -0.0 saturates to +0.0
    return narrow_exact(x, fmt)


def narrow_exact(x64: np.ndarray, fmt: str) -> np.ndarray:
    """Narrow float64 values that are representable in ``fmt`` (or NaN -> canonical NaN) to its storage."""
    nan = np.isnan(x64)
    if fmt == "bf16":
        out = (x64.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    else:
        out = x64.astype(STORAGE[fmt])
    if nan.any():
        out = np.where(nan, canonical_nan(fmt), out)
    return out


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: s = fl(a+b) and e with s + e == a + b exactly (finite inputs, no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = _SPLITTER * a
    hi = t - (t - a)
    return hi, a - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's TwoProduct: p = fl(a*b) and e with p + e == a*b exactly.

    Exact when |a|, |b| < 2**995 and the error term does not underflow (|a*b| >= 2**-969); outside that range the
    error term can be inexact by a tiny amount (documented limitation of f64 fma/div/sqrt directed rounding).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def exact_sign(*terms: np.ndarray) -> np.ndarray:
    """Sign (-1.0, 0.0, +1.0) of the exact sum of float64 arrays, via Shewchuk's Grow-Expansion.

    The expansion is non-overlapping with increasing magnitude, so the sign of the sum is the sign of its largest
    non-zero component. Inputs must be finite and the partial sums must not overflow.
    """
    expansion: list[np.ndarray] = []
    for term in terms:
        q = term
        grown = []
        for comp in expansion:
            q, h = two_sum(q, comp)
            grown.append(h)
        grown.append(q)
        expansion = grown
    sign = np.zeros(np.shape(terms[0]), dtype=np.float64)
    for comp in expansion:  # later components are larger: they overwrite
        sign = np.where(comp != 0, np.sign(comp), sign)
    return sign


def round_to_odd64(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Round-to-odd of hi + lo to float64, given hi == fl(hi + lo) (e.g. from two_sum)."""
    even = (hi.view(np.uint64) & np.uint64(1)) == 0
    move = (lo != 0) & even & np.isfinite(hi)
    return np.where(move, np.nextafter(hi, np.where(lo > 0, np.inf, -np.inf)), hi)


def round_to_odd32(x: np.ndarray) -> np.ndarray:
    """Round-to-odd of float64 values to float32 (finite values beyond the f32 range become +-FLT_MAX)."""
    with np.errstate(over="ignore"):
        c = x.astype(np.float32)
    inexact = (c.astype(np.float64) != x) & ~np.isnan(x)
    overflow = np.isinf(c) & np.isfinite(x)
    c = np.where(overflow, np.copysign(np.float32(_F32_MAX), c), c)
    even = (c.view(np.uint32) & np.uint32(1)) == 0
    move = inexact & even & ~overflow
    toward = np.where(x > c.astype(np.float64), np.float32(np.inf), np.float32(-np.inf))
    return np.where(move, np.nextafter(c, toward), c)


_F32_TIE_BITS = np.uint64((1 << 28) - 1)  # f64 significand bits below a float32 midpoint (24 + 1 bits)
_F32_HALF_ULP = np.uint64(1 << 28)  # the f64 significand bit of half a float32 ulp (normal float32 range)
_F32_MIN_NORMAL = 2.0**-126


def _nearest_f32(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even of hi + lo to float32. Rounding hi alone is correct unless hi is exactly a float32
    midpoint (or value) while lo is not zero: only then can rounding twice differ, and only there round-to-odd is
    needed (no float32 midpoint lies strictly between hi + lo and its nearest float64 hi)."""
    hi, lo = np.asarray(hi), np.asarray(lo)
    with np.errstate(over="ignore"):
        out = hi.astype(np.float32)
        suspect = (lo != 0) & ((hi.view(np.uint64) & _F32_TIE_BITS) == 0)
        if suspect.any():
            out[suspect] = round_to_odd64(hi[suspect], lo[suspect]).astype(np.float32)
    return out


def nearest_sum_f32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 of the exact sum of float64 arrays ``x`` and ``y`` (e.g. an exact product of two
    float32 values and a float32 addend: fma.rn.f32), NaN canonical. Rounding the float64 sum is correct except
    where that sum is a float32 tie (or value) and inexact: only there its rounding error decides. Ties are common
    (integer-valued data), so the error is computed on whole vectors, not gathered lanes."""
    with np.errstate(invalid="ignore", over="ignore"):
        hi = x + y
        out = hi.astype(np.float32)
        bits = hi.view(np.uint64)
        tie = (bits & _F32_TIE_BITS) == 0
        if tie.any():  # a float32 value is no tie: only bit 28 set (or the subnormal range) makes a midpoint;
            # a zero float64 sum is exact (gradual underflow)
            tie &= ((bits & _F32_HALF_ULP) != 0) | ((np.abs(hi) < _F32_MIN_NORMAL) & (hi != 0))
        if tie.any():
            lo = two_sum(x, y)[1]
            fix = tie & (lo != 0)
            if fix.any():
                out[fix] = round_to_odd64(hi[fix], lo[fix]).astype(np.float32)
        nan = np.isnan(hi)
        if nan.any():
            out[nan] = canonical_nan("f32")
    return out


def _nearest(hi: np.ndarray, lo: np.ndarray, fmt: str) -> np.ndarray:
    """Round-to-nearest-even of hi + lo to ``fmt`` storage via round-to-odd (no double-rounding error)."""
    if fmt == "f64":
        return hi
    if fmt == "f32":
        return _nearest_f32(hi, lo)
    odd64 = round_to_odd64(hi, lo)
    with np.errstate(over="ignore"):
        if fmt == "f16":
            return round_to_odd32(odd64).astype(np.float16)
    return _bf16_from_f32(round_to_odd32(odd64), "rn")


def _bf16_from_f32(x32: np.ndarray, mode: str) -> np.ndarray:
    """Round float32 values to bf16 raw bits with ``mode`` (exact bit arithmetic; NaN -> canonical 0x7fff)."""
    bits = x32.view(np.uint32)
    upper = (bits >> np.uint32(16)).astype(np.uint32)
    rem = bits & np.uint32(0xFFFF)
    negative = (upper & np.uint32(0x8000)) != 0
    if mode == "rn":
        up = (rem > 0x8000) | ((rem == 0x8000) & ((upper & np.uint32(1)) == 1))
    elif mode == "rz":
        up = np.zeros(bits.shape, dtype=bool)
    elif mode == "rp":
        up = (rem != 0) & ~negative
    else:
        up = (rem != 0) & negative
    out = (upper + up.astype(np.uint32)).astype(np.uint16)
    return np.where(np.isnan(x32), np.uint16(0x7FFF), out)


def directed(c: np.ndarray, s: np.ndarray, mode: str) -> np.ndarray:
    """Turn the nearest value ``c`` (numpy float storage) into the ``mode`` rounding of the exact value x.

    ``s`` is sign(x - c) (NaN/0 where no move is needed). RN is one of the two neighbours of x, so a directed
    rounding is either ``c`` or its neighbour on the side of x.
    """
    if mode == "rn":
        return c
    if mode == "rz":
        move = ((c > 0) & (s < 0)) | ((c < 0) & (s > 0))
        target = np.zeros_like(c)
    elif mode == "rm":
        move = s < 0
        target = np.full_like(c, -np.inf)
    else:
        move = s > 0
        target = np.full_like(c, np.inf)
    return np.where(move, np.nextafter(c, target), c)


def round_pair(hi: np.ndarray, lo: np.ndarray, fmt: str, mode: str, finite: np.ndarray | None = None) -> np.ndarray:
    """Round the exact value hi + lo (float64 arrays, hi == fl(hi + lo)) to ``fmt`` storage with ``mode``.

    ``finite`` marks elements whose exact value is finite although ``hi`` overflowed to infinity (only needed for
    f64 results; narrower formats detect overflow themselves). NaN results become the canonical NaN.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        if fmt == "bf16":
            out = _bf16_from_f32(round_to_odd32(round_to_odd64(hi, lo)), mode)
        else:
            c = _nearest(hi, lo, fmt)
            if mode != "rn":
                c = directed(c, _sign_after(hi, lo, c, fmt, finite), mode)
            out = c
        nan = np.isnan(hi)
        if nan.any():
            out = np.where(nan, canonical_nan(fmt), out)
    return out


def _sign_after(hi: np.ndarray, lo: np.ndarray, c: np.ndarray, fmt: str, finite: np.ndarray | None) -> np.ndarray:
    c64 = c.astype(np.float64)
    if fmt == "f64":
        s = np.sign(np.where(np.isfinite(hi), lo, 0.0))
        if finite is not None:
            s = np.where(np.isinf(hi) & finite, -np.sign(hi), s)
        return s
    # hi - c is exact (Sterbenz) when c is finite; overflow to inf gives -sign(c) as wanted.
    return np.sign((hi - c64) + np.where(np.isfinite(hi), lo, 0.0))


def round_with_sign(c: np.ndarray, s: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """Directed rounding from a correctly rounded nearest value ``c`` (storage of ``fmt``) and s = sign(x - c)."""
    if fmt == "bf16":
        raise ValueError("round_with_sign does not take bf16 storage; use round_pair")
    with np.errstate(invalid="ignore"):
        return directed(c, s, mode)
