"""DISK devices: names, the shared refcounted file and mapping, when files are created or grown, and bad input."""

from __future__ import annotations

import errno
import os
import stat
import uuid

import numpy as np
import pytest

from runtime_backends.disk.device import DiskDevice
from runtime_core import Buffer, BufferSpec, Device, DeviceError, dtypes


def _open_fds(path: str) -> int:
    """Descriptors of this process open on ``path``."""
    target = os.path.realpath(path)
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:
            pass
    return count


def _mappings(path: str) -> int:
    """Mappings of ``path`` in this process."""
    target = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        return sum(line.rstrip().endswith(target) for line in f)


@pytest.fixture
def shm_name():
    name = f"rtk-test-{uuid.uuid4().hex[:12]}"
    yield name
    try:
        import _posixshmem
        _posixshmem.shm_unlink(f"/{name}")
    except FileNotFoundError:
        pass


def test_names_keep_paths_verbatim_and_shm_leading_slash_is_the_same_segment():
    assert Device.canonicalize("disk:/tmp/Some//Path") == "DISK:/tmp/Some//Path"
    assert Device.canonicalize("DISK:relative/file.bin") == "DISK:relative/file.bin"
    assert Device.canonicalize("disk:shm:/weights") == "DISK:shm:weights"
    assert Device.canonicalize("DISK:shm:weights") == "DISK:shm:weights"


@pytest.mark.parametrize("name, match", [("DISK", "names no file"), ("DISK:shm:", "bad shm name"),
                                          ("DISK:shm:a/b", "bad shm name"), ("DISK:shm:" + "x" * 300, "bad shm name"),
                                          ("DISK:shm:..", "bad shm name"), ("DISK:shm:.", "bad shm name"),
                                          ("DISK:/tmp/a\0b", "NUL")])
def test_bad_names_fail_to_open_with_the_reason(name, match):
    with pytest.raises(DeviceError, match=match):
        Device[name]


def test_disk_is_never_the_default_device():
    assert DiskDevice.DEFAULT_PRIORITY is None
    assert Device.DEFAULT != "DISK"


def test_buffers_share_one_file_and_mapping_and_the_last_free_closes_it(make_file, disk_buffer):
    path, data = make_file(64 << 10)
    a = disk_buffer(path, 16 << 10)
    fd = a.dev.file.fd
    b = disk_buffer(path, 64 << 10)  # larger: mapped again larger, the file is not opened again
    assert a.dev is b.dev and b.dev.file.fd == fd
    assert a.dev.file.mapped == 64 << 10 and _mappings(path) == 1  # the smaller mapping is gone
    assert _open_fds(path) <= 2  # ours, and the duplicate Python's mmap keeps of the same open file
    np.testing.assert_array_equal(a.numpy(), data[:16 << 10])
    np.testing.assert_array_equal(b.numpy(), data)
    a.deallocate()
    assert _mappings(path) == 1 and a.dev.file.fd == fd
    b.deallocate()
    assert _open_fds(path) == 0 and _mappings(path) == 0


def test_reads_never_create_a_missing_file(tmp_path, disk_buffer):
    path = tmp_path / "missing.bin"
    buf = disk_buffer(path, 4096)
    with pytest.raises(FileNotFoundError, match="does not exist.*reads never create"):
        buf.numpy()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        buf.as_buffer()
    assert not path.exists()


def test_reads_never_grow_a_short_file(make_file, disk_buffer):
    path, data = make_file(1000)
    buf = disk_buffer(path, 4096)
    np.testing.assert_array_equal(buf.view(1000, dtypes.uint8, 0).numpy(), data)  # the bytes it has read fine
    with pytest.raises(ValueError, match="holds 1000 bytes.*past its end"):
        buf.numpy()
    with pytest.raises(ValueError, match="past its end"):
        Buffer("CPU" if "CPU" in Device.backends() else "PYTHON", 4096, dtypes.uint8).allocate().copy_from(buf)
    assert os.path.getsize(path) == 1000


def test_a_write_creates_a_missing_file_sized_to_the_allocation(tmp_path, disk_buffer):
    path = tmp_path / "new.bin"
    buf = disk_buffer(path, 8192)
    buf.view(4, dtypes.uint8, 4097).copyin(b"abcd")
    assert os.path.getsize(path) == 8192
    raw = path.read_bytes()
    assert raw[4097:4101] == b"abcd" and raw.count(0) == 8192 - 4
    np.testing.assert_array_equal(buf.numpy()[4097:4101], np.frombuffer(b"abcd", np.uint8))


def test_a_write_grows_a_short_file_keeping_its_bytes(make_file, disk_buffer):
    path, data = make_file(100)
    buf = disk_buffer(path, 4096)
    buf.view(2, dtypes.uint8, 4000).copyin(b"zz")
    raw = open(path, "rb").read()
    assert len(raw) == 4096 and raw[:100] == data.tobytes() and raw[4000:4002] == b"zz"


def test_copyin_to_a_read_only_file_fails_and_leaves_it_unchanged(make_file, disk_buffer):
    path, data = make_file(4096)
    os.chmod(path, stat.S_IRUSR | stat.S_IRGRP)  # no write bit: read-only even for root
    buf = disk_buffer(path, 4096)
    with pytest.raises(PermissionError, match="read-only"):
        buf.copyin(np.zeros(4096, np.uint8))
    with pytest.raises(PermissionError, match="read-only"):
        disk_buffer(path + "", 8192).copyin(np.zeros(8192, np.uint8))  # a grow of a read-only file as well
    assert buf.as_buffer().readonly
    assert open(path, "rb").read() == data.tobytes()


