"""Memory management: device and pinned host allocations, copies and memsets (CUDA driver API 6.13 "Memory Management").

Device memory lives in the emulator's own address space (:class:`mock_gpu.memory.AddressSpace`): device pointers are
not host addresses, and every byte a copy touches must lie in a live allocation, otherwise the call fails with
CUDA_ERROR_INVALID_VALUE and a report naming the address and the nearest allocation. Copies run when they are
enqueued, so the ``*Async`` variants complete before they return (stream order is trivially kept).
"""

from __future__ import annotations

import ctypes
import mmap
import struct
from collections.abc import Callable
from typing import Any

from cuda.bindings.driver import (
    CU_MEMHOSTALLOC_DEVICEMAP,
    CU_MEMHOSTALLOC_PORTABLE,
    CU_MEMHOSTALLOC_WRITECOMBINED,
    CUdeviceptr,
)

from ..errors import error
from ..memory import MemoryFault, OutOfMemory
from .handles import Context, HostAllocation, handle_value
from .marshal import byte_count, host_address, host_range, read_host, write_host
from .system import api, current_ctx, resolve_stream, system


def _device_op(what: str, op: Callable[[], Any]) -> Any:
    """Run an AddressSpace operation, turning an access outside live allocations into CUDA_ERROR_INVALID_VALUE."""
    try:
        return op()
    except MemoryFault as fault:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what}: {fault}") from fault


@api(1)
def cuMemAlloc(bytesize: int) -> tuple:
    """cuMemAlloc(bytesize) -> (CUresult, CUdeviceptr): ``bytesize`` bytes of device memory, 256-byte aligned.

    CUDA_ERROR_INVALID_VALUE for 0 bytes, CUDA_ERROR_OUT_OF_MEMORY beyond MOCKGPU_MEMORY (CUDA driver API, cuMemAlloc).
    """
    ctx = current_ctx()
    if byte_count(bytesize, "bytesize") == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "cuMemAlloc bytesize must be positive, got 0")
    sys_ = system()
    try:
        ptr = sys_.space.alloc(bytesize, ctx.device.ordinal)
    except OutOfMemory as exc:
        raise error("CUDA_ERROR_OUT_OF_MEMORY", f"cannot allocate {bytesize} bytes on device {ctx.device.ordinal}: "
                    f"{sys_.space.used(ctx.device.ordinal)} of {sys_.space.capacity(ctx.device.ordinal)} bytes in use "
                    f"(MOCKGPU_MEMORY): {exc}") from exc
    sys_.allocations[ptr] = ctx
    return (CUdeviceptr(ptr),)


