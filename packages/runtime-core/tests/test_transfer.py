"""The copy router (runtime_core.transfer): the route follows from the allocators' public capabilities, and every
route delivers the source's bytes."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_core import Allocator, Buffer, Capabilities, Compiled, Device, MallocAllocator, Route, dtypes, transfer


class _Bytes(Allocator):
    """Device memory reached only by copyin/copyout/offset (a bytearray and an offset): no host view."""

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


class _Transferring(_Bytes):
    """Like _Bytes, with device-to-device copies that record which devices they joined."""

    calls: list = []

    def _transfer(self, dest, src, size, src_dev, dest_dev):
        type(self).calls.append((src_dev.device, dest_dev.device))
        dest[0][dest[1]:dest[1] + size] = src[0][src[1]:src[1] + size]


def _backend(allocator_cls):
    class Dev(Compiled):
        def __init__(self, device):
            super().__init__(device, allocator_cls(self), None, None, None)
    return Dev


@pytest.fixture
def backends():
    with Device.restoring():
        Device.register("HOSTMEM", _backend(MallocAllocator))
        Device.register("BYTES", _backend(_Bytes))
        Device.register("OTHERBYTES", _backend(_Bytes))
        Device.register("XFER", _backend(_Transferring))
        _Transferring.calls = []
        yield


DATA = np.arange(48, dtype=np.float32)


@pytest.mark.parametrize("src_dev, dest_dev, expected", [
    ("XFER", "XFER", Route.SAME_DEVICE),
    ("XFER", "XFER:1", Route.PEER),
    ("HOSTMEM", "BYTES", Route.HOST_VIEW),
    ("BYTES", "OTHERBYTES", Route.STAGED),
    ("BYTES", "HOSTMEM", Route.STAGED),
])
def test_each_route_delivers_the_bytes(backends, src_dev, dest_dev, expected):
    src = Buffer.from_numpy(src_dev, DATA)
    dest = Buffer(dest_dev, DATA.size, dtypes.float32).allocate()
    assert transfer.route(dest, src) is expected
    assert transfer.copy(dest, src) is expected
    np.testing.assert_array_equal(dest.numpy(), DATA)


def test_peer_and_same_device_copies_name_their_devices(backends):
    a = Buffer.from_numpy("XFER", DATA)
    b = Buffer("XFER:1", DATA.size, dtypes.float32).allocate().copy_from(a)
    Buffer("XFER", DATA.size, dtypes.float32).allocate().copy_from(b)
    assert _Transferring.calls == [("XFER", "XFER:1"), ("XFER:1", "XFER")]


def test_host_memory_at_either_end(backends):
    dest = Buffer("BYTES", DATA.size, dtypes.float32).allocate()
    assert transfer.copy(dest, DATA) is Route.HOST_IN
    out = np.empty_like(DATA)
    assert transfer.copy(out, dest) is Route.HOST_OUT
    np.testing.assert_array_equal(out, DATA)
    with pytest.raises(TypeError, match="Buffer at one end"):
        transfer.route(out, DATA)


def test_views_copy_their_own_bytes(backends):
    src = Buffer.from_numpy("HOSTMEM", DATA)
    dest = Buffer("BYTES", 8, dtypes.float32).allocate()
    dest.copy_from(src.view(8, dtypes.float32, 16 * 4))
    np.testing.assert_array_equal(dest.numpy(), DATA[16:24])


def test_size_mismatch_changes_nothing(backends):
    src = Buffer.from_numpy("BYTES", DATA)
    dest = Buffer.from_numpy("OTHERBYTES", np.zeros(8, np.float32))
    with pytest.raises(ValueError, match="destination holds 32 bytes, source 192 bytes"):
        transfer.copy(dest, src)
    np.testing.assert_array_equal(dest.numpy(), np.zeros(8, np.float32))


def test_capabilities_are_flags_of_the_class():
    assert MallocAllocator.capabilities == Capabilities(host_view=True, views=True)
    assert _Bytes.capabilities == Capabilities(views=True)
    assert _Transferring.capabilities == Capabilities(views=True, transfer=True)
    assert Allocator.capabilities == Capabilities()

    class Declared(MallocAllocator):
        capabilities = Capabilities(host_view=True)  # a backend may state fewer than it overrides
    assert not Declared.capabilities.views


def test_missing_operations_say_so():
    with pytest.raises(NotImplementedError, match="_Bytes has no zero-copy host view"):
        _Bytes().host_view((bytearray(4), 0), 4)
    with pytest.raises(NotImplementedError, match="does not support device-to-device transfer"):
        _Bytes().transfer(None, None, 4, None, None)

