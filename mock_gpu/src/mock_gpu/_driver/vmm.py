"""Virtual memory management and stream-ordered allocation (CUDA driver API 6.14 "Virtual Memory Management",
6.16 "Stream Ordered Memory Allocator").

VMM: cuMemAddressReserve hands out address ranges with nothing behind them, cuMemCreate physical memory (a zeroed
byte array on a device), cuMemMap puts physical memory behind part of a range, cuMemSetAccess is checked and
recorded (every mapped byte is accessible to every device, as peer access is bookkeeping in the emulator). Accesses
to a reserved but unmapped address fault like any other.

Pools: cuMemAllocAsync allocates at once (the memory is valid for the stream's later work, which is all the stream
order promises); cuMemFreeAsync frees when the stream reaches it. Each device has a default pool and pools can be
created; their attributes are kept (the release threshold and reuse policies have no effect on the emulator).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cuda.bindings.driver import (
    CUdeviceptr,
    CUmemAccessDesc,
    CUmemAllocationGranularity_flags,
    CUmemAllocationProp,
    CUmemGenericAllocationHandle,
    CUmemLocationType,
    CUmemoryPool,
    CUmemPool_attribute,
    CUmemPoolProps,
    cuuint64_t,
)

from .graph_pool import GraphAllocation, disown, give_back
from .handles import Stream, handle_value
from .marshal import byte_count, struct_arg, struct_list
from .memory import charge, cuMemAlloc
from .results import DriverError, error
from .system import api, current_ctx, raise_if_current_sticky, resolve_stream, system
from .work import enqueue

GRANULARITY = 2 << 20  # CU_MEM_ALLOC_GRANULARITY_MINIMUM and _RECOMMENDED of the emulated devices (2 MiB pages)


@dataclass(eq=False)
class Physical:
    """Physical memory from cuMemCreate: ``data`` on device ``device``; ``mappings`` counts the ranges it backs."""

    handle: int
    data: np.ndarray
    device: int
    released: bool = False
    mappings: int = 0


@dataclass(eq=False)
class Pool:
    """A memory pool (cuMemPoolCreate or a device's default pool) and its attributes."""

    handle: int
    device: int
    attributes: dict[int, int] = field(default_factory=dict)


def _location_device(location: Any) -> int:
    if int(location.type) != int(CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE):
        raise error("CUDA_ERROR_INVALID_VALUE", f"location type {location.type!r}: only device locations are "
                    "emulated")
    return system().device(int(location.id)).ordinal


@api(1)
def cuMemGetAllocationGranularity(prop: Any, option: Any) -> tuple:
    """cuMemGetAllocationGranularity(prop, option) -> (CUresult, int): 2 MiB for every device and option."""
    _location_device(struct_arg(prop, CUmemAllocationProp, "prop").location)
    CUmemAllocationGranularity_flags(int(option))
    return (GRANULARITY,)


@api(1)
def cuMemAddressReserve(size: Any, alignment: Any, addr: Any, flags: Any) -> tuple:
    """cuMemAddressReserve(size, alignment, addr, flags) -> (CUresult, CUdeviceptr): a range of ``size`` bytes (a
    multiple of the granularity) with nothing mapped; ``addr`` is a hint the emulator ignores."""
    raise_if_current_sticky()
    nbytes = byte_count(size, "size")
    if nbytes == 0 or nbytes % GRANULARITY:
        raise error("CUDA_ERROR_INVALID_VALUE", f"reservation size {nbytes} is not a positive multiple of the "
                    f"granularity {GRANULARITY}")
    try:
        base = system().space.reserve(nbytes, byte_count(alignment, "alignment"))
    except ValueError as exc:
        raise error("CUDA_ERROR_INVALID_VALUE", str(exc)) from exc
    return (CUdeviceptr(base),)


@api(0)
def cuMemAddressFree(ptr: Any, size: Any) -> tuple:
    """cuMemAddressFree(ptr, size): give back a reserved range (its mappings must be gone; the addresses are not
    handed out again, so later accesses fault)."""
    raise_if_current_sticky()
    byte_count(size, "size")
    handle_value(ptr)
    return ()


@api(1)
def cuMemCreate(size: Any, prop: Any, flags: Any) -> tuple:
    """cuMemCreate(size, prop, flags) -> (CUresult, CUmemGenericAllocationHandle): ``size`` bytes (a multiple of the
    granularity) of zeroed physical memory on the device of ``prop.location``."""
    raise_if_current_sticky()
    nbytes = byte_count(size, "size")
    if nbytes == 0 or nbytes % GRANULARITY:
        raise error("CUDA_ERROR_INVALID_VALUE", f"size {nbytes} is not a positive multiple of the granularity "
                    f"{GRANULARITY}")
    device = _location_device(struct_arg(prop, CUmemAllocationProp, "prop").location)
    sys_ = system()
    charge(device, nbytes)
    physical = sys_.register(Physical(sys_.new_handle(), np.zeros(nbytes, np.uint8), device))
    return (CUmemGenericAllocationHandle(physical.handle),)


def _drop(physical: Physical) -> None:
    """Free physical memory that is released and backs no mapping (its bytes no longer count as used)."""
    sys_ = system()
    if sys_.objects.pop(physical.handle, None) is not None:
        sys_.space.refund(physical.device, physical.data.size)


def _physical(handle: Any) -> Physical:
    physical = system().lookup(handle, Physical, "allocation handle")
    if physical.released:
        raise error("CUDA_ERROR_INVALID_VALUE", f"allocation handle {physical.handle:#x} was released")
    return physical


@api(0)
def cuMemRelease(handle: Any) -> tuple:
    """cuMemRelease(handle): drop the handle; the memory lives on while mapped (CUDA driver API, cuMemRelease)."""
    raise_if_current_sticky()
    physical = _physical(handle)
    physical.released = True
    if physical.mappings == 0:
        _drop(physical)
    return ()


@dataclass(eq=False)
class Mapping:
    """A cuMemMap of physical memory at ``base``."""

    handle: int
    physical: Physical


@api(0)
def cuMemMap(ptr: Any, size: Any, offset: Any, handle: Any, flags: Any) -> tuple:
    """cuMemMap(ptr, size, offset, handle, flags): put ``size`` bytes of the physical memory ``handle`` from
    ``offset`` behind the reserved addresses at ``ptr``. CUDA_ERROR_INVALID_VALUE past the physical memory's end or
    over an existing mapping."""
    raise_if_current_sticky()
    base, nbytes, start = handle_value(ptr), byte_count(size, "size"), byte_count(offset, "offset")
    physical = _physical(handle)
    if nbytes == 0 or start + nbytes > physical.data.size:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemMap of {nbytes} bytes from offset {start} exceeds the "
                    f"{physical.data.size} bytes of the allocation")
    try:
        system().space.map(base, physical.data[start:start + nbytes], physical.device)
    except ValueError as exc:
        raise error("CUDA_ERROR_INVALID_VALUE", str(exc)) from exc
    physical.mappings += 1
    system().mappings[base] = Mapping(base, physical)
    return ()


