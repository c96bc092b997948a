"""C expressions for IR values, written once for every C-family dialect: types, constants, casts, bitcasts, ALU ops,
and the ``rtk_*`` helper functions they call.

How the expressions meet the semantics of ``runtime_core.ir`` (its module docstring is the definition):

* integer ADD/SUB/MUL/NEG/SHL are computed in ``unsigned int``/``unsigned long long`` and converted back, so they wrap
  (C11 6.2.5p9; the conversion back to a signed type is modulo 2**N in GCC, Clang and NVCC); IDIV/MOD are C's
  (truncating, C99 6.5.5); SHR of a signed value is arithmetic (GCC, Clang and NVCC define ``>>`` so);
* every op is its own statement (``T vN = ...;``), so no two float ops form one expression a compiler could contract
  into an FMA (each dialect also turns contraction off: a pragma on the CPU, ``--fmad=false`` for NVRTC); FMA is the
  dialect's ``fma[f]`` (IEEE fusedMultiplyAdd, one rounding);
* float MAX/MIN are maxNum/minNum written with comparisons, the same expression in every dialect:
  ``MAX(a, b) = (b != b || a > b) ? a : b`` (a NaN operand loses to a number; two NaNs give a NaN; on equal operands,
  e.g. -0 and +0, the second one is returned); comparisons with NaN are false except ``!=``;
* float16 and bfloat16 values live as their 16-bit patterns (``unsigned short``): each op converts to float (exact),
  computes, and rounds once to the type (round to nearest even); NEG, MAX, MIN and WHERE return an operand's bits.
  A conversion that could round twice (from float64 or a 32/64-bit integer) first rounds to float32 *to odd*, which
  makes the second rounding exact (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
  using rounding to odd", 2008); a 16-bit FMA adds the exact product (in double) rounding to odd, rounds to odd to
  float, then once to the type;
* EXP2/LOG2/SIN/SQRT/TRUNC call the dialect's math functions; DIV and RECIP are IEEE divisions;
* constants are exact: hex float literals, non-finite floats from their bit patterns, 16-bit floats as their correctly
  rounded patterns (``constants.float_bits``).

A :class:`Dialect` supplies what a language spells its own way: the bool type, the helpers' qualifier, the math
functions' prefix, and the helpers built on its intrinsics (bit moves, float16 conversion, rounding to odd).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from runtime_backends.cstyle.constants import HALF, float_bits
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Ops

__all__ = ["Dialect", "ctype", "storage_ctype", "render_const", "cast_expr", "bitcast_expr", "alu_expr", "helpers",
           "HELPER_NAMES"]

HELPER_NAMES = ("rtk_fbits", "rtk_bitsf", "rtk_dbits", "rtk_bitsd", "rtk_h2f", "rtk_f2h", "rtk_d2f_odd",
                "rtk_u2f_odd", "rtk_i2f_odd", "rtk_fma_odd")
"""The helpers a dialect implements on its intrinsics (float bits as ``unsigned int``, double bits as ``unsigned long
long``, float16 bits <-> float, and the round-to-odd conversions ``double -> float``, ``unsigned long long -> float``,
``long long -> float`` and ``a*b+c`` in double); it may define more, for its own use."""


@dataclass(frozen=True)
class Dialect:
    """What one C-family language spells its own way.

    Attributes:
        name: backend name, for messages.
        bool_type: the C type of a bool value (``_Bool``, ``bool``).
        qualifier: what precedes every helper definition (``static inline``).
        math_prefix: prefix of the math functions (``__builtin_`` gives ``__builtin_sqrtf``).
        intrinsics: ``(name, definition)`` pairs, the definitions without the qualifier, covering at least
            :data:`HELPER_NAMES`; a definition may call only those before it.
    """

    name: str
    bool_type: str
    qualifier: str
    math_prefix: str
    intrinsics: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        missing = set(HELPER_NAMES) - {name for name, _ in self.intrinsics}
        if missing:
            raise ValueError(f"dialect {self.name!r} does not define the helpers {sorted(missing)}")


# helpers written once, on the dialect's bit moves
_SHARED = (
    ("rtk_b2f", "float rtk_b2f(unsigned short b) { return rtk_bitsf((unsigned int)b << 16); }"),
    ("rtk_f2b", """unsigned short rtk_f2b(float f) {  /* round to nearest even; NaN stays a (quiet) NaN */
  unsigned int x = rtk_fbits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}"""),
)
_CALL = re.compile(r"\b(rtk_\w+)\(")
# float16/bfloat16: (to float, from float, bit pattern of 1.0)
_HALF_CONV = {dtypes.float16: ("rtk_h2f", "rtk_f2h", 0x3C00), dtypes.bfloat16: ("rtk_b2f", "rtk_f2b", 0x3F80)}
_MATH = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}
_ARITH = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.DIV: "/", Ops.IDIV: "/", Ops.MOD: "%", Ops.AND: "&",
          Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>", Ops.CMPLT: "<", Ops.CMPNE: "!="}
_WRAPPING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL})
_FLOAT_BITS = {dtypes.float32: ("rtk_fbits", "rtk_bitsf", "unsigned int", np.uint32),
               dtypes.float64: ("rtk_dbits", "rtk_bitsd", "unsigned long long", np.uint64)}


def helpers(d: Dialect, text: str) -> str:
    """Definitions of the helpers that ``text`` calls and of those they call, in dependency order."""
    defs = (*d.intrinsics, *_SHARED)
    needed = set(_CALL.findall(text))
    for name, body in reversed(defs):  # a definition calls only earlier ones: one backward pass closes the set
        if name in needed:
            needed.update(n for n in _CALL.findall(body) if n != name)
    return "".join(f"{d.qualifier} {body}\n" for name, body in defs if name in needed)


def ctype(d: Dialect, dt: DType) -> str:
    """C type of a value of ``dt`` (float16/bfloat16 values are their bit patterns)."""
    return "unsigned short" if dt in HALF else d.bool_type if dt is dtypes.bool else dt.cname


def storage_ctype(d: Dialect, dt: DType) -> str:
    """C element type of a buffer of ``dt`` (bool buffers are bytes, read as ``!= 0``)."""
    return "unsigned char" if dt is dtypes.bool else ctype(d, dt)


def render_const(d: Dialect, value: int | float | bool, dt: DType) -> str:
    """A C expression of type ``ctype(d, dt)`` with exactly the constant's value.

    Integers carry their C type (the most negative int32/int64 is written ``(-MAX-1)``, unsigned values get
    ``u``/``ull``); finite float32/float64 are exact hex float literals, infinities and NaNs (payload kept) come from
    their bit patterns; float16/bfloat16 are their correctly rounded bit patterns.

    Raises ``ValueError`` for a float constant beyond even float64's range.
    """
    if dt is dtypes.bool:
        return f"(({d.bool_type}){int(bool(value))})"
    if dt.is_int:
        return f"(({ctype(d, dt)}){_int_literal(int(value), dt)})"
    bits = float_bits(value, dt)
    if dt in HALF:
        return f"((unsigned short)0x{bits:04x}u)"
    _, from_bits, utype, unp = _FLOAT_BITS[dt]
    exact = float(np.array(bits, np.uint64).astype(unp).view(dt.np))
    if math.isfinite(exact):
        return f"({exact.hex()}{'f' if dt is dtypes.float32 else ''})"
    return f"{from_bits}(({utype})0x{bits:x}ull)"


def _int_literal(v: int, dt: DType) -> str:
    if dt.is_unsigned:
        return f"{v}{'ull' if dt.itemsize == 8 else 'u'}"
    if dt.itemsize == 8:
        return "(-9223372036854775807LL-1)" if v == -(2**63) else f"{v}LL"
    return "(-2147483647-1)" if v == -(2**31) else str(v)


def cast_expr(d: Dialect, x: str, src: DType, dst: DType) -> str:
    """C expression converting value ``x`` of ``src`` to ``dst`` with the IR's CAST semantics."""
    if src is dst:
        return x
    if dst is dtypes.bool:
        return f"(({x} & 0x7fffu) != 0)" if src in HALF else f"({x} != 0)"
    if src is dtypes.bool:
        return f"({x} ? (unsigned short)0x{_HALF_CONV[dst][2]:04x}u : (unsigned short)0u)" if dst in HALF \
            else f"(({ctype(d, dst)}){x})"
    if src in HALF:
        as_float = f"{_HALF_CONV[src][0]}({x})"
        return f"{_HALF_CONV[dst][1]}({as_float})" if dst in HALF else f"(({ctype(d, dst)}){as_float})"
    if dst in HALF:
        return f"{_HALF_CONV[dst][1]}({_float_rounding_once(x, src)})"
    return f"(({ctype(d, dst)}){x})"


