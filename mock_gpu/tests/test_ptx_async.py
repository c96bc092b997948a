"""Asynchronous copies into shared memory as libcu++ compiles them (PTX ISA 9.7.9.25 cp.async and cp.async.bulk,
9.7.13.15 mbarrier): ``cuda::memcpy_async`` with a ``cuda::pipeline`` and with a ``cuda::barrier`` (an mbarrier
with transaction counts), each block reversing its slice of the input through shared memory; references by numpy.
NVRTC needs the CUDA toolkit's libcu++ headers (CUDA_HOME or /usr/local/cuda*), else the tests skip."""

from __future__ import annotations

import os

import numpy as np
import pytest
from _driver_util import I32, PTR, check, cuda_include_dir, from_device, launch, to_device

from mock_gpu import driver as cu

SOURCE = r"""
#include <cuda/barrier>
#include <cuda/pipeline>
extern "C" __global__ void pipe_copy(float *out, const float *in) {
    __shared__ alignas(16) float s[256];
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    const auto shape4 = cuda::aligned_size_t<alignof(float4)>(sizeof(float4));
    int t = threadIdx.x;
    pipe.producer_acquire();
    if (4 * t < 256) cuda::memcpy_async(&s[4 * t], &in[blockIdx.x * 256 + 4 * t], shape4, pipe);
    pipe.producer_commit();
    pipe.consumer_wait();
    __syncthreads();
    out[blockIdx.x * 256 + t] = s[255 - t] * 2.0f;
    pipe.consumer_release();
}
extern "C" __global__ void barrier_copy(float *out, const float *in, int rounds) {
#pragma diag_suppress static_var_with_dynamic_init
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    __shared__ alignas(16) float s[256];
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    int t = threadIdx.x;
    float acc = 0.0f;
    for (int r = 0; r < rounds; r++) {
        if (4 * t < 256) cuda::memcpy_async(reinterpret_cast<float4*>(&s[4 * t]),
            reinterpret_cast<const float4*>(&in[blockIdx.x * 256 + 4 * t]), sizeof(float4), bar);
        bar.arrive_and_wait();
        acc += s[255 - t];
        bar.arrive_and_wait();
    }
    out[blockIdx.x * 256 + t] = acc;
}
"""


def _compile() -> bytes:
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) is not installed")
    inc = cuda_include_dir()
    if inc is None or not os.path.isdir(os.path.join(inc, "cccl", "cuda")) and \
            not os.path.isdir(os.path.join(inc, "cuda")):
        pytest.skip("libcu++ headers not found (set CUDA_HOME to a CUDA toolkit)")
    opts = [b"--gpu-architecture=compute_90", b"--std=c++17", b"-default-device", f"-I{inc}".encode(),
            f"-I{os.path.join(inc, 'cccl')}".encode()]
    err, prog = nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"async.cu", 0, [], [])
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        pytest.skip(f"NVRTC could not compile the libcu++ kernels: {err!r}")
    size = nvrtc.nvrtcGetPTXSize(prog)[1]
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    return ptx


@pytest.fixture(scope="module")
def ptx() -> bytes:
    return _compile()


def test_pipeline_memcpy_async_lands_before_consumer_wait(ctx, ptx: bytes, rng: np.random.Generator) -> None:
    module = check(cu.cuModuleLoadData(ptx))
    fn = check(cu.cuModuleGetFunction(module, b"pipe_copy"))
    x = rng.random(3 * 256, dtype=np.float32)
    src, out = to_device(x), check(cu.cuMemAlloc(x.nbytes))
    check(launch(fn, (3, 1, 1), (256, 1, 1), [(out, PTR), (src, PTR)]))
    expected = x.reshape(3, 256)[:, ::-1].ravel() * 2
    np.testing.assert_array_equal(from_device(out, x.size, np.float32), expected)


def test_barrier_with_transaction_count_completes_each_phase(ctx, ptx: bytes, rng: np.random.Generator) -> None:
    module = check(cu.cuModuleLoadData(ptx))
    fn = check(cu.cuModuleGetFunction(module, b"barrier_copy"))
    x = rng.random(2 * 256, dtype=np.float32)
    src, out = to_device(x), check(cu.cuMemAlloc(x.nbytes))
    check(launch(fn, (2, 1, 1), (256, 1, 1), [(out, PTR), (src, PTR), (3, I32)]))
    expected = x.reshape(2, 256)[:, ::-1].ravel() * np.float32(3)
    np.testing.assert_allclose(from_device(out, x.size, np.float32), expected, rtol=1e-6)
