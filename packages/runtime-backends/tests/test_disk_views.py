"""DISK buffer views: byte offsets, views of views, exact copies of a view, copyin bounded by the view, zero-copy
host views, files past 4 GiB, and layouts that are not one byte range."""

from __future__ import annotations

import os

import numpy as np
import pytest

from runtime_backends.disk.formats import c_contiguous_nbytes
from runtime_core import Buffer, dtypes

HOST = "PYTHON"  # a host device that needs no compiler


def test_view_at_an_odd_offset_reads_its_bytes(make_file, disk_buffer):
    path, data = make_file(3 * 4096)
    view = disk_buffer(path, 3 * 4096).view(100, dtypes.uint8, 4097)
    np.testing.assert_array_equal(view.numpy(), data[4097:4197])
    f32 = disk_buffer(path, 3 * 4096).view(10, dtypes.float32, 4097)  # misaligned for its dtype: still bytes
    np.testing.assert_array_equal(f32.numpy(), data[4097:4137].view(np.float32))


def test_a_view_of_a_view_adds_the_offsets(make_file, disk_buffer):
    path, data = make_file(20000)
    outer = disk_buffer(path, 20000).view(10000, dtypes.uint8, 4097)
    inner = outer.view(50, dtypes.uint8, 3001)
    assert inner.offset == 4097 + 3001
    np.testing.assert_array_equal(inner.numpy(), data[7098:7148])


@pytest.mark.parametrize("nbytes", [4096 + 7, 3 << 20])  # below and above the streamed-copy threshold
def test_copying_a_view_to_another_device_copies_exactly_its_bytes(make_file, disk_buffer, nbytes):
    path, data = make_file(nbytes + 2 * 4097)
    view = disk_buffer(path, data.size).view(nbytes, dtypes.uint8, 4097)
    dest = Buffer(HOST, nbytes + 2, dtypes.uint8).allocate()
    dest.copyin(np.full(nbytes + 2, 0xEE, np.uint8))
    inner = dest.view(nbytes, dtypes.uint8, 1)
    inner.copy_from(view)
    got = dest.numpy()
    np.testing.assert_array_equal(got[1:-1], data[4097:4097 + nbytes])
    assert got[0] == 0xEE and got[-1] == 0xEE  # nothing written around the destination view


def test_copyin_through_a_view_writes_only_the_view(make_file, disk_buffer):
    path, data = make_file(3 * 4096)
    buf = disk_buffer(path, 3 * 4096)
    buf.view(5, dtypes.uint8, 4097).copyin(b"hello")
    expected = data.copy()
    expected[4097:4102] = np.frombuffer(b"hello", np.uint8)
    np.testing.assert_array_equal(np.fromfile(path, np.uint8), expected)
    with pytest.raises(ValueError, match="size mismatch"):
        buf.view(5, dtypes.uint8, 4097).copyin(b"hello!")  # one byte too many: refused, nothing written
    np.testing.assert_array_equal(np.fromfile(path, np.uint8), expected)


def test_as_buffer_is_zero_copy_over_the_file(make_file, disk_buffer):
    path, data = make_file(8192)
    view = disk_buffer(path, 8192).view(16, dtypes.uint8, 4097)
    host = view.as_buffer(force_zero_copy=True)
    assert bytes(host) == data[4097:4113].tobytes()
    host[:4] = b"ABCD"  # written through the shared mapping: the file sees it
    with open(path, "rb") as f:
        f.seek(4097)
        assert f.read(4) == b"ABCD"
    assert bytes(view.as_buffer()[:4]) == b"ABCD"


def test_files_past_4_gib_and_offsets_past_2_32(tmp_path, disk_buffer):
    path = tmp_path / "sparse.bin"
    size, at = (5 << 30) + 123, (1 << 32) + 4097
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no disk space used
        f.seek(at)
        f.write(b"far away")
    buf = disk_buffer(path, size)
    view = buf.view(8, dtypes.uint8, at)
    assert bytes(view.numpy()) == b"far away"
    view.copyin(b"FAR AWAY")
    tail = buf.view(123, dtypes.uint8, 5 << 30)
    assert not tail.numpy().any()
    with open(path, "rb") as f:
        f.seek(at)
        assert f.read(8) == b"FAR AWAY"
    big = buf.view(3 << 20, dtypes.uint8, at - (1 << 20))  # a streamed copy across the 2^32 boundary region
    got = big.numpy()
    assert bytes(got[1 << 20:(1 << 20) + 8]) == b"FAR AWAY" and got.sum() == sum(b"FAR AWAY")
    assert os.path.getsize(path) == size


def test_views_past_the_end_or_at_negative_offsets_are_refused(make_file, disk_buffer):
    path, _ = make_file(4096)
    buf = disk_buffer(path, 4096)
    with pytest.raises(ValueError, match="does not fit"):
        buf.view(2, dtypes.uint8, 4095)
    with pytest.raises(ValueError, match="offset must be an int >= 0"):
        buf.view(2, dtypes.uint8, -1)
    with pytest.raises(ValueError, match="does not fit"):
        buf.view(1000, dtypes.uint8, 100).view(1, dtypes.uint32, 998)


@pytest.mark.parametrize("shape, strides", [((4, 3), (4, 16)), ((4, 3), (24, 4)), ((6,), (-4,)), ((2, 3), (12, 8))])
def test_strided_or_permuted_layouts_are_not_one_byte_range(shape, strides):
    with pytest.raises(ValueError, match="not one C-ordered byte range|bad layout"):
        c_contiguous_nbytes(shape, strides, 4)


def test_c_ordered_layouts_give_their_byte_count():
    arr = np.zeros((3, 1, 5), np.float32)
    assert c_contiguous_nbytes(arr.shape, arr.strides, 4) == arr.nbytes
    assert c_contiguous_nbytes((3, 1, 5), (20, 999, 4), 4) == 60  # a length-1 dimension's stride does not matter
