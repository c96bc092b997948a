"""DiskDevice: a file or POSIX shared-memory segment as a device (entry point ``runtime_backends.disk.device:DiskDevice``)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from runtime_backends.disk.allocator import DiskAllocator, DiskBuffer
from runtime_backends.disk.files import PAGE, DiskFile, canonical_name, parse_target
from runtime_backends.disk.readers import (
    MERGE,
    PIECE,
    FileFds,
    Plan,
    PreadReader,
    ReadStats,
    StagingPool,
    UringReader,
    plan,
    read_cached,
)
from runtime_backends.disk.readpath import storage_prefers_direct
from runtime_backends.disk.uring import Ring
from runtime_core.config import DISK_IO_URING, DISK_O_DIRECT
from runtime_core.device import Compiled
from runtime_core.sink import CopySink, HostSink

__all__ = ["DiskDevice", "STREAM_MIN", "SPLIT_MIN", "CHUNK", "DEPTH", "RING_ENTRIES"]

log = logging.getLogger(__name__)
STREAM_MIN = 1 << 20
"""Copies out shorter than this (bytes) are one ``preadv`` (no page-cache residency check)."""
SPLIT_MIN = 128 << 20
"""Copies out of at least this many bytes copy what the page cache holds on two threads (where the process may run on
two CPUs): one thread's copy out of the page cache reached 0.70-0.83x a memcpy from a kept mapping at 256 MiB-1 GiB
here, two threads 0.85-0.96x; below 64 MiB one thread already matched the memcpy."""
CHUNK = 2 << 20
"""Bytes per staging buffer, and per read request."""
DEPTH = 32
"""Staging buffers, and read requests in flight at most (reading 1 GiB cold with O_DIRECT from a virtio disk here:
1.75 GB/s with 32 in flight, 1.37 with 8 or 16; 64 MiB of staging memory, used only by O_DIRECT reads into memory
that does not keep the device's alignment and by destinations without host memory)."""
RING_ENTRIES = 32


@functools.cache
def _log_once(message: str) -> None:
    log.warning("%s", message)


class DiskDevice(Compiled):
    """``DISK:/path/to/file`` or ``DISK:shm:name``: buffers are byte ranges of one file (see
    :mod:`runtime_backends.disk.files` for when a file is created or grown). There is no renderer, compiler or runtime:
    DISK holds data, and copies move it to and from other devices.

    Every buffer of the device shares one open file and one mapping; the first allocation opens it, a larger one maps
    more of it, the last free unmaps and closes it. Copies never touch the mapping (see
    :mod:`runtime_backends.disk.files`: a file truncated meanwhile is an error, never ``SIGBUS``): copies in reserve
    then ``pwrite``; copies out of at least :data:`STREAM_MIN` bytes (``copyout``, and ``Buffer.copy_from`` a DISK
    buffer to any device) read what the page cache holds with ``preadv`` (on two threads from :data:`SPLIT_MIN` bytes)
    and the rest as :attr:`read_choice` says (:mod:`runtime_backends.disk.readpath`): with O_DIRECT through the
    device's io_uring ring, several reads in flight (:mod:`runtime_backends.disk.readers`), or buffered with ``preadv``
    in file order, which the kernel's readahead runs ahead of. When io_uring cannot be set up (``EPERM`` from seccomp
    or ``kernel.io_uring_disabled``, ``ENOSYS``, ``ENOMEM``) or ``DISK_IO_URING=0``, O_DIRECT reads use ``preadv`` too,
    and the reason is logged once and kept in :attr:`io_uring_error`. :attr:`read_path` and :attr:`bytes_by_path` say
    which path ran. The ring and the helper thread belong to this object, are created at the first copy that uses them
    and closed by :meth:`finalize`; a lock serializes the device's operations, so threads may share it.

    Raises (construction) ``ValueError`` for a name without a path or with a bad shm name.
    """

    DEFAULT_PRIORITY = None  # a DISK device needs a file: never the default device

    def __init__(self, device: str) -> None:
        self.file = DiskFile(parse_target(device))
        super().__init__(device, DiskAllocator(self), None, None, None)
        self._lock = threading.RLock()
        self._allocations = 0
        self._ring: Ring | None = None
        self._staging: StagingPool | None = None
        self._direct_fd = -1
        self._direct_tried = False
        self._storage_choice: tuple[bool, str] | None = None
        self._helper: ThreadPoolExecutor | None = None
        self.io_uring_error: str | None = None
        """Why streamed copies do not use io_uring (``None`` while they do, or before the first one)."""
        self.read_path: str | None = None
        """What read the file for the last copy out: ``"io_uring"`` or ``"preadv"`` (buffered reads, the fallback, and
        every copy shorter than ``STREAM_MIN``) when it read uncached chunks, ``"page_cache"`` when every chunk was
        cached."""
        self.read_choice: str | None = None
        """How uncached chunks of this file are read, and why: O_DIRECT or buffered (set at the first cold read)."""
        self.bytes_by_path: Counter[str] = Counter()
        """Bytes copied out per path (``"io_uring"``, ``"preadv"``, ``"page_cache"``), and ``"o_direct"`` of them
        read with O_DIRECT, since the device was opened."""
        self.last_stats = ReadStats()

    @classmethod
    def canonicalize(cls, name: str) -> str:
        """Paths verbatim; ``DISK:shm:/name`` -> ``DISK:shm:name`` (the same segment)."""
        return canonical_name(name)

    # allocation lifetime
    def acquire(self, size: int) -> None:
        """Open the file for a new allocation of ``size`` bytes, mapping them when the file has them. On failure
        (directory, permissions, ...) nothing stays open and the device is usable again."""
        with self._lock:
            try:
                self.file.open(size)
                if self.file.size() >= size:
                    self.file.view(0, size)
            except BaseException:
                if self._allocations == 0:
                    self._close_file()
                raise
            self._allocations += 1

    def release(self) -> None:
        """One allocation fewer; the last one unmaps and closes the file and frees the staging buffers."""
        with self._lock:
            self._allocations -= 1
            if self._allocations == 0:
                self._close_file()

    def _close_file(self) -> None:
        self._stop_helper()
        if self._staging is not None:
            self._staging.close()
            self._staging = None
        if self._direct_fd >= 0:
            os.close(self._direct_fd)
        self._direct_fd, self._direct_tried, self._storage_choice = -1, False, None
        self.file.close()

    # data
    def host_view(self, buf: DiskBuffer, size: int) -> memoryview:
        """The mapping of ``buf``'s first ``size`` bytes (zero-copy; read-only for a read-only file). Read use:
        ``FileNotFoundError``/``ValueError`` when they lie past the end of the file. The view is the file's pages
        themselves: touching it after another process shrank the file raises ``SIGBUS``."""
        with self._lock:
            return self.file.view(buf.offset, buf.offset + size)

    def write(self, buf: DiskBuffer, data: memoryview) -> None:
        """Write ``data`` at ``buf``'s offset (reserve, then ``pwrite``), never past ``buf`` (``ValueError`` if it is
        longer); creates or grows the file as :mod:`runtime_backends.disk.files` says, ``PermissionError`` for a
        read-only file, ``OSError(ENOSPC)`` for a full file system. Nothing is written when reserving fails."""
        if data.nbytes > buf.size:
            raise ValueError(f"{data.nbytes} bytes do not fit a DISK buffer of {buf.size} bytes")
        with self._lock:
            self.file.reserve(buf.offset, buf.offset + data.nbytes, extent=buf.extent)
            self.file.pwrite(data, buf.offset)

    def transfer_from(self, buf: DiskBuffer, src_dev: DiskDevice, src: DiskBuffer, size: int) -> None:
        """Copy ``size`` bytes of ``src`` (a buffer of ``src_dev``, possibly this device) to ``buf``: the destination
        range is reserved first (``OSError(ENOSPC)`` with nothing written), then pieces of :data:`CHUNK` bytes are read
        and written. A source that ends early raises as :meth:`read_into` does, leaving the pieces before it written."""
        with self._lock:
            self.file.reserve(buf.offset, buf.offset + size, extent=buf.extent)
        bounce = memoryview(bytearray(min(size, CHUNK)))
        for at in range(0, size, CHUNK):
            n = min(CHUNK, size - at)
            src_dev.read_into(HostSink(bounce[:n]), DiskBuffer(src.offset + at, n, src.extent), n)
            self.write(DiskBuffer(buf.offset + at, n, buf.extent), bounce[:n])

    def read_into(self, sink: CopySink, buf: DiskBuffer, size: int) -> None:
        """Copy ``buf``'s first ``size`` bytes into ``sink`` (see the class docstring for the paths).

        Raises ``FileNotFoundError``/``ValueError`` for bytes past the end of the file, ``OSError`` naming the file
        offset when a read fails or the file ends early; the file is unchanged and the destination's contents are
        unspecified then.
        """
        with self._lock:
            self.file.check_range(buf.offset, buf.offset + size)
            try:
                self._stream(sink, buf.offset, size)
            except BaseException:
                with contextlib.suppress(Exception):  # the read's error is the one to report
                    sink.finish()
                raise
            sink.finish()

    def _stream(self, sink: CopySink, offset: int, size: int) -> None:
        staging = sink.staging() or self._own_staging()
        merge = None if sink.host is None else MERGE  # without host memory every job goes through a staging buffer
        done, calls = 0, 0
        if size < STREAM_MIN:
            reader: UringReader | PreadReader = PreadReader()
            pages = -(-(offset + size) // PAGE) - offset // PAGE
            jobs = plan(offset, size, staging[0].nbytes, np.zeros(pages, bool), merge)
        else:
            gaps, calls = [(0, size)], 0
            if sink.host is not None:  # what the page cache holds first; the rest is planned page by page
                fds = FileFds(self.file.fd, name=str(self.file.target))
                gaps, calls = read_cached(fds, sink.host, offset, self._helper_for(size), PIECE)
            done = size - sum(n for _, n in gaps)
            jobs = self._plan(gaps, offset, staging[0].nbytes, merge)
            direct = self._wants_direct()
            if jobs.reads and not direct:
                self._hint_sequential(offset + gaps[0][0], size - gaps[0][0])
            reader = self._reader(direct) if jobs.reads else PreadReader()
        stats = reader.run(self._fds(reads=bool(jobs.reads)), jobs, sink, staging)
        stats.requests, stats.cached_bytes = stats.requests + calls, stats.cached_bytes + done
        if stats.direct_refused:
            _log_once(f"DISK {self.file.target}: O_DIRECT reads were refused (EINVAL); reading buffered")
            os.close(self._direct_fd)
            self._direct_fd = -1
        self._count(reader.name if jobs.reads else "page_cache", size, stats)

    def _plan(self, gaps: list[tuple[int, int]], offset: int, chunk: int, merge: int | None) -> Plan:
        """The jobs that read the ``(destination offset, bytes)`` ranges ``gaps`` of a copy of file bytes from
        ``offset``."""
        jobs = Plan()
        for at, n in gaps:
            part = plan(offset + at, n, chunk, self._residency(offset + at, n), merge, dest=at)
            jobs.reads += part.reads
            jobs.cached += part.cached
        return jobs

    def _helper_for(self, size: int) -> ThreadPoolExecutor | None:
        """The second thread of a copy out of the page cache of ``size`` bytes, or ``None`` (see :data:`SPLIT_MIN`)."""
        if size < SPLIT_MIN or len(os.sched_getaffinity(0)) < 2:
            return None
        if self._helper is None:
            self._helper = ThreadPoolExecutor(1, thread_name_prefix=f"DISK {self.file.target} read")
        return self._helper

    def _hint_sequential(self, start: int, size: int) -> None:
        """Tell the kernel the file is read in order (``POSIX_FADV_SEQUENTIAL`` doubles its readahead window for this
        descriptor): buffered cold reads ran 1.0-3.5x faster with it here, never slower."""
        try:
            os.posix_fadvise(self.file.fd, start, size, os.POSIX_FADV_SEQUENTIAL)
        except OSError as e:  # a hint: the reads are correct without it
            log.debug("DISK %s: posix_fadvise(SEQUENTIAL) failed (%s); reading with the default readahead",
                      self.file.target, e)

    def _residency(self, start: int, size: int) -> np.ndarray:
        """Which pages of file bytes ``[start, start + size)`` to read as cached. Looked up (mincore(2), which walks
        every page) only for O_DIRECT reads, which would read cached pages from the disk again; buffered reads of
        cached pages are served from the page cache by the kernel anyway."""
        if size and self._wants_direct():
            return self.file.resident(start, start + size)
        return np.zeros(-(-(start + size) // PAGE) - start // PAGE, bool)

    def _count(self, path: str, size: int, stats: ReadStats) -> None:
        self.read_path, self.last_stats = path, stats
        self.bytes_by_path[path] += size
        self.bytes_by_path["o_direct"] += stats.direct_bytes

    def _own_staging(self) -> list[memoryview]:
        if self._staging is None:
            self._staging = StagingPool(DEPTH, CHUNK)
        return self._staging.views

    def _reader(self, direct: bool) -> UringReader | PreadReader:
        forced = DISK_IO_URING.get()  # None: io_uring for O_DIRECT reads, preadv in file order for buffered ones
        if forced is None and not direct:  # readahead runs ahead of reads in file order; no reads in flight needed
            return PreadReader()
        if forced is False:
            self.io_uring_error = f"disabled by {DISK_IO_URING.name}=0"
            _log_once(f"DISK: io_uring {self.io_uring_error}; reads use preadv")
            return PreadReader()
        if self._ring is None:
            try:
                self._ring = Ring(RING_ENTRIES)
            except OSError as e:  # tried again at the next copy: a limit may have been raised meanwhile
                self.io_uring_error = str(e)
                _log_once(f"DISK: io_uring unavailable ({e}); reads use preadv")
                return PreadReader()
        self.io_uring_error = None
        return UringReader(self._ring, DEPTH)

    def _fds(self, reads: bool) -> FileFds:
        """The file's descriptors for a copy; the O_DIRECT one only when cold chunks are to be read with O_DIRECT
        (``DISK_O_DIRECT``, else :func:`storage_prefers_direct`), opened at the first such read (``-1`` where the file
        system refuses O_DIRECT, or when it would not be the same file)."""
        direct = reads and self._wants_direct()
        if direct and not self._direct_tried:
            self._direct_tried = True
            self._direct_fd = _open_direct(self.file)
        return FileFds(self.file.fd, self._direct_fd if direct else -1, PAGE, str(self.file.target))

    def _wants_direct(self) -> bool:
        forced = DISK_O_DIRECT.get()
        if self.file.target.shm:
            self.read_choice = "buffered: a shared-memory segment is memory"
        elif forced is not None:
            self.read_choice = f"{'O_DIRECT' if forced else 'buffered'}: set by {DISK_O_DIRECT.name}"
        else:
            if self._storage_choice is None:
                self._storage_choice = storage_prefers_direct(self.file.fd)
            self.read_choice = self._storage_choice[1]
        return self.read_choice.startswith("O_DIRECT")

    def page_cache_residency(self, offset: int, size: int) -> float:
        """The fraction (0..1) of the pages of file bytes ``[offset, offset + size)`` in the page cache now; the range
        must lie inside the file (``ValueError`` otherwise, and for a negative offset or a size < 1)."""
        for what, value, least in (("offset", offset, 0), ("size", size, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"page_cache_residency: {what} must be an int >= {least} bytes, got {value!r}")
        with self._lock:
            self.file.check_range(offset, offset + size)
            return float(self.file.resident(offset, offset + size).mean())

    def drop_page_cache(self) -> None:
        """Evict the file's pages from the page cache, as far as the kernel allows (:meth:`DiskFile.drop_cache`):
        the next copy out reads from the disk. For cold-cache benchmarks."""
        with self._lock:
            self.file.drop_cache()

    def finalize(self) -> None:
        """Close the io_uring ring and free the staging buffers; the device may be used again (a new ring is set up
        at the next streamed copy). Buffers still allocated keep the file open."""
        with self._lock:
            if self._ring is not None:
                self._ring.close()
                self._ring = None
            if self._staging is not None:
                self._staging.close()
                self._staging = None
            self._stop_helper()
            if self._allocations == 0:
                self._close_file()

    def _stop_helper(self) -> None:
        if self._helper is not None:
            self._helper.shutdown()
            self._helper = None


def _open_direct(file: DiskFile) -> int:
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return -1
    try:
        fd = os.open(file.target.path, os.O_RDONLY | os.O_CLOEXEC | flag)
    except OSError as e:
        log.info("DISK %s: no O_DIRECT (%s); reads are buffered", file.target, e)
        return -1
    same = os.fstat(fd)
    mine = os.fstat(file.fd)
    if (same.st_dev, same.st_ino) != (mine.st_dev, mine.st_ino):  # replaced since it was opened
        os.close(fd)
        return -1
    return fd
