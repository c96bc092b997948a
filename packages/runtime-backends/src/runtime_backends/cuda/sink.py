"""StagingSink: the CUDA side of a streamed copy into device memory (``runtime_core.sink``; DISK -> CUDA).

The source reads straight into pinned chunks of the device's staging pool (:meth:`StagingSink.staging`), and each
delivered piece is an asynchronous host-to-device copy out of its chunk on the device's stream, with the chunk's event
recorded after it: the source waits for that event before it reads into the chunk again (``wait_slot``), so reading
the next piece overlaps the DMA of the last. A piece from anywhere else goes through the allocator's ``copyin``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime_backends.cuda.driver import check
from runtime_backends.cuda.staging import Chunk
from runtime_core.sink import CopySink

__all__ = ["StagingSink"]


class StagingSink(CopySink):
    """``size`` bytes of device memory at ``dest`` of ``allocator``'s device, fed by a streaming source.

    From :meth:`staging` to :meth:`finish` it holds up to ``max_chunks - 1`` chunks of the staging pool (one stays for
    the ``copyin`` of pieces that are not in them); with a one-chunk pool it offers no staging and every piece is a
    ``copyin``.
    """

    def __init__(self, allocator: Any, dest: int, size: int) -> None:
        self.allocator, self.dest, self.size = allocator, dest, size
        self.chunks: list[Chunk] = []

    def staging(self) -> Sequence[memoryview] | None:
        pool = self.allocator.staging
        if not self.chunks:
            self.chunks = [pool.acquire() for _ in range(min(pool.max_chunks - 1, -(-self.size // pool.chunk_bytes)))]
        return [c.view(c.size) for c in self.chunks] or None

    def deliver(self, data: memoryview, offset: int, slot: int | None) -> None:
        if offset < 0 or offset + data.nbytes > self.size:
            raise ValueError(f"a piece of {data.nbytes} bytes at offset {offset} does not fit a destination of "
                             f"{self.size} bytes")
        if not data.nbytes:
            return
        chunk = self.chunks[slot] if slot is not None and 0 <= slot < len(self.chunks) else None
        address = int(np.frombuffer(data, np.uint8).ctypes.data)
        if chunk is None or not chunk.ptr <= address <= chunk.ptr + chunk.size - data.nbytes:
            self.allocator.copyin(self.dest + offset, data)
            return
        dev = self.allocator.dev
        cu = dev.activate()
        check(cu, cu.cuMemcpyHtoDAsync(self.dest + offset, address, data.nbytes, dev.stream), "cuMemcpyHtoDAsync",
              dst=self.dest + offset, bytes=data.nbytes, device=dev.device)
        check(cu, cu.cuEventRecord(chunk.event, dev.stream), "cuEventRecord", what="staging chunk")

    def wait_slot(self, slot: int) -> None:
        if 0 <= slot < len(self.chunks):
            cu = self.allocator.dev.cu
            check(cu, cu.cuEventSynchronize(self.chunks[slot].event), "cuEventSynchronize", what="staging chunk")

    def finish(self) -> None:
        """Wait for the device's stream (raising a failed copy's error) and give the chunks back to the pool."""
        dev, chunks, self.chunks = self.allocator.dev, self.chunks, []
        try:
            dev.synchronize()
        finally:
            for chunk in chunks:
                self.allocator.staging.release_after(chunk, dev.stream)
