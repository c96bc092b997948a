"""Pinned host staging memory for host<->device copies, recycled by events.

A copy from pageable host memory first lands in a pinned *chunk*; the asynchronous copy to the device then reads the
chunk when it executes, so the caller may overwrite its own memory as soon as the copy is enqueued. A chunk stays busy
until the event recorded right after its copy has completed; only then is it handed out again. Memory stays bounded:
at most ``max_chunks`` chunks of ``chunk_bytes`` each exist, and when all are busy :meth:`StagingPool.acquire` waits
for the oldest one's event (``cuEventSynchronize``: that copy only, not the device).
"""

from __future__ import annotations

import ctypes
from collections import deque
from dataclasses import dataclass
from typing import Any

from runtime_backends.cuda.driver import check, is_not_ready, is_success, make_error

__all__ = ["Chunk", "StagingPool", "CHUNK_BYTES", "MAX_CHUNKS"]

CHUNK_BYTES = 8 << 20
"""Bytes of one staging chunk: large enough that a chunk's copy runs near full bus bandwidth."""
MAX_CHUNKS = 4
"""Chunks per device: 32 MiB of pinned memory at most, enough to keep copies of several chunks in flight."""
_PORTABLE = 0x1  # CU_MEMHOSTALLOC_PORTABLE: the pinned memory is usable from every context (peer transfers)
_DISABLE_TIMING = 0x2  # CU_EVENT_DISABLE_TIMING: a pure completion event is cheaper to record


@dataclass(eq=False)
class Chunk:
    """``size`` bytes of pinned host memory at ``ptr``, and the event that marks its last copy finished."""

    ptr: int
    size: int
    event: Any

    def view(self, nbytes: int) -> memoryview:
        """The first ``nbytes`` bytes of the chunk as a writable byte view."""
        return memoryview((ctypes.c_uint8 * nbytes).from_address(self.ptr)).cast("B")


class StagingPool:
    """Pinned chunks of one device (see the module docstring).

    Args:
        dev: the ``CUDADevice`` (its context owns the chunks' memory and events).
        chunk_bytes: bytes per chunk (> 0).
        max_chunks: most chunks that exist at once (>= 1).

    Raises ``ValueError`` for a non-positive size or count.
    """

    def __init__(self, dev: Any, chunk_bytes: int = CHUNK_BYTES, max_chunks: int = MAX_CHUNKS) -> None:
        for name, value in (("chunk_bytes", chunk_bytes), ("max_chunks", max_chunks)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"staging {name} must be a positive int, got {value!r}")
        self.dev, self.chunk_bytes, self.max_chunks = dev, chunk_bytes, max_chunks
        self.idle: list[Chunk] = []
        self.busy: deque[Chunk] = deque()  # in the order their events were recorded
        self.out = 0  # acquired and not yet released

    @property
    def count(self) -> int:
        """Chunks allocated so far: idle, busy, and handed out (acquired, not yet released)."""
        return len(self.idle) + len(self.busy) + self.out

    def acquire(self) -> Chunk:
        """An idle chunk: a recycled one whose copy finished, a new one while under ``max_chunks``, else the oldest
        busy one after waiting for its event. Raises ``CUDAError`` when the driver fails."""
        while self.busy and self._finished(self.busy[0]):
            self.idle.append(self.busy.popleft())
        if self.idle:
            chunk = self.idle.pop()
        elif self.count < self.max_chunks:
            chunk = self._new_chunk()
        elif self.busy:
            chunk = self.busy.popleft()
            self._wait(chunk)
        else:
            raise RuntimeError(f"all {self.max_chunks} staging chunks of {self.dev.device} are held by streamed copies "
                               f"that have not finished (CopySink.finish)")
        self.out += 1
        return chunk

    def release_after(self, chunk: Chunk, stream: Any) -> None:
        """Mark ``chunk`` busy until the work enqueued on ``stream`` so far (its copy) has run."""
        cu = self.dev.cu
        self.out -= 1
        self.busy.append(chunk)
        check(cu, cu.cuEventRecord(chunk.event, stream), "cuEventRecord", what="staging chunk")

    def close(self) -> None:
        """Wait for every busy chunk, then free all chunks and their events (the pool is empty afterwards; chunks
        still handed out go with the device's context)."""
        cu = self.dev.cu
        chunks, self.idle, self.busy, self.out = [*self.busy, *self.idle], [], deque(), 0
        for chunk in chunks:
            check(cu, cu.cuEventSynchronize(chunk.event), "cuEventSynchronize", what="staging chunk")
            check(cu, cu.cuEventDestroy(chunk.event), "cuEventDestroy")
            check(cu, cu.cuMemFreeHost(chunk.ptr), "cuMemFreeHost", ptr=chunk.ptr)

    def _new_chunk(self) -> Chunk:
        cu = self.dev.activate()  # the chunk's memory and event belong to the pool's device
        ptr = check(cu, cu.cuMemHostAlloc(self.chunk_bytes, _PORTABLE), "cuMemHostAlloc", bytesize=self.chunk_bytes,
                    hint="pinned host memory is exhausted; lower the staging size or free pinned buffers")
        try:
            event = check(cu, cu.cuEventCreate(_DISABLE_TIMING), "cuEventCreate")
        except BaseException:
            cu.cuMemFreeHost(ptr)
            raise
        return Chunk(int(ptr), self.chunk_bytes, event)

    def _finished(self, chunk: Chunk) -> bool:
        """Whether the copy that last used ``chunk`` has completed (``cuEventQuery``, no waiting)."""
        cu = self.dev.cu
        (err,) = cu.cuEventQuery(chunk.event)
        if is_success(err):
            return True
        if is_not_ready(err):
            return False
        raise make_error(cu, err, "cuEventQuery", what="staging chunk")

    def _wait(self, chunk: Chunk) -> None:
        """Block until the copy that last used ``chunk`` has completed."""
        cu = self.dev.cu
        check(cu, cu.cuEventSynchronize(chunk.event), "cuEventSynchronize", what="staging chunk")
