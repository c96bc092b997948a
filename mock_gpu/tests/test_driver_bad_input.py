"""Bad input must give the right CUresult (or the exception cuda-python itself raises) and never crash or hang.

Covers: PTX the interpreter must reject at load (unknown modifiers and directives, malformed text, operand type
mismatches), module images that are not PTX, launch configurations and parameters, host/device copies that do not
fit, stale handles, and MOCKGPU_* environment garbage. Expected codes follow the CUDA driver API reference of each
function; where the real bindings raise (TypeError/OverflowError from their C argument conversion) so does the mock.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from _driver_util import PTR, U32, check, from_device, launch, report, to_device
from _ptx_util import HEADER

from mock_gpu import driver as cu
from mock_gpu import ptx
from mock_gpu.config import load_config

R = cu.CUresult

STORE_KERNEL = HEADER + """.visible .entry k(.param .u64 p, .param .u32 v)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [v];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""


def _body_error(body: str) -> ptx.PTXError:
    src = HEADER + ".visible .entry k()\n{\n    .reg .b32 %r<4>;\n    .reg .b64 %rd<4>;\n    .reg .pred %p<2>;\n" \
        + body + "\n    ret;\n}\n"
    with pytest.raises(ptx.PTXError) as e:
        ptx.load_module(src)
    return e.value


# ----- strictness: everything unsupported fails at load, naming line and instruction -----
@pytest.mark.parametrize(("body", "needle"), [
    ("    st.global.frobnicate.f32 [%rd1], %r1;", ".frobnicate"),
    ("    ld.global.f32.sat %r1, [%rd1];", ".sat"),
    ("    add.s32.u32 %r1, %r2, %r3;", "type"),
    ("    add.rn.s33 %r1, %r2, %r3;", ".s33"),
    ("    setp.lt.gt.s32 %p1, %r1, %r2;", ".gt"),
    ("    shf.l.b32 %r1, %r2, %r3, %r0;", "shf"),
    ("    ld.global.u32 %r1, [%rd1], %rd2;", "operands"),
    ("    atom.global.add.v2.f32 %r1, [%rd1], %r2;", "vector"),
    ("    red.global.cas.b32 [%rd1], %r1, %r2;", "red.cas"),
    ("    mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%r0}, {%r1}, {%r2}, {%r3};", "m8n8k4 is not emulated"),
    ("    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0}, {%r1}, {%r2}, {%r3};", "brace list of 4"),
    ("    ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r0}, [%rd1];", "matrix"),
    ("    mapa.u64 %rd1, %rd2, %r1;", "distributed shared memory"),
    ("    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rd1], [%rd2], %r1, "
     "[%rd3];", "cp"),
    ("    mbarrier.frobnicate.shared.b64 [%rd1];", ".frobnicate"),
    ("    lop3.b32 %r1, %r2, %r3, %r0, %r1;", "immLut"),
    ("    add.f32 %r1, %rd1, %rd2;", ".b64 register"),
    ("    add.u64 %rd1, %r1, %r2;", ".b32 register"),
    ("    frobnicate.b32 %r1, %r2;", "frobnicate"),
])
def test_unsupported_or_misspelt_instruction_is_rejected_at_load(body: str, needle: str) -> None:
    err = _body_error(body)
    assert err.line == 9, err
    assert err.text == body.strip()
    assert needle in err.message


@pytest.mark.parametrize(("src", "line"), [
    (HEADER + ".visible .entry k()\n{\n    .frob 3;\n    ret;\n}\n", 6),
    (HEADER + ".frobnicate 1;\n", 4),
    (HEADER + ".visible .entry k()\n{\n    .reg .f80 %x;\n    ret;\n}\n", 6),
])
def test_unknown_directive_or_type_is_rejected(src: str, line: int) -> None:
    with pytest.raises(ptx.PTXError) as e:
        ptx.load_module(src)
    assert e.value.line == line


