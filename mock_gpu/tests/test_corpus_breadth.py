"""Breadth corpus: realistic CUDA C kernels compiled four ways and run through mock_gpu.driver against numpy.

Every kernel lives in one translation unit (CORPUS) compiled once per configuration: NVRTC at its default -O3 for
compute_90, NVRTC with --use_fast_math, and ``nvcc -ptx`` for sm_80 and sm_90 (skipped when nvcc is not installed).
The kernels exercise what compilers emit for ordinary code: warp shuffles and votes, redux.sync, block reductions,
float4 vector loads, shared-memory tiles, CAS loops, 64-bit atomics, half/bfloat16 arithmetic and atomics, funnel
shifts, lop3/dp4a/dp2a, cp.async pipelines, cooperative groups, non-inlined calls and 64-bit grid-stride loops.
Results are bit-exact where the arithmetic is exact (integers, integer-valued floats, single correctly rounded
operations) and within a stated tolerance for approximate math.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _driver_util import F32, F64, I32, PTR, check, cuda_include_dir, from_device, launch, report, to_device

import mock_gpu
from mock_gpu import driver as cu
from mock_gpu.config import SETTINGS

CORPUS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_pipeline.h>
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/warp/warp_reduce.cuh>
namespace cg = cooperative_groups;

extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float m = __int_as_float(0xff800000);
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += __expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv = 1.f / s;
    for (int c = lane; c < cols; c += 32) y[(long long)row * cols + c] = __expf(xr[c] - m) * inv;
}

__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, l = threadIdx.x % 32;
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = (threadIdx.x < blockDim.x / 32) ? sh[l] : 0.f;
    if (w == 0) for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) sh[32] = v;
    __syncthreads();
    float r = sh[32];
    __syncthreads();
    return r;
}

extern "C" __global__ void layernorm(const float* x, const float* g, const float* b, float* y, int n, float eps) {
    __shared__ float sh[33];
    const float* xr = x + (size_t)blockIdx.x * n;
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
    float mean = block_sum(s, sh) / n;
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) { float d = xr[i] - mean; v += d * d; }
    float rstd = rsqrtf(block_sum(v, sh) / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        y[(size_t)blockIdx.x * n + i] = (xr[i] - mean) * rstd * g[i] + b[i];
}

#define TS 32
extern "C" __global__ void gemm_float4(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TS][TS];
    __shared__ __align__(16) float Bs[TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;  // block (8, 32): every thread loads and computes 4 columns
    int row = blockIdx.y * TS + ty, col0 = blockIdx.x * TS + tx * 4;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k0 = 0; k0 < K; k0 += TS) {
        float4 a = *reinterpret_cast<const float4*>(&A[(size_t)row * K + k0 + tx * 4]);
        float4 b = *reinterpret_cast<const float4*>(&B[(size_t)(k0 + ty) * N + col0]);
        As[ty][tx * 4 + 0] = a.x; As[ty][tx * 4 + 1] = a.y; As[ty][tx * 4 + 2] = a.z; As[ty][tx * 4 + 3] = a.w;
        *reinterpret_cast<float4*>(&Bs[ty][tx * 4]) = b;
        __syncthreads();
        #pragma unroll 8
        for (int k = 0; k < TS; ++k) {
            float av = As[ty][k];
            float4 bv = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            acc.x += av * bv.x; acc.y += av * bv.y; acc.z += av * bv.z; acc.w += av * bv.w;
        }
        __syncthreads();
    }
    *reinterpret_cast<float4*>(&C[(size_t)row * N + col0]) = acc;
}

__device__ float atomic_max_float(float* addr, float v) {
    int* ai = (int*)addr;
    int old = *ai, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= v) break;
        old = atomicCAS(ai, assumed, __float_as_int(v));
    } while (assumed != old);
    return __int_as_float(old);
}

extern "C" __global__ void atomics(const float* x, float* mx, double* sum, unsigned long long* cnt, float* fsum,
                                   int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomic_max_float(mx, x[i]);
    atomicAdd(sum, (double)x[i]);
    atomicAdd(cnt, 1ull);
    atomicCAS(cnt + 1, 0ull, (unsigned long long)i + 1);
    atomicAdd(fsum, 1.0f);
}

extern "C" __global__ void half_atomics(__half2* h2, __half* h, __nv_bfloat16* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(h2, __floats2half2_rn(1.0f, 0.25f));
    atomicAdd(h + (i & 1), __float2half(0.5f));
    atomicAdd(b, __float2bfloat16(1.0f));
}

extern "C" __global__ void bits(const unsigned* a, const unsigned* b, unsigned* o, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned x = a[i], y = b[i];
    o[8 * i + 0] = __popc(x);
    o[8 * i + 1] = __clz(x);
    o[8 * i + 2] = __brev(x);
    o[8 * i + 3] = __byte_perm(x, y, 0x5140 + (i & 7));
    o[8 * i + 4] = __funnelshift_l(x, y, i);
    o[8 * i + 5] = __funnelshift_r(x, y, i) ^ __funnelshift_lc(x, y, i);
    o[8 * i + 6] = __ffs(x) + (__clzll(((unsigned long long)x << 32) | y) << 8);
    o[8 * i + 7] = __usad(x & 0xff, y & 0xff, 3) + __umulhi(x, y);
}

__device__ __forceinline__ unsigned rotl(unsigned x, int r) { return (x << r) | (x >> (32 - r)); }

extern "C" __global__ void hashes(const unsigned* in, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned h = 0x9747b28cu, k = in[i];
    k *= 0xcc9e2d51u; k = rotl(k, 15); k *= 0x1b873593u;
    h ^= k; h = rotl(h, 13); h = h * 5 + 0xe6546b64u;
    h ^= 4; h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    unsigned s = k ^ 0x2545F491u;
    s ^= s << 13; s ^= s >> 17; s ^= s << 5;
    unsigned ch, maj, par;
    asm("lop3.b32 %0, %1, %2, %3, 0xCA;" : "=r"(ch) : "r"(h), "r"(s), "r"(k));    // h ? s : k
    asm("lop3.b32 %0, %1, %2, %3, 0xE8;" : "=r"(maj) : "r"(h), "r"(s), "r"(k));   // majority
    asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(par) : "r"(h), "r"(s), "r"(k));   // parity
    out[4 * i] = h; out[4 * i + 1] = s; out[4 * i + 2] = ch ^ maj; out[4 * i + 3] = par + ((h & s) ^ (~h & k));
}

__device__ __noinline__ float horner(float x, int k) {
    float r = 0.f;
    for (int j = 0; j < k; ++j) r = r * x + (float)(j + 1);
    return r;
}

extern "C" __global__ void calls(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = horner(x[i], (i & 3) + 1);
}

extern "C" __global__ void coop_groups(const int* x, int* out, float* fo) {
    cg::thread_block blk = cg::this_thread_block();
    cg::thread_block_tile<32> t32 = cg::tiled_partition<32>(blk);
    cg::thread_block_tile<8> t8 = cg::tiled_partition<8>(blk);
    int idx = blockIdx.x * blockDim.x + blk.thread_rank();
    int v = x[idx];
    int s = cg::reduce(t32, v, cg::plus<int>());
    int m = cg::reduce(t8, v, cg::greater<int>());
    float f = cg::reduce(t32, (float)v, cg::plus<float>());
    unsigned b = t32.ballot(v > 0);
    out[3 * idx] = s; out[3 * idx + 1] = m; out[3 * idx + 2] = b + t8.shfl(v, 3);
    fo[idx] = f;
    blk.sync();
}

extern "C" __global__ void half2_math(const __half2* a, const __half2* b, __half2* c, __half* e, float* f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __half2 x = a[i], y = b[i];
    __half2 r = __hmul2(__hfma2(x, y, __hadd2(x, y)), __float2half2_rn(0.5f));
    c[i] = r;
    e[i] = hexp2(__low2half(x) * __float2half(0.25f));
    float2 ff = __half22float2(r);
    f[2 * i] = ff.x;
    f[2 * i + 1] = ff.y + __high2float(__hmax2(x, y));
}

extern "C" __global__ void ldg_float4(const float4* __restrict__ a, float* o, long long n) {
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float4 v = __ldg(&a[i]);
        o[i] = v.x + v.y * 2.f + v.z * 4.f + v.w * 8.f;
    }
}

extern "C" __global__ void cp_async_pipeline(const float* in, float* out, int n) {
    __shared__ __align__(16) float buf[2][128];
    int t = threadIdx.x, tiles = n / 128;
    __pipeline_memcpy_async(&buf[0][t], &in[t], sizeof(float));
    __pipeline_commit();
    float acc = 0.f;
    for (int k = 0; k < tiles; ++k) {
        if (k + 1 < tiles) __pipeline_memcpy_async(&buf[(k + 1) & 1][t], &in[(k + 1) * 128 + t], sizeof(float));
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        acc += buf[k & 1][127 - t] * (float)(k + 1);
        __syncthreads();
    }
    out[t] = acc;
}

extern "C" __global__ void bf16_math(const __nv_bfloat16* a, const float* b, __nv_bfloat16* c, float* d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 x = a[i];
    c[i] = __float2bfloat16(__bfloat162float(x) * b[i]);
    d[i] = __bfloat162float(__hmul(x, x)) + __bfloat162float(__hadd(x, __float2bfloat16(1.0f)));
}

extern "C" __global__ void grid_stride64(const double* x, double* y, size_t n, double a) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
        y[i] = a * x[i] + (double)(i >> 3);
}

extern "C" __global__ void warp_votes(const int* x, int* o, const int* c4, int* dp) {
    int t = threadIdx.x;
    int v = x[t];
    o[4 * t] = __ballot_sync(0xffffffffu, v > 0);
    o[4 * t + 1] = __reduce_add_sync(0xffffffffu, v);
    o[4 * t + 2] = __reduce_min_sync(0xffffffffu, v);
    o[4 * t + 3] = __reduce_or_sync(0xffffffffu, (unsigned)v);
    int pa = c4[t], pb = c4[t ^ 1];
    dp[3 * t] = __dp4a(pa, pb, t);
    dp[3 * t + 1] = (int)__dp4a((unsigned)pa, (unsigned)pb, 1u);
    dp[3 * t + 2] = __dp2a_lo(pa, pb, t) + __dp2a_hi((unsigned)pa, (unsigned)pb, 7u);
    __nanosleep(10);
}

extern "C" __global__ void cub_block(const int* in, int* sum, int* scan, int* sorted, float* wsum) {
    typedef cub::BlockReduce<int, 128> Reduce;
    typedef cub::BlockScan<int, 128> Scan;
    typedef cub::BlockRadixSort<int, 128, 4> Sort;
    typedef cub::WarpReduce<float> WarpSum;
    __shared__ union {
        typename Reduce::TempStorage r; typename Scan::TempStorage s; typename Sort::TempStorage rs;
        typename WarpSum::TempStorage w[4];
    } tmp;
    int t = threadIdx.x, v = in[t];
    int total = Reduce(tmp.r).Sum(v);
    if (t == 0) *sum = total;
    __syncthreads();
    int excl;
    Scan(tmp.s).ExclusiveSum(v, excl);
    scan[t] = excl;
    __syncthreads();
    int keys[4];
    for (int k = 0; k < 4; ++k) keys[k] = in[t * 4 + k];
    Sort(tmp.rs).Sort(keys);
    for (int k = 0; k < 4; ++k) sorted[t * 4 + k] = keys[k];
    __syncthreads();
    float w = WarpSum(tmp.w[t / 32]).Sum((float)v);
    if (t % 32 == 0) wsum[t / 32] = w;
}

extern "C" __global__ void half_compare(const __half2* a, const __half2* b, __half2* lt, unsigned* flags) {
    int i = threadIdx.x;
    __half2 x = a[i], y = b[i];
    lt[i] = __hlt2(x, y);
    flags[i] = __hbeq2(x, y) + 2 * __hble2(x, y) + 4 * __hisnan(__low2half(x))
        + 8 * __hgt(__high2half(x), __high2half(y));
}

extern "C" __global__ void warp_match(const int* x, int* o) {
    int t = threadIdx.x, v = x[t];
    __syncwarp();
    unsigned any = __match_any_sync(0xffffffffu, v & 3);
    int all_pred;
    unsigned all = __match_all_sync(0xffffffffu, v & 1, &all_pred);
    volatile int* vo = o;
    vo[4 * t] = any;
    __threadfence();
    o[4 * t + 1] = all ^ (all_pred << 4);
    o[4 * t + 2] = __any_sync(0xffffffffu, v > 90) + 2 * __all_sync(0xffffffffu, v > -1000);
    o[4 * t + 3] = __activemask();
}

extern "C" __global__ void math_lib(const float* x, const double* xd, float* o, double* od, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    double d = xd[i];
    o[6 * i] = powf(fabsf(v), 1.7f); o[6 * i + 1] = erff(v); o[6 * i + 2] = tanhf(v);
    o[6 * i + 3] = atan2f(v, 1.5f); o[6 * i + 4] = log1pf(fabsf(v)); o[6 * i + 5] = fmodf(v, 0.7f) + rintf(v);
    od[3 * i] = pow(fabs(d), 1.3); od[3 * i + 1] = d / (d + 3.0) + sqrt(fabs(d));
    long long q = (long long)(d * 1e6);
    od[3 * i + 2] = (double)(q / 7 + q % 13);
}

extern "C" __global__ void int_intrinsics(const unsigned* a, const unsigned* b, unsigned* o, unsigned* atom,
                                          unsigned long long* atom64) {
    int i = threadIdx.x;
    unsigned x = a[i], y = b[i];
    o[12 * i + 0] = __vadd2(x, y);
    o[12 * i + 1] = __vabsdiffu4(x, y);
    o[12 * i + 2] = __vcmpgtu4(x, y);
    o[12 * i + 3] = __vmaxs2(x, y);
    o[12 * i + 4] = __vsubss4(x, y);
    o[12 * i + 5] = __mul24((int)x, -3) + __umul24(x, 7);
    o[12 * i + 6] = __hadd((int)x, (int)y);
    o[12 * i + 7] = __urhadd(x, y);
    o[12 * i + 8] = __sad((int)x, (int)y, 1u);
    o[12 * i + 9] = __syncthreads_count(x > y) + (__syncthreads_and(x != 0) << 10) + (__syncthreads_or(x == y) << 11);
    o[12 * i + 10] = __shfl_up_sync(0xffffffffu, x, 3, 16);
    o[12 * i + 11] = __shfl_sync(0xffffffffu, x, 5, 8);
    atomicInc(&atom[0], 17u);
    atomicDec(&atom[1], 9u);
    atomicAnd(&atom[2], ~(1u << (i & 31)) | (x & 1));
    atomicOr_block(&atom[3], 1u << (i % 29));
    atomicMin(&atom64[0], 1000ull - i);
    atomicMax(&atom64[1], (unsigned long long)x << 20);
    atomicAdd_system(&atom64[2], 2ull);
}

extern "C" __global__ void round_intrinsics(const float* x, float* o) {
    int i = threadIdx.x;
    float v = x[i], w = x[(i + 1) & 63];
    o[8 * i + 0] = __fadd_rz(v, w);
    o[8 * i + 1] = __fmul_ru(v, w);
    o[8 * i + 2] = __fdiv_rd(v, w);
    o[8 * i + 3] = __fmaf_rd(v, w, 1.0f);
    o[8 * i + 4] = __fsqrt_ru(fabsf(v));
    o[8 * i + 5] = __frcp_rz(w);
    o[8 * i + 6] = __int2float_rd(__float_as_int(v));
    o[8 * i + 7] = (float)__float2int_rn(v * 1000.f) + __saturatef(v);
}

extern "C" __global__ void fp8_round_trip(const float* a, unsigned char* e4, unsigned char* e5, float* back) {
    int i = threadIdx.x;
    __nv_fp8_e4m3 x(a[i]);
    __nv_fp8_e5m2 y(a[i]);
    e4[i] = x.__x;
    e5[i] = y.__x;
    back[2 * i] = float(x);
    back[2 * i + 1] = float(y);
}

extern "C" __global__ void checked(const int* x, int* y) {
    int i = threadIdx.x;
    assert(x[i] >= 0);
    y[i] = x[i] * 2;
}
"""

