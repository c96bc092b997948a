"""Driver API vector add: a context from cuCtxCreate, a cubin from NVRTC, a grid size computed as a float and the
element count as a 0-d numpy array (both converted as cuda-python converts them)."""

import ctypes
import sys

import numpy as np
from _common import check, compile_module
from cuda.bindings import driver as cuda

SOURCE = """
extern "C" __global__ void add(const float *a, const float *b, float *c, int n)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def main():
    n = np.array(50000, dtype=np.uint32)
    check(cuda.cuInit(0))
    device = check(cuda.cuDeviceGet(0))
    context = check(cuda.cuCtxCreate(None, 0, device))
    if not check(cuda.cuDeviceGetAttribute(cuda.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device)):
        sys.exit("no unified addressing")
    module = compile_module(SOURCE)
    kernel = check(cuda.cuModuleGetFunction(module, b"add"))
    rng = np.random.default_rng(1)
    a, b = rng.random(int(n), dtype=np.float32), rng.random(int(n), dtype=np.float32)
    c = np.zeros_like(a)
    nbytes = n * a.itemsize
    da, db, dc = (check(cuda.cuMemAlloc(nbytes)) for _ in range(3))
    check(cuda.cuMemcpyHtoD(da, a, nbytes))
    check(cuda.cuMemcpyHtoD(db, b, nbytes))
    blocks = (n + 255) / 256
    args = ((da, db, dc, n), (None, None, None, ctypes.c_int))
    check(cuda.cuLaunchKernel(kernel, blocks, 1, 1, 256, 1, 1, 0, 0, args, 0))
    check(cuda.cuMemcpyDtoH(c, dc, nbytes))
    for ptr in (da, db, dc):
        check(cuda.cuMemFree(ptr))
    check(cuda.cuCtxDestroy(context))
    if not np.array_equal(c, a + b):
        sys.exit("Result = FAIL")
    print("Result = PASS")


if __name__ == "__main__":
    main()