# ----- malformed PTX -----
@pytest.mark.parametrize(("src", "needle"), [
    (HEADER + ".visible .entry k()\n{\n    ret;\n", "not closed"),  # unbalanced braces
    (HEADER + ".visible .entry k()\n{\n    { ret;\n}\n", "not closed"),
    (HEADER + ".visible .entry k()\n{\n    ret;\n}\n}\n", "'}'"),
    (HEADER + ".visible .entry k()\n{\n    .reg .b32 %r<2>;\n    add.s32 %r1, %r7, 1;\n    ret;\n}\n", "undeclared"),
    (HEADER + ".visible .entry k()\n{\n    bra $L_nowhere;\n    ret;\n}\n", "unknown symbol"),
    (HEADER + ".visible .entry k()\n{\n$L: ret;\n$L: ret;\n}\n", "defined twice"),
    (HEADER + ".visible .entry k()\n{\n    .reg .b32 %r<99999999999>;\n    ret;\n}\n", "limit"),
    (".version abc\n.target sm_90\n", "version number"),
    ("// just a comment\n", ".version"),
    (HEADER + ".visible .entry k()\n{\n    .reg .b32 %r<2>;\n    mov.u32 %r1, 1e400;\n    ret;\n}\n", "malformed"),
])
def test_malformed_ptx_is_a_ptx_error(src: str, needle: str) -> None:
    with pytest.raises(ptx.PTXError, match=None) as e:
        ptx.load_module(src)
    assert needle in str(e.value)


def test_every_truncation_of_a_real_module_is_a_clean_ptx_error() -> None:
    """Cutting a module anywhere (a partial upload, a truncated file) never raises anything but PTXError."""
    for cut in range(0, len(STORE_KERNEL) - 3, 7):
        try:
            ptx.load_module(STORE_KERNEL[:cut])
        except ptx.PTXError:
            continue
        raise AssertionError(f"truncation at {cut} loaded: {STORE_KERNEL[:cut]!r}")


# ----- module images -----
@pytest.mark.parametrize(("image", "code"), [
    (None, R.CUDA_ERROR_INVALID_VALUE),
    (0, R.CUDA_ERROR_INVALID_VALUE),
    (12, R.CUDA_ERROR_INVALID_VALUE),  # not a host address
    (b"", R.CUDA_ERROR_INVALID_IMAGE),
    (b"\x00garbage", R.CUDA_ERROR_INVALID_IMAGE),
    (b"\x7fELF\x02\x01\x01" + bytes(60), R.CUDA_ERROR_INVALID_IMAGE),  # a cubin
    (b"\xff\xfe\x00\x00 not text", R.CUDA_ERROR_INVALID_IMAGE),
    (b"\x8a\xff\xfe", R.CUDA_ERROR_INVALID_IMAGE),
    ("hello world", R.CUDA_ERROR_INVALID_PTX),
    (b"// comment only\n", R.CUDA_ERROR_INVALID_PTX),
    (b".version 99.0\n.target sm_90\n.address_size 64\n", R.CUDA_ERROR_UNSUPPORTED_PTX_VERSION),
    (b".version 8.0\n.target sm_999\n.address_size 64\n", R.CUDA_ERROR_INVALID_PTX),
    (b".version 8.0\n.target sm_90\n.address_size 32\n", R.CUDA_ERROR_INVALID_PTX),
])
def test_module_images_that_are_not_loadable_ptx(ctx: Any, image: Any, code: Any) -> None:
    assert cu.cuModuleLoadData(image) == (code, None)
    assert report()


@pytest.mark.parametrize("image", [[1, 2], 1.5, object()])
def test_module_image_of_a_wrong_python_type_raises_type_error(ctx: Any, image: Any) -> None:
    with pytest.raises(TypeError, match=r"image.*buffer"):
        cu.cuModuleLoadData(image)


