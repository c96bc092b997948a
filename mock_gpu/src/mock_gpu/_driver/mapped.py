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
from cuda.bindings.driver import CUdeviceptr, CUmemAttach_flags

from ..address_space import MemoryFault
from .marshal import byte_count, host_address
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
