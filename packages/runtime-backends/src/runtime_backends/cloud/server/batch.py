"""Server side of a batch: one client session's buffers and programs, and running a request list on the device.

A batch runs in three steps, so that a bad request never leaves half a batch applied:

1. **check** the whole list against the session as it will be after each request (buffer numbers allocated or
   freed earlier in the same list count), the blobs of the body and the session's byte bound;
2. **prepare** what can fail without side effects on existing state: compile and load new programs (through the
   device compiler's compile cache), check launches against the loaded programs' argument counts, allocate new buffers;
   any failure frees what was prepared;
3. **apply** the requests in order. Frees are held back until the end, so a request that fails while running (a
   launch the device refuses) is rolled back to the session as it was, except for the contents that the requests
   before it wrote; the error says which request failed.

Errors are :class:`BatchError` with the HTTP status the server answers: 400 malformed, 404 unknown buffer or program,
409 buffer number already in use, 413 buffer larger than the session bound, 422 compile error or a source the
compile sandbox refuses (``sandbox``), 507 out of session, server or device memory, 500 anything else the device raised.
Buffers count against the server's :class:`~runtime_backends.cloud.server.budget.MemoryBudget` (the session's slot)
from their allocation to their free.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime_backends.cloud.server.budget import BudgetExceeded, MemoryBudget
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.server.sandbox import (
    PUBLIC_HEADERS,
    SourceRefused,
    check_source,
    compiler_limits,
    compiler_message,
)
from runtime_backends.cloud.wire.framing import Blob, BufferPool
from runtime_backends.cloud.wire.protocol import (
    BufferAlloc,
    BufferFree,
    CopyIn,
    CopyOut,
    ProgramAlloc,
    ProgramExec,
    ProgramFree,
    ProtocolError,
    Request,
)
from runtime_core.buffer_spec import BufferSpec
from runtime_core.compiler import CompileError
from runtime_core.device import Compiled
from runtime_core.program import check_launch

__all__ = ["BatchError", "Session", "BatchResult", "BufferRead", "run_batch", "read_chunks", "release"]

log = logging.getLogger(__name__)
ProgramKey = tuple[str, str]


class BatchError(Exception):
    """A batch the server refuses or that failed on the device: ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class _Buffer:
    opaque: Any
    size: int
    spec: BufferSpec


@dataclass
class Session:
    """What one client (one ``session`` cookie) holds on the server: its buffers and loaded programs, kept by the
    session's worker process. ``budget``/``slot``: where its buffers are counted (``None``: not counted)."""

    sid: str
    buffers: dict[int, _Buffer] = field(default_factory=dict)
    programs: dict[ProgramKey, Any] = field(default_factory=dict)
    held_bytes: int = 0
    last_used: float = field(default_factory=time.monotonic)
    budget: MemoryBudget | None = None
    slot: int = 0

    def take(self, nbytes: int, where: str) -> None:
        """Count ``nbytes`` of a new buffer against the server's budget (``BatchError(507)`` when it is full)."""
        if self.budget is not None:
            try:
                self.budget.take(self.slot, nbytes, where)
            except BudgetExceeded as e:
                raise BatchError(507, str(e)) from None

    def give(self, nbytes: int) -> None:
        """A buffer of ``nbytes`` is freed."""
        if self.budget is not None:
            self.budget.give(self.slot, nbytes)

    @property
    def empty(self) -> bool:
        return not self.buffers and not self.programs


@dataclass
class BufferRead:
    """The answer of a batch's last ``CopyOut`` when no later request of the batch writes its buffer: the buffer is
    read when the answer is sent, in pieces (:func:`read_chunks`), instead of being copied whole first. A buffer the
    batch freed after the CopyOut is freed once it has been read (:meth:`done`)."""

    dev: Compiled
    buffer: _Buffer
    session: Session
    free_after: bool = False

    @property
    def nbytes(self) -> int:
        return self.buffer.size

    def done(self) -> None:
        """The answer has been sent (or abandoned): free the buffer if the batch freed it."""
        if self.free_after:
            self.free_after = False
            _free_quietly(self.dev, self.buffer, self.session)


