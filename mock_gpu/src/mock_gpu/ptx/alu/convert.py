"""Conversion semantics (PTX ISA 9.7.9.21 cvt), internal to ``alu``.

- integer -> integer: sign-extend (signed source) or zero-extend, then truncate to the destination width; with .sat
  the value is clamped to the destination range instead (PTX ISA "saturation modifier").
- float -> integer: round with .rni/.rzi/.rmi/.rpi (default .rzi), NaN -> 0, values outside the destination range
  clamp to its minimum/maximum (the ISA's float-to-integer saturation, always on).
- integer -> float and float -> float: rounded once with .rn/.rz/.rm/.rp (default .rn); widening is exact;
  a float destination of the same format with .rni/.rzi/.rmi/.rpi rounds to an integral value in that format.
  .ftz flushes a subnormal f32 source and a subnormal f32 result; .sat clamps a float result to [0, 1] (NaN -> 0);
  .relu turns negative results into +0 (NaN stays NaN). NaN results are the canonical NaN.
- cvt.{rn,rz..}.f16x2.f32 / .bf16x2.f32 d, a, b: a is converted into the upper half of d, b into the lower half.
- 8-bit floats (e4m3x2, e5m2x2): see ``fp8``.
"""

from __future__ import annotations

import numpy as np

from ..types import FLOAT_TYPES, INT_BITS, INT_SIGNED, PACKED_TYPES, storage_dtype
from .fp import ROUND_MODES, finish, flush_f64, narrow_exact, round_pair, to_f64, two_sum
from .fp8 import FP8_TYPES, from_fp8, to_fp8
from .spec import AluSpec

OPS = frozenset({"cvt"})
INT_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
_KNOWN_MODS = frozenset(ROUND_MODES) | set(INT_ROUND) | {"ftz", "sat", "relu", "satfinite"}


def supports(spec: AluSpec) -> bool:
    """Whether ``cvt`` from spec.stype to spec.type with spec.mods is implemented."""
    src, dst = spec.stype, spec.type
    if src is None or not spec.mods <= _KNOWN_MODS:
        return False
    if dst in FP8_TYPES:
        return src in ("f32", "f16x2") and spec.mods in ({"rn", "satfinite"}, {"rn", "satfinite", "relu"})
    if src in FP8_TYPES:
        return dst == "f16x2" and spec.mods in ({"rn"}, {"rn", "relu"})
    if "satfinite" in spec.mods:
        return False
    if len(spec.mods & (set(ROUND_MODES) | set(INT_ROUND))) > 1:
        return False
    if dst in PACKED_TYPES:
        return src == "f32"
    known = set(INT_BITS) | set(FLOAT_TYPES)
    if src not in known or dst not in known:
        return False
    if "relu" in spec.mods:
        return dst in ("f16", "bf16")
    return True


