"""CUDA C renderer: one kernel IR -> one ``extern "C" __global__`` function for NVRTC.

The kernel takes its buffers (element pointers, slot order) then its int32 vals (``Kernel.vars`` order); a launch's
grid is ``global_size`` blocks of ``local_size`` threads, and the IR's group/local ids are ``blockIdx``/``threadIdx``.
Semantics follow the module docstring of ``runtime_core.ir``, with nothing left to compiler flags except
``--fmad=false`` (set by the NVRTC compiler; each op is its own statement and rounds on its own):

* integer ADD/SUB/MUL/NEG/SHL are computed in ``unsigned int``/``unsigned long long`` and converted back, so they wrap;
  IDIV/MOD are C's (truncating), SHR of a signed value is arithmetic (NVCC's signed ``>>``);
* float MAX/MIN are ``fmax[f]``/``fmin[f]`` (IEEE maxNum/minNum), FMA is ``fma[f]`` (one rounding; for float16/bfloat16
  the exact product plus the addend rounded to odd in double, then to odd in float, then once to the type);
  EXP2/LOG2/SIN/SQRT/TRUNC are the CUDA math library's
  ``exp2[f] log2[f] sin[f] sqrt[f] trunc[f]`` (at most 2 ulp off; CUDA C++ Programming Guide, "Mathematical
  Functions"); DIV and RECIP are IEEE divisions;
* float16/bfloat16 values live as 16-bit patterns (``unsigned short``): each op converts to float (exact), computes,
  and rounds once (float16 with PTX ``cvt.rn.f16.f32``, bfloat16 with integer round-to-nearest-even, so no CUDA header
  is needed). A conversion that could round twice (from float64 or a 32/64-bit integer) first rounds to float32 to
  odd, which makes the second rounding exact;
* LOCAL arrays share one ``extern __shared__`` byte array (dynamic shared memory); the bytes needed are recorded as the
  global ``rtk_shared_bytes_<name>`` (see :mod:`runtime_backends.cuda.ptx_info`), which the program reads back;
* pointers are not ``__restrict__``: a launch may pass aliasing views of one buffer.
"""

from __future__ import annotations

import math

import numpy as np

from runtime_backends.cuda.consts import HALF, float_bits
from runtime_backends.cuda.layout import CUDARendererBase, SharedLayout
from runtime_backends.cuda.ptx_info import SHARED_RECORD
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, Ops, UOp

__all__ = ["CUDARenderer", "ctype"]

_PRELUDE = r"""static __device__ __forceinline__ float rtk_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
static __device__ __forceinline__ unsigned short rtk_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
static __device__ __forceinline__ float rtk_b2f(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
/* float -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN */
static __device__ __forceinline__ unsigned short rtk_f2b(float f) {
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
/* round to float32 to odd: truncate, then set the last bit if the value was inexact */
static __device__ __forceinline__ float rtk_odd(float t, bool inexact) {
  return inexact ? __uint_as_float(__float_as_uint(t) | 1u) : t;
}
static __device__ __forceinline__ float rtk_d2f_odd(double d) {
  float t = __double2float_rz(d); return rtk_odd(t, (double)t != d);
}
static __device__ __forceinline__ float rtk_ll2f_odd(long long v) {
  float t = __ll2float_rz(v); return rtk_odd(t, (long long)t != v);
}
static __device__ __forceinline__ float rtk_ull2f_odd(unsigned long long v) {
  float t = __ull2float_rz(v); return rtk_odd(t, (unsigned long long)t != v);
}
/* a * b + c rounded to double to odd: exact when rounding down and up agree, else the truncation with its last bit set */
static __device__ __forceinline__ double rtk_fma_odd(double a, double b, double c) {
  double t = __fma_rz(a, b, c);
  return __fma_rd(a, b, c) != __fma_ru(a, b, c) ? __longlong_as_double(__double_as_longlong(t) | 1LL) : t;
}
"""
_CTYPES = {dtypes.bool: "bool", dtypes.int8: "signed char", dtypes.int16: "short", dtypes.int32: "int",
           dtypes.int64: "long long", dtypes.uint8: "unsigned char", dtypes.uint16: "unsigned short",
           dtypes.uint32: "unsigned int", dtypes.uint64: "unsigned long long", dtypes.float16: "unsigned short",
           dtypes.bfloat16: "unsigned short", dtypes.float32: "float", dtypes.float64: "double"}
# float16/bfloat16: (to float, from float, bit pattern of 1.0)
_HALF_CONV = {dtypes.float16: ("rtk_h2f", "rtk_f2h", 0x3C00), dtypes.bfloat16: ("rtk_b2f", "rtk_f2b", 0x3F80)}
_MATH = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc", Ops.MAX: "fmax",
         Ops.MIN: "fmin", Ops.FMA: "fma"}
_ARITH = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.DIV: "/", Ops.IDIV: "/", Ops.MOD: "%", Ops.AND: "&",
          Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>", Ops.CMPLT: "<", Ops.CMPNE: "!="}
