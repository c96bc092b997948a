"""Floating-point arithmetic semantics (PTX ISA 9.7.3 "Floating-Point Instructions", 9.7.4 "Half Precision
Floating-Point Instructions" and 9.7.5 "Mixed Precision"-free scalar forms), internal to ``alu``.

Operands are widened to float64, the exact result is formed as a float64 pair (TwoSum, TwoProduct, Boldo-Melquiond
round-to-odd FMA emulation, exact remainders for div/sqrt) and rounded once with the instruction's rounding mode
(default .rn). .ftz flushes subnormal inputs and results of the instruction's format to sign-preserving zero; .sat
clamps results to [0, 1] (NaN -> +0). .approx functions (ex2, lg2, sin, cos, tanh, rsqrt and the .approx forms of
div/rcp/sqrt) return the correctly rounded value, which is within the ISA's stated error bounds.

Known limits: f64 results of fma/div/sqrt/rcp with directed rounding may be off by one unit in the last place when
|operands| > 2**995 or the exact result is below 2**-960 (the TwoProduct error term is then inexact), and an f64 fma
whose product a*b overflows but whose sum with c would not returns infinity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .fp import (
    FLOAT_FORMATS,
    ROUND_MODES,
    STORAGE,
    canonical_nan,
    exact_sign,
    finish,
    flush_f64,
    narrow_exact,
    nearest_sum_f32,
    round_pair,
    round_to_odd64,
    to_f64,
    two_prod,
    two_sum,
)
from .spec import AluSpec

ROUNDED_OPS = frozenset({"add", "sub", "mul", "fma", "mad", "div", "sqrt", "rcp"})
APPROX_OPS = frozenset({"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"})
OPS = ROUNDED_OPS | APPROX_OPS | {"abs", "neg", "min", "max", "copysign"}
_SIGN_BIT = {"f16": 0x8000, "bf16": 0x8000, "f32": 0x80000000, "f64": 0x8000000000000000}
_UINT: dict[str, type] = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}
_APPROX_FNS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "rsqrt": lambda x: 1.0 / np.sqrt(x)}
_KNOWN_MODS = frozenset(ROUND_MODES) | {"ftz", "sat", "approx", "full", "relu", "NaN", "nan"}


def rounding_mode(mods: frozenset[str], default: str = "rn") -> str:
    """The single float rounding modifier in ``mods`` (.rn/.rz/.rm/.rp), ``default`` when none is given."""
    found = mods & set(ROUND_MODES)
    return next(iter(found)) if found else default


def supports(spec: AluSpec) -> bool:
    """Whether the float family implements ``spec`` (scalar float types; packed x2 is split by ``alu``)."""
    if spec.type not in FLOAT_FORMATS or not spec.mods <= _KNOWN_MODS:
        return False
    if len(spec.mods & set(ROUND_MODES)) > 1:
        return False
    if spec.op == "copysign":
        return spec.type in ("f32", "f64")
    if "relu" in spec.mods and spec.op != "fma":
        return False
    return spec.op in OPS


def execute(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray:
    """Run one float instruction on storage-dtype operands; returns the storage dtype of spec.type."""
    fmt, op, mods = spec.type, spec.op, spec.mods
    if op in ("abs", "neg", "copysign"):
        return _sign_op(op, fmt, ops, "ftz" in mods)
    xs = [to_f64(o, fmt) for o in ops]
    if "ftz" in mods:
        xs = [flush_f64(x, fmt) for x in xs]
    with np.errstate(all="ignore"):
        if op in ("min", "max"):
            return narrow_exact(_min_max(op, xs[0], xs[1], "NaN" in mods or "nan" in mods), fmt)
        if op in APPROX_OPS:
            result = round_pair(_APPROX_FNS[op](xs[0]), np.zeros_like(xs[0]), fmt, "rn")
        else:
            result = _rounded(op, fmt, rounding_mode(mods), xs)
        if "relu" in mods:
            r64 = to_f64(result, fmt)
            result = narrow_exact(np.where(np.isnan(r64), np.nan, np.where(r64 < 0, 0.0, r64)), fmt)
        if "ftz" in mods or "sat" in mods:
            result = finish(to_f64(result, fmt), fmt, ftz="ftz" in mods, sat="sat" in mods)
    return result


_NATIVE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _rounded(op: str, fmt: str, mode: str, xs: list[np.ndarray]) -> np.ndarray:
    if mode == "rn" and fmt in ("f32", "f64") and op in _NATIVE:  # IEEE binary ops of numpy are correctly rounded
        native = [x.astype(STORAGE[fmt]) for x in xs]  # exact: the values came from this format
        out = _NATIVE[op](native[0], native[1])
        return np.where(np.isnan(out), canonical_nan(fmt), out)
    if mode == "rn" and fmt == "f32" and op in ("fma", "mad"):  # the product of two 24-bit significands is exact
        return nearest_sum_f32(xs[0] * xs[1], xs[2])
    finite = np.logical_and.reduce([np.isfinite(x) for x in xs])
    if op in ("add", "sub"):
        a, b = xs[0], (xs[1] if op == "add" else -xs[1])
        hi, lo = two_sum(a, b)
        return _signed_zero_fix(round_pair(hi, lo, fmt, mode, finite), fmt, mode, hi, lo, a, b)
    if op == "mul":
        hi, lo = two_prod(xs[0], xs[1]) if fmt == "f64" else (xs[0] * xs[1], np.zeros_like(xs[0]))
        return round_pair(hi, lo, fmt, mode, finite)
    if op in ("fma", "mad"):
        return _fma(fmt, mode, xs[0], xs[1], xs[2], finite)
    if op == "div":
        return _div(fmt, mode, xs[0], xs[1], finite)
    if op == "rcp":
        return _div(fmt, mode, np.ones_like(xs[0]), xs[0], finite)
    return _sqrt(fmt, mode, xs[0])


def _fma(fmt: str, mode: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, finite: np.ndarray) -> np.ndarray:
    if fmt != "f64":  # the product of two <= 24-bit significands is exact in float64
        p = a * b
        hi, lo = two_sum(p, c)
        return _signed_zero_fix(round_pair(hi, lo, fmt, mode, finite), fmt, mode, hi, lo, p, c)
    # Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd"
    uh, ul = two_prod(a, b)
    th, tl = two_sum(c, uh)
    vr, ve = two_sum(tl, ul)
    r = th + round_to_odd64(vr, ve)
    ok = finite & np.isfinite(uh) & np.isfinite(r)
    r = np.where(ok, r, a * b + c)
    if mode != "rn":
        s = np.where(ok, exact_sign(*(np.where(ok, t, 0.0) for t in (th, tl, ul, -r))), 0.0)
        r = round_pair(r, s, fmt, mode, finite & np.isfinite(uh))
    else:
        r = round_pair(r, np.zeros_like(r), fmt, "rn")
    exact_zero = ok & (th == 0) & (tl == 0) & (ul == 0)
    return _zero_sign(r, mode, exact_zero, uh, c)


def _signed_zero_fix(r: np.ndarray, fmt: str, mode: str, hi: np.ndarray, lo: np.ndarray, a: np.ndarray,
                     b: np.ndarray) -> np.ndarray:
    return _zero_sign(r, mode, (hi == 0) & (lo == 0), a, b)


def _zero_sign(r: np.ndarray, mode: str, exact_zero: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IEEE 754 6.3: an exact zero sum of operands that are not both -0 is +0, except -0 under .rm."""
    if mode != "rm" or not exact_zero.any():
        return r
    both_plus_zero = (a == 0) & (b == 0) & ~np.signbit(a) & ~np.signbit(b)
    return np.where(exact_zero & ~both_plus_zero, -np.zeros_like(r) if r.dtype != np.uint16 else np.uint16(0x8000), r)


