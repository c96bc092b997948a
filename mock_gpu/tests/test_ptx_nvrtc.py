"""CUDA C kernels compiled by NVRTC (and nvcc when installed), run on the interpreter, checked against numpy."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from _ptx_util import Device, compile_cuda, needs_nvrtc

pytestmark = needs_nvrtc

SRC = r"""
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void reduce(const float* a, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * 256 + t;
    s[t] = i < n ? a[i] : 0.f;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
    if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void collatz(const unsigned* x, unsigned* steps, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = x[i], k = 0;
    while (v != 1) { v = (v & 1) ? 3 * v + 1 : v / 2; ++k; }
    steps[i] = k;
}
extern "C" __global__ void sines(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sin(x[i]) + cos(x[i] * 0.5);
}
extern "C" __global__ void hist(const int* x, unsigned* h, int n) {
    __shared__ unsigned s[16];
    if (threadIdx.x < 16) s[threadIdx.x] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(&s[x[i] & 15], 1u);
    __syncthreads();
    if (threadIdx.x < 16) atomicAdd(&h[threadIdx.x], s[threadIdx.x]);
}
extern "C" __global__ void warpsum(const float* x, float* o, int* counts) {
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffff, v, d);
    o[blockIdx.x * blockDim.x + threadIdx.x] = v;
    int c = __syncthreads_count(threadIdx.x & 1);
    int all = __syncthreads_and(threadIdx.x < 1000);
    counts[blockIdx.x * blockDim.x + threadIdx.x] = c + 1000 * all;
}
struct Params { float scale[4]; int offset; };
extern "C" __global__ void bystruct(Params p, float* o) {
    float tmp[16];
    for (int i = 0; i < 16; i++) tmp[i] = o[i] * p.scale[i & 3];
    o[threadIdx.x] = tmp[(threadIdx.x + p.offset) & 15];
}
extern "C" __global__ void dynshared(float* o) {
    extern __shared__ float sd[];
    sd[threadIdx.x] = o[threadIdx.x];
    __syncthreads();
    o[threadIdx.x] = sd[blockDim.x - 1 - threadIdx.x];
}
"""


@pytest.fixture(scope="module")
def dev() -> Device:
    return Device(compile_cuda(SRC))


def test_vector_add_with_tail(dev):
    rng = np.random.default_rng(1)
    n = 1000
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    pa, pb, pc = dev.buf(a), dev.buf(b), dev.space.alloc(n * 4)
    dev.run("vadd", (4, 1, 1), (256, 1, 1), pa, pb, pc, n)
    np.testing.assert_array_equal(dev.get(pc, n, np.float32), a + b)


def test_shared_tree_reduction(dev):
    a = np.random.default_rng(2).random(256 * 8 - 5, dtype=np.float32)
    pa, po = dev.buf(a), dev.space.alloc(8 * 4)
    dev.run("reduce", (8, 1, 1), (256, 1, 1), pa, po, a.size)
    ref = np.add.reduce(np.r_[a, np.zeros(5, np.float32)].reshape(8, 256), axis=1, dtype=np.float64)
    np.testing.assert_allclose(dev.get(po, 8, np.float32), ref, rtol=1e-6)


def test_divergent_while_loop(dev):
    x = np.arange(1, 301, dtype=np.uint32)
    px, ps = dev.buf(x), dev.space.alloc(x.nbytes)
    dev.run("collatz", (3, 1, 1), (128, 1, 1), px, ps, x.size)

    def steps(v: int) -> int:
        k = 0
        while v != 1:
            v, k = (3 * v + 1 if v & 1 else v // 2), k + 1
        return k
    assert dev.get(ps, x.size, np.uint32).tolist() == [steps(int(v)) for v in x]


def test_libdevice_trig_including_slow_path_call(dev):
    x = np.r_[np.linspace(-20, 20, 61), 1e9, -7.5e15, 3e300]
    px, py = dev.buf(x), dev.space.alloc(x.nbytes)
    dev.run("sines", (1, 1, 1), (64, 1, 1), px, py, x.size)
    np.testing.assert_allclose(dev.get(py, x.size, np.float64), np.sin(x) + np.cos(x * 0.5), rtol=0, atol=1e-15)


def test_shared_and_global_atomics_histogram(dev):
    x = np.random.default_rng(3).integers(0, 1 << 20, 5000).astype(np.int32)
    px, ph = dev.buf(x), dev.buf(np.zeros(16, np.uint32))
    dev.run("hist", (4, 1, 1), (128, 1, 1), px, ph, x.size)
    assert dev.get(ph, 16, np.uint32).tolist() == np.bincount(x & 15, minlength=16).tolist()


def test_warp_shuffle_reduction_and_barrier_reductions(dev):
    x = np.random.default_rng(4).integers(0, 100, 128).astype(np.float32)
    px, po, pc = dev.buf(x), dev.space.alloc(512), dev.space.alloc(512)
    dev.run("warpsum", (2, 1, 1), (64, 1, 1), px, po, pc)
    assert dev.get(po, 128, np.float32).tolist() == np.repeat(x.reshape(4, 32).sum(1), 32).tolist()
    assert set(dev.get(pc, 128, np.int32).tolist()) == {32 + 1000}


def test_struct_parameter_and_local_array(dev):
    o = np.arange(16, dtype=np.float32)
    po = dev.buf(o)
    params = np.array([1, 2, 3, 4], np.float32).tobytes() + np.int32(5).tobytes()
    dev.run("bystruct", (1, 1, 1), (16, 1, 1), params, po)
    tmp = o * np.tile([1, 2, 3, 4], 4)
    assert dev.get(po, 16, np.float32).tolist() == tmp[(np.arange(16) + 5) & 15].tolist()


def test_dynamic_shared_memory(dev):
    o = np.arange(48, dtype=np.float32)
    po = dev.buf(o)
    dev.run("dynshared", (1, 1, 1), (48, 1, 1), po, shared=48 * 4)
    assert dev.get(po, 48, np.float32).tolist() == o[::-1].tolist()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_ptx_with_stack_depot(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(r"""