def test_ptx_for_a_newer_architecture_than_the_device_is_rejected(make_system: Any) -> None:
    make_system(arch="sm_80")
    assert cu.cuModuleLoadData(STORE_KERNEL.encode()) == (R.CUDA_ERROR_INVALID_PTX, None)  # .target sm_90
    assert "sm_90" in report() and "sm_80" in report()
    check(cu.cuModuleLoadData(STORE_KERNEL.replace(".target sm_90", ".target sm_75").encode()))


# ----- launches -----
@pytest.fixture
def store(ctx: Any) -> tuple[Any, Any]:
    module = check(cu.cuModuleLoadData(STORE_KERNEL.encode()))
    return check(cu.cuModuleGetFunction(module, b"k")), to_device(np.zeros(64, np.uint32))


@pytest.mark.parametrize(("grid", "block", "smem"), [
    ((0, 1, 1), (32, 1, 1), 0),
    ((1, 1, 1), (0, 1, 1), 0),
    ((1, 0, 1), (32, 1, 1), 0),
    ((1, 1, 1), (1025, 1, 1), 0),
    ((1, 1, 1), (32, 32, 2), 0),
    ((1, 1, 1), (1, 1, 65), 0),
    ((1, 65536, 1), (1, 1, 1), 0),
    ((2**31, 1, 1), (1, 1, 1), 0),
    ((1, 1, 1), (32, 1, 1), 48 * 1024 + 1),  # above the default dynamic shared memory limit
    ((1, 1, 1), (32, 1, 1), 2**31),
])
def test_bad_launch_configuration_is_invalid_value_and_runs_nothing(store: Any, grid: Any, block: Any,
                                                                    smem: int) -> None:
    fn, buf = store
    assert launch(fn, grid, block, [(buf, PTR), (7, U32)], smem) == (R.CUDA_ERROR_INVALID_VALUE,)
    np.testing.assert_array_equal(from_device(buf, 64, np.uint32), 0)
    check(launch(fn, (1, 1, 1), (64, 1, 1), [(buf, PTR), (7, U32)]))  # the context is still usable
    np.testing.assert_array_equal(from_device(buf, 64, np.uint32), 7)


@pytest.mark.parametrize(("grid", "smem", "exc", "names"), [
    ((-1, 1, 1), 0, OverflowError, "gridDimX -1"), (("a", 1, 1), 0, TypeError, "gridDimX: an integer is required"),
    ((np.array([1, 2]), 1, 1), 0, TypeError, "converted to Python scalars"), ((1, 1, 1), -1, OverflowError, "sharedMemBytes -1"),
    ((1, 1, 1), None, TypeError, "sharedMemBytes: an integer is required"),
    ((1, 1, 1), 1 << 40, OverflowError, "sharedMemBytes 1099511627776"),
])
def test_launch_arguments_cuda_python_cannot_convert_raise(store: Any, grid: Any, smem: Any, exc: type,
                                                           names: str) -> None:
    fn, buf = store
    with pytest.raises(exc, match=names):
        cu.cuLaunchKernel(fn, *grid, 32, 1, 1, smem, None, ((buf, 7), (None, U32)), 0)


@pytest.mark.parametrize("params", [
    None,
    ((), ()),
    (("BUF",), (None,)),
    (("BUF", 7, 8), (None, U32, U32)),
    (("BUF", 7), (None, ctypes.c_uint64)),  # 8 bytes for a 4-byte .param
    (("BUF", 1 << 40), (None, U32)),  # does not fit c_uint
    12,  # not a host address
])
def test_wrong_parameters_are_invalid_value(store: Any, params: Any) -> None:
    fn, buf = store
    if isinstance(params, tuple) and params[0]:
        params = (tuple(buf if v == "BUF" else v for v in params[0]), params[1])
    assert cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, params, 0) == (R.CUDA_ERROR_INVALID_VALUE,)


@pytest.mark.parametrize("values", [("x",), (7.5,), (None,)])
def test_parameter_values_of_the_wrong_python_type_raise_type_error(store: Any, values: tuple) -> None:
    fn, buf = store
    types = (U32,) if values != (None,) else (None,)
    with pytest.raises(TypeError, match="kernel parameter"):
        cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, ((buf, *values), (None, *types)), 0)


