"""Integer arithmetic and bit-manipulation semantics (PTX ISA 9.7.1 "Integer Arithmetic Instructions"
and 9.7.2 "Extended-Precision"-free parts), internal to ``alu``.

All arithmetic wraps modulo 2**width (two's complement) unless ``.sat`` is given. Products are formed exactly with
32-bit limbs, so mul.hi/mad.hi of 64-bit operands are bit-exact.
Division by zero is unspecified in the ISA; like NVIDIA hardware, the quotient is all ones (-1 for signed) and the
remainder is the dividend. INT_MIN / -1 wraps to INT_MIN with remainder 0.
"""

from __future__ import annotations

import numpy as np

from ..types import INT_BITS, INT_SIGNED, int_type, signed_dtype, storage_dtype, unsigned_dtype
from .spec import AluSpec

OPS = frozenset({"add", "sub", "mul", "mad", "mul24", "mad24", "sad", "div", "rem", "abs", "neg", "min", "max", "dp4a",
                 "dp2a"})

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)


def supports(spec: AluSpec) -> bool:
    """Whether the integer family implements ``spec`` (type must be an integer type)."""
    if spec.type not in INT_BITS or "cc" in spec.mods:
        return False
    bits, signed = INT_BITS[spec.type], INT_SIGNED[spec.type]
    mods = spec.mods
    if spec.op in ("dp4a", "dp2a"):
        halves = mods == {"lo"} or mods == {"hi"}
        return {spec.type, spec.stype} <= {"u32", "s32"} and (halves if spec.op == "dp2a" else not mods)
    sat_ok = spec.type == "s32" and (spec.op in ("add", "sub") or (spec.op == "mad" and "hi" in mods))
    if "sat" in mods and not sat_ok:
        return False
    if spec.op in ("mul", "mad"):
        return len(mods & {"lo", "hi", "wide"}) <= 1 and not ("wide" in mods and bits not in (16, 32))
    if spec.op in ("mul24", "mad24"):
        return spec.type in ("u32", "s32") and len(mods & {"lo", "hi"}) <= 1
    if spec.op in ("min", "max") and "relu" in mods:
        return spec.type == "s32"
    if spec.op in ("abs", "neg"):
        return signed
    return True