def _remainder_lo(q: np.ndarray, s: np.ndarray) -> np.ndarray:
    """A float64 much smaller than ulp(q) with the sign ``s`` of (exact - q): all that round_pair needs of lo."""
    return s * np.spacing(np.abs(q)) * 0.25


def _div(fmt: str, mode: str, a: np.ndarray, b: np.ndarray, finite: np.ndarray) -> np.ndarray:
    q = a / b
    regular = finite & (b != 0) & np.isfinite(q)
    p, e = two_prod(np.where(regular, q, 0.0), np.where(regular, b, 0.0))
    s = np.sign(b) * exact_sign(np.where(regular, a, 0.0), -p, -e)
    lo = np.where(regular, _remainder_lo(q, s), 0.0)
    return round_pair(q, lo, fmt, mode, finite & (b != 0))


def _sqrt(fmt: str, mode: str, a: np.ndarray) -> np.ndarray:
    q = np.sqrt(a)
    regular = np.isfinite(q) & (a > 0)
    p, e = two_prod(np.where(regular, q, 0.0), np.where(regular, q, 0.0))
    s = exact_sign(np.where(regular, a, 0.0), -p, -e)
    lo = np.where(regular, _remainder_lo(q, s), 0.0)
    return round_pair(q, lo, fmt, mode)


def _min_max(op: str, a: np.ndarray, b: np.ndarray, propagate_nan: bool) -> np.ndarray:
    """min/max (PTX ISA 9.7.3.10/9.7.3.11): a NaN operand is ignored (both NaN -> NaN), -0.0 < +0.0;
    with .NaN any NaN operand gives the canonical NaN."""
    if op == "min":
        pick = np.where((a == b), np.where(np.signbit(a), a, b), np.fmin(a, b))
    else:
        pick = np.where((a == b), np.where(np.signbit(a), b, a), np.fmax(a, b))
    if propagate_nan:
        pick = np.where(np.isnan(a) | np.isnan(b), np.nan, pick)
    return pick


def _sign_op(op: str, fmt: str, ops: tuple[np.ndarray, ...], ftz: bool) -> np.ndarray:
    """abs/neg/copysign act on the sign bit only (PTX ISA 9.7.3.8 abs, 9.7.3.9 neg, 9.7.3.2 copysign)."""
    udt = _UINT[fmt]
    sign = udt(_SIGN_BIT[fmt])
    vals = [narrow_exact(flush_f64(to_f64(o, fmt), fmt), fmt) if ftz else o for o in ops]
    bits: list[np.ndarray] = [np.asarray(v).view(udt) for v in vals]
    if op == "abs":
        out = bits[0] & ~sign
    elif op == "neg":
        out = bits[0] ^ sign
    else:  # copysign d, a, b: magnitude of b, sign of a
        out = (bits[1] & ~sign) | (bits[0] & sign)
    out = out.astype(udt)
    return out if fmt == "bf16" else out.view(vals[0].dtype)

