"""How the bytes of a streamed DISK copy are read: the plan, the io_uring reader and the ``preadv`` fallback.

A copy of file bytes ``[offset, offset + size)`` is cut at multiples of the staging-buffer size (``chunk`` bytes, a
multiple of the page size, in file offsets). A chunk whose pages are all in the page cache is a *cached* job: one
``preadv(2)`` copies it out of the page cache (as fast as a memcpy, and unlike a copy from the file's mapping it cannot
raise ``SIGBUS`` when the file shrinks meanwhile: the read comes back short instead). Every other chunk is a *cold* job:

* :class:`UringReader` keeps several reads in flight on an io_uring :class:`~runtime_backends.disk.uring.Ring`. With an
  ``O_DIRECT`` descriptor, a job whose file offset, length and destination address keep the alignment is read straight
  into the destination's host memory; any other is widened to the alignment (its unaligned head and tail) and read
  into a page-aligned staging buffer, then the wanted bytes are delivered out of it (trimmed); without one (tmpfs, or
  a file system that refuses O_DIRECT) it reads buffered, straight into the destination's host memory when it has
  any, else into staging.
  Cached jobs are read into the destination's host memory while the cold reads are in flight (without host memory
  they go through the ring like cold ones, buffered), and each staging buffer is delivered out of while the others
  are being read. Completions are matched by ``user_data`` (they come in any order); a short read is continued
  from where it stopped (on the buffered descriptor when the remainder is no longer aligned); ``EINTR``/``EAGAIN``
  results are resubmitted; an ``EINVAL`` from an O_DIRECT read (alignment the device rejects) moves that read, and
  later ones, to the buffered descriptor. On any other error no new read is started, every read in flight is waited
  for (they write into memory the caller owns), and ``OSError`` is raised naming the file offset.
* :class:`PreadReader` does the same jobs one at a time with ``preadv(2)`` on the buffered descriptor.

A read that comes back with 0 bytes before the job's end (the file was truncated meanwhile) is ``OSError(EIO)`` naming
the file, where it ended and how many bytes that read came back short.
"""

from __future__ import annotations

import errno
import functools
import logging
import mmap
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field

import numpy as np

from runtime_backends.disk.uring import IOVec, Ring
from runtime_core.sink import CopySink

__all__ = ["Job", "Plan", "plan", "read_fully", "read_cached_prefix", "read_cached", "PIECE", "FileFds", "ReadStats",
           "PreadReader", "UringReader", "StagingPool", "HUGE_PAGE"]

log = logging.getLogger(__name__)

_RETRY = (errno.EINTR, errno.EAGAIN)
MERGE = 64 << 20
"""Longest read (bytes) of resident chunks in one piece while cold reads are in flight."""


@dataclass(frozen=True)
class Job:
    """Read ``length`` bytes at file offset ``pos`` into the destination at byte ``dest``; ``cached`` when every page
    of them was in the page cache when planned (read buffered, never with O_DIRECT)."""

    pos: int
    length: int
    dest: int
    cached: bool = False


@dataclass
class Plan:
    """The cold jobs (``reads``) and the cached ones of one copy."""

    reads: list[Job] = field(default_factory=list)
    cached: list[Job] = field(default_factory=list)


