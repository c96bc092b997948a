"""Memory nodes of CUDA graphs (CUDA driver API 6.24 "Graph Management": cuGraphAddMemAllocNode,
cuGraphAddMemFreeNode, cuDeviceGetGraphMemAttribute, cuDeviceGraphMemTrim).

The driver fixes a memory node's virtual address when the node is added and maps memory when the graph runs; the
emulator allocates at once, so the address is valid from creation, and keeps the memory for the graph's device
pool: a free node orders work and releases nothing, and the device's graph memory only grows (cuDeviceGraphMemTrim
is accepted and keeps it, as memory still reserved by graphs is kept by the driver too)."""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUdeviceptr, CUgraphMem_attribute, CUmemLocationType, cuuint64_t

from .graph import add_node
from .handles import Device, handle_value
from .marshal import byte_count
from .results import error
from .stream import Marker
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
    current_ctx()
    size = byte_count(nodeParams.bytesize, "nodeParams.bytesize")
    device = _device(nodeParams.poolProps.location)
    if size == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "nodeParams.bytesize must be positive")
    node = add_node(hGraph, dependencies, numDependencies, Marker("graph memory allocation"))
    sys_ = system()
    ptr = sys_.space.alloc(size, device.ordinal)
    sys_.allocations[ptr] = current_ctx()
    device.graph_memory += size
    device.graph_memory_high = max(device.graph_memory_high, device.graph_memory)
    nodeParams.dptr = CUdeviceptr(ptr)
    return node


@api(1)
def cuGraphAddMemFreeNode(hGraph: Any, dependencies: Any, numDependencies: Any, dptr: Any) -> tuple:  # noqa: N803
    """cuGraphAddMemFreeNode(hGraph, dependencies, numDependencies, dptr) -> (CUresult, CUgraphNode): the end of a
    graph allocation's lifetime; CUDA_ERROR_INVALID_VALUE for an address no allocation starts at."""
    if system().space.allocation(handle_value(dptr)) is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{handle_value(dptr):#x} is no graph memory allocation")
    return add_node(hGraph, dependencies, numDependencies, Marker("graph memory free"))


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
    """cuDeviceGraphMemTrim(device): accepted; the emulator keeps graph memory until the system is reset."""
    system().device(handle_value(device))
    return ()