@api(0)
def cuMemUnmap(ptr: Any, size: Any) -> tuple:
    """cuMemUnmap(ptr, size): remove the mappings in ``[ptr, ptr + size)``; physical memory whose handle was
    released and that backs nothing more is freed."""
    raise_if_current_sticky()
    base, nbytes = handle_value(ptr), byte_count(size, "size")
    sys_ = system()
    inside = [b for b in sys_.mappings if base <= b < base + nbytes]
    if not inside:
        raise error("CUDA_ERROR_INVALID_VALUE", f"nothing is mapped in {base:#x} + {nbytes}")
    for b in inside:
        mapping = sys_.mappings.pop(b)
        sys_.space.unmap(b)
        mapping.physical.mappings -= 1
        if mapping.physical.released and mapping.physical.mappings == 0:
            _drop(mapping.physical)
    return ()


@api(0)
def cuMemSetAccess(ptr: Any, size: Any, desc: Any, count: Any) -> tuple:
    """cuMemSetAccess(ptr, size, desc, count): check the access descriptors (device locations of existing devices,
    ``count`` of them; a list shorter than ``count`` or of other types is cuda-python's RuntimeError/TypeError);
    the emulator lets every device access every mapping."""
    raise_if_current_sticky()
    handle_value(ptr)
    byte_count(size, "size")
    number = byte_count(count, "count")
    descriptors = struct_list(desc, number, CUmemAccessDesc, "desc")
    if not descriptors:
        raise error("CUDA_ERROR_INVALID_VALUE", "cuMemSetAccess needs at least one access descriptor (count is 0)")
    for d in descriptors:
        _location_device(d.location)
    return ()


# ----- stream-ordered allocation -----

def _pool_of_device(ordinal: int) -> Pool:
    sys_ = system()
    if ordinal not in sys_.default_pools:
        sys_.default_pools[ordinal] = sys_.register(Pool(sys_.new_handle(), ordinal))
    return sys_.default_pools[ordinal]


@api(1)
def cuDeviceGetDefaultMemPool(dev: Any) -> tuple:
    """cuDeviceGetDefaultMemPool(dev) -> (CUresult, CUmemoryPool)."""
    return (CUmemoryPool(_pool_of_device(system().device(dev).ordinal).handle),)


