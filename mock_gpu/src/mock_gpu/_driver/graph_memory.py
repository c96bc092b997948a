"""Memory nodes of CUDA graphs (CUDA driver API 6.24 "Graph Management": cuGraphAddMemAllocNode,
cuGraphAddMemFreeNode, cuDeviceGetGraphMemAttribute, cuDeviceGraphMemTrim).

The driver fixes a memory node's virtual address when the node is added and maps memory when the graph runs; the
emulator allocates at once, so the address is valid from creation. The memory is released when no graph holds its
node and the program does not own it (:mod:`mock_gpu._driver.graph_pool`); cuDeviceGraphMemTrim is accepted and
keeps what graphs still hold, as the driver does."""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import (
    CUDA_MEM_ALLOC_NODE_PARAMS,
    CUdeviceptr,
    CUgraphMem_attribute,
    CUmemLocationType,
    cuuint64_t,
)

from .graph import add_node
from .graph_pool import GraphAllocation, GraphFree
from .handles import Device, handle_value
from .marshal import byte_count, struct_arg
from .memory import allocate
from .results import error
from .system import api, current_ctx, system


def _device(location: Any) -> Device:
    if int(location.type) != CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE:
        raise error("CUDA_ERROR_INVALID_VALUE", "graph memory nodes allocate device memory (CU_MEM_LOCATION_TYPE_DEVICE)")
    return system().device(int(location.id))


@api(1)
def cuGraphAddMemAllocNode(hGraph: Any, dependencies: Any, numDependencies: Any, nodeParams: Any) -> tuple:  # noqa: N803
    """cuGraphAddMemAllocNode(hGraph, dependencies, numDependencies, nodeParams) -> (CUresult, CUgraphNode): an
    allocation of ``nodeParams.bytesize`` bytes on ``nodeParams.poolProps.location``; its address is written to
    ``nodeParams.dptr``, as the driver writes it."""
    ctx = current_ctx()
    params = struct_arg(nodeParams, CUDA_MEM_ALLOC_NODE_PARAMS, "nodeParams")
    size = byte_count(params.bytesize, "nodeParams.bytesize")
    device = _device(params.poolProps.location)
    if size == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "nodeParams.bytesize must be positive")
    sys_ = system()
    allocation = GraphAllocation(allocate(size, device.ordinal), size, device, sys_.space)
    try:
        node = add_node(hGraph, dependencies, numDependencies, allocation)
    except Exception:  # bad dependencies: nothing is added, nothing stays allocated
        sys_.space.free(allocation.ptr)
        raise
    sys_.allocations[allocation.ptr] = ctx
    sys_.graph_allocations[allocation.ptr] = allocation
    device.graph_memory += size
    device.graph_memory_high = max(device.graph_memory_high, device.graph_memory)
    params.dptr = CUdeviceptr(allocation.ptr)
    return node


@api(1)
def cuGraphAddMemFreeNode(hGraph: Any, dependencies: Any, numDependencies: Any, dptr: Any) -> tuple:  # noqa: N803
    """cuGraphAddMemFreeNode(hGraph, dependencies, numDependencies, dptr) -> (CUresult, CUgraphNode): the end of a
    graph allocation's lifetime: running it gives the memory back to the graph's pool; CUDA_ERROR_INVALID_VALUE for
    an address no graph allocation starts at."""
    allocation = system().graph_allocations.get(handle_value(dptr))
    if allocation is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{handle_value(dptr):#x} is no graph memory allocation")
    return add_node(hGraph, dependencies, numDependencies, GraphFree(allocation))


@api(1)
def cuDeviceGetGraphMemAttribute(device: Any, attr: Any) -> tuple:
    """cuDeviceGetGraphMemAttribute(device, attr) -> (CUresult, cuuint64_t): bytes of graph memory of ``device``
    (used and reserved are the same in the emulator) or their high-water mark."""
    dev = system().device(handle_value(device))
    A = CUgraphMem_attribute
    high = int(attr) in (A.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, A.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
    return (cuuint64_t(dev.graph_memory_high if high else dev.graph_memory),)


@api(0)
def cuDeviceGraphMemTrim(device: Any) -> tuple:
    """cuDeviceGraphMemTrim(device): accepted; memory no graph holds is released already."""
    system().device(handle_value(device))
    return ()
