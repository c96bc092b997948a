"""C expressions for IR values: types, constants, casts and ALU ops, plus the helper functions they call (PRELUDE).

Semantics follow the module docstring of ``runtime_core.ir`` without relying on compiler flags:

* integer ADD/SUB/MUL/NEG/SHL are computed in ``unsigned int`` / ``unsigned long long`` and converted back, so they wrap
  (C11 6.2.5p9; the conversion back to a signed type is modulo 2**N in GCC and Clang, "Integers implementation");
* every op is its own statement (``T vN = ...;``), so no two float ops form one expression that Clang could contract
  into an FMA; GCC, which contracts across statements by default, is told ``fp-contract=off`` by a pragma. FMA is
  ``__builtin_fma[f]`` (one rounding: an instruction with -march=native, else the whitelisted libm call);
* float MAX/MIN are maxNum/minNum written with comparisons (no libm), comparisons with NaN are false except ``!=``;
* float16 and bfloat16 values live as their 16-bit patterns (``unsigned short``); each op converts to float, computes,
  and rounds the result once with inline round-to-nearest-even code. Conversions that could round twice (float64 or a
  32/64-bit integer to float16/bfloat16) first round to float32 *to odd*, which makes the second rounding exact
  (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008);
  a 16-bit FMA multiplies exactly in double and adds rounding to odd, then rounds to odd to float and once to the type;
* EXP2/LOG2/SIN call ``exp2f/exp2``, ``log2f/log2``, ``sinf/sin`` (the execmem resolver's libm whitelist); SQRT and
  TRUNC use ``__builtin_sqrt[f]``/``__builtin_trunc[f]`` (instructions with -fno-math-errno, else whitelisted calls).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Ops

__all__ = ["PRELUDE", "ctype", "storage_ctype", "render_const", "cast_expr", "alu_expr"]

_HALF = (dtypes.float16, dtypes.bfloat16)

PRELUDE = r"""#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
static inline unsigned int rtk_fbits(float f) { unsigned int x; __builtin_memcpy(&x, &f, 4); return x; }
static inline float rtk_bitsf(unsigned int x) { float f; __builtin_memcpy(&f, &x, 4); return f; }
/* float16 bits -> float (exact) */
static inline float rtk_h2f(unsigned short h) {
  unsigned int sign = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return rtk_bitsf(sign | 0x7f800000u | (m << 13));
  if (e != 0) return rtk_bitsf(sign | ((e + 112u) << 23) | (m << 13));
  return rtk_bitsf(sign | rtk_fbits((float)m * 0x1p-24f));
}
/* float -> float16 bits, round to nearest even; NaN stays NaN (quieted, top payload bits kept) */
static inline unsigned short rtk_f2h(float f) {
  unsigned int x = rtk_fbits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  /* >= 65520 (or inf) -> inf */
  if (ax >= 0x38800000u) {  /* normal result: rebias the exponent, round 13 bits away */
    unsigned int r = ax - 0x38000000u;
    return (unsigned short)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (ax <= 0x33000000u) return (unsigned short)sign;  /* <= 2**-25 (half of the smallest subnormal) -> 0 */
  {  /* subnormal result in units of 2**-24 */
    unsigned int m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23);
    unsigned int q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    q += (rem > half || (rem == half && (q & 1u))) ? 1u : 0u;
    return (unsigned short)(sign | q);
  }
}
/* bfloat16 bits <-> float */
static inline float rtk_b2f(unsigned short b) { return rtk_bitsf((unsigned int)b << 16); }
static inline unsigned short rtk_f2b(float f) {
  unsigned int x = rtk_fbits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
/* double -> float rounded to odd: a later round-to-nearest to <= 22 significant bits is then correctly rounded */
static inline float rtk_d2f_odd(double d) {
  float f = (float)d;
  unsigned int x;
  if ((double)f == d || d != d) return f;
  x = rtk_fbits(f);
  if (__builtin_fabs((double)f) > __builtin_fabs(d)) x -= 1u;
  return rtk_bitsf(x | 1u);
}
/* 64-bit integer -> float rounded to odd (same purpose) */
static inline float rtk_u2f_odd(unsigned long long m) {
  int s;
  if (m < (1ull << 24)) return (float)m;
  s = 40 - __builtin_clzll(m);
  return (float)((m >> s) | ((m & ((1ull << s) - 1ull)) != 0ull)) * (float)(1ull << s);
}
static inline float rtk_i2f_odd(long long v) {
  return v < 0 ? -rtk_u2f_odd(0ull - (unsigned long long)v) : rtk_u2f_odd((unsigned long long)v);
}
/* a * b + c rounded to odd, for 16-bit float inputs (their product is exact in double; TwoSum gives the exact error) */
static inline double rtk_fma_odd(double a, double b, double c) {
  double p = a * b, s = p + c, bp = s - c, e = (p - bp) + (c - (s - bp));
  unsigned long long x;
  if (e == 0.0 || !__builtin_isfinite(s)) return s;
  __builtin_memcpy(&x, &s, 8);
  if ((x & 1u) == 0u) x = ((e > 0.0) == (s > 0.0)) ? x + 1u : x - 1u;
  __builtin_memcpy(&s, &x, 8);
  return s;
}
"""

# float16/bfloat16: (to float, from float, bit pattern of 1.0)
_HALF_CONV = {dtypes.float16: ("rtk_h2f", "rtk_f2h", 0x3C00), dtypes.bfloat16: ("rtk_b2f", "rtk_f2b", 0x3F80)}
_LIBM = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"}
_ARITH = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.DIV: "/", Ops.IDIV: "/", Ops.MOD: "%", Ops.AND: "&",
          Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>", Ops.CMPLT: "<", Ops.CMPNE: "!="}
_WRAPPING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL})


def ctype(dt: DType) -> str:
    """C type of a value of ``dt`` (float16/bfloat16 values are their bit patterns)."""
    return "unsigned short" if dt in _HALF else dt.cname


def storage_ctype(dt: DType) -> str:
    """C element type of a buffer of ``dt`` (bool buffers are bytes, read as ``!= 0``)."""
    return "unsigned char" if dt is dtypes.bool else ctype(dt)


def _ucompute(dt: DType) -> str:
    return "unsigned long long" if dt.itemsize == 8 else "unsigned int"


def _round_to_f32_odd(value: float) -> np.float32:
    """``value`` rounded to float32 to odd (see the module docstring), for correctly rounded 16-bit constants."""
    with np.errstate(over="ignore"):
        f = np.float32(value)
    if math.isnan(value) or float(f) == value:
        return f
    bits = int(f.view(np.uint32))
    if abs(float(f)) > abs(value):
        bits -= 1
    return np.uint32(bits | 1).view(np.float32)


def _float_value(value: int | float, dt: DType) -> float:
    try:
        return float(value)
    except OverflowError as e:
        raise ValueError(f"constant {value!r} does not fit a {dt.name} (nor a float64)") from e


def render_const(value: int | float | bool, dt: DType) -> str:
    """A C expression of type ``ctype(dt)`` for the constant ``value``.

    Integers carry their C type (``INT64_MIN`` and ``INT32_MIN`` are written as ``(-MAX-1)``, unsigned values get
    ``u``/``ull``); float32/float64 are exact hex float literals, inf/NaN ``__builtin_inf[f]``/``__builtin_nan[f]``;
    float16/bfloat16 are their bit patterns, the value correctly rounded (round to nearest even, from float64).
    """
    if dt is dtypes.bool:
        return "((_Bool)1)" if value else "((_Bool)0)"
    if dt.is_int:
        return f"(({ctype(dt)}){_int_literal(int(value), dt)})"
    fval = _float_value(value, dt)
    if dt in _HALF:
        with np.errstate(over="ignore"):
            f32 = _round_to_f32_odd(fval)
            half = f32.astype(np.float16) if dt is dtypes.float16 else f32.astype(ml_dtypes.bfloat16)
        return f"((unsigned short)0x{int(half.view(np.uint16)):04x}u)"
    suffix = "f" if dt is dtypes.float32 else ""
    if math.isnan(fval):
        return f"__builtin_nan{suffix}(\"\")"
    if math.isinf(fval):
        return f"({'-' if fval < 0 else ''}__builtin_inf{suffix}())"
    with np.errstate(over="ignore"):
        exact = float(np.float32(fval)) if dt is dtypes.float32 else fval
    if math.isinf(exact):
        return f"({'-' if exact < 0 else ''}__builtin_inf{suffix}())"
    return f"({exact.hex()}{suffix})"


def _int_literal(v: int, dt: DType) -> str:
    if dt.is_unsigned:
        return f"{v}{'ull' if dt.itemsize == 8 else 'u'}"
    if dt.itemsize == 8:
        return "(-9223372036854775807LL-1)" if v == -(2**63) else f"{v}LL"
    return "(-2147483647-1)" if v == -(2**31) else str(v)


def cast_expr(x: str, src: DType, dst: DType) -> str:
    """C expression converting value ``x`` of ``src`` to ``dst`` with the IR's CAST semantics."""
    if src is dst:
        return x
    if dst is dtypes.bool:
        return f"(({x} & 0x7fffu) != 0)" if src in _HALF else f"({x} != 0)"
    if src is dtypes.bool:
        return f"({x} ? 0x{_HALF_CONV[dst][2]:04x}u : 0u)" if dst in _HALF else f"(({ctype(dst)}){x})"
    if src in _HALF:
        as_float = f"{_HALF_CONV[src][0]}({x})"
        return f"{_HALF_CONV[dst][1]}({as_float})" if dst in _HALF else f"(({ctype(dst)}){as_float})"
    if dst in _HALF:
        to_half = _HALF_CONV[dst][1]
        if src is dtypes.float32:
            return f"{to_half}({x})"
        if src is dtypes.float64:
            return f"{to_half}(rtk_d2f_odd({x}))"
        if src.is_unsigned:
            return f"{to_half}(rtk_u2f_odd((unsigned long long){x}))"
        return f"{to_half}(rtk_i2f_odd((long long){x}))"
    return f"(({ctype(dst)}){x})"


def alu_expr(op: Ops, dt: DType, args: list[str]) -> str:
    """C expression for ALU ``op`` whose (last) operands have dtype ``dt``; ``args`` are the operand names."""
    if op is Ops.WHERE:  # selects bit patterns, so it is the same for every dtype
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if dt in _HALF:
        return _half_alu(op, dt, args)
    if dt.is_float:
        return _float_alu(op, dt, args, lambda a: a)
    return _int_alu(op, dt, args)


def _half_alu(op: Ops, dt: DType, args: list[str]) -> str:
    to_float, from_float, _ = _HALF_CONV[dt]
    if op is Ops.NEG:
        return f"((unsigned short)({args[0]} ^ 0x8000u))"
    if op in (Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPNE):
        return _float_alu(op, dt, args, lambda a: f"{to_float}({a})")
    if op is Ops.FMA:  # exact product, sum rounded to odd, to float rounded to odd: the last rounding is the only one
        return f"{from_float}(rtk_d2f_odd(rtk_fma_odd({', '.join(f'(double){to_float}({a})' for a in args)})))"
    return f"{from_float}({_float_alu(op, dt, [f'{to_float}({a})' for a in args], lambda a: a)})"


def _float_alu(op: Ops, dt: DType, args: list[str], value: Callable[[str], str]) -> str:
    """Float32/float64 op, or a float16/bfloat16 op computed in float. ``value`` maps an operand to its float value
    (used by MAX/MIN/compare, which return or compare the operands themselves)."""
    suffix = "" if dt is dtypes.float64 else "f"
    if op in (Ops.MAX, Ops.MIN):  # maxNum/minNum: a NaN operand loses to the other one
        a, b = args
        cmp = ">" if op is Ops.MAX else "<"
        return f"(({value(b)} != {value(b)} || {value(a)} {cmp} {value(b)}) ? {a} : {b})"
    if op in (Ops.CMPLT, Ops.CMPNE):
        return f"({value(args[0])} {_ARITH[op]} {value(args[1])})"
    if op is Ops.NEG:
        return f"(-{args[0]})"
    if op is Ops.RECIP:
        return f"(1.0{suffix} / {args[0]})"
    if op in _LIBM:
        return f"__builtin_{_LIBM[op]}{suffix}({args[0]})"
    if op is Ops.FMA:
        return f"__builtin_fma{suffix}({', '.join(args)})"
    return f"({args[0]} {_ARITH[op]} {args[1]})"


def _int_alu(op: Ops, dt: DType, args: list[str]) -> str:
    t = ctype(dt)
    if op is Ops.CMPLT or op is Ops.CMPNE:
        return f"({args[0]} {_ARITH[op]} {args[1]})"
    if op in (Ops.MAX, Ops.MIN):
        a, b = args
        return f"(({a} {'>' if op is Ops.MAX else '<'} {b}) ? {a} : {b})"
    if op is Ops.NEG:
        return f"(({t})(-({_ucompute(dt)}){args[0]}))"
    if op in _WRAPPING:  # unsigned arithmetic wraps; small types would otherwise be promoted to (overflowing) int
        u = _ucompute(dt)
        rhs = args[1] if op is Ops.SHL else f"({u}){args[1]}"
        return f"(({t})(({u}){args[0]} {_ARITH[op]} {rhs}))"
    return f"(({t})({args[0]} {_ARITH[op]} {args[1]}))"
