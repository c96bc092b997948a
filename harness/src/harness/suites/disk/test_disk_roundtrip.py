"""Round trips through DISK views into every selected device, on both read paths, from a cold page cache where the
file system allows dropping it; and the io_uring requirement of the io_uring CI image."""

from __future__ import annotations

import numpy as np
import pytest

from harness.config import REQUIRE_IO_URING
from harness.suites.disk.conftest import REQUIRE_ENV, io_uring_status
from runtime_backends.disk.device import STREAM_MIN
from runtime_core import Buffer, dtypes

# (view bytes, view offset): below and above the streamed-copy threshold, at odd offsets, across chunk boundaries
CASES = [(4097, 1), (STREAM_MIN + 4097, 4097), (5 * STREAM_MIN + 3, 2 * STREAM_MIN - 1)]


@pytest.mark.parametrize("nbytes, offset", CASES)
def test_disk_view_to_device_and_back(device, read_path, disk_files, nbytes, offset):
    disk, data = disk_files(nbytes + offset + 4096)
    view = disk.view(nbytes, dtypes.uint8, offset)
    disk.dev.drop_page_cache()
    on_device = Buffer(device, nbytes, dtypes.uint8).allocate().copy_from(view)
    np.testing.assert_array_equal(on_device.numpy(), data[offset:offset + nbytes])
    if nbytes >= STREAM_MIN:
        assert disk.dev.read_path in (read_path, "page_cache")  # "page_cache": this file system keeps it cached
    back = disk.view(nbytes, dtypes.uint8, offset + 7)  # written back 7 bytes further on
    back.copy_from(on_device)
    expected = data.copy()
    expected[back.offset:back.offset + nbytes] = data[offset:offset + nbytes]
    np.testing.assert_array_equal(disk.numpy(), expected)


def test_both_read_paths_give_identical_bytes(device, disk_files, monkeypatch):
    disk, data = disk_files(3 * STREAM_MIN + 12345)
    view = disk.view(3 * STREAM_MIN, dtypes.uint8, 12345)
    results = {}
    for path, flag in (("io_uring", "1"), ("preadv", "0")):
        monkeypatch.setenv("DISK_IO_URING", flag)
        disk.dev.drop_page_cache()
        results[path] = Buffer(device, view.size, dtypes.uint8).allocate().copy_from(view).numpy()
    assert results["io_uring"].tobytes() == results["preadv"].tobytes() == data[12345:12345 + 3 * STREAM_MIN].tobytes()


def test_io_uring_runs_where_it_is_required(disk_files):
    """With REQUIRE_IO_URING=1 (the io_uring CI image) a cold streamed copy must have gone through io_uring; else
    either it did or the fallback ran and says why."""
    disk, data = disk_files(4 * STREAM_MIN)
    disk.dev.drop_page_cache()
    cold = disk.dev.page_cache_residency(0, disk.nbytes) < 0.5
    out = np.empty(disk.nbytes, np.uint8)
    disk.copyout(out)
    np.testing.assert_array_equal(out, data)
    dev = disk.dev
    if REQUIRE_IO_URING.get():
        ok, why = io_uring_status()
        assert ok, f"{REQUIRE_ENV}=1 but io_uring cannot be set up: {why}"
        assert cold, f"{REQUIRE_ENV}=1 but the page cache of {dev.file.target} cannot be dropped here (tmpfs?): " \
                     f"point TMPDIR at a disk-backed directory"
        assert dev.read_path == "io_uring" and dev.bytes_by_path["io_uring"] == disk.nbytes
    elif cold:
        assert (dev.read_path, dev.io_uring_error) == ("io_uring", None) or \
               (dev.read_path == "preadv" and dev.io_uring_error), (dev.read_path, dev.io_uring_error)
