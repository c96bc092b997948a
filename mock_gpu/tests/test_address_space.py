"""AddressSpace: allocation, host copies, vectorized checked accesses and fault reports."""

from __future__ import annotations

import numpy as np
import pytest

from mock_gpu.address_space import ALLOC_ALIGN, BASE_ADDRESS, AddressSpace, MemoryFault, OutOfMemory, PaddingAccess


@pytest.fixture
def space() -> AddressSpace:
    return AddressSpace({0: 1 << 20, 1: 4096})


def test_alloc_is_aligned_above_base_and_counts_usage(space):
    a = space.alloc(100)
    b = space.alloc(300, device=1)
    assert a >= BASE_ADDRESS and a % 256 == 0 and b % 256 == 0
    assert space.allocation(a + 99) == (a, 100, 0)
    assert space.allocation(a + 100) is None
    assert space.used(0) == 256 and space.used(1) == 512 and space.capacity(1) == 4096  # whole 256-byte granules
    space.free(b)
    assert space.used(1) == 0


def test_a_suspended_allocation_faults_but_keeps_its_address_contents_and_memory(space):
    a = space.alloc(64)
    space.write(a, bytes(range(64)))
    space.suspend(a)
    with pytest.raises(MemoryFault, match="freed"):
        space.read(a, 4)
    space.check(a, 64)  # call-time validation accepts it: pending work may make it accessible
    with pytest.raises(MemoryFault):
        space.check(a, 65)
    assert space.used(0) == 256
    space.resume(a)
    assert space.read(a, 64) == bytes(range(64))
    space.suspend(a)
    space.free(a)
    assert space.used(0) == 0


def test_out_of_memory_and_bad_sizes(space):
    with pytest.raises(OutOfMemory, match="device 1"):
        space.alloc(5000, device=1)
    with pytest.raises(ValueError, match="size must be a positive number of bytes"):
        space.alloc(0)
    with pytest.raises(ValueError, match="unknown device 7"):
        space.alloc(16, device=7)


def test_host_roundtrip_copy_and_fill(space):
    a = space.alloc(64)
    b = space.alloc(64)
    space.write(a, bytes(range(64)))
    space.copy(b, a + 8, 32)
    assert space.read(b, 32) == bytes(range(8, 40))
    space.fill(b, b"\x01\x02", 4)
    assert space.read(b, 10) == b"\x01\x02" * 4 + bytes(range(16, 18))


def test_free_then_access_is_use_after_free(space):
    a = space.alloc(64)
    space.free(a)
    with pytest.raises(MemoryFault) as e:
        space.read(a + 4, 4)
    assert e.value.kind == "use-after-free" and e.value.address == a + 4
    with pytest.raises(ValueError, match="not the base"):
        space.free(a)


def test_host_write_past_end_faults_without_writing(space):
    a = space.alloc(16)
    with pytest.raises(MemoryFault) as e:
        space.write(a + 8, b"\xff" * 16)
    assert e.value.kind == "out-of-bounds" and "16 bytes" in e.value.nearest
    assert space.read(a, 16) == bytes(16)


def test_vectorized_load_store_across_allocations(space):
    a = space.alloc(64)
    b = space.alloc(64)
    addrs = np.array([a, b + 4, a + 8, b], dtype=np.uint64)
    space.store(addrs, np.array([1, 2, 3, 4], dtype=np.int32))
    assert space.load(addrs, np.int32).tolist() == [1, 2, 3, 4]
    pairs = space.load(np.array([a, a + 8], dtype=np.uint64), np.int32, count=2)
    assert pairs.tolist() == [[1, 0], [3, 0]]


def test_vectorized_fault_reports_first_bad_position(space):
    a = space.alloc(64)
    addrs = np.array([a, a + 60, a + 256, 8], dtype=np.uint64)  # a + 256: past the 256-byte granule
    with pytest.raises(MemoryFault) as e:
        space.load(addrs, np.float32)
    assert (e.value.kind, e.value.position, e.value.address, e.value.size) == ("out-of-bounds", 2, a + 256, 4)
    assert "192 bytes past its end" in str(e.value)
    with pytest.raises(MemoryFault) as e:
        space.load(np.array([8], dtype=np.uint64), np.float32)
    assert e.value.kind == "null"


def test_misaligned_vector_access(space):
    a = space.alloc(64)
    with pytest.raises(MemoryFault) as e:
        space.load(np.array([a + 4], dtype=np.uint64), np.float32, count=4)
    assert e.value.kind == "misaligned"


@pytest.mark.parametrize("many", [False, True], ids=["one-allocation", "several-allocations"])
def test_kernel_access_into_the_granule_padding_is_recorded_not_a_fault(space, many):
    assert ALLOC_ALIGN == 256  # the alignment cudaMalloc guarantees (CUDA C++ Programming Guide)
    a = space.alloc(44)
    other = space.alloc(16)
    space.store(np.array([a + 40], dtype=np.uint64), np.array([7], dtype=np.int32))
    addrs = np.array([a + 40, a + 44, a + 252] + ([other] if many else []), dtype=np.uint64)
    assert space.load(addrs, np.int32).tolist() == [7, 0, 0] + ([0] if many else [])
    assert space.take_padding_access() == PaddingAccess(address=a + 44, size_accessed=4, base=a, size=44)
    assert space.take_padding_access() is None  # taken
    space.load(np.array([a + 40], dtype=np.uint64), np.int32)
    assert space.take_padding_access() is None  # inside the requested size: nothing to report


def test_the_granule_ends_the_padding(space):
    a = space.alloc(44)
    with pytest.raises(MemoryFault) as e:
        space.load(np.array([a, a + 256], dtype=np.uint64), np.int32)
    assert (e.value.kind, e.value.address) == ("out-of-bounds", a + 256)
    with pytest.raises(MemoryFault):  # 4 bytes of which the last 2 lie past the granule
        space.load(np.array([a + 254], dtype=np.uint64), np.int16, count=2)


@pytest.mark.parametrize("many", [False, True], ids=["one-allocation", "several-allocations"])
def test_exact_bounds_faults_at_the_requested_size(many):
    space = AddressSpace({0: 1 << 20}, exact_bounds=True)
    a = space.alloc(44)
    other = space.alloc(16)
    addrs = np.array(([other] if many else []) + [a + 40, a + 44], dtype=np.uint64)
    with pytest.raises(MemoryFault) as e:
        space.load(addrs, np.int32)
    assert (e.value.kind, e.value.address, e.value.position) == ("out-of-bounds", a + 44, len(addrs) - 1)
    assert "0 bytes past its end" in str(e.value)


def test_host_copies_and_mappings_have_no_padding(space):
    a = space.alloc(44)
    with pytest.raises(MemoryFault):
        space.read(a, 48)
    host = np.zeros(44, dtype=np.uint8)
    space.map(int(host.ctypes.data), host, 0)
    with pytest.raises(MemoryFault):
        space.load(np.array([host.ctypes.data + 44], dtype=np.uint64), np.int32)
