"""Memory management: device and page-locked host allocations, copies and memsets (CUDA driver API 6.13 "Memory
Management"; host synchronization as in CUDA driver API 2, "API synchronization behavior").

Device memory lives in the emulator's own address space (:class:`mock_gpu.address_space.AddressSpace`): device pointers are
not host addresses, and every byte a copy touches must lie in a live allocation, otherwise the call fails with
CUDA_ERROR_INVALID_VALUE and a report naming the address and the nearest allocation.

Copies and memsets are stream work (:mod:`mock_gpu._driver.work`). When they touch host memory:

- page-locked memory (cuMemHostAlloc / cuMemAllocHost) is read or written when the copy runs, as DMA does;
- pageable memory is read at enqueue for host-to-device copies (the driver stages it), and a copy to pageable memory
  completes before the call returns;
- the copies without ``Async`` run on the legacy default stream; host-to-device, device-to-host and peer copies
  return when the copy is done, device-to-device copies and memsets of device memory may still be pending.
"""

from __future__ import annotations

import ctypes
import mmap
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from cuda.bindings.driver import (
    CU_MEMHOSTALLOC_DEVICEMAP,
    CU_MEMHOSTALLOC_PORTABLE,
    CU_MEMHOSTALLOC_WRITECOMBINED,
    CUdeviceptr,
)

from ..address_space import MemoryFault, OutOfMemory
from .graph_pool import disown, give_back
from .handles import Context, HostAllocation, Stream, handle_value
from .marshal import byte_count, host_address, host_range, read_host, uint_arg
from .results import error
from .system import api, current_ctx, resolve_stream, system
from .work import complete, enqueue, synchronize_system


def _check_device(ptr: int, nbytes: int, what: str) -> None:
    """CUDA_ERROR_INVALID_VALUE unless ``nbytes`` at device address ``ptr`` lie in one live allocation."""
    try:
        system().space.check(ptr, nbytes)
    except MemoryFault as fault:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what}: {fault}") from fault


@dataclass(frozen=True)
class Copy:
    """A linear copy of ``nbytes`` between device and/or host addresses; ``staged`` holds the bytes of a pageable
    host source, read when the copy was enqueued."""

    dst: int
    dst_device: bool
    src: int
    src_device: bool
    nbytes: int
    staged: bytes | None = None

    def run(self) -> None:
        space = system().space
        if self.staged is not None:
            data = self.staged
        elif self.src_device:
            data = space.read(self.src, self.nbytes)
        else:
            data = ctypes.string_at(self.src, self.nbytes) if self.nbytes else b""
        if self.dst_device:
            space.write(self.dst, data)
        else:
            ctypes.memmove(self.dst, data, len(data))

    def describe(self) -> str:
        kinds = {True: "device", False: "host"}
        return (f"copy of {self.nbytes} bytes from {kinds[self.src_device]} {self.src:#x} to "
                f"{kinds[self.dst_device]} {self.dst:#x}")


@dataclass(frozen=True)
class Fill:
    """cuMemsetD8/D16/D32 (and 2-D memset nodes): ``rows`` rows of ``count`` copies of ``pattern``, ``pitch`` bytes
    apart, from device address ``ptr``."""

    ptr: int
    pattern: bytes
    count: int
    rows: int = 1
    pitch: int = 0

    def run(self) -> None:
        for row in range(self.rows):
            system().space.fill(self.ptr + row * self.pitch, self.pattern, self.count)

    def describe(self) -> str:
        return f"memset of {self.rows} x {self.count} x {len(self.pattern)} bytes at {self.ptr:#x}"


@api(1)
def cuMemAlloc(bytesize: int) -> tuple:
    """cuMemAlloc(bytesize) -> (CUresult, CUdeviceptr): ``bytesize`` bytes of device memory, 256-byte aligned.

    CUDA_ERROR_INVALID_VALUE for 0 bytes, CUDA_ERROR_OUT_OF_MEMORY beyond MOCKGPU_MEMORY (CUDA driver API, cuMemAlloc).
    """
    bytesize = byte_count(bytesize, "bytesize")  # converted before anything else, as cuda-python does
    ctx = current_ctx()
    if bytesize == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "cuMemAlloc bytesize must be positive, got 0")
    ptr = allocate(bytesize, ctx.device.ordinal)
    system().allocations[ptr] = ctx
    return (CUdeviceptr(ptr),)


