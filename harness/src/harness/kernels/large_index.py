"""Large-index case: a uint8 buffer of 2**31 + 4096 bytes read and written above byte 2**31 with int64 index math.

A backend that computes addresses in 32 bits wraps to the start of the buffer (or faults); the check looks at a window
around 2**31 through buffer views, so the test moves kilobytes, not gigabytes. It allocates > 2 GiB of address space
(mostly untouched), hence the suite marks it ``bigmem``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.assertions import assert_close
from harness.runner import load_program
from runtime_core.buffer import Buffer
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder

__all__ = ["LargeIndexCase", "large_index_case", "BASE", "COUNT"]

BASE = 2**31   # first element index the kernel touches (bytes, as the buffer is uint8)
COUNT = 4096   # elements touched, one per thread
GROUP = 256


@dataclass(frozen=True)
class LargeIndexCase:
    """``kernel`` does ``big[BASE + i] += 1; out[i] = old big[BASE + i]`` for i < COUNT (slot 0 = big, 1 = out)."""

    kernel: Kernel
    nbytes: int = BASE + COUNT

    def check(self, device: str, rng: np.random.Generator) -> None:
        """Run on ``device`` and compare the window [BASE - COUNT, BASE + COUNT) and ``out`` with the reference.

        Raises ``AssertionError`` on a mismatch, ``NotImplementedError`` if the device has no buffer views.
        """
        big = Buffer(device, self.nbytes, dtypes.uint8).allocate()
        out = Buffer(device, COUNT, dtypes.uint8).allocate()
        try:
            window = big.view(2 * COUNT, dtypes.uint8, BASE - COUNT)
            before = rng.integers(0, 256, size=2 * COUNT, dtype=np.uint8)
            window.copyin(before)
            load_program(device, self.kernel)(big.opaque, out.opaque, global_size=(COUNT // GROUP, 1, 1),
                                              local_size=(GROUP, 1, 1))
            expected = before.copy()
            expected[COUNT:] = (before[COUNT:].astype(np.int64) + 1) % 256
            assert_close(window.numpy(), expected, dtypes.uint8, what=f"window [2**31 - {COUNT}, 2**31 + {COUNT})")
            assert_close(out.numpy(), before[COUNT:], dtypes.uint8, what="values loaded above 2**31")
        finally:
            out.deallocate()
            big.deallocate()


def large_index_case() -> LargeIndexCase:
    """The large-index kernel: int64 indices BASE + global id, a load and a store above 2**31 bytes."""
    kb = KernelBuilder("large_index_uint8", (COUNT // GROUP,), (GROUP,))
    big, out = kb.buffer(dtypes.uint8), kb.buffer(dtypes.uint8)
    i = kb.global_id(0)
    idx = kb.add(kb.const(BASE, dtypes.int64), kb.cast(i, dtypes.int64))
    x = kb.load(big, idx)
    kb.store(out, i, x)
    kb.store(big, idx, kb.add(x, 1))
    return LargeIndexCase(kb.build())
