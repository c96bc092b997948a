"""Driver API behaviour that needs no kernel: init, config, devices, contexts, memory, streams, events, errors."""

from __future__ import annotations

import ctypes
import time

import numpy as np
import pytest
from _driver_util import check, report

import mock_gpu
from mock_gpu import driver as cu
from mock_gpu.config import ConfigError, load_config, parse_arch, parse_size

R = cu.CUresult
A = cu.CUdevice_attribute


def test_calls_before_cuinit_are_not_initialized() -> None:
    mock_gpu.reset()
    assert cu.cuDeviceGetCount() == (R.CUDA_ERROR_NOT_INITIALIZED, None)
    assert cu.cuMemAlloc(16) == (R.CUDA_ERROR_NOT_INITIALIZED, None)


@pytest.mark.parametrize(("text", "expected"), [("4096", 4096), ("2GiB", 2 << 30), ("512MB", 512_000_000),
                                                ("1e9", 10**9), ("1.5KiB", 1536)])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize(("text", "cc"), [("sm_80", (8, 0)), ("86", (8, 6)), ("9.0", (9, 0)), ("sm_90a", (9, 0))])
def test_parse_arch(text: str, cc: tuple[int, int]) -> None:
    arch = parse_arch(text)
    assert (arch.major, arch.minor) == cc


@pytest.mark.parametrize("env", [{"MOCKGPU_MEMORY": "lots"}, {"MOCKGPU_MEMORY": "0"}, {"MOCKGPU_ARCH": "sm_42"},
                                 {"MOCKGPU_DEVICES": "0"}, {"MOCKGPU_DEVICES": "two"},
                                 {"MOCKGPU_EXACT_BOUNDS": "yes"}, {"MOCKGPU_DEFERRED": "2"}])
def test_invalid_config_is_rejected(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=next(iter(env))):
        load_config(env)


def test_cuinit_with_invalid_env_is_invalid_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOCKGPU_MEMORY", "12 parsecs")
    mock_gpu.reset()
    assert cu.cuInit(0) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert "MOCKGPU_MEMORY" in report()
    assert cu.cuDeviceGetCount() == (R.CUDA_ERROR_NOT_INITIALIZED, None)
    mock_gpu.reset()


def test_device_queries_follow_config(make_system) -> None:
    make_system(devices="3", arch="sm_80", memory="1GiB")
    assert check(cu.cuDeviceGetCount()) == 3
    dev = check(cu.cuDeviceGet(2))
    assert int(dev) == 2
    assert check(cu.cuDeviceComputeCapability(dev)) == (8, 0)
    assert check(cu.cuDeviceTotalMem(dev)) == 1 << 30
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) == 8
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) == 108
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)) == 166912
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev)) == 32
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, dev)) == 64
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev)) == 1
    name = check(cu.cuDeviceGetName(100, dev))
    assert len(name) == 100 and name.split(b"\0")[0] == b"NVIDIA A100-SXM4-40GB (mock_gpu)"
    assert cu.cuDeviceGet(3) == (R.CUDA_ERROR_INVALID_DEVICE, None)


def test_every_attribute_answers_and_unsupported_features_are_zero(ctx) -> None:
    A = cu.CUdevice_attribute
    for attr in A:
        if attr != A.CU_DEVICE_ATTRIBUTE_MAX:
            err, value = cu.cuDeviceGetAttribute(attr, 0)
            assert err == R.CUDA_SUCCESS and isinstance(value, int), attr
    assert cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 0) == (R.CUDA_SUCCESS, 1)
    assert cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0) == (R.CUDA_SUCCESS, 0)
    assert cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0) == (R.CUDA_SUCCESS, 1)
    assert cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MAX, 0) == (R.CUDA_ERROR_INVALID_VALUE, None)