def execute(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray:
    """Run one integer instruction; ``ops`` are arrays of the storage dtype of spec.type (c of mad.wide is wide)."""
    bits, signed = INT_BITS[spec.type], INT_SIGNED[spec.type]
    op = spec.op
    if op in ("add", "sub"):
        return _add_sub(op, ops[0], ops[1], "sat" in spec.mods)
    if op in ("mul", "mad"):
        return _mul_mad(spec, ops, bits, signed)
    if op in ("mul24", "mad24"):
        return _mul24(spec, ops, signed)
    if op in ("dp4a", "dp2a"):
        return _dot(spec, ops)
    if op == "sad":
        a, b, c = ops
        return np.where(a < b, b - a, a - b).astype(c.dtype) + c
    if op in ("div", "rem"):
        return _div_rem(op, ops[0], ops[1], bits, signed)
    if op == "abs":
        return np.where(ops[0] < 0, -ops[0], ops[0]).astype(ops[0].dtype)
    if op == "neg":
        return (-ops[0]).astype(ops[0].dtype)
    result = np.minimum(ops[0], ops[1]) if op == "min" else np.maximum(ops[0], ops[1])
    if "relu" in spec.mods:
        result = np.maximum(result, result.dtype.type(0))
    return result


def _add_sub(op: str, a: np.ndarray, b: np.ndarray, sat: bool) -> np.ndarray:
    if sat:  # only .s32: exact in int64, then clamp (PTX ISA 9.7.1.1 add)
        wide = a.astype(np.int64) + b.astype(np.int64) if op == "add" else a.astype(np.int64) - b.astype(np.int64)
        return np.clip(wide, -(2**31), 2**31 - 1).astype(np.int32)
    return (a + b) if op == "add" else (a - b)


def mul_full(a: np.ndarray, b: np.ndarray, bits: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Exact double-width product of two ``bits``-wide integers as (low half, high half), both np.uint64 arrays."""
    if bits <= 32:
        prod = a.astype(np.int64) * b.astype(np.int64) if signed else a.astype(_U64) * b.astype(_U64)
        raw = prod.astype(_U64)
        mask = _U64((1 << bits) - 1)
        return raw & mask, (raw >> _U64(bits)) & mask
    ua, ub = a.astype(_U64), b.astype(_U64)
    a0, a1, b0, b1 = ua & _MASK32, ua >> _U64(32), ub & _MASK32, ub >> _U64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _U64(32)) + (p01 & _MASK32) + (p10 & _MASK32)
    hi = p11 + (p01 >> _U64(32)) + (p10 >> _U64(32)) + (mid >> _U64(32))
    lo = ua * ub
    if signed:  # two's complement correction of the unsigned high half
        hi = hi - np.where(a < 0, ub, _U64(0)) - np.where(b < 0, ua, _U64(0))
    return lo, hi


def _as(x: np.ndarray, ptx_type: str) -> np.ndarray:
    return x.astype(storage_dtype(ptx_type))


def _mul_mad(spec: AluSpec, ops: tuple[np.ndarray, ...], bits: int, signed: bool) -> np.ndarray:
    a, b = ops[0], ops[1]
    mods = spec.mods
    if "wide" in mods:
        lo, hi = mul_full(a, b, bits, signed)
        wide_type = int_type(bits * 2, signed)
        product = _as(lo | (hi << _U64(bits)), wide_type)
        return product if spec.op == "mul" else product + ops[2]
    if "hi" in mods:
        _, hi = mul_full(a, b, bits, signed)
        if signed:  # sign-extend the high half from its width
            hi = hi.astype(unsigned_dtype(bits)).view(signed_dtype(bits))
        else:
            hi = hi.astype(unsigned_dtype(bits))
        if spec.op == "mul":
            return hi
        if "sat" in mods:  # mad.hi.sat.s32: saturate the addition (PTX ISA 9.7.1.4 mad)
            return np.clip(hi.astype(np.int64) + ops[2].astype(np.int64), -(2**31), 2**31 - 1).astype(np.int32)
        return hi + ops[2]
    product = a * b  # low half: numpy array arithmetic wraps
    return product if spec.op == "mul" else product + ops[2]


def _mul24(spec: AluSpec, ops: tuple[np.ndarray, ...], signed: bool) -> np.ndarray:
    """mul24/mad24 (PTX ISA 9.7.1.5/9.7.1.6): 24x24-bit product; .lo = bits 31..0, .hi = bits 47..16."""
    def low24(x: np.ndarray) -> np.ndarray:
        v = x.astype(np.int64) & 0xFFFFFF
        return np.where(v >= 1 << 23, v - (1 << 24), v) if signed else v

    prod = low24(ops[0]) * low24(ops[1])
    part = (prod >> 16) if "hi" in spec.mods else prod
    result = (part & 0xFFFFFFFF).astype(np.uint32).view(np.int32 if signed else np.uint32)
    return result if spec.op == "mul24" else result + ops[2]


def _div_rem(op: str, a: np.ndarray, b: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """Truncating division / remainder with the sign of the dividend (PTX ISA 9.7.1.7 div, 9.7.1.8 rem)."""
    udt = unsigned_dtype(bits)
    zero = b == 0
    if signed:
        ua = np.where(a < 0, -a, a).astype(signed_dtype(bits)).view(udt)
        ub = np.where(b < 0, -b, b).astype(signed_dtype(bits)).view(udt)
    else:
        ua, ub = a, b
    safe_b = np.where(zero, udt.type(1), ub)
    uq, ur = ua // safe_b, ua % safe_b
    if not signed:
        if op == "div":
            return np.where(zero, udt.type(~np.uint64(0) >> np.uint64(64 - bits)), uq).astype(udt)
        return np.where(zero, a, ur).astype(udt)
    sdt = signed_dtype(bits)
    if op == "div":
        q = uq.view(sdt)
        q = np.where((a < 0) != (b < 0), -q, q).astype(sdt)
        return np.where(zero, sdt.type(-1), q).astype(sdt)
    r = ur.view(sdt)
    r = np.where(a < 0, -r, r).astype(sdt)
    return np.where(zero, a, r).astype(sdt)


def _dot(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray:
    """dp4a / dp2a.{lo,hi} (PTX ISA 9.7.1.23/9.7.1.24): c plus the dot product of a's bytes (dp4a) or 16-bit halves
    (dp2a) with b's bytes (dp2a: bytes 0-1 for .lo, 2-3 for .hi), each part sign-extended when its type is signed;
    the sum wraps to 32 bits and is .s32 when either type is signed."""
    a, b, c = (x.astype(np.uint32).astype(np.int64) for x in ops)
    a_signed, b_signed = spec.type == "s32", spec.stype == "s32"
    a_width = 8 if spec.op == "dp4a" else 16
    first = 2 if "hi" in spec.mods else 0
    total = c
    for k in range(32 // a_width):
        total = total + _field(a, k * a_width, a_width, a_signed) * _field(b, (first + k) * 8, 8, b_signed)
    wrapped = (total & 0xFFFFFFFF).astype(np.uint32)
    return wrapped.view(np.int32) if a_signed or b_signed else wrapped


def _field(x: np.ndarray, pos: int, width: int, signed: bool) -> np.ndarray:
    v = (x >> pos) & ((1 << width) - 1)
    return np.where(v >= 1 << (width - 1), v - (1 << width), v) if signed else v
