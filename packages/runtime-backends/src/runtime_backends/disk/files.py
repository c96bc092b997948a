"""The file behind a DISK device: its name, how it is opened, grown and mapped.

``DISK:/path/to/file`` names a regular file (the path verbatim: relative paths are relative to the working directory
when the file is opened); ``DISK:shm:name`` a POSIX shared-memory segment (shm_open(3) name ``/name``; ``shm:/name`` is
the same segment).

Read use never creates or grows a file; write use may. A file is opened read-write when it has a write permission bit
and this process may write it (a file without any write bit is opened read-only, even by root), else read-only. Reading
bytes past the end of a file (or of a file that does not exist) is an error that changes nothing. Writing past the end
(``Buffer.copyin``, a copy into a DISK buffer) first creates the file (a missing one, with mode 0666 & ~umask) or grows
it to the end of the buffer's allocation. A shared-memory segment is memory: allocating a buffer on it creates the
segment (mode 0600) or grows it to the buffer's size; if growing fails, a segment that allocation created is removed.

Copies never touch the mapping: another process may truncate the file, or a write may land in a hole of a full file
system, and either one turns an access to the mapped page into ``SIGBUS``, which kills the process. So copies out read
with ``preadv``/io_uring (a file that ends early is an error naming it and the bytes missing), and copies in reserve
the bytes they write with ``posix_fallocate`` (a full file system is ``OSError(ENOSPC)`` before anything is written,
and a file grown for the write is put back as it was, a file this call created removed) and then write them with
``pwrite``. Only zero-copy host views (``as_buffer``) are the mapping itself: touching one after the file shrank, or
writing into a hole of a full file system through one, raises ``SIGBUS``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import mmap
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Target", "parse_target", "canonical_name", "DiskFile", "SHM_PREFIX"]

SHM_PREFIX = "shm:"
_NAME_MAX = 255
PAGE = mmap.PAGESIZE
_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


@dataclass(frozen=True)
class Target:
    """What a DISK device name points at: ``path`` of a regular file, or the shm_open(3) name (``/name``)."""

    path: str
    shm: bool

    def __str__(self) -> str:
        return f"shm segment {self.path}" if self.shm else f"file {self.path!r}"


def canonical_name(name: str) -> str:
    """``DISK:shm:/x`` -> ``DISK:shm:x``; every other name verbatim (a path is never normalized)."""
    backend, _, rest = name.partition(":")
    if rest.startswith(SHM_PREFIX + "/"):
        return f"{backend}:{SHM_PREFIX}{rest[len(SHM_PREFIX) + 1:]}"
    return name


def parse_target(device: str) -> Target:
    """The target of canonical device name ``device``. ``ValueError`` for a name without a path, a path with a NUL
    byte, or a bad shm name (empty, ``.`` or ``..``, containing ``/``, longer than 254 bytes)."""
    rest = device.partition(":")[2]
    if not rest:
        raise ValueError(f"{device!r} names no file: use DISK:/path/to/file or DISK:shm:name")
    if "\0" in rest:
        raise ValueError(f"{device!r}: a path cannot contain a NUL byte")
    if not rest.startswith(SHM_PREFIX):
        return Target(rest, shm=False)
    name = rest[len(SHM_PREFIX):]
    if name in ("", ".", "..") or "/" in name or len(name.encode()) >= _NAME_MAX:
        raise ValueError(f"{device!r}: bad shm name {name!r}: give a name of at most {_NAME_MAX - 1} bytes, not '.' or "
                         f"'..', without '/' (DISK:shm:name, or DISK:shm:/name for the same segment)")
    return Target(f"/{name}", shm=True)


def _posixshmem() -> Any:
    try:
        import _posixshmem  # CPython's shm_open(3)/shm_unlink(3), the ones multiprocessing.shared_memory uses
    except ImportError:
        raise OSError(errno.ENOTSUP, "POSIX shared memory is not available on this platform") from None
    return _posixshmem


def _shm_create_or_open(path: str) -> tuple[int, bool]:
    """A read-write descriptor of segment ``path`` and whether this call created it (mode 0600)."""
    shm = _posixshmem()
    try:
        return int(shm.shm_open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode=0o600)), True
    except FileExistsError:
        return int(shm.shm_open(path, os.O_RDWR, mode=0o600)), False


class DiskFile:
    """The open file (or shm segment) of one DISK device and its mapping, shared by all buffers of the device.

    Not thread-safe: the device serializes calls. :meth:`open` opens it (a missing file stays unopened until a write
    creates it); :meth:`check_range` says whether bytes exist to read; :meth:`reserve` then :meth:`pwrite` write;
    :meth:`view` is the zero-copy mapping of a range (remapped larger when more is asked and the file has them);
    :meth:`close` unmaps and closes. ``fd`` is ``-1`` while nothing is open.
    """

    def __init__(self, target: Target) -> None:
        self.target = target
        self.fd, self.writable = -1, False
        self._mm: mmap.mmap | None = None
        self._view = memoryview(b"")  # of the whole mapping; empty while unmapped
        self.address = 0  # of the mapping's first byte, for mincore(2)/madvise(2)

    @property
    def mapped(self) -> int:
        """Bytes mapped now (0 when not mapped)."""
        return self._view.nbytes

    def size(self) -> int:
        """The file's size in bytes now (0 when it does not exist yet)."""
        return os.fstat(self.fd).st_size if self.fd >= 0 else 0

    def open(self, alloc_size: int) -> None:
        """Open the target for an allocation of ``alloc_size`` bytes (an shm segment is created or grown to it).

        Raises ``IsADirectoryError``/``ValueError`` for a path that is a directory or not a regular file,
        ``PermissionError`` when it cannot be read, ``OSError`` for other failures; nothing is left open then.
        """
        if self.fd >= 0:
            if self.target.shm and self.size() < alloc_size:
                self._grow(alloc_size, created=False)
            return
        if self.target.shm:
            fd, created = _shm_create_or_open(self.target.path)
            self._adopt(fd, writable=True)
            if self.size() < alloc_size:
                self._grow(alloc_size, created)
            return
        try:
            st = os.stat(self.target.path)
        except FileNotFoundError:
            return  # read use reports it; write use creates it
        self._check_regular(st)
        writable = bool(st.st_mode & _WRITE_BITS) and os.access(self.target.path, os.W_OK)
        self._adopt(self._open_existing(writable), writable)

    def _open_existing(self, writable: bool) -> int:
        if writable:
            try:
                return os.open(self.target.path, os.O_RDWR | os.O_CLOEXEC)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ETXTBSY):
                    raise
        return os.open(self.target.path, os.O_RDONLY | os.O_CLOEXEC)

    def _adopt(self, fd: int, writable: bool) -> None:
        try:
            self._check_regular(os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        self.fd, self.writable = fd, writable

    def _check_regular(self, st: os.stat_result) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"DISK {self.target} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"DISK {self.target} is not a regular file (DISK maps regular files and shm segments)")

    def check_range(self, start: int, end: int) -> None:
        """Raise ``FileNotFoundError`` (missing file) or ``ValueError`` (short file, naming its size) unless file bytes
        ``[start, end)`` exist now."""
        size = self.size()
        if end > size:
            raise self._past_end(start, end, size)

    def view(self, start: int, end: int) -> memoryview:
        """Bytes ``[start, end)`` of the file as its mapping (zero-copy; writable when the file was opened read-write).
        Raises as :meth:`check_range` does for bytes past the end of the file."""
        self.check_range(start, end)
        self._cover(end)
        return self._view[start:end]

    def reserve(self, start: int, end: int, *, extent: int) -> None:
        """Make a write of file bytes ``[start, end)`` unable to run out of space: reserve them with
        ``posix_fallocate(3)`` (allocating holes of a sparse file), creating or growing the file to
        ``max(extent, end)`` first when it is shorter (``extent``: where the allocation holding the range ends).

        Raises ``PermissionError`` for a read-only file, ``OSError`` (``ENOSPC`` for a full file system) naming the
        file when the space cannot be had; the file's size and bytes are as they were then.
        """
        size = self.size()
        if self.fd >= 0 and not self.writable:
            raise PermissionError(errno.EACCES, f"DISK {self.target} is read-only (opened O_RDONLY: it has no write "
                                                f"permission for this process); nothing was written")
        if start < size:  # the holes of the bytes the file has; what lies past its end comes with the growth
            try:
                os.posix_fallocate(self.fd, start, min(end, size) - start)
            except OSError as e:
                raise OSError(e.errno, f"DISK {self.target}: cannot reserve bytes [{start}, {min(end, size)}) for a "
                                       f"write: {e.strerror}; nothing was written") from e
        if end > size:
            self._create_or_grow(max(extent, end))

    def pwrite(self, data: memoryview, offset: int) -> None:
        """Write ``data`` (C-contiguous bytes) at file byte ``offset`` with ``pwrite(2)`` (reserve them first:
        :meth:`reserve`). ``OSError`` naming the file and offset when a write fails."""
        data = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        done = 0
        while done < data.nbytes:
            try:
                n = os.pwrite(self.fd, data[done:], offset + done)
            except InterruptedError:
                continue
            except OSError as e:
                raise OSError(e.errno, f"writing DISK {self.target} at byte offset {offset + done} failed: "
                                       f"{e.strerror} ({done} of {data.nbytes} bytes written)") from e
            if n == 0:
                raise OSError(errno.EIO, f"writing DISK {self.target} at byte offset {offset + done} wrote nothing "
                                         f"({done} of {data.nbytes} bytes written)")
            done += n

    def _cover(self, end: int) -> None:
        """Map at least the first ``end`` bytes (a larger mapping replaces a smaller one)."""
        if self.mapped < end:
            self._remap(end)

    def _past_end(self, start: int, end: int, size: int) -> OSError | ValueError:
        if self.fd < 0:
            return FileNotFoundError(errno.ENOENT, f"DISK {self.target} does not exist: cannot read bytes "
                                                   f"[{start}, {end}) (reads never create files; write the buffer "
                                                   f"first to create it)")
        return ValueError(f"DISK {self.target} holds {size} bytes: cannot read bytes [{start}, {end}) past its end "
                          f"(reads never grow files; write the buffer first to grow it)")

    def _create_or_grow(self, new_size: int) -> None:
        created = False
        if self.fd < 0:
            try:
                fd = os.open(self.target.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
                created = True
            except FileExistsError:  # made by someone else since open()
                fd = self._open_existing(writable=True)
            self._adopt(fd, writable=True)
        self._grow(new_size, created)

    def _grow(self, new_size: int, created: bool) -> None:
        old = self.size()
        try:
            os.posix_fallocate(self.fd, old, new_size - old)
        except OSError as e:
            self._undo_growth(old, created)
            raise OSError(e.errno, f"DISK {self.target}: cannot grow it from {old} to {new_size} bytes: "
                                   f"{e.strerror}; the file was left as it was") from e

    def _undo_growth(self, old: int, created: bool) -> None:
        os.ftruncate(self.fd, old)
        if created:
            if self.target.shm:
                _posixshmem().shm_unlink(self.target.path)
            else:
                os.unlink(self.target.path)
            self.close()

    def _remap(self, length: int) -> None:
        access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
        try:
            mm = mmap.mmap(self.fd, length, access=access)
        except ValueError:  # mmap(2) refuses nothing here: Python's check that the file still holds `length` bytes
            raise self._past_end(0, length, self.size()) from None
        except OSError as e:
            raise OSError(e.errno, f"DISK {self.target}: cannot map its first {length} bytes: {e.strerror} (DISK "
                                   f"needs a file that mmap(2) accepts; pseudo-files of /proc and /sys are not)") from e
        self._release_mapping()
        self._mm, self._view = mm, memoryview(mm)
        probe = np.frombuffer(mm, dtype=np.uint8, count=1)  # a read-only mmap exports no ctypes-writable buffer
        self.address = int(probe.ctypes.data)
        del probe

    def _release_mapping(self) -> None:
        """Unmap now; while a host view of it is still alive (``as_buffer`` results), the mapping lives on until the
        last view is gone, so no view ever points at unmapped memory."""
        self._view.release()
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # exported views keep it mapped; freed with the last of them
        self._mm, self._view, self.address = None, memoryview(b""), 0

    def resident(self, start: int, end: int) -> np.ndarray:
        """Per page of bytes ``[start, end)``, whether it is in the page cache now (mincore(2)):
        a bool array with one entry per page from the page holding ``start`` to the page holding ``end - 1``.
        Maps the range if needed, never touches it: a page of the mapping past the end of a file that shrank
        meanwhile reads as not resident."""
        self._cover(end)
        first, last = start // PAGE, -(-end // PAGE)
        vec = np.zeros(last - first, dtype=np.uint8)
        if _libc_mincore()(self.address + first * PAGE, (last - first) * PAGE, vec.ctypes.data) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mincore on DISK {self.target} failed: {os.strerror(err)}")
        return (vec & 1).astype(bool)

    def drop_cache(self) -> None:
        """Evict the file's pages from the page cache (what a cold read sees): drop this process's mapping of them
        (madvise MADV_DONTNEED), write back dirty pages (fdatasync), then posix_fadvise(POSIX_FADV_DONTNEED). Pages
        mapped by other processes, or on file systems that keep file data in memory (tmpfs), stay."""
        if self.fd < 0:
            return
        if self._mm is not None:
            self._mm.madvise(mmap.MADV_DONTNEED)
        os.fdatasync(self.fd)
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def close(self) -> None:
        """Unmap and close; the object can be opened again."""
        self._release_mapping()
        if self.fd >= 0:
            os.close(self.fd)
        self.fd, self.writable = -1, False


@functools.cache
def _libc_mincore() -> Callable[[int, int, int], int]:
    fn = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).mincore
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p], ctypes.c_int
    return fn
