"""Logic, shift and bit-field semantics (PTX ISA 9.7.8 "Logic and Shift Instructions": and/or/xor/not/cnot, lop3,
shl/shr, shf, bmsk; 9.7.1 bit-manipulation instructions popc, clz, bfind, brev, bfe, bfi, szext; PTX ISA 9.7.9.7
prmt), internal to ``alu``.

Results of popc, clz and bfind are np.uint32 whatever the operand width (their destination is .u32 in the ISA).
Shift amounts and bit-field positions/lengths arrive as np.uint32.
"""

from __future__ import annotations

import numpy as np

from ..types import INT_BITS, INT_SIGNED, unsigned_dtype
from .spec import AluSpec

OPS = frozenset({"and", "or", "xor", "not", "cnot", "shl", "shr", "popc", "clz", "brev", "bfind", "bfe", "bfi",
                 "prmt", "shf", "lop3", "bmsk", "szext"})
PRMT_MODES = ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")

_U64 = np.uint64
# byte selectors (d.b0, d.b1, d.b2, d.b3) for each mode and c & 3 (PTX ISA prmt "Semantics", mode tables)
_PRMT_TABLE = {
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def supports(spec: AluSpec) -> bool:
    """Whether the bit/logic family implements ``spec``."""
    op, t = spec.op, spec.type
    if op in ("and", "or", "xor", "not"):
        return t == "pred" or t in INT_BITS
    if op in ("cnot", "shl", "shr"):
        return t in INT_BITS
    if op in ("popc", "clz", "brev"):
        return t in INT_BITS and INT_BITS[t] in (32, 64)
    if op == "bfind":
        return t in ("u32", "s32", "u64", "s64")
    if op == "bfe":
        return t in ("u32", "s32", "u64", "s64")
    if op == "bfi":
        return t in ("b32", "b64", "u32", "u64", "s32", "s64")
    if op == "prmt":
        return t == "b32" and len(spec.mods & set(PRMT_MODES)) <= 1
    if op == "shf":
        return t == "b32" and len(spec.mods & {"l", "r"}) == 1 and len(spec.mods & {"wrap", "clamp"}) == 1
    if op == "lop3":
        return t == "b32"
    if op in ("bmsk", "szext"):
        one_mode = len(spec.mods & {"wrap", "clamp"}) == 1
        return one_mode and t == ("b32" if op == "bmsk" else t) and t in ("b32", "u32", "s32")[op == "szext":]
    return False


def execute(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray:
    """Run one logic/shift/bit-field instruction on storage-dtype operands."""
    op = spec.op
    if op in ("and", "or", "xor"):
        fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        return fn(ops[0], ops[1])
    if op == "not":
        return ~ops[0]
    if op == "cnot":
        return (ops[0] == 0).astype(ops[0].dtype)
    if op in ("shl", "shr"):
        return _shift(op, spec.type, ops[0], ops[1])
    if op == "shf":
        return _shf(ops[0], ops[1], ops[2], "l" in spec.mods, "clamp" in spec.mods)
    if op == "lop3":
        return lop3(ops[0], ops[1], ops[2], ops[3])
    if op == "bmsk":
        return _bmsk(ops[0], ops[1], "clamp" in spec.mods)
    if op == "szext":
        return _szext(ops[0], ops[1], "clamp" in spec.mods, INT_SIGNED[spec.type])
    bits = INT_BITS[spec.type]
    if op == "popc":
        return popcount(ops[0].astype(_U64)).astype(np.uint32)
    if op == "clz":
        return (bits - bit_length(ops[0].view(unsigned_dtype(bits)).astype(_U64))).astype(np.uint32)
    if op == "brev":
        return _brev(ops[0], bits)
    if op == "bfind":
        return _bfind(ops[0], bits, INT_SIGNED[spec.type], "shiftamt" in spec.mods)
    if op == "bfe":
        return _bfe(ops[0], ops[1], ops[2], bits, INT_SIGNED[spec.type])
    if op == "bfi":
        return _bfi(ops[0], ops[1], ops[2], ops[3], bits)
    mode = next(iter(spec.mods & set(PRMT_MODES)), None)
    return _prmt(ops[0], ops[1], ops[2], mode)


def _shift(op: str, ptx_type: str, a: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """shl/shr (PTX ISA 9.7.8.7/9.7.8.8): amounts >= width give 0, or sign fill for shr.s."""
    bits = INT_BITS[ptx_type]
    if amount.size and amount.strides == (0,):  # one shift amount for every thread (an immediate): scalar path
        k = min(int(amount[0]), bits)
        if k == bits:
            return np.where(a < 0, a.dtype.type(-1), a.dtype.type(0)) if op == "shr" and INT_SIGNED[ptx_type] \
                else np.zeros(a.shape, a.dtype)
        return (a << a.dtype.type(k)) if op == "shl" else (a >> a.dtype.type(k))
    amt = np.minimum(amount.astype(np.uint32), bits - 1).astype(a.dtype)
    too_big = amount.astype(np.uint64) >= bits
    if op == "shl":
        return np.where(too_big, a.dtype.type(0), a << amt).astype(a.dtype)
    if INT_SIGNED[ptx_type]:
        return (a >> amt).astype(a.dtype)  # arithmetic shift; width-1 already gives the sign fill
    return np.where(too_big, a.dtype.type(0), a >> amt).astype(a.dtype)


def popcount(x: np.ndarray) -> np.ndarray:
    """Number of set bits of each np.uint64 element (SWAR), as np.uint64."""
    x = x - ((x >> _U64(1)) & _U64(0x5555555555555555))
    x = (x & _U64(0x3333333333333333)) + ((x >> _U64(2)) & _U64(0x3333333333333333))
    x = (x + (x >> _U64(4))) & _U64(0x0F0F0F0F0F0F0F0F)
    return (x * _U64(0x0101010101010101)) >> _U64(56)


def bit_length(x: np.ndarray) -> np.ndarray:
    """Index of the highest set bit plus one (0 for 0) of each np.uint64 element, as np.int64."""
    n = np.zeros(x.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        big = x >= (_U64(1) << _U64(step))
        x = np.where(big, x >> _U64(step), x)
        n += big * step
    return n + (x > 0)


def _brev(a: np.ndarray, bits: int) -> np.ndarray:
    udt = unsigned_dtype(bits)
    x = a.view(udt).astype(_U64)
    masks = (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF,
             0x00000000FFFFFFFF)
    for i, m in enumerate(masks):
        s, mm = _U64(1 << i), _U64(m)
        x = ((x >> s) & mm) | ((x & mm) << s)
    return (x >> _U64(64 - bits)).astype(udt).view(a.dtype)


def _bfind(a: np.ndarray, bits: int, signed: bool, shiftamt: bool) -> np.ndarray:
    """bfind (PTX ISA 9.7.1.14): position of the most significant non-sign bit, 0xffffffff if none."""
    udt = unsigned_dtype(bits)
    x = a.view(udt)
    if signed:
        x = np.where(a < 0, ~x, x)
    pos = bit_length(x.astype(_U64)) - 1
    if shiftamt:
        pos = np.where(pos >= 0, bits - 1 - pos, -1)
    return pos.astype(np.int64).astype(np.uint32)


def _bfe(a: np.ndarray, pos: np.ndarray, length: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """bfe (PTX ISA 9.7.1.16): pos and len use their low 8 bits; bits past the msb read the sign bit."""
    p = (pos.astype(np.int64) & 0xFF)
    n = (length.astype(np.int64) & 0xFF)
    x = a.view(unsigned_dtype(bits)).astype(_U64)
    msb = bits - 1
    shift = np.minimum(p, msb).astype(_U64)
    field = np.where(p > msb, _U64(0), x >> shift)
    avail = np.clip(np.minimum(n, bits - p), 0, bits)  # field bits that come from a
    keep = np.where(avail >= 64, ~_U64(0), (_U64(1) << np.minimum(avail, 63).astype(_U64)) - _U64(1))
    field = field & keep
    if signed:
        sbit_pos = np.minimum(p + n - 1, msb).astype(_U64)
        sbit = np.where(n == 0, _U64(0), (x >> sbit_pos) & _U64(1))
        field = np.where(sbit == 1, field | ~keep, field)
    return field.astype(unsigned_dtype(bits)).view(a.dtype)


def _bfi(a: np.ndarray, b: np.ndarray, pos: np.ndarray, length: np.ndarray, bits: int) -> np.ndarray:
    """bfi (PTX ISA 9.7.1.17): insert the low len bits of a into b at pos; bits past the msb are dropped."""
    udt = unsigned_dtype(bits)
    p = (pos.astype(np.int64) & 0xFF)
    n = (length.astype(np.int64) & 0xFF)
    avail = np.clip(np.minimum(n, bits - p), 0, 64)
    field_mask = np.where(avail >= 64, ~_U64(0), (_U64(1) << np.minimum(avail, 63).astype(_U64)) - _U64(1))
    shift = np.minimum(p, 63).astype(_U64)
    in_range = p < bits
    mask = np.where(in_range, field_mask << shift, _U64(0))
    xa, xb = a.view(udt).astype(_U64), b.view(udt).astype(_U64)
    out = (xb & ~mask) | ((xa << shift) & mask)
    return out.astype(udt).view(b.dtype)


def _prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str | None) -> np.ndarray:
    """prmt.b32 (PTX ISA 9.7.9.7): pick 4 bytes of the 8-byte value {b, a}."""
    source = (b.astype(_U64) << _U64(32)) | a.astype(_U64)
    ctl = c.astype(np.uint32)
    result = np.zeros(a.shape, dtype=_U64)
    for i in range(4):
        if mode is None:
            nibble = (ctl >> np.uint32(4 * i)) & np.uint32(0xF)
            index = (nibble & np.uint32(7)).astype(_U64)
            byte = (source >> (index * _U64(8))) & _U64(0xFF)
            sign = (nibble & np.uint32(8)) != 0
            byte = np.where(sign, np.where(byte >= 0x80, _U64(0xFF), _U64(0)), byte)
        else:
            table = np.array([row[i] for row in _PRMT_TABLE[mode]], dtype=_U64)
            index = table[(ctl & np.uint32(3)).astype(np.intp)]
            byte = (source >> (index * _U64(8))) & _U64(0xFF)
        result |= byte << _U64(8 * i)
    return result.astype(np.uint32)


def _shf(a: np.ndarray, b: np.ndarray, c: np.ndarray, left: bool, clamp: bool) -> np.ndarray:
    """shf.{l,r}.{wrap,clamp}.b32 (PTX ISA 9.7.8.9): shift the 64-bit value {b, a} by c (wrap: c & 31, clamp:
    min(c, 32)); .l keeps the upper 32 bits, .r the lower 32."""
    n = np.minimum(c.astype(_U64), _U64(32)) if clamp else c.astype(_U64) & _U64(31)
    wide = (b.astype(_U64) << _U64(32)) | a.astype(_U64)
    if left:
        return ((wide << n) >> _U64(32)).astype(np.uint32)
    return ((wide >> n) & _U64(0xFFFFFFFF)).astype(np.uint32)


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """lop3.b32 (PTX ISA 9.7.8.6): bit k of every result bit's truth table ``lut`` (immLut, low 8 bits) is the
    output for input bits (a, b, c) with k = 4a + 2b + c, i.e. immLut = F(0xF0, 0xCC, 0xAA)."""
    ua, ub, uc = a.astype(np.uint32), b.astype(np.uint32), c.astype(np.uint32)
    table = lut.astype(np.uint32) & np.uint32(0xFF)
    out = np.zeros(ua.shape, np.uint32)
    for k in range(8):
        term = (ua if k & 4 else ~ua) & (ub if k & 2 else ~ub) & (uc if k & 1 else ~uc)
        out |= term & (np.uint32(0) - ((table >> np.uint32(k)) & np.uint32(1)))
    return out


def _bmsk(a: np.ndarray, b: np.ndarray, clamp: bool) -> np.ndarray:
    """bmsk.{clamp,wrap}.b32 (PTX ISA 9.7.8.10): a mask of b ones starting at bit a; with .clamp a >= 32 gives 0 and
    b >= 32 fills up to bit 31, with .wrap both use their low 5 bits."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    start = np.minimum(a64, 32) if clamp else a64 & 31
    width = np.minimum(b64, 32) if clamp else b64 & 31
    end = np.minimum(start + width, 32)
    ones = (np.int64(1) << end) - (np.int64(1) << start)
    return (ones & 0xFFFFFFFF).astype(np.uint32)


def _szext(a: np.ndarray, b: np.ndarray, clamp: bool, signed: bool) -> np.ndarray:
    """szext.{clamp,wrap}.{s32,u32} (PTX ISA 9.7.1.25): sign- or zero-extend the low N bits of a, N = b clamped to
    32 (.clamp) or b & 31 (.wrap); N = 0 gives 0."""
    n = np.minimum(b.astype(np.int64), 32) if clamp else b.astype(np.int64) & 31
    x = a.view(np.uint32).astype(np.int64)
    keep = np.where(n >= 32, x, x & ((np.int64(1) << n) - 1))
    if signed:
        top = np.where((n > 0) & (n < 32), (keep >> np.maximum(n - 1, 0)) & 1, 0)
        keep = np.where(top == 1, keep - (np.int64(1) << n), keep)
    return (keep & 0xFFFFFFFF).astype(np.uint32).view(a.dtype)
