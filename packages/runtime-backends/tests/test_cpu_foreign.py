"""Foreign C kernels on the CPU backend: hand-written and reference-style C without our signature record, compiled with
clang and gcc, each using one kind of static data, run through CPUProgram and the device, compared with numpy."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.device import CPUDevice
from runtime_backends.cpu.program import CPUProgram
from runtime_core.buffer import Buffer
from runtime_core.compiler import CompileError

N = 64
LUT = [0.5 * k - 3.0 for k in range(16)]


@pytest.fixture(scope="module", params=["clang", "gcc"])
def cc(request) -> ClangCompiler:
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    return ClangCompiler(None, cc=request.param)


def load(cc: ClangCompiler, src: str, name: str) -> CPUProgram:
    return CPUProgram(None, name, cc.compile(src))


def addr(*arrays: np.ndarray) -> list[int]:
    return [a.ctypes.data for a in arrays]


def undefined_symbols(obj: bytes) -> set[str]:
    symtab = ELFFile(io.BytesIO(obj)).get_section_by_name(".symtab")
    return {s.name for s in symtab.iter_symbols() if s["st_shndx"] == "SHN_UNDEF" and s.name}


def test_reference_style_kernel_without_launch_sizes(cc):
    src = """void E_4(float* restrict data0, const float* restrict data1, int var0) {
  for (int ridx0 = 0; ridx0 < 4; ridx0++) {
    float val0 = *(data1 + ridx0);
    *(data0 + ridx0) = (val0 * (float)var0) + 1.0f;
  }
}
"""
    x, out = np.random.default_rng(1).random(4, dtype=np.float32), np.full(4, -1, np.float32)
    load(cc, src, "E_4")(*addr(out, x), vals=(3,), global_size=(7, 1, 1))  # sizes are ignored: the kernel loops itself
    np.testing.assert_array_equal(out, x * np.float32(3) + np.float32(1))


def test_reference_style_kernel_with_math_header_and_vectors(cc):
    src = """#include <math.h>