extern "C" __global__ void loc(float* o, int k) {
    float a[16];
    for (int i = 0; i < 16; i++) a[i] = o[i] * i;
    o[threadIdx.x] = a[(threadIdx.x + k) & 15];
}""")
    subprocess.run(["nvcc", "-ptx", "-arch=sm_80", str(cu), "-o", str(tmp_path / "k.ptx")], check=True, timeout=300)
    dev = Device((tmp_path / "k.ptx").read_text())
    o = np.arange(16, dtype=np.float32) + 1
    po = dev.buf(o)
    dev.run("loc", (1, 1, 1), (16, 1, 1), po, 3)
    a = o * np.arange(16)
    assert dev.get(po, 16, np.float32).tolist() == a[(np.arange(16) + 3) & 15].tolist()


def test_match_any_and_warp_reduce():
    dev = Device(compile_cuda(r"""
extern "C" __global__ void m(unsigned* o) {
    unsigned t = threadIdx.x;
    o[t] = __match_any_sync(0xffffffff, t / 4);
    o[64 + t] = __reduce_add_sync(0xffffffff, t);
    o[128 + t] = __reduce_max_sync(0xffffffff, t ^ 5);
}"""))
    po = dev.space.alloc(192 * 4)
    dev.run("m", (1, 1, 1), (64, 1, 1), po)
    got = dev.get(po, 192, np.uint32)
    t = np.arange(64)
    assert got[:64].tolist() == (0xF << (t % 32 // 4 * 4)).tolist()
    assert got[64:128].tolist() == np.repeat(t.reshape(2, 32).sum(1), 32).tolist()
    assert got[128:].tolist() == np.repeat((t ^ 5).reshape(2, 32).max(1), 32).tolist()