def plan(offset: int, size: int, chunk: int, resident: np.ndarray, merge: int | None = MERGE, dest: int = 0) -> Plan:
    """Cut file bytes ``[offset, offset + size)`` at multiples of ``chunk`` and sort the pieces by residency.

    Adjacent resident pieces are merged into one cached job: of at most ``merge`` bytes when there are cold reads too
    (so that completions are taken between them), else one job per run (a single long read is the fastest);
    ``merge=None`` merges nothing (every job fits a staging buffer of ``chunk`` bytes). ``resident`` has one bool per
    page from the page of ``offset`` to the page of ``offset + size - 1`` (:meth:`DiskFile.resident`). File byte
    ``offset`` goes to destination byte ``dest``.
    ``ValueError`` when ``chunk`` is not a positive multiple of the page size.
    """
    if chunk <= 0 or chunk % mmap.PAGESIZE:
        raise ValueError(f"chunk must be a positive multiple of the page size {mmap.PAGESIZE}, got {chunk}")
    out, end, first_page = Plan(), offset + size, offset // mmap.PAGESIZE
    runs: list[Job] = []
    pos = offset
    while pos < end:
        stop = min((pos // chunk + 1) * chunk, end)
        pages = resident[pos // mmap.PAGESIZE - first_page:(stop - 1) // mmap.PAGESIZE - first_page + 1]
        if not pages.all():
            out.reads.append(Job(pos, stop - pos, pos - offset + dest))
        elif runs and (last := runs[-1]).pos + last.length == pos:
            runs[-1] = Job(last.pos, stop - last.pos, last.dest)
        else:
            runs.append(Job(pos, stop - pos, pos - offset + dest))
        pos = stop
    limit = chunk if merge is None else merge if out.reads else size
    out.cached = [Job(r.pos + at, min(limit, r.length - at), r.dest + at, True)
                  for r in runs for at in range(0, r.length, limit)]
    return out


@dataclass(frozen=True)
class FileFds:
    """The descriptors of the file being read: ``buffered`` always, ``direct`` (O_DIRECT) or ``-1``, and the
    alignment in bytes that O_DIRECT offsets, lengths and buffers keep."""

    buffered: int
    direct: int = -1
    align: int = mmap.PAGESIZE
    name: str = "the file"


@dataclass
class ReadStats:
    """What a reader did: requests submitted, short reads continued, bytes of cold jobs read with O_DIRECT and
    buffered, bytes of cached jobs, and whether an O_DIRECT read was refused (``EINVAL``) so that the caller stops
    using O_DIRECT on that file."""

    requests: int = 0
    short_reads: int = 0
    direct_bytes: int = 0
    buffered_bytes: int = 0
    cached_bytes: int = 0
    direct_refused: bool = False


HUGE_PAGE = 2 << 20
"""Bytes of an x86-64/AArch64 transparent huge page: staging buffers start at a multiple of it."""


class StagingPool:
    """``count`` host buffers of ``size`` bytes carved out of one anonymous mapping, the source's own staging memory.

    The buffers start at multiples of ``HUGE_PAGE`` and the mapping asks for transparent huge pages
    (``madvise(MADV_HUGEPAGE)``, where Python offers it): an O_DIRECT read pins its destination pages and hands the
    device a list of their physical segments, so on small pages its cost follows how contiguous the pages a process
    happened to get are (two processes reading the same file cold differed by up to 12%); on huge pages a 2 MiB
    chunk is one segment. Where huge pages are refused the buffers are ordinary, page-aligned pages.
    """

    def __init__(self, count: int, size: int) -> None:
        if count < 0 or size < 0:
            raise ValueError(f"a staging pool needs a count and a size >= 0, got {count} buffers of {size} bytes")
        stride = -(-size // HUGE_PAGE) * HUGE_PAGE  # every buffer starts on a huge page
        self._map = mmap.mmap(-1, count * stride + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        whole = memoryview(self._map)
        start = -address(whole) % HUGE_PAGE
        advice = getattr(mmap, "MADV_HUGEPAGE", None)
        if advice is not None and count * stride:
            try:
                self._map.madvise(advice, start, count * stride)
            except OSError as exc:
                log.debug("madvise(MADV_HUGEPAGE) of the DISK staging buffers failed (%s); using normal pages", exc)
        self.views: list[memoryview] = [whole[start + i * stride:start + i * stride + size] for i in range(count)]
        self._whole = whole

    def close(self) -> None:
        """Unmap the buffers (idempotent); their views must not be used afterwards."""
        for v in self.views:
            v.release()
        self.views = []
        self._whole.release()
        self._map.close()


def address(view: memoryview) -> int:
    """The address of the first byte of writable, C-contiguous ``view``."""
    probe = np.frombuffer(view, dtype=np.uint8, count=min(1, view.nbytes))
    try:
        return int(probe.ctypes.data)
    finally:
        del probe


def _read_error(fds: FileFds, err: int, pos: int) -> OSError:
    return OSError(err, f"reading {fds.name} at byte offset {pos} failed: {os.strerror(err)}")


def _eof_error(fds: FileFds, pos: int, missing: int) -> OSError:
    return OSError(errno.EIO, f"{fds.name} ended at byte {pos}: a read there came back {missing} bytes short (was the "
                              f"file truncated while being read?)")


ReadFn = Callable[[int, list[memoryview], int], int]
MAX_RW = 0x7FFFF000
"""The most bytes Linux moves in one read(2)-family call (``MAX_RW_COUNT``); a longer read returns this many."""


def read_cached_prefix(fds: FileFds, dest: memoryview, pos: int) -> tuple[int, int]:
    """Fill ``dest`` from file offset ``pos`` with as many bytes as the page cache holds there, without waiting for the
    disk: ``preadv2(2)`` with ``RWF_NOWAIT`` stops at the first page that is not cached (and answers ``EAGAIN`` when
    that is the first one); a short read ends it (the pages after it are the disk's to read, even where the readahead
    it started has brought some in meanwhile). Returns (bytes read, read calls): ``0`` bytes where the kernel or file
    system does not offer ``RWF_NOWAIT`` (``EOPNOTSUPP``/``EINVAL``). Raises ``OSError`` naming the file and offset
    for other errors."""
    done, calls = 0, 0
    nowait = getattr(os, "RWF_NOWAIT", 0)
    while nowait and done < dest.nbytes:
        calls += 1
        try:
            n = os.preadv(fds.buffered, [dest[done:]], pos + done, nowait)
        except (BlockingIOError, InterruptedError):
            break
        except OSError as e:
            if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                break
            raise _read_error(fds, e.errno or errno.EIO, pos + done) from e
        done += n
        if n < min(dest.nbytes - done + n, MAX_RW):  # not cached there (or, with n == 0, the file ends there now)
            break
    return done, calls


PIECE = 32 << 20
"""Bytes of file a thread of :func:`read_cached` copies out of the page cache at a time."""


def read_cached(fds: FileFds, dest: memoryview, pos: int, helper: Executor | None = None,
                piece: int = PIECE) -> tuple[list[tuple[int, int]], int]:
    """Fill ``dest`` from file offset ``pos`` with what the page cache holds, without waiting for the disk, in pieces
    of ``piece`` bytes (:func:`read_cached_prefix` each), the calling thread and one ``helper`` thread taking the next
    piece until none is left. The kernel's copy out of the page cache runs on the CPU of the thread that reads, so two
    threads copy up to twice as fast where memory bandwidth allows; where the helper gets no CPU the caller reads every
    piece itself. The pieces are shared only once the first comes back whole (a page cache that holds the file's
    start); after the first piece that comes back short, no more are read (the rest is the disk's).

    Returns the ranges of ``dest`` not read, as sorted, disjoint ``(dest offset, bytes)`` pairs, and the read calls.
    Raises ``OSError`` naming the file and offset, after both threads have stopped writing into ``dest``.
    """
    if piece <= 0:
        raise ValueError(f"piece must be a positive number of bytes, got {piece}")
    if helper is None or dest.nbytes <= piece:
        return _cached_prefix(fds, dest, pos)
    gaps, calls = _cached_prefix(fds, dest[:piece], pos)
    if gaps:  # the file's start is not cached: the rest is the disk's
        return [(gaps[0][0], dest.nbytes - gaps[0][0])], calls
    shared = _Pieces(fds, dest, pos, piece, start=piece)
    future = helper.submit(shared.work)
    try:
        shared.work()
    finally:
        future.result()
    return shared.gaps(), calls + shared.calls


def _cached_prefix(fds: FileFds, dest: memoryview, pos: int) -> tuple[list[tuple[int, int]], int]:
    done, calls = read_cached_prefix(fds, dest, pos)
    return ([(done, dest.nbytes - done)] if done < dest.nbytes else []), calls


class _Pieces:
    """The pieces of one :func:`read_cached` that its threads take in turn, and what each left unread."""

    def __init__(self, fds: FileFds, dest: memoryview, pos: int, piece: int, start: int) -> None:
        self.fds, self.dest, self.pos, self.piece = fds, dest, pos, piece
        self._next, self._lock, self.calls = start, threading.Lock(), 0
        self._short: list[tuple[int, int]] = []
        self._failed = False

    def _take(self) -> tuple[int, int] | None:
        with self._lock:
            at = self._next
            if at >= self.dest.nbytes or self._short or self._failed:
                return None
            self._next = min(at + self.piece, self.dest.nbytes)
            return at, self._next

    def work(self) -> None:
        while (span := self._take()) is not None:
            at, end = span
            try:
                done, calls = read_cached_prefix(self.fds, self.dest[at:end], self.pos + at)
            except BaseException:
                self._failed = True  # the other thread stops at its next piece
                raise
            with self._lock:
                self.calls += calls
                if at + done < end:
                    self._short.append((at + done, end))

    def gaps(self) -> list[tuple[int, int]]:
        """The unread ranges: the short pieces' rests and every piece not taken, merged where they touch."""
        spans = sorted(self._short + ([(self._next, self.dest.nbytes)] if self._next < self.dest.nbytes else []))
        out: list[tuple[int, int]] = []
        for at, end in spans:
            if out and out[-1][0] + out[-1][1] == at:
                out[-1] = (out[-1][0], end - out[-1][0])
            else:
                out.append((at, end - at))
        return out


def read_fully(fds: FileFds, dest: memoryview, pos: int, stats: ReadStats, read_fn: ReadFn = os.preadv,
               cached: bool = False) -> None:
    """Fill ``dest`` from file offset ``pos`` with ``read_fn`` (``preadv(2)``) calls on the buffered descriptor,
    continuing short reads, counted in ``stats`` (as cached bytes when ``cached``). Raises ``OSError`` naming the
    file and offset for a failed read, and for a file that ends before ``dest`` is full (with the bytes missing)."""
    done = 0
    while done < dest.nbytes:
        stats.requests += 1
        try:
            n = read_fn(fds.buffered, [dest[done:]], pos + done)
        except InterruptedError:
            continue
        except OSError as e:
            raise _read_error(fds, e.errno or errno.EIO, pos + done) from e
        if n == 0:
            raise _eof_error(fds, pos + done, dest.nbytes - done)
        done += n
        stats.short_reads += done < dest.nbytes
    if cached:
        stats.cached_bytes += done
    else:
        stats.buffered_bytes += done


class _Slots:
    """Which staging buffers are free, and which were delivered from (the sink must finish with them first)."""

    def __init__(self, count: int, sink: CopySink) -> None:
        self.free, self.delivered, self.sink = deque(range(count)), set[int](), sink

    def take(self) -> int | None:
        if not self.free:
            return None
        slot = self.free.popleft()
        if slot in self.delivered:
            self.sink.wait_slot(slot)
            self.delivered.discard(slot)
        return slot

    def give_back(self, slot: int, delivered: bool) -> None:
        self.free.append(slot)
        if delivered:
            self.delivered.add(slot)


class PreadReader:
    """The fallback: jobs read one at a time with ``preadv`` (``read_fn``, injectable to simulate I/O errors) on the
    buffered descriptor, straight into the sink's host memory when it has any, else through the staging buffers."""

    name = "preadv"

    def __init__(self, read_fn: ReadFn = os.preadv) -> None:
        self.read_fn = read_fn

    def run(self, fds: FileFds, jobs: Plan, sink: CopySink, staging: Sequence[memoryview]) -> ReadStats:
        """Read every job, cached ones first. Raises ``OSError`` naming the file offset on a failed read or a file
        that ends early."""
        stats = ReadStats()
        for i, job in enumerate(jobs.cached + jobs.reads):
            if sink.host is not None:
                read_fully(fds, sink.host[job.dest:job.dest + job.length], job.pos, stats, self.read_fn, job.cached)
                continue
            slot = i % len(staging)
            if i >= len(staging):
                sink.wait_slot(slot)
            data = staging[slot][:job.length]
            read_fully(fds, data, job.pos, stats, self.read_fn, job.cached)
            sink.deliver(data, job.dest, slot)
        return stats


@dataclass
class _Request:
    """One job in flight: where its next bytes come from and go, and how many must still arrive."""

    job: Job
    slot: int | None  # staging buffer, or None: straight into the sink's host memory
    fd: int
    direct: bool
    pos: int  # next file offset to read
    addr: int  # where its bytes go
    todo: int  # bytes asked for from pos (aligned for O_DIRECT)
    need: int  # bytes from the request's first byte that must arrive
    skip: int  # bytes of widened head before the job's first byte (O_DIRECT)
    done: int = 0
    iov: IOVec = field(default_factory=IOVec)


class UringReader:
    """Jobs read through ``ring`` with up to ``depth`` requests in flight (see the module docstring)."""

    name = "io_uring"

    def __init__(self, ring: Ring, depth: int = 8) -> None:
        self.ring, self.depth = ring, min(depth, ring.entries)

    def run(self, fds: FileFds, jobs: Plan, sink: CopySink, staging: Sequence[memoryview]) -> ReadStats:
        """Read every job: the cold ones through the ring, the cached ones meanwhile. Raises ``OSError`` naming the
        file offset on a failed read or a file that ends early, after every read in flight has completed."""
        state = _Run(self.ring, fds, sink, staging)
        host = sink.host
        if host is None:
            pending, to_copy = deque(jobs.cached + jobs.reads), deque[Callable[[], None]]()
        else:
            pending = deque(jobs.reads)
            to_copy = deque(functools.partial(read_fully, fds, host[j.dest:j.dest + j.length], j.pos, state.stats,
                                              cached=True) for j in jobs.cached)
        try:
            while pending or state.inflight:
                while pending and len(state.inflight) < self.depth and state.start(pending[0]):
                    pending.popleft()
                busy = bool(to_copy)
                if busy:
                    to_copy.popleft()()  # a cached job, read while the cold reads are in flight
                self.ring.submit(0 if busy or not state.inflight else 1)
                state.complete_all()
                if state.error is not None:
                    raise state.error
            for copy in to_copy:
                copy()
        except BaseException:
            state.drain()
            raise
        return state.stats


class _Run:
    """The state of one :meth:`UringReader.run`: requests in flight by ``user_data``, staging slots, statistics."""

    def __init__(self, ring: Ring, fds: FileFds, sink: CopySink, staging: Sequence[memoryview]) -> None:
        self.ring, self.fds, self.sink, self.staging = ring, fds, sink, staging
        self.slot_addr = [address(v) for v in staging]
        self.host_addr = address(sink.host) if sink.host is not None else 0
        self.slots = _Slots(len(staging), sink)
        self.inflight: dict[int, _Request] = {}
        self.next_id, self.stats = 1, ReadStats()
        self.error: OSError | None = None
        self.direct_ok = fds.direct >= 0

    def start(self, job: Job) -> bool:
        """Queue ``job``; ``False`` when it needs a staging buffer and none is free."""
        direct = self.direct_ok and not job.cached
        if self.sink.host is not None and (not direct or self._aligned(job)):
            fd = self.fds.direct if direct else self.fds.buffered
            self._queue(_Request(job, None, fd, direct, job.pos, self.host_addr + job.dest, job.length, job.length, 0))
            return True
        slot = self.slots.take()
        if slot is None:
            return False
        if direct:
            a = self.fds.align
            head = job.pos - job.pos % a
            todo = -(-(job.pos + job.length) // a) * a - head
            req = _Request(job, slot, self.fds.direct, True, head, self.slot_addr[slot], todo,
                           job.pos + job.length - head, job.pos - head)
        else:
            req = _Request(job, slot, self.fds.buffered, False, job.pos, self.slot_addr[slot], job.length, job.length, 0)
        self._queue(req)
        return True

    def _aligned(self, job: Job) -> bool:
        """Whether an O_DIRECT read of ``job`` can go straight into the destination's host memory (its file offset,
        length and destination address all keep the alignment), with no staging buffer and no copy out of one."""
        a = self.fds.align
        return job.pos % a == 0 and job.length % a == 0 and (self.host_addr + job.dest) % a == 0

    def _queue(self, req: _Request) -> None:
        req.iov.base, req.iov.len = req.addr, req.todo
        uid, self.next_id = self.next_id, self.next_id + 1
        self.inflight[uid] = req
        self.ring.queue_readv(req.fd, req.iov, req.pos, uid)
        self.stats.requests += 1

    def complete_all(self) -> None:
        for uid, res in self.ring.completions():
            req = self.inflight.pop(uid, None)
            if req is None:
                raise RuntimeError(f"io_uring completion for unknown user_data {uid}")
            if self.error is None:
                self._complete(req, res)
            elif req.slot is not None:
                self.slots.give_back(req.slot, delivered=False)

    def _complete(self, req: _Request, res: int) -> None:
        if res < 0:
            self._failed(req, -res)
        elif res == 0:
            self.error = _eof_error(self.fds, req.pos, req.need - req.done)
        else:
            self._advance(req, res)

    def _failed(self, req: _Request, err: int) -> None:
        if err in _RETRY:
            self._queue(req)
        elif err == errno.EINVAL and req.direct:
            self.direct_ok, self.stats.direct_refused = False, True
            self._to_buffered(req)
        else:
            self.error = _read_error(self.fds, err, req.pos)

    def _advance(self, req: _Request, res: int) -> None:
        if req.direct:
            self.stats.direct_bytes += res
        elif req.job.cached:
            self.stats.cached_bytes += res
        else:
            self.stats.buffered_bytes += res
        req.done, req.pos, req.addr, req.todo = req.done + res, req.pos + res, req.addr + res, req.todo - res
        if req.done >= req.need:
            self._finished(req)
            return
        self.stats.short_reads += 1
        if req.direct and (req.pos % self.fds.align or req.todo <= 0):
            self._to_buffered(req)
        else:
            self._queue(req)

    def _to_buffered(self, req: _Request) -> None:
        """Continue ``req`` on the buffered descriptor: no alignment needed, and no more than the job's bytes."""
        req.fd, req.direct, req.todo = self.fds.buffered, False, req.need - req.done
        self._queue(req)

    def _finished(self, req: _Request) -> None:
        if req.slot is None:
            return
        data = self.staging[req.slot][req.skip:req.skip + req.job.length]
        self.sink.deliver(data, req.job.dest, req.slot)
        self.slots.give_back(req.slot, delivered=True)

    def drain(self) -> None:
        """Wait for every request in flight (their buffers belong to the caller), discarding the results."""
        while self.inflight:
            self.ring.submit(1)
            for uid, _ in self.ring.completions():
                self.inflight.pop(uid, None)
