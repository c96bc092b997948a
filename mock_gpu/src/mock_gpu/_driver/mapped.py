"""Memory that host and device share (CUDA driver API 6.13 "Memory Management", 6.15 "Unified Addressing"):
managed memory, registered host memory and device pointers of mapped host memory.

The emulator's device memory is host memory anyway; managed memory (cuMemAllocManaged) is page-locked host memory
mapped into the device address space at its host address, so the host reads and writes it directly and every kernel
access is still bounds-checked. Prefetches and advice have no effect; attach flags are checked.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from cuda.bindings.driver import (
    CU_DEVICE_CPU,
    CU_DEVICE_INVALID,
    CUcontext,
    CUdeviceptr,
    CUmem_advise,
    CUmem_range_attribute,
    CUmemAttach_flags,
    CUmemLocationType,
    CUmemorytype,
    CUpointer_attribute,
)

from ..address_space import MemoryFault
from .handles import handle_value
from .marshal import byte_count, host_address, struct_list
from .memory import new_host_allocation
from .results import error
from .system import api, current_ctx, resolve_stream, system
from .work import synchronize_system

_ATTACH = {int(f) for f in CUmemAttach_flags}


@api(1)
def cuMemAllocManaged(bytesize: Any, flags: Any) -> tuple:
    """cuMemAllocManaged(bytesize, flags) -> (CUresult, CUdeviceptr): memory the host and the device both address
    (the same pointer); freed by cuMemFree. CUDA_ERROR_INVALID_VALUE for 0 bytes or a flag other than
    CU_MEM_ATTACH_GLOBAL / CU_MEM_ATTACH_HOST."""
    current_ctx()
    nbytes = byte_count(bytesize, "bytesize")
    if nbytes == 0 or int(flags) not in _ATTACH - {int(CUmemAttach_flags.CU_MEM_ATTACH_SINGLE)}:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemAllocManaged({nbytes}, {flags!r}): need bytesize > 0 and "
                    "flags CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST")
    address = new_host_allocation(nbytes)
    system().managed.add(address)
    return (CUdeviceptr(address),)


@api(0)
def cuMemHostRegister(p: Any, bytesize: Any, Flags: Any) -> tuple:  # noqa: N803
    """cuMemHostRegister(p, bytesize, Flags): page-lock ``bytesize`` bytes of host memory at ``p`` (int or buffer)
    and map them for the device at the same address. CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED for an overlap."""
    current_ctx()
    address, _ = host_address(p, "p")
    nbytes = byte_count(bytesize, "bytesize")
    if address == 0 or nbytes == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "cuMemHostRegister needs a non-NULL pointer and bytesize > 0")
    sys_ = system()
    backing = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(address))
    try:
        sys_.space.map(address, backing, current_ctx().device.ordinal)
    except ValueError as exc:
        raise error("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", str(exc)) from exc
    sys_.registered[address] = nbytes
    return ()


@api(0)
def cuMemHostUnregister(p: Any) -> tuple:
    """cuMemHostUnregister(p): undo cuMemHostRegister (pending work runs first)."""
    ctx = current_ctx()
    address, _ = host_address(p, "p")
    sys_ = system()
    if address not in sys_.registered:
        raise error("CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", f"{address:#x} was not registered by cuMemHostRegister")
    synchronize_system(sys_, ctx)
    del sys_.registered[address]
    sys_.space.unmap(address)
    return ()


@api(1)
def cuMemHostGetDevicePointer(p: Any, Flags: Any) -> tuple:  # noqa: N803
    """cuMemHostGetDevicePointer(p, Flags) -> (CUresult, CUdeviceptr): the device address of mapped host memory,
    which is its host address (unified addressing). CUDA_ERROR_INVALID_VALUE for memory that is not mapped or
    Flags other than 0."""
    current_ctx()
    address, _ = host_address(p, "p")
    if int(Flags) != 0 or system().space.allocation(address) is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{address:#x} is not page-locked host memory from cuMemHostAlloc, "
                    "cuMemAllocManaged or cuMemHostRegister (or Flags is not 0)")
    return (CUdeviceptr(address),)


@api(0)
def cuMemPrefetchAsync(devPtr: Any, count: Any, location: Any, flags: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuMemPrefetchAsync(devPtr, count, location, flags, hStream): a no-op for the emulator (managed memory lives in
    one place), after checking the range and the stream."""
    resolve_stream(hStream)
    try:
        system().space.check(int(devPtr), byte_count(count, "count"))
    except MemoryFault as fault:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemPrefetchAsync: {fault}") from fault
    return ()