def test_memory_round_trip_and_memsets(ctx) -> None:
    host = (np.arange(256, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    ptr = check(cu.cuMemAlloc(host.nbytes))
    check(cu.cuMemcpyHtoD(ptr, host, host.nbytes))
    out = np.zeros_like(host)
    check(cu.cuMemcpyDtoH(out, ptr, out.nbytes))
    np.testing.assert_array_equal(out, host)
    check(cu.cuMemsetD8(ptr, 0xAB, 5))
    check(cu.cuMemsetD16(int(ptr) + 8, 0x1234, 3))
    check(cu.cuMemsetD32Async(int(ptr) + 16, 0xDEADBEEF, 2, None))
    raw = np.zeros(host.nbytes, np.uint8)
    check(cu.cuMemcpyDtoH(raw.ctypes.data, ptr, raw.nbytes))
    expected = host.view(np.uint8).copy()
    expected[:5] = 0xAB
    expected[8:14] = np.array([0x1234] * 3, "<u2").view(np.uint8)
    expected[16:24] = np.array([0xDEADBEEF] * 2, "<u4").view(np.uint8)
    np.testing.assert_array_equal(raw, expected)


def test_device_to_device_and_unified_copies(ctx) -> None:
    src_host = np.linspace(-1, 1, 100, dtype=np.float64)
    a, b = check(cu.cuMemAlloc(800)), check(cu.cuMemAlloc(800))
    stream = check(cu.cuStreamCreate(0))
    check(cu.cuMemcpyHtoDAsync(a, src_host, 800, stream))
    check(cu.cuMemcpyDtoDAsync(int(b) + 400, int(a), 400, stream))
    check(cu.cuMemcpy(b, int(a) + 400, 400))  # unified addressing: both device pointers
    out = np.zeros(100)
    check(cu.cuMemcpy(out.ctypes.data, b, 800))  # device -> host through cuMemcpy
    np.testing.assert_array_equal(out, np.concatenate([src_host[50:], src_host[:50]]))


def test_copy_outside_an_allocation_is_invalid_value_with_report(ctx) -> None:
    ptr = check(cu.cuMemAlloc(64))
    assert cu.cuMemcpyHtoD(int(ptr) + 32, bytes(64), 64) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert f"{int(ptr) + 32:#x}" in report()
    assert cu.cuMemsetD32(int(ptr) + 2, 0, 1) == (R.CUDA_ERROR_INVALID_VALUE,)  # misaligned for 32-bit memset


def test_free_twice_and_alloc_zero_are_invalid_value(ctx) -> None:
    ptr = check(cu.cuMemAlloc(128))
    check(cu.cuMemFree(ptr))
    assert cu.cuMemFree(ptr) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemAlloc(0) == (R.CUDA_ERROR_INVALID_VALUE, None)


def test_out_of_memory_and_mem_get_info(make_system) -> None:
    make_system(memory="1MiB")
    assert check(cu.cuMemGetInfo()) == (1 << 20, 1 << 20)
    ptr = check(cu.cuMemAlloc(600_000))
    free, total = check(cu.cuMemGetInfo())
    assert total == 1 << 20 and free <= (1 << 20) - 600_000
    assert cu.cuMemAlloc(600_000) == (R.CUDA_ERROR_OUT_OF_MEMORY, None)
    assert "MOCKGPU_MEMORY" in report()
    check(cu.cuMemFree(ptr))
    check(cu.cuMemAlloc(600_000))


def test_pinned_host_memory_is_real_host_memory(ctx) -> None:
    addr = check(cu.cuMemHostAlloc(4096, 0x01))
    assert addr % 4096 == 0
    ctypes.memmove(addr, b"mock_gpu pinned", 15)
    dev = check(cu.cuMemAlloc(4096))
    check(cu.cuMemcpyHtoD(dev, addr, 4096))
    out = bytearray(15)
    check(cu.cuMemcpyDtoH(out, dev, 15))
    assert bytes(out) == b"mock_gpu pinned"
    check(cu.cuMemFreeHost(addr))
    assert cu.cuMemFreeHost(addr) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemHostAlloc(16, 0x80) == (R.CUDA_ERROR_INVALID_VALUE, None)


def test_event_elapsed_time_measures_the_gap_in_ms(ctx) -> None:
    start, end = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(0))
    stream = check(cu.cuStreamCreate(1))
    check(cu.cuEventRecord(start, stream))
    time.sleep(0.03)
    check(cu.cuEventRecord(end, stream))
    check(cu.cuEventSynchronize(end))
    ms = check(cu.cuEventElapsedTime(start, end))
    assert isinstance(ms, float) and 29.0 <= ms < 1000.0
    check(cu.cuStreamWaitEvent(None, end, 0))
    check(cu.cuStreamQuery(stream))
    check(cu.cuEventQuery(end))


def test_elapsed_time_needs_recorded_timing_events(ctx) -> None:
    recorded, fresh = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(0))
    untimed = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
    check(cu.cuEventRecord(recorded, None))
    check(cu.cuEventRecord(untimed, None))
    assert cu.cuEventElapsedTime(recorded, fresh) == (R.CUDA_ERROR_INVALID_HANDLE, None)
    assert cu.cuEventElapsedTime(recorded, untimed) == (R.CUDA_ERROR_INVALID_HANDLE, None)


