"""Buffers and allocators on every selected backend: lifetime, LRU reuse, views, host copies and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from harness.kernels import values as V
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer import Buffer
from runtime_core.buffer_spec import BufferSpec
from runtime_core.device import Device, DeviceError
from runtime_core.dtype import DType, dtypes

ODD_SIZE = 4096 + 72  # bytes; unlikely to collide with sizes other tests leave in an LRU cache


def _lru(device: str) -> LRUAllocator:
    allocator = Device[device].allocator
    if not isinstance(allocator, LRUAllocator):
        pytest.skip(f"{device}'s allocator {type(allocator).__name__} is not an LRUAllocator")
    return allocator


def test_alloc_copy_free(device: str) -> None:
    data = np.arange(256, dtype=np.uint8)
    buf = Buffer(device, 256, dtypes.uint8).allocate()
    buf.copyin(data)
    np.testing.assert_array_equal(buf.numpy(), data)
    buf.deallocate()
    assert not buf.is_allocated


def test_lru_reuses_freed_buffer_of_same_size_and_spec(device: str) -> None:
    allocator = _lru(device)
    allocator.free_cache()
    first = allocator.alloc(ODD_SIZE)
    allocator.free(first, ODD_SIZE)
    assert allocator.cached_bytes == ODD_SIZE
    again = allocator.alloc(ODD_SIZE)
    assert again is first
    assert allocator.cached_bytes == 0
    other_spec = allocator.alloc(ODD_SIZE, BufferSpec(nolru=True))
    assert other_spec is not first
    allocator.free(other_spec, ODD_SIZE, BufferSpec(nolru=True))
    assert allocator.cached_bytes == 0  # nolru memory is released at once
    allocator.free(again, ODD_SIZE)
    allocator.free_cache()


def test_lru_cache_respects_byte_bound(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    allocator = _lru(device)
    allocator.free_cache()
    monkeypatch.setattr(allocator, "max_cached_bytes", 3 * ODD_SIZE)
    opaques = [allocator.alloc(ODD_SIZE) for _ in range(4)]
    for o in opaques:
        allocator.free(o, ODD_SIZE)
    assert allocator.cached_bytes == 3 * ODD_SIZE  # the fourth went back to the backend
    reused = [allocator.alloc(ODD_SIZE) for _ in range(3)]
    assert all(any(r is o for o in opaques[:3]) for r in reused)
    assert allocator.cached_bytes == 0
    for r in reused:
        allocator.free(r, ODD_SIZE)
    allocator.free_cache()
    assert allocator.cached_bytes == 0


def test_view_at_offset_shares_memory(device: str) -> None:
    if not Device[device].allocator.capabilities.views:
        pytest.skip(f"{device} does not support buffer views at an offset")
    base = Buffer.from_numpy(device, np.arange(64, dtype=np.float32))
    try:
        view = base.view(8, dtypes.float32, offset=16)
        np.testing.assert_array_equal(view.numpy(), np.arange(4, 12, dtype=np.float32))
        view.copyin(np.full(8, -1, dtype=np.float32))
        expected = np.arange(64, dtype=np.float32)
        expected[4:12] = -1
        np.testing.assert_array_equal(base.numpy(), expected)
        raw = base.view(4, dtypes.uint8, offset=4)  # the bytes of float32 1.0
        np.testing.assert_array_equal(raw.numpy(), np.array([1.0], dtype=np.float32).view(np.uint8))
        with pytest.raises(ValueError, match="does not fit"):
            base.view(2, dtypes.float32, offset=252)
    finally:
        base.deallocate()


def _every_value(dt: DType, rng: np.random.Generator) -> np.ndarray:
    if dt.is_float:
        return V.floats(rng, dt, 97, -1e3, 1e3, specials=True)
    return V.values(rng, dt, 97)


@pytest.mark.parametrize("dt", dtypes.all, ids=[d.name for d in dtypes.all])
def test_numpy_round_trip_every_dtype(device: str, dt: DType, rng: np.random.Generator) -> None:
    data = _every_value(dt, rng)
    buf = Buffer.from_numpy(device, data)
    try:
        assert buf.dtype is dt and buf.size == 97
        out = buf.numpy()
        assert out.dtype == dt.np
        np.testing.assert_array_equal(out.view(np.uint8), data.view(np.uint8))  # bit-exact, NaN payloads included
        raw = bytearray(buf.nbytes)
        buf.copyout(memoryview(raw))
        assert bytes(raw) == data.tobytes()
        buf.copyin(data.tobytes())  # bytes input
        np.testing.assert_array_equal(buf.numpy().view(np.uint8), data.view(np.uint8))
    finally:
        buf.deallocate()


def test_copy_from_same_device(device: str) -> None:
    src = Buffer.from_numpy(device, np.arange(33, dtype=np.int16))
    dst = Buffer(device, 33, dtypes.int16).allocate()
    try:
        dst.copy_from(src)
        np.testing.assert_array_equal(dst.numpy(), np.arange(33, dtype=np.int16))
    finally:
        src.deallocate()
        dst.deallocate()


def test_as_buffer_zero_copy_where_supported(device: str) -> None:
    buf = Buffer.from_numpy(device, np.arange(16, dtype=np.uint8))
    try:
        if Device[device].allocator.capabilities.host_view:
            mv = buf.as_buffer(force_zero_copy=True)
            mv[3] = 200
            assert buf.numpy()[3] == 200  # the write went to the buffer itself
        else:
            with pytest.raises(RuntimeError, match="without a copy"):
                buf.as_buffer(force_zero_copy=True)
        copy = buf.as_buffer(allow_zero_copy=False)
        copy[0] = 99
        assert buf.numpy()[0] == 0  # a copy does not alias
    finally:
        buf.deallocate()


@pytest.mark.parametrize("size", [0, -4])
def test_nonpositive_size_is_rejected(device: str, size: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        Buffer(device, size, dtypes.float32)
    with pytest.raises(ValueError, match="> 0 bytes"):
        Device[device].allocator.alloc(size)


def test_size_mismatch_names_both_sizes(device: str) -> None:
    buf = Buffer(device, 16, dtypes.float32).allocate()
    try:
        with pytest.raises(ValueError, match=r"64 bytes.*60 bytes"):
            buf.copyin(bytes(60))
        with pytest.raises(ValueError, match=r"64 bytes.*68 bytes"):
            buf.copyout(bytearray(68))
    finally:
        buf.deallocate()


def test_copy_into_freed_buffer_raises(device: str) -> None:
    buf = Buffer(device, 8, dtypes.int32).allocate()
    buf.deallocate()
    with pytest.raises(RuntimeError, match="deallocated"):
        buf.copyin(np.zeros(8, dtype=np.int32))
    with pytest.raises(RuntimeError, match="deallocated"):
        buf.numpy()


def test_unknown_device_lists_registered_devices(device: str) -> None:
    with pytest.raises(DeviceError) as info:
        Buffer("NO_SUCH_DEVICE", 4, dtypes.uint8).allocate()
    message = str(info.value)
    assert "NO_SUCH_DEVICE" in message
    assert device.partition(":")[0] in message