_WRAPPING = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL})
_SPECIAL = {"group": "blockIdx", "local": "threadIdx", "lsize": "blockDim", "gsize": "gridDim"}
_BITS_AS = {dtypes.float32: ("__float_as_uint", "__uint_as_float", "unsigned int"),
            dtypes.float64: ("__double_as_longlong", "__longlong_as_double", "long long")}
_BITS_NP = {dtypes.float32: np.uint32, dtypes.float64: np.uint64}


def ctype(dt: DType) -> str:
    """C type of a value of ``dt`` (float16/bfloat16 values are their bit patterns)."""
    return _CTYPES[dt]


def _storage(dt: DType) -> str:
    return "unsigned char" if dt is dtypes.bool else ctype(dt)


class _Writer:
    """One C statement per op, blocks indented."""

    def __init__(self, kernel: Kernel, layout: SharedLayout) -> None:
        self.k, self.layout = kernel, layout
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.depth = 1

    def source(self) -> str:
        k = self.k
        params = [f"{_storage(b.dtype)}* b{b.arg}" for b in k.buffers]
        params += [f"int a{n} /* {v.arg} */" for n, v in enumerate(k.vars)]
        for n, v in enumerate(k.vars):
            self.names[id(v)] = f"a{n}"
        for b in k.buffers:
            self.names[id(b)] = f"b{b.arg}"
        if self.layout.nbytes:
            self.line(f"extern __shared__ __align__({self.layout.align}) unsigned char rtk_smem[];")
        for i, u in enumerate(k.ops):
            self.emit(i, u)
        body = "\n".join(self.lines)
        record = (f'extern "C" __device__ const unsigned int {SHARED_RECORD}{k.name} = {self.layout.nbytes}u;\n'
                  if self.layout.nbytes else "")
        return f'{_PRELUDE}{record}extern "C" __global__ void {k.name}({", ".join(params)}) {{\n{body}\n}}\n'

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def n(self, u: UOp) -> str:
        return self.names[id(u)]

    def define(self, i: int, u: UOp, expr: str) -> None:
        self.names[id(u)] = f"v{i}"
        self.line(f"{ctype(u.dtype)} v{i} = {expr};")

    def emit(self, i: int, u: UOp) -> None:
        op = u.op
        if op in (Ops.PARAM, Ops.VAR):
            return
        if op is Ops.SPECIAL:
            kind, dim = u.arg
            self.define(i, u, f"(int){_SPECIAL[kind]}.{'xyz'[dim]}")
        elif op is Ops.LOCAL:
            self.names[id(u)] = f"l{i}"
            self.line(f"{_storage(u.dtype)}* l{i} = ({_storage(u.dtype)}*)(rtk_smem + {self.layout.offsets[id(u)]});")
        elif op is Ops.CONST:
            self.define(i, u, render_const(u.arg, u.dtype))
        elif op is Ops.ACC:
            self.define(i, u, self.n(u.src[0]))
        elif op is Ops.ASSIGN:
            self.line(f"{self.n(u.src[0])} = {self.n(u.src[1])};")
        elif op is Ops.LOAD:
            self.define(i, u, self.load(u))
        elif op is Ops.STORE:
            ptr, idx, val = (self.n(s) for s in u.src[:3])
            stmt = f"{ptr}[{idx}] = {val};"
            self.line(f"if ({self.n(u.src[3])}) {stmt}" if len(u.src) == 4 else stmt)
        elif op is Ops.BARRIER:
            self.line("__syncthreads();")
        elif op in (Ops.RANGE, Ops.IF):
            self.open_block(i, u)
        elif op in (Ops.ENDRANGE, Ops.ENDIF):
            self.depth -= 1
            self.line("}")
        elif op is Ops.BITCAST:
            self.define(i, u, bitcast_expr(self.n(u.src[0]), u.src[0].dtype, u.dtype))
        elif op is Ops.CAST:
            self.define(i, u, cast_expr(self.n(u.src[0]), u.src[0].dtype, u.dtype))
        else:
            self.define(i, u, alu_expr(op, u.src[-1].dtype, [self.n(s) for s in u.src]))

    def open_block(self, i: int, u: UOp) -> None:
        if u.op is Ops.RANGE:
            v, t, (start, end) = f"v{i}", ctype(u.dtype), u.src
            self.names[id(u)] = v
            # the bound is read once, at the RANGE op (it may be an ACC that the loop body assigns)
            self.line(f"for ({t} {v} = {self.n(start)}, {v}_end = {self.n(end)}; {v} < {v}_end; {v}++) {{")
        else:
            self.line(f"if ({self.n(u.src[0])}) {{")
        self.depth += 1

    def load(self, u: UOp) -> str:
        ptr, idx = self.n(u.src[0]), self.n(u.src[1])
        access = f"({ptr}[{idx}] != 0)" if u.dtype is dtypes.bool else f"{ptr}[{idx}]"
        return f"({self.n(u.src[2])} ? {access} : {self.n(u.src[3])})" if len(u.src) == 4 else access


