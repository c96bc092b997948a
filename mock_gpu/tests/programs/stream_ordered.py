"""Runtime API: stream-ordered allocation on a non-blocking stream, the default pool's release threshold, events
timing the loop, and the result checked against numpy."""

import ctypes
import math
import sys

import numpy as np
from _common import check, compile_module
from cuda.bindings import driver as cuda
from cuda.bindings import runtime as cudart

SOURCE = """
extern "C" __global__ void vectorAddGPU(const float *a, const float *b, float *c, int N)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) c[idx] = a[idx] + b[idx];
}
"""


def main():
    check(cudart.cudaSetDevice(0))
    if not check(cudart.cudaDeviceGetAttribute(cuda.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0)):
        sys.exit("memory pools not supported")
    kernel = check(cuda.cuModuleGetFunction(compile_module(SOURCE), b"vectorAddGPU"))
    n = 1 << 16
    rng = np.random.default_rng(2)
    a, b, c = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32), np.zeros(n, np.float32)
    stream = check(cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking))
    start, end = check(cudart.cudaEventCreate()), check(cudart.cudaEventCreate())
    pool = check(cudart.cudaDeviceGetDefaultMemPool(0))
    threshold = cuda.cuuint64_t(ctypes.c_uint64(-1).value)
    check(cudart.cudaMemPoolSetAttribute(pool, cudart.cudaMemPoolAttr.cudaMemPoolAttrReleaseThreshold, threshold))
    check(cudart.cudaEventRecord(start, stream))
    for _ in range(3):
        d_a, d_b, d_c = (check(cudart.cudaMallocAsync(a.nbytes, stream)) for _ in range(3))
        check(cudart.cudaMemcpyAsync(d_a, a, a.nbytes, cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, stream))
        check(cudart.cudaMemcpyAsync(d_b, b, b.nbytes, cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, stream))
        block = cudart.dim3()
        block.x, block.y, block.z = 256, 1, 1
        args = ((d_a, d_b, d_c, n), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
        check(cuda.cuLaunchKernel(kernel, math.ceil(n / float(block.x)), 1, 1, block.x, block.y, block.z, 0, stream,
                                  args, 0))
        check(cudart.cudaFreeAsync(d_a, stream))
        check(cudart.cudaFreeAsync(d_b, stream))
        check(cudart.cudaMemcpyAsync(c, d_c, c.nbytes, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost, stream))
        check(cudart.cudaFreeAsync(d_c, stream))
        check(cudart.cudaStreamSynchronize(stream))
    check(cudart.cudaEventRecord(end, stream))
    check(cudart.cudaEventSynchronize(end))
    elapsed = check(cudart.cudaEventElapsedTime(start, end))
    check(cudart.cudaStreamDestroy(stream))
    if not (np.array_equal(c, a + b) and elapsed >= 0):
        sys.exit("FAILED")
    print(f"PASS ({elapsed:.3f} ms)")


if __name__ == "__main__":
    main()
