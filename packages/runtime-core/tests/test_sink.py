"""Streamed copies (runtime_core.sink): Buffer.copy_from routes a streaming source into the destination's sink."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_core import Allocator, Buffer, Compiled, Device, MallocAllocator, Route, dtypes, transfer
from runtime_core.sink import CopyinSink, CopySink, HostSink


class _StreamingSource(MallocAllocator):
    """Host memory that, copied to another backend, delivers itself in 3-byte pieces, last piece first."""

    def _copyout_sink(self, sink: CopySink, src: int, size: int) -> None:
        view = self._as_buffer(src, size)
        for start in reversed(range(0, size, 3)):
            sink.deliver(view[start:start + 3], start, None)
        sink.finish()


class _NoHostView(Allocator):
    """Device memory reached only by _copyin/_copyout/_offset (a bytearray and an offset)."""

    def _alloc(self, size, spec):
        return (bytearray(size), 0)

    def _free(self, opaque, size, spec):
        pass

    def _copyin(self, dest, src):
        dest[0][dest[1]:dest[1] + src.nbytes] = src

    def _copyout(self, dest, src):
        dest[:] = src[0][src[1]:src[1] + dest.nbytes]

    def _offset(self, opaque, size, offset):
        return (opaque[0], opaque[1] + offset)


class _Src(Compiled):
    def __init__(self, device):
        super().__init__(device, _StreamingSource(self), None, None, None)


class _Dst(Compiled):
    def __init__(self, device):
        super().__init__(device, _NoHostView(self), None, None, None)


class _HostDst(Compiled):
    def __init__(self, device):
        super().__init__(device, MallocAllocator(self), None, None, None)


@pytest.mark.parametrize("dest_backend, sink_type", [("DST", CopyinSink), ("HOSTDST", HostSink)])
def test_copy_from_a_streaming_source_goes_through_the_destination_sink(dest_backend, sink_type):
    data = np.arange(20, dtype=np.uint8)
    with Device.restoring():
        Device.register("SRC", _Src)
        Device.register("DST", _Dst)
        Device.register("HOSTDST", _HostDst)
        src = Buffer.from_numpy("SRC", data)
        dest = Buffer(dest_backend, 20, dtypes.uint8).allocate()
        assert isinstance(dest.copy_sink(), sink_type)
        dest.copy_from(src.view(20, dtypes.uint8, 0))
        np.testing.assert_array_equal(dest.numpy(), data)
        part = Buffer(dest_backend, 7, dtypes.uint8).allocate().copy_from(src.view(7, dtypes.uint8, 11))
        np.testing.assert_array_equal(part.numpy(), data[11:18])


def test_pieces_outside_the_destination_are_refused():
    host = HostSink(memoryview(bytearray(8)))
    with pytest.raises(ValueError, match="does not fit a destination of 8 bytes"):
        host.deliver(memoryview(b"abc"), 6, None)
    alloc = _NoHostView()
    dest = alloc.alloc(8)
    with pytest.raises(ValueError, match="does not fit"):
        CopyinSink(alloc, dest, 8).deliver(memoryview(b"abc"), -1, None)
    with pytest.raises(ValueError, match="writable"):
        HostSink(memoryview(b"read-only"))


class _CopyOnly(Allocator):
    """The four required hooks only: no sink, no views, no host view."""

    def _alloc(self, size, spec):
        return bytearray(size)

    def _free(self, opaque, size, spec):
        pass

    def _copyin(self, dest, src):
        dest[:src.nbytes] = src

    def _copyout(self, dest, src):
        dest[:] = src[:dest.nbytes]


class _UnreadableView(_CopyOnly):
    """A streaming source whose host view must not be read (a file's mapping can raise SIGBUS when it shrank)."""

    def _as_buffer(self, src, size):
        raise AssertionError("the router read a streaming source through its host view")

    def _copyout_sink(self, sink: CopySink, src: bytearray, size: int) -> None:
        raise AssertionError("no sink exists for this destination")


def test_a_streaming_source_is_staged_not_read_through_its_host_view_when_the_destination_takes_no_pieces():
    data = np.arange(20, dtype=np.uint8)

    class Src(Compiled):
        def __init__(self, device):
            super().__init__(device, _UnreadableView(self), None, None, None)

    class Dst(Compiled):
        def __init__(self, device):
            super().__init__(device, _CopyOnly(self), None, None, None)
    with Device.restoring():
        Device.register("SRC", Src)
        Device.register("DST", Dst)
        src = Buffer("SRC", 20, dtypes.uint8).allocate()
        src.copyin(memoryview(data))
        dest = Buffer("DST", 20, dtypes.uint8).allocate()
        assert transfer.route(dest, src) is Route.STAGED
        dest.copy_from(src)
        np.testing.assert_array_equal(dest.numpy(), data)