typedef float float4 __attribute__((aligned(16), vector_size(16)));
void r_sqrt(float* restrict data0, const float* restrict data1) {
  for (int i = 0; i < 16; i++) {
    float4 v = *((const float4*)(data1 + i * 4));
    float4 r = (float4){sqrtf(v[0]), sqrtf(v[1]), sqrtf(v[2]), sqrtf(v[3])};
    *((float4*)(data0 + i * 4)) = r + (float4){expf(0.0f), 0.0f, 0.0f, 0.0f};
  }
}
"""
    x = np.linspace(0, 100, N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    load(cc, src, "r_sqrt")(*addr(out, x))
    expected = np.sqrt(x)
    expected[::4] += 1
    np.testing.assert_allclose(out, expected, rtol=2**-23)


def test_rodata_lookup_table(cc):
    table = ", ".join(f"{v!r}f" for v in LUT)
    src = f"static const float lut[16] = {{{table}}};\n" \
          "void gather(float* out, const int* idx, int n) { for (int i = 0; i < n; i++) out[i] = lut[idx[i] & 15]; }\n"
    idx = (np.arange(N, dtype=np.int32) * 7) % 16
    out = np.zeros(N, np.float32)
    load(cc, src, "gather")(*addr(out, idx), vals=(N,))
    np.testing.assert_array_equal(out, np.array(LUT, np.float32)[idx])


SWITCH = """void classify(int* out, const int* in, int n) {
  for (int i = 0; i < n; i++) {
    int x = in[i];
    switch (x & 7) {
      case 0: out[i] = x * 3 + 1; break;
      case 1: out[i] = x ^ 0x55; break;
      case 2: out[i] = (x << 3) - 7; break;
      case 3: out[i] = x / 5 + 11; break;
      case 4: out[i] = x % 7 - 2; break;
      case 5: out[i] = ~x + 100; break;
      case 6: out[i] = x * x - 9; break;
      default: out[i] = (x >> 2) | 0x40; break;
    }
  }
}
"""


def _classify(x: int) -> int:
    c_div = int(x / 5)  # C truncates; x >= 0 here
    return [x * 3 + 1, x ^ 0x55, (x << 3) - 7, c_div + 11, x % 7 - 2, ~x + 100, x * x - 9, (x >> 2) | 0x40][x & 7]


def test_switch_jump_table(cc):
    x = np.arange(N, dtype=np.int32) * 13 + 5
    out = np.zeros(N, np.int32)
    load(cc, SWITCH, "classify")(*addr(out, x), vals=(N,))
    assert out.tolist() == [_classify(int(v)) for v in x]


def test_initialized_data_is_mutable_and_persists(cc):
    src = "static int state[4] = {10, 20, 30, 40};\n" \
          "void bump(int* out, int n) { for (int i = 0; i < n; i++) { state[i & 3] += i; out[i] = state[i & 3]; } }\n"
    prg = load(cc, src, "bump")
    first, second = np.zeros(8, np.int32), np.zeros(8, np.int32)
    prg(*addr(first), vals=(8,))
    prg(*addr(second), vals=(8,))
    state, expect = [10, 20, 30, 40], []
    for _ in range(2):
        for i in range(8):
            state[i & 3] += i
            expect.append(state[i & 3])
    assert first.tolist() + second.tolist() == expect


def test_zeroed_bss(cc):
    src = "static float scratch[1024];\n" \
          "void accumulate(float* out, const float* in, int n) {\n" \
          "  for (int i = 0; i < n; i++) { scratch[i] += in[i]; out[i] = scratch[i] * 2.0f; }\n}\n"
    x = np.arange(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    load(cc, src, "accumulate")(*addr(out, x), vals=(N,))
    np.testing.assert_array_equal(out, 2 * x)  # .bss started as zeros


def test_compiler_emitted_memset_and_memcpy(cc):
    src = """void fill(float* out, const float* in, int n, int k) {
  __builtin_memset(out, 0, (unsigned long)n * 4);       /* calls memset (variable size) */
  __builtin_memcpy(out + n, in, (unsigned long)k * 4);  /* calls memcpy */
  for (int i = 0; i < n; i++) out[i] += in[i] * 2.0f;
  for (int i = n + k; i < 3 * n; i++) out[i] = 0.0f;     /* a loop GCC turns into a memset call */
}
"""
    obj = cc.compile(src)
    assert {"memcpy", "memset"} <= undefined_symbols(obj)
    x = np.arange(N, dtype=np.float32) + 1
    out = np.full(3 * N, 9, np.float32)
    CPUProgram(None, "fill", obj)(*addr(out, x), vals=(N, N // 2))
    np.testing.assert_array_equal(out, np.concatenate([2 * x, x[:N // 2], np.zeros(3 * N // 2, np.float32)]))


def test_double_constants(cc):
    src = "void poly(double* out, const double* x, int n) {\n" \
          "  for (int i = 0; i < n; i++) out[i] = 0.1234567891234 * x[i] * x[i] - 2.718281828459045 * x[i] + " \
          "3.141592653589793;\n}\n"
    x = np.linspace(-3, 3, N)
    out = np.zeros(N)
    load(cc, src, "poly")(*addr(out, x), vals=(N,))
    np.testing.assert_allclose(out, 0.1234567891234 * x * x - 2.718281828459045 * x + 3.141592653589793, rtol=1e-15)


def test_more_arguments_than_registers(cc):
    """Ten pointers and three ints: x86-64 passes six integer arguments in registers, AArch64 eight; the rest go on
    the stack."""
    params = ", ".join([f"const float* i{k}" for k in range(9)] + ["int n", "int scale", "int offset"])
    body = " + ".join(f"i{k}[j] * {k + 1}.0f" for k in range(9))
    src = f"void many(float* out, {params}) {{\n  for (int j = 0; j < n; j++) out[j] = ({body}) * scale + offset;\n}}\n"
    ins = [np.full(N, k + 0.5, np.float32) for k in range(9)]
    out = np.zeros(N, np.float32)
    load(cc, src, "many")(*addr(out, *ins), vals=(N, 3, -7))
    expected = sum((k + 1) * (k + 0.5) for k in range(9)) * 3 - 7
    np.testing.assert_allclose(out, np.full(N, expected, np.float32), rtol=1e-6)


def test_missing_kernel_lists_the_symbols_the_object_defines(cc):
    obj = cc.compile("void alpha(float* p) { p[0] = 1.0f; }\nint beta(int x) { return x; }\n")
    with pytest.raises(CompileError, match=r"does not define kernel 'gamma'; it defines \['alpha', 'beta'\]"):
        CPUProgram(None, "gamma", obj)


def test_foreign_kernel_through_the_device_on_buffers(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    dev = CPUDevice()
    src = "void scale(float* restrict out, const float* restrict in, int n, int k) {\n" \
          "  for (int i = 0; i < n; i++) out[i] = in[i] * (float)k;\n}\n"
    x = np.arange(N, dtype=np.float32)
    a, out = Buffer.from_numpy("CPU", x), Buffer.from_numpy("CPU", np.zeros(N, np.float32))
    prg = dev.runtime("scale", dev.compiler.compile_cached(src))
    prg(out.opaque, a.opaque, vals=(N, 5))
    np.testing.assert_array_equal(out.numpy(), x * 5)
    replay = prg.bind(out.opaque, out.opaque, vals=(N, 2))  # converted once, replayed: out *= 2 each time
    replay()
    replay()
    np.testing.assert_array_equal(out.numpy(), x * 20)