def test_a_directory_fails_at_allocate_and_the_device_is_usable_after(tmp_path, rng):
    path = tmp_path / "thing"
    path.mkdir()
    with Device.restoring():
        buf = Buffer(f"DISK:{path}", 16, dtypes.uint8)
        with pytest.raises(IsADirectoryError, match="is a directory"):
            buf.allocate()
        assert buf.dev.file.fd == -1
        path.rmdir()
        payload = rng.bytes(16)
        path.write_bytes(payload)
        assert bytes(buf.allocate().numpy()) == payload
        buf.deallocate()


def test_shm_segment_is_created_with_the_requested_size_and_shared_by_both_spellings(shm_name, disk_buffer):
    a = disk_buffer(f"DISK:shm:{shm_name}", 10000)
    assert os.path.getsize(f"/dev/shm/{shm_name}") == 10000
    a.copyin(np.arange(10000, dtype=np.uint16).astype(np.uint8))
    b = disk_buffer(f"DISK:shm:/{shm_name}", 10000)
    assert b.dev is a.dev
    np.testing.assert_array_equal(b.numpy(), np.arange(10000, dtype=np.uint16).astype(np.uint8))
    larger = disk_buffer(f"DISK:shm:{shm_name}", 20000)  # a larger allocation grows the segment
    assert os.path.getsize(f"/dev/shm/{shm_name}") == 20000
    np.testing.assert_array_equal(larger.numpy()[:10000], b.numpy())


def test_external_pointers_and_double_frees_are_refused(make_file, disk_buffer):
    path, _ = make_file(4096)
    dev = disk_buffer(path, 4096).dev
    with pytest.raises(ValueError, match="external_ptr"):
        dev.allocator.alloc(4096, BufferSpec(external_ptr=4096))
    handle = dev.allocator.alloc(4096)
    dev.allocator.free(handle, 4096)
    with pytest.raises(ValueError, match="double free"):
        dev.allocator.free(handle, 4096)


@pytest.mark.parametrize("existing", [False, True], ids=["new_file", "short_file"])
def test_a_failed_grow_leaves_the_file_as_it_was(tmp_path, disk_buffer, monkeypatch, existing):
    path = tmp_path / "full.bin"
    if existing:
        path.write_bytes(b"keep")
    buf = disk_buffer(path, 1 << 20)

    def disk_full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", disk_full)
    with pytest.raises(OSError, match="(cannot grow it|cannot reserve bytes) .* No space left on device; (the file was "
                                      "left as it was|nothing was written)") as raised:
        buf.copyin(np.ones(1 << 20, np.uint8))
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == b"keep" if existing else not path.exists()
    monkeypatch.undo()
    buf.copyin(np.ones(1 << 20, np.uint8))  # the device is usable once there is space
    assert os.path.getsize(path) == 1 << 20


@pytest.mark.parametrize("existing", [False, True], ids=["new_segment", "short_segment"])
def test_a_failed_shm_grow_removes_only_a_segment_it_created(shm_name, disk_buffer, monkeypatch, existing):
    if existing:
        disk_buffer(f"DISK:shm:{shm_name}", 100).deallocate()

    def no_memory(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", no_memory)
    with pytest.raises(OSError, match="cannot grow it from .* to 4096 bytes"):
        disk_buffer(f"DISK:shm:{shm_name}", 4096)
    segment = f"/dev/shm/{shm_name}"
    assert os.path.getsize(segment) == 100 if existing else not os.path.exists(segment)
    monkeypatch.undo()
    assert disk_buffer(f"DISK:shm:{shm_name}", 4096).dev.file.size() == 4096  # usable again


@pytest.mark.parametrize("offset, size", [(-4096, 4096), (0, 0), (4096, -1)])
def test_page_cache_residency_refuses_negative_offsets_and_empty_ranges(make_file, disk_buffer, offset, size):
    path, _ = make_file(16384)
    dev = disk_buffer(path, 16384).dev
    with pytest.raises(ValueError, match="page_cache_residency: (offset|size) must be an int"):
        dev.page_cache_residency(offset, size)


def test_a_file_mmap_refuses_fails_naming_the_file(disk_buffer):
    sysfs = "/sys/kernel/mm/transparent_hugepage/enabled"
    if not os.path.isfile(sysfs):
        pytest.skip(f"{sysfs} (a regular file mmap refuses) is not present here")
    with pytest.raises(OSError, match="cannot map its first 16 bytes.*pseudo-files"):
        disk_buffer(sysfs, 16)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "dev_null"])
def test_what_is_not_a_regular_file_is_refused_at_allocate_naming_it(tmp_path, kind):
    """A FIFO would block an open and a device has no size to map: both are refused before anything is opened, for
    reads and writes alike (allocation opens the file)."""
    path = {"fifo": str(tmp_path / "fifo"), "dev_zero": "/dev/zero", "dev_null": "/dev/null"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    with Device.restoring():
        buf = Buffer(f"DISK:{path}", 16, dtypes.uint8)
        with pytest.raises(ValueError, match=f"{path}' is not a regular file"):
            buf.allocate()
        assert buf.dev.file.fd == -1