def render_const(value: int | float | bool, dt: DType) -> str:
    """A C expression of type ``ctype(dt)`` with exactly the constant's value (floats by their bit patterns when not
    finite; float16/bfloat16 as their correctly rounded bit patterns)."""
    if dt is dtypes.bool:
        return "true" if value else "false"
    if dt.is_int:
        v = int(value)
        if dt.is_unsigned:
            return f"(({ctype(dt)}){v}{'ull' if dt.itemsize == 8 else 'u'})"
        if v == dt.min:
            return f"(({ctype(dt)})({v + 1}{'LL' if dt.itemsize == 8 else ''} - 1))"
        return f"(({ctype(dt)}){v}{'LL' if dt.itemsize == 8 else ''})"
    bits = float_bits(value, dt)
    if dt in HALF:
        return f"((unsigned short)0x{bits:04x}u)"
    exact = float(np.array(bits, np.uint64).astype(_BITS_NP[dt]).view(dt.np))
    if math.isfinite(exact):
        return f"({exact.hex()}{'f' if dt is dtypes.float32 else ''})"
    _, from_bits, utype = _BITS_AS[dt]
    return f"{from_bits}(({utype})0x{bits:x}ull)"


def cast_expr(x: str, src: DType, dst: DType) -> str:
    """C expression converting ``x`` of ``src`` to ``dst`` with the IR's CAST semantics."""
    if src is dst:
        return x
    if dst is dtypes.bool:
        return f"(({x} & 0x7fffu) != 0)" if src in HALF else f"({x} != 0)"
    if src is dtypes.bool:
        return f"({x} ? (unsigned short)0x{_HALF_CONV[dst][2]:04x}u : (unsigned short)0u)" if dst in HALF \
            else f"(({ctype(dst)}){x})"
    if src in HALF:
        as_float = f"{_HALF_CONV[src][0]}({x})"
        return f"{_HALF_CONV[dst][1]}({as_float})" if dst in HALF else f"(({ctype(dst)}){as_float})"
    if dst in HALF:
        return f"{_HALF_CONV[dst][1]}({_to_float_once(x, src)})"
    return f"(({ctype(dst)}){x})"


def _to_float_once(x: str, src: DType) -> str:
    """A float32 that a later rounding to 16 bits rounds correctly: exact or rounded to odd."""
    if src is dtypes.float32 or (src.is_int and src.itemsize <= 2):
        return f"(float){x}"
    if src is dtypes.float64:
        return f"rtk_d2f_odd({x})"
    return f"rtk_ull2f_odd((unsigned long long){x})" if src.is_unsigned else f"rtk_ll2f_odd((long long){x})"


def bitcast_expr(x: str, src: DType, dst: DType) -> str:
    """C expression reinterpreting the bits of ``x`` (``src``) as ``dst`` (same size)."""
    if dst is dtypes.bool:
        return f"({x} != 0)"
    if src in _BITS_AS:
        as_bits, _, utype = _BITS_AS[src]
        return f"(({ctype(dst)}){as_bits}({x}))" if dst not in _BITS_AS else f"{_BITS_AS[dst][1]}({as_bits}({x}))"
    if dst in _BITS_AS:
        return f"{_BITS_AS[dst][1]}(({_BITS_AS[dst][2]}){x})"
    return f"(({ctype(dst)}){x})"  # integer and 16-bit float patterns: a same-size integer conversion


def alu_expr(op: Ops, dt: DType, args: list[str]) -> str:
    """C expression for ALU ``op`` whose (last) operands have dtype ``dt``; ``args`` are the operand names."""
    if op is Ops.WHERE:
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if dt in HALF:
        return _half_alu(op, dt, args)
    if dt.is_float:
        return _float_alu(op, dt, args)
    return _int_alu(op, dt, args)


def _half_alu(op: Ops, dt: DType, args: list[str]) -> str:
    to_float, from_float, _ = _HALF_CONV[dt]
    if op is Ops.NEG:
        return f"((unsigned short)({args[0]} ^ 0x8000u))"
    if op is Ops.FMA:  # the product is exact in double; the sum rounds to odd twice, then once to the type
        wide = ", ".join(f"(double){to_float}({a})" for a in args)
        return f"{from_float}(rtk_d2f_odd(rtk_fma_odd({wide})))"
    value = _float_alu(op, dtypes.float32, [f"{to_float}({a})" for a in args])
    return value if op in (Ops.CMPLT, Ops.CMPNE) else f"{from_float}({value})"


def _float_alu(op: Ops, dt: DType, args: list[str]) -> str:
    suffix = "f" if dt is dtypes.float32 else ""
    if op is Ops.NEG:
        return f"(-{args[0]})"
    if op is Ops.RECIP:
        return f"(1.0{suffix} / {args[0]})"
    if op in _MATH:
        return f"{_MATH[op]}{suffix}({', '.join(args)})"
    return f"({args[0]} {_ARITH[op]} {args[1]})"


def _int_alu(op: Ops, dt: DType, args: list[str]) -> str:
    t = ctype(dt)
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


class CUDARenderer(CUDARendererBase):
    """Renders a :class:`~runtime_core.ir.Kernel` to one CUDA C translation unit (see the module docstring)."""

    writer = _Writer