@api(0)
def cuMemFree(dptr: Any) -> tuple:
    """cuMemFree(dptr): free a cuMemAlloc allocation; CUDA_ERROR_INVALID_VALUE for anything but a live base pointer."""
    current_ctx()
    sys_ = system()
    ptr = handle_value(dptr)
    if ptr not in sys_.allocations:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemFree({ptr:#x}): not the base of a live device allocation "
                    "(already freed, offset into an allocation, or never allocated)")
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
    mapping = mmap.mmap(-1, bytesize)
    view = (ctypes.c_char * bytesize).from_buffer(mapping)
    alloc = HostAllocation(ctypes.addressof(view), bytesize, mapping, view)
    system().host_allocations[alloc.address] = alloc
    return alloc.address


@api(1)
def cuMemHostAlloc(bytesize: int, Flags: int) -> tuple:  # noqa: N803
    """cuMemHostAlloc(bytesize, Flags) -> (CUresult, int): page-aligned host memory; returns its host address.

    The memory is ordinary process memory (an anonymous mapping). CU_MEMHOSTALLOC_DEVICEMAP is accepted but kernels
    cannot dereference host addresses (the device address space is separate).
    """
    return (_host_alloc(bytesize, Flags),)


@api(1)
def cuMemAllocHost(bytesize: int) -> tuple:
    """cuMemAllocHost(bytesize) -> (CUresult, int): cuMemHostAlloc with Flags 0."""
    return (_host_alloc(bytesize, 0),)


@api(0)
def cuMemFreeHost(p: Any) -> tuple:
    """cuMemFreeHost(p): free memory from cuMemHostAlloc/cuMemAllocHost; CUDA_ERROR_INVALID_VALUE for other pointers."""
    current_ctx()
    address, _ = host_address(p, "p")
    alloc = system().host_allocations.pop(address, None)
    if alloc is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemFreeHost({address:#x}): not a pointer from cuMemHostAlloc")
    del alloc.view  # the exported buffer must go before the mapping can close
    alloc.mapping.close()
    return ()


def _htod(dst: Any, src_host: Any, nbytes: int) -> None:
    current_ctx()
    nbytes = byte_count(nbytes, "ByteCount")
    address = host_range(src_host, "srcHost", nbytes, writable=False)
    data = read_host(address, nbytes, "srcHost")
    ptr = handle_value(dst)
    _device_op(f"copy of {nbytes} bytes to device {ptr:#x}", lambda: system().space.write(ptr, data))


def _dtoh(dst_host: Any, src: Any, nbytes: int) -> None:
    current_ctx()
    nbytes = byte_count(nbytes, "ByteCount")
    address = host_range(dst_host, "dstHost", nbytes, writable=True)
    ptr = handle_value(src)
    data = _device_op(f"copy of {nbytes} bytes from device {ptr:#x}", lambda: system().space.read(ptr, nbytes))
    write_host(address, data, "dstHost")


def _dtod(dst: Any, src: Any, nbytes: int) -> None:
    current_ctx()
    nbytes = byte_count(nbytes, "ByteCount")
    d, s = handle_value(dst), handle_value(src)
    _device_op(f"device copy of {nbytes} bytes {s:#x} -> {d:#x}", lambda: system().space.copy(d, s, nbytes))


@api(0)
def cuMemcpyHtoD(dstDevice: Any, srcHost: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyHtoD(dstDevice, srcHost, ByteCount): copy host -> device (srcHost: int address or buffer)."""
    _htod(dstDevice, srcHost, ByteCount)
    return ()


@api(0)
def cuMemcpyHtoDAsync(dstDevice: Any, srcHost: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyHtoDAsync(dstDevice, srcHost, ByteCount, hStream): as cuMemcpyHtoD, complete on return."""
    resolve_stream(hStream)
    _htod(dstDevice, srcHost, ByteCount)
    return ()


@api(0)
def cuMemcpyDtoH(dstHost: Any, srcDevice: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyDtoH(dstHost, srcDevice, ByteCount): copy device -> host (dstHost: int address or writable buffer)."""
    _dtoh(dstHost, srcDevice, ByteCount)
    return ()


@api(0)
def cuMemcpyDtoHAsync(dstHost: Any, srcDevice: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyDtoHAsync(dstHost, srcDevice, ByteCount, hStream): as cuMemcpyDtoH, complete on return."""
    resolve_stream(hStream)
    _dtoh(dstHost, srcDevice, ByteCount)
    return ()


@api(0)
def cuMemcpyDtoD(dstDevice: Any, srcDevice: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyDtoD(dstDevice, srcDevice, ByteCount): copy device -> device (any emulated devices)."""
    _dtod(dstDevice, srcDevice, ByteCount)
    return ()


@api(0)
def cuMemcpyDtoDAsync(dstDevice: Any, srcDevice: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyDtoDAsync(dstDevice, srcDevice, ByteCount, hStream): as cuMemcpyDtoD, complete on return."""
    resolve_stream(hStream)
    _dtod(dstDevice, srcDevice, ByteCount)
    return ()


def copy_memory(dst: Any, src: Any, nbytes: int) -> None:
    """cuMemcpy with unified addressing: a pointer inside a live device allocation is device memory, else host."""
    nbytes = byte_count(nbytes, "ByteCount")
    space = system().space
    d, s = handle_value(dst), handle_value(src)
    dst_dev, src_dev = space.allocation(d) is not None, space.allocation(s) is not None
    if dst_dev and src_dev:
        _dtod(d, s, nbytes)
    elif dst_dev:
        _htod(d, s, nbytes)
    elif src_dev:
        _dtoh(d, s, nbytes)
    else:
        current_ctx()
        write_host(d, read_host(s, nbytes, "src"), "dst")


@api(0)
def cuMemcpy(dst: Any, src: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpy(dst, src, ByteCount): copy between any host/device pointers, the kind inferred (unified addressing)."""
    copy_memory(dst, src, ByteCount)
    return ()


@api(0)
def cuMemcpyAsync(dst: Any, src: Any, ByteCount: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyAsync(dst, src, ByteCount, hStream): as cuMemcpy, complete on return."""
    resolve_stream(hStream)
    copy_memory(dst, src, ByteCount)
    return ()


def _peer_copy(dst: Any, dst_ctx: Any, src: Any, src_ctx: Any, nbytes: int) -> None:
    sys_ = system()
    for handle, name in ((dst_ctx, "dstContext"), (src_ctx, "srcContext")):
        ctx = sys_.lookup(handle, Context, name)
        if ctx.sticky is not None:
            raise error(ctx.sticky.result.name, f"{name} is unusable after an earlier error: {ctx.sticky.report}")
    _dtod(dst, src, nbytes)


@api(0)
def cuMemcpyPeer(dstDevice: Any, dstContext: Any, srcDevice: Any, srcContext: Any, ByteCount: int) -> tuple:  # noqa: N803
    """cuMemcpyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount): copy between two contexts' memory."""
    _peer_copy(dstDevice, dstContext, srcDevice, srcContext, ByteCount)
    return ()


@api(0)
def cuMemcpyPeerAsync(dstDevice: Any, dstContext: Any, srcDevice: Any, srcContext: Any, ByteCount: int,  # noqa: N803
                      hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpyPeerAsync(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream): complete on return."""
    resolve_stream(hStream)
    _peer_copy(dstDevice, dstContext, srcDevice, srcContext, ByteCount)
    return ()


def _memset(dst: Any, value: int, count: int, width: int) -> None:
    current_ctx()
    count = byte_count(count, "N")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << (8 * width):
        raise OverflowError(f"cuMemsetD{8 * width} value {value!r} is not an unsigned {8 * width}-bit integer")
    ptr = handle_value(dst)
    if ptr % width:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuMemsetD{8 * width} needs a {width}-byte aligned pointer, got {ptr:#x}")
    pattern = struct.pack({1: "<B", 2: "<H", 4: "<I"}[width], value & ((1 << (8 * width)) - 1))
    _device_op(f"memset of {count} x {width} bytes at {ptr:#x}", lambda: system().space.fill(ptr, pattern, count))


@api(0)
def cuMemsetD8(dstDevice: Any, uc: int, N: int) -> tuple:  # noqa: N803
    """cuMemsetD8(dstDevice, uc, N): set N bytes to ``uc``."""
    _memset(dstDevice, uc, N, 1)
    return ()


@api(0)
def cuMemsetD16(dstDevice: Any, us: int, N: int) -> tuple:  # noqa: N803
    """cuMemsetD16(dstDevice, us, N): set N 16-bit values to ``us`` (pointer 2-byte aligned)."""
    _memset(dstDevice, us, N, 2)
    return ()


@api(0)
def cuMemsetD32(dstDevice: Any, ui: int, N: int) -> tuple:  # noqa: N803
    """cuMemsetD32(dstDevice, ui, N): set N 32-bit values to ``ui`` (pointer 4-byte aligned)."""
    _memset(dstDevice, ui, N, 4)
    return ()


@api(0)
def cuMemsetD8Async(dstDevice: Any, uc: int, N: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD8Async(dstDevice, uc, N, hStream): as cuMemsetD8, complete on return."""
    resolve_stream(hStream)
    _memset(dstDevice, uc, N, 1)
    return ()


@api(0)
def cuMemsetD16Async(dstDevice: Any, us: int, N: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD16Async(dstDevice, us, N, hStream): as cuMemsetD16, complete on return."""
    resolve_stream(hStream)
    _memset(dstDevice, us, N, 2)
    return ()


@api(0)
def cuMemsetD32Async(dstDevice: Any, ui: int, N: int, hStream: Any) -> tuple:  # noqa: N803
    """cuMemsetD32Async(dstDevice, ui, N, hStream): as cuMemsetD32, complete on return."""
    resolve_stream(hStream)
    _memset(dstDevice, ui, N, 4)
    return ()
