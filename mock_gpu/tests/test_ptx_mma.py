"""Warp-level ``mma.sync.aligned.m16n8k{8,16}.row.col`` (PTX ISA 9.7.14.5.14) in inline asm, as tinygrad's CUDA
renderer emits it: each lane loads its fragments with the layouts of PTX ISA 9.7.14.5.8/9.7.14.5.9, and D = A*B + C
is checked against numpy on the same f16/bf16 values accumulated in float64."""

from __future__ import annotations

import numpy as np
import pytest
from _driver_util import report
from _ptx_util import HEADER, Device, compile_cuda, needs_nvrtc

from mock_gpu import driver as cu
from mock_gpu import ptx

M, N = 16, 8
WARPS = 4  # two blocks of two warps, each warp with its own A, B, C

# lane-side fragment loads written from the PTX ISA's (row, col) formulas for element i of each fragment
KERNEL = r"""
__device__ unsigned pk(unsigned short lo, unsigned short hi) {{ return lo | ((unsigned)hi << 16); }}
extern "C" __global__ void {name}(const unsigned short* A, const unsigned short* B, const {ct}* C, {ct}* D) {{
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane % 4;
  A += warp * 16 * {K}; B += warp * {K} * 8; C += warp * 128; D += warp * 128;
  unsigned a[{K} / 4], b[{K} / 8], c[{nc}];
  for (int i = 0; i < {K} / 2; i += 2) {{
    int row = {arow}, col = {acol};
    a[i / 2] = pk(A[row * {K} + col], A[row * {K} + col + 1]);
  }}
  for (int i = 0; i < {K} / 4; i += 2) {{
    int row = 2 * t + (i & 1) + 8 * (i >> 1);
    b[i / 2] = pk(B[row * 8 + g], B[(row + 1) * 8 + g]);
  }}
  {ct}* cv = ({ct}*)c;
  for (int i = 0; i < 4; i++) cv[i] = C[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  asm("mma.sync.aligned.m16n8k{K}.row.col.{dt}.{it}.{it}.{dt} {{{cregs}}}, {{{aregs}}}, {{{bregs}}}, {{{cregs}}};"
      : {couts} : {ains}, {bins});
  for (int i = 0; i < 4; i++) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = cv[i];
}}
"""
A_INDEX = {16: ("g + 8 * ((i >> 1) & 1)", "2 * t + (i & 1) + 8 * (i >> 2)"), 8: ("g + 8 * (i >> 1)", "2 * t + (i & 1)")}


def _source(k: int, it: str, dt: str) -> str:
    nc = 4 if dt == "f32" else 2
    na, nb = k // 4, k // 8
    regs = [f"%{j}" for j in range(nc + na + nb)]
    return KERNEL.format(  # f16 C/D travel as raw 16-bit patterns
        name="mma", K=k, ct="float" if dt == "f32" else "unsigned short", nc=nc, dt=dt, it=it,
        arow=A_INDEX[k][0], acol=A_INDEX[k][1], cregs=", ".join(regs[:nc]), aregs=", ".join(regs[nc:nc + na]),
        bregs=", ".join(regs[nc + na:]), couts=", ".join(f'"+r"(c[{j}])' for j in range(nc)),
        ains=", ".join(f'"r"(a[{j}])' for j in range(na)), bins=", ".join(f'"r"(b[{j}])' for j in range(nb)))