def test_freed_pointer_in_a_kernel_is_illegal_address_and_sticky(store: Any) -> None:
    fn, buf = store
    gone = check(cu.cuMemAlloc(256))
    check(cu.cuMemFree(gone))
    check(launch(fn, (1, 1, 1), (32, 1, 1), [(gone, PTR), (7, U32)]))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    assert "use-after-free" in report() or "freed" in report()
    assert cu.cuMemAlloc(16) == (R.CUDA_ERROR_ILLEGAL_ADDRESS, None)


def test_function_handles_of_garbage_and_launch_on_destroyed_stream(store: Any) -> None:
    fn, buf = store
    args = ((buf, 7), (None, U32))
    assert cu.cuLaunchKernel(None, 1, 1, 1, 32, 1, 1, 0, None, args, 0) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuLaunchKernel(777, 1, 1, 1, 32, 1, 1, 0, None, args, 0) == (R.CUDA_ERROR_INVALID_HANDLE,)
    stream = check(cu.cuStreamCreate(0))
    check(cu.cuStreamDestroy(stream))
    assert cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, args, 0) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuStreamSynchronize(stream) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuStreamDestroy(stream) == (R.CUDA_ERROR_INVALID_HANDLE,)


def test_endless_spin_wait_times_out_instead_of_hanging(make_system: Any) -> None:
    make_system(launch_timeout="0.3")
    spin = HEADER + """.visible .entry spin(.param .u64 flag)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [flag];
$L_wait:
    ld.volatile.global.u32 %r1, [%rd1];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $L_wait;
    ret;
}
"""
    fn = check(cu.cuModuleGetFunction(check(cu.cuModuleLoadData(spin.encode())), b"spin"))
    flag = to_device(np.zeros(1, np.uint32))
    check(launch(fn, (2, 1, 1), (32, 1, 1), [(flag, PTR)]))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_LAUNCH_TIMEOUT,)
    assert "spin" in report() and "MOCKGPU_LAUNCH_TIMEOUT" in report()


