"""cuda-python's conventions on the emulator, as NVIDIA's cuda_bindings/tests/test_cuda.py checks them against a
real driver: argument conversion, error names and strings for every CUresult, probing for APIs with ``dir``,
arrays, managed-memory advice and range attributes, pointer attributes, profiler control, function names; and the
runtime emulator on top of the driver (properties from the device's attributes, errors and the last error, the
context the runtime uses)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _driver_util import check

from mock_gpu import driver as cu
from mock_gpu import runtime as rt

R = cu.CUresult


def test_every_cuda_result_has_a_name_and_the_drivers_description(ctx) -> None:
    for code in R:
        assert check(cu.cuGetErrorName(code)) == code.name.encode()
        assert check(cu.cuGetErrorString(code))
    assert cu.cuGetErrorString(R.CUDA_SUCCESS) == (R.CUDA_SUCCESS, b"no error")
    err, _ = cu.cuDeviceGet(-1)
    assert cu.cuGetErrorString(err) == (R.CUDA_SUCCESS, b"invalid device ordinal")
    assert cu.cuGetErrorName(err) == (R.CUDA_SUCCESS, b"CUDA_ERROR_INVALID_DEVICE")


@pytest.mark.parametrize(("code", "text"), [
    (R.CUDA_ERROR_CONTEXT_ALREADY_CURRENT, b"context already current"),
    (R.CUDA_ERROR_KEY_ROTATION, b"an error happened during the key rotation sequence"),
    (R.CUDA_ERROR_ILLEGAL_STATE, b"the operation cannot be performed in the present state"),
])
def test_codes_the_runtime_has_no_text_for_have_the_driver_s(ctx, code, text) -> None:
    """cuGetErrorString gives libcuda's text also for codes cudaGetErrorString does not know (202, 916); 401 is
    the same text in both."""
    assert cu.cuGetErrorString(code) == (R.CUDA_SUCCESS, text)


def test_no_cuda_result_is_described_as_an_unknown_error_but_unknown_error(ctx) -> None:
    described = {code.name: check(cu.cuGetErrorString(code)) for code in R}
    assert [name for name, text in described.items() if text == b"unknown error"] == ["CUDA_ERROR_UNKNOWN"]
    assert described["CUDA_ERROR_MULTICAST_RESOURCE_FULL"].startswith(b"the API call failed because")


def test_arguments_convert_as_cuda_python_converts_them(ctx) -> None:
    ptr = check(cu.cuMemAlloc(np.array(64, dtype=np.uint32)))  # a 0-d array is an integer
    check(cu.cuMemsetD8(ptr, 7, 64.9))  # a float is truncated, as int() does
    out = np.zeros(64, np.uint8)
    check(cu.cuMemcpyDtoH(out, ptr, np.uint64(64)))
    np.testing.assert_array_equal(out, 7)
    with pytest.raises(TypeError, match="an integer is required"):
        cu.cuMemAlloc("64")


def test_dir_lists_what_is_emulated_and_the_real_types(ctx) -> None:
    names = dir(cu)
    assert {"cuMemAllocManaged", "cuLinkCreate", "cuuint64_t", "CUDA_KERNEL_NODE_PARAMS"} <= set(names)
    assert "cuGraphConditionalHandleCreate" not in names
    assert "cudaMallocAsync" in dir(rt) and "cudaCreateChannelDesc" in dir(rt)


def test_array_descriptor_is_validated(ctx) -> None:
    desc = cu.CUDA_ARRAY_DESCRIPTOR()
    assert cu.cuArrayCreate(desc) == (R.CUDA_ERROR_INVALID_VALUE, None)
    desc.Format, desc.NumChannels, desc.Width = cu.CUarray_format.CU_AD_FORMAT_SIGNED_INT8, 1, 1
    array = check(cu.cuArrayCreate(desc))
    check(cu.cuArrayDestroy(array))
    assert cu.cuArrayDestroy(array) == (R.CUDA_ERROR_INVALID_HANDLE,)


def test_managed_range_advice_is_reported(ctx) -> None:
    ptr = check(cu.cuMemAllocManaged(0x1000, cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL.value))
    A, M = cu.CUmem_advise, cu.CUmem_range_attribute
    check(cu.cuMemAdvise(ptr, 0x1000, A.CU_MEM_ADVISE_SET_READ_MOSTLY, 0))
    check(cu.cuMemAdvise(ptr, 0x1000, A.CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cu.CU_DEVICE_CPU))
    check(cu.cuMemAdvise(ptr, 0x1000, A.CU_MEM_ADVISE_SET_ACCESSED_BY, cu.CU_DEVICE_CPU))
    attributes = [M.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, M.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                  M.CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, M.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION]
    sizes = [4, 4, 12, 4]
    values = [check(cu.cuMemRangeGetAttribute(s, a, ptr, 0x1000)) for s, a in zip(sizes, attributes)]
    assert values == [1, -1, [-1, -2, -2], -2]
    assert check(cu.cuMemRangeGetAttributes(sizes, attributes, 4, ptr, 0x1000)) == values
    check(cu.cuMemFree(ptr))


def test_pointer_attributes_of_managed_memory(ctx) -> None:
    ptr = check(cu.cuMemAllocManaged(0x1000, cu.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL.value))
    P = cu.CUpointer_attribute
    assert check(cu.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr)) is True
    assert check(cu.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_RANGE_SIZE, int(ptr) + 16)) == 0x1000
    assert int(check(cu.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_CONTEXT, ptr))) == int(ctx)
    wanted = [P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, P.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR]
    assert check(cu.cuPointerGetAttributes(2, wanted, ptr)) == [0, int(ptr)]
    for value in (True, False):
        check(cu.cuPointerSetAttribute(value, P.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, ptr))
        assert check(cu.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, ptr)) is value
    (ctypes.c_int * 4).from_address(int(ptr))[0] = 5  # the host reaches managed memory directly
    out = np.zeros(1, np.int32)
    check(cu.cuMemcpyDtoH(out, ptr, 4))
    assert out[0] == 5
    check(cu.cuMemFree(ptr))


def test_profiler_and_function_names(ctx) -> None:
    check(cu.cuProfilerStart())
    check(cu.cuProfilerStop())
    assert cu.cuFuncGetName(0) == (R.CUDA_ERROR_INVALID_VALUE, None)
    assert cu.cuKernelGetName(0) == (R.CUDA_ERROR_INVALID_VALUE, None)


def test_runtime_properties_come_from_the_driver_attributes(ctx) -> None:
    A = cu.CUdevice_attribute
    prop = check(rt.cudaGetDeviceProperties(0))
    assert prop.multiProcessorCount == check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0))
    assert (prop.major, prop.minor) == check(cu.cuDeviceComputeCapability(0))
    assert prop.sharedMemPerBlock == 48 * 1024 and prop.managedMemory == 1 and prop.memoryPoolsSupported == 1
    assert list(prop.maxThreadsDim) == [1024, 1024, 64] and prop.totalGlobalMem == check(cu.cuDeviceTotalMem(0))
    assert prop.name.split(b"\x00")[0] == check(cu.cuDeviceGetName(256, 0)).split(b"\x00")[0]


def test_runtime_errors_map_to_cuda_error_t_and_are_remembered(ctx) -> None:
    E = rt.cudaError_t
    assert rt.cudaSetDevice(5) == (E.cudaErrorInvalidDevice,)
    assert rt.cudaPeekAtLastError() == (E.cudaErrorInvalidDevice,)
    assert rt.cudaGetLastError() == (E.cudaErrorInvalidDevice,)
    assert rt.cudaGetLastError() == (E.cudaSuccess,)
    assert rt.cudaFree(12345) == (E.cudaErrorInvalidValue,)
    assert rt.cudaGetErrorString(E.cudaErrorInvalidValue) == (E.cudaSuccess, b"invalid argument")


def test_runtime_uses_the_current_driver_context_and_copies_by_kind(ctx, rng: np.random.Generator) -> None:
    other = check(cu.cuCtxCreate(None, 0, 0))  # current now: the runtime must allocate in it
    host = rng.integers(0, 255, 256, dtype=np.uint8)
    dev = check(rt.cudaMalloc(host.nbytes))
    K = rt.cudaMemcpyKind
    check(rt.cudaMemcpy(dev, host, host.nbytes, K.cudaMemcpyHostToDevice))
    dev2 = check(rt.cudaMalloc(host.nbytes))
    check(rt.cudaMemcpy(dev2, dev, host.nbytes, K.cudaMemcpyDeviceToDevice))
    out = np.zeros_like(host)
    check(rt.cudaMemcpy(out, dev2, host.nbytes, K.cudaMemcpyDefault))
    np.testing.assert_array_equal(out, host)
    P = cu.CUpointer_attribute
    assert int(check(cu.cuPointerGetAttribute(P.CU_POINTER_ATTRIBUTE_CONTEXT, dev))) == int(other)
    check(cu.cuCtxDestroy(other))


def test_coredump_settings_are_kept(ctx) -> None:
    S = cu.CUcoredumpSettings
    assert cu.cuCoredumpGetAttributeGlobal(S.CU_COREDUMP_FILE) == (R.CUDA_SUCCESS, b"", 1)
    assert check(cu.cuCoredumpSetAttributeGlobal(S.CU_COREDUMP_TRIGGER_HOST, False)) == 1
    assert check(cu.cuCoredumpSetAttributeGlobal(S.CU_COREDUMP_FILE, b"corefile")) == 9  # with its NUL
    check(cu.cuCoredumpSetAttributeGlobal(S.CU_COREDUMP_LIGHTWEIGHT, True))
    assert check(cu.cuCoredumpGetAttributeGlobal(S.CU_COREDUMP_TRIGGER_HOST)) == (False, 1)
    assert check(cu.cuCoredumpGetAttributeGlobal(S.CU_COREDUMP_FILE)) == (b"corefile", 9)
    assert check(cu.cuCoredumpGetAttributeGlobal(S.CU_COREDUMP_LIGHTWEIGHT)) == (True, 1)


def test_a_float_device_pointer_is_truncated_as_cuda_python_does(ctx) -> None:
    ptr = int(check(cu.cuMemAlloc(64)))
    check(cu.cuMemsetD8(float(ptr) + 0.5, 3, 64))  # CUdeviceptr(2.5) is 2 in cuda-python
    out = np.zeros(64, np.uint8)
    check(cu.cuMemcpyDtoH(out, ptr, 64))
    np.testing.assert_array_equal(out, 3)


def test_cumemcpy_to_or_from_page_locked_memory_is_done_on_return(ctx) -> None:
    """CUDA driver API "API synchronization behavior": only device-to-device cuMemcpy may be pending on return."""
    n = 256
    host = int(check(cu.cuMemAllocHost(n)))
    dev = int(check(cu.cuMemAlloc(n)))
    ctypes.memmove(host, bytes(range(n)), n)
    check(cu.cuMemcpy(dev, host, n))
    ctypes.memset(host, 0, n)  # reusing the staging buffer at once must not change what was copied
    check(cu.cuMemcpy(host, dev, n))
    assert ctypes.string_at(host, n) == bytes(range(n))
    check(cu.cuMemFreeHost(host))
