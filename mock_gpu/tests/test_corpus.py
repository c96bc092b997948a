"""A corpus of ordinary CUDA C kernels, compiled with NVRTC, run through mock_gpu.driver and matched against numpy.

Bit-exact comparisons where the arithmetic is exact (integers, small-integer floats, single correctly rounded
operations); tight tolerances for transcendental functions (CUDA C++ Programming Guide, "Mathematical Functions":
sinf/expf/logf within 1-2 ulp, double sin/exp within 1-2 ulp).
"""

from __future__ import annotations

import ctypes

import numpy as np
from _driver_util import F32, I32, PTR, check, from_device, launch, load, to_device

from mock_gpu import driver as cu


def test_vector_add(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }'''
    _, (fn,) = load(src, "vadd")
    n = 1000
    a, b = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    da, db, dc = to_device(a), to_device(b), to_device(np.zeros(n, np.float32))
    check(launch(fn, (8, 1, 1), (128, 1, 1), [(da, PTR), (db, PTR), (dc, PTR), (n, I32)]))
    np.testing.assert_array_equal(from_device(dc, n, np.float32), a + b)


def test_saxpy_grid_stride(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = a * x[i] + y[i]; }'''
    _, (fn,) = load(src, "saxpy")
    n = 3000
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    dx, dy = to_device(x), to_device(y)
    check(launch(fn, (4, 1, 1), (128, 1, 1), [(n, I32), (1.5, F32), (dx, PTR), (dy, PTR)]))
    fma = (np.float64(1.5) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)  # nvcc contracts to fma
    np.testing.assert_allclose(from_device(dy, n, np.float32), fma, rtol=1e-7, atol=1e-7)


def test_shared_memory_tree_reduction(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void reduce(const float* in, float* out, int n) {
        __shared__ float s[256];
        int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
        s[t] = i < n ? in[i] : 0.0f;
        __syncthreads();
        for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
        if (t == 0) out[blockIdx.x] = s[0]; }'''
    _, (fn,) = load(src, "reduce")
    n = 1000
    data = rng.integers(-100, 100, n).astype(np.float32)  # small integers: every partial sum is exact
    din, dout = to_device(data), to_device(np.zeros(4, np.float32))
    check(launch(fn, (4, 1, 1), (256, 1, 1), [(din, PTR), (dout, PTR), (n, I32)]))
    expected = np.add.reduceat(np.concatenate([data, np.zeros(24, np.float32)]), [0, 256, 512, 768])
    np.testing.assert_array_equal(from_device(dout, 4, np.float32), expected)


def test_warp_shuffle_reduction(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void wsum(const int* in, int* out) {
        int v = in[blockIdx.x * blockDim.x + threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v; }'''
    _, (fn,) = load(src, "wsum")
    data = rng.integers(-1000, 1000, 256).astype(np.int32)
    din, dout = to_device(data), to_device(np.zeros(8, np.int32))
    check(launch(fn, (2, 1, 1), (128, 1, 1), [(din, PTR), (dout, PTR)]))
    np.testing.assert_array_equal(from_device(dout, 8, np.int32), data.reshape(8, 32).sum(axis=1))


def test_tiled_matmul_with_edge_guards(ctx, rng: np.random.Generator) -> None:
    src = r'''#define T 16
    extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
        __shared__ float As[T][T], Bs[T][T];
        int r = blockIdx.y * T + threadIdx.y, c = blockIdx.x * T + threadIdx.x; float acc = 0.0f;
        for (int k0 = 0; k0 < K; k0 += T) {
            As[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? A[r * K + k0 + threadIdx.x] : 0.0f;
            Bs[threadIdx.y][threadIdx.x] = (c < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + c] : 0.0f;
            __syncthreads();
            for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
            __syncthreads();
        }
        if (r < M && c < N) C[r * N + c] = acc; }'''
    _, (fn,) = load(src, "matmul")
    M, N, K = 21, 19, 35
    a = rng.integers(-4, 5, (M, K)).astype(np.float32)
    b = rng.integers(-4, 5, (K, N)).astype(np.float32)
    da, db, dc = to_device(a), to_device(b), to_device(np.full((M, N), np.nan, np.float32))
    check(launch(fn, (2, 2, 1), (16, 16, 1), [(da, PTR), (db, PTR), (dc, PTR), (M, I32), (N, I32), (K, I32)]))
    np.testing.assert_array_equal(from_device(dc, (M, N), np.float32), a @ b)


def test_padded_tile_transpose(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
        __shared__ float tile[32][33];
        int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
        for (int j = 0; j < 32; j += 8) if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
        __syncthreads();
        x = blockIdx.y * 32 + threadIdx.x; y = blockIdx.x * 32 + threadIdx.y;
        for (int j = 0; j < 32; j += 8)
            if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j]; }'''
    _, (fn,) = load(src, "transpose")
    rows, cols = 40, 70
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    din, dout = to_device(a), to_device(np.zeros((cols, rows), np.float32))
    check(launch(fn, (3, 2, 1), (32, 8, 1), [(din, PTR), (dout, PTR), (rows, I32), (cols, I32)]))
    np.testing.assert_array_equal(from_device(dout, (cols, rows), np.float32), a.T)


def test_histogram_shared_and_global_atomics(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void hist(const unsigned char* data, unsigned int* bins, int n) {
        __shared__ unsigned int local[256];
        local[threadIdx.x] = 0; __syncthreads();
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) atomicAdd(&local[data[i]], 1u);
        __syncthreads();
        atomicAdd(&bins[threadIdx.x], local[threadIdx.x]); }'''
    _, (fn,) = load(src, "hist")
    n = 4000
    data = rng.integers(0, 256, n).astype(np.uint8)
    ddata, dbins = to_device(data), to_device(np.zeros(256, np.uint32))
    check(launch(fn, (3, 1, 1), (256, 1, 1), [(ddata, PTR), (dbins, PTR), (n, I32)]))
    np.testing.assert_array_equal(from_device(dbins, 256, np.uint32), np.bincount(data, minlength=256))


