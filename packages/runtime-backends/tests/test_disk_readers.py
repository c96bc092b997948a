"""Streamed DISK copies: io_uring and the preadv fallback give the same bytes; O_DIRECT edges, short reads,
out-of-order completions, I/O errors mid-read, setup failures, staged and asynchronous destinations, threads."""

from __future__ import annotations

import errno
import functools
import logging
import mmap
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from runtime_backends.disk import device as disk_device
from runtime_backends.disk import readers
from runtime_backends.disk.device import STREAM_MIN
from runtime_backends.disk.files import DiskFile
from runtime_backends.disk.readers import (
    HUGE_PAGE,
    FileFds,
    Job,
    PreadReader,
    StagingPool,
    address,
    plan,
    read_cached,
    read_cached_prefix,
)
from runtime_backends.disk.uring import Ring, setup_error_reason
from runtime_core import Allocator, Buffer, Compiled, Device, dtypes
from runtime_core.sink import CopySink, HostSink

HOST = "PYTHON"
SIZE = 5 * (1 << 20) + 3  # several chunks, an odd length
OFFSET = 4097

Completions = list[tuple[int, int]]


class ScriptedRing:
    """A real ring whose completions pass through ``alter`` (to fake short reads, errors, reordering)."""

    def __init__(self, entries: int, alter: Callable[[Completions], Completions]) -> None:
        self.ring, self.alter = Ring(entries), alter
        self.entries, self.queued, self.completed = self.ring.entries, 0, 0

    def queue_readv(self, fd, iov, offset, user_data):
        self.queued += 1
        self.ring.queue_readv(fd, iov, offset, user_data)

    def submit(self, wait_nr):
        self.ring.submit(wait_nr)

    def completions(self):
        out = self.alter(self.ring.completions())
        self.completed += len(out)
        return out

    def close(self):
        self.ring.close()


@pytest.fixture(autouse=True)
def _default_paths(monkeypatch):
    """Each test starts from the default read paths, whatever the session's environment forces."""
    monkeypatch.delenv("DISK_IO_URING", raising=False)
    monkeypatch.delenv("DISK_O_DIRECT", raising=False)


