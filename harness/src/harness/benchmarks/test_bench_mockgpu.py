"""Kernel throughput of mock_gpu's PTX interpreter, with numpy doing the same arithmetic as its limit and numba's CUDA
simulator on the same kernels as a peer, for scale.

Two kernels, run through each emulator: vector add over float32 and a shared-memory tree reduction (block 256,
one partial sum per block); mock_gpu also runs a shared-memory tiled float32 matrix multiply (fused multiply-adds,
16 x 16 tiles) beside numpy's matmul, the arithmetic that NVIDIA's globalToShmemAsyncCopy sample is made of.
Each benchmark records ``extra_info["threads_per_s"]`` (emulated GPU threads per
wall-clock second; ``unit`` "threads/s") and the problem size. mock_gpu's kernels are CUDA C compiled to PTX by
NVRTC and launched through ``mock_gpu.driver`` exactly as a CUDA backend would; numba's simulator runs one Python
thread per GPU thread, so its sizes are small (about 7e3 threads/s for vector add, 6e2 for the reduction).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from harness.bench_schema import PER_CALL_KEY

BLOCK = 256
MOCK_N = 1 << 20
NUMBA_VADD_N = 4096
NUMBA_REDUCE_N = 512
ROUNDS = 10  # as harness.benchmarks.measure.ROUNDS: the rank test needs several rounds a side to be decisive
PEER = pytest.mark.bench_role("peer", peer="numba CUDA simulator (numba.cuda with NUMBA_ENABLE_CUDASIM=1)")
# numba's simulator runs a kernel with the module-global name bound to numba.cuda swapped for its fake per-thread
# module, so the kernels below must reach numba.cuda through this global (set by the numba_cuda fixture).
cuda: Any = None

CUDA_SRC = r'''
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
extern "C" __global__ void reduce(const float* in, float* out, int n) {
    __shared__ float s[256];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
    if (t == 0) out[blockIdx.x] = s[0]; }
extern "C" __global__ void matmul(const float* a, const float* b, float* c, int n) {
    __shared__ float as[16][16], bs[16][16];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < n; k0 += 16) {
        as[ty][tx] = a[row * n + k0 + tx]; bs[ty][tx] = b[(k0 + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc = fmaf(as[ty][k], bs[k][tx], acc);
        __syncthreads();
    }
    c[row * n + col] = acc; }
'''


def _record(benchmark: Any, emulator: str, kernel: str, threads: int) -> None:
    """Emulated threads per second from the median round. mock_gpu and numba entries of a kernel share one group so the
    report lists their figures side by side (their sizes differ, so compare threads/s, not times). Nothing is recorded
    when timing is disabled (``--benchmark-disable``)."""
    if benchmark.disabled:
        return
    rate = threads / benchmark.stats.stats.median
    benchmark.extra_info.update({"emulator": emulator, "kernel": kernel, "threads": threads, "block": BLOCK,
                                 "threads_per_s": rate, "value": rate, "unit": "threads/s", "higher_is_better": True,
                                 # the report recomputes the figure from any rounds (an A/B side's, its judged change)
                                 PER_CALL_KEY: {"threads/s": threads}})


def _ptx() -> bytes:
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) is needed to compile the kernels")
    opts = [b"--gpu-architecture=compute_90", b"-default-device"]
    _, prog = nvrtc.nvrtcCreateProgram(CUDA_SRC.encode(), b"bench.cu", 0, [], [])
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        pytest.skip(f"NVRTC cannot compile here: {err!r}")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = bytearray(size)  # NVRTC writes into it: never an (interned) bytes object
    nvrtc.nvrtcGetPTX(prog, ptx)
    return bytes(ptx)


def _ok(result: tuple) -> Any:
    # imported by name: run from the repository root, mypy takes the mock_gpu/ project folder for a namespace package
    mock_gpu = importlib.import_module("mock_gpu")
    err, *out = result
    if int(err) != 0:
        raise RuntimeError(f"mock_gpu call failed with {err!r}: {mock_gpu.last_error_report()}")
    return out[0] if len(out) == 1 else None


@pytest.fixture
def mock_driver() -> Iterator[tuple[Any, Any]]:
    """(driver module, loaded module) on a fresh default mock_gpu system."""
    mock_gpu = pytest.importorskip("mock_gpu", reason="mock_gpu is not installed")
    cu = mock_gpu.driver
    mock_gpu.reset()
    _ok(cu.cuInit(0))
    _ok(cu.cuCtxSetCurrent(_ok(cu.cuDevicePrimaryCtxRetain(0))))
    yield cu, _ok(cu.cuModuleLoadData(_ptx()))
    mock_gpu.reset()


def _device_array(cu: Any, host: np.ndarray) -> Any:
    ptr = _ok(cu.cuMemAlloc(host.nbytes))
    _ok(cu.cuMemcpyHtoD(ptr, host, host.nbytes))
    return ptr


def _download(cu: Any, ptr: Any, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    _ok(cu.cuMemcpyDtoH(out, ptr, out.nbytes))
    return out


def _mock_launcher(cu: Any, module: Any, name: str, n: int, ptrs: tuple, grid: int) -> Callable[[], None]:
    fn = _ok(cu.cuModuleGetFunction(module, name.encode()))
    params = ((*ptrs, n), (*([None] * len(ptrs)), ctypes.c_int))

    def run() -> None:
        _ok(cu.cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, None, params, 0))
        _ok(cu.cuCtxSynchronize())

    return run


@pytest.mark.benchmark(group="emulator-vector_add")
def test_mockgpu_vector_add(benchmark: Any, mock_driver: tuple[Any, Any]) -> None:
    cu, module = mock_driver
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(MOCK_N, np.float32), rng.standard_normal(MOCK_N, np.float32)
    ptrs = (_device_array(cu, a), _device_array(cu, b), _device_array(cu, np.zeros(MOCK_N, np.float32)))
    benchmark.pedantic(_mock_launcher(cu, module, "vadd", MOCK_N, ptrs, MOCK_N // BLOCK), rounds=ROUNDS, iterations=1)
    np.testing.assert_array_equal(_download(cu, ptrs[2], MOCK_N), a + b)
    _record(benchmark, "mock_gpu", "vector_add", MOCK_N)


@pytest.mark.benchmark(group="emulator-shared_reduction")
def test_mockgpu_shared_reduction(benchmark: Any, mock_driver: tuple[Any, Any]) -> None:
    cu, module = mock_driver
    data = np.random.default_rng(1).integers(-100, 100, MOCK_N).astype(np.float32)  # exact partial sums
    blocks = MOCK_N // BLOCK
    ptrs = (_device_array(cu, data), _device_array(cu, np.zeros(blocks, np.float32)))
    benchmark.pedantic(_mock_launcher(cu, module, "reduce", MOCK_N, ptrs, blocks), rounds=ROUNDS, iterations=1)
    np.testing.assert_array_equal(_download(cu, ptrs[1], blocks), data.reshape(blocks, BLOCK).sum(axis=1))
    _record(benchmark, "mock_gpu", "shared_reduction", MOCK_N)


MATMUL_N = 256


def _matmul_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)  # small integers: every partial sum is exact, so the result equals numpy's
    return tuple(rng.integers(-4, 5, (MATMUL_N, MATMUL_N)).astype(np.float32) for _ in range(2))  # type: ignore[return-value]


@pytest.mark.benchmark(group="emulator-tiled_matmul")
def test_mockgpu_tiled_matmul(benchmark: Any, mock_driver: tuple[Any, Any]) -> None:
    cu, module = mock_driver
    a, b = _matmul_inputs()
    ptrs = (_device_array(cu, a), _device_array(cu, b), _device_array(cu, np.zeros(a.size, np.float32)))
    fn = _ok(cu.cuModuleGetFunction(module, b"matmul"))
    params = ((*ptrs, MATMUL_N), (None, None, None, ctypes.c_int))
    tiles = MATMUL_N // 16

    def run() -> None:
        _ok(cu.cuLaunchKernel(fn, tiles, tiles, 1, BLOCK, 1, 1, 0, None, params, 0))
        _ok(cu.cuCtxSynchronize())

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    np.testing.assert_array_equal(_download(cu, ptrs[2], a.size).reshape(a.shape), a @ b)
    _record(benchmark, "mock_gpu", "tiled_matmul", a.size)


@pytest.mark.benchmark(group="emulator-tiled_matmul")
@pytest.mark.bench_role("limit", reference="numpy matmul of the same float32 matrices (the arithmetic without emulation)")
def test_emulator_limit_numpy_tiled_matmul(benchmark: Any) -> None:
    a, b = _matmul_inputs()
    out = benchmark(np.matmul, a, b)
    np.testing.assert_array_equal(out, a @ b)
    _record(benchmark, "numpy", "tiled_matmul", a.size)


@pytest.mark.benchmark(group="emulator-vector_add")
@pytest.mark.bench_role("limit", reference="numpy.add of the same float32 vectors (the arithmetic without emulation)")
def test_emulator_limit_numpy_vector_add(benchmark: Any) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(MOCK_N, np.float32), rng.standard_normal(MOCK_N, np.float32)
    c = np.zeros_like(a)
    benchmark(np.add, a, b, out=c)
    np.testing.assert_array_equal(c, a + b)
    _record(benchmark, "numpy", "vector_add", MOCK_N)


@pytest.mark.benchmark(group="emulator-shared_reduction")
@pytest.mark.bench_role("limit", reference="numpy sum of each block of 256 float32 (the arithmetic without emulation)")
def test_emulator_limit_numpy_shared_reduction(benchmark: Any) -> None:
    data = np.random.default_rng(1).integers(-100, 100, MOCK_N).astype(np.float32)
    blocks = data.reshape(MOCK_N // BLOCK, BLOCK)
    out = benchmark(np.sum, blocks, axis=1)
    np.testing.assert_array_equal(out, data.reshape(-1, BLOCK).sum(axis=1))
    _record(benchmark, "numpy", "shared_reduction", MOCK_N)


@pytest.fixture(scope="module")
def numba_cuda() -> Any:
    """numba.cuda in simulator mode. NUMBA_ENABLE_CUDASIM is read by numba's config, so it is set (and the config
    reloaded) before numba.cuda is first imported; a process that already imported the real numba.cuda skips."""
    if "numba.cuda" in sys.modules and not sys.modules["numba.core.config"].ENABLE_CUDASIM:
        pytest.skip("numba.cuda was already imported without NUMBA_ENABLE_CUDASIM=1 in this process")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    config = pytest.importorskip("numba.core.config", reason="numba is not installed")
    if not config.ENABLE_CUDASIM:
        config.reload_config()
    cuda = pytest.importorskip("numba.cuda", reason="numba is not installed")
    if not cuda.jit.__module__.startswith("numba.cuda.simulator"):
        pytest.skip("numba.cuda is not running as the simulator")
    globals()["cuda"] = cuda
    return cuda


def _numba_kernels(numba_cuda: Any) -> tuple[Any, Any]:
    @numba_cuda.jit
    def vadd(a, b, c, n):  # type: ignore[no-untyped-def]
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if i < n:
            c[i] = a[i] + b[i]

    @numba_cuda.jit
    def reduce(inp, out, n):  # type: ignore[no-untyped-def]
        s = cuda.shared.array(256, np.float32)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + t
        s[t] = inp[i] if i < n else 0.0
        cuda.syncthreads()
        k = cuda.blockDim.x // 2
        while k > 0:
            if t < k:
                s[t] += s[t + k]
            cuda.syncthreads()
            k //= 2
        if t == 0:
            out[cuda.blockIdx.x] = s[0]

    return vadd, reduce


@pytest.mark.benchmark(group="emulator-vector_add")
@PEER
def test_numba_sim_vector_add(benchmark: Any, numba_cuda: Any) -> None:
    vadd, _ = _numba_kernels(numba_cuda)
    n = NUMBA_VADD_N
    a, b, c = np.arange(n, dtype=np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)
    benchmark.pedantic(lambda: vadd[n // BLOCK, BLOCK](a, b, c, n), rounds=ROUNDS, iterations=1)
    np.testing.assert_array_equal(c, a + b)
    _record(benchmark, "numba_cudasim", "vector_add", n)


@pytest.mark.benchmark(group="emulator-shared_reduction")
@PEER
def test_numba_sim_shared_reduction(benchmark: Any, numba_cuda: Any) -> None:
    _, reduce = _numba_kernels(numba_cuda)
    n = NUMBA_REDUCE_N
    data = np.random.default_rng(1).integers(-100, 100, n).astype(np.float32)
    out = np.zeros(n // BLOCK, np.float32)
    benchmark.pedantic(lambda: reduce[n // BLOCK, BLOCK](data, out, n), rounds=ROUNDS, iterations=1)
    np.testing.assert_array_equal(out, data.reshape(-1, BLOCK).sum(axis=1))
    _record(benchmark, "numba_cudasim", "shared_reduction", n)