def test_destroyed_handles_are_invalid(ctx) -> None:
    stream, event = check(cu.cuStreamCreate(0)), check(cu.cuEventCreate(0))
    check(cu.cuStreamDestroy(stream))
    check(cu.cuEventDestroy(event))
    assert cu.cuStreamSynchronize(stream) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuEventRecord(event, None) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuEventRecord(stream, None) == (R.CUDA_ERROR_INVALID_HANDLE,)  # a stream is not an event


def test_created_context_is_current_and_owns_its_memory(ctx) -> None:
    free_before = check(cu.cuMemGetInfo())[0]
    own = check(cu.cuCtxCreate(None, 0, 0))
    assert int(check(cu.cuCtxGetCurrent())) == int(own)
    check(cu.cuMemAlloc(1 << 20))
    check(cu.cuCtxDestroy(own))
    assert int(check(cu.cuCtxGetCurrent())) == int(ctx)
    assert check(cu.cuMemGetInfo())[0] == free_before
    assert cu.cuCtxSetCurrent(own) == (R.CUDA_ERROR_INVALID_CONTEXT,)
    assert cu.cuCtxDestroy(ctx) == (R.CUDA_ERROR_INVALID_CONTEXT,)  # primary: release it instead
    assert int(check(cu.cuCtxGetDevice())) == 0


def test_no_current_context_is_invalid_context(ctx) -> None:
    check(cu.cuCtxSetCurrent(None))
    assert int(check(cu.cuCtxGetCurrent())) == 0
    assert cu.cuMemAlloc(16) == (R.CUDA_ERROR_INVALID_CONTEXT, None)


def test_peer_access(make_system) -> None:
    ctx0 = make_system(devices="2")
    assert check(cu.cuDeviceCanAccessPeer(0, 1)) == 1
    assert check(cu.cuDeviceCanAccessPeer(1, 1)) == 0
    ctx1 = check(cu.cuDevicePrimaryCtxRetain(1))
    check(cu.cuCtxEnablePeerAccess(ctx1, 0))
    assert cu.cuCtxEnablePeerAccess(ctx1, 0) == (R.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,)
    assert cu.cuCtxEnablePeerAccess(ctx0, 0) == (R.CUDA_ERROR_INVALID_DEVICE,)
    a = check(cu.cuMemAlloc(64))
    check(cu.cuCtxSetCurrent(ctx1))
    b = check(cu.cuMemAlloc(64))
    check(cu.cuMemcpyHtoD(a, bytes(range(64)), 64))
    check(cu.cuMemcpyPeer(b, ctx1, a, ctx0, 64))
    out = bytearray(64)
    check(cu.cuMemcpyDtoH(out, b, 64))
    assert bytes(out) == bytes(range(64))
    assert check(cu.cuMemGetInfo())[0] < check(cu.cuDeviceTotalMem(1))


def test_error_names_and_strings() -> None:
    assert cu.cuGetErrorName(R.CUDA_ERROR_ILLEGAL_ADDRESS) == (R.CUDA_SUCCESS, b"CUDA_ERROR_ILLEGAL_ADDRESS")
    assert cu.cuGetErrorString(R.CUDA_ERROR_OUT_OF_MEMORY) == (R.CUDA_SUCCESS, b"out of memory")
    assert cu.cuGetErrorString(R.CUDA_ERROR_ILLEGAL_ADDRESS)[1] == b"an illegal memory access was encountered"
    assert cu.cuGetErrorName(123456) == (R.CUDA_ERROR_INVALID_VALUE, None)


def test_driver_exports_mirror_the_real_bindings() -> None:
    real = pytest.importorskip("cuda.bindings.driver", reason="cuda-python not installed")
    missing = [name for name in cu.__all__ if name.startswith("cu") and not hasattr(real, name)]
    assert missing == []
    assert cu.CUresult is real.CUresult and cu.CUdeviceptr is real.CUdeviceptr


def test_mem_get_info_counts_the_256_byte_granules_allocations_take(ctx) -> None:
    """cuMemGetInfo reports the memory in use: cuMemAlloc hands out whole granules (addresses 256-byte aligned), so
    1 byte takes 256 and 257 bytes take 512."""
    free0, total = check(cu.cuMemGetInfo())
    small, odd = check(cu.cuMemAlloc(1)), check(cu.cuMemAlloc(257))
    assert (free0 - check(cu.cuMemGetInfo())[0], check(cu.cuMemGetInfo())[1]) == (256 + 512, total)
    check(cu.cuMemFree(small))
    check(cu.cuMemFree(odd))
    assert check(cu.cuMemGetInfo())[0] == free0
