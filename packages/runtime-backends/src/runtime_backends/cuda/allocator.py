"""CUDAAllocator: device memory, pinned host memory, views, and copies ordered on the device's stream.

Handles are integers: a device pointer (``int``), or a :class:`HostPointer` for ``BufferSpec(host=True)`` pinned host
memory. Every copy runs on the owning device's stream, so it is ordered after the kernels launched before it:

* ``copyin`` from host memory goes through the device's :class:`~runtime_backends.cuda.staging.StagingPool`
  (``cuMemcpyHtoDAsync`` from pinned chunks): it returns once the data is staged, not copied;
* ``copyout`` (``cuMemcpyDtoHAsync`` then ``cuStreamSynchronize``) waits for this device's stream only;
* ``transfer`` on one device is ``cuMemcpyAsync``; between devices it is ``cuMemcpyPeerAsync`` where peer access is
  possible, else staged through pinned host memory, with events ordering the two streams (CUDA driver API, "Memory
  Management" and "Peer Context Memory Access");
* a streamed copy into the device (``runtime_core.sink``: DISK -> CUDA) reads into the staging pool's pinned chunks
  and copies out of them asynchronously (:mod:`runtime_backends.cuda.sink`).
"""

from __future__ import annotations

import ctypes
from typing import Any

from runtime_backends.cuda.driver import check
from runtime_backends.cuda.sink import StagingSink
from runtime_backends.cuda.staging import CHUNK_BYTES, MAX_CHUNKS, StagingPool
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer_spec import BufferSpec
from runtime_core.sink import CopySink, HostSink

__all__ = ["CUDAAllocator", "HostPointer"]

_PORTABLE = 0x1  # CU_MEMHOSTALLOC_PORTABLE: pinned memory usable from every context


class HostPointer(int):
    """The address of pinned host memory (``BufferSpec(host=True)``); kernels cannot take it as a buffer."""

    def __repr__(self) -> str:
        return f"HostPointer({int(self):#x})"