def allocate(nbytes: int, device: int) -> int:
    """Allocate ``nbytes`` (> 0) of device memory on ``device`` in the address space; CUDA_ERROR_OUT_OF_MEMORY beyond
    its capacity (MOCKGPU_MEMORY). Returns the device pointer."""
    try:
        return system().space.alloc(nbytes, device)
    except OutOfMemory as exc:
        raise error("CUDA_ERROR_OUT_OF_MEMORY", f"{exc} (MOCKGPU_MEMORY)") from exc


def charge(device: int, nbytes: int) -> None:
    """Count ``nbytes`` of device memory held outside the address space (arrays, cuMemCreate) as used on ``device``,
    as cuMemGetInfo reports it; CUDA_ERROR_OUT_OF_MEMORY beyond its capacity (MOCKGPU_MEMORY)."""
    try:
        system().space.charge(device, nbytes)
    except OutOfMemory as exc:
        raise error("CUDA_ERROR_OUT_OF_MEMORY", f"{exc} (MOCKGPU_MEMORY)") from exc


@api(0)
def cuMemFree(dptr: Any) -> tuple:
    """cuMemFree(dptr): free a cuMemAlloc allocation; CUDA_ERROR_INVALID_VALUE for anything but a live base pointer.

    Pending work runs first (freeing synchronizes), so its error may be returned here, as the driver documents.
    """
    ctx = current_ctx()
    sys_ = system()
    ptr = handle_value(dptr)
    if ptr in sys_.managed:
        synchronize_system(sys_, ctx)
        sys_.managed.discard(ptr)
        free_host_allocation(sys_, ptr)
        return ()
    if ptr not in sys_.allocations or ptr in sys_.pending_frees:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemFree({ptr:#x}): not the base of a live device allocation "
                    "(already freed, also by a pending cuMemFreeAsync, offset into an allocation, or never allocated)")
    graph_allocation = disown(sys_, ptr, "cuMemFree")
    synchronize_system(sys_, ctx)
    if graph_allocation is not None:
        give_back(sys_, graph_allocation)
        return ()
    sys_.space.free(ptr)
    del sys_.allocations[ptr]
    return ()


@api(2)
def cuMemGetInfo() -> tuple:
    """cuMemGetInfo() -> (CUresult, free, total): bytes free and total on the current context's device."""
    ordinal = current_ctx().device.ordinal
    space = system().space
    return (space.capacity(ordinal) - space.used(ordinal), space.capacity(ordinal))


def _host_alloc(bytesize: int, flags: int) -> int:
    current_ctx()
    bytesize = byte_count(bytesize, "bytesize")
    allowed = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED
    if flags & ~allowed:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemHostAlloc Flags {flags:#x} has unknown bits")
    if bytesize <= 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"host allocation size must be positive, got {bytesize}")
    return new_host_allocation(bytesize)


def new_host_allocation(bytesize: int) -> int:
    """Page-locked host memory of ``bytesize`` bytes, mapped into the device address space at its host address (as
    unified addressing maps every page-locked allocation for all devices); its address."""
    mapping = mmap.mmap(-1, bytesize)
    view = (ctypes.c_char * bytesize).from_buffer(mapping)
    alloc = HostAllocation(ctypes.addressof(view), bytesize, mapping, view)
    sys_ = system()
    sys_.space.map(alloc.address, np.frombuffer(memoryview(view).cast("B"), dtype=np.uint8), current_ctx().device.ordinal)
    sys_.add_host_allocation(alloc)
    return alloc.address


def free_host_allocation(sys_: Any, address: int) -> None:
    """Unmap and release a :func:`new_host_allocation` (its pending work must have run)."""
    alloc = sys_.pop_host_allocation(address)
    sys_.space.unmap(address)
    del alloc.view
    try:
        alloc.mapping.close()
    except BufferError:  # a numpy view of it is still alive somewhere; the mapping goes with it
        pass


@api(1)
def cuMemHostAlloc(bytesize: int, Flags: int) -> tuple:  # noqa: N803
    """cuMemHostAlloc(bytesize, Flags) -> (CUresult, int): page-aligned, page-locked host memory; its host address.

    Copies read and write it when they run, not when they are enqueued. As with unified addressing, kernels reach
    it at its host address (cuMemHostGetDevicePointer returns that address), with every access checked.
    """
    return (_host_alloc(bytesize, Flags),)


@api(1)
def cuMemAllocHost(bytesize: int) -> tuple:
    """cuMemAllocHost(bytesize) -> (CUresult, int): cuMemHostAlloc with Flags 0."""
    return (_host_alloc(bytesize, 0),)


@api(0)
def cuMemFreeHost(p: Any) -> tuple:
    """cuMemFreeHost(p): free memory from cuMemHostAlloc/cuMemAllocHost (after pending work ran, as the driver
    synchronizes); CUDA_ERROR_INVALID_VALUE for other pointers."""
    ctx = current_ctx()
    address, _ = host_address(p, "p")
    sys_ = system()
    if address not in sys_.host_allocations:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemFreeHost({address:#x}): not a pointer from cuMemHostAlloc")
    synchronize_system(sys_, ctx)
    free_host_allocation(sys_, address)
    return ()


def _host_side(obj: Any, what: str, nbytes: int, *, writable: bool) -> tuple[int, bool]:
    """(address, page-locked?) of a host pointer argument that must hold ``nbytes``."""
    address = host_range(obj, what, nbytes, writable=writable)
    if nbytes and address == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what} is NULL")
    return address, system().is_pinned(address, nbytes)


def copy_op(dst: Any, dst_device: bool, src: Any, src_device: bool, ByteCount: Any, *,  # noqa: N803
            stage_pageable: bool) -> tuple[Copy, bool]:
    """A validated copy, and whether its destination is pageable host memory. ``stage_pageable``: read a pageable
    host source now (as the driver does for cuMemcpy*), else when the copy runs (graph memcpy nodes)."""
    nbytes = byte_count(ByteCount, "ByteCount")
    staged, to_pageable = None, False
    if src_device:
        s = handle_value(src)
        _check_device(s, nbytes, f"copy of {nbytes} bytes from device {s:#x}")
    else:
        s, pinned = _host_side(src, "srcHost" if dst_device else "src", nbytes, writable=False)
        staged = read_host(s, nbytes, "srcHost") if stage_pageable and not pinned else None
    if dst_device:
        d = handle_value(dst)
        _check_device(d, nbytes, f"copy of {nbytes} bytes to device {d:#x}")
    else:
        d, pinned = _host_side(dst, "dstHost" if src_device else "dst", nbytes, writable=True)
        to_pageable = not pinned
    return Copy(d, dst_device, s, src_device, nbytes, staged), to_pageable


def _copy(stream: Stream, dst: Any, dst_device: bool, src: Any, src_device: bool, ByteCount: Any, *,  # noqa: N803
          wait: bool) -> None:
    """Enqueue a copy on ``stream``; ``wait``: return only when it ran. A copy to pageable host memory always
    completes before returning (the driver makes such copies synchronous)."""
    op, to_pageable = copy_op(dst, dst_device, src, src_device, ByteCount, stage_pageable=True)
    work = enqueue(stream, op)
    if wait or to_pageable:
        complete(work)


def _device(ptr: Any) -> bool:
    """Unified addressing: whether ``ptr`` (an int or CUdeviceptr; a buffer is host memory) points into a live
    device allocation."""
    if isinstance(ptr, int) or callable(getattr(ptr, "getPtr", None)):
        return system().space.allocation(handle_value(ptr)) is not None
    return False


def _device_memory(ptr: Any, in_space: bool) -> bool:
    """Whether ``ptr`` (in the address space when ``in_space``) is device memory rather than host memory the
    device maps (page-locked, registered, managed)."""
    return in_space and not system().space.is_host(handle_value(ptr))


@api(0)
def cuMemcpyHtoD(dstDevice: Any, srcHost: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyHtoD(dstDevice, srcHost, ByteCount): host -> device on the legacy stream, done on return (srcHost: an
    int address or a buffer)."""
    _copy(resolve_stream(None), dstDevice, True, srcHost, False, ByteCount, wait=True)
    return ()


@api(0)
def cuMemcpyHtoDAsync(dstDevice: Any, srcHost: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyHtoDAsync(dstDevice, srcHost, ByteCount, hStream): enqueue host -> device on ``hStream``. Page-locked
    ``srcHost`` is read when the copy runs: it must not be reused before then (event or stream sync)."""
    _copy(resolve_stream(hStream), dstDevice, True, srcHost, False, ByteCount, wait=False)
    return ()


@api(0)
def cuMemcpyDtoH(dstHost: Any, srcDevice: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyDtoH(dstHost, srcDevice, ByteCount): device -> host on the legacy stream, done on return (dstHost: an
    int address or a writable buffer)."""
    _copy(resolve_stream(None), dstHost, False, srcDevice, True, ByteCount, wait=True)
    return ()


@api(0)
def cuMemcpyDtoHAsync(dstHost: Any, srcDevice: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyDtoHAsync(dstHost, srcDevice, ByteCount, hStream): enqueue device -> host on ``hStream``; page-locked
    ``dstHost`` is written when the copy runs (read it after an event or stream sync), pageable memory before
    returning."""
    _copy(resolve_stream(hStream), dstHost, False, srcDevice, True, ByteCount, wait=False)
    return ()


@api(0)
def cuMemcpyDtoD(dstDevice: Any, srcDevice: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyDtoD(dstDevice, srcDevice, ByteCount): device -> device (any emulated devices) on the legacy stream;
    it may still be pending on return (no host synchronization, as the driver documents)."""
    _copy(resolve_stream(None), dstDevice, True, srcDevice, True, ByteCount, wait=False)
    return ()


@api(0)
def cuMemcpyDtoDAsync(dstDevice: Any, srcDevice: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyDtoDAsync(dstDevice, srcDevice, ByteCount, hStream): enqueue device -> device on ``hStream``."""
    _copy(resolve_stream(hStream), dstDevice, True, srcDevice, True, ByteCount, wait=False)
    return ()


@api(0)
def cuMemcpy(dst: Any, src: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpy(dst, src, ByteCount): copy between any host/device pointers, the kind inferred (unified addressing);
    synchronous as the copy of that kind ("API synchronization behavior": only device-to-device copies may be
    pending on return; one from or to page-locked host memory is done)."""
    dst_device, src_device = _device(dst), _device(src)
    device_to_device = _device_memory(dst, dst_device) and _device_memory(src, src_device)
    _copy(resolve_stream(None), dst, dst_device, src, src_device, ByteCount, wait=not device_to_device)
    return ()


@api(0)
def cuMemcpyAsync(dst: Any, src: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyAsync(dst, src, ByteCount, hStream): cuMemcpy enqueued on ``hStream``."""
    _copy(resolve_stream(hStream), dst, _device(dst), src, _device(src), ByteCount, wait=False)
    return ()


def _peer_contexts(dst_ctx: Any, src_ctx: Any) -> None:
    sys_ = system()
    for handle, name in ((dst_ctx, "dstContext"), (src_ctx, "srcContext")):
        ctx = sys_.lookup(handle, Context, name)
        if ctx.sticky is not None:
            raise error(ctx.sticky.result.name, f"{name} is unusable after an earlier error: {ctx.sticky.report}")


@api(0)
def cuMemcpyPeer(dstDevice: Any, dstContext: Any, srcDevice: Any, srcContext: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount): copy between two contexts' memory on
    the current context's legacy stream, done on return."""
    _peer_contexts(dstContext, srcContext)
    _copy(resolve_stream(None), dstDevice, True, srcDevice, True, ByteCount, wait=True)
    return ()


@api(0)
def cuMemcpyPeerAsync(dstDevice: Any, dstContext: Any, srcDevice: Any, srcContext: Any, ByteCount: int,  # noqa: N803
                      hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyPeerAsync(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream): enqueue a peer copy."""
    _peer_contexts(dstContext, srcContext)
    _copy(resolve_stream(hStream), dstDevice, True, srcDevice, True, ByteCount, wait=False)
    return ()


def fill_op(dst: Any, value: Any, count: Any, width: int, *, rows: int = 1, pitch: int = 0) -> Fill:
    """A validated memset of ``rows`` x ``count`` elements of ``width`` bytes (1, 2, 4) to ``value``."""
    count = byte_count(count, "N")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << (8 * width):
        raise OverflowError(f"cuMemsetD{8 * width} value {value!r} is not an unsigned {8 * width}-bit integer")
    ptr = handle_value(dst)
    if ptr % width:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemsetD{8 * width} needs a {width}-byte aligned pointer, got {ptr:#x}")
    for row in range(rows):
        _check_device(ptr + row * pitch, count * width, f"memset of {count} x {width} bytes at {ptr + row * pitch:#x}")
    return Fill(ptr, struct.pack({1: "<B", 2: "<H", 4: "<I"}[width], value), count, rows, pitch)


def _memset(hStream: Any, dst: Any, value: Any, count: Any, width: int) -> tuple:  # noqa: N803
    stream = resolve_stream(hStream)
    enqueue(stream, fill_op(dst, value, count, width))
    return ()


@api(0)
def cuMemsetD8(dstDevice: Any, uc: int, N: int) -> tuple:  # noqa: N803
    """cuMemsetD8(dstDevice, uc, N): set N bytes to ``uc`` (on the legacy stream; may be pending on return)."""
    return _memset(None, dstDevice, uc, N, 1)


@api(0)
def cuMemsetD16(dstDevice: Any, us: int, N: int) -> tuple:  # noqa: N803
    """cuMemsetD16(dstDevice, us, N): set N 16-bit values to ``us`` (pointer 2-byte aligned)."""
    return _memset(None, dstDevice, us, N, 2)


@api(0)
def cuMemsetD32(dstDevice: Any, ui: int, N: int) -> tuple:  # noqa: N803
    """cuMemsetD32(dstDevice, ui, N): set N 32-bit values to ``ui`` (pointer 4-byte aligned)."""
    return _memset(None, dstDevice, ui, N, 4)


@api(0)
def cuMemsetD8Async(dstDevice: Any, uc: int, N: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD8Async(dstDevice, uc, N, hStream): cuMemsetD8 enqueued on ``hStream``."""
    return _memset(hStream, dstDevice, uc, N, 1)


@api(0)
def cuMemsetD16Async(dstDevice: Any, us: int, N: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD16Async(dstDevice, us, N, hStream): cuMemsetD16 enqueued on ``hStream``."""
    return _memset(hStream, dstDevice, us, N, 2)


@api(0)
def cuMemsetD32Async(dstDevice: Any, ui: int, N: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD32Async(dstDevice, ui, N, hStream): cuMemsetD32 enqueued on ``hStream``."""
    return _memset(hStream, dstDevice, ui, N, 4)


# ----- pitched (2-D) memory -----
PITCH_ALIGNMENT = 512  # bytes a cuMemAllocPitch row is padded to (CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT divides it)


@api(2)
def cuMemAllocPitch(WidthInBytes: Any, Height: Any, ElementSizeBytes: Any) -> tuple:  # noqa: N803
    """cuMemAllocPitch(WidthInBytes, Height, ElementSizeBytes) -> (CUresult, CUdeviceptr, pitch): ``Height`` rows
    of ``WidthInBytes`` bytes, each row starting ``pitch`` bytes after the previous one (the width rounded up to
    512 bytes). CUDA_ERROR_INVALID_VALUE for an empty extent or an ElementSizeBytes other than 4, 8 or 16 (CUDA
    driver API, cuMemAllocPitch)."""
    width, height = byte_count(WidthInBytes, "WidthInBytes"), byte_count(Height, "Height")
    element = uint_arg(ElementSizeBytes, "ElementSizeBytes")
    ctx = current_ctx()
    if element not in (4, 8, 16):
        raise error("CUDA_ERROR_INVALID_VALUE", f"ElementSizeBytes must be 4, 8 or 16, got {element}")
    if width == 0 or height == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemAllocPitch of {width} x {height} bytes: nothing to allocate")
    pitch = -(-width // PITCH_ALIGNMENT) * PITCH_ALIGNMENT
    ptr = allocate(pitch * height, ctx.device.ordinal)
    system().allocations[ptr] = ctx
    return (CUdeviceptr(ptr), pitch)


def _memset_2d(hStream: Any, dst: Any, pitch: Any, value: Any, width: Any, height: Any, size: int) -> tuple:  # noqa: N803
    stream = resolve_stream(hStream)
    rows, pitch, count = byte_count(height, "Height"), byte_count(pitch, "dstPitch"), byte_count(width, "Width")
    if rows > 1 and pitch < count * size:
        raise error("CUDA_ERROR_INVALID_VALUE", f"dstPitch {pitch} is smaller than a row of {count} x {size} bytes")
    if rows:
        enqueue(stream, fill_op(dst, value, count, size, rows=rows, pitch=pitch))
    return ()


@api(0)
def cuMemsetD2D8(dstDevice: Any, dstPitch: Any, uc: int, Width: Any, Height: Any) -> tuple:  # noqa: N803
    """cuMemsetD2D8(dstDevice, dstPitch, uc, Width, Height): set ``Width`` bytes of each of ``Height`` rows,
    ``dstPitch`` bytes apart, to ``uc`` (on the legacy stream; may be pending on return)."""
    return _memset_2d(None, dstDevice, dstPitch, uc, Width, Height, 1)


@api(0)
def cuMemsetD2D16(dstDevice: Any, dstPitch: Any, us: int, Width: Any, Height: Any) -> tuple:  # noqa: N803
    """cuMemsetD2D16(dstDevice, dstPitch, us, Width, Height): as cuMemsetD2D8 with 16-bit values."""
    return _memset_2d(None, dstDevice, dstPitch, us, Width, Height, 2)


@api(0)
def cuMemsetD2D32(dstDevice: Any, dstPitch: Any, ui: int, Width: Any, Height: Any) -> tuple:  # noqa: N803
    """cuMemsetD2D32(dstDevice, dstPitch, ui, Width, Height): as cuMemsetD2D8 with 32-bit values."""
    return _memset_2d(None, dstDevice, dstPitch, ui, Width, Height, 4)


@api(0)
def cuMemsetD2D8Async(dstDevice: Any, dstPitch: Any, uc: int, Width: Any, Height: Any,  # noqa: N803
                      hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD2D8Async(dstDevice, dstPitch, uc, Width, Height, hStream): cuMemsetD2D8 enqueued on ``hStream``."""
    return _memset_2d(hStream, dstDevice, dstPitch, uc, Width, Height, 1)


@api(0)
def cuMemsetD2D16Async(dstDevice: Any, dstPitch: Any, us: int, Width: Any, Height: Any,  # noqa: N803
                       hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD2D16Async(dstDevice, dstPitch, us, Width, Height, hStream): cuMemsetD2D16 enqueued on ``hStream``."""
    return _memset_2d(hStream, dstDevice, dstPitch, us, Width, Height, 2)


@api(0)
def cuMemsetD2D32Async(dstDevice: Any, dstPitch: Any, ui: int, Width: Any, Height: Any,  # noqa: N803
                       hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD2D32Async(dstDevice, dstPitch, ui, Width, Height, hStream): cuMemsetD2D32 enqueued on ``hStream``."""
    return _memset_2d(hStream, dstDevice, dstPitch, ui, Width, Height, 4)