@dataclass(frozen=True)
class BatchResult:
    """``body``: the last CopyOut's bytes (a :class:`BufferRead` when it can be read as it is sent) or the last waited
    ProgramExec's seconds as text (``b""`` when neither); ``signature``: ``(buffers, vals)`` of the last
    ProgramAlloc's program when the device tells them. A body taken from the ``pool`` given to :func:`run_batch` goes
    back to it once sent."""

    body: Blob | bytes | BufferRead
    signature: tuple[int, int] | None = None


@dataclass
class _Plan:
    new_programs: dict[ProgramKey, Any] = field(default_factory=dict)
    new_buffers: dict[int, _Buffer] = field(default_factory=dict)  # by index of the BufferAlloc request
    pool: BufferPool | None = None


def run_batch(dev: Compiled, session: Session, requests: list[Request], blobs: Mapping[str, Blob],
              limits: Limits, pool: BufferPool | None = None) -> BatchResult:
    """Check, prepare and apply ``requests`` on ``dev`` for ``session`` (see the module docstring); ``BatchError``.
    CopyOut answers are copied into buffers from ``pool`` when given."""
    _check(session, requests, blobs, limits)
    plan = _prepare(dev, session, requests, blobs)
    plan.pool = pool
    try:
        return _apply(dev, session, requests, blobs, plan)
    finally:
        session.last_used = time.monotonic()


def release(dev: Compiled, session: Session) -> None:
    """Free every buffer and program of ``session`` (it ended or timed out). Failures are logged, never raised."""
    for buf in session.buffers.values():
        _free_quietly(dev, buf, session)
    session.buffers.clear()
    session.programs.clear()
    session.held_bytes = 0


