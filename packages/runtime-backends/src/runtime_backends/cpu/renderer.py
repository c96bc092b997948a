"""C renderer of the CPU backend: one kernel IR -> one freestanding C function plus a signature record.

The rendered translation unit defines

* ``void <name>(P0 b0, ..., int a0, ..., int gsz0, int gsz1, int gsz2, int lsz0, int lsz1, int lsz2)``: buffers (element
  pointers, in slot order), the int32 vals (in ``Kernel.vars`` order), then the launch shape (groups, then threads per
  group, x y z). It runs every group and every thread of a group serially (x fastest), each thread executing the whole
  op list, so one object serves any launch shape.
* ``const int rtk_signature[3] = {SIGNATURE_MAGIC, <number of buffers>, <number of vals>}``: how a loader learns the
  argument counts from the object alone (``CPUProgram`` reads it to validate launches and to type the call).

Semantics follow the module docstring of ``runtime_core.ir`` without relying on compiler flags:

* integer ADD/SUB/MUL/NEG/SHL are computed in ``unsigned int`` / ``unsigned long long`` and converted back, so they wrap
  (C11 6.2.5p9; the conversion back to a signed type is modulo 2**N in GCC and Clang, "Integers implementation");
* every op is its own statement (``T vN = ...;``), so no two float ops form one expression that Clang could contract
  into an FMA; GCC, which contracts across statements by default, is told ``fp-contract=off`` by a pragma;
* float MAX/MIN are maxNum/minNum written with comparisons (no libm), comparisons with NaN are false except ``!=``;
* float16 and bfloat16 values live as their 16-bit patterns (``unsigned short``); each op converts to float, computes,
  and rounds the result once with inline round-to-nearest-even code. Conversions that could round twice (float64 or a
  32/64-bit integer to float16/bfloat16) first round to float32 *to odd*, which makes the second rounding exact
  (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008);
* EXP2/LOG2/SIN call ``exp2f/exp2``, ``log2f/log2``, ``sinf/sin`` (the execmem resolver's libm whitelist); SQRT and
  TRUNC use ``__builtin_sqrt[f]``/``__builtin_trunc[f]`` (instructions with -fno-math-errno, else whitelisted calls);
* a gated load is ``gate ? p[i] : alt`` (the false arm never touches memory), a gated store is ``if (gate) p[i] = v;``;
* pointers are not ``restrict``: a launch may pass aliasing views of one buffer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from runtime_backends.cpu.execmem import LIBC_WHITELIST, LIBM_WHITELIST
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, Ops, UOp, validate
from runtime_core.renderer import Renderer

__all__ = ["CRenderer", "MAX_PARAMS", "SIGNATURE_MAGIC", "SIGNATURE_SYMBOL"]

SIGNATURE_SYMBOL = "rtk_signature"
SIGNATURE_MAGIC = 0x52544B31  # "RTK1": version 1 of this renderer's calling convention
INT32_MAX = 2**31 - 1
MAX_PARAMS = 1024 - 6
"""Buffers + vals per kernel: ctypes calls take at most 1024 arguments, and 6 of them are the launch shape."""
_HALF = (dtypes.float16, dtypes.bfloat16)
_RESERVED = LIBM_WHITELIST | LIBC_WHITELIST  # a kernel of that name would capture the calls to the host function
_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long register "
    "restrict return short signed sizeof static struct switch typedef union unsigned void volatile while _Alignas "
    "_Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local asm typeof "
    # C23 keywords (the default language of newer GCC and Clang)
    "alignas alignof bool constexpr false nullptr static_assert thread_local true typeof_unqual".split())

_PRELUDE = r"""#if defined(__clang__)
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


class CRenderer(Renderer):
    """Renders a :class:`~runtime_core.ir.Kernel` to C for the CPU backend (see the module docstring for the ABI).

    Groups and the threads of a group run serially, so there is no local memory (``has_shared`` False): kernels with
    LOCAL ops (and hence BARRIER) are rejected by :meth:`check` with ``ValueError``. Launch sizes are C ``int``s, so
    each dimension may be up to ``2**31 - 1``.
    """

    device = "CPU"
    has_local = False
    has_shared = False
    global_max = (INT32_MAX, INT32_MAX, INT32_MAX)
    local_max = (INT32_MAX, INT32_MAX, INT32_MAX)
    shared_max = 0

    def render(self, kernel: Kernel) -> str:
        """The C translation unit for ``kernel``.

        Raises:
            runtime_core.ir.IRError: the kernel is malformed (a ``ValueError``).
            ValueError: the kernel uses local memory, takes more than ``MAX_PARAMS`` buffers and vals, or its name is
                not usable as the function's symbol (not an ASCII C identifier, a C11/C23 keyword, a reserved
                identifier such as ``__int128``, a whitelisted host function such as ``sinf``, or ``rtk_*``).
        """
        validate(kernel)
        self.check(kernel)
        name = kernel.name
        # C11 7.1.3: identifiers starting with "__" or "_" and a capital are reserved (__int128, __asm__, _Pragma)
        # validate() has checked that the name is an ASCII identifier
        reserved = name.startswith(("__", "rtk_")) or name[:1] == "_" and name[1:2].isupper()
        if name in _C_KEYWORDS or name in _RESERVED or reserved:
            raise ValueError(f"CPU: kernel name {name!r} must be an ASCII C identifier that is not a keyword, not "
                             f"reserved (starting with '__' or '_' and a capital letter), not a host function kernels "
                             f"call (libm/libc whitelist) and does not start with 'rtk_' (it becomes the function's "
                             f"symbol); rename the kernel")
        if (nparams := len(kernel.buffers) + len(kernel.vars)) > MAX_PARAMS:
            raise ValueError(f"CPU: kernel {name!r} takes {nparams} buffers and vals; the CPU backend calls kernels "
                             f"through ctypes, which allows at most {MAX_PARAMS}")
        return _KernelWriter(kernel).source()


