"""CUDA graphs under the mock (CUDA driver API 6.24 "Graph Management"): kernel nodes with dynamic shared memory,
memset and memcpy nodes, dependencies added later, topological instantiation, exec updates, stream capture."""

from __future__ import annotations

from typing import Any

import numpy as np
from _driver_util import PTR, U32, check, from_device, kernels, pinned, to_device

from mock_gpu import driver as cu

R = cu.CUresult
NON_BLOCKING = cu.CUstream_flags.CU_STREAM_NON_BLOCKING


def kernel_node(fn: Any, args: list[tuple[Any, Any]], threads: int, shared: int = 0) -> Any:
    p = cu.CUDA_KERNEL_NODE_PARAMS()
    p.func, p.gridDimX, p.gridDimY, p.gridDimZ = fn, 1, 1, 1
    p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes = threads, 1, 1, shared
    p.kernelParams = (tuple(v for v, _ in args), tuple(t for _, t in args))
    return p


def memset_node(dst: Any, value: int, element: int, width: int, height: int = 1, pitch: int = 0) -> Any:
    p = cu.CUDA_MEMSET_NODE_PARAMS()
    p.dst, p.value, p.elementSize, p.width, p.height, p.pitch = dst, value, element, width, height, pitch
    return p


def device_to_host(src: Any, host_address: int, nbytes: int) -> Any:
    p = cu.CUDA_MEMCPY3D()
    p.srcMemoryType, p.srcDevice = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, src
    p.dstMemoryType, p.dstHost = cu.CUmemorytype.CU_MEMORYTYPE_HOST, host_address
    p.WidthInBytes, p.Height, p.Depth = nbytes, 1, 1
    return p


def test_kernel_node_honours_dynamic_shared_memory(ctx: Any) -> None:
    mirror = kernels()["mirror"]
    x = np.arange(64, dtype=np.uint32) * 3
    src, out = to_device(x), to_device(np.zeros(64, np.uint32))
    graph = check(cu.cuGraphCreate(0))
    check(cu.cuGraphAddKernelNode(graph, None, 0, kernel_node(mirror, [(out, PTR), (src, PTR)], 64, shared=64 * 4)))
    exe = check(cu.cuGraphInstantiate(graph, 0))
    check(cu.cuGraphLaunch(exe, None))
    np.testing.assert_array_equal(from_device(out, 64, np.uint32), x[::-1])
    short = check(cu.cuGraphCreate(0))  # 128 bytes for 64 threads: thread 32 is the first past the end
    check(cu.cuGraphAddKernelNode(short, None, 0, kernel_node(mirror, [(out, PTR), (src, PTR)], 64, shared=128)))
    check(cu.cuGraphLaunch(check(cu.cuGraphInstantiate(short, 0)), None))
    assert cu.cuCtxSynchronize() == (R.CUDA_ERROR_ILLEGAL_ADDRESS,)


def test_memset_nodes_one_and_two_dimensional(ctx: Any) -> None:
    buf = to_device(np.zeros(4 * 16, np.uint32))
    graph = check(cu.cuGraphCreate(0))
    whole = check(cu.cuGraphAddMemsetNode(graph, None, 0, memset_node(buf, 0x01020304, 4, 64), ctx))
    # rows of 3 u16 at a pitch of 16 bytes, over the first 4 rows
    check(cu.cuGraphAddMemsetNode(graph, [whole], 1, memset_node(buf, 0xBEEF, 2, 3, height=4, pitch=16), ctx))
    check(cu.cuGraphLaunch(check(cu.cuGraphInstantiate(graph, 0)), None))
    expected = np.full(128, 0x0304, np.uint16)
    expected[1::2] = 0x0102
    for row in range(4):
        expected[row * 8:row * 8 + 3] = 0xBEEF
    np.testing.assert_array_equal(from_device(buf, 128, np.uint16), expected)