class _Names:
    """The session's buffer numbers and programs as they will be after the requests checked so far: the changes of
    the batch over the session's own tables (so checking costs per request, not per buffer held)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.sizes: dict[int, int | None] = {}  # None: freed by the batch
        self.programs: dict[ProgramKey, bool] = {}
        self.held = session.held_bytes

    def size(self, num: int) -> int | None:
        if num in self.sizes:
            return self.sizes[num]
        buf = self.session.buffers.get(num)
        return None if buf is None else buf.size

    def loaded(self, key: ProgramKey) -> bool:
        return self.programs[key] if key in self.programs else key in self.session.programs


def _check(session: Session, requests: list[Request], blobs: Mapping[str, Blob], limits: Limits) -> None:
    names = _Names(session)
    for i, r in enumerate(requests):
        if isinstance(r, BufferAlloc):
            _check_alloc(names, r, i, limits)
        elif isinstance(r, BufferFree):
            names.held -= _size(names, r.buffer_num, i, r)
            names.sizes[r.buffer_num] = None
        elif isinstance(r, CopyOut):
            _size(names, r.buffer_num, i, r)
        elif isinstance(r, CopyIn):
            size, data = _size(names, r.buffer_num, i, r), _blob(blobs, r.datahash, i, r)
            if len(data) > size:
                raise BatchError(400, f"{_where(i, r)}: {len(data)} bytes do not fit in buffer {r.buffer_num} of "
                                      f"{size} bytes")
        elif isinstance(r, ProgramAlloc):
            _blob(blobs, r.datahash, i, r)
            names.programs[(r.name, r.datahash)] = True
        elif isinstance(r, ProgramFree):
            names.programs[_program_key(names, r, i)] = False
        elif isinstance(r, ProgramExec):
            _program_key(names, r, i)
            for num in r.bufs:
                _size(names, num, i, r)


def _check_alloc(names: _Names, r: BufferAlloc, i: int, limits: Limits) -> None:
    if names.size(r.buffer_num) is not None:
        raise BatchError(409, f"{_where(i, r)}: buffer {r.buffer_num} is already allocated in this session")
    try:
        r.options.to_core()
    except ProtocolError as e:
        raise BatchError(400, f"{_where(i, r)}: {e}") from None
    if r.size > limits.max_session_bytes:
        raise BatchError(413, f"{_where(i, r)}: {r.size} bytes exceed the {limits.max_session_bytes} bytes a session "
                              f"may hold")
    if names.held + r.size > limits.max_session_bytes:
        raise BatchError(507, f"{_where(i, r)}: the session would hold {names.held + r.size} bytes, the limit is "
                              f"{limits.max_session_bytes}; free buffers first")
    names.sizes[r.buffer_num] = r.size
    names.held += r.size


def _size(names: _Names, num: int, i: int, r: Request) -> int:
    if (size := names.size(num)) is None:
        raise BatchError(404, f"{_where(i, r)}: buffer {num} is not allocated in this session (never allocated, "
                              f"already freed, or lost when the server restarted or the session timed out)")
    return size


def _blob(blobs: Mapping[str, Blob], datahash: str, i: int, r: Request) -> Blob:
    if datahash not in blobs:
        raise BatchError(400, f"{_where(i, r)}: the body holds no blob with datahash {datahash}")
    return blobs[datahash]


def _program_key(names: _Names, r: ProgramFree | ProgramExec, i: int) -> ProgramKey:
    key = (r.name, r.datahash)
    if not names.loaded(key):
        raise BatchError(404, f"{_where(i, r)}: program {r.name!r} ({r.datahash[:12]}...) is not loaded in this "
                              f"session")
    return key


def _prepare(dev: Compiled, session: Session, requests: list[Request], blobs: Mapping[str, Blob]) -> _Plan:
    plan = _Plan()
    try:
        for i, r in enumerate(requests):
            if isinstance(r, ProgramAlloc) and (key := (r.name, r.datahash)) not in session.programs:
                if key not in plan.new_programs:
                    plan.new_programs[key] = _load(dev, r, blobs[r.datahash], i)
            elif isinstance(r, ProgramExec):
                key = (r.name, r.datahash)
                _check_launch(plan.new_programs.get(key, session.programs.get(key)), r, i)
            elif isinstance(r, BufferAlloc):
                plan.new_buffers[i] = _alloc(dev, session, r, _where(i, r))
    except BaseException:
        _discard(dev, session, plan)
        raise
    return plan


def _alloc(dev: Compiled, session: Session, r: BufferAlloc, where: str) -> _Buffer:
    spec = r.options.to_core()
    session.take(r.size, where)
    try:
        return _Buffer(_device_call(dev.allocator.alloc, r.size, spec, where=where), r.size, spec)
    except BaseException:
        session.give(r.size)
        raise


def _load(dev: Compiled, r: ProgramAlloc, blob: Blob, i: int) -> Any:
    where = _where(i, r)
    if dev.compiler is None or dev.runtime is None:
        raise BatchError(400, f"{where}: device {dev.device} runs no programs (it has no compiler or runtime)")
    try:
        source = bytes(blob).decode("utf-8")
        check_source(source, PUBLIC_HEADERS.get(dev.device.split(":")[0], frozenset()))
    except UnicodeDecodeError as e:
        raise BatchError(400, f"{where}: program source is not UTF-8: {e}") from None
    except SourceRefused as e:
        raise BatchError(422, f"{where}: compile refused: {e}") from None
    try:
        with compiler_limits():
            lib = dev.compiler.compile_cached(source)
    except CompileError as e:
        raise BatchError(422, f"{where}: compile error:\n{compiler_message(e)}") from None
    except Exception as e:
        raise _device_error(e, where) from None
    return _device_call(dev.runtime, r.name, lib, where=where)


def _check_launch(prg: Any, r: ProgramExec, i: int) -> None:
    """Refuse a launch whose buffer/val counts or sizes the loaded program says are wrong, before anything runs."""
    if (counts := arg_counts(prg)) is not None:
        try:
            check_launch(r.name, r.bufs, r.vals, *counts, r.global_size or (1,), r.local_size or (1,))
        except ValueError as e:
            raise BatchError(400, f"{_where(i, r)}: {e}") from None


@dataclass
class _Journal:
    """What a batch changed in the session's tables, to undo it if a later request fails."""

    allocated: list[tuple[int, _Buffer]] = field(default_factory=list)
    freed: list[tuple[int, _Buffer]] = field(default_factory=list)  # held back until the batch succeeds
    loaded: list[ProgramKey] = field(default_factory=list)
    dropped: dict[ProgramKey, Any] = field(default_factory=dict)


