"""CUDA C renderer: one kernel IR -> one ``extern "C" __global__`` function for NVRTC.

The kernel takes its buffers (element pointers, slot order) then its int32 vals (``Kernel.vars`` order); a launch's
grid is ``global_size`` blocks of ``local_size`` threads, and the IR's group/local ids are ``blockIdx``/``threadIdx``.
The body is written by ``runtime_backends.cstyle`` (value semantics there, shared with the CPU's C renderer); NVRTC
compiles with ``--fmad=false`` (set by the CUDA compiler), so each op rounds on its own. What CUDA spells its own way:

* bits move with ``__float_as_uint``-style intrinsics; float16 converts with PTX ``cvt.f32.f16``/``cvt.rn.f16.f32``
  (inline assembly, so no CUDA header is needed); rounding to odd uses the round-toward-zero/-down/-up intrinsics
  (``__double2float_rz``, ``__fma_rz``...: CUDA Math API, "Intrinsics");
* EXP2/LOG2/SIN/SQRT/TRUNC/FMA are the CUDA math library's ``exp2[f] log2[f] sin[f] sqrt[f] trunc[f] fma[f]`` (at
  most 2 ulp off; CUDA C++ Programming Guide, "Mathematical Functions");
* LOCAL arrays share one ``extern __shared__`` byte array (dynamic shared memory); the bytes needed are recorded as the
  global ``rtk_shared_bytes_<name>`` (see :mod:`runtime_backends.cuda.ptx_info`), which the program reads back;
  BARRIER is ``__syncthreads()``;
* pointers are not ``__restrict__``: a launch may pass aliasing views of one buffer.
"""

from __future__ import annotations

from runtime_backends.cstyle.values import Dialect, helpers, storage_ctype
from runtime_backends.cstyle.writer import CWriter
from runtime_backends.cuda.layout import CUDARendererBase, SharedLayout
from runtime_backends.cuda.ptx_info import SHARED_RECORD
from runtime_core.ir import Kernel, UOp

__all__ = ["CUDARenderer", "CUDA_DIALECT"]

_INTRINSICS = (
    ("rtk_fbits", "unsigned int rtk_fbits(float f) { return __float_as_uint(f); }"),
    ("rtk_bitsf", "float rtk_bitsf(unsigned int x) { return __uint_as_float(x); }"),
    ("rtk_dbits", "unsigned long long rtk_dbits(double d) { return (unsigned long long)__double_as_longlong(d); }"),
    ("rtk_bitsd", "double rtk_bitsd(unsigned long long x) { return __longlong_as_double((long long)x); }"),
    ("rtk_h2f", 'float rtk_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }'),
    ("rtk_f2h", 'unsigned short rtk_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); '
                'return h; }'),
    # round to float32 to odd: truncate, then set the last bit if the value was inexact
    ("rtk_odd", "float rtk_odd(float t, bool inexact) { return inexact ? __uint_as_float(__float_as_uint(t) | 1u) : t; }"),
    ("rtk_d2f_odd", "float rtk_d2f_odd(double d) { float t = __double2float_rz(d); return rtk_odd(t, (double)t != d); }"),
    ("rtk_u2f_odd", "float rtk_u2f_odd(unsigned long long v) { float t = __ull2float_rz(v); "
                    "return rtk_odd(t, (unsigned long long)t != v); }"),
    ("rtk_i2f_odd", "float rtk_i2f_odd(long long v) { float t = __ll2float_rz(v); return rtk_odd(t, (long long)t != v); }"),
    # a * b + c rounded to double to odd: exact when rounding down and up agree, else the truncation with its last bit set
    ("rtk_fma_odd", """double rtk_fma_odd(double a, double b, double c) {
  double t = __fma_rz(a, b, c);
  return __fma_rd(a, b, c) != __fma_ru(a, b, c) ? __longlong_as_double(__double_as_longlong(t) | 1LL) : t;
}"""),
)

CUDA_DIALECT = Dialect(name="CUDA", bool_type="bool", qualifier="static __device__ __forceinline__", math_prefix="",
                       intrinsics=_INTRINSICS)
"""CUDA C++ for NVRTC (module docstring)."""
_SPECIAL = {"group": "blockIdx", "local": "threadIdx", "lsize": "blockDim", "gsize": "gridDim"}


class _Writer(CWriter):
    """The kernel function: parameters, the shared array, the body (``CWriter`` with CUDA's ids and local memory)."""

    dialect = CUDA_DIALECT

    def __init__(self, kernel: Kernel, layout: SharedLayout) -> None:
        super().__init__(kernel)
        self.layout = layout

    def source(self) -> str:
        k, d = self.k, self.dialect
        params = [f"{storage_ctype(d, b.dtype)}* b{b.arg}" for b in k.buffers]
        params += [f"int a{n} /* {v.arg} */" for n, v in enumerate(k.vars)]
        if self.layout.nbytes:
            self.line(f"extern __shared__ __align__({self.layout.align}) unsigned char rtk_smem[];")
        body = self.body()
        record = (f'extern "C" __device__ const unsigned int {SHARED_RECORD}{k.name} = {self.layout.nbytes}u;\n'
                  if self.layout.nbytes else "")
        return f'{helpers(d, body)}{record}extern "C" __global__ void {k.name}({", ".join(params)}) {{\n{body}\n}}\n'

    def special(self, i: int, u: UOp) -> None:
        kind, dim = u.arg
        self.define(i, u, f"(int){_SPECIAL[kind]}.{'xyz'[dim]}")

    def local(self, i: int, u: UOp) -> None:
        self.names[id(u)] = f"l{i}"
        t = storage_ctype(self.dialect, u.dtype)
        self.line(f"{t}* l{i} = ({t}*)(rtk_smem + {self.layout.offsets[id(u)]});")

    def barrier(self) -> None:
        self.line("__syncthreads();")


class CUDARenderer(CUDARendererBase):
    """Renders a :class:`~runtime_core.ir.Kernel` to one CUDA C translation unit (see the module docstring)."""

    writer = _Writer
