"""Which read each file's uncached bytes get: O_DIRECT on NVMe and virtio disks, buffered elsewhere, and the
overrides."""

from __future__ import annotations

import os

import numpy as np
import pytest

from runtime_backends.disk import device as disk_device
from runtime_backends.disk import readpath
from runtime_backends.disk.device import STREAM_MIN
from runtime_backends.disk.files import DiskFile
from runtime_core import Buffer, dtypes


@pytest.mark.parametrize("sysfs, direct, words", [
    ("/sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1/nvme0n1p2", True, "NVMe drive nvme0n1p2"),
    ("/sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda", True, "virtio disk vda"),
    ("/sys/devices/pci0000:00/0000:00:01.1/ata1/host0/target0:0:0/0:0:0:0/block/sda", False, "block device sda"),
    ("/sys/devices/virtual/block/dm-0", False, "block device dm-0"),
    (None, False, "no block device of its own"),
])
def test_storage_decides_between_o_direct_and_buffered(tmp_path, monkeypatch, sysfs, direct, words):
    def resolve(path, strict=False):
        if sysfs is None:
            raise FileNotFoundError(path)
        return sysfs
    monkeypatch.setattr(readpath.os.path, "realpath", resolve)
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        got, why = readpath.storage_prefers_direct(fd)
    finally:
        os.close(fd)
    assert got is direct and words in why and why.startswith("O_DIRECT" if direct else "buffered")


@pytest.mark.parametrize("storage_direct", [False, True], ids=["buffered_storage", "nvme"])
def test_the_default_reads_buffered_storage_with_preadv_and_nvme_through_io_uring(make_file, disk_buffer, monkeypatch,
                                                                                  storage_direct, request):
    if storage_direct:
        request.getfixturevalue("needs_io_uring")  # skips with the reason where io_uring is refused
    for name in ("DISK_IO_URING", "DISK_O_DIRECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(disk_device, "storage_prefers_direct", lambda fd: (storage_direct, "O_DIRECT: test" if
                                                                           storage_direct else "buffered: test"))
    monkeypatch.setattr(disk_device, "read_cached", lambda fds, dest, pos, helper, piece: ([(0, dest.nbytes)], 0))
    monkeypatch.setattr(DiskFile, "resident", lambda self, start, end: np.zeros(-(-end // 4096) - start // 4096, bool))
    path, data = make_file(3 * STREAM_MIN + 5)
    buf = disk_buffer(path, data.size)
    out = Buffer("PYTHON", data.size, dtypes.uint8).allocate().copy_from(buf).numpy()
    np.testing.assert_array_equal(out, data)
    dev = buf.dev
    assert dev.read_choice == ("O_DIRECT: test" if storage_direct else "buffered: test")
    assert dev.read_path == ("io_uring" if storage_direct else "preadv")
    if not storage_direct:
        assert dev.io_uring_error is None and dev.last_stats.buffered_bytes == data.size
    monkeypatch.setenv("DISK_O_DIRECT", "0" if storage_direct else "1")  # the override wins
    Buffer("PYTHON", data.size, dtypes.uint8).allocate().copy_from(buf)
    assert dev.read_choice == f"{'buffered' if storage_direct else 'O_DIRECT'}: set by DISK_O_DIRECT"


def test_buffered_cold_reads_hint_sequential_readahead(make_file, disk_buffer, monkeypatch):
    for name in ("DISK_IO_URING", "DISK_O_DIRECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(disk_device, "storage_prefers_direct", lambda fd: (False, "buffered: test"))
    monkeypatch.setattr(disk_device, "read_cached", lambda fds, dest, pos, helper, piece: ([(0, dest.nbytes)], 0))
    advice = []
    real = os.posix_fadvise
    monkeypatch.setattr(disk_device.os, "posix_fadvise", lambda fd, off, n, how: advice.append((off, n, how)) or
                        real(fd, off, n, how))
    path, data = make_file(2 * STREAM_MIN)
    buf = disk_buffer(path, data.size)
    np.testing.assert_array_equal(buf.numpy(), data)
    assert (0, data.size, os.POSIX_FADV_SEQUENTIAL) in advice