def _apply(dev: Compiled, session: Session, requests: list[Request], blobs: Mapping[str, Blob],
           plan: _Plan) -> BatchResult:
    journal = _Journal()
    body: Blob | bytes | BufferRead = b""
    signature = None
    streamed = _streamed_copyout(requests)
    for i, r in enumerate(requests):
        try:
            out: Blob | bytes | BufferRead | None
            if i == streamed and isinstance(r, CopyOut):
                out = BufferRead(dev, session.buffers[r.buffer_num], session)
            else:
                out = _apply_one(dev, session, r, blobs, plan, i, journal)
        except BaseException:
            _undo(dev, session, plan, journal)
            _give(plan, body)
            raise
        if isinstance(r, ProgramAlloc):
            signature = arg_counts(session.programs[(r.name, r.datahash)])
        if out is not None:
            _give(plan, body)  # an earlier answer that this one replaces
            body = out
    for _, buf in journal.freed:
        if isinstance(body, BufferRead) and buf is body.buffer:
            body.free_after = True
        else:
            _free_quietly(dev, buf, session)
    if isinstance(body, BufferRead):
        _device_call(dev.synchronize, where="the answer's CopyOut")
    return BatchResult(body, signature)


def _streamed_copyout(requests: list[Request]) -> int | None:
    """Index of the CopyOut whose buffer can be read while its answer is sent: the batch's last output, with no later
    request that could write its buffer (a free is held back until it has been read)."""
    for i in range(len(requests) - 1, -1, -1):
        r = requests[i]
        if isinstance(r, CopyOut):
            later = requests[i + 1:]
            return None if any(_names_buffer(x, r.buffer_num) for x in later) else i
        if isinstance(r, ProgramExec) and r.wait:
            return None
    return None


def _names_buffer(r: Request, num: int) -> bool:
    if isinstance(r, CopyIn):
        return r.buffer_num == num
    return isinstance(r, ProgramExec) and num in r.bufs


def read_chunks(read: BufferRead, chunk_bytes: int) -> Iterator[memoryview]:
    """The bytes of ``read``'s buffer in pieces (each view is valid until the next is taken): the device's own memory
    where the allocator lends host views (``capabilities.host_view``: no copy), else copies of at most
    ``chunk_bytes`` through offset views (``capabilities.views``), else one copy of the whole."""
    dev, buf = read.dev, read.buffer
    allocator = dev.allocator
    if allocator.capabilities.host_view:
        yield allocator.host_view(buf.opaque, buf.size)
        return
    if buf.size <= chunk_bytes or not allocator.capabilities.views:
        whole = bytearray(buf.size)
        allocator.copyout(memoryview(whole), buf.opaque)
        yield memoryview(whole)
        return
    piece = memoryview(bytearray(chunk_bytes))
    for offset in range(0, buf.size, chunk_bytes):
        n = min(chunk_bytes, buf.size - offset)
        allocator.copyout(piece[:n], allocator.offset(buf.opaque, n, offset))
        yield piece[:n]


def _apply_one(dev: Compiled, session: Session, r: Request, blobs: Mapping[str, Blob], plan: _Plan, i: int,
               journal: _Journal) -> Blob | bytes | None:
    where = _where(i, r)
    if isinstance(r, BufferAlloc):
        buf = session.buffers[r.buffer_num] = plan.new_buffers.pop(i)
        session.held_bytes += r.size
        journal.allocated.append((r.buffer_num, buf))
    elif isinstance(r, BufferFree):
        buf = session.buffers.pop(r.buffer_num)
        session.held_bytes -= buf.size
        journal.freed.append((r.buffer_num, buf))
    elif isinstance(r, CopyIn):
        _copy_in(dev, session.buffers[r.buffer_num], memoryview(blobs[r.datahash]), where)
    elif isinstance(r, CopyOut):
        buf = session.buffers[r.buffer_num]
        out = plan.pool.take(buf.size) if plan.pool is not None else bytearray(buf.size)
        try:
            _device_call(dev.synchronize, where=where)
            _device_call(dev.allocator.copyout, memoryview(out), buf.opaque, where=where)
        except BaseException:
            _give(plan, out)
            raise
        return out
    elif isinstance(r, ProgramAlloc):
        key = (r.name, r.datahash)
        if key not in session.programs:  # new, or freed earlier in this batch and allocated again
            session.programs[key] = plan.new_programs.pop(key) if key in plan.new_programs else journal.dropped[key]
            journal.loaded.append(key)
    elif isinstance(r, ProgramFree):
        key = (r.name, r.datahash)
        journal.dropped.setdefault(key, session.programs.pop(key))
    elif isinstance(r, ProgramExec):
        return _exec(session, r, where)
    return None