def execute(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray:
    """Convert ``ops[0]`` (storage of spec.stype) to spec.type's storage (two f32 operands for the x2 forms)."""
    src, dst = spec.stype or "", spec.type
    with np.errstate(all="ignore"):
        if dst in FP8_TYPES or src in FP8_TYPES:
            return _fp8(spec, ops)
        if dst in PACKED_TYPES:
            half = PACKED_TYPES[dst]
            upper = _to_float(ops[0], src, half, spec.mods).view(np.uint16).astype(np.uint32)
            lower = _to_float(ops[1], src, half, spec.mods).view(np.uint16).astype(np.uint32)
            return (upper << np.uint32(16)) | lower
        if dst in INT_BITS:
            if src in INT_BITS:
                return _int_to_int(ops[0], src, dst, "sat" in spec.mods)
            return _float_to_int(ops[0], src, dst, spec.mods)
        return _to_float(ops[0], src, dst, spec.mods)


def _fp8(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray:
    """cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32 d, a, b (a -> upper byte, b -> lower byte) or .f16x2 d, a (upper
    half -> upper byte), and cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a (upper byte -> upper half)."""
    relu = "relu" in spec.mods
    if spec.type in FP8_TYPES:
        if spec.stype == "f32":
            upper, lower = ops[0].astype(np.float64), ops[1].astype(np.float64)
        else:
            halves = ops[0].astype(np.uint32)
            lower = (halves & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float64)
            upper = (halves >> np.uint32(16)).astype(np.uint16).view(np.float16).astype(np.float64)
        hi, lo = to_fp8(upper, spec.type, relu), to_fp8(lower, spec.type, relu)
        return (hi.astype(np.uint16) << np.uint16(8)) | lo.astype(np.uint16)
    codes = ops[0].astype(np.uint16)
    parts = []
    for shift in (0, 8):
        v = from_fp8(((codes >> np.uint16(shift)) & np.uint16(0xFF)).astype(np.uint8), spec.stype or "")
        if relu:
            v = np.where(v < 0, 0.0, v)
        parts.append(v.astype(np.float16).view(np.uint16).astype(np.uint32))
    return parts[0] | (parts[1] << np.uint32(16))


def _int_bounds(t: str) -> tuple[int, int]:
    bits = INT_BITS[t]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if INT_SIGNED[t] else (0, (1 << bits) - 1)


def _int_to_int(a: np.ndarray, src: str, dst: str, sat: bool) -> np.ndarray:
    dt = storage_dtype(dst)
    if not sat:
        return a.astype(dt)  # C integer conversion: sign/zero extension by source type, then wrap
    lo, hi = _int_bounds(dst)
    if INT_SIGNED[src]:
        return np.clip(a.astype(np.int64), lo, min(hi, (1 << 63) - 1)).astype(dt)
    return np.minimum(a.astype(np.uint64), np.uint64(hi)).astype(dt)


def _float_to_int(a: np.ndarray, src: str, dst: str, mods: frozenset[str]) -> np.ndarray:
    x = to_f64(a, src)
    if "ftz" in mods and src == "f32":
        x = flush_f64(x, "f32")
    mode = next(iter(mods & set(INT_ROUND)), "rzi")
    r = INT_ROUND[mode](x)
    lo, hi = _int_bounds(dst)
    dt = storage_dtype(dst)
    over = r >= float(hi) + 1.0  # hi + 1 is a power of two, exact in float64
    under = r < float(lo)
    nan = np.isnan(r)
    safe = np.where(over | under | nan, 0.0, r)
    out = safe.astype(np.int64).astype(dt) if INT_SIGNED[dst] or INT_BITS[dst] < 64 else safe.astype(np.uint64)
    out = np.where(over, dt.type(hi), out)
    return np.where(under, dt.type(lo), out).astype(dt)


def _int_pair(a: np.ndarray, src: str) -> tuple[np.ndarray, np.ndarray]:
    """The integer values as an exact float64 pair (hi, lo) with hi == fl(hi + lo)."""
    if INT_BITS[src] <= 32:
        return a.astype(np.float64), np.zeros(a.shape, dtype=np.float64)
    high = (a >> a.dtype.type(32)).astype(np.float64) * 2.0**32  # arithmetic shift for signed sources
    low = (a.astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return two_sum(high, low)


def _to_float(a: np.ndarray, src: str, dst: str, mods: frozenset[str]) -> np.ndarray:
    if src in INT_BITS:
        hi, lo = _int_pair(a, src)
    else:
        hi = to_f64(a, src)
        if "ftz" in mods and src == "f32":
            hi = flush_f64(hi, "f32")
        lo = np.zeros_like(hi)
    int_mode = next(iter(mods & set(INT_ROUND)), None)
    if int_mode is not None:
        result = narrow_exact(INT_ROUND[int_mode](hi), dst) if src == dst else round_pair(
            INT_ROUND[int_mode](hi), lo, dst, "rn")
    else:
        mode = next(iter(mods & set(ROUND_MODES)), "rn")
        result = round_pair(hi, lo, dst, mode, np.isfinite(hi))
    if "relu" in mods:
        r64 = to_f64(result, dst)
        result = narrow_exact(np.where(r64 < 0, 0.0, r64), dst)
    ftz = "ftz" in mods and dst == "f32"
    if ftz or "sat" in mods:
        result = finish(to_f64(result, dst), dst, ftz=ftz, sat="sat" in mods)
    return result
