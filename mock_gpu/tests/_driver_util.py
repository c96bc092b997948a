"""Shared helpers of the driver and corpus tests (imported by them; holds no tests and no fixtures, which live in
conftest.py): `check` for result tuples, NVRTC compilation, buffers and kernel launching."""

from __future__ import annotations

import ctypes
import functools
import glob
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import mock_gpu
from mock_gpu import driver as cu


def check(result: tuple) -> Any:
    """Assert the call succeeded and return its single output (or the tuple of outputs)."""
    err, *out = result
    assert err == cu.CUresult.CUDA_SUCCESS, f"{err!r}: {mock_gpu.last_error_report()}"
    return out[0] if len(out) == 1 else tuple(out) if out else None


def report() -> str:
    """The report of the last failed driver call (asserting there is one)."""
    text = mock_gpu.last_error_report()
    assert text is not None, "no driver call has failed"
    return text


def cuda_include_dir() -> str | None:
    """A directory holding cuda_fp16.h (CUDA_HOME/CUDA_PATH, /usr/local/cuda*), or None."""
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), *sorted(glob.glob("/usr/local/cuda*"))]
    for root in roots:
        if root and os.path.exists(os.path.join(root, "include", "cuda_fp16.h")):
            return os.path.join(root, "include")
    return None


@functools.cache
def compile_cuda(src: str, includes: bool = False) -> bytes:
    """PTX of CUDA C ``src`` from NVRTC for compute_90 (skips the test when NVRTC or needed headers are missing)."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-python) is not installed")
    opts = [b"--gpu-architecture=compute_90", b"-default-device"]
    if includes:
        inc = cuda_include_dir()
        if inc is None:
            pytest.skip("cuda_fp16.h not found (set CUDA_HOME to a CUDA toolkit with headers)")
        opts.append(f"-I{inc}".encode())
        if os.path.isdir(os.path.join(inc, "cccl")):  # CUDA 13 toolkits keep libcu++ (cuda/std/...) there
            opts.append(f"-I{os.path.join(inc, 'cccl')}".encode())
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        pytest.skip(f"NVRTC unusable: {err!r}")
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(size)  # NVRTC writes into it: never an (interned) bytes object
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"NVRTC failed to compile the test kernel: {log.decode(errors='replace')}")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = bytearray(size)  # NVRTC writes into it: never an (interned) bytes object
    nvrtc.nvrtcGetPTX(prog, ptx)
    return bytes(ptx)


def load(src: str, *names: str, includes: bool = False) -> tuple[Any, list[Any]]:
    """Load CUDA C ``src`` as a module in the current context; returns (module, [functions named ``names``])."""
    module = check(cu.cuModuleLoadData(compile_cuda(src, includes)))
    return module, [check(cu.cuModuleGetFunction(module, n.encode())) for n in names]


def to_device(array: np.ndarray) -> Any:
    """A device copy of ``array``."""
    ptr = check(cu.cuMemAlloc(max(array.nbytes, 1)))
    check(cu.cuMemcpyHtoD(ptr, np.ascontiguousarray(array), array.nbytes))
    return ptr


def from_device(ptr: Any, shape: Sequence[int] | int, dtype: Any) -> np.ndarray:
    """Copy a device buffer back as a numpy array of ``shape`` and ``dtype``."""
    out = np.zeros(shape, dtype)
    check(cu.cuMemcpyDtoH(out, ptr, out.nbytes))
    return out


def launch(fn: Any, grid: Sequence[int], block: Sequence[int], args: Sequence[tuple[Any, Any]], smem: int = 0,
           stream: Any = None) -> tuple:
    """cuLaunchKernel with cuda-python's (values, types) kernelParams; ``args``: (value, ctype or None) pairs.

    Returns the raw result tuple, so callers can check error codes.
    """
    values = tuple(v for v, _ in args)
    types = tuple(t for _, t in args)
    return cu.cuLaunchKernel(fn, *grid, *block, smem, stream, (values, types), 0)


PTR = None  # the kernelParams type of a CUdeviceptr argument (passed by reference, as cuda-python does)
I32, U32, U64, F32, F64 = ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_float, ctypes.c_double


# Hand-written PTX (no NVRTC needed): fill(out, value, n) sets out[i] = value for the n first u32; mirror(out, in)
# reverses one block's u32 values through dynamic shared memory (4 bytes per thread: launch with sharedMemBytes).
KERNELS_PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 4 .b8 dyn[];
.visible .entry fill(.param .u64 out, .param .u32 value, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [value];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.u32 %r3, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 ret;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry mirror(.param .u64 out, .param .u64 in)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ntid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r3, [%rd4];
    mov.u32 %r4, dyn;
    shl.b32 %r5, %r1, 2;
    add.u32 %r5, %r4, %r5;
    st.shared.u32 [%r5], %r3;
    bar.sync 0;
    sub.u32 %r6, %r2, %r1;
    sub.u32 %r6, %r6, 1;
    shl.b32 %r6, %r6, 2;
    add.u32 %r6, %r4, %r6;
    ld.shared.u32 %r7, [%r6];
    add.s64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r7;
    ret;
}
"""


def kernels() -> dict[str, Any]:
    """The functions of :data:`KERNELS_PTX`, loaded into the current context."""
    module = check(cu.cuModuleLoadData(KERNELS_PTX))
    return {name: check(cu.cuModuleGetFunction(module, name.encode())) for name in ("fill", "mirror")}


def fill(fn: Any, out: Any, value: int, n: int, stream: Any = None) -> None:
    """Enqueue fill(out, value, n) on ``stream`` (one thread per element, 128 per block)."""
    check(launch(fn, (-(-n // 128), 1, 1), (128, 1, 1), [(out, PTR), (value, U32), (n, U32)], stream=stream))


def pinned(nbytes: int) -> np.ndarray:
    """A uint8 numpy view of ``nbytes`` of page-locked host memory from cuMemHostAlloc."""
    address = check(cu.cuMemHostAlloc(nbytes, 0))
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
