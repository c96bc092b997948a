"""Kernel parameter packing in the forms cuda-python's cuLaunchKernel accepts (checked against hand-built bytes)."""

from __future__ import annotations

import ctypes
import logging
import struct
from types import SimpleNamespace

import pytest

from mock_gpu import driver as cu
from mock_gpu._driver.marshal import pack_params
from mock_gpu._driver.results import DriverError

# .param .u64 p0 (offset 0), .param .u32 p1 (offset 8), .param .f32 p2 (offset 12): 16 bytes
KERNEL = SimpleNamespace(name="k", params=[(0, 8), (8, 4), (12, 4)], param_bytes=16)
EXPECTED = struct.pack("<QIf", 0x10000000100, 7, 2.5)


def test_values_and_types_tuple() -> None:
    values = (cu.CUdeviceptr(0x10000000100), 7, 2.5)
    types = (None, ctypes.c_uint32, ctypes.c_float)
    assert pack_params(KERNEL, (values, types), None) == EXPECTED


def test_void_pointer_array_as_int_address_and_as_buffer() -> None:
    p0, p1, p2 = ctypes.c_uint64(0x10000000100), ctypes.c_uint32(7), ctypes.c_float(2.5)
    array = (ctypes.c_void_p * 3)(*(ctypes.addressof(v) for v in (p0, p1, p2)))
    assert pack_params(KERNEL, ctypes.addressof(array), None) == EXPECTED
    assert pack_params(KERNEL, array, None) == EXPECTED


def test_extra_buffer_pointer_and_size() -> None:
    class Args(ctypes.Structure):
        _fields_ = [("p0", ctypes.c_uint64), ("p1", ctypes.c_uint32), ("p2", ctypes.c_float)]

    args = Args(0x10000000100, 7, 2.5)
    size = ctypes.c_size_t(ctypes.sizeof(args))
    extra = (ctypes.c_void_p * 5)(cu.CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(args),
                                  cu.CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), cu.CU_LAUNCH_PARAM_END)
    assert pack_params(KERNEL, None, ctypes.addressof(extra)) == EXPECTED
    size.value = 12
    with pytest.raises(DriverError, match="BUFFER_SIZE is 12"):
        pack_params(KERNEL, None, ctypes.addressof(extra))


@pytest.mark.parametrize(("params", "message"), [
    (((1, 2), (ctypes.c_uint64, ctypes.c_uint32)), "takes 3 parameters, 2 were given"),
    (((1, 2, 3.0), (ctypes.c_uint64, ctypes.c_uint64, ctypes.c_float)), "parameter 1 of kernel 'k' is 4 bytes"),
    (None, "neither kernelParams nor extra"),
])
def test_wrong_parameters_are_invalid_value(params: object, message: str) -> None:
    with pytest.raises(DriverError, match=message) as info:
        pack_params(KERNEL, params, None)
    assert info.value.result == cu.CUresult.CUDA_ERROR_INVALID_VALUE


def test_narrower_value_is_zero_extended_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mock_gpu"):
        packed = pack_params(KERNEL, ((0x100, 7, 2.5), (ctypes.c_uint32, ctypes.c_uint32, ctypes.c_float)), None)
    assert packed[:8] == (0x100).to_bytes(8, "little") and packed[8:] == EXPECTED[8:]
    assert "parameter 0 of kernel 'k' is 8 bytes" in caplog.text and "zero-extended" in caplog.text


def test_short_pointer_array_and_both_forms_are_invalid_value() -> None:
    with pytest.raises(DriverError, match="holds 2 pointers"):
        pack_params(KERNEL, (ctypes.c_void_p * 2)(), None)
    with pytest.raises(DriverError, match="both kernelParams and extra"):
        pack_params(KERNEL, ((1, 2, 3.0), (None, None, None)), 1234)
