"""Driver API virtual memory management: reserve an address range, back it with cuMemCreate chunks mapped by
cuMemMap, grant access with cuMemSetAccess, and run a kernel on it."""

import ctypes
import sys

import numpy as np
from _common import check, compile_module
from cuda.bindings import driver as cuda

SOURCE = """
extern "C" __global__ void scale(float *x, float f, int n)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) x[i] *= f;
}
"""


def allocate(size, device):
    prop = cuda.CUmemAllocationProp()
    prop.type = cuda.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cuda.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device
    granularity = check(cuda.cuMemGetAllocationGranularity(
        prop, cuda.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
    size = -(-size // (2 * granularity)) * 2 * granularity
    dptr = check(cuda.cuMemAddressReserve(size, 0, cuda.CUdeviceptr(0), 0))
    stripe = size // 2
    for i in range(2):
        handle = check(cuda.cuMemCreate(stripe, prop, 0))
        check(cuda.cuMemMap(int(dptr) + i * stripe, stripe, 0, handle, 0))
        check(cuda.cuMemRelease(handle))
    access = cuda.CUmemAccessDesc()
    access.location.type = cuda.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = cuda.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    check(cuda.cuMemSetAccess(dptr, size, [access], 1))
    return dptr, size


def main():
    check(cuda.cuInit(0))
    device = check(cuda.cuDeviceGet(0))
    attribute = cuda.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_VIRTUAL_ADDRESS_MANAGEMENT_SUPPORTED
    if not check(cuda.cuDeviceGetAttribute(attribute, device)):
        sys.exit("no virtual address management")
    context = check(cuda.cuCtxCreate(None, 0, device))
    kernel = check(cuda.cuModuleGetFunction(compile_module(SOURCE), b"scale"))
    n = 3 << 20  # spans both 2 MiB-aligned chunks
    host = np.arange(n, dtype=np.float32)
    dptr, size = allocate(host.nbytes, int(device))
    check(cuda.cuMemcpyHtoD(dptr, host, host.nbytes))
    args = ((dptr, 2.0, n), (None, ctypes.c_float, ctypes.c_int))
    check(cuda.cuLaunchKernel(kernel, (n + 255) // 256, 1, 1, 256, 1, 1, 0, 0, args, 0))
    out = np.empty_like(host)
    check(cuda.cuMemcpyDtoH(out, dptr, out.nbytes))
    check(cuda.cuMemUnmap(dptr, size))
    check(cuda.cuMemAddressFree(dptr, size))
    check(cuda.cuCtxDestroy(context))
    if not np.array_equal(out, host * 2):
        sys.exit("Result = FAIL")
    print("Result = PASS")


if __name__ == "__main__":
    main()