# ----- memory -----
def test_copies_that_do_not_fit_are_invalid_value(ctx: Any) -> None:
    dev = check(cu.cuMemAlloc(64))
    small = np.zeros(4, np.float32)  # 16 bytes
    assert cu.cuMemcpyHtoD(dev, np.zeros(32, np.float32), 128) == (R.CUDA_ERROR_INVALID_VALUE,)  # device too small
    assert cu.cuMemcpyHtoD(dev, small, 64) == (R.CUDA_ERROR_INVALID_VALUE,)  # host buffer too small
    assert cu.cuMemcpyDtoH(small, dev, 64) == (R.CUDA_ERROR_INVALID_VALUE,)  # would overrun the host buffer
    assert cu.cuMemcpyDtoH(np.zeros(64, np.float32), dev, 128) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemcpyDtoD(dev, int(dev) + 32, 64) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemsetD32(dev, 0, 17) == (R.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemsetD32(int(dev) + 2, 0, 1) == (R.CUDA_ERROR_INVALID_VALUE,)  # misaligned
    assert cu.cuMemcpyHtoD(dev, None, 16) == (R.CUDA_ERROR_INVALID_VALUE,)
    with pytest.raises(TypeError, match="dstHost is a read-only buffer"):
        cu.cuMemcpyDtoH(b"\x00" * 64, dev, 64)
    with pytest.raises(OverflowError, match="ByteCount -4 does not fit a size_t"):
        cu.cuMemcpyDtoH(small, dev, -4)
    with pytest.raises(OverflowError, match="cuMemsetD8 value 300"):
        cu.cuMemsetD8(dev, 300, 1)
    check(cu.cuMemcpyHtoD(dev, small, 0))


def test_frees_of_what_is_not_a_live_device_allocation(ctx: Any) -> None:
    dev = check(cu.cuMemAlloc(64))
    check(cu.cuMemFree(dev))
    assert cu.cuMemFree(dev) == (R.CUDA_ERROR_INVALID_VALUE,)  # double free
    assert cu.cuMemFree(None) == (R.CUDA_ERROR_INVALID_VALUE,)
    host = check(cu.cuMemAllocHost(64))
    assert cu.cuMemFree(host) == (R.CUDA_ERROR_INVALID_VALUE,)  # a host pointer
    assert cu.cuMemFree(np.zeros(4).ctypes.data) == (R.CUDA_ERROR_INVALID_VALUE,)
    inner = check(cu.cuMemAlloc(64))
    assert cu.cuMemFree(int(inner) + 16) == (R.CUDA_ERROR_INVALID_VALUE,)  # inside, not the base
    check(cu.cuMemFreeHost(host))
    check(cu.cuMemFree(inner))


@pytest.mark.parametrize("second", ["cuMemFree", "cuMemFreeAsync"])
def test_freeing_again_while_a_stream_ordered_free_is_pending_is_invalid_value_at_the_call(ctx: Any,
                                                                                         second: str) -> None:
    """cuMemFreeAsync frees when its stream reaches it, but the program gave the memory up at the call: freeing it
    again is CUDA_ERROR_INVALID_VALUE then, and the pending free still runs cleanly."""
    stream = check(cu.cuStreamCreate(0))
    dev = check(cu.cuMemAllocAsync(64, stream))
    check(cu.cuMemFreeAsync(dev, stream))
    again = cu.cuMemFree(dev) if second == "cuMemFree" else cu.cuMemFreeAsync(dev, stream)
    assert again == (R.CUDA_ERROR_INVALID_VALUE,)
    check(cu.cuStreamSynchronize(stream))
    assert cu.cuMemFree(dev) == (R.CUDA_ERROR_INVALID_VALUE,)


@pytest.mark.parametrize(("size", "exc"), [(-1, OverflowError), (1 << 70, OverflowError), ("a", TypeError),
                                           (None, TypeError), (-2.5, OverflowError)])
def test_allocation_sizes_cuda_python_cannot_convert_raise(ctx: Any, size: Any, exc: type) -> None:
    with pytest.raises(exc, match="bytesize"):
        cu.cuMemAlloc(size)


def test_allocation_sizes_the_driver_rejects(make_system: Any) -> None:
    make_system(memory="1MiB")
    assert cu.cuMemAlloc(0) == (R.CUDA_ERROR_INVALID_VALUE, None)
    assert cu.cuMemAlloc(2 << 20) == (R.CUDA_ERROR_OUT_OF_MEMORY, None)


# ----- events and streams across contexts -----
def test_event_recorded_on_a_stream_of_another_context_is_invalid_handle(make_system: Any) -> None:
    primary = make_system(devices="2")
    other = check(cu.cuCtxCreate(None, 0, check(cu.cuDeviceGet(1))))
    foreign_event, foreign_stream = check(cu.cuEventCreate(0)), check(cu.cuStreamCreate(0))
    check(cu.cuCtxSetCurrent(primary))
    event = check(cu.cuEventCreate(0))
    assert cu.cuEventRecord(foreign_event, None) == (R.CUDA_ERROR_INVALID_HANDLE,)
    assert cu.cuEventRecord(event, foreign_stream) == (R.CUDA_ERROR_INVALID_HANDLE,)
    check(cu.cuEventRecord(event, None))
    assert cu.cuEventElapsedTime(event, foreign_event) == (R.CUDA_ERROR_INVALID_HANDLE, None)  # never recorded
    check(cu.cuStreamWaitEvent(None, foreign_event, 0))  # cross-context waits are legal
    check(cu.cuEventDestroy(event))
    assert cu.cuEventRecord(event, None) == (R.CUDA_ERROR_INVALID_HANDLE,)
    check(cu.cuCtxDestroy(other))


# ----- environment -----
@pytest.mark.parametrize("env", [
    {"memory": "abc"}, {"memory": "-5"}, {"memory": "0"}, {"memory": "1e99"}, {"memory": "nan"},
    {"devices": "0"}, {"devices": "-1"}, {"devices": "x"}, {"devices": "65"},
    {"arch": "sm_999"}, {"arch": ""}, {"arch": "sm_80x"},
    {"launch_timeout": "0"}, {"launch_timeout": "inf"}, {"launch_timeout": "soon"},
    {"deferred": "yes"}, {"deferred": "2"},
])
def test_environment_garbage_makes_cuinit_invalid_value(make_system: Any, env: dict[str, str]) -> None:
    with pytest.raises(AssertionError, match="CUDA_ERROR_INVALID_VALUE"):
        make_system(**env)
    (name, value), = env.items()
    assert f"MOCKGPU_{name.upper()}={value!r}" in report()


@pytest.mark.parametrize("call", [
    lambda: cu.cuTexObjectCreate(None, cu.CUDA_TEXTURE_DESC(), None),
    lambda: cu.cuMemPoolCreate(None),
    lambda: cu.cuMemGetAllocationGranularity(None, 0),
    lambda: cu.cuMemCreate(2 << 20, None, 0),
    lambda: cu.cuGraphAddMemAllocNode(cu.cuGraphCreate(0)[1], None, 0, None),
    lambda: cu.cuGraphAddKernelNode(cu.cuGraphCreate(0)[1], None, 0, None),
], ids=["cuTexObjectCreate", "cuMemPoolCreate", "cuMemGetAllocationGranularity", "cuMemCreate",
        "cuGraphAddMemAllocNode", "cuGraphAddKernelNode"])
def test_none_for_a_struct_is_a_null_pointer_the_driver_refuses(ctx: Any, call: Any) -> None:
    """cuda-python passes None for a struct pointer as NULL: the driver's CUDA_ERROR_INVALID_VALUE, never an
    AttributeError; the context goes on."""
    assert call()[0] == R.CUDA_ERROR_INVALID_VALUE
    check(cu.cuCtxSynchronize())


def reserved_mapping() -> tuple[Any, int]:
    """(address, size) of a 2 MiB reservation with physical memory of device 0 mapped behind it."""
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    size = 2 << 20
    va = check(cu.cuMemAddressReserve(size, 0, 0, 0))
    check(cu.cuMemMap(va, size, 0, check(cu.cuMemCreate(size, prop, 0)), 0))
    return va, size


@pytest.mark.parametrize(("desc", "exc", "needle"), [
    (None, RuntimeError, "List is too small: 0 < 1"),
    ([], RuntimeError, "List is too small: 0 < 1"),
    ([None], TypeError, "is not instance of type"),
    (cu.CUmemAccessDesc(), TypeError, "not iterable"),
])
def test_access_descriptors_cuda_python_refuses_raise_its_errors(ctx: Any, desc: Any, exc: type, needle: str) -> None:
    """cuMemSetAccess(ptr, size, desc, count): cuda-python checks ``desc`` is a list of at least ``count``
    CUmemAccessDesc before it calls the driver (RuntimeError "List is too small", TypeError)."""
    va, size = reserved_mapping()
    with pytest.raises(exc, match=needle):
        cu.cuMemSetAccess(va, size, desc, 1)
    assert cu.cuMemSetAccess(va, size, None, 0) == (R.CUDA_ERROR_INVALID_VALUE,)  # NULL, 0: nothing to set


def test_pointer_attribute_lists_cuda_python_refuses_raise_its_errors(ctx: Any) -> None:
    ptr = check(cu.cuMemAlloc(64))
    P = cu.CUpointer_attribute
    with pytest.raises(RuntimeError, match="List is too small: 0 < 1"):
        cu.cuPointerGetAttributes(1, None, ptr)
    with pytest.raises(TypeError, match="is not instance of type"):
        cu.cuPointerGetAttributes(1, [int(P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)], ptr)
    assert check(cu.cuPointerGetAttributes(1, [P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, P.CU_POINTER_ATTRIBUTE_CONTEXT],
                                           ptr)) == [0]


@pytest.mark.parametrize("unset", ["srcMemoryType", "dstMemoryType"])
def test_a_3d_copy_with_a_memory_type_left_unset_is_invalid_value(ctx: Any, unset: str) -> None:
    """CUDA_MEMCPY3D whose srcMemoryType/dstMemoryType holds no CUmemorytype (0, as a fresh struct has it):
    cuMemcpy3D and cuGraphAddMemcpyNode return CUDA_ERROR_INVALID_VALUE and copy nothing."""
    ptr = check(cu.cuMemAlloc(64))
    host = np.zeros(64, np.uint8)
    p = cu.CUDA_MEMCPY3D()
    p.WidthInBytes, p.Height, p.Depth = 64, 1, 1
    if unset == "srcMemoryType":
        p.dstMemoryType, p.dstDevice, p.srcHost = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, ptr, host
    else:
        p.srcMemoryType, p.srcDevice, p.dstHost = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, ptr, host
    assert cu.cuMemcpy3D(p) == (R.CUDA_ERROR_INVALID_VALUE,)
    graph = check(cu.cuGraphCreate(0))
    assert cu.cuGraphAddMemcpyNode(graph, None, 0, p, check(cu.cuCtxGetCurrent())) == (R.CUDA_ERROR_INVALID_VALUE, None)
    assert check(cu.cuGraphGetNodes(graph, 0))[1] == 0
    check(cu.cuCtxSynchronize())


@pytest.mark.parametrize("name", ["exact_bounds", "deferred"])
def test_an_empty_flag_is_its_default_as_if_unset(make_system: Any, name: str) -> None:
    """MOCKGPU_EXACT_BOUNDS= / MOCKGPU_DEFERRED= (set, empty) start the default system instead of failing cuInit."""
    make_system(**{name: ""})
    config = load_config({f"MOCKGPU_{name.upper()}": ""})
    assert (config.exact_bounds, config.deferred) == (False, True)


def test_virtual_memory_calls_after_a_fault_return_the_sticky_error(store: Any) -> None:
    """After a kernel fault every call on the context returns its sticky error, the VMM calls too."""
    fn, _ = store
    va, size = reserved_mapping()
    check(launch(fn, (1, 1, 1), (32, 1, 1), [(cu.CUdeviceptr(8), PTR), (7, U32)]))  # a store near null
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    assert cu.cuMemUnmap(va, size) == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    assert cu.cuMemAddressReserve(size, 0, 0, 0) == (R.CUDA_ERROR_ILLEGAL_ADDRESS, None)


def test_a_fault_of_another_context_s_pending_work_met_while_freeing_is_logged_and_stays_its_own(
        ctx: Any, caplog: pytest.LogCaptureFixture) -> None:
    """cuMemFree synchronizes every context; a fault in another context's pending kernel is not this call's error
    (it is that context's sticky error) but is logged, not dropped silently."""
    mine = check(cu.cuMemAlloc(64))
    other = check(cu.cuCtxCreate(None, 0, check(cu.cuDeviceGet(0))))  # now current
    fn = check(cu.cuModuleGetFunction(check(cu.cuModuleLoadData(STORE_KERNEL.encode())), b"k"))
    check(launch(fn, (1, 1, 1), (32, 1, 1), [(cu.CUdeviceptr(8), PTR), (7, U32)]))  # faults when it runs
    check(cu.cuCtxPopCurrent())
    with caplog.at_level("WARNING", logger="mock_gpu"):
        check(cu.cuMemFree(mine))
    assert "another context failed" in caplog.text
    check(cu.cuCtxPushCurrent(other))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)
    check(cu.cuCtxPopCurrent())
    check(cu.cuCtxDestroy(other))
