"""``Allocator.copyout_orders``: Buffer.copyout synchronizes the device first unless the allocator's copy-out is
ordered after the queued work itself (a CLOUD batch)."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_core import Compiled, MallocAllocator
from runtime_core.buffer import Buffer
from runtime_core.device import Device


class _Ordered(MallocAllocator):
    copyout_orders = True


def _device(allocator_cls: type[MallocAllocator]) -> type[Compiled]:
    class Counting(Compiled):
        def __init__(self, name: str) -> None:
            super().__init__(name, allocator_cls(self), None, None, None)
            self.syncs = 0

        def synchronize(self) -> None:
            self.syncs += 1
    return Counting


@pytest.mark.parametrize("allocator_cls, syncs", [(MallocAllocator, 1), (_Ordered, 0)])
def test_copyout_synchronizes_unless_the_allocator_orders_it(allocator_cls: type[MallocAllocator], syncs: int) -> None:
    with Device.restoring():
        Device.register("ORDERTOY", _device(allocator_cls))
        buf = Buffer.from_numpy("ORDERTOY", np.arange(4, dtype=np.int32))
        assert buf.numpy().tolist() == [0, 1, 2, 3]
        assert Device["ORDERTOY"].syncs == syncs  # type: ignore[attr-defined]
        buf.deallocate()