def _float_rounding_once(x: str, src: DType) -> str:
    """A float32 that a later rounding to 16 bits rounds correctly: the exact value or its rounding to odd."""
    if src is dtypes.float32 or (src.is_int and src.itemsize <= 2):
        return f"(float){x}"
    if src is dtypes.float64:
        return f"rtk_d2f_odd({x})"
    return f"rtk_u2f_odd((unsigned long long){x})" if src.is_unsigned else f"rtk_i2f_odd((long long){x})"


def bitcast_expr(d: Dialect, x: str, src: DType, dst: DType) -> str:
    """C expression reinterpreting the bits of ``x`` (``src``) as ``dst`` (same size; the IR validator checks)."""
    if src is dst:
        return x
    if dst is dtypes.bool:
        return f"({x} != 0)"
    if src in _FLOAT_BITS:
        as_bits = f"{_FLOAT_BITS[src][0]}({x})"
        return f"{_FLOAT_BITS[dst][1]}({as_bits})" if dst in _FLOAT_BITS else f"(({ctype(d, dst)}){as_bits})"
    if dst in _FLOAT_BITS:
        return f"{_FLOAT_BITS[dst][1]}(({_FLOAT_BITS[dst][2]}){x})"
    return f"(({ctype(d, dst)}){x})"  # integer and 16-bit float patterns: a same-size integer conversion