@api(1)
def cuDeviceGetMemPool(dev: Any) -> tuple:
    """cuDeviceGetMemPool(dev) -> (CUresult, CUmemoryPool): the device's current pool (its default pool)."""
    return (CUmemoryPool(_pool_of_device(system().device(dev).ordinal).handle),)


@api(1)
def cuMemPoolCreate(poolProps: Any) -> tuple:  # noqa: N803
    """cuMemPoolCreate(poolProps) -> (CUresult, CUmemoryPool): a pool on the device of ``poolProps.location``."""
    sys_ = system()
    location = struct_arg(poolProps, CUmemPoolProps, "poolProps").location
    return (CUmemoryPool(sys_.register(Pool(sys_.new_handle(), _location_device(location))).handle),)


@api(0)
def cuMemPoolDestroy(pool: Any) -> tuple:
    """cuMemPoolDestroy(pool)."""
    sys_ = system()
    del sys_.objects[sys_.lookup(pool, Pool, "memory pool").handle]
    return ()


_U64_ATTRIBUTES = {int(a) for a in CUmemPool_attribute if "_MEM_" in a.name or a.name.endswith("THRESHOLD")}


@api(0)
def cuMemPoolSetAttribute(pool: Any, attr: Any, value: Any) -> tuple:
    """cuMemPoolSetAttribute(pool, attr, value): record the attribute (int or cuuint64_t value)."""
    target = system().lookup(pool, Pool, "memory pool")
    target.attributes[int(CUmemPool_attribute(int(attr)))] = int(value)
    return ()


@api(1)
def cuMemPoolGetAttribute(pool: Any, attr: Any) -> tuple:
    """cuMemPoolGetAttribute(pool, attr) -> (CUresult, value): what was set (0 by default); byte counts and the
    release threshold as cuuint64_t, the reuse flags as int, as cuda-python returns them."""
    target = system().lookup(pool, Pool, "memory pool")
    key = int(CUmemPool_attribute(int(attr)))
    value = target.attributes.get(key, 0)
    return (cuuint64_t(value) if key in _U64_ATTRIBUTES else value,)


@dataclass(frozen=True)
class _Free:
    """cuMemFreeAsync's work: free ``ptr`` when the stream reaches it."""

    ptr: int
    graph_allocation: GraphAllocation | None

    def run(self) -> None:
        sys_ = system()
        sys_.pending_frees.discard(self.ptr)
        if self.graph_allocation is not None:
            give_back(sys_, self.graph_allocation, synchronize=False)
        else:
            del sys_.allocations[self.ptr]
            sys_.space.free(self.ptr)

    def describe(self) -> str:
        return f"free of {self.ptr:#x}"


@api(1)
def cuMemAllocAsync(bytesize: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuMemAllocAsync(bytesize, hStream) -> (CUresult, CUdeviceptr): memory valid for work enqueued on ``hStream``
    after this call (allocated at once)."""
    resolve_stream(hStream)
    return _allocate(bytesize)


@api(1)
def cuMemAllocFromPoolAsync(bytesize: Any, pool: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuMemAllocFromPoolAsync(bytesize, pool, hStream) -> (CUresult, CUdeviceptr): as cuMemAllocAsync."""
    system().lookup(pool, Pool, "memory pool")
    resolve_stream(hStream)
    return _allocate(bytesize)


def _allocate(bytesize: Any) -> tuple:
    err, ptr = cuMemAlloc(bytesize)
    if int(err):
        raise DriverError(err, "stream-ordered allocation failed (see the cuMemAlloc report)")
    return (ptr,)


@api(0)
def cuMemFreeAsync(dptr: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuMemFreeAsync(dptr, hStream): free ``dptr`` when ``hStream`` reaches this point (its earlier work may still
    use it). CUDA_ERROR_INVALID_VALUE, at the call, for a pointer that is not a live allocation or is freed already
    (also by a cuMemFreeAsync still pending)."""
    stream: Stream = resolve_stream(hStream)
    ptr = handle_value(dptr)
    sys_ = system()
    if ptr not in sys_.allocations or ptr in sys_.pending_frees:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemFreeAsync({ptr:#x}): not a live device allocation (freed "
                    "already, or a cuMemFreeAsync of it is pending)")
    current_ctx()
    graph_allocation = disown(sys_, ptr, "cuMemFreeAsync")
    if graph_allocation is not None:
        graph_allocation.freeing = True
    else:
        sys_.pending_frees.add(ptr)
    enqueue(stream, _Free(ptr, graph_allocation))
    return ()
