"""The emulated driver module against the real ``cuda.bindings.driver``: the same parameter names and number of
outputs for every function, and the documented values of the device limits, function attributes and JIT logs."""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import pytest
from _driver_util import KERNELS_PTX, PTR, U32, check, from_device, kernels, launch, to_device
from cuda.bindings import driver as real

import mock_gpu
from mock_gpu import driver as cu

R = cu.CUresult
A = cu.CUdevice_attribute
F = cu.CUfunction_attribute
J = cu.CUjit_option
FUNCTIONS = sorted(name for name in cu.__all__ if name.startswith("cu"))


def real_parameters(fn: Any) -> list[str]:
    """Parameter names from the first line of a cuda-python docstring, e.g. ``cuMemAlloc(size_t bytesize)``."""
    first = fn.__doc__.strip().splitlines()[0]
    inner = first[first.index("(") + 1:first.rindex(")")]
    parts, depth, current = [], 0, ""
    for ch in inner:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.split("=")[0].split(":")[0].split()[-1].lstrip("*") for p in parts if p.strip()]


def real_output_count(fn: Any) -> int:
    """How many values follow the CUresult, from the "Returns" section of a cuda-python docstring."""
    returns = re.search(r"Returns\n\s*-+\n(.*?)(?:\n\s*See Also|\Z)", fn.__doc__, re.S)
    assert returns is not None, fn.__name__
    return len(re.findall(r"^\s*\w+ : ", returns.group(1), re.M))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signature_and_outputs_match_cuda_bindings(name: str) -> None:
    mine, theirs = getattr(cu, name), getattr(real, name)
    params = list(inspect.signature(mine).parameters)
    if name == "cuGraphAddDependencies":  # accepts the cuda-python 12 form too (no edgeData)
        assert params == ["hGraph", "from_", "to", "rest"]
    else:
        assert params == real_parameters(theirs)
    assert mine.outputs == real_output_count(theirs)


def test_other_cuda_bindings_names_are_the_real_types_and_missing_functions_say_so() -> None:
    assert cu.CUresult is real.CUresult and cu.CUdeviceptr is real.CUdeviceptr
    assert cu.CUDA_MEMSET_NODE_PARAMS is real.CUDA_MEMSET_NODE_PARAMS
    assert cu.CUlimit is real.CUlimit  # not imported by name: looked up in cuda.bindings.driver
    assert cu.cuuint32_t is real.cuuint32_t  # a type whose name starts like a driver function
    assert "cuGraphicsMapResources" in dir(cu)  # probing by name finds every real name
    with pytest.raises(mock_gpu.NotEmulatedError, match="cuGraphicsMapResources is not emulated"):
        cu.cuGraphicsMapResources(1, None, 0)  # referencing it works; calling it says what is missing
    with pytest.raises(AttributeError):
        cu.no_such_name  # noqa: B018


# CUDA C++ Programming Guide, "Compute Capabilities" (technical specifications per compute capability)
LIMITS = {
    A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024, A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: 1024,
    A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: 1024, A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: 64,
    A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: 2**31 - 1, A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: 65535,
    A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: 65535, A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 48 * 1024,
    A.CU_DEVICE_ATTRIBUTE_WARP_SIZE: 32,
}


@pytest.mark.parametrize(("arch", "cc", "optin"), [("sm_80", (8, 0), 163 * 1024), ("sm_90", (9, 0), 227 * 1024),
                                                   ("sm_86", (8, 6), 99 * 1024)])
def test_device_limits(make_system: Any, arch: str, cc: tuple[int, int], optin: int) -> None:
    make_system(arch=arch)
    for attribute, value in LIMITS.items():
        assert check(cu.cuDeviceGetAttribute(attribute, 0)) == value, attribute
    assert check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0)) == optin
    major = check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0))
    minor = check(cu.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0))
    assert (major, minor) == cc


