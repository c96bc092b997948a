"""Memory of the emulated runtime (CUDA runtime API 6.9 "Memory Management", 6.10 "Stream Ordered Memory
Allocator") on the driver emulator. Pointers are plain ints, as cuda-python's runtime returns them. Every copy goes
through cuMemcpy/cuMemcpyAsync with unified addressing, as the runtime does for cudaMemcpyDefault: device, managed
and page-locked host memory are found by address, anything else is pageable host memory; the ``kind`` is checked."""

from __future__ import annotations

import ctypes
from typing import Any

from cuda.bindings.runtime import cudaMemcpyKind, cudaMemPool_t

from .. import driver as cu
from .state import check, ensure_context, fail, runtime_api


def _stream(stream: Any) -> Any:
    return cu.CUstream(0 if stream is None else int(stream))


@runtime_api(1)
def cudaMalloc(size: Any) -> tuple:
    """cudaMalloc(size) -> (cudaError_t, int): device memory (a zero size gives 0, as the runtime does)."""
    ensure_context()
    return (int(check(cu.cuMemAlloc(size))) if int(size) else 0,)


@runtime_api(0)
def cudaFree(devPtr: Any) -> tuple:  # noqa: N803
    """cudaFree(devPtr): free device or managed memory; ``cudaFree(0)`` only initializes the runtime."""
    ensure_context()
    if int(devPtr or 0):
        check(cu.cuMemFree(int(devPtr)))
    return ()


@runtime_api(1)
def cudaMallocHost(size: Any) -> tuple:
    """cudaMallocHost(size) -> (cudaError_t, int): page-locked host memory, mapped for the device."""
    ensure_context()
    return (check(cu.cuMemAllocHost(size)),)


@runtime_api(1)
def cudaHostAlloc(size: Any, flags: Any) -> tuple:
    """cudaHostAlloc(size, flags) -> (cudaError_t, int): page-locked host memory (cudaHostAllocMapped etc.)."""
    ensure_context()
    return (check(cu.cuMemHostAlloc(size, int(flags))),)


@runtime_api(0)
def cudaFreeHost(ptr: Any) -> tuple:
    """cudaFreeHost(ptr): free cudaMallocHost/cudaHostAlloc memory (an int or a ctypes object at its address)."""
    ensure_context()
    check(cu.cuMemFreeHost(ptr))
    return ()


@runtime_api(1)
def cudaHostGetDevicePointer(pHost: Any, flags: Any) -> tuple:  # noqa: N803
    """cudaHostGetDevicePointer(pHost, flags) -> (cudaError_t, int): the device address of mapped host memory."""
    ensure_context()
    return (int(check(cu.cuMemHostGetDevicePointer(pHost, int(flags)))),)


@runtime_api(0)
def cudaHostRegister(ptr: Any, size: Any, flags: Any) -> tuple:
    """cudaHostRegister(ptr, size, flags): page-lock and map existing host memory."""
    ensure_context()
    check(cu.cuMemHostRegister(ptr, size, int(flags)))
    return ()


@runtime_api(0)
def cudaHostUnregister(ptr: Any) -> tuple:
    """cudaHostUnregister(ptr)."""
    ensure_context()
    check(cu.cuMemHostUnregister(ptr))
    return ()


@runtime_api(1)
def cudaMallocManaged(size: Any, flags: Any = 1) -> tuple:
    """cudaMallocManaged(size, flags=cudaMemAttachGlobal) -> (cudaError_t, int): memory host and device share."""
    ensure_context()
    return (int(check(cu.cuMemAllocManaged(size, int(flags)))),)


def _copy(dst: Any, src: Any, count: Any, kind: Any, stream: Any | None) -> None:
    cudaMemcpyKind(int(kind))  # ValueError for an unknown kind, as the binding raises
    if int(kind) == int(cudaMemcpyKind.cudaMemcpyHostToHost) and isinstance(dst, int) and isinstance(src, int):
        ctypes.memmove(dst, src, int(count))
        return
    if stream is None:
        check(cu.cuMemcpy(dst, src, count))
    else:
        check(cu.cuMemcpyAsync(dst, src, count, _stream(stream)))


@runtime_api(0)
def cudaMemcpy(dst: Any, src: Any, count: Any, kind: Any) -> tuple:
    """cudaMemcpy(dst, src, count, kind): copy ``count`` bytes, done on return (pointers: ints, or host buffers)."""
    ensure_context()
    _copy(dst, src, count, kind, None)
    return ()


@runtime_api(0)
def cudaMemcpyAsync(dst: Any, src: Any, count: Any, kind: Any, stream: Any) -> tuple:
    """cudaMemcpyAsync(dst, src, count, kind, stream): enqueue the copy on ``stream``."""
    ensure_context()
    _copy(dst, src, count, kind, stream)
    return ()


@runtime_api(0)
def cudaMemcpyPeer(dst: Any, dstDevice: Any, src: Any, srcDevice: Any, count: Any) -> tuple:  # noqa: N803
    """cudaMemcpyPeer(dst, dstDevice, src, srcDevice, count): device-to-device across devices, done on return."""
    ensure_context()
    check(cu.cuMemcpy(dst, src, count))
    return ()


@runtime_api(0)
def cudaMemset(devPtr: Any, value: Any, count: Any) -> tuple:  # noqa: N803
    """cudaMemset(devPtr, value, count): set ``count`` bytes to the low byte of ``value``."""
    ensure_context()
    check(cu.cuMemsetD8(devPtr, int(value) & 0xFF, count))
    return ()


