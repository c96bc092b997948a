"""DiskAllocator: buffers are byte ranges of the device's file, copied with reads and writes of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime_core.allocator import Allocator
from runtime_core.buffer_spec import BufferSpec
from runtime_core.sink import CopySink, HostSink

__all__ = ["DiskAllocator", "DiskBuffer", "FileDevice"]


@dataclass(frozen=True, eq=False)
class DiskBuffer:
    """The handle of a DISK buffer: ``size`` bytes at byte ``offset`` of the file; ``extent`` is where the allocation it
    belongs to ends (a write past the end of the file grows it that far). Compared by identity."""

    offset: int
    size: int
    extent: int

    def __repr__(self) -> str:
        return f"<DiskBuffer {self.size} bytes at {self.offset}>"


class FileDevice(Protocol):
    """What the allocator needs of its device (:class:`~runtime_backends.disk.device.DiskDevice`)."""

    device: str

    def acquire(self, size: int) -> None: ...

    def release(self) -> None: ...

    def host_view(self, buf: DiskBuffer, size: int) -> memoryview: ...

    def write(self, buf: DiskBuffer, data: memoryview) -> None: ...

    def transfer_from(self, buf: DiskBuffer, src_dev: Any, src: DiskBuffer, size: int) -> None: ...

    def read_into(self, sink: CopySink, buf: DiskBuffer, size: int) -> None: ...


class DiskAllocator(Allocator):
    """Allocations on one DISK device (``self.dev``): each starts at byte 0 of the file; views (``_offset``) are byte
    ranges at any offset, a view of a view adds the offsets (``Buffer.view`` passes the sum). Copies in are written
    with ``pwrite`` after reserving the space, copies out and copies to other devices (``_copyout_sink``) read through
    the device's reader, and ``_as_buffer`` is the mapping itself (read-only for a read-only file; ``SIGBUS`` when
    touched after another process truncated the file: use copies where the file can change).

    Raises ``ValueError`` for ``BufferSpec.external_ptr`` (a file cannot wrap caller memory) and for a double free.
    """

    dev: FileDevice

    def __init__(self, dev: FileDevice) -> None:
        super().__init__(dev)
        self._live: set[DiskBuffer] = set()

    def _alloc(self, size: int, spec: BufferSpec) -> DiskBuffer:
        if spec.external_ptr is not None:
            raise ValueError("DISK buffers live in their file: BufferSpec.external_ptr cannot be used")
        self.dev.acquire(size)
        handle = DiskBuffer(0, size, size)
        self._live.add(handle)
        return handle

    def _free(self, opaque: DiskBuffer, size: int, spec: BufferSpec) -> None:
        if opaque not in self._live:
            raise ValueError(f"{opaque!r} is not a live allocation of {self.dev.device} (double free?)")
        self._live.discard(opaque)
        self.dev.release()

    def _offset(self, opaque: DiskBuffer, size: int, offset: int) -> DiskBuffer:
        return DiskBuffer(opaque.offset + offset, size, opaque.extent)

    def _as_buffer(self, src: DiskBuffer, size: int) -> memoryview:
        return self.dev.host_view(src, size)

    def _copyin(self, dest: DiskBuffer, src: memoryview) -> None:
        self.dev.write(dest, src)

    def _copyout(self, dest: memoryview, src: DiskBuffer) -> None:
        self.dev.read_into(HostSink(dest), src, dest.nbytes)

    def _copyout_sink(self, sink: CopySink, src: DiskBuffer, size: int) -> None:
        self.dev.read_into(sink, src, size)

    def _transfer(self, dest: DiskBuffer, src: DiskBuffer, size: int, src_dev: Any, dest_dev: Any) -> None:
        self.dev.transfer_from(dest, src_dev, src, size)
