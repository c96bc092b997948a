"""The legacy ``cuda.cuda``/``cuda.cudart`` names, PTX linked with cuLinkCreate/AddData/Complete, a module loaded
from a file with cuModuleLoad, the context stack (cuCtxPushCurrent/PopCurrent), primary context flags, device uuid
and the driver's exact error strings."""

import ctypes
import os
import sys
import tempfile

import numpy as np
from cuda import cuda, cudart, nvrtc

SOURCE = b"""
extern "C" __global__ void iota(int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3 * i;
}
"""


def check(result):
    if result[0].value:
        raise RuntimeError(f"CUDA error {result[0]!r}")
    return None if len(result) == 1 else result[1] if len(result) == 2 else result[1:]


def ptx():
    prog = check(nvrtc.nvrtcCreateProgram(SOURCE, b"iota.cu", 0, None, None))
    opts = [b"--gpu-architecture=compute_80"]
    check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts))
    text = b" " * check(nvrtc.nvrtcGetPTXSize(prog))
    check(nvrtc.nvrtcGetPTX(prog, text))
    return text


def run(module, n=1000):
    kernel = check(cuda.cuModuleGetFunction(module, b"iota"))
    out = check(cuda.cuMemAlloc(4 * n))
    check(cuda.cuLaunchKernel(kernel, (n + 127) // 128, 1, 1, 128, 1, 1, 0, 0, ((out, n), (None, ctypes.c_int)), 0))
    host = np.zeros(n, np.int32)
    check(cuda.cuMemcpyDtoH(host, out, host.nbytes))
    check(cuda.cuMemFree(out))
    return np.array_equal(host, 3 * np.arange(n, dtype=np.int32))


def main():
    check(cuda.cuInit(0))
    device = check(cuda.cuDeviceGet(0))
    check(cuda.cuDevicePrimaryCtxSetFlags(device, cuda.CUctx_flags.CU_CTX_SCHED_BLOCKING_SYNC))
    primary = check(cuda.cuDevicePrimaryCtxRetain(device))
    check(cuda.cuCtxPushCurrent(primary))
    uuid = check(cuda.cuDeviceGetUuid(device))
    code = ptx()
    link = check(cuda.cuLinkCreate(0, [], []))
    check(cuda.cuLinkAddData(link, cuda.CUjitInputType.CU_JIT_INPUT_PTX, code, len(code), b"iota.ptx", 0, [], []))
    image, size = check(cuda.cuLinkComplete(link))
    linked = run(check(cuda.cuModuleLoadData(image)))
    check(cuda.cuLinkDestroy(link))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "iota.ptx")
        with open(path, "wb") as f:
            f.write(code.rstrip(b"\x00"))
        from_file = run(check(cuda.cuModuleLoad(path.encode())))
    strings = (cuda.cuGetErrorString(cuda.CUresult.CUDA_ERROR_INVALID_DEVICE)[1],
               cudart.cudaGetErrorString(cudart.cudaError_t.cudaErrorInvalidDevice)[1])
    popped = check(cuda.cuCtxPopCurrent())
    ok = linked and from_file and size > 0 and len(uuid.bytes) == 16 and int(popped) == int(primary)
    ok = ok and strings == (b"invalid device ordinal", b"invalid device ordinal")
    check(cuda.cuDevicePrimaryCtxRelease(device))
    if not ok:
        sys.exit(f"FAILED linked={linked} file={from_file} strings={strings}")
    print("PASS")


if __name__ == "__main__":
    main()