@pytest.fixture(params=["1", "0"], ids=["o_direct", "buffered"])
def cold(monkeypatch, request):
    """No page counts as cached: every chunk goes to the reader, whatever the file system; cold chunks are read through
    io_uring (``DISK_IO_URING=1``) with O_DIRECT (where the file system takes it), then buffered (``DISK_O_DIRECT``)."""
    monkeypatch.setenv("DISK_O_DIRECT", request.param)
    monkeypatch.setenv("DISK_IO_URING", "1")
    monkeypatch.setattr(disk_device, "read_cached", lambda fds, dest, pos, helper, piece: ([(0, dest.nbytes)], 0))
    monkeypatch.setattr(DiskFile, "resident", lambda self, start, end: np.zeros(-(-end // 4096) - start // 4096, bool))


@pytest.fixture
def scripted(monkeypatch, needs_io_uring):
    """``scripted(alter)``: the next DISK devices set up their ring as a :class:`ScriptedRing` with ``alter``."""
    made: list[ScriptedRing] = []

    def install(alter: Callable[[Completions], Completions]) -> list[ScriptedRing]:
        monkeypatch.setattr(disk_device, "Ring", lambda entries: made.append(ScriptedRing(entries, alter)) or made[-1])
        return made
    return install


@pytest.fixture
def view_of(make_file, disk_buffer):
    """``view_of()``: (a DISK view of SIZE bytes at OFFSET of a fresh random file, the bytes it must read)."""
    def make(name: str = "data.bin") -> tuple[Buffer, np.ndarray]:
        path, data = make_file(SIZE + 2 * OFFSET, name)
        return disk_buffer(path, data.size).view(SIZE, dtypes.uint8, OFFSET), data[OFFSET:OFFSET + SIZE]
    return make


def _to_host(view: Buffer) -> np.ndarray:
    dest = Buffer(HOST, view.nbytes, dtypes.uint8).allocate()
    dest.copy_from(view)
    return dest.numpy()


@pytest.mark.usefixtures("cold", "needs_io_uring")
@pytest.mark.parametrize("direct", ["1", "0"], ids=["o_direct", "buffered"])
def test_io_uring_and_the_fallback_read_the_same_bytes(view_of, monkeypatch, direct):
    monkeypatch.setenv("DISK_O_DIRECT", direct)
    view, expected = view_of()
    dev = view.dev
    got = _to_host(view)
    assert dev.read_path == "io_uring" and dev.io_uring_error is None
    monkeypatch.setenv("DISK_IO_URING", "0")
    again = _to_host(view)
    assert dev.read_path == "preadv" and "DISK_IO_URING=0" in dev.io_uring_error
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(again, expected)
    assert dev.bytes_by_path["io_uring"] == dev.bytes_by_path["preadv"] == SIZE
    monkeypatch.setenv("DISK_IO_URING", "1")
    np.testing.assert_array_equal(_to_host(view), expected)
    assert dev.read_path == "io_uring" and dev.io_uring_error is None  # back on the ring once not forced off


def test_the_plan_cuts_at_chunk_multiples_and_merges_cached_runs():
    chunk, page = 1 << 20, 4096
    resident = np.ones((10 << 20) // page + 1, bool)
    resident[(3 << 20) // page] = False  # one page of the fourth chunk is not cached
    p = plan(100, 10 << 20, chunk, resident, merge=2 << 20)
    assert p.reads == [Job(3 << 20, chunk, (3 << 20) - 100)]
    assert [(j.pos, j.length) for j in p.cached] == [(100, (2 << 20)), ((2 << 20) + 100, chunk - 100),
                                                     (4 << 20, 2 << 20), (6 << 20, 2 << 20), (8 << 20, 2 << 20),
                                                     (10 << 20, 100)]
    assert all(j.cached for j in p.cached) and sum(j.length for j in p.reads + p.cached) == 10 << 20
    whole = plan(100, 10 << 20, chunk, np.ones_like(resident))
    assert whole.reads == [] and whole.cached == [Job(100, 10 << 20, 0, True)]  # all cached: one read
    staged = plan(100, 10 << 20, chunk, np.ones_like(resident), merge=None)  # each job fits a staging buffer
    assert max(j.length for j in staged.cached) == chunk and sum(j.length for j in staged.cached) == 10 << 20
    with pytest.raises(ValueError, match="multiple of the page size"):
        plan(0, 10, 1000, resident)


def test_cached_chunks_are_read_from_the_page_cache_in_one_read(view_of):
    view, expected = view_of()  # just written: in the page cache on every file system
    np.testing.assert_array_equal(_to_host(view), expected)
    stats = view.dev.last_stats
    assert view.dev.read_path == "page_cache" and stats.requests == 1 and stats.cached_bytes == SIZE


def test_copies_below_the_stream_threshold_are_one_preadv(make_file, disk_buffer, cold):
    path, data = make_file(STREAM_MIN - 1)
    buf = disk_buffer(path, data.size)
    np.testing.assert_array_equal(_to_host(buf), data)
    assert buf.dev.read_path == "preadv" and buf.dev.last_stats.requests == 1


@pytest.mark.usefixtures("needs_io_uring")
def test_partly_cached_files_read_the_rest(view_of, monkeypatch):
    monkeypatch.setenv("DISK_O_DIRECT", "1")  # residency is looked up for O_DIRECT reads
    def every_other_chunk(self, start, end):
        pages = np.arange(start // 4096, -(-end // 4096))
        return (pages // 512) % 2 == 0  # 2 MiB chunks alternate cached / not cached
    monkeypatch.setattr(DiskFile, "resident", every_other_chunk)
    monkeypatch.setattr(disk_device, "read_cached", lambda fds, dest, pos, helper, piece: ([(0, dest.nbytes)], 0))
    view, expected = view_of()
    np.testing.assert_array_equal(_to_host(view), expected)
    stats = view.dev.last_stats
    assert view.dev.read_path == "io_uring" and 0 < stats.direct_bytes + stats.buffered_bytes < SIZE
    assert stats.buffered_bytes + stats.cached_bytes == SIZE or stats.direct_bytes >= SIZE - stats.cached_bytes


@pytest.mark.usefixtures("needs_io_uring")
def test_a_cold_read_uses_o_direct_with_widened_edges(view_of, monkeypatch):
    monkeypatch.setenv("DISK_O_DIRECT", "1")
    view, expected = view_of()
    dev = view.dev
    dev.drop_page_cache()
    resident = dev.page_cache_residency(OFFSET, SIZE)
    if resident > 0.5:
        pytest.skip(f"this file system keeps {dev.file.target} in memory (tmpfs?): no cold read possible")
    np.testing.assert_array_equal(_to_host(view), expected)
    if dev._direct_fd < 0:
        pytest.skip("this file system refuses O_DIRECT: the cold read was buffered")
    if dev.read_path == "page_cache":
        pytest.skip("the machine kept the file's pages cached after the drop: there was nothing cold to read")
    assert dev.read_path == "io_uring"
    # every page the copy found cold went through O_DIRECT in whole aligned blocks (the unaligned head and tail were
    # widened), none buffered; pages found cached (a busy machine may not have written them back, so could not drop
    # them, or cached them again meanwhile) were read from the page cache
    stats = dev.last_stats
    assert stats.direct_bytes > 0 and stats.buffered_bytes == 0
    assert stats.direct_bytes + stats.cached_bytes >= SIZE


@pytest.mark.usefixtures("cold")
@pytest.mark.parametrize("cut", [lambda res: max(4096, res // 2 // 4096 * 4096), lambda res: res - 1],
                         ids=["aligned", "unaligned"])
def test_short_reads_are_continued(view_of, scripted, cut):
    made = scripted(lambda done: [(uid, cut(res) if res > 4096 else res) for uid, res in done])
    view, expected = view_of()
    np.testing.assert_array_equal(_to_host(view), expected)
    assert made and view.dev.last_stats.short_reads > 0


@pytest.mark.usefixtures("cold")
def test_completions_are_matched_by_user_data_in_any_order(view_of, scripted):
    held: Completions = []

    def reorder(done: Completions) -> Completions:
        held.extend(done)
        if len(held) < 3 and done:
            return []  # hold a few back: later requests complete first
        out = held[::-1]
        held.clear()
        return out
    made = scripted(reorder)
    view, expected = view_of()
    np.testing.assert_array_equal(_to_host(view), expected)
    assert made[0].queued == made[0].completed


@pytest.mark.usefixtures("cold")
def test_an_io_error_mid_read_is_raised_after_the_reads_in_flight_and_the_device_stays_usable(view_of, scripted):
    seen = []

    def fail_third(done: Completions) -> Completions:
        out = []
        for uid, res in done:
            seen.append(uid)
            out.append((uid, -errno.EIO if len(seen) == 3 else res))
        return out
    made = scripted(fail_third)
    view, expected = view_of()
    with pytest.raises(OSError, match="at byte offset .* failed: Input/output error") as info:
        _to_host(view)
    assert info.value.errno == errno.EIO
    assert made[0].queued == made[0].completed  # nothing left in flight writing into our memory
    np.testing.assert_array_equal(_to_host(view), expected)  # the same device and ring read it fine afterwards


@pytest.mark.usefixtures("cold")
def test_a_file_that_ends_early_is_an_error(view_of, scripted):
    scripted(lambda done: [(uid, 0) for uid, _ in done])
    view, _ = view_of()
    with pytest.raises(OSError, match=r"data.bin. ended at byte \d+: a read there came back \d+ bytes short .*truncated"):
        _to_host(view)


@pytest.mark.usefixtures("cold")
def test_o_direct_refused_with_einval_moves_to_buffered_reads(view_of, scripted, caplog, monkeypatch):
    monkeypatch.setenv("DISK_O_DIRECT", "1")
    refused = []

    def refuse_first(done: Completions) -> Completions:
        out = []
        for uid, res in done:
            out.append((uid, -errno.EINVAL if not refused else res))
            refused.append(uid)
        return out
    scripted(refuse_first)
    disk_device._log_once.cache_clear()
    view, expected = view_of()
    with caplog.at_level(logging.WARNING, logger=disk_device.__name__):
        np.testing.assert_array_equal(_to_host(view), expected)
    if view.dev.last_stats.direct_bytes == 0 and not view.dev.last_stats.direct_refused:
        pytest.skip("this file system refuses O_DIRECT at open: there was no O_DIRECT read to refuse")
    assert view.dev.last_stats.direct_refused and "O_DIRECT reads were refused" in caplog.text
    np.testing.assert_array_equal(_to_host(view), expected)
    assert view.dev.last_stats.direct_bytes == 0  # no more O_DIRECT on that file


def _fallback_with(monkeypatch, read_fn) -> None:
    monkeypatch.setenv("DISK_IO_URING", "0")
    monkeypatch.setattr(disk_device, "PreadReader", functools.partial(PreadReader, read_fn=read_fn))


@pytest.mark.usefixtures("cold")
def test_the_fallback_continues_short_reads(view_of, monkeypatch):
    _fallback_with(monkeypatch, lambda fd, bufs, pos: os.preadv(fd, [bufs[0][:1000]], pos))
    view, expected = view_of()
    np.testing.assert_array_equal(_to_host(view), expected)
    assert view.dev.read_path == "preadv" and view.dev.last_stats.short_reads > 0


@pytest.mark.usefixtures("cold")
def test_the_fallback_reports_an_io_error_mid_read(view_of, monkeypatch):
    calls = []

    def fail_second(fd, bufs, pos):
        calls.append(pos)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        return os.preadv(fd, bufs, pos)
    _fallback_with(monkeypatch, fail_second)
    view, expected = view_of()
    with pytest.raises(OSError, match="at byte offset [0-9]+ failed: Input/output error") as info:
        _to_host(view)
    assert info.value.errno == errno.EIO and f"offset {calls[1]} " in str(info.value)
    np.testing.assert_array_equal(_to_host(view), expected)  # only the second call failed


@pytest.mark.usefixtures("cold")
@pytest.mark.parametrize("err", [errno.EPERM, errno.ENOSYS, errno.ENOMEM])
def test_setup_failures_fall_back_to_preadv_and_are_logged_once(view_of, monkeypatch, caplog, err):
    def refuse(entries):
        raise OSError(err, f"io_uring_setup failed: {setup_error_reason(err)}")
    monkeypatch.setattr(disk_device, "Ring", refuse)
    disk_device._log_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger=disk_device.__name__):
        for name in ("a.bin", "b.bin"):
            view, expected = view_of(name)
            np.testing.assert_array_equal(_to_host(view), expected)
            assert view.dev.read_path == "preadv" and errno.errorcode[err] in view.dev.io_uring_error
    assert caplog.text.count("io_uring unavailable") == 1


def test_setup_error_reasons_name_the_cause(monkeypatch):
    from runtime_backends.disk import uring
    monkeypatch.setattr(uring, "_read_sysctl", lambda: "2")
    assert "kernel.io_uring_disabled=2" in setup_error_reason(errno.EPERM)
    monkeypatch.setattr(uring, "_read_sysctl", lambda: "0")
    assert "seccomp" in setup_error_reason(errno.EPERM)
    assert "memlock" in setup_error_reason(errno.ENOMEM) and "Linux 5.1" in setup_error_reason(errno.ENOSYS)


def _io_uring_fds() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += "io_uring" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return count


@pytest.mark.usefixtures("cold", "needs_io_uring")
def test_the_ring_belongs_to_the_device_and_finalize_closes_it(view_of):
    before = _io_uring_fds()
    view, expected = view_of()
    other, _ = view_of("other.bin")
    _to_host(view)
    _to_host(other)
    assert view.dev is not other.dev and _io_uring_fds() == before + 2
    view.dev.finalize()
    assert _io_uring_fds() == before + 1
    np.testing.assert_array_equal(_to_host(view), expected)  # a finalized device sets up a new ring when used again


@pytest.mark.usefixtures("cold")
def test_threads_can_share_a_device(view_of):
    view, expected = view_of()
    errors, results = [], {}

    def work(i: int) -> None:
        try:
            part = view.view(SIZE - i * 4099, dtypes.uint8, i * 4099)
            for _ in range(3):
                results[i] = _to_host(part)
        except Exception as e:  # reported below: an assertion in a thread would be lost
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, got in results.items():
        np.testing.assert_array_equal(got, expected[i * 4099:])


class DeferredSink(CopySink):
    """Like a GPU's pinned staging: deliveries are queued and copied only at wait_slot/finish, so a reader that wrote
    into a staging buffer before waiting for it would corrupt the result."""

    def __init__(self, dest: np.ndarray, slots: int, slot_bytes: int) -> None:
        self.dest, self.pending = dest, []
        self._mem = [np.zeros(slot_bytes, np.uint8) for _ in range(slots)]
        self.slots = [memoryview(m) for m in self._mem]
        self.waited = 0

    def staging(self):
        return self.slots

    def deliver(self, data, offset, slot):
        self.pending.append((data, offset, slot))

    def _run(self, keep: Callable[[int | None], bool]) -> None:
        for data, offset, _ in [p for p in self.pending if not keep(p[2])]:
            self.dest[offset:offset + data.nbytes] = np.frombuffer(data, np.uint8)
        self.pending = [p for p in self.pending if keep(p[2])]

    def wait_slot(self, slot):
        self.waited += 1
        self._run(lambda s: s != slot)

    def finish(self):
        self._run(lambda s: False)


class _DeviceMemory(Allocator):
    """Device memory without a host view: numpy bytes reached only through _copyin/_copyout/_offset."""

    def _alloc(self, size, spec):
        return (np.zeros(size, np.uint8), 0, size)

    def _free(self, opaque, size, spec):
        pass

    def _copyin(self, dest, src):
        arr, off, n = dest
        arr[off:off + src.nbytes] = np.frombuffer(src, np.uint8)

    def _copyout(self, dest, src):
        arr, off, n = src
        np.frombuffer(dest, np.uint8)[:] = arr[off:off + n]

    def _offset(self, opaque, size, offset):
        return (opaque[0], opaque[1] + offset, size)


class _AsyncMemory(_DeviceMemory):
    def _sink(self, dest, size):
        arr, off, _ = dest
        return DeferredSink(arr[off:off + size], slots=3, slot_bytes=1 << 20)


class _Gpu(Compiled):
    def __init__(self, device):
        super().__init__(device, (_AsyncMemory if device == "GPU:1" else _DeviceMemory)(self), None, None, None)


@pytest.mark.usefixtures("cold")
@pytest.mark.parametrize("gpu", ["GPU", "GPU:1"], ids=["copyin_pieces", "async_pinned"])
@pytest.mark.parametrize("path", ["1", "0"], ids=["io_uring", "preadv"])
def test_devices_without_host_memory_take_staged_pieces(view_of, monkeypatch, request, gpu, path):
    if path == "1":
        request.getfixturevalue("needs_io_uring")
    monkeypatch.setenv("DISK_IO_URING", path)
    Device.register("GPU", _Gpu)  # inside the disk_buffer fixture's Device.restoring()
    view, expected = view_of()
    dest = Buffer(gpu, SIZE, dtypes.uint8).allocate()
    sink = dest.copy_sink()
    assert sink.host is None
    dest.copy_from(view)
    np.testing.assert_array_equal(dest.numpy(), expected)
    assert view.dev.read_path == ("io_uring" if path == "1" else "preadv")


@pytest.mark.parametrize(("count", "size"), [(8, 2 << 20), (2, 1 << 20), (3, 5000), (1, 0), (0, 4096)])
def test_staging_buffers_start_on_huge_pages_and_hold_their_size(count: int, size: int) -> None:
    pool = StagingPool(count, size)
    try:
        assert [v.nbytes for v in pool.views] == [size] * count
        assert all(address(v) % HUGE_PAGE == 0 for v in pool.views if v.nbytes)
        for i, view in enumerate(pool.views):  # writable and apart: no buffer overlaps the next
            view[:] = bytes([i + 1]) * size
        assert all(bytes(v) == bytes([i + 1]) * size for i, v in enumerate(pool.views))
    finally:
        pool.close()
    pool.close()  # idempotent


def test_a_negative_staging_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="count and a size >= 0, got -1 buffers of 4096 bytes"):
        StagingPool(-1, 4096)


def test_the_cached_prefix_read_stops_at_the_first_page_not_cached(make_file):
    path, data = make_file(8 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 4 << 20, 0, os.POSIX_FADV_DONTNEED)  # the second half leaves the page cache
        dest = bytearray(data.size)
        done, calls = read_cached_prefix(FileFds(fd, name=path), memoryview(dest), 0)
    finally:
        os.close(fd)
    if done == data.size:
        pytest.skip("this file system keeps every page cached (tmpfs?): nothing to stop at")
    assert 0 < done <= 4 << 20 and calls >= 1
    assert bytes(dest[:done]) == data[:done].tobytes() and not any(dest[done:])


def _page_cache_holding(data: np.ndarray, cold: tuple[int, int]):
    """A stand-in for ``read_cached_prefix`` over ``data`` whose page cache holds everything but bytes ``cold``."""
    def read(fds: FileFds, dest: memoryview, pos: int) -> tuple[int, int]:
        end = pos + dest.nbytes
        done = dest.nbytes if end <= cold[0] or pos >= cold[1] else max(0, cold[0] - pos)
        dest[:done] = data[pos:pos + done].tobytes()
        return done, 1
    return read


def _check_gaps(dest: bytearray, data: np.ndarray, gaps: list[tuple[int, int]]) -> None:
    """``gaps`` are sorted, apart and inside ``dest``; every byte outside them is the file's."""
    read = np.ones(len(dest), bool)
    for (at, n), nxt in zip(gaps, gaps[1:] + [(len(dest) + 1, 0)]):
        assert 0 <= at and n > 0 and at + n < nxt[0]
        read[at:at + n] = False
    np.testing.assert_array_equal(np.frombuffer(dest, np.uint8)[read], data[read])


def test_two_threads_copy_every_piece_of_a_cached_file(make_file):
    path, data = make_file((10 << 20) + 123)  # just written: in the page cache
    fd = os.open(path, os.O_RDONLY)
    dest = bytearray(data.size)
    try:
        with ThreadPoolExecutor(1) as helper:
            gaps, calls = read_cached(FileFds(fd, name=path), memoryview(dest), 0, helper, piece=1 << 20)
    finally:
        os.close(fd)
    assert gaps == [] and calls >= 11  # one call per piece at least
    assert bytes(dest) == data.tobytes()


@pytest.mark.parametrize("cold", [(3 << 20, 4 << 20), (5000, 9000), ((8 << 20) - 1, 8 << 20)])
def test_two_threads_leave_what_the_page_cache_lacks(monkeypatch, cold):
    data = np.random.default_rng(3).integers(0, 256, 8 << 20, dtype=np.uint8)
    monkeypatch.setattr(readers, "read_cached_prefix", _page_cache_holding(data, cold))
    dest = bytearray(data.size)
    with ThreadPoolExecutor(1) as helper:
        gaps, _ = read_cached(FileFds(-1), memoryview(dest), 0, helper, piece=1 << 20)
    _check_gaps(dest, data, gaps)
    assert any(at <= cold[0] and cold[1] <= at + n for at, n in gaps)  # the bytes not cached are left to read


def test_a_file_whose_start_is_not_cached_is_left_whole_to_the_disk(monkeypatch):
    data = np.arange(4 << 20, dtype=np.uint8)
    monkeypatch.setattr(readers, "read_cached_prefix", _page_cache_holding(data, (4096, 8192)))
    dest = bytearray(data.size)
    with ThreadPoolExecutor(1) as helper:
        gaps, calls = read_cached(FileFds(-1), memoryview(dest), 0, helper, piece=1 << 20)
    assert gaps == [(4096, data.size - 4096)] and calls == 1  # no piece after the first was probed
    _check_gaps(dest, data, gaps)


def test_a_failed_piece_stops_both_threads_and_raises(monkeypatch):
    data = np.zeros(8 << 20, np.uint8)
    cached = _page_cache_holding(data, (0, 0))
    seen: list[int] = []

    def read(fds: FileFds, dest: memoryview, pos: int) -> tuple[int, int]:
        seen.append(pos)
        if pos == 2 << 20:
            raise OSError(errno.EIO, f"reading the file at byte offset {pos} failed")
        return cached(fds, dest, pos)
    monkeypatch.setattr(readers, "read_cached_prefix", read)
    with ThreadPoolExecutor(1) as helper, pytest.raises(OSError, match="byte offset 2097152"):
        read_cached(FileFds(-1), memoryview(bytearray(data.size)), 0, helper, piece=1 << 20)
    assert len(seen) < 8  # the pieces after the failure were not read
    with pytest.raises(ValueError, match="positive number of bytes"):
        read_cached(FileFds(-1), memoryview(bytearray(8)), 0, None, piece=0)


def test_large_warm_copies_read_the_page_cache_on_two_threads(make_file, disk_buffer, monkeypatch):
    monkeypatch.setattr(disk_device, "SPLIT_MIN", STREAM_MIN)
    monkeypatch.setattr(disk_device, "PIECE", 1 << 20)
    path, data = make_file((6 << 20) + 5)  # just written: in the page cache
    buf = disk_buffer(path, data.size)
    np.testing.assert_array_equal(_to_host(buf), data)
    stats = buf.dev.last_stats
    assert buf.dev.read_path == "page_cache" and stats.cached_bytes == data.size and stats.requests >= 7
    def helpers() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith(f"DISK {buf.dev.file.target} read")]
    assert len(helpers()) == 1
    buf.dev.finalize()  # the helper thread ends with the device's other resources
    assert helpers() == []


@pytest.mark.usefixtures("needs_io_uring")
def test_aligned_o_direct_reads_go_straight_into_host_memory(make_file, disk_buffer, monkeypatch):
    monkeypatch.setenv("DISK_O_DIRECT", "1")
    monkeypatch.setattr(disk_device, "read_cached", lambda fds, dest, pos, helper, piece: ([(0, dest.nbytes)], 0))
    monkeypatch.setattr(DiskFile, "resident", lambda self, start, end: np.zeros(-(-end // 4096) - start // 4096, bool))
    delivered: list[int] = []
    real = HostSink.deliver
    monkeypatch.setattr(HostSink, "deliver", lambda self, data, at, slot: delivered.append(at) or real(self, data, at, slot))
    path, data = make_file((5 << 20) + 4096)
    buf = disk_buffer(path, data.size)
    with mmap.mmap(-1, data.size) as dest:  # page-aligned host memory
        buf.copyout(memoryview(dest))
        got = np.frombuffer(dest, np.uint8).copy()
    np.testing.assert_array_equal(got, data)
    stats = buf.dev.last_stats
    if stats.direct_bytes == 0:
        pytest.skip(f"this file system refuses O_DIRECT ({buf.dev.read_choice})")
    assert stats.direct_bytes == data.size and delivered == []  # no staging buffer, no copy out of one