@runtime_api(0)
def cudaMemsetAsync(devPtr: Any, value: Any, count: Any, stream: Any) -> tuple:  # noqa: N803
    """cudaMemsetAsync(devPtr, value, count, stream): cudaMemset enqueued on ``stream``."""
    ensure_context()
    check(cu.cuMemsetD8Async(devPtr, int(value) & 0xFF, count, _stream(stream)))
    return ()


@runtime_api(1)
def cudaMallocAsync(size: Any, hStream: Any) -> tuple:  # noqa: N803
    """cudaMallocAsync(size, hStream) -> (cudaError_t, int): stream-ordered allocation (cuMemAllocAsync)."""
    ensure_context()
    return (int(check(cu.cuMemAllocAsync(size, _stream(hStream)))),)


@runtime_api(0)
def cudaFreeAsync(devPtr: Any, hStream: Any) -> tuple:  # noqa: N803
    """cudaFreeAsync(devPtr, hStream): free when ``hStream`` reaches this point (cuMemFreeAsync)."""
    ensure_context()
    check(cu.cuMemFreeAsync(devPtr, _stream(hStream)))
    return ()


@runtime_api(1)
def cudaDeviceGetDefaultMemPool(device: Any) -> tuple:
    """cudaDeviceGetDefaultMemPool(device) -> (cudaError_t, cudaMemPool_t)."""
    ensure_context()
    if int(device) < 0:
        raise fail("cudaErrorInvalidDevice")
    return (cudaMemPool_t(int(check(cu.cuDeviceGetDefaultMemPool(int(device))))),)


@runtime_api(0)
def cudaMemPoolSetAttribute(memPool: Any, attr: Any, value: Any) -> tuple:  # noqa: N803
    """cudaMemPoolSetAttribute(memPool, attr, value) (cudaMemPoolAttr values equal CUmemPool_attribute values)."""
    check(cu.cuMemPoolSetAttribute(cu.CUmemoryPool(int(memPool)), cu.CUmemPool_attribute(int(attr)), value))
    return ()


@runtime_api(1)
def cudaMemPoolGetAttribute(memPool: Any, attr: Any) -> tuple:  # noqa: N803
    """cudaMemPoolGetAttribute(memPool, attr) -> (cudaError_t, value)."""
    return (check(cu.cuMemPoolGetAttribute(cu.CUmemoryPool(int(memPool)), cu.CUmemPool_attribute(int(attr)))),)


@runtime_api(2)
def cudaMallocPitch(width: Any, height: Any) -> tuple:
    """cudaMallocPitch(width, height) -> (cudaError_t, int, pitch): ``height`` rows of ``width`` bytes, rows
    ``pitch`` bytes apart (cuMemAllocPitch's padding)."""
    ensure_context()
    ptr, pitch = check(cu.cuMemAllocPitch(width, height, 16))
    return (int(ptr), pitch)


def _end(params: Any, side: str, pointer: Any, pitch: Any) -> None:
    """One side of a 2-D copy by unified addressing: an int is an address the driver classifies (device, managed,
    page-locked or pageable host memory), anything else a host buffer."""
    if isinstance(pointer, int) or pointer is None:
        setattr(params, f"{side}MemoryType", cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED)
        setattr(params, f"{side}Device", int(pointer or 0))
    else:
        setattr(params, f"{side}MemoryType", cu.CUmemorytype.CU_MEMORYTYPE_HOST)
        setattr(params, f"{side}Host", pointer)
    setattr(params, f"{side}Pitch", pitch)


def _copy_2d(dst: Any, dpitch: Any, src: Any, spitch: Any, width: Any, height: Any, kind: Any,
             stream: Any | None) -> None:
    cudaMemcpyKind(int(kind))  # ValueError for an unknown kind, as the binding raises
    params = cu.CUDA_MEMCPY2D()
    _end(params, "dst", dst, dpitch)
    _end(params, "src", src, spitch)
    params.WidthInBytes, params.Height = width, height
    check(cu.cuMemcpy2D(params) if stream is None else cu.cuMemcpy2DAsync(params, _stream(stream)))


@runtime_api(0)
def cudaMemcpy2D(dst: Any, dpitch: Any, src: Any, spitch: Any, width: Any, height: Any, kind: Any) -> tuple:
    """cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind): ``height`` rows of ``width`` bytes, rows
    ``spitch``/``dpitch`` bytes apart (cuMemcpy2D), done on return."""
    ensure_context()
    _copy_2d(dst, dpitch, src, spitch, width, height, kind, None)
    return ()


@runtime_api(0)
def cudaMemcpy2DAsync(dst: Any, dpitch: Any, src: Any, spitch: Any, width: Any, height: Any, kind: Any,
                      stream: Any) -> tuple:
    """cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream): cudaMemcpy2D in the order of
    ``stream`` (cuMemcpy2DAsync)."""
    ensure_context()
    _copy_2d(dst, dpitch, src, spitch, width, height, kind, stream)
    return ()


@runtime_api(0)
def cudaMemset2D(devPtr: Any, pitch: Any, value: Any, width: Any, height: Any) -> tuple:  # noqa: N803
    """cudaMemset2D(devPtr, pitch, value, width, height): set ``width`` bytes of ``height`` rows to the low byte of
    ``value``."""
    ensure_context()
    check(cu.cuMemsetD2D8(devPtr, pitch, int(value) & 0xFF, width, height))
    return ()


@runtime_api(0)
def cudaMemset2DAsync(devPtr: Any, pitch: Any, value: Any, width: Any, height: Any,  # noqa: N803
                      stream: Any) -> tuple:
    """cudaMemset2DAsync(devPtr, pitch, value, width, height, stream): cudaMemset2D enqueued on ``stream``."""
    ensure_context()
    check(cu.cuMemsetD2D8Async(devPtr, pitch, int(value) & 0xFF, width, height, _stream(stream)))
    return ()