def test_dependencies_added_later_order_the_nodes(ctx: Any) -> None:
    """Nodes added in the opposite order of their data flow, ordered by cuGraphAddDependencies (the cuda-python 13
    form with edge data, and the 12 form without)."""
    fill = kernels()["fill"]
    buf = to_device(np.zeros(64, np.uint32))
    result = pinned(64 * 4)
    graph = check(cu.cuGraphCreate(0))
    copy = check(cu.cuGraphAddMemcpyNode(graph, None, 0, device_to_host(buf, result.ctypes.data, 256), ctx))
    second = check(cu.cuGraphAddKernelNode(graph, None, 0, kernel_node(fill, [(buf, PTR), (2, U32), (32, U32)], 64)))
    first = check(cu.cuGraphAddKernelNode(graph, None, 0, kernel_node(fill, [(buf, PTR), (1, U32), (64, U32)], 64)))
    check(cu.cuGraphAddDependencies(graph, [first], [second], None, 1))
    check(cu.cuGraphAddDependencies(graph, [second], [copy], 1))
    assert cu.cuGraphAddDependencies(graph, [second], [copy], None, 1) == (R.CUDA_ERROR_INVALID_VALUE,)  # repeated
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    check(cu.cuGraphLaunch(check(cu.cuGraphInstantiate(graph, 0)), stream))
    np.testing.assert_array_equal(result.view(np.uint32), 0)  # launched, not yet waited for
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(result.view(np.uint32), [2] * 32 + [1] * 32)


def test_a_dependency_cycle_cannot_be_instantiated(ctx: Any) -> None:
    graph = check(cu.cuGraphCreate(0))
    a = check(cu.cuGraphAddEmptyNode(graph, None, 0))
    b = check(cu.cuGraphAddEmptyNode(graph, [a], 1))
    check(cu.cuGraphAddDependencies(graph, [b], [a], None, 1))
    assert cu.cuGraphInstantiate(graph, 0) == (R.CUDA_ERROR_INVALID_VALUE, None)


def test_instantiate_with_params_and_exec_updates_apply_to_later_launches(ctx: Any) -> None:
    fill = kernels()["fill"]
    buf = to_device(np.zeros(64, np.uint32))
    result = pinned(64 * 4)
    graph = check(cu.cuGraphCreate(0))
    node = check(cu.cuGraphAddKernelNode(graph, None, 0, kernel_node(fill, [(buf, PTR), (1, U32), (64, U32)], 64)))
    copy = check(cu.cuGraphAddMemcpyNode(graph, [node], 1, device_to_host(buf, result.ctypes.data, 256), ctx))
    params = cu.CUDA_GRAPH_INSTANTIATE_PARAMS()
    exe = check(cu.cuGraphInstantiateWithParams(graph, params))
    assert params.result_out == cu.CUgraphInstantiateResult.CUDA_GRAPH_INSTANTIATE_SUCCESS
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    check(cu.cuGraphLaunch(exe, stream))
    check(cu.cuGraphExecKernelNodeSetParams(exe, node, kernel_node(fill, [(buf, PTR), (5, U32), (64, U32)], 64)))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(result.view(np.uint32), 1)  # the launch enqueued before the update
    check(cu.cuGraphLaunch(exe, stream))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(result.view(np.uint32), 5)
    assert cu.cuGraphExecKernelNodeSetParams(exe, copy, kernel_node(fill, [(buf, PTR), (5, U32), (64, U32)], 64)) \
        == (R.CUDA_ERROR_INVALID_VALUE,)


def test_stream_capture_records_work_instead_of_running_it(ctx: Any) -> None:
    fill = kernels()["fill"]
    stream = check(cu.cuStreamCreate(NON_BLOCKING))
    buf = to_device(np.zeros(64, np.uint32))
    check(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
    assert check(cu.cuStreamIsCapturing(stream)) == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
    check(cu.cuMemsetD32Async(buf, 9, 64, stream))
    check(cu.cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, stream, ((buf, 4, 16), (None, U32, U32)), 0))
    graph = check(cu.cuStreamEndCapture(stream))
    check(cu.cuCtxSynchronize())
    np.testing.assert_array_equal(from_device(buf, 64, np.uint32), 0)  # captured, not run
    exe = check(cu.cuGraphInstantiate(graph, 0))
    for _ in range(2):
        check(cu.cuGraphLaunch(exe, stream))
    check(cu.cuStreamSynchronize(stream))
    np.testing.assert_array_equal(from_device(buf, 64, np.uint32), [4] * 16 + [9] * 48)


