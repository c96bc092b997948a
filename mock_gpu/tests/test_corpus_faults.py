"""Planted faults: each gives the CUresult a real GPU gives and a report naming kernel, thread and address."""

from __future__ import annotations

import ctypes
import logging
import re

import numpy as np
import pytest
from _driver_util import I32, PTR, check, compile_cuda, from_device, launch, load, report, to_device

from mock_gpu import driver as cu

R = cu.CUresult
STORE = r'''extern "C" __global__ void fill(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = (float)i; }'''


@pytest.mark.parametrize(("exact", "n", "first_bad"), [("1", 101, 100), ("0", 129, 128)], ids=["exact", "granule"])
def test_out_of_bounds_store_is_illegal_address_and_sticky(make_system, exact, n, first_bad) -> None:
    make_system(exact_bounds=exact)
    _, (fn,) = load(STORE, "fill")
    out = check(cu.cuMemAlloc(100 * 4))  # its granule ends at 512 bytes: float 128
    check(launch(fn, (1, 1, 1), (256, 1, 1), [(out, PTR), (n, I32)]))  # the fault shows when the kernel runs
    assert cu.cuStreamSynchronize(None) == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    text = report()
    assert "fill" in text and "out-of-bounds" in text
    assert f"{int(out) + 4 * first_bad:#x}" in text
    assert re.search(rf"thread\D*{first_bad}\b", text), text
    # sticky: every later call on the context fails the same way, until the primary context is reset
    assert cu.cuMemAlloc(16) == (R.CUDA_ERROR_ILLEGAL_ADDRESS, None)
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    check(cu.cuDevicePrimaryCtxReset(0))
    check(cu.cuMemAlloc(16))


def test_a_store_into_the_granule_padding_runs_and_warns_once_per_kernel(ctx, caplog) -> None:
    """tinygrad's conv1d kernel reads 4 bytes past a 44-byte buffer: a GPU does not fault inside the allocation's
    256-byte granule, so neither does the mock; it warns, once per kernel."""
    _, (fn,) = load(STORE, "fill")
    out = check(cu.cuMemAlloc(11 * 4))
    with caplog.at_level(logging.WARNING, logger="mock_gpu"):
        for _ in range(2):
            check(launch(fn, (1, 1, 1), (32, 1, 1), [(out, PTR), (12, I32)]))
            check(cu.cuCtxSynchronize())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "'fill'" in warnings[0] and f"{int(out) + 44:#x}" in warnings[0]
    assert "ends 4 bytes past the end of the 44-byte allocation" in warnings[0]
    assert from_device(out, 11, np.float32).tolist() == list(range(11))
    check(cu.cuMemFree(out))


def test_a_misaligned_load_is_misaligned_address(ctx) -> None:
    """A 4-byte load from an odd address: CUDA_ERROR_MISALIGNED_ADDRESS (716) as on a GPU, not 700."""
    _, (fn,) = load(r'''extern "C" __global__ void rd(const char* p, int* out) { out[0] = *(const int*)(p + 1); }''',
                    "rd")
    buf = check(cu.cuMemAlloc(64))
    check(launch(fn, (1, 1, 1), (1, 1, 1), [(buf, PTR), (buf, PTR)]))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_MISALIGNED_ADDRESS,)
    assert "misaligned" in report()


def test_use_after_free_is_illegal_address(ctx) -> None:
    _, (fn,) = load(STORE, "fill")
    out = check(cu.cuMemAlloc(64 * 4))
    check(cu.cuMemFree(out))
    check(launch(fn, (1, 1, 1), (64, 1, 1), [(out, PTR), (64, I32)]))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    text = report()
    assert "fill" in text and "free" in text and f"{int(out):#x}" in text


def test_divergent_barrier_is_launch_failure(ctx) -> None:
    src = r'''extern "C" __global__ void split(int* out) {
        if (threadIdx.x < 16) { __syncthreads(); out[threadIdx.x] = 1; }
        else { out[threadIdx.x] = 2; __syncthreads(); } }'''
    _, (fn,) = load(src, "split")
    out = to_device(np.zeros(64, np.int32))
    check(launch(fn, (1, 1, 1), (64, 1, 1), [(out, PTR)]))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_LAUNCH_FAILED,)
    text = report()
    assert "barrier" in text and "split" in text
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_LAUNCH_FAILED,)  # sticky


def test_launch_of_unloaded_module_is_invalid_handle(ctx) -> None:
    module, (fn,) = load(STORE, "fill")
    out = check(cu.cuMemAlloc(64 * 4))
    check(cu.cuModuleUnload(module))
    assert launch(fn, (1, 1, 1), (64, 1, 1), [(out, PTR), (64, I32)]) == (R.CUDA_ERROR_INVALID_HANDLE,)
    check(cu.cuMemAlloc(16))  # not sticky


def test_bad_launches_are_invalid_value_and_run_nothing(ctx) -> None:
    _, (fn,) = load(STORE, "fill")
    out = to_device(np.full(64, -1.0, np.float32))
    assert launch(fn, (1, 1, 1), (64, 1, 1), [(out, PTR)]) == (R.CUDA_ERROR_INVALID_VALUE,)  # one param missing
    assert "takes 2 parameters" in report()
    assert launch(fn, (1, 1, 1), (64, 1, 1), [(out, PTR), (64, ctypes.c_uint64)]) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert launch(fn, (1, 1, 1), (1025, 1, 1), [(out, PTR), (64, I32)]) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert launch(fn, (1, 1, 1), (8, 8, 65), [(out, PTR), (64, I32)]) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert launch(fn, (0, 1, 1), (64, 1, 1), [(out, PTR), (64, I32)]) == (R.CUDA_ERROR_INVALID_VALUE,)
    np.testing.assert_array_equal(from_device(out, 64, np.float32), -1.0)


def test_invalid_ptx_reports_line_and_text(ctx) -> None:
    ptx = compile_cuda(STORE).replace(b"st.global.f32", b"frobnicate.global.f32")
    assert cu.cuModuleLoadData(ptx) == (R.CUDA_ERROR_INVALID_PTX, None)
    text = report()
    line = next(i for i, src_line in enumerate(ptx.decode().splitlines(), 1) if "frobnicate" in src_line)
    assert f"line {line}" in text and "frobnicate" in text


def test_cubin_image_is_invalid_image(ctx) -> None:
    assert cu.cuModuleLoadData(b"\x7fELF\x02\x01\x01" + bytes(64)) == (R.CUDA_ERROR_INVALID_IMAGE, None)


def test_out_of_memory_with_small_mockgpu_memory(make_system) -> None:
    make_system(memory="64KiB")
    check(cu.cuMemAlloc(48 * 1024))
    assert cu.cuMemAlloc(32 * 1024) == (R.CUDA_ERROR_OUT_OF_MEMORY, None)
    assert "65536" in report()
