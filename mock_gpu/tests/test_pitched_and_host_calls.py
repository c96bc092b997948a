"""Pitched 2-D memory (CUDA driver API 6.13: cuMemAllocPitch, cuMemsetD2D*, cuMemcpy2D*), cuMemGetAddressRange and
host functions in stream order (6.22 cuLaunchHostFunc), checked against numpy on the same rows."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from _driver_util import check, from_device, to_device

from mock_gpu import driver as cu

R = cu.CUresult
M = cu.CUmemorytype


def test_alloc_pitch_pads_rows_to_512_bytes_and_rejects_bad_element_sizes(ctx: Any) -> None:
    ptr, pitch = check(cu.cuMemAllocPitch(100, 3, 4))
    assert pitch == 512 and int(ptr) % 256 == 0
    base, size = check(cu.cuMemGetAddressRange(cu.CUdeviceptr(int(ptr) + 700)))
    assert (int(base), size) == (int(ptr), 3 * 512)
    assert cu.cuMemAllocPitch(100, 3, 2) == (R.CUDA_ERROR_INVALID_VALUE, None, None)
    assert cu.cuMemAllocPitch(0, 3, 4) == (R.CUDA_ERROR_INVALID_VALUE, None, None)


def test_address_range_of_an_address_in_no_allocation_is_not_found(ctx: Any) -> None:
    ptr = check(cu.cuMemAlloc(64))
    check(cu.cuMemFree(ptr))
    assert cu.cuMemGetAddressRange(ptr) == (R.CUDA_ERROR_NOT_FOUND, None, None)


def _copy_2d(**fields: Any) -> Any:
    p = cu.CUDA_MEMCPY2D()
    for name, value in fields.items():
        setattr(p, name, value)
    return p


@pytest.mark.parametrize("asynchronous", [False, True], ids=["cuMemcpy2D", "cuMemcpy2DAsync"])
def test_2d_copies_move_a_window_of_rows_between_host_and_pitched_device_memory(ctx: Any, asynchronous: bool) -> None:
    host = np.arange(6 * 40, dtype=np.uint8).reshape(6, 40)
    ptr, pitch = check(cu.cuMemAllocPitch(32, 6, 4))
    up = _copy_2d(srcMemoryType=M.CU_MEMORYTYPE_HOST, srcHost=host, srcPitch=40, srcXInBytes=4, srcY=1,
                  dstMemoryType=M.CU_MEMORYTYPE_DEVICE, dstDevice=ptr, dstPitch=pitch, WidthInBytes=32, Height=5)
    check(cu.cuMemcpy2DAsync(up, None) if asynchronous else cu.cuMemcpy2D(up))
    check(cu.cuCtxSynchronize())
    rows = from_device(ptr, pitch * 6, np.uint8).reshape(6, pitch)
    np.testing.assert_array_equal(rows[:5, :32], host[1:6, 4:36])
    back = np.zeros((5, 32), np.uint8)
    down = _copy_2d(srcMemoryType=M.CU_MEMORYTYPE_DEVICE, srcDevice=ptr, srcPitch=pitch,
                    dstMemoryType=M.CU_MEMORYTYPE_HOST, dstHost=back, dstPitch=32, WidthInBytes=32, Height=5)
    check(cu.cuMemcpy2D(down))
    np.testing.assert_array_equal(back, host[1:6, 4:36])


def test_2d_copies_past_the_allocation_or_with_a_short_pitch_are_invalid_value(ctx: Any) -> None:
    ptr, pitch = check(cu.cuMemAllocPitch(32, 2, 4))
    host = np.zeros(4 * 32, np.uint8)
    too_tall = _copy_2d(srcMemoryType=M.CU_MEMORYTYPE_HOST, srcHost=host, srcPitch=32,
                        dstMemoryType=M.CU_MEMORYTYPE_DEVICE, dstDevice=ptr, dstPitch=pitch, WidthInBytes=32, Height=4)
    assert cu.cuMemcpy2D(too_tall) == (R.CUDA_ERROR_INVALID_VALUE,)
    short_pitch = _copy_2d(srcMemoryType=M.CU_MEMORYTYPE_HOST, srcHost=host, srcPitch=16,
                           dstMemoryType=M.CU_MEMORYTYPE_DEVICE, dstDevice=ptr, dstPitch=pitch, WidthInBytes=32,
                           Height=2)
    assert cu.cuMemcpy2D(short_pitch) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemcpy2D(_copy_2d(WidthInBytes=32, Height=1)) == (R.CUDA_ERROR_INVALID_VALUE,)  # types unset
    check(cu.cuCtxSynchronize())


@pytest.mark.parametrize(("call", "size", "value"), [
    (cu.cuMemsetD2D8, 1, 0xAB), (cu.cuMemsetD2D16, 2, 0xBEEF), (cu.cuMemsetD2D32, 4, 0xDEADBEEF)])
def test_2d_memsets_set_a_window_of_each_row_and_nothing_between(ctx: Any, call: Any, size: int, value: int) -> None:
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[size]
    pitch, rows, width = 64, 3, 5
    ptr = to_device(np.zeros(pitch * rows // size, dtype))
    check(call(ptr, pitch, value, width, rows))
    want = np.zeros((rows, pitch // size), dtype)
    want[:, :width] = value
    np.testing.assert_array_equal(from_device(ptr, want.size, dtype).reshape(want.shape), want)
    assert call(ptr, 2, value, width, rows) == (R.CUDA_ERROR_INVALID_VALUE,)  # rows would overlap


def test_memset_2d_async_runs_in_stream_order(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(0))
    ptr = to_device(np.zeros(128, np.uint8))
    check(cu.cuMemsetD2D8Async(ptr, 64, 7, 8, 2, stream))
    check(cu.cuStreamSynchronize(stream))
    got = from_device(ptr, 128, np.uint8).reshape(2, 64)
    assert (got[:, :8] == 7).all() and not got[:, 8:].any()


def test_a_host_function_runs_after_the_stream_s_earlier_work_and_before_later_work(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(0))
    ptr = to_device(np.zeros(4, np.uint32))
    pinned = check(cu.cuMemAllocHost(16))
    seen: list[int] = []

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def record(user_data: int) -> None:  # what the earlier copy left in pinned memory, and the user data
        seen.extend([int((ctypes.c_uint32 * 4).from_address(pinned)[0]), int(user_data)])

    check(cu.cuMemsetD32Async(ptr, 5, 4, stream))
    check(cu.cuMemcpyDtoHAsync(pinned, ptr, 16, stream))
    fn = cu.CUhostFn(ctypes.cast(record, ctypes.c_void_p).value)
    check(cu.cuLaunchHostFunc(stream, fn, 0x1234))
    assert seen == []  # it runs in stream order, not when enqueued
    check(cu.cuStreamSynchronize(stream))
    assert seen == [5, 0x1234]
    assert cu.cuLaunchHostFunc(stream, cu.CUhostFn(0), None) == (R.CUDA_ERROR_INVALID_VALUE,)
    check(cu.cuMemFreeHost(pinned))


def test_the_runtime_s_pitched_allocation_2d_copies_memsets_and_host_functions(ctx: Any) -> None:
    from mock_gpu import runtime as rt

    K = rt.cudaMemcpyKind
    err, ptr, pitch = rt.cudaMallocPitch(24, 4)
    assert err == rt.cudaError_t.cudaSuccess and pitch == 512
    host = np.arange(4 * 24, dtype=np.uint8).reshape(4, 24)
    assert rt.cudaMemcpy2D(ptr, pitch, host, 24, 24, 4, K.cudaMemcpyHostToDevice)[0] == rt.cudaError_t.cudaSuccess
    assert rt.cudaMemset2D(ptr + pitch, pitch, 0x1FF, 8, 2)[0] == rt.cudaError_t.cudaSuccess  # low byte: 0xFF
    seen: list[int] = []
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda user_data: seen.append(int(user_data)))
    fn = rt.cudaHostFn_t(ctypes.cast(callback, ctypes.c_void_p).value)
    assert rt.cudaLaunchHostFunc(0, fn, 99)[0] == rt.cudaError_t.cudaSuccess
    back = np.zeros((4, 24), np.uint8)
    assert rt.cudaMemcpy2D(back, 24, ptr, pitch, 24, 4, K.cudaMemcpyDeviceToHost)[0] == rt.cudaError_t.cudaSuccess
    want = host.copy()
    want[1:3, :8] = 0xFF
    np.testing.assert_array_equal(back, want)
    assert seen == [99]  # the copy back waited for the legacy stream, the host function included