def test_capture_misuse_is_reported(ctx: Any) -> None:
    stream = check(cu.cuStreamCreate(0))
    mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    assert cu.cuStreamBeginCapture(None, mode) == (R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
    assert cu.cuStreamEndCapture(stream) == (R.CUDA_ERROR_ILLEGAL_STATE, None)
    check(cu.cuStreamBeginCapture(stream, mode))
    assert cu.cuStreamSynchronize(stream) == (R.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
    assert check(cu.cuStreamIsCapturing(stream)) == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_INVALIDATED
    assert cu.cuStreamEndCapture(stream) == (R.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, None)
    assert check(cu.cuStreamIsCapturing(stream)) == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def test_exec_updates_of_memcpy_and_memset_nodes(ctx: Any) -> None:
    a, b = to_device(np.zeros(16, np.uint32)), to_device(np.zeros(16, np.uint32))
    result = pinned(64)
    graph = check(cu.cuGraphCreate(0))
    fill = check(cu.cuGraphAddMemsetNode(graph, None, 0, memset_node(a, 3, 4, 16), ctx))
    copy = check(cu.cuGraphAddMemcpyNode(graph, [fill], 1, device_to_host(a, result.ctypes.data, 64), ctx))
    exe = check(cu.cuGraphInstantiate(graph, 0))
    check(cu.cuGraphExecMemsetNodeSetParams(exe, fill, memset_node(b, 8, 4, 16), ctx))
    check(cu.cuGraphExecMemcpyNodeSetParams(exe, copy, device_to_host(b, result.ctypes.data, 64), ctx))
    check(cu.cuGraphLaunch(exe, None))
    check(cu.cuCtxSynchronize())
    np.testing.assert_array_equal(result.view(np.uint32), 8)
    np.testing.assert_array_equal(from_device(a, 16, np.uint32), 0)  # the updated exec no longer touches a
    assert cu.cuGraphExecMemsetNodeSetParams(exe, copy, memset_node(b, 8, 4, 16), ctx) == (R.CUDA_ERROR_INVALID_VALUE,)


def test_graph_memory_nodes_give_an_address_at_creation_that_later_nodes_use(ctx: Any) -> None:
    graph = check(cu.cuGraphCreate(0))
    params = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
    params.poolProps.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    params.poolProps.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    params.bytesize = 256
    alloc = check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    assert int(params.dptr) != 0
    fill = cu.CUDA_MEMSET_NODE_PARAMS()
    fill.dst, fill.value, fill.elementSize, fill.width, fill.height = params.dptr, 0x5A, 1, 256, 1
    memset = check(cu.cuGraphAddMemsetNode(graph, [alloc], 1, fill, check(cu.cuCtxGetCurrent())))
    out = np.zeros(256, np.uint8)
    copy = check(cu.cuGraphAddMemcpyNode(graph, [memset], 1, device_to_host(params.dptr, out.ctypes.data, 256),
                                         check(cu.cuCtxGetCurrent())))
    check(cu.cuGraphAddMemFreeNode(graph, [copy], 1, params.dptr))
    check(cu.cuGraphLaunch(check(cu.cuGraphInstantiate(graph, 0)), None))
    check(cu.cuCtxSynchronize())
    np.testing.assert_array_equal(out, 0x5A)
    A = cu.CUgraphMem_attribute
    for attr in (A.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, A.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH):
        assert int(check(cu.cuDeviceGetGraphMemAttribute(cu.CUdevice(0), attr))) == 256


def test_memory_pool_reuse_flags_are_ints_and_byte_counts_cuuint64(ctx: Any) -> None:
    props = cu.CUmemPoolProps()
    props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    pool = check(cu.cuMemPoolCreate(props))
    P = cu.CUmemPool_attribute
    check(cu.cuMemPoolSetAttribute(pool, P.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, cu.cuuint64_t(9)))
    reuse = check(cu.cuMemPoolGetAttribute(pool, P.CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC))
    assert type(reuse) is int and reuse == 0
    threshold = check(cu.cuMemPoolGetAttribute(pool, P.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD))
    assert isinstance(threshold, cu.cuuint64_t) and int(threshold) == 9
    check(cu.cuMemPoolDestroy(pool))