class _KernelWriter:
    """Writes the body of one kernel: one C statement per op, blocks indented."""

    def __init__(self, kernel: Kernel) -> None:
        self.k = kernel
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.depth = 2  # inside the function and the thread loops

    def source(self) -> str:
        k = self.k
        params = [f"{storage_ctype(b.dtype)}* b{b.arg}" for b in k.buffers]
        params += [f"int a{n} /* {v.arg} */" for n, v in enumerate(k.vars)]
        params += [f"int gsz{d}" for d in range(3)] + [f"int lsz{d}" for d in range(3)]
        for n, v in enumerate(k.vars):
            self.names[id(v)] = f"a{n}"
        for b in k.buffers:
            self.names[id(b)] = f"b{b.arg}"
        loops = [f"for (int gid{d} = 0; gid{d} < gsz{d}; gid{d}++)" for d in (2, 1, 0)]
        loops += [f"for (int lid{d} = 0; lid{d} < lsz{d}; lid{d}++)" for d in (2, 1, 0)]
        for i, u in enumerate(k.ops):
            self.emit_op(i, u)
        body = "\n".join(self.lines)
        signature = f"const int {SIGNATURE_SYMBOL}[3] = {{{SIGNATURE_MAGIC:#x}, {len(k.buffers)}, {len(k.vars)}}};\n"
        head = f"void {k.name}({', '.join(params)}) {{\n  " + "\n  ".join(loops) + " {\n"
        return f"{_PRELUDE}{signature}{head}{body}\n  }}\n}}\n"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def n(self, u: UOp) -> str:
        return self.names[id(u)]

    def define(self, i: int, u: UOp, expr: str) -> None:
        self.names[id(u)] = f"v{i}"
        self.line(f"{ctype(u.dtype)} v{i} = {expr};")  # type: ignore[arg-type]

    def emit_op(self, i: int, u: UOp) -> None:
        op = u.op
        if op in (Ops.PARAM, Ops.VAR):
            return
        if op is Ops.SPECIAL:
            kind, dim = u.arg
            self.names[id(u)] = {"group": "gid", "local": "lid", "gsize": "gsz", "lsize": "lsz"}[kind] + str(dim)
        elif op is Ops.CONST:
            self.define(i, u, render_const(u.arg, u.dtype))  # type: ignore[arg-type]
        elif op is Ops.ACC:
            self.define(i, u, self.n(u.src[0]))
        elif op is Ops.ASSIGN:
            self.line(f"{self.n(u.src[0])} = {self.n(u.src[1])};")
        elif op is Ops.LOAD:
            self.define(i, u, self.load(u))
        elif op is Ops.STORE:
            self.store(u)
        elif op is Ops.RANGE:
            v, t, (start, end) = f"v{i}", ctype(u.dtype), u.src  # type: ignore[arg-type]
            self.names[id(u)] = v
            # the bound is read once, at the RANGE op (it may be an ACC that the loop body assigns)
            self.line(f"for ({t} {v} = {self.n(start)}, {v}_end = {self.n(end)}; {v} < {v}_end; {v}++) {{")
            self.depth += 1
        elif op is Ops.IF:
            self.line(f"if ({self.n(u.src[0])}) {{")
            self.depth += 1
        elif op in (Ops.ENDRANGE, Ops.ENDIF):
            self.depth -= 1
            self.line("}")
        elif op is Ops.BITCAST:
            self.bitcast(i, u)
        elif op is Ops.CAST:
            self.define(i, u, cast_expr(self.n(u.src[0]), u.src[0].dtype, u.dtype))  # type: ignore[arg-type]
        else:  # ALU; LOCAL and BARRIER were rejected by Renderer.check
            self.define(i, u, alu_expr(op, u.src[-1].dtype, [self.n(s) for s in u.src]))  # type: ignore[arg-type]

    def load(self, u: UOp) -> str:
        ptr, idx = self.n(u.src[0]), self.n(u.src[1])
        access = f"({ptr}[{idx}] != 0)" if u.dtype is dtypes.bool else f"{ptr}[{idx}]"
        return f"({self.n(u.src[2])} ? {access} : {self.n(u.src[3])})" if len(u.src) == 4 else access

    def store(self, u: UOp) -> None:
        ptr, idx, val = self.n(u.src[0]), self.n(u.src[1]), self.n(u.src[2])
        stmt = f"{ptr}[{idx}] = {val};"
        self.line(f"if ({self.n(u.src[3])}) {stmt}" if len(u.src) == 4 else stmt)

    def bitcast(self, i: int, u: UOp) -> None:
        src, sdt, dt = self.n(u.src[0]), u.src[0].dtype, u.dtype
        if dt is dtypes.bool:
            self.define(i, u, f"({src} != 0)")
        elif sdt is dtypes.bool or sdt in _HALF or dt in _HALF or sdt.is_int and dt.is_int:  # type: ignore[union-attr]
            self.define(i, u, f"({ctype(dt)}){src}")  # type: ignore[arg-type]  # same-size integer patterns
        else:
            self.names[id(u)] = f"v{i}"
            self.line(f"{ctype(dt)} v{i}; __builtin_memcpy(&v{i}, &{src}, {dt.itemsize});")  # type: ignore[union-attr]


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
