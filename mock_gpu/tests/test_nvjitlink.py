"""nvJitLink through mock_gpu.nvjitlink (the module mock_gpu.install() puts in place of cuda.bindings.nvjitlink):
the cubin the real nvJitLink links from PTX, or from LTO-IR with -lto, loads and runs on the emulator; a link whose
PTX cannot be known still links, and its cubin is refused at load with the reason."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from _driver_util import I32, PTR, check, compile_cuda, from_device, launch, report, to_device

from mock_gpu import driver as cu

real = pytest.importorskip("cuda.bindings.nvjitlink")
from cuda.bindings._internal import nvjitlink as _inner  # noqa: E402

from mock_gpu import nvjitlink  # noqa: E402

try:
    _HAVE_LIB = _inner._inspect_function_pointer("__nvJitLinkVersion") != 0
except RuntimeError:
    _HAVE_LIB = False
pytestmark = pytest.mark.skipif(not _HAVE_LIB, reason="the nvJitLink library is not installed")

SAXPY = r'''extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }'''


def _link(inputs: list[tuple[Any, bytes]], options: list[str]) -> bytes:
    handle = nvjitlink.create(len(options), options)
    try:
        for kind, data in inputs:
            nvjitlink.add_data(handle, kind, data, len(data), "input")
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
    finally:
        nvjitlink.destroy(handle)
    return bytes(cubin)


def test_a_cubin_linked_from_ptx_runs_its_ptx(ctx: Any) -> None:
    cubin = _link([(real.InputType.PTX, compile_cuda(SAXPY))], ["-arch=sm_90"])
    assert cubin.startswith(b"\x7fELF")  # machine code from the real nvJitLink
    fn = check(cu.cuModuleGetFunction(check(cu.cuModuleLoadData(cubin)), b"saxpy"))
    x, y = np.arange(100, dtype=np.float32), np.ones(100, np.float32)
    dx, dy = to_device(x), to_device(y)
    check(launch(fn, (1, 1, 1), (128, 1, 1), [(2.0, ctypes.c_float), (dx, PTR), (dy, PTR), (100, I32)]))
    np.testing.assert_array_equal(from_device(dy, 100, np.float32), 2 * x + 1)


def test_a_cubin_the_real_nvjitlink_linked_is_refused_with_the_reason(ctx: Any) -> None:
    """Only the wrapper knows the PTX behind a cubin: one linked by the real module is machine code to the emulator."""
    ptx = compile_cuda(SAXPY.replace("saxpy", "saxpy_unregistered"))
    handle = real.create(1, ["-arch=sm_90"])
    try:
        real.add_data(handle, real.InputType.PTX, ptx, len(ptx), "input")
        real.complete(handle)
        cubin = bytearray(real.get_linked_cubin_size(handle))
        real.get_linked_cubin(handle, cubin)
    finally:
        real.destroy(handle)
    assert cu.cuModuleLoadData(bytes(cubin)) == (cu.CUresult.CUDA_ERROR_INVALID_IMAGE, None)
    assert "whose PTX is unknown" in report()
