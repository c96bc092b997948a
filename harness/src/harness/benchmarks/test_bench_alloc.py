"""Allocator cost: ``alloc`` + ``free`` of 1 MiB through the device allocator, served from its LRU cache (hit) or
reaching the backend every call (miss, ``BufferSpec(nolru=True)``). Limit: ``numpy.empty`` of 1 MiB (allocated and
released by each call, as the result is dropped). Unit: us/call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.benchmarks.measure import HOST, record_time
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer_spec import BufferSpec
from runtime_core.device import Device

SIZE = 1 << 20
GROUP = "alloc-1MiB"
_SPECS = {"lru_hit": BufferSpec(), "lru_miss": BufferSpec(nolru=True)}


def _check_cache_use(allocator: LRUAllocator, spec: BufferSpec, mode: str) -> None:
    """Prove the mode does what it says: a hit hands back the buffer just freed, a miss leaves nothing cached."""
    first = allocator.alloc(SIZE, spec)
    allocator.free(first, SIZE, spec)
    cached = (SIZE, spec) in allocator.cache
    again = allocator.alloc(SIZE, spec)
    allocator.free(again, SIZE, spec)
    if mode == "lru_hit" and not (cached and again is first):
        pytest.fail(f"{type(allocator).__name__}: freeing {SIZE} bytes did not feed the next alloc from the LRU cache")
    if mode == "lru_miss" and cached:
        pytest.fail(f"{type(allocator).__name__}: a nolru buffer of {SIZE} bytes was kept in the LRU cache")


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("mode", list(_SPECS))
def test_alloc_free(benchmark: Any, device: str, mode: str) -> None:
    allocator = Device[device].allocator
    if not isinstance(allocator, LRUAllocator):
        pytest.skip(f"{device}'s allocator {type(allocator).__name__} is not an LRUAllocator: no cache to hit or miss")
    spec = _SPECS[mode]
    _check_cache_use(allocator, spec, mode)

    def alloc_free() -> None:
        allocator.free(allocator.alloc(SIZE, spec), SIZE, spec)

    benchmark(alloc_free)
    record_time(benchmark, device, "us/call", size_bytes=SIZE, lru=mode)


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.bench_role("limit", reference="numpy.empty(1 MiB, uint8)")
def test_alloc_limit_numpy_empty(benchmark: Any) -> None:
    benchmark(np.empty, SIZE, np.uint8)
    record_time(benchmark, HOST, "us/call", size_bytes=SIZE)