def alu_expr(d: Dialect, op: Ops, dt: DType, args: list[str]) -> str:
    """C expression for ALU ``op`` whose (last) operands have dtype ``dt``; ``args`` are the operand names."""
    if op is Ops.WHERE:  # selects bit patterns, so it is the same for every dtype
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if dt in HALF:
        return _half_alu(d, op, dt, args)
    if dt.is_float:
        return _float_alu(d, op, dt, args, args)
    return _int_alu(d, op, dt, args)


def _half_alu(d: Dialect, op: Ops, dt: DType, args: list[str]) -> str:
    to_float, from_float, _ = _HALF_CONV[dt]
    values = [f"{to_float}({a})" for a in args]
    if op is Ops.NEG:
        return f"((unsigned short)({args[0]} ^ 0x8000u))"
    if op in (Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPNE):
        return _float_alu(d, op, dtypes.float32, args, values)
    if op is Ops.FMA:
        return f"{from_float}(rtk_d2f_odd(rtk_fma_odd({', '.join(f'(double){v}' for v in values)})))"
    return f"{from_float}({_float_alu(d, op, dtypes.float32, values, values)})"


def _float_alu(d: Dialect, op: Ops, dt: DType, args: list[str], values: list[str]) -> str:
    """A float op on ``args``; ``values`` are the operands' float values (MAX/MIN compare these but return an arg)."""
    suffix = "" if dt is dtypes.float64 else "f"
    if op in (Ops.MAX, Ops.MIN):
        (a, b), (va, vb) = args, values
        return f"(({vb} != {vb} || {va} {'>' if op is Ops.MAX else '<'} {vb}) ? {a} : {b})"
    if op in (Ops.CMPLT, Ops.CMPNE):
        return f"({values[0]} {_ARITH[op]} {values[1]})"
    if op is Ops.NEG:
        return f"(-{args[0]})"
    if op is Ops.RECIP:
        return f"(1.0{suffix} / {args[0]})"
    if op in _MATH:
        return f"{d.math_prefix}{_MATH[op]}{suffix}({args[0]})"
    if op is Ops.FMA:
        return f"{d.math_prefix}fma{suffix}({', '.join(args)})"
    return f"({args[0]} {_ARITH[op]} {args[1]})"


def _int_alu(d: Dialect, op: Ops, dt: DType, args: list[str]) -> str:
    t = ctype(d, dt)
    if op in (Ops.CMPLT, Ops.CMPNE):
        return f"({args[0]} {_ARITH[op]} {args[1]})"
    if op in (Ops.MAX, Ops.MIN):
        a, b = args
        return f"(({a} {'>' if op is Ops.MAX else '<'} {b}) ? {a} : {b})"
    u = "unsigned long long" if dt.itemsize == 8 else "unsigned int"
    if op is Ops.NEG:
        return f"(({t})(-({u}){args[0]}))"
    if op in _WRAPPING:  # unsigned arithmetic wraps; small types would otherwise be promoted to (overflowing) int
        rhs = args[1] if op is Ops.SHL else f"({u}){args[1]}"
        return f"(({t})(({u}){args[0]} {_ARITH[op]} {rhs}))"
    return f"(({t})({args[0]} {_ARITH[op]} {args[1]}))"