def test_dynamic_shared_memory_beyond_48k_needs_the_function_attribute(ctx: Any) -> None:
    mirror = kernels()["mirror"]
    x = np.arange(256, dtype=np.uint32)
    src, out = to_device(x), to_device(np.zeros(256, np.uint32))
    args = [(out, PTR), (src, PTR)]
    big = 64 * 1024
    assert check(cu.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, mirror)) == 48 * 1024
    assert launch(mirror, (1, 1, 1), (256, 1, 1), args, smem=big) == (R.CUDA_ERROR_INVALID_VALUE,)
    check(cu.cuFuncSetAttribute(mirror, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, big))
    assert check(cu.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, mirror)) == big
    check(launch(mirror, (1, 1, 1), (256, 1, 1), args, smem=big))
    np.testing.assert_array_equal(from_device(out, 256, np.uint32), x[::-1])
    assert cu.cuFuncSetAttribute(mirror, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 228 * 1024) == \
        (R.CUDA_ERROR_INVALID_VALUE,)  # beyond sm_90's 227 KiB opt-in
    assert check(cu.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, mirror)) == 1024
    assert check(cu.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, mirror)) == 0


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "numpy"])
def test_jit_error_log_receives_the_reason_of_invalid_ptx(ctx: Any, kind: str) -> None:
    bad = KERNELS_PTX.replace(b"st.global.u32 [%rd3], %r1;", b"st.global.frobnicate.u32 [%rd3], %r1;")
    log: Any = {"bytes": b" " * 1024, "bytearray": bytearray(1024), "numpy": np.zeros(1024, np.uint8)}[kind]
    info = bytearray(b"x" * 64)
    options = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, J.CU_JIT_INFO_LOG_BUFFER,
               J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, J.CU_JIT_OPTIMIZATION_LEVEL]
    assert cu.cuModuleLoadDataEx(bad, 5, options, [log, 1024, info, 64, 4]) == (R.CUDA_ERROR_INVALID_PTX, None)
    text = bytes(log).split(b"\x00", 1)[0].decode()
    assert "frobnicate" in text and "line 22" in text
    check(cu.cuModuleLoadDataEx(KERNELS_PTX, 2, options[:2], [log, 1024]))
    assert bytes(log)[:1] == b"\x00"  # a successful load leaves an empty error log


def test_jit_log_is_truncated_to_its_size_and_needs_the_size_option(ctx: Any) -> None:
    bad = b".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { frob; }\n"
    log = bytearray(b"#" * 32)
    options = [J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
    assert cu.cuModuleLoadDataEx(bad, 2, options, [log, 16])[0] == R.CUDA_ERROR_INVALID_PTX
    assert log[15] == 0 and bytes(log[16:]) == b"#" * 16 and b"mock_gpu" in bytes(log[:15])
    assert cu.cuModuleLoadDataEx(bad, 1, options[:1], [log]) == (R.CUDA_ERROR_INVALID_VALUE, None)
    assert cu.cuModuleLoadDataEx(bad, 2, options, [log]) == (R.CUDA_ERROR_INVALID_VALUE, None)  # counts disagree


def test_stream_and_event_calls_follow_the_driver_conventions(ctx: Any) -> None:
    fill = kernels()["fill"]
    stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
    assert isinstance(stream, cu.CUstream)
    start, end = check(cu.cuEventCreate(0)), check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_BLOCKING_SYNC))
    assert isinstance(start, cu.CUevent)
    out = to_device(np.zeros(128, np.uint32))
    assert cu.cuEventRecord(start, stream) == (R.CUDA_SUCCESS,)
    check(launch(fill, (1, 1, 1), (128, 1, 1), [(out, PTR), (6, U32), (128, U32)], stream=stream))
    assert cu.cuEventRecord(end, stream) == (R.CUDA_SUCCESS,)
    assert cu.cuEventSynchronize(end) == (R.CUDA_SUCCESS,)
    assert cu.cuEventQuery(end) == (R.CUDA_SUCCESS,)
    err, ms = cu.cuEventElapsedTime(start, end)
    assert err == R.CUDA_SUCCESS and isinstance(ms, float) and ms >= 0.0
    assert cu.cuStreamWaitEvent(stream, end, 1) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuEventDestroy(start) == (R.CUDA_SUCCESS,) and cu.cuEventDestroy(end) == (R.CUDA_SUCCESS,)
    assert cu.cuStreamDestroy(stream) == (R.CUDA_SUCCESS,)
    assert cu.cuStreamQuery(stream) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuStreamQuery(cu.CU_STREAM_PER_THREAD) == (R.CUDA_SUCCESS,)
