"""The copy router: the one place that decides how bytes move from a source to a destination.

Endpoints are :class:`~runtime_core.buffer.Buffer` objects or host memory (bytes-like or numpy arrays). The route
follows from the two allocators' :class:`~runtime_core.allocator.Capabilities`, first that applies:

=================  ======================================================================================================
route              when, and how
=================  ======================================================================================================
``HOST_IN``        the source is host memory: the destination allocator's ``copyin``
``HOST_OUT``       the destination is host memory: the source allocator's ``copyout`` (after the device's queued work)
``SAME_DEVICE``    both on one device whose allocator has ``transfer`` (CUDA: ``cuMemcpyAsync``)
``PEER``           two devices of one backend whose allocator has ``transfer``; the backend picks peer access or its
                   own staging (CUDA: ``cuMemcpyPeerAsync``, else pinned chunks; DISK: file to file)
``STREAMED``       the source ``streams_out`` (DISK's file reads) and the destination takes pieces: its own sink
                   (CUDA's pinned staging), its zero-copy host memory, or ``copyin`` into offset views
``HOST_VIEW``      the source has a zero-copy host view and does not stream out: the destination's ``copyin`` reads it
                   directly (a streaming source's view may be a file's mapping, which raises ``SIGBUS`` when read after
                   another process shrank the file, so it is never read through it)
``STAGED``         otherwise: copied out into host memory, then in
=================  ======================================================================================================
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from runtime_core.sink import CopyinSink, CopySink, HostSink

Buffer = Any  # runtime_core.buffer.Buffer, which imports this module

__all__ = ["Route", "route", "copy", "sink_for"]


class Route(enum.Enum):
    """How one copy moves its bytes (see the module docstring for when each applies)."""

    HOST_IN = "host in"
    HOST_OUT = "host out"
    SAME_DEVICE = "same device"
    PEER = "peer"
    STREAMED = "streamed"
    HOST_VIEW = "host view"
    STAGED = "staged"


def _is_host(x: Any) -> bool:
    return isinstance(x, (bytes, bytearray, memoryview, np.ndarray))


def _backend(buf: Buffer) -> str:
    return buf.device.partition(":")[0]


def route(dest: Any, src: Any) -> Route:
    """The route a copy from ``src`` to ``dest`` takes (host memory: bytes-like or a numpy array; anything else a
    Buffer); ``TypeError`` when both are host memory."""
    if _is_host(src):
        if _is_host(dest):
            raise TypeError(f"a copy needs a Buffer at one end at least, got {type(src).__name__} -> "
                            f"{type(dest).__name__}")
        return Route.HOST_IN
    if _is_host(dest):
        return Route.HOST_OUT
    dest_dev, src_dev = dest.dev, src.dev
    caps, src_caps = dest_dev.allocator.capabilities, src_dev.allocator.capabilities
    if caps.transfer and _backend(dest) == _backend(src):
        return Route.SAME_DEVICE if dest_dev is src_dev else Route.PEER
    if src_caps.streams_out and (caps.own_sink or caps.host_view or caps.views):
        return Route.STREAMED
    return Route.HOST_VIEW if src_caps.host_view and not src_caps.streams_out else Route.STAGED


def copy(dest: Any, src: Any) -> Route:
    """Copy all of ``src`` into ``dest`` (equal byte sizes) by :func:`route`; returns the route taken.

    Raises ``ValueError`` for different sizes, ``RuntimeError`` for an unallocated buffer, ``TypeError`` when neither
    end is a Buffer; a backend's own error (``MemoryError``, a driver error) passes through. A Buffer's own
    :meth:`~runtime_core.buffer.Buffer.copy_from`, ``copyin`` and ``copyout`` are the same copies.
    """
    way = route(dest, src)
    if way is Route.HOST_IN:
        dest.copyin(src)
    elif way is Route.HOST_OUT:
        src.copyout(dest)
    else:
        _copy_buffers(dest, src, way)
    return way


def _copy_buffers(dest: Buffer, src: Buffer, way: Route) -> None:
    if src.nbytes != dest.nbytes:
        raise ValueError(f"copy size mismatch: destination holds {dest.nbytes} bytes, source {src.nbytes} bytes")
    if way in (Route.SAME_DEVICE, Route.PEER):
        dest.allocator.transfer(dest.opaque, src.opaque, dest.nbytes, src.dev, dest.dev)
    elif way is Route.STREAMED:
        sink, src_opaque = _sink(dest), src.opaque
        src.dev.synchronize()
        src.allocator.stream_out(sink, src_opaque, dest.nbytes)
    else:
        dest.copyin(src.as_buffer(allow_zero_copy=way is Route.HOST_VIEW))


def sink_for(dest: Buffer) -> CopySink | None:
    """Where a streamed copy into ``dest`` lands: the allocator's own sink, else its zero-copy host memory, else
    ``copyin`` into offset views; ``None`` when the allocator has none of these. ``RuntimeError`` if ``dest`` is not
    allocated."""
    caps = dest.allocator.capabilities
    return _sink(dest) if caps.own_sink or caps.host_view or caps.views else None


def _sink(dest: Buffer) -> CopySink:
    opaque, allocator = dest.opaque, dest.allocator
    if allocator.capabilities.own_sink:
        return allocator.sink(opaque, dest.nbytes)
    if allocator.capabilities.host_view:
        return HostSink(dest.as_buffer(force_zero_copy=True))
    return CopyinSink(allocator, opaque, dest.nbytes)