def test_block_inclusive_scan(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void scan(const int* in, int* out) {
        __shared__ int s[256];
        int t = threadIdx.x, base = blockIdx.x * blockDim.x;
        s[t] = in[base + t]; __syncthreads();
        for (int off = 1; off < blockDim.x; off <<= 1) {
            int v = t >= off ? s[t - off] : 0; __syncthreads(); s[t] += v; __syncthreads(); }
        out[base + t] = s[t]; }'''
    _, (fn,) = load(src, "scan")
    data = rng.integers(-50, 50, 512).astype(np.int32)
    din, dout = to_device(data), to_device(np.zeros(512, np.int32))
    check(launch(fn, (2, 1, 1), (256, 1, 1), [(din, PTR), (dout, PTR)]))
    np.testing.assert_array_equal(from_device(dout, 512, np.int32), np.cumsum(data.reshape(2, 256), axis=1).ravel())


def test_data_dependent_loops_with_early_return(ctx) -> None:
    src = r'''extern "C" __global__ void collatz(int* out, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        if (i % 7 == 3) { out[i] = -1; return; }
        unsigned int x = i + 1; int steps = 0;
        while (x != 1 && steps < 500) { x = (x & 1) ? 3 * x + 1 : x >> 1; ++steps; }
        out[i] = steps; }'''
    _, (fn,) = load(src, "collatz")
    n = 300

    def steps(x: int) -> int:
        k = 0
        while x != 1 and k < 500:
            x, k = (3 * x + 1 if x & 1 else x >> 1), k + 1
        return k

    expected = np.array([-1 if i % 7 == 3 else steps(i + 1) for i in range(n)], np.int32)
    dout = to_device(np.full(n + 20, 12345, np.int32))
    check(launch(fn, (3, 1, 1), (128, 1, 1), [(dout, PTR), (n, I32)]))
    out = from_device(dout, n + 20, np.int32)
    np.testing.assert_array_equal(out[:n], expected)
    np.testing.assert_array_equal(out[n:], 12345)  # threads past n returned before storing


def test_64bit_integer_math_and_bit_ops(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void mix(const unsigned long long* in, unsigned long long* out, long long* sq, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
        unsigned long long x = in[i];
        unsigned long long h = x * 6364136223846793005ULL + 1442695040888963407ULL;
        h ^= (h >> 29) | (x << 35);
        out[4 * i] = h; out[4 * i + 1] = __popcll(x) + 64ULL * __clzll(x | 1ULL);
        out[4 * i + 2] = __umul64hi(x, 0x9E3779B97F4A7C15ULL);
        long long s = (long long)x; sq[i] = (s / -7) + (s % 1000003); out[4 * i + 3] = x >> (i & 63); }'''
    _, (fn,) = load(src, "mix")
    n = 200
    x = rng.integers(0, 2**64, n, dtype=np.uint64)
    din, dout, dsq = to_device(x), to_device(np.zeros(4 * n, np.uint64)), to_device(np.zeros(n, np.int64))
    check(launch(fn, (2, 1, 1), (128, 1, 1), [(din, PTR), (dout, PTR), (dsq, PTR), (n, I32)]))
    xs = [int(v) for v in x]
    m = (1 << 64) - 1
    exp = []
    for i, v in enumerate(xs):
        h = (v * 6364136223846793005 + 1442695040888963407) & m
        h ^= (h >> 29) | ((v << 35) & m)
        clz = 64 - (v | 1).bit_length()
        exp += [h, bin(v).count("1") + 64 * clz, (v * 0x9E3779B97F4A7C15) >> 64, v >> (i & 63)]
    np.testing.assert_array_equal(from_device(dout, 4 * n, np.uint64), np.array(exp, np.uint64))
    signed = [v - (1 << 64) if v >> 63 else v for v in xs]

    def cdiv(a: int, b: int) -> int:  # C truncating division
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    sq = [cdiv(s, -7) + (s - cdiv(s, 1000003) * 1000003) for s in signed]
    np.testing.assert_array_equal(from_device(dsq, n, np.int64), np.array(sq, np.int64))


def test_transcendentals_without_fast_math(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void tr(const float* x, float* f, const double* xd, double* d, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
        float v = x[i];
        f[3 * i] = sinf(v); f[3 * i + 1] = expf(v * 0.25f); f[3 * i + 2] = logf(fabsf(v) + 0.5f);
        d[2 * i] = sin(xd[i]); d[2 * i + 1] = exp(xd[i] * 0.125); }'''
    _, (fn,) = load(src, "tr")
    n = 256
    x = rng.uniform(-20, 20, n).astype(np.float32)
    xd = rng.uniform(-50, 50, n)
    dx, df, dxd, dd = to_device(x), to_device(np.zeros(3 * n, np.float32)), to_device(xd), to_device(np.zeros(2 * n))
    check(launch(fn, (2, 1, 1), (128, 1, 1), [(dx, PTR), (df, PTR), (dxd, PTR), (dd, PTR), (n, I32)]))
    f = from_device(df, (n, 3), np.float32)
    x64 = x.astype(np.float64)
    ref = np.stack([np.sin(x64), np.exp(x64 * 0.25), np.log(np.abs(x64) + 0.5)], axis=1)
    np.testing.assert_allclose(f, ref, rtol=4e-7, atol=1e-7)  # <= 2 ulp of float32
    d = from_device(dd, (n, 2), np.float64)
    np.testing.assert_allclose(d, np.stack([np.sin(xd), np.exp(xd * 0.125)], axis=1), rtol=1e-15, atol=1e-16)


def test_half_precision(ctx, rng: np.random.Generator) -> None:
    src = r'''#include <cuda_fp16.h>
    extern "C" __global__ void h(const __half* a, const __half* b, __half* c, float* widened, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
        __half p = __hmul(a[i], b[i]);
        c[i] = __hadd(p, a[i]); widened[i] = __half2float(a[i]) * 2.0f; }'''
    _, (fn,) = load(src, "h", includes=True)
    n = 200
    a = rng.uniform(-8, 8, n).astype(np.float16)
    b = rng.uniform(-8, 8, n).astype(np.float16)
    da, db, dc, dw = to_device(a), to_device(b), to_device(np.zeros(n, np.float16)), to_device(np.zeros(n, np.float32))
    check(launch(fn, (2, 1, 1), (128, 1, 1), [(da, PTR), (db, PTR), (dc, PTR), (dw, PTR), (n, I32)]))
    np.testing.assert_array_equal(from_device(dc, n, np.float16), (a * b).astype(np.float16) + a)
    np.testing.assert_array_equal(from_device(dw, n, np.float32), a.astype(np.float32) * 2)


def test_dynamic_shared_memory_with_opt_in(ctx, rng: np.random.Generator) -> None:
    src = r'''extern "C" __global__ void rev(const float* in, float* out) {
        extern __shared__ float buf[];
        int t = threadIdx.x, base = blockIdx.x * blockDim.x;
        for (int k = 0; k < 16; ++k) buf[k * blockDim.x + t] = in[base + t] + k;
        __syncthreads();
        float acc = 0.0f; for (int k = 0; k < 16; ++k) acc += buf[k * blockDim.x + (blockDim.x - 1 - t)];
        out[base + t] = acc; }'''
    _, (fn,) = load(src, "rev")
    block, smem = 1024, 1024 * 16 * 4  # 64 KiB: above the 48 KiB default, needs cuFuncSetAttribute
    data = rng.integers(-100, 100, 2 * block).astype(np.float32)
    din, dout = to_device(data), to_device(np.zeros(2 * block, np.float32))
    args = [(din, PTR), (dout, PTR)]
    assert launch(fn, (2, 1, 1), (block, 1, 1), args, smem) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE,)
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check(cu.cuFuncSetAttribute(fn, attr, smem))
    assert check(cu.cuFuncGetAttribute(attr, fn)) == smem
    check(launch(fn, (2, 1, 1), (block, 1, 1), args, smem))
    expected = data.reshape(2, block)[:, ::-1] * 16 + sum(range(16))
    np.testing.assert_array_equal(from_device(dout, 2 * block, np.float32), expected.ravel())


def test_2d_and_3d_grids(ctx) -> None:
    src = r'''extern "C" __global__ void coords(unsigned int* out) {
        unsigned int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
        unsigned int z = blockIdx.z * blockDim.z + threadIdx.z;
        unsigned int W = gridDim.x * blockDim.x, H = gridDim.y * blockDim.y;
        out[(z * H + y) * W + x] = (x << 20) | (y << 10) | z; }'''
    _, (fn,) = load(src, "coords")
    grid, block = (3, 2, 2), (4, 4, 2)
    W, H, D = 12, 8, 4
    dout = to_device(np.zeros(W * H * D, np.uint32))
    check(launch(fn, grid, block, [(dout, PTR)]))
    z, y, x = np.meshgrid(np.arange(D), np.arange(H), np.arange(W), indexing="ij")
    expected = ((x << 20) | (y << 10) | z).astype(np.uint32)
    np.testing.assert_array_equal(from_device(dout, (D, H, W), np.uint32), expected)


def test_module_global_and_launch_param_forms(ctx) -> None:
    src = r'''__device__ int counter[4];
    extern "C" __global__ void bump(int* out, int v) { atomicAdd(&counter[threadIdx.x], v); out[threadIdx.x] = v; }'''
    module, (fn,) = load(src, "bump")
    gptr, gsize = check(cu.cuModuleGetGlobal(module, b"counter"))
    assert gsize == 16
    check(cu.cuMemsetD32(gptr, 0, 4))
    dout = to_device(np.zeros(4, np.int32))
    # 1) void*[] array given by its int address
    p_out, p_v = ctypes.c_uint64(int(dout)), ctypes.c_int(5)
    arr = (ctypes.c_void_p * 2)(ctypes.addressof(p_out), ctypes.addressof(p_v))
    check(cu.cuLaunchKernel(fn, 1, 1, 1, 4, 1, 1, 0, None, ctypes.addressof(arr), 0))
    # 2) extra with CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE (struct padded to 16 bytes)
    class Args(ctypes.Structure):
        _fields_ = [("out", ctypes.c_uint64), ("v", ctypes.c_int)]

    args, size = Args(int(dout), 7), ctypes.c_size_t(ctypes.sizeof(Args))
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(args), 2, ctypes.addressof(size), 0)
    check(cu.cuLaunchKernel(fn, 1, 1, 1, 4, 1, 1, 0, None, None, ctypes.addressof(extra)))
    np.testing.assert_array_equal(from_device(gptr, 4, np.int32), [12, 12, 12, 12])
    np.testing.assert_array_equal(from_device(dout, 4, np.int32), [7, 7, 7, 7])


def test_graph_of_kernel_nodes(ctx) -> None:
    src = r'''extern "C" __global__ void axpb(float* x, float a, float b, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = a * x[i] + b; }'''
    _, (fn,) = load(src, "axpb")
    n = 100
    x = np.arange(n, dtype=np.float32)
    dx = to_device(x)

    def params(a: float, b: float) -> object:
        p = cu.CUDA_KERNEL_NODE_PARAMS()
        p.func, p.gridDimX, p.gridDimY, p.gridDimZ = fn, 1, 1, 1
        p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes = 128, 1, 1, 0
        p.kernelParams = ((dx, a, b, n), (PTR, F32, F32, I32))
        return p

    graph = check(cu.cuGraphCreate(0))
    first = check(cu.cuGraphAddKernelNode(graph, None, 0, params(2.0, 1.0)))
    second = check(cu.cuGraphAddKernelNode(graph, [first], 1, params(1.0, -3.0)))
    host_copy = np.zeros(n, np.float32)
    copy = cu.CUDA_MEMCPY3D()
    copy.srcMemoryType, copy.srcDevice = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, dx
    copy.dstMemoryType, copy.dstHost = cu.CUmemorytype.CU_MEMORYTYPE_HOST, host_copy.ctypes.data
    copy.WidthInBytes, copy.Height, copy.Depth = 4 * n, 1, 1
    check(cu.cuGraphAddMemcpyNode(graph, [second], 1, copy, ctx))
    exe = check(cu.cuGraphInstantiate(graph, 0))
    stream = check(cu.cuStreamCreate(0))
    check(cu.cuGraphLaunch(exe, stream))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(from_device(dx, n, np.float32), 2 * x + 1 - 3)
    np.testing.assert_array_equal(host_copy, 2 * x + 1 - 3)
    check(cu.cuGraphExecKernelNodeSetParams(exe, second, params(0.5, 0.0)))
    check(cu.cuGraphLaunch(exe, stream))
    np.testing.assert_array_equal(from_device(dx, n, np.float32), (2 * (2 * x - 2) + 1) * 0.5)
    check(cu.cuGraphExecDestroy(exe))
    check(cu.cuGraphDestroy(graph))
    assert cu.cuGraphLaunch(exe, stream) == (cu.CUresult.CUDA_ERROR_INVALID_HANDLE,)


def test_event_timing_brackets_a_kernel(ctx) -> None:
    src = r'''extern "C" __global__ void spin(float* x, int iters) {
        float v = x[threadIdx.x]; for (int k = 0; k < iters; ++k) v = v * 0.5f + 1.0f; x[threadIdx.x] = v; }'''
    _, (fn,) = load(src, "spin")
    dx = to_device(np.zeros(64, np.float32))
    start, end = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(0))
    check(cu.cuEventRecord(start, None))
    check(launch(fn, (1, 1, 1), (64, 1, 1), [(dx, PTR), (200, I32)]))
    check(cu.cuEventRecord(end, None))
    assert cu.cuEventElapsedTime(start, end) == (cu.CUresult.CUDA_ERROR_NOT_READY, None)  # nothing waited yet
    check(cu.cuEventSynchronize(end))
    ms = check(cu.cuEventElapsedTime(start, end))
    assert ms > 0.0
    np.testing.assert_array_equal(from_device(dx, 64, np.float32), np.full(64, 2.0, np.float32))
