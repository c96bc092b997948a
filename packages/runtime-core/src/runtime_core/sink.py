"""Streamed copies: the destination's side of :meth:`Buffer.copy_from` when the source delivers its bytes in pieces.

A source allocator that reads from storage (DISK: a file read through io_uring into page-aligned staging buffers)
has ``capabilities.streams_out`` (hook ``_copyout_sink(sink, src, size)``) and hands each piece to a :class:`CopySink`
of the destination, which the copy router (:func:`runtime_core.transfer.sink_for`) picks: a destination with host
memory takes the pieces straight into it (:class:`HostSink`); a device allocator with ``capabilities.own_sink`` (hook
``_sink(dest, size) -> CopySink``) offers its own staging memory (pinned host buffers) and copies out of it
asynchronously; any other allocator with offset ``views`` gets :class:`CopyinSink`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CopySink", "HostSink", "CopyinSink"]


class CopySink:
    """Where a streaming source puts the bytes of one copy of ``size`` bytes (byte offsets count from the destination's
    start).

    The protocol, in the order a source uses it:

    * :attr:`host`: a writable host view of the whole destination, or ``None``; when set, the source may write pieces
      straight into it (``read(2)`` into it) instead of calling :meth:`deliver`;
    * :meth:`staging`: the destination's own page-aligned staging buffers, or ``None`` for the source to use its own;
    * :meth:`deliver` for each piece, any order, each destination byte once;
    * :meth:`wait_slot` before the source writes again into a staging buffer it delivered from;
    * :meth:`finish` once at the end, also after an error (then the destination's contents are unspecified).
    """

    host: memoryview | None = None

    def staging(self) -> Sequence[memoryview] | None:
        """Page-aligned host buffers of equal size (bytes, a multiple of the page size) that the source should read into
        (e.g. pinned memory, so the copies out of them are DMA), or ``None``: the source uses its own."""
        return None

    def deliver(self, data: memoryview, offset: int, slot: int | None) -> None:
        """Copy ``data`` (C-contiguous bytes) to the destination at byte ``offset``.

        ``slot`` is the index of the staging buffer ``data`` lies in (the sink's or the source's own), or ``None`` for
        memory that stays valid and unchanged until :meth:`finish` (a file mapping). The copy may still be running when
        this returns (an asynchronous DMA). Raises ``ValueError`` for a piece outside the destination.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement deliver")

    def wait_slot(self, slot: int) -> None:
        """Return once every copy delivered from staging buffer ``slot`` has finished reading it."""

    def finish(self) -> None:
        """Return once every delivered copy has finished; raises the error of a failed asynchronous copy."""


def _check_piece(data: memoryview, offset: int, size: int) -> None:
    if offset < 0 or offset + data.nbytes > size:
        raise ValueError(f"a piece of {data.nbytes} bytes at offset {offset} does not fit a destination of {size} bytes")


class HostSink(CopySink):
    """A destination in host memory ``view`` (writable, C-contiguous bytes): pieces are copied at once."""

    def __init__(self, view: memoryview) -> None:
        if view.readonly:
            raise ValueError("a copy destination must be writable host memory")
        self.view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self.host = self.view

    def deliver(self, data: memoryview, offset: int, slot: int | None) -> None:
        _check_piece(data, offset, self.view.nbytes)
        self.view[offset:offset + data.nbytes] = data


class CopyinSink(CopySink):
    """A destination without host memory: each piece goes through the allocator's ``copyin`` into an ``offset`` view
    of ``dest`` (synchronous, so staging buffers are free again at once)."""

    def __init__(self, allocator: Any, dest: Any, size: int) -> None:
        self.allocator, self.dest, self.size = allocator, dest, size

    def deliver(self, data: memoryview, offset: int, slot: int | None) -> None:
        _check_piece(data, offset, self.size)
        whole = offset == 0 and data.nbytes == self.size
        target = self.dest if whole else self.allocator.offset(self.dest, data.nbytes, offset)
        self.allocator.copyin(target, data)
