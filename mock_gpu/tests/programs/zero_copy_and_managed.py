"""Runtime API: kernels on mapped host memory (cudaHostAlloc with cudaHostAllocMapped, cudaHostGetDevicePointer,
cudaHostRegister) and on managed memory with system-scope atomics, read by the host through ctypes."""

import ctypes
import sys

import numpy as np
from _common import check, compile_module
from cuda.bindings import driver as cuda
from cuda.bindings import runtime as cudart

SOURCE = """
extern "C" __global__ void vectorAddGPU(float *a, float *b, float *c, int N)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) c[idx] = a[idx] + b[idx];
}
extern "C" __global__ void atomics(int *arr)
{
    unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
    atomicAdd_system(&arr[0], 10);
    atomicMax_system(&arr[1], tid);
    atomicInc_system((unsigned int *)&arr[2], 17);
}
"""


def main():
    check(cudart.cudaSetDevice(0))
    prop = check(cudart.cudaGetDeviceProperties(0))
    if not prop.canMapHostMemory or not prop.managedMemory:
        sys.exit("mapped or managed memory not supported")
    check(cudart.cudaSetDeviceFlags(cudart.cudaDeviceMapHost))
    module = compile_module(SOURCE)
    add, atomics = (check(cuda.cuModuleGetFunction(module, name)) for name in (b"vectorAddGPU", b"atomics"))
    n = 4096
    ptrs = [check(cudart.cudaHostAlloc(n * 4, cudart.cudaHostAllocMapped)) for _ in range(2)]
    a, b = ((ctypes.c_float * n).from_address(p) for p in ptrs)
    c = np.zeros(n, np.float32)  # pageable memory, registered below
    check(cudart.cudaHostRegister(c, c.nbytes, cudart.cudaHostRegisterMapped))
    for i in range(n):
        a[i], b[i] = i * 0.5, 1.0
    d_a, d_b = (check(cudart.cudaHostGetDevicePointer(x, 0)) for x in (a, b))
    d_c = check(cudart.cudaHostGetDevicePointer(c, 0))
    args = ((d_a, d_b, d_c, n), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int))
    check(cuda.cuLaunchKernel(add, n // 256, 1, 1, 256, 1, 1, 0, cuda.CU_STREAM_LEGACY, args, 0))
    check(cudart.cudaDeviceSynchronize())
    zero_copy_ok = np.array_equal(c, np.arange(n, dtype=np.float32) * 0.5 + 1)
    check(cudart.cudaHostUnregister(c))
    for x in (a, b):
        check(cudart.cudaFreeHost(x))

    managed = check(cudart.cudaMallocManaged(3 * 4, cudart.cudaMemAttachGlobal))
    arr = (ctypes.c_int * 3).from_address(managed)
    arr[0] = arr[1] = arr[2] = 0
    check(cuda.cuLaunchKernel(atomics, 4, 1, 1, 64, 1, 1, 0, cuda.CU_STREAM_LEGACY, ((managed,), (ctypes.c_void_p,)), 0))
    check(cudart.cudaDeviceSynchronize())
    inc = 0
    for _ in range(256):
        inc = 0 if inc >= 17 else inc + 1
    atomics_ok = list(arr) == [2560, 255, inc]
    check(cudart.cudaFree(managed))
    if not (zero_copy_ok and atomics_ok):
        sys.exit(f"FAILED zero copy {zero_copy_ok}, atomics {atomics_ok}")
    print("PASS")


if __name__ == "__main__":
    main()