PRINTF = r"""extern "C" __global__ void say(int* o) { printf("thread %d\n", threadIdx.x); o[threadIdx.x] = 1; }"""

I64, SIZE_T = ctypes.c_longlong, ctypes.c_size_t
CONFIGS = ("nvrtc", "nvrtc-fast-math", "nvcc-sm_80", "nvcc-sm_90")


def _nvrtc(src: str, options: list[str]) -> bytes:
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) is not installed")
    inc = cuda_include_dir()
    if inc is None:
        pytest.skip("CUDA headers (cuda_fp16.h) not found; set CUDA_HOME to a CUDA toolkit")
    opts = [*options, "-default-device", f"-I{inc}", f"-I{os.path.join(inc, 'cccl')}"]
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"corpus.cu", 0, [], [])
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(size)  # NVRTC writes into it: never an (interned) bytes object
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"NVRTC failed: {log.decode(errors='replace')}")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    out = bytearray(size)  # NVRTC writes into it: never an (interned) bytes object
    nvrtc.nvrtcGetPTX(prog, out)
    return bytes(out)


def _nvcc(src: str, arch: str, workdir: Path) -> bytes:
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    cu_file, ptx_file = workdir / f"k_{arch}.cu", workdir / f"k_{arch}.ptx"
    cu_file.write_text(src)
    run = subprocess.run([nvcc, "-ptx", "-O3", f"-arch={arch}", str(cu_file), "-o", str(ptx_file)],
                         capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise RuntimeError(f"nvcc failed: {run.stderr}")
    return ptx_file.read_bytes()


@functools.cache
def _compiled(config: str, src: str, workdir: Path) -> bytes:
    if config == "nvrtc":
        return _nvrtc(src, ["--gpu-architecture=compute_90"])
    if config == "nvrtc-fast-math":
        return _nvrtc(src, ["--gpu-architecture=compute_90", "--use_fast_math"])
    return _nvcc(src, config.split("-")[1], workdir)


@pytest.fixture(scope="module", params=CONFIGS)
def config(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def corpus_ptx(config: str, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return _compiled(config, CORPUS, tmp_path_factory.mktemp(config))


_LOADED: dict[str, Any] = {}  # configuration -> module handle in the emulated system that is current


@pytest.fixture
def loaded(config: str, corpus_ptx: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The corpus module, loaded once per configuration (loading ~0.3 MB of PTX takes a while) and loaded again only
    when another test has reset the emulated system in between (as other test modules do, e.g. under xdist)."""
    module = _LOADED.get(config)
    if module is None or cu.cuModuleGetFunction(module, b"softmax")[0] != cu.CUresult.CUDA_SUCCESS:
        for var in SETTINGS:
            monkeypatch.delenv(var.name, raising=False)
        mock_gpu.reset()
        _LOADED.clear()
        check(cu.cuInit(0))
        context = check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(0))))
        check(cu.cuCtxSetCurrent(context))
        module = _LOADED[config] = check(cu.cuModuleLoadData(corpus_ptx))
    return module


@pytest.fixture
def kernels(loaded: Any) -> Any:
    return lambda name: check(cu.cuModuleGetFunction(loaded, name.encode()))


def test_every_configuration_loads_and_uses_the_new_instructions(config: str, corpus_ptx: bytes) -> None:
    text = corpus_ptx.decode()
    bf16_add = "atom.global.cas.b16" if config.endswith("sm_80") else "atom.add.noftz.bf16"  # sm_80: CAS loop
    for op in ("shf.l.wrap.b32", "lop3.b32", "dp4a.s32.s32", "dp2a.lo", "cp.async.ca.shared.global",
               "cp.async.wait_group", "atom.add.noftz.f16x2", bf16_add, "redux.sync", "vote.sync.ballot.b32",
               "ld.global.nc.v4.f32", "call.uni"):
        assert op in text, f"{config}: the corpus no longer exercises {op}"


def test_softmax_rows_with_warp_shuffles(kernels: Any, config: str, rng: np.random.Generator) -> None:
    rows, cols = 10, 77
    x = rng.standard_normal((rows, cols)).astype(np.float32) * 4
    dx, dy = to_device(x), to_device(np.zeros_like(x))
    check(launch(kernels("softmax"), (3, 1, 1), (128, 1, 1), [(dx, PTR), (dy, PTR), (rows, I32), (cols, I32)]))
    x64 = x.astype(np.float64)
    ref = np.exp(x64 - x64.max(1, keepdims=True))
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(from_device(dy, (rows, cols), np.float32), ref, rtol=2e-6, atol=1e-9)


def test_layernorm_with_block_reduction(kernels: Any, rng: np.random.Generator) -> None:
    rows, n = 3, 300
    x = rng.standard_normal((rows, n)).astype(np.float32)
    g, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dx, dg, db, dy = to_device(x), to_device(g), to_device(b), to_device(np.zeros_like(x))
    args = [(dx, PTR), (dg, PTR), (db, PTR), (dy, PTR), (n, I32), (1e-5, F32)]
    check(launch(kernels("layernorm"), (rows, 1, 1), (128, 1, 1), args))
    x64 = x.astype(np.float64)
    mean = x64.mean(1, keepdims=True)
    ref = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(from_device(dy, (rows, n), np.float32), ref, rtol=1e-5, atol=1e-5)


def test_gemm_with_float4_loads_and_shared_tiles(kernels: Any, rng: np.random.Generator) -> None:
    M, N, K = 64, 96, 64
    a = rng.integers(-3, 4, (M, K)).astype(np.float32)
    b = rng.integers(-3, 4, (K, N)).astype(np.float32)
    da, db, dc = to_device(a), to_device(b), to_device(np.full((M, N), np.nan, np.float32))
    args = [(da, PTR), (db, PTR), (dc, PTR), (M, I32), (N, I32), (K, I32)]
    check(launch(kernels("gemm_float4"), (N // 32, M // 32, 1), (8, 32, 1), args))
    np.testing.assert_array_equal(from_device(dc, (M, N), np.float32), a @ b)  # small integers: exact


def test_cas_loop_float_max_and_64bit_atomics(kernels: Any, rng: np.random.Generator) -> None:
    n = 700
    x = rng.integers(-5000, 5000, n).astype(np.float32) / 4
    dx = to_device(x)
    dmx, dsum = to_device(np.array([-1e30], np.float32)), to_device(np.zeros(1))
    dcnt, dfsum = to_device(np.zeros(2, np.uint64)), to_device(np.zeros(1, np.float32))
    args = [(dx, PTR), (dmx, PTR), (dsum, PTR), (dcnt, PTR), (dfsum, PTR), (n, I32)]
    check(launch(kernels("atomics"), (3, 1, 1), (256, 1, 1), args))
    assert from_device(dmx, 1, np.float32)[0] == x.max()
    assert from_device(dsum, 1, np.float64)[0] == x.astype(np.float64).sum()  # quarters: every partial sum exact
    cnt = from_device(dcnt, 2, np.uint64)
    assert cnt[0] == n and cnt[1] == 1  # the first thread in order swaps 0 -> i + 1 with i = 0
    assert from_device(dfsum, 1, np.float32)[0] == n


def test_half_and_bfloat16_atomic_adds(kernels: Any) -> None:
    n = 300
    dh2, dh = to_device(np.zeros(2, np.float16)), to_device(np.zeros(2, np.float16))
    db = to_device(np.zeros(1, np.uint16))
    check(launch(kernels("half_atomics"), (2, 1, 1), (256, 1, 1), [(dh2, PTR), (dh, PTR), (db, PTR), (n, I32)]))
    # f16: 300 * 1.0 and 300 * 0.25 are exact; 150 * 0.5 per slot; bf16 counts 1.0 up to 256 exactly, after which
    # +1 rounds to nearest even: 256 + 1 = 257 -> 256 (tie to even), so the sum sticks at 256.
    np.testing.assert_array_equal(from_device(dh2, 2, np.float16), np.array([300.0, 75.0], np.float16))
    np.testing.assert_array_equal(from_device(dh, 2, np.float16), np.array([75.0, 75.0], np.float16))
    got_bf16 = from_device(db, 1, np.uint16).view(ml_dtypes.bfloat16)[0]
    assert float(got_bf16) == 256.0


def _bits_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = []
    m32 = 0xFFFFFFFF
    for i, (a, b) in enumerate(zip(x.tolist(), y.tolist(), strict=True)):
        rev = int(f"{a:032b}"[::-1], 2)
        sel = 0x5140 + (i & 7)
        src = (b << 32) | a
        perm = 0
        for k in range(4):
            perm |= ((src >> (8 * ((sel >> (4 * k)) & 7))) & 0xFF) << (8 * k)
        wide = (b << 32) | a
        n = i & 31
        fl, fr, flc = ((wide << n) >> 32) & m32, (wide >> n) & m32, ((wide << min(i, 32)) >> 32) & m32
        ffs = (a & -a).bit_length()
        clzll = 64 - (((a << 32) | b).bit_length())
        usad = abs((a & 0xFF) - (b & 0xFF)) + 3
        out += [bin(a).count("1"), 32 - a.bit_length(), rev, perm, fl, fr ^ flc, (ffs + (clzll << 8)) & m32,
                (usad + ((a * b) >> 32)) & m32]
    return np.array(out, np.uint32)


def test_bit_tricks(kernels: Any, rng: np.random.Generator) -> None:
    n = 80
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:3] = [0, 1, 0x80000000]
    dx, dy, do = to_device(x), to_device(y), to_device(np.zeros(8 * n, np.uint32))
    check(launch(kernels("bits"), (1, 1, 1), (128, 1, 1), [(dx, PTR), (dy, PTR), (do, PTR), (n, I32)]))
    np.testing.assert_array_equal(from_device(do, 8 * n, np.uint32), _bits_reference(x, y))


def _hash_reference(values: np.ndarray) -> np.ndarray:
    m = 0xFFFFFFFF

    def rotl(v: int, r: int) -> int:
        return ((v << r) | (v >> (32 - r))) & m

    out = []
    for k in values.tolist():
        h = 0x9747B28C
        k = (k * 0xCC9E2D51) & m
        k = (rotl(k, 15) * 0x1B873593) & m
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & m
        h ^= 4
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & m
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & m
        h ^= h >> 16
        s = k ^ 0x2545F491
        s ^= (s << 13) & m
        s ^= s >> 17
        s ^= (s << 5) & m
        ch = (h & s) | (~h & k & m)
        maj = (h & s) | (h & k) | (s & k)
        out += [h, s, ch ^ maj, ((h ^ s ^ k) + ((h & s) ^ (~h & m & k))) & m]
    return np.array(out, np.uint32)


def test_murmur_xorshift_and_lop3_truth_tables(kernels: Any, rng: np.random.Generator) -> None:
    n = 200
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    dx, do = to_device(x), to_device(np.zeros(4 * n, np.uint32))
    check(launch(kernels("hashes"), (2, 1, 1), (128, 1, 1), [(dx, PTR), (do, PTR), (n, I32)]))
    np.testing.assert_array_equal(from_device(do, 4 * n, np.uint32), _hash_reference(x))


def test_noinline_device_function_call(kernels: Any, rng: np.random.Generator) -> None:
    n = 100
    x = rng.integers(-4, 5, n).astype(np.float32)
    dx, dy = to_device(x), to_device(np.zeros(n, np.float32))
    check(launch(kernels("calls"), (1, 1, 1), (128, 1, 1), [(dx, PTR), (dy, PTR), (n, I32)]))
    ref = []
    for i, v in enumerate(x.tolist()):
        r = 0.0
        for j in range((i & 3) + 1):
            r = r * v + j + 1
        ref.append(r)
    np.testing.assert_array_equal(from_device(dy, n, np.float32), np.array(ref, np.float32))  # small integers


def test_cooperative_groups_tiled_reductions(kernels: Any, rng: np.random.Generator) -> None:
    blocks, threads = 2, 64
    x = rng.integers(-100, 100, blocks * threads).astype(np.int32)
    dx, do = to_device(x), to_device(np.zeros(3 * x.size, np.int32))
    dfo = to_device(np.zeros(x.size, np.float32))
    check(launch(kernels("coop_groups"), (blocks, 1, 1), (threads, 1, 1), [(dx, PTR), (do, PTR), (dfo, PTR)]))
    out = from_device(do, (x.size, 3), np.int32)
    w32, w8 = x.reshape(-1, 32), x.reshape(-1, 8)
    np.testing.assert_array_equal(out[:, 0], np.repeat(w32.sum(1), 32))
    np.testing.assert_array_equal(out[:, 1], np.repeat(w8.max(1), 8))
    ballots = ((w32 > 0) * (1 << np.arange(32, dtype=np.uint64))).sum(1).astype(np.uint32)
    expect = np.repeat(ballots, 32) + np.repeat(w8[:, 3], 8).astype(np.uint32)
    np.testing.assert_array_equal(out[:, 2].view(np.uint32), expect)
    np.testing.assert_array_equal(from_device(dfo, x.size, np.float32), np.repeat(w32.sum(1), 32).astype(np.float32))


def test_half2_arithmetic(kernels: Any, rng: np.random.Generator) -> None:
    n = 100
    a = rng.uniform(-4, 4, 2 * n).astype(np.float16)
    b = rng.uniform(-4, 4, 2 * n).astype(np.float16)
    da, db = to_device(a), to_device(b)
    dc, de, df = to_device(np.zeros(2 * n, np.float16)), to_device(np.zeros(n, np.float16)), to_device(
        np.zeros(2 * n, np.float32))
    args = [(da, PTR), (db, PTR), (dc, PTR), (de, PTR), (df, PTR), (n, I32)]
    check(launch(kernels("half2_math"), (1, 1, 1), (128, 1, 1), args))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    s = (a + b).astype(np.float64)  # __hadd2 rounds once to half
    r = ((a64 * b64 + s).astype(np.float16).astype(np.float64) * 0.5).astype(np.float16)  # fma rounds once
    np.testing.assert_array_equal(from_device(dc, 2 * n, np.float16), r)
    e_ref = np.exp2((a[0::2] * np.float16(0.25)).astype(np.float64))
    np.testing.assert_allclose(from_device(de, n, np.float16).astype(np.float64), e_ref, rtol=2e-3)
    f = from_device(df, (n, 2), np.float32)
    np.testing.assert_array_equal(f[:, 0], r[0::2].astype(np.float32))
    np.testing.assert_array_equal(f[:, 1], r[1::2].astype(np.float32) + np.maximum(a[1::2], b[1::2]).astype(np.float32))


def test_ldg_float4_grid_stride_with_64bit_count(kernels: Any, rng: np.random.Generator) -> None:
    n = 1000
    a = rng.integers(-50, 50, (n, 4)).astype(np.float32)
    da, do = to_device(a), to_device(np.zeros(n, np.float32))
    check(launch(kernels("ldg_float4"), (3, 1, 1), (64, 1, 1), [(da, PTR), (do, PTR), (n, I64)]))
    np.testing.assert_array_equal(from_device(do, n, np.float32), a @ np.array([1, 2, 4, 8], np.float32))


def test_cp_async_double_buffered_pipeline(kernels: Any, rng: np.random.Generator) -> None:
    n = 128 * 5
    x = rng.integers(-20, 20, n).astype(np.float32)
    dx, do = to_device(x), to_device(np.zeros(128, np.float32))
    check(launch(kernels("cp_async_pipeline"), (1, 1, 1), (128, 1, 1), [(dx, PTR), (do, PTR), (n, I32)]))
    ref = (x.reshape(5, 128)[:, ::-1] * np.arange(1, 6, dtype=np.float32)[:, None]).sum(0)
    np.testing.assert_array_equal(from_device(do, 128, np.float32), ref)


def test_bfloat16_conversions_and_arithmetic(kernels: Any, rng: np.random.Generator) -> None:
    bf16 = ml_dtypes.bfloat16
    n = 200
    a = rng.uniform(-30, 30, n).astype(bf16)
    b = rng.standard_normal(n).astype(np.float32)
    da, db = to_device(a.view(np.uint16)), to_device(b)
    dc, dd = to_device(np.zeros(n, np.uint16)), to_device(np.zeros(n, np.float32))
    check(launch(kernels("bf16_math"), (2, 1, 1), (128, 1, 1), [(da, PTR), (db, PTR), (dc, PTR), (dd, PTR), (n, I32)]))
    a32 = a.astype(np.float32)
    np.testing.assert_array_equal(from_device(dc, n, np.uint16), (a32 * b).astype(bf16).view(np.uint16))
    ref = (a32 * a32).astype(bf16).astype(np.float32) + (a32 + 1).astype(bf16).astype(np.float32)
    np.testing.assert_array_equal(from_device(dd, n, np.float32), ref)


def test_grid_stride_loop_with_size_t_index(kernels: Any, rng: np.random.Generator) -> None:
    n = 5000
    x = rng.standard_normal(n)
    dx, dy = to_device(x), to_device(np.zeros(n))
    check(launch(kernels("grid_stride64"), (4, 1, 1), (128, 1, 1), [(dx, PTR), (dy, PTR), (n, SIZE_T),
                                                                     (2.0, F64)]))
    np.testing.assert_array_equal(from_device(dy, n, np.float64), 2.0 * x + (np.arange(n) >> 3))  # 2x is exact


def _dp(a: int, b: int, c: int, signed_a: bool, signed_b: bool, width: int, first: int) -> int:
    def part(v: int, pos: int, w: int, signed: bool) -> int:
        f = (v >> pos) & ((1 << w) - 1)
        return f - (1 << w) if signed and f >> (w - 1) else f

    total = c + sum(part(a, k * width, width, signed_a) * part(b, (first + k) * 8, 8, signed_b)
                    for k in range(32 // width))
    return total & 0xFFFFFFFF


def test_ballot_redux_dp4a_dp2a(kernels: Any, rng: np.random.Generator) -> None:
    x = rng.integers(-1000, 1000, 64).astype(np.int32)
    c4 = rng.integers(-2**31, 2**31, 64).astype(np.int32)
    dx, do, dc4, ddp = to_device(x), to_device(np.zeros(4 * 64, np.int32)), to_device(c4), to_device(
        np.zeros(3 * 64, np.int32))
    check(launch(kernels("warp_votes"), (1, 1, 1), (64, 1, 1), [(dx, PTR), (do, PTR), (dc4, PTR), (ddp, PTR)]))
    o = from_device(do, (64, 4), np.int32)
    w = x.reshape(2, 32)
    ballots = ((w > 0) * (1 << np.arange(32, dtype=np.int64))).sum(1)
    np.testing.assert_array_equal(o[:, 0].view(np.uint32), np.repeat(ballots, 32).astype(np.uint32))
    np.testing.assert_array_equal(o[:, 1], np.repeat(w.sum(1), 32))
    np.testing.assert_array_equal(o[:, 2], np.repeat(w.min(1), 32))
    np.testing.assert_array_equal(o[:, 3], np.repeat(np.bitwise_or.reduce(w, axis=1), 32))
    u = c4.view(np.uint32).astype(np.int64).tolist()
    ref = []
    for t in range(64):
        a, b = u[t], u[t ^ 1]
        ref += [_dp(a, b, t, True, True, 8, 0), _dp(a, b, 1, False, False, 8, 0),
                (_dp(a, b, t, True, True, 16, 0) + _dp(a, b, 7, False, False, 16, 2)) & 0xFFFFFFFF]
    np.testing.assert_array_equal(from_device(ddp, 3 * 64, np.int32).view(np.uint32), np.array(ref, np.uint32))


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_printf_is_rejected_at_load_naming_vprintf(ctx: Any, compiler: str, tmp_path: Path) -> None:
    src = PRINTF if compiler == "nvrtc" else "#include <cstdio>\n" + PRINTF
    image = _nvrtc(src, ["--gpu-architecture=compute_90"]) if compiler == "nvrtc" else _nvcc(src, "sm_80", tmp_path)
    assert cu.cuModuleLoadData(image)[0] == cu.CUresult.CUDA_ERROR_INVALID_PTX
    text = report()
    assert "vprintf" in text and "PTX line" in text


def test_cub_block_reduce_scan_radix_sort_and_warp_reduce(kernels: Any, rng: np.random.Generator) -> None:
    x = rng.integers(-1000, 1000, 512).astype(np.int32)
    dx, dsum, dscan = to_device(x), to_device(np.zeros(1, np.int32)), to_device(np.zeros(128, np.int32))
    dsorted, dw = to_device(np.zeros(512, np.int32)), to_device(np.zeros(4, np.float32))
    check(launch(kernels("cub_block"), (1, 1, 1), (128, 1, 1), [(dx, PTR), (dsum, PTR), (dscan, PTR), (dsorted, PTR),
                                                                 (dw, PTR)]))
    v = x[:128]
    assert from_device(dsum, 1, np.int32)[0] == v.sum()
    np.testing.assert_array_equal(from_device(dscan, 128, np.int32), np.cumsum(v) - v)
    # BlockRadixSort leaves the keys in a blocked arrangement: thread t holds ranks 4t..4t+3
    np.testing.assert_array_equal(from_device(dsorted, 512, np.int32), np.sort(x))
    np.testing.assert_array_equal(from_device(dw, 4, np.float32), v.reshape(4, 32).sum(1).astype(np.float32))


def test_half2_comparisons(kernels: Any, rng: np.random.Generator) -> None:
    a = rng.integers(-3, 4, 64).astype(np.float16)
    b = rng.integers(-3, 4, 64).astype(np.float16)
    a[0], a[5] = np.nan, np.nan
    da, db, dlt, dflags = to_device(a), to_device(b), to_device(np.zeros(64, np.float16)), to_device(
        np.zeros(32, np.uint32))
    check(launch(kernels("half_compare"), (1, 1, 1), (32, 1, 1), [(da, PTR), (db, PTR), (dlt, PTR), (dflags, PTR)]))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(from_device(dlt, 64, np.float16), (a < b).astype(np.float16))
        lo, hi = slice(0, None, 2), slice(1, None, 2)
        beq = (a[lo] == b[lo]) & (a[hi] == b[hi])
        ble = (a[lo] <= b[lo]) & (a[hi] <= b[hi])
        expected = beq + 2 * ble + 4 * np.isnan(a[lo]) + 8 * (a[hi] > b[hi])
    np.testing.assert_array_equal(from_device(dflags, 32, np.uint32), expected.astype(np.uint32))


def test_match_vote_and_activemask(kernels: Any, rng: np.random.Generator) -> None:
    x = rng.integers(-100, 100, 64).astype(np.int32)
    x[32:] = 7  # second warp: every lane equal for match.all
    dx, do = to_device(x), to_device(np.zeros(4 * 64, np.int32))
    check(launch(kernels("warp_match"), (1, 1, 1), (64, 1, 1), [(dx, PTR), (do, PTR)]))
    o = from_device(do, (64, 4), np.int32).view(np.uint32)
    lanes = np.arange(32)
    for w in range(2):
        v = x[32 * w:32 * w + 32]
        any_ref = [sum(1 << j for j in lanes if (v[j] & 3) == (v[i] & 3)) for i in lanes]
        np.testing.assert_array_equal(o[32 * w:32 * w + 32, 0], np.array(any_ref, np.uint32))
        same = bool(np.all((v & 1) == (v[0] & 1)))
        np.testing.assert_array_equal(o[32 * w:32 * w + 32, 1], np.uint32(0xFFFFFFEF if same else 0))
        vote = int((v > 90).any()) + 2 * int((v > -1000).all())
        np.testing.assert_array_equal(o[32 * w:32 * w + 32, 2], vote)
    np.testing.assert_array_equal(o[:, 3], np.uint32(0xFFFFFFFF))


def test_math_library_functions(kernels: Any, rng: np.random.Generator) -> None:
    n = 128
    x = rng.uniform(-6, 6, n).astype(np.float32)
    xd = rng.uniform(-40, 40, n)
    dx, dxd, do, dod = to_device(x), to_device(xd), to_device(np.zeros(6 * n, np.float32)), to_device(np.zeros(3 * n))
    check(launch(kernels("math_lib"), (1, 1, 1), (128, 1, 1), [(dx, PTR), (dxd, PTR), (do, PTR), (dod, PTR), (n, I32)]))
    from scipy import special

    x64 = x.astype(np.float64)
    ref = np.stack([np.abs(x64) ** np.float64(np.float32(1.7)), special.erf(x64), np.tanh(x64),
                    np.arctan2(x64, 1.5), np.log1p(np.abs(x64)),
                    np.fmod(x64, np.float64(np.float32(0.7))) + np.rint(x64)], axis=1)
    np.testing.assert_allclose(from_device(do, (n, 6), np.float32), ref, rtol=3e-6, atol=3e-7)  # a few ulp
    q = (xd * 1e6).astype(np.int64)
    cq = np.trunc(q / 7).astype(np.int64) + np.fmod(q, 13)
    refd = np.stack([np.abs(xd) ** 1.3, xd / (xd + 3.0) + np.sqrt(np.abs(xd)), cq.astype(np.float64)], axis=1)
    got = from_device(dod, (n, 3), np.float64)
    np.testing.assert_allclose(got[:, :2], refd[:, :2], rtol=1e-15)
    np.testing.assert_array_equal(got[:, 2], refd[:, 2])


def test_device_assert_fails_the_launch_with_cuda_error_assert(loaded: Any, corpus_ptx: bytes) -> None:
    own = check(cu.cuCtxCreate(None, 0, check(cu.cuDeviceGet(0))))  # the assert poisons this context only
    try:
        _assert_in_current_context(check(cu.cuModuleLoadData(corpus_ptx)))
    finally:
        check(cu.cuCtxDestroy(own))


def _assert_in_current_context(module: Any) -> None:
    def kernels(name: str) -> Any:
        return check(cu.cuModuleGetFunction(module, name.encode()))

    x = np.arange(32, dtype=np.int32)
    dx, dy = to_device(x), to_device(np.zeros(32, np.int32))
    check(launch(kernels("checked"), (1, 1, 1), (32, 1, 1), [(dx, PTR), (dy, PTR)]))
    np.testing.assert_array_equal(from_device(dy, 32, np.int32), 2 * x)
    x[17] = -1
    check(cu.cuMemcpyHtoD(dx, x, x.nbytes))
    check(launch(kernels("checked"), (1, 1, 1), (32, 1, 1), [(dx, PTR), (dy, PTR)]))
    assert cu.cuStreamSynchronize(None)[0] == cu.CUresult.CUDA_ERROR_ASSERT
    text = report()
    assert "x[i] >= 0" in text and "thread (17, 0, 0)" in text
    assert cu.cuCtxSynchronize()[0] == cu.CUresult.CUDA_ERROR_ASSERT  # sticky, as on a GPU


def _lanes(v: np.ndarray, width: int, signed: bool) -> np.ndarray:
    parts = np.stack([(v.astype(np.int64) >> (k * width)) & ((1 << width) - 1) for k in range(32 // width)], 1)
    return np.where(parts >= 1 << (width - 1), parts - (1 << width), parts) if signed else parts


def _pack(parts: np.ndarray, width: int) -> np.ndarray:
    return sum((parts[:, k] & ((1 << width) - 1)) << (k * width) for k in range(parts.shape[1])).astype(np.uint32)


def test_simd_and_integer_intrinsics_block_votes_and_atomics(kernels: Any, rng: np.random.Generator) -> None:
    n = 64
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b[::7] = a[::7]
    da, db, do = to_device(a), to_device(b), to_device(np.zeros(12 * n, np.uint32))
    datom = to_device(np.array([0, 5, 0xFFFFFFFF, 0], np.uint32))
    d64 = to_device(np.array([2**63, 0, 0], np.uint64))
    check(launch(kernels("int_intrinsics"), (1, 1, 1), (n, 1, 1), [(da, PTR), (db, PTR), (do, PTR), (datom, PTR),
                                                                    (d64, PTR)]))
    o = from_device(do, (n, 12), np.uint32)
    ua, ub = _lanes(a, 8, False), _lanes(b, 8, False)
    sa, sb = _lanes(a, 16, True), _lanes(b, 16, True)
    np.testing.assert_array_equal(o[:, 0], _pack(_lanes(a, 16, False) + _lanes(b, 16, False), 16))
    np.testing.assert_array_equal(o[:, 1], _pack(np.abs(ua - ub), 8))
    np.testing.assert_array_equal(o[:, 2], _pack(np.where(ua > ub, 0xFF, 0), 8))
    np.testing.assert_array_equal(o[:, 3], _pack(np.maximum(sa, sb), 16))
    np.testing.assert_array_equal(o[:, 4], _pack(np.clip(_lanes(a, 8, True) - _lanes(b, 8, True), -128, 127), 8))
    ai, bi = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    low24 = ((ai & 0xFFFFFF) ^ 0x800000) - 0x800000
    mul = (low24 * -3 + (a.astype(np.int64) & 0xFFFFFF) * 7) & 0xFFFFFFFF
    np.testing.assert_array_equal(o[:, 5], mul.astype(np.uint32))
    np.testing.assert_array_equal(o[:, 6], ((ai + bi) >> 1).astype(np.int32).view(np.uint32))
    np.testing.assert_array_equal(o[:, 7], ((a.astype(np.int64) + b + 1) >> 1).astype(np.uint32))
    np.testing.assert_array_equal(o[:, 8], (np.abs(ai - bi) + 1).astype(np.uint32))
    block = int((a > b).sum()) + (int((a != 0).all()) << 10) + (int((a == b).any()) << 11)
    np.testing.assert_array_equal(o[:, 9], block)
    lane = np.arange(n) % 32
    up = np.where(lane % 16 >= 3, np.arange(n) - 3, np.arange(n))
    np.testing.assert_array_equal(o[:, 10], a[up])
    np.testing.assert_array_equal(o[:, 11], a[np.arange(n) - lane % 8 + 5])
    inc = 0
    for _ in range(n):
        inc = 0 if inc >= 17 else inc + 1
    dec = 5
    for _ in range(n):
        dec = 9 if dec == 0 or dec > 9 else dec - 1
    mask = 0xFFFFFFFF
    for i in range(n):
        mask &= (~(1 << (i & 31)) & 0xFFFFFFFF) | int(a[i] & 1)
    ors = 0
    for i in range(n):
        ors |= 1 << (i % 29)
    np.testing.assert_array_equal(from_device(datom, 4, np.uint32), [inc, dec, mask, ors])
    np.testing.assert_array_equal(from_device(d64, 3, np.uint64),
                                  [1000 - (n - 1), int((a.astype(np.uint64) << np.uint64(20)).max()), 2 * n])


def _directed(exact: np.ndarray, mode: str) -> np.ndarray:
    """float64 -> float32 with rounding toward zero / up / down (exact is representable in float64)."""
    near = exact.astype(np.float32)
    back = near.astype(np.float64)
    inf32 = np.float32(np.inf)
    if mode == "rz":
        fix = np.abs(back) > np.abs(exact)
        return np.where(fix, np.nextafter(near, np.float32(0)), near)
    if mode == "ru":
        return np.where(back < exact, np.nextafter(near, inf32), near)
    return np.where(back > exact, np.nextafter(near, -inf32), near)


def test_directed_rounding_intrinsics(kernels: Any, rng: np.random.Generator) -> None:
    x = (rng.standard_normal(64) * 10).astype(np.float32)
    dx, do = to_device(x), to_device(np.zeros(8 * 64, np.float32))
    check(launch(kernels("round_intrinsics"), (1, 1, 1), (64, 1, 1), [(dx, PTR), (do, PTR)]))
    o = from_device(do, (64, 8), np.float32)
    v, w = x.astype(np.float64), np.roll(x, -1).astype(np.float64)
    np.testing.assert_array_equal(o[:, 0], _directed(v + w, "rz"))  # sums/products of floats are exact in f64
    np.testing.assert_array_equal(o[:, 1], _directed(v * w, "ru"))
    q = (v / w).astype(np.float32).astype(np.float64)  # nearest quotient; its residual sign gives the direction
    below = np.sign(v - q * w) * np.sign(w)
    np.testing.assert_array_equal(o[:, 2], np.where(below < 0, np.nextafter(q.astype(np.float32),
                                                                             np.float32(-np.inf)), q.astype(np.float32)))
    np.testing.assert_array_equal(o[:, 3], _directed(v * w + 1.0, "rd"))  # v*w exact in f64, +1 exact too
    r = np.sqrt(np.abs(v)).astype(np.float32)
    rr = r.astype(np.float64)
    np.testing.assert_array_equal(o[:, 4], np.where(rr * rr < np.abs(v), np.nextafter(r, np.float32(np.inf)), r))
    rc = (1.0 / w).astype(np.float32)
    toward0 = np.abs(rc.astype(np.float64) * w) > 1.0
    np.testing.assert_array_equal(o[:, 5], np.where(toward0, np.nextafter(rc, np.float32(0)), rc))
    np.testing.assert_array_equal(o[:, 6], _directed(x.view(np.int32).astype(np.float64), "rd"))
    rn = np.rint((x * np.float32(1000)).astype(np.float64)).astype(np.float32)  # v * 1000.f rounds in f32 first
    np.testing.assert_array_equal(o[:, 7], rn + np.clip(x, 0, 1))


def test_fp8_conversions(kernels: Any, rng: np.random.Generator) -> None:
    n = 128
    a = np.concatenate([rng.standard_normal(n - 8) * 40, [0.0, -0.0, 500.0, -1e6, 1e-5, np.inf, np.nan, 0.1]])
    a = a.astype(np.float32)
    da, d4, d5, dback = to_device(a), to_device(np.zeros(n, np.uint8)), to_device(np.zeros(n, np.uint8)), to_device(
        np.zeros(2 * n, np.float32))
    check(launch(kernels("fp8_round_trip"), (1, 1, 1), (n, 1, 1), [(da, PTR), (d4, PTR), (d5, PTR), (dback, PTR)]))
    back = from_device(dback, (n, 2), np.float32)
    for col, (dev, dt, largest) in enumerate(((d4, ml_dtypes.float8_e4m3fn, 448.0),
                                              (d5, ml_dtypes.float8_e5m2, 57344.0))):
        with np.errstate(invalid="ignore"):
            ref = np.clip(a, -largest, largest).astype(dt)  # .satfinite: overflow and infinity clamp, NaN stays
        got = from_device(dev, n, np.uint8)
        nan = np.isnan(a)
        np.testing.assert_array_equal(got[~nan], ref.view(np.uint8)[~nan])
        assert np.isnan(got.view(dt)[nan].astype(np.float32)).all()
        np.testing.assert_array_equal(back[~nan, col], ref[~nan].astype(np.float32))
