"""Large-index case: a uint8 buffer of 2**31 + 4096 bytes read and written above byte 2**31 with int64 index math.

A backend that computes addresses in 32 bits wraps to the start of the buffer (or faults); the check looks at a window
around 2**31 through buffer views (``harness.runner.check_large_index``), so the test moves kilobytes, not gigabytes.
It allocates > 2 GiB of address space (mostly untouched), hence the suite marks it ``bigmem``.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder

__all__ = ["LargeIndexCase", "large_index_case", "BASE", "COUNT", "GROUP"]

BASE = 2**31   # first element index the kernel touches (bytes, as the buffer is uint8)
COUNT = 4096   # elements touched, one per thread
GROUP = 256


@dataclass(frozen=True)
class LargeIndexCase:
    """``kernel`` does ``big[BASE + i] += 1; out[i] = old big[BASE + i]`` for i < COUNT (slot 0 = big, 1 = out)."""

    kernel: Kernel
    nbytes: int = BASE + COUNT


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