def _copy_in(dev: Compiled, buf: _Buffer, data: memoryview, where: str) -> None:
    """Copy ``data`` into the start of ``buf``: the whole buffer, or a prefix of it (a client's view at offset 0)
    through an offset view, or by rewriting the whole buffer where the allocator has no views."""
    allocator = dev.allocator
    if data.nbytes == buf.size:
        _device_call(allocator.copyin, buf.opaque, data, where=where)
    elif allocator.capabilities.views:
        _device_call(allocator.copyin, allocator.offset(buf.opaque, data.nbytes, 0), data, where=where)
    else:
        whole = bytearray(buf.size)
        _device_call(dev.synchronize, where=where)
        _device_call(allocator.copyout, memoryview(whole), buf.opaque, where=where)
        whole[:data.nbytes] = data
        _device_call(allocator.copyin, buf.opaque, memoryview(whole), where=where)


def _exec(session: Session, r: ProgramExec, where: str) -> bytes | None:
    prg = session.programs[(r.name, r.datahash)]
    bufs = [session.buffers[n].opaque for n in r.bufs]
    sizes = {k: v for k, v in (("global_size", r.global_size), ("local_size", r.local_size)) if v is not None}
    seconds = _device_call(prg, *bufs, vals=r.vals, wait=r.wait, where=where, **sizes)
    return str(seconds).encode() if seconds is not None else None


def _undo(dev: Compiled, session: Session, plan: _Plan, journal: _Journal) -> None:
    """Back to the session's tables as they were before the batch (buffer contents written so far stay)."""
    new = {id(buf) for _, buf in journal.allocated}
    for num, buf in reversed(journal.allocated):  # freed on the device whether or not the batch freed it again
        if session.buffers.get(num) is buf:
            del session.buffers[num]
            session.held_bytes -= buf.size
        _free_quietly(dev, buf, session)
    for num, buf in journal.freed:
        if id(buf) not in new:  # a buffer the batch both allocated and freed is not brought back
            session.buffers[num] = buf
            session.held_bytes += buf.size
    for key in journal.loaded:
        session.programs.pop(key, None)
    session.programs.update(journal.dropped)
    _discard(dev, session, plan)


def _give(plan: _Plan, body: Blob | bytes | BufferRead) -> None:
    if plan.pool is not None and isinstance(body, memoryview):
        plan.pool.give([body])


def _discard(dev: Compiled, session: Session, plan: _Plan) -> None:
    for buf in plan.new_buffers.values():
        _free_quietly(dev, buf, session)
    plan.new_buffers.clear()
    plan.new_programs.clear()


def _free_quietly(dev: Compiled, buf: _Buffer, session: Session) -> None:
    try:
        dev.allocator.free(buf.opaque, buf.size, buf.spec)
    except Exception as e:  # one bad free must not keep the rest of the session's memory
        log.warning("session %s: freeing %d bytes failed: %s", session.sid[:8], buf.size, e)
    session.give(buf.size)


def arg_counts(prg: Any) -> tuple[int, int] | None:
    """``(buffers, vals)`` a loaded program takes (``Program.arg_counts``), ``None`` when it cannot tell."""
    counts = getattr(prg, "arg_counts", None)
    return counts if isinstance(counts, tuple) and len(counts) == 2 and all(type(c) is int for c in counts) else None


def _where(i: int, r: Request) -> str:
    return f"request {i} ({type(r).__name__})"


def _device_call(fn: Any, *args: Any, where: str, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with the device's exceptions turned into a :class:`BatchError` of the right status."""
    try:
        return fn(*args, **kwargs)
    except BatchError:
        raise
    except Exception as e:
        raise _device_error(e, where) from e


def _device_error(e: Exception, where: str) -> BatchError:
    if isinstance(e, CompileError):
        return BatchError(422, f"{where}: compile error:\n{compiler_message(e)}")
    if isinstance(e, MemoryError):
        return BatchError(507, f"{where}: the device is out of memory: {e}")
    if isinstance(e, (ValueError, TypeError)):
        return BatchError(400, f"{where}: the device refused it: {type(e).__name__}: {e}")
    log.exception("%s failed on the device", where)
    return BatchError(500, f"{where}: the device failed: {type(e).__name__}: {e}")