def _inputs(rng: np.random.Generator, shape: tuple[int, ...], it: str) -> tuple[np.ndarray, np.ndarray]:
    """(raw 16-bit patterns, their exact float64 values) of random f16 or bf16 numbers."""
    x = rng.standard_normal(shape).astype(np.float32)
    if it == "f16":
        h = x.astype(np.float16)
        return h.view(np.uint16), h.astype(np.float64)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation gives an exactly representable bf16
    return bits, (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


FORMS = [(16, "f16", "f32"), (16, "bf16", "f32"), (16, "f16", "f16"), (8, "f16", "f32"), (8, "f16", "f16")]


@needs_nvrtc
@pytest.mark.parametrize(("k", "it", "dt"), FORMS, ids=[f"m16n8k{k}.{d}.{i}" for k, i, d in FORMS])
def test_mma_matches_numpy(rng: np.random.Generator, k: int, it: str, dt: str) -> None:
    dev = Device(compile_cuda(_source(k, it, dt), "compute_80"))
    a_bits, a = _inputs(rng, (WARPS, M, k), it)
    b_bits, b = _inputs(rng, (WARPS, k, N), it)
    ct = np.float32 if dt == "f32" else np.float16
    c = rng.standard_normal((WARPS, M, N)).astype(ct)
    out = dev.buf(np.zeros((WARPS, M, N), ct))
    dev.run("mma", (2, 1, 1), (64, 1, 1), dev.buf(a_bits), dev.buf(b_bits), dev.buf(c), out)
    want = (a @ b + c.astype(np.float64)).astype(ct)
    got = dev.get(out, WARPS * M * N, ct).reshape(WARPS, M, N)
    # float32 accumulation in another order moves a result by a few ulps; f16 results by at most one
    tol = 1e-6 if dt == "f32" else 1e-3
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


MMA_PTX = HEADER + """
.visible .entry k(.param .u64 out) {{
  .reg .b32 %r<16>;
  .reg .f32 %f<8>;
  mov.b32 %r0, 0x3c003c00;
  mov.f32 %f0, 0f00000000;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  {mma}
  ret;
}}
"""
GOOD = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r0}, {%r0}, {%f0, %f1, %f2, %f3};"


@pytest.mark.parametrize(("form", "why"), [
    (GOOD.replace("m16n8k8", "m8n8k4"), "shape .m8n8k4 is not emulated"),
    (GOOD.replace(".row.col", ".col.row"), ".row.col layouts only"),
    (GOOD.replace(".f32.f16.f16.f32", ".f16.bf16.bf16.f16"), "types .f16.bf16.bf16.f16 are not emulated"),
    (GOOD.replace(".f32.f16.f16.f32", ".f32.tf32.tf32.f32"), "not emulated"),
    (GOOD.replace("{%r0}, {%f0", "{%r0, %r0}, {%f0"), "operand b must be a brace list of 1 registers"),
])
def test_unsupported_mma_forms_are_refused_at_load(form: str, why: str) -> None:
    with pytest.raises(ptx.PTXError) as e:
        ptx.load_module(MMA_PTX.format(mma=form))
    assert why in str(e.value)


def test_unsupported_mma_is_invalid_ptx_through_the_driver(ctx) -> None:
    image = MMA_PTX.format(mma=GOOD.replace("m16n8k8", "m16n8k32")).encode()
    assert cu.cuModuleLoadData(image) == (cu.CUresult.CUDA_ERROR_INVALID_PTX, None)
    assert "m16n8k32 is not emulated" in report()


def test_mma_in_a_partial_warp_is_an_execution_error() -> None:
    dev = Device(MMA_PTX.format(mma=GOOD))
    with pytest.raises(ptx.ExecutionError, match="all 32 threads of the warp"):
        dev.run("k", (1, 1, 1), (48, 1, 1), 0)


def test_mma_of_ones_by_ones_is_k() -> None:
    store = GOOD + "\n  ld.param.u64 %rd0, [out];\n  mov.u32 %r1, %tid.x;\n  mul.wide.u32 %rd1, %r1, 4;\n" \
        "  add.u64 %rd0, %rd0, %rd1;\n  st.global.f32 [%rd0], %f0;"
    dev = Device(MMA_PTX.replace(".reg .f32 %f<8>;", ".reg .f32 %f<8>;\n  .reg .b64 %rd<2>;").format(mma=store))
    out = dev.buf(np.zeros(64, np.float32))
    dev.run("k", (1, 1, 1), (64, 1, 1), out)
    np.testing.assert_array_equal(dev.get(out, 64, np.float32), 8.0)  # each D entry sums K = 8 products 1*1
