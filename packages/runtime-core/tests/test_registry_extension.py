"""The extension point: Device.register / restoring / unregister, per-backend canonicalization, default order, and the
device handed to allocators and programs."""

from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np
import pytest

from runtime_core import Buffer, Compiled, Device, DeviceError, MallocAllocator, dtypes
from runtime_core.device import default_order


class _Prog:
    def __init__(self, dev: Compiled, name: str, lib: bytes) -> None:
        self.dev, self.name, self.lib = dev, name, lib


class Toy(Compiled):
    DEFAULT_PRIORITY = -1
    opened: list[str] = []

    def __init__(self, device: str) -> None:
        Toy.opened.append(device)
        super().__init__(device, MallocAllocator(self), None, None, functools.partial(_Prog, self))


class PathToy(Toy):
    DEFAULT_PRIORITY = None

    @classmethod
    def canonicalize(cls, name: str) -> str:
        return name  # the suffix is a path: kept verbatim, "PATHTOY:0" included


def test_registered_backend_opens_and_hands_itself_to_its_pieces():
    with Device.restoring():
        Device.register("TOY", Toy)
        dev = Device["toy:1"]
        assert dev.device == "TOY:1" and dev.allocator.dev is dev
        prg = dev.runtime("k", b"\x00")
        assert prg.dev is dev and prg.name == "k"
        assert Device["TOY:1"] is dev and "TOY:1" in Device.opened()
    assert "TOY" not in Device.backends() and "TOY:1" not in Device.opened()


def test_each_backend_canonicalizes_its_names():
    with Device.restoring():
        Device.register("TOY", Toy)
        Device.register("PATHTOY", PathToy)
        assert Device.canonicalize("toy:0") == "TOY"
        assert Device.canonicalize("pathtoy:0") == "PATHTOY:0"
        assert Device.canonicalize("pathtoy:/Tmp/F") == "PATHTOY:/Tmp/F"
        assert Device.canonicalize("nosuch:0") == "NOSUCH"  # the generic rule for unknown backends
        # one spelling per ordinal, so "TOY:07" and "TOY:7" are one device, not two objects on one device
        assert Device.canonicalize("toy:00") == "TOY"
        assert Device.canonicalize("toy:07") == "TOY:7"
        assert Device["TOY:07"] is Device["TOY:7"]
        assert Device.canonicalize("toy:\u0661") == "TOY:\u0661"  # a non-ASCII digit is not an ordinal


def test_default_order_is_by_priority_and_used_by_default():
    with Device.restoring():
        Device.register("TOY", Toy)
        Device.register("PATHTOY", PathToy)
        order = default_order()
        assert order.names[0] == "TOY" and "PATHTOY" not in order.names
        assert order.names.index("PYTHON") > order.names.index("TOY")
        assert Device.DEFAULT == "TOY"


@pytest.mark.parametrize("name, cls, exc, match", [
    ("toy", Toy, ValueError, "upper-case identifier"),
    ("PYTHON", Toy, ValueError, "already registered"),
    ("TOY", object, TypeError, "subclass of runtime_core.Compiled"),
])
def test_bad_registrations_are_refused(name, cls, exc, match):
    with Device.restoring(), pytest.raises(exc, match=match):
        Device.register(name, cls)


def test_a_backend_that_does_not_accept_its_device_is_refused():
    class NoArg(Compiled):
        def __init__(self) -> None:
            super().__init__("X", MallocAllocator(), None, None, None)

    class TwoArgs(Compiled):
        def __init__(self, device: str, other: int) -> None:
            super().__init__(device, MallocAllocator(), None, None, None)

    with Device.restoring():
        for cls in (NoArg, TwoArgs):
            with pytest.raises(TypeError, match="must accept the canonical device name"):
                Device.register("BAD", cls)
        assert "BAD" not in Device.backends()


def test_unregister_unknown_backend():
    with pytest.raises(KeyError, match="'NOPE' is not registered"):
        Device.unregister("NOPE")


def test_buffer_binds_its_device_once():
    with Device.restoring():
        Device.register("TOY", Toy)
        Toy.opened.clear()
        b = Buffer("TOY", 4, dtypes.float32).allocate()
        assert b.dev is Device["TOY"]
        Device.unregister("TOY")  # the registry forgets the device: the buffer still works through its binding
        b.copyin(np.arange(4, dtype=np.float32))
        np.testing.assert_array_equal(b.numpy(), np.arange(4, dtype=np.float32))
        assert b.view(2, dtypes.float32, 8).numpy().tolist() == [2.0, 3.0]
        assert Toy.opened == ["TOY"]


@pytest.mark.parametrize("dev", [64, np.int64(64), 1.5, "CPU", Toy], ids=["int", "np_int", "float", "name", "class"])
def test_allocator_rejects_a_size_name_or_class_passed_as_its_device(dev):
    with pytest.raises(TypeError, match="a Compiled instance.*pass sizes and options by keyword"):
        MallocAllocator(dev)


def test_threads_opening_one_device_at_once_get_one_object():
    class SlowToy(Toy):
        def __init__(self, device: str) -> None:
            with contextlib.suppress(threading.BrokenBarrierError):  # unlocked, all 8 would construct meanwhile
                barrier.wait(timeout=0.5)
            super().__init__(device)
    barrier = threading.Barrier(8)
    got: list[Compiled] = []
    with Device.restoring():
        Device.register("SLOWTOY", SlowToy)
        Toy.opened.clear()
        threads = [threading.Thread(target=lambda: got.append(Device["SLOWTOY"])) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 8 and all(d is got[0] for d in got)
        assert Toy.opened == ["SLOWTOY"]


def test_a_backend_with_a_bad_default_priority_is_listed_as_broken_not_fatal():
    class BadPriority(Toy):
        DEFAULT_PRIORITY = "high"  # type: ignore[assignment]
    with Device.restoring():
        Device.register("TOY", Toy)
        Device.register("BADPRIO", BadPriority)
        order = default_order()
        assert order.names[0] == "TOY" and "BADPRIO" not in order.names
        assert [name for name, _ in order.broken] == ["BADPRIO"]
        assert "DEFAULT_PRIORITY must be an int or None, got 'high'" in order.broken[0][1]
        assert Device.DEFAULT == "TOY"


def test_unknown_backend_class_lookup():
    with pytest.raises(DeviceError, match="unknown device 'NOPE'"):
        Device.backend_class("NOPE")


def test_a_finalized_device_is_opened_afresh_by_the_registry():
    class ClosingToy(Toy):
        def finalize(self) -> None:
            self.closed = True
    with Device.restoring():
        Device.register("CLOSINGTOY", ClosingToy)
        first = Device["CLOSINGTOY"]
        assert Device["CLOSINGTOY"] is first
        first.finalize()
        second = Device["CLOSINGTOY"]
        assert second is not first and not second.closed and Device["CLOSINGTOY"] is second
