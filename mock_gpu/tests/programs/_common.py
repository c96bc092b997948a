"""Helpers of the test programs, in the style of the cuda-python samples' common/ folder: error checking that
raises on any failed call, and NVRTC compilation to a cubin for the current device (as the samples compile)."""

import numpy as np
from cuda.bindings import driver as cuda
from cuda.bindings import nvrtc
from cuda.bindings import runtime as cudart


def check(result):
    """The outputs of a cuda-python call; RuntimeError naming the error when it failed."""
    if result[0].value:
        raise RuntimeError(f"CUDA error code={result[0].value} ({result[0]!r})")
    return None if len(result) == 1 else result[1] if len(result) == 2 else result[1:]


def compile_module(source, device=0):
    """NVRTC-compile ``source`` to a cubin for ``device`` and load it with cuModuleLoadData."""
    prog = check(nvrtc.nvrtcCreateProgram(source.encode(), b"program.cu", 0, None, None))
    check(cudart.cudaFree(0))
    major = check(cudart.cudaDeviceGetAttribute(cudart.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, device))
    minor = check(cudart.cudaDeviceGetAttribute(cudart.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, device))
    opts = [b"--fmad=true", f"--gpu-architecture=sm_{major}{minor}".encode(), b"-default-device"]
    check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts))
    size = check(nvrtc.nvrtcGetCUBINSize(prog))
    data = b" " * size
    check(nvrtc.nvrtcGetCUBIN(prog, data))
    check(nvrtc.nvrtcDestroyProgram(prog))
    return check(cuda.cuModuleLoadData(np.char.array(data)))