# ----- advice and attributes of managed ranges and pointers (CUDA driver API 6.15 "Unified Addressing") -----

def _location(location: Any) -> int:
    """A device ordinal, or CU_DEVICE_CPU (-1), from a CUmemLocation (cuda-python 13) or a device (12)."""
    if hasattr(location, "type"):
        host = {int(CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST), int(CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST_NUMA)}
        return CU_DEVICE_CPU if int(location.type) in host else int(location.id)
    return int(location)


def _managed_range(ptr: Any, count: Any) -> tuple[int, Any]:
    """(base, advice record) of the managed allocation holding ``count`` bytes at ``ptr``."""
    sys_ = system()
    found = sys_.space.allocation(int(ptr))
    if found is None or found[0] not in sys_.managed or int(ptr) + byte_count(count, "count") > found[0] + found[1]:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{int(ptr):#x} + {count} is not inside memory from cuMemAllocManaged")
    return found[0], sys_.advice.setdefault(found[0], {"read_mostly": 0, "preferred": CU_DEVICE_INVALID,
                                                       "accessed_by": []})


@api(0)
def cuMemAdvise(devPtr: Any, count: Any, advice: Any, location: Any) -> tuple:  # noqa: N803
    """cuMemAdvise(devPtr, count, advice, location): record the advice on a managed range (it changes nothing in
    the emulator, where managed memory is host memory); cuMemRangeGetAttribute reports it."""
    _, record = _managed_range(devPtr, count)
    where, name = _location(location), CUmem_advise(int(advice)).name
    if name.endswith("SET_READ_MOSTLY") or name.endswith("UNSET_READ_MOSTLY"):
        record["read_mostly"] = int(name.endswith("SET_READ_MOSTLY") and "UNSET" not in name)
    elif name.endswith("PREFERRED_LOCATION"):
        record["preferred"] = where if "UNSET" not in name else CU_DEVICE_INVALID
    elif name.endswith("ACCESSED_BY"):
        if "UNSET" in name:
            record["accessed_by"] = [d for d in record["accessed_by"] if d != where]
        elif where not in record["accessed_by"]:
            record["accessed_by"].append(where)
    return ()


def _range_value(record: dict, attribute: Any, size: int) -> Any:
    name = CUmem_range_attribute(int(attribute)).name
    if name.endswith("READ_MOSTLY"):
        return record["read_mostly"]
    if name.endswith("PREFERRED_LOCATION"):
        return record["preferred"]
    if name.endswith("ACCESSED_BY"):
        slots = size // 4
        return (record["accessed_by"] + [CU_DEVICE_INVALID] * slots)[:slots]
    if name.endswith("LAST_PREFETCH_LOCATION"):
        return CU_DEVICE_INVALID
    raise error("CUDA_ERROR_INVALID_VALUE", f"range attribute {name} is not emulated")


@api(1)
def cuMemRangeGetAttribute(dataSize: Any, attribute: Any, devPtr: Any, count: Any) -> tuple:  # noqa: N803
    """cuMemRangeGetAttribute(dataSize, attribute, devPtr, count) -> (CUresult, value): the advice recorded on a
    managed range (ACCESSED_BY: ``dataSize // 4`` devices, CU_DEVICE_INVALID-padded)."""
    _, record = _managed_range(devPtr, count)
    return (_range_value(record, attribute, byte_count(dataSize, "dataSize")),)


@api(1)
def cuMemRangeGetAttributes(dataSizes: Any, attributes: Any, numAttributes: Any, devPtr: Any,  # noqa: N803
                            count: Any) -> tuple:
    """cuMemRangeGetAttributes(dataSizes, attributes, numAttributes, devPtr, count) -> (CUresult, [values])."""
    _, record = _managed_range(devPtr, count)
    return ([_range_value(record, a, byte_count(s, "dataSize")) for a, s in zip(attributes, dataSizes)],)


def _pointer_value(attribute: Any, ptr: int) -> Any:
    sys_ = system()
    found = sys_.space.allocation(ptr)
    if found is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{ptr:#x} is not memory known to the driver")
    base, size, device = found
    managed, host = base in sys_.managed, base in sys_.host_allocations or base in sys_.registered
    P = CUpointer_attribute
    ctx = sys_.allocations.get(base) or current_ctx(check_sticky=False)
    values = {
        P.CU_POINTER_ATTRIBUTE_CONTEXT: CUcontext(ctx.handle),
        P.CU_POINTER_ATTRIBUTE_MEMORY_TYPE: int(CUmemorytype.CU_MEMORYTYPE_HOST if host and not managed
                                                else CUmemorytype.CU_MEMORYTYPE_DEVICE),
        P.CU_POINTER_ATTRIBUTE_DEVICE_POINTER: ptr, P.CU_POINTER_ATTRIBUTE_HOST_POINTER: ptr if host else 0,
        P.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: sys_.sync_memops.get(base, False), P.CU_POINTER_ATTRIBUTE_BUFFER_ID: base,
        P.CU_POINTER_ATTRIBUTE_IS_MANAGED: managed, P.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: device,
        P.CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: False, P.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: base,
        P.CU_POINTER_ATTRIBUTE_RANGE_SIZE: size, P.CU_POINTER_ATTRIBUTE_MAPPED: True,
        P.CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: 0, P.CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: False,
        P.CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: 3, P.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: 0,
        P.CU_POINTER_ATTRIBUTE_MAPPING_SIZE: size, P.CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: base,
        P.CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: base,
    }
    key = P(int(attribute))
    if key not in values:
        raise error("CUDA_ERROR_INVALID_VALUE", f"pointer attribute {key.name} is not emulated")
    return values[key]


@api(1)
def cuPointerGetAttribute(attribute: Any, ptr: Any) -> tuple:
    """cuPointerGetAttribute(attribute, ptr) -> (CUresult, value) for device, managed and mapped host memory."""
    return (_pointer_value(attribute, handle_value(ptr)),)


@api(1)
def cuPointerGetAttributes(numAttributes: Any, attributes: Any, ptr: Any) -> tuple:  # noqa: N803
    """cuPointerGetAttributes(numAttributes, attributes, ptr) -> (CUresult, [values]): ``attributes`` a list of at
    least ``numAttributes`` CUpointer_attribute (else cuda-python's RuntimeError/TypeError)."""
    wanted = struct_list(attributes, byte_count(numAttributes, "numAttributes"), CUpointer_attribute, "attributes")
    return ([_pointer_value(a, handle_value(ptr)) for a in wanted],)


@api(0)
def cuPointerSetAttribute(value: Any, attribute: Any, ptr: Any) -> tuple:
    """cuPointerSetAttribute(value, attribute, ptr): only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set (recorded)."""
    if CUpointer_attribute(int(attribute)) != CUpointer_attribute.CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        raise error("CUDA_ERROR_INVALID_VALUE", "only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set")
    found = system().space.allocation(handle_value(ptr))
    if found is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{handle_value(ptr):#x} is not memory known to the driver")
    system().sync_memops[found[0]] = bool(value)
    return ()


@api(2)
def cuMemGetAddressRange(dptr: Any) -> tuple:
    """cuMemGetAddressRange(dptr) -> (CUresult, CUdeviceptr base, size): the allocation containing ``dptr`` (device
    memory, or host memory mapped into the address space); CUDA_ERROR_NOT_FOUND for an address in none."""
    current_ctx()
    ptr = handle_value(dptr)
    found = system().space.allocation(ptr)
    if found is None:
        raise error("CUDA_ERROR_NOT_FOUND", f"{ptr:#x} lies in no allocation")
    return (CUdeviceptr(found[0]), found[1])