class CUDAAllocator(LRUAllocator):
    """LRU-cached device memory (``cuMemAlloc``) and pinned host memory (``cuMemHostAlloc``) of one ``CUDADevice``.

    Args:
        dev: the device; its context, stream and driver module are used in every hook.
        max_cached_bytes: LRU bound (default ``$RUNTIME_LRU_MAX_BYTES``, else 1 GiB).
        staging_chunk_bytes, staging_chunks: the pinned staging pool of copies (defaults 8 MiB x 4).

    ``BufferSpec.external_ptr`` wraps a device pointer the caller owns (never freed here). Out of memory raises
    ``CUDAOutOfMemoryError`` (a ``MemoryError``), so the LRU cache is emptied and the allocation retried once.
    Every hook raises ``RuntimeError`` once the device was finalized.
    """

    def __init__(self, dev: Any, *, max_cached_bytes: int | None = None, staging_chunk_bytes: int = CHUNK_BYTES,
                 staging_chunks: int = MAX_CHUNKS) -> None:
        super().__init__(dev, max_cached_bytes=max_cached_bytes)
        self.staging = StagingPool(dev, staging_chunk_bytes, staging_chunks)

    def alloc(self, size: int, spec: BufferSpec | None = None) -> int:
        self.dev.check_open()  # a cached handle of a finalized device must not be handed out
        return super().alloc(size, spec)  # type: ignore[no-any-return]

    def free(self, opaque: int, size: int, spec: BufferSpec | None = None) -> None:
        self.dev.check_open()
        super().free(opaque, size, spec)

    def _alloc(self, size: int, spec: BufferSpec) -> int:
        if spec.external_ptr is not None:
            return HostPointer(spec.external_ptr) if spec.host else spec.external_ptr
        dev = self.dev
        cu = dev.activate()
        if spec.host:
            return HostPointer(check(cu, cu.cuMemHostAlloc(size, _PORTABLE), "cuMemHostAlloc", bytesize=size,
                                     device=dev.device))
        return int(check(cu, cu.cuMemAlloc(size), "cuMemAlloc", bytesize=size, device=dev.device))

    def _free(self, opaque: int, size: int, spec: BufferSpec) -> None:
        if spec.external_ptr is not None:
            return
        dev = self.dev
        cu = dev.activate()
        dev.synchronize()  # work still queued may touch the memory
        if isinstance(opaque, HostPointer):
            check(cu, cu.cuMemFreeHost(opaque), "cuMemFreeHost", ptr=int(opaque))
        else:
            check(cu, cu.cuMemFree(opaque), "cuMemFree", dptr=opaque, device=dev.device)

    def _sink(self, dest: int, size: int) -> CopySink:
        """Where a streamed copy (DISK -> CUDA) lands: pinned host memory directly, device memory through this
        device's pinned staging chunks (:class:`~runtime_backends.cuda.sink.StagingSink`)."""
        if isinstance(dest, HostPointer):
            self.dev.synchronize()  # a queued copy may still read this memory
            return HostSink(_host_view(dest, size))
        return StagingSink(self, dest, size)

    def _offset(self, opaque: int, size: int, offset: int) -> int:
        return HostPointer(opaque + offset) if isinstance(opaque, HostPointer) else opaque + offset

    def _copyin(self, dest: int, src: memoryview) -> None:
        dev = self.dev
        cu = dev.activate()
        if isinstance(dest, HostPointer):
            dev.synchronize()  # a queued copy may still read this memory
            _host_view(dest, src.nbytes)[:] = src
            return
        for off in range(0, src.nbytes, self.staging.chunk_bytes):
            n = min(self.staging.chunk_bytes, src.nbytes - off)
            chunk = self.staging.acquire()
            chunk.view(n)[:] = src[off:off + n]
            check(cu, cu.cuMemcpyHtoDAsync(dest + off, chunk.ptr, n, dev.stream), "cuMemcpyHtoDAsync",
                  dst=dest + off, bytes=n, device=dev.device)
            self.staging.release_after(chunk, dev.stream)

    def _copyout(self, dest: memoryview, src: int) -> None:
        dev = self.dev
        cu = dev.activate()
        if isinstance(src, HostPointer):
            dev.synchronize()
            dest[:] = _host_view(src, dest.nbytes)
            return
        check(cu, cu.cuMemcpyDtoHAsync(dest, src, dest.nbytes, dev.stream), "cuMemcpyDtoHAsync", src=src,
              bytes=dest.nbytes, device=dev.device)
        dev.synchronize()

    def _transfer(self, dest: int, src: int, size: int, src_dev: Any, dest_dev: Any) -> None:
        cu = dest_dev.activate()
        src_dev.activate()
        if src_dev is dest_dev:
            check(cu, cu.cuMemcpyAsync(dest, src, size, dest_dev.stream), "cuMemcpyAsync", dst=dest, src=src,
                  bytes=size, device=dest_dev.device)
        elif isinstance(dest, HostPointer) or isinstance(src, HostPointer) or dest_dev.peer_access(src_dev):
            self._peer_copy(dest, src, size, src_dev, dest_dev)
        else:
            self._staged_copy(dest, src, size, src_dev, dest_dev)

    def _peer_copy(self, dest: int, src: int, size: int, src_dev: Any, dest_dev: Any) -> None:
        """One copy on the destination's stream, after the source's pending work; the source's later work waits for
        it (it reads the source)."""
        cu = dest_dev.cu
        dest_dev.wait_for(src_dev)
        dest_dev.activate()
        if isinstance(dest, HostPointer) or isinstance(src, HostPointer):
            check(cu, cu.cuMemcpyAsync(dest, src, size, dest_dev.stream), "cuMemcpyAsync", dst=dest, src=src,
                  bytes=size, src_device=src_dev.device, dst_device=dest_dev.device)
        else:
            check(cu, cu.cuMemcpyPeerAsync(dest, dest_dev.context, src, src_dev.context, size, dest_dev.stream),
                  "cuMemcpyPeerAsync", dst=dest, src=src, bytes=size, src_device=src_dev.device,
                  dst_device=dest_dev.device)
        src_dev.wait_for(dest_dev)

    def _staged_copy(self, dest: int, src: int, size: int, src_dev: Any, dest_dev: Any) -> None:
        """Device -> pinned chunk on the source's stream, chunk -> device on the destination's stream, per chunk."""
        cu, pool = dest_dev.cu, dest_dev.allocator.staging
        for off in range(0, size, pool.chunk_bytes):
            n = min(pool.chunk_bytes, size - off)
            chunk = pool.acquire()
            src_dev.activate()  # the chunk is idle: its previous copy has finished
            check(cu, cu.cuMemcpyDtoHAsync(chunk.ptr, src + off, n, src_dev.stream), "cuMemcpyDtoHAsync",
                  src=src + off, bytes=n, device=src_dev.device)
            dest_dev.wait_for(src_dev)
            dest_dev.activate()
            check(cu, cu.cuMemcpyHtoDAsync(dest + off, chunk.ptr, n, dest_dev.stream), "cuMemcpyHtoDAsync",
                  dst=dest + off, bytes=n, device=dest_dev.device)
            pool.release_after(chunk, dest_dev.stream)


def _host_view(address: int, nbytes: int) -> memoryview:
    return memoryview((ctypes.c_uint8 * nbytes).from_address(address)).cast("B")
