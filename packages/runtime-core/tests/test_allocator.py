import ctypes

import numpy as np
import pytest

from runtime_core import BufferSpec, LRUAllocator, MallocAllocator


class CountingAllocator(LRUAllocator):
    """Hands out ints; can be told to fail with MemoryError while more than `limit` bytes are live."""

    def __init__(self, max_cached_bytes=None, limit=None):
        super().__init__(max_cached_bytes=max_cached_bytes)
        self.live, self.next, self.limit, self.allocs, self.frees = {}, 1, limit, 0, 0

    def _alloc(self, size, spec):
        if self.limit is not None and sum(self.live.values()) + size > self.limit:
            raise MemoryError("device full")
        self.allocs += 1
        self.next += 1
        self.live[self.next] = size
        return self.next

    def _free(self, opaque, size, spec):
        self.frees += 1
        del self.live[opaque]


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "8"])
def test_alloc_rejects_bad_sizes(size):
    with pytest.raises((ValueError, TypeError)):
        CountingAllocator().alloc(size)


def test_lru_reuses_same_size_and_spec_with_none_as_default():
    a = CountingAllocator()
    x = a.alloc(64, None)
    a.free(x, 64, BufferSpec())
    assert a.alloc(64) == x and a.allocs == 1
    y = a.alloc(64, BufferSpec(host=True))
    assert y != x and a.allocs == 2


def test_lru_does_not_reuse_other_sizes_or_nolru():
    a = CountingAllocator()
    x = a.alloc(64)
    a.free(x, 64)
    assert a.alloc(128) != x
    z = a.alloc(32, BufferSpec(nolru=True))
    a.free(z, 32, BufferSpec(nolru=True))
    assert z not in a.live and a.cached_bytes == 64


def test_lru_byte_bound_frees_beyond_it():
    a = CountingAllocator(max_cached_bytes=100)
    bufs = [a.alloc(60) for _ in range(3)]
    for b in bufs:
        a.free(b, 60)
    assert a.cached_bytes == 60 and a.frees == 2


def test_lru_oom_empties_cache_and_retries_once():
    a = CountingAllocator(limit=100)
    x = a.alloc(80)
    a.free(x, 80)
    y = a.alloc(50)  # 80 cached + 50 > 100: the cache is dropped and the retry succeeds
    assert a.cached_bytes == 0 and a.live == {y: 50}
    with pytest.raises(MemoryError, match="device full"):
        a.alloc(200)


def test_malloc_alignment_and_zero_copy_view():
    a = MallocAllocator(alignment=256)
    ptr = a.alloc(1000)
    assert ptr % 256 == 0
    a.copyin(ptr, memoryview(bytes(range(200)) * 5))
    view = a.host_view(ptr, 1000)
    assert bytes(view[:4]) == b"\x00\x01\x02\x03" and bytes(view[-1:]) == bytes([199])
    view[0] = 42
    assert ctypes.c_uint8.from_address(ptr).value == 42
    out = bytearray(1000)
    a.copyout(memoryview(out), ptr)
    assert out[0] == 42 and out[1:200] == bytes(range(1, 200))
    a.free(ptr, 1000)


def test_malloc_external_ptr_is_wrapped_not_freed():
    backing = np.arange(16, dtype=np.uint8)
    a = MallocAllocator()
    spec = BufferSpec(external_ptr=backing.ctypes.data)
    ptr = a.alloc(16, spec)
    assert ptr == backing.ctypes.data
    a.free(ptr, 16, spec)
    assert a.cached_bytes == 0 and backing[15] == 15


def test_malloc_rejects_bad_alignment():
    with pytest.raises(ValueError, match="power of two"):
        MallocAllocator(alignment=48)
