"""Session workers: the device work of each CLOUD session runs in a process of its own, so a kernel that crashes
(SIGSEGV, SIGBUS, an abort in a driver) or runs too long takes down only its own session.

The server (:mod:`app`) keeps the HTTP side -- connections, bodies, verification of every blob's digest -- and hands
each verified batch to the session's worker over a socket pair; the worker opens its own instance of the device,
holds the session's buffers and programs, runs the batch (:mod:`batch`) and answers. A worker is forked from a fork
server that has imported the runtime (``zygote``), so one starts in milliseconds and inherits no thread or device
state of the server; the server keeps one started ahead.

Messages between server and worker (both this package's own code; the data was checked by the server):

* server -> worker: ``<QB`` (bytes of the batch, flags), then the body's blobs framed as on the wire (digest, ``<Q``
  length, bytes), the request list last. The client connection's socket travels with the ``<QB`` (``SCM_RIGHTS``;
  flag 1; flag 2: the answer closes the connection), and so does the ``memfd`` of every large blob the server
  received into a ``SharedBuffer``, in frame order: such a frame has the ``SHARED_BLOB`` bit set in its length and no
  bytes, and the worker maps the blob instead of receiving a copy. The socket closing ends the session: the worker
  frees everything and exits.
* worker -> server: once the batch has run, ``<HIQ`` (HTTP status, bytes of a JSON meta record, bytes of the
  answer's body) and the meta record (``{"signature": [buffers, vals] | null, "held": bytes, "empty": bool, "at": monotonic
  seconds when the batch had run}``), then
  ``<?``: whether the whole answer went out. The worker writes the HTTP answer itself to the client's connection --
  an error's text, the waited launch's seconds, or the last ``CopyOut`` straight from the device's memory (in pieces
  of ``CHUNK_BYTES`` where the device lends no host view): a small answer the socket takes at once goes out first
  and both records follow in one message; otherwise the ``<HIQ`` goes first (the batch's deadline ends when it has
  run, not when the client has taken its answer). Neither the answer nor a large blob passes through the server
  process: an answer reaches the client without a hop through it.
* lending (flag 4): the message starts with ``<QI`` (connection id, bytes of a head template) and the template
  (``lend``); after an answer that went out whole (and is not an error, which closes the connection) the worker keeps
  the client's connection and serves that session's next requests on it itself -- no message to the server at all --
  until it gives the connection back over its returns socket. While it runs a lent request, ``SIGALRM`` (an interval
  timer of ``--max-kernel-seconds``, left at its default action) ends it at the batch deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import mmap
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol

from runtime_backends.cloud.server.batch import BatchError, BufferRead, Session, read_chunks, release, run_batch
from runtime_backends.cloud.server.budget import MemoryBudget
from runtime_backends.cloud.server.lend import RETURN, Back, Board, HeadTemplate, LentConnections
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.server.transport import CLOSING_STATUS
from runtime_backends.cloud.wire.framing import HEADER_BYTES, Blob, Bytes, FramingError, decode_body
from runtime_backends.cloud.wire.literal import decode_requests
from runtime_backends.cloud.wire.protocol import SIGNATURE_HEADER, ProtocolError, Request
from runtime_core.config import environ_snapshot, replace_environ
from runtime_core.device import Compiled, Device

__all__ = ["Worker", "WorkerGone", "WorkerReply", "Zygote", "LentConnection", "lends", "CHUNK_BYTES", "SHARED_BLOB",
           "MAX_SHARED_BLOBS", "serve_session", "describe_exit"]

log = logging.getLogger(__name__)
CHUNK_BYTES = 64 << 20
"""Largest piece of a large answer read from a device without host views: what an answer costs beyond the buffer."""
SHARED_BLOB = 1 << 63
"""Flag in a frame's length: the blob's bytes are in the next descriptor passed with the message."""
MAX_SHARED_BLOBS = 64
"""Blobs of one batch passed by descriptor at most (the rest are copied)."""
_LENGTH = struct.Struct("<Q")
_MESSAGE = struct.Struct("<QB")  # a batch's bytes, flags
_CLIENT, _CLOSE, _LEND = 1, 2, 4  # flags: the first descriptor is the client's connection; the answer closes it;
# the connection is lent after the answer (the message starts with _LENDING and the template)
_LENDING = struct.Struct("<QI")  # connection id, bytes of the head template
_REPLY = struct.Struct("<HIQ")
_WRITTEN = struct.Struct("<?")
_DECODED_ENTRIES = 256
_STREAM_LIMIT = 4 << 20  # bytes the server's reader of a worker buffers before pausing it
_JOIN_BELOW = 64 << 10  # batches smaller than this go to the worker in one send
_SEND_PIECE = 4 << 20  # a large answer goes to the client in pieces of this size, each within the send deadline


# the worker process
def serve_session(sock: socket.socket, device: str, limits: Limits, budget: MemoryBudget, slot: int,
                  environ: dict[str, str], board: Board, returns: socket.socket) -> None:
    """A worker's main: take the server's environment ``environ`` (as it is now, not as it was when the fork server
    started), open ``device``, then run the batches that arrive on ``sock`` -- and on the connections the server lends
    it (``lend``: ``board`` row ``slot``, given back on ``returns``) -- for one session until ``sock`` closes; the
    session's buffers count in ``budget``'s ``slot``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C of a server in a terminal: the server ends its workers
    replace_environ(environ)
    try:
        dev: Compiled = Device.backend_class(device.partition(":")[0])(device)  # type: ignore[call-arg]
    except Exception as e:
        message = f"the session's worker cannot open {device}: {type(e).__name__}: {e}".encode()
        sock.sendall(_REPLY.pack(503, 0, len(message)) + message)
        return
    session = Session(f"worker-{os.getpid()}", budget=budget, slot=slot)
    decoded: OrderedDict[str, list[Request]] = OrderedDict()
    epoll = select.epoll()
    epoll.register(sock.fileno(), select.EPOLLIN)

    def serve_lent(client: socket.socket, conn_id: int, body: memoryview) -> Back | None:
        board.serving(slot, conn_id)
        try:
            answer = _execute_lent(dev, session, limits, decoded, body)
        finally:
            board.served(slot, session.held_bytes, session.empty)
        if not _answer_lent(client, answer, limits):
            return Back.CUT
        if answer.status >= CLOSING_STATUS:
            return Back.CLOSE
        return Back.REQUEST if session.empty else None  # the client ended its session: the server ends it
    lent = LentConnections(epoll, returns, serve_lent, limits.max_header_bytes, limits.idle_timeout_s)
    sock.sendall(_REPLY.pack(200, 0, 0))  # ready
    try:
        while True:
            for fd, _ in epoll.poll(lent.timeout()):
                if fd in lent:
                    lent.ready(fd)
                elif (batch := _receive(sock)) is None:
                    return
                else:
                    _run(sock, dev, session, limits, decoded, lent, *batch)
            lent.expire()
    except (BrokenPipeError, ConnectionResetError, EOFError):  # the server ended the session mid-answer
        log.info("session worker %d: the server closed its socket", os.getpid())
    finally:
        release(dev, session)
        dev.finalize()


def _receive(sock: socket.socket) -> tuple[memoryview, list[int], int] | None:
    """The next batch message, the descriptors that came with it and its flags; ``None`` when the server closed the
    socket."""
    head, fds, _, _ = socket.recv_fds(sock, _MESSAGE.size, MAX_SHARED_BLOBS + 1)
    if not head:
        return None
    try:
        rest = _read_exactly(sock, _MESSAGE.size - len(head))
        length, flags = _MESSAGE.unpack(head + bytes(rest)) if rest is not None else (0, 0)
        body = _read_exactly(sock, length) if rest is not None else None
        if body is None:
            raise EOFError("the server closed the worker's socket inside a batch")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return body, fds, flags


def _read_exactly(sock: socket.socket, n: int) -> memoryview | None:
    buf = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = sock.recv_into(buf[got:])
        if k == 0:
            return None
        got += k
    return buf


def _run(sock: socket.socket, dev: Compiled, session: Session, limits: Limits,
         decoded: OrderedDict[str, list[Request]], lent: LentConnections, message: memoryview, fds: list[int],
         flags: int) -> None:
    client = socket.socket(fileno=fds.pop(0)) if flags & _CLIENT else None
    lend: tuple[int, HeadTemplate] | None = None
    if flags & _LEND:
        conn_id, n = _LENDING.unpack_from(message)
        lend = conn_id, HeadTemplate.decode(bytes(message[_LENDING.size:_LENDING.size + n]))
        message = message[_LENDING.size + n:]
    try:
        blobs, last = _split(message, fds)
        answer = _execute(dev, session, limits, decoded, blobs, last, bool(flags & _CLOSE))
        try:
            whole = _answer(sock, client, answer, session, limits)
        finally:
            answer.done()
        if whole and client is not None and lend is not None and answer.status < CLOSING_STATUS:
            lent.add(client, *lend)
            client = None
    finally:
        if client is not None:
            client.close()  # this process's descriptor only: the connection stays the server's


def _execute(dev: Compiled, session: Session, limits: Limits, decoded: OrderedDict[str, list[Request]],
             blobs: dict[str, Blob], last: str, close: bool) -> _Answer:
    """Run the batch whose request list is blob ``last``: its answer, or the error's."""
    try:
        requests = _decode(decoded, last, blobs[last], limits)
        result = run_batch(dev, session, requests, blobs, limits)
    except BatchError as e:
        text = e.message.encode()
        return _Answer(e.status, None, [text], len(text), close)
    body = result.body
    if isinstance(body, BufferRead):
        return _Answer(200, result.signature, read_chunks(body, CHUNK_BYTES), body.nbytes, close, body)
    return _Answer(200, result.signature, [body], memoryview(body).nbytes, close)


def _execute_lent(dev: Compiled, session: Session, limits: Limits, decoded: OrderedDict[str, list[Request]],
                  body: memoryview) -> _Answer:
    """Verify and run a body that arrived on a lent connection, as the server would have: within the batch deadline
    (``SIGALRM``, left at its default action, ends the worker: the server answers ``504``)."""
    try:
        verified = decode_body(body, limits)
    except FramingError as e:
        text = f"bad batch body: {e}".encode()
        return _Answer(400, None, [text], len(text), False)
    signal.setitimer(signal.ITIMER_REAL, limits.max_kernel_seconds)
    try:
        return _execute(dev, session, limits, decoded, verified.blobs, verified.requests_hash, False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _answer_lent(client: socket.socket, answer: _Answer, limits: Limits) -> bool:
    """Write ``answer`` to a lent connection; whether all of it went out."""
    try:
        head = answer.head()
        if answer.length < _JOIN_BELOW:
            whole = b"".join([head, *answer.pieces])
            done = _send_now(client, whole)
            return done == len(whole) or _write(client, [memoryview(whole)[done:]], limits)
        return _write(client, itertools.chain([head], answer.pieces), limits)
    finally:
        answer.done()


@dataclass
class _Answer:
    """An HTTP answer to write: ``status``, the loaded program's ``signature`` header, ``length`` bytes of body in
    ``pieces``, and whether the connection closes after it."""

    status: int
    signature: tuple[int, int] | None
    pieces: Iterable[Bytes]
    length: int
    close: bool
    read: BufferRead | None = None

    def done(self) -> None:
        """The answer is sent or abandoned: a buffer it was read from may be freed."""
        if self.read is not None:
            self.read.done()

    def head(self) -> bytes:
        """The status line and headers (RFC 9112 section 4), as the server's transport writes its own answers."""
        content_type = "application/octet-stream" if self.status == 200 else "text/plain; charset=utf-8"
        lines = [f"HTTP/1.1 {self.status} {HTTPStatus(self.status).phrase}", f"content-length: {self.length}",
                 f"content-type: {content_type}"]
        if self.signature is not None:
            lines.append(f"{SIGNATURE_HEADER}: buffers={self.signature[0]}, vals={self.signature[1]}")
        if self.close or self.status >= CLOSING_STATUS:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _answer(sock: socket.socket, client: socket.socket | None, answer: _Answer, session: Session,
            limits: Limits) -> bool:
    """Write the answer to the client's connection and tell the server: in one message when the answer went out at
    once (the usual small answer), else the status first (the batch's deadline ends when it has run, not when the
    client has taken its answer), then whether all of it went out (returned)."""
    meta = json.dumps({"signature": answer.signature, "held": session.held_bytes, "empty": session.empty,
                       "at": time.monotonic()}).encode()
    reply = _REPLY.pack(answer.status, len(meta), answer.length) + meta
    if client is None:
        sock.sendall(reply + _WRITTEN.pack(False))
        return False
    head = answer.head()
    rest: Iterable[Bytes]
    if answer.length < _JOIN_BELOW:
        whole = b"".join([head, *answer.pieces])
        done = _send_now(client, whole)
        if done == len(whole):
            sock.sendall(reply + _WRITTEN.pack(True))
            return True
        rest = [memoryview(whole)[done:]]
    else:
        rest = itertools.chain([head], answer.pieces)
    sock.sendall(reply)
    whole_sent = _write(client, rest, limits)
    sock.sendall(_WRITTEN.pack(whole_sent))
    return whole_sent


def _send_now(client: socket.socket, data: bytes) -> int:
    """Bytes of ``data`` the client's socket takes without waiting (0 when it takes none, or is gone)."""
    client.settimeout(0.0)  # the descriptor is the server's non-blocking socket: it stays non-blocking
    try:
        return client.send(data)
    except OSError:  # full, or the client is gone: _write says which
        return 0


def _write(client: socket.socket, pieces: Iterable[Bytes], limits: Limits) -> bool:
    """Write ``pieces`` to ``client``; each send must be taken within ``limits.body_timeout_s``. ``False`` when the
    client left or stopped taking them."""
    client.settimeout(limits.body_timeout_s)  # a timeout, never blocking mode: the server shares the descriptor
    try:
        for piece in pieces:
            view = memoryview(piece).cast("B")
            for at in range(0, view.nbytes, _SEND_PIECE):
                client.sendall(view[at:at + _SEND_PIECE])
    except OSError as e:
        log.info("session worker %d: answer cut: %s", os.getpid(), e)
        return False
    return True


def _split(message: memoryview, fds: list[int]) -> tuple[dict[str, Blob], str]:
    """The blobs of a message (already verified by the server) and the datahash of the last (the request list);
    those passed by descriptor are mapped (and the descriptors closed)."""
    blobs: dict[str, Blob] = {}
    at, last = 0, ""
    shared = iter(fds)
    try:
        while at < message.nbytes:
            (n,) = _LENGTH.unpack_from(message, at + 32)
            last = bytes(message[at:at + 32]).hex()
            if n & SHARED_BLOB:
                n &= ~SHARED_BLOB
                blobs[last] = memoryview(mmap.mmap(next(shared), n, mmap.MAP_SHARED | mmap.MAP_POPULATE,
                                                   mmap.PROT_READ))
                at += HEADER_BYTES
            else:
                blobs[last] = message[at + HEADER_BYTES:at + HEADER_BYTES + n]
                at += HEADER_BYTES + n
    finally:
        for fd in fds:
            os.close(fd)
    return blobs, last


def _decode(cache: OrderedDict[str, list[Request]], key: str, text: Blob, limits: Limits) -> list[Request]:
    """Request lists are remembered by digest: a client repeating a batch is not parsed again (requests are
    immutable)."""
    if (requests := cache.get(key)) is not None:
        cache.move_to_end(key)
        return requests
    try:
        requests = decode_requests(text, limits)
    except ProtocolError as e:
        raise BatchError(400, f"bad request list: {e}") from None
    cache[key] = requests
    if len(cache) > _DECODED_ENTRIES:
        cache.popitem(last=False)
    return requests


# the server's side
class WorkerGone(Exception):
    """The worker died or was stopped while running a batch: the message says why, for the session's answer;
    ``status`` is the HTTP status to answer (``504`` when it was stopped at the batch deadline, else ``500``)."""

    def __init__(self, message: str, status: int = 500) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class WorkerReply:
    """A worker's answer: ``status``, ``meta`` (see the module docstring), ``length`` bytes of body to take from
    :meth:`Worker.body` (all of it, before the next batch)."""

    status: int
    meta: dict[str, Any]
    length: int


class Zygote:
    """The server's end of its fork server (``zygote``): starts session workers and tells when they exit. Use from
    one event loop: :meth:`attach` it first."""

    def __init__(self, device: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = [sys.executable, "-m", "runtime_backends.cloud.server.zygote", str(theirs.fileno()), device]
        self.process = subprocess.Popen(cmd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._started: deque[asyncio.Future[int]] = deque()
        self._exits: dict[int, asyncio.Future[int | None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take the zygote's messages on ``loop``."""
        self._loop = loop
        loop.add_reader(self._sock, self._on_message)

    async def spawn(self, device: str, limits: Limits, budget: MemoryBudget, board: Board,
                    slot: int) -> tuple[int, socket.socket, socket.socket]:
        """A new worker for ``device`` with budget slot ``slot``: its pid, the server's end of its socket and of the
        socket it gives lent connections back on."""
        loop = self._running_loop()
        ours, theirs = socket.socketpair()
        returns, their_returns = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = {"device": device, "limits": dataclasses.asdict(limits), "slot": slot, "budget_total": budget.total,
                   "environ": environ_snapshot()}
        started = loop.create_future()
        self._started.append(started)
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode()],
                            [theirs.fileno(), budget.fd, board.fd, their_returns.fileno()])
        except OSError as e:
            self._started.remove(started)
            ours.close()
            returns.close()
            raise WorkerGone(f"the server's fork server is gone ({e}); restart the server", 503) from None
        finally:
            theirs.close()
            their_returns.close()
        pid = await started
        self._exit(pid)
        return pid, ours, returns

    def watch(self, sock: socket.socket, callback: Callable[[], None]) -> None:
        """Call ``callback`` on this zygote's loop whenever ``sock`` is readable (until :meth:`unwatch`)."""
        self._running_loop().add_reader(sock, callback)

    def unwatch(self, sock: socket.socket) -> None:
        if self._loop is not None and not self._loop.is_closed() and sock.fileno() >= 0:
            self._loop.remove_reader(sock)

    def exit_future(self, pid: int) -> asyncio.Future[int | None]:
        """A future of worker ``pid``'s exit code (``None``: unknown, the fork server is gone)."""
        return self._exit(pid)

    def _exit(self, pid: int) -> asyncio.Future[int | None]:
        if pid not in self._exits:
            self._exits[pid] = self._running_loop().create_future()
        return self._exits[pid]

    async def exit_code(self, pid: int, timeout_s: float) -> int | None:
        """Worker ``pid``'s exit code once it has exited (``None`` if it has not within ``timeout_s``)."""
        try:
            return await asyncio.wait_for(asyncio.shield(self._exit(pid)), timeout_s)
        except asyncio.TimeoutError:
            return None

    def exited(self, pid: int) -> bool:
        """Whether worker ``pid`` has exited (its pid may since name another process)."""
        return pid in self._exits and self._exits[pid].done()

    def forget(self, pid: int) -> None:
        """Drop what is known of worker ``pid`` (it has exited and nobody waits on it)."""
        self._exits.pop(pid, None)

    def _on_message(self) -> None:
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._gone()
                return
            message = json.loads(data)
            if "started" in message:
                self._started.popleft().set_result(message["started"])
            elif "exited" in message:
                exit_future = self._exit(message["exited"])
                if not exit_future.done():
                    exit_future.set_result(message["code"])

    def _gone(self) -> None:
        """The zygote exited: nothing more starts, and exits are not reported any more."""
        if self._loop is not None:
            self._loop.remove_reader(self._sock)
        while self._started:
            self._started.popleft().set_exception(WorkerGone("the server's fork server exited; restart the server",
                                                             503))
        for exit_future in self._exits.values():
            if not exit_future.done():
                exit_future.set_result(None)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("Zygote.attach(loop) must be called before workers are started")
        return self._loop

    def close(self) -> None:
        """End the zygote (workers end when their sockets close) and wait for it."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._sock)
        self._sock.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


class Worker:
    """The server's handle of one worker process (see the module docstring); ``slot`` is its budget slot.

    Make one with :meth:`start`; then per batch :meth:`run` and :meth:`body`; :meth:`close` and :meth:`reap` at the
    end. Use from the server's event loop only.

    ``lent``: the connections lent to the worker (``lend``), by id; each comes back through
    :meth:`LentConnection.give_back` -- when the worker gives it back, or when the worker has exited -- or, when the
    worker died running one of its requests, :meth:`LentConnection.fail` answers that request. ``on_exit`` is
    called once the worker has exited, after that; ``on_return`` after the worker gave connections back.
    """

    def __init__(self, zygote: Zygote, pid: int, sock: socket.socket, returns: socket.socket, budget: MemoryBudget,
                 board: Board, slot: int, max_kernel_seconds: float) -> None:
        self.zygote, self.pid, self.budget, self.board, self.slot = zygote, pid, budget, board, slot
        self.max_kernel_seconds = max_kernel_seconds
        self.lent: dict[int, LentConnection] = {}
        self.on_exit: Callable[[Worker], None] | None = None
        self.on_return: Callable[[Worker], None] | None = None
        board.clear(slot)
        self._returns = returns
        returns.setblocking(False)
        zygote.watch(returns, self._on_return)
        zygote.exit_future(pid).add_done_callback(self._exited)
        self._sock = sock
        # batches go out through a second descriptor of the same socket with loop.sock_sendall, straight from the
        # received blobs: a stream writer would copy a large body into its buffer and shift that buffer per send
        self._out = socket.socket(fileno=os.dup(sock.fileno()))
        self._out.setblocking(False)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.stopped_because = ""
        self.overdue = False  # stopped at a batch's deadline

    @classmethod
    async def start(cls, zygote: Zygote, device: str, limits: Limits, budget: MemoryBudget, board: Board,
                    slot: int) -> Worker:
        """A worker that has opened ``device``; :class:`WorkerGone` (``503``) if it could not."""
        pid, sock, returns = await zygote.spawn(device, limits, budget, board, slot)
        worker = cls(zygote, pid, sock, returns, budget, board, slot, limits.max_kernel_seconds)
        worker._reader, worker._writer = await asyncio.open_connection(sock=sock, limit=_STREAM_LIMIT)
        reply = await worker._head()
        if reply.status != 200:
            message = b"".join([piece async for piece in worker.body(reply.length)]).decode("utf-8", "replace")
            worker.close()
            await worker.reap(10.0)
            raise WorkerGone(message, 503)
        return worker

    async def run(self, pieces: list[Blob | bytes], fds: list[int], answer_to: int | None, close: bool,
                  deadline_s: float, lend: LentConnection | None = None) -> WorkerReply:
        """Send a batch (its framed blobs in ``pieces``, the descriptors of its shared blobs in ``fds``) whose answer
        the worker writes to the client's connection ``answer_to`` (``None``: the client is gone; ``close``: the
        answer says the connection closes), and wait until it has run, at most ``deadline_s`` seconds (then the
        worker is stopped); then :meth:`written` says whether the answer reached the client. :class:`WorkerGone`
        when the worker died or was stopped. With ``lend`` (and ``answer_to``), the
        worker keeps the connection after an answer that went out whole, and serves its next requests itself."""
        self._streams()
        loop = asyncio.get_running_loop()
        total = sum(memoryview(p).nbytes for p in pieces)
        flags = (_CLIENT if answer_to is not None else 0) | (_CLOSE if close else 0)
        if lends(lend, answer_to) and lend is not None and lend.template is not None:
            template = lend.template.encode()
            pieces = [_LENDING.pack(lend.conn_id, len(template)) + template, *pieces]
            total += len(pieces[0])
            flags |= _LEND
        head = _MESSAGE.pack(total, flags)
        data = b"".join([head, *pieces]) if total < _JOIN_BELOW else head
        fds = [answer_to, *fds] if answer_to is not None else fds
        try:
            # the worker has read its last message whole before answering: the first send meets an empty buffer
            sent = socket.send_fds(self._out, [data], fds) if fds else 0
            await loop.sock_sendall(self._out, memoryview(data)[sent:])
            if total >= _JOIN_BELOW:
                for piece in pieces:
                    await loop.sock_sendall(self._out, piece)
        except (ConnectionError, OSError) as e:
            raise WorkerGone(await self._death()) from e
        timer = loop.call_later(deadline_s, self._overdue, deadline_s)
        try:
            return await self._head()
        except WorkerGone as e:
            e.status = 504 if self.overdue else e.status
            raise
        finally:
            timer.cancel()

    def _overdue(self, deadline_s: float) -> None:
        self.overdue = True
        self.stop(f"the batch ran longer than --max-kernel-seconds={deadline_s:g}; its worker was stopped")

    async def written(self) -> bool:
        """After :meth:`run`: whether the whole answer went to the client (the worker writes it as the client takes
        it, each piece within the send deadline); :class:`WorkerGone`."""
        reader, _ = self._streams()
        try:
            (whole,) = _WRITTEN.unpack(await reader.readexactly(_WRITTEN.size))
        except (asyncio.IncompleteReadError, ConnectionError):
            raise WorkerGone(await self._death()) from None
        return bool(whole)

    async def body(self, length: int) -> AsyncIterator[bytes]:
        """The ``length`` bytes of the last answer's body, in pieces as they arrive; :class:`WorkerGone`."""
        reader, _ = self._streams()
        left = length
        while left:
            try:
                piece = await reader.read(min(left, CHUNK_BYTES))
            except (ConnectionError, OSError):
                piece = b""
            if not piece:
                raise WorkerGone(await self._death())
            left -= len(piece)
            yield piece

    async def _head(self) -> WorkerReply:
        reader, _ = self._streams()
        try:
            status, meta_len, length = _REPLY.unpack(await reader.readexactly(_REPLY.size))
            meta = json.loads(await reader.readexactly(meta_len)) if meta_len else {}
        except (asyncio.IncompleteReadError, ConnectionError):
            raise WorkerGone(await self._death()) from None
        return WorkerReply(status, meta, length)

    def _streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None:
            raise RuntimeError("a Worker is made with Worker.start()")
        return self._reader, self._writer

    async def _death(self) -> str:
        """Why the worker is gone, once it has exited (its budget slot is cleared; :meth:`reap` forgets it)."""
        code = await self.zygote.exit_code(self.pid, 5.0)
        if code is None:
            self.stop("its worker stopped answering and was stopped")
            code = await self.zygote.exit_code(self.pid, 5.0)
        self.close()
        self.budget.clear(self.slot)
        return self.stopped_because or describe_exit(code)

    def stop(self, why: str) -> None:
        """Kill the worker (its session is lost); ``why`` is what its session is told."""
        self.stopped_because = self.stopped_because or why
        if not self.zygote.exited(self.pid):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        """End the session: closing its socket makes the worker free everything and exit (see :meth:`reap`); the
        connections lent to it come back once it has exited."""
        self._out.close()
        if self._writer is not None:
            self._writer.close()
        else:
            self._sock.close()

    async def reap(self, timeout_s: float) -> None:
        """After :meth:`close`: wait up to ``timeout_s`` for the worker to exit (then kill it) and clear its budget
        slot, which may then be given to another worker."""
        if await self.zygote.exit_code(self.pid, timeout_s) is None:
            self.stop("it did not exit when its session ended")
            await self.zygote.exit_code(self.pid, 5.0)
        self.budget.clear(self.slot)
        self.zygote.forget(self.pid)


    def _on_return(self) -> None:
        """The worker gives connections back: ``<QB`` (id, ``Back`` reason) per message."""
        while True:
            try:
                data = self._returns.recv(RETURN.size)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if len(data) != RETURN.size:  # closed: the worker has exited, _exited gives the rest back
                self.zygote.unwatch(self._returns)
                return
            conn_id, why = RETURN.unpack(data)
            if (conn := self.lent.pop(conn_id, None)) is not None:
                conn.give_back(Back(why))
            if self.on_return is not None:
                self.on_return(self)

    def _exited(self, future: asyncio.Future[int | None]) -> None:
        """The worker has exited: answer the lent request it was running (if any) with why, give the other lent
        connections back, clear its rows, tell ``on_exit``."""
        code = None if future.cancelled() else future.result()
        serving = self.board.serving_now(self.slot)
        if self._returns.fileno() >= 0:
            self._on_return()  # what it gave back before it exited
        self.zygote.unwatch(self._returns)
        self._returns.close()
        for conn_id, conn in list(self.lent.items()):
            if conn_id == serving:
                if code == -signal.SIGALRM:
                    status, why = 504, (f"the batch ran longer than --max-kernel-seconds={self.max_kernel_seconds:g}; "
                                        f"its worker was stopped")
                else:
                    status, why = 500, self.stopped_because or describe_exit(code)
                conn.fail(status, f"{why}; the session's buffers and programs are gone (other sessions go on); start "
                                  f"a new session")
            else:
                conn.give_back(Back.REQUEST)
        self.lent.clear()
        self.board.clear(self.slot)
        self.budget.clear(self.slot)
        if self.on_exit is not None:
            self.on_exit(self)

    def last_served(self) -> tuple[float, int, bool] | None:
        """``(monotonic seconds, bytes held, empty)`` as of the last request served on a lent connection."""
        return self.board.last_served(self.slot)

    def serving_lent(self) -> bool:
        """Whether the worker is running a request of a lent connection now."""
        return self.board.serving_now(self.slot) != 0


def lends(lend: LentConnection | None, answer_to: int | None) -> bool:
    """Whether a batch answered on ``answer_to`` leaves the connection ``lend`` with the worker."""
    return lend is not None and lend.template is not None and answer_to is not None


class LentConnection(Protocol):
    """A client connection as the server lends it to a worker (the transport's side of ``lend``)."""

    conn_id: int
    template: HeadTemplate | None  # the request it is lent after (a connection is lent only after one that has it)

    def give_back(self, why: Back) -> None:
        """The worker no longer has the connection: read the next request (or close it, as ``why`` says)."""

    def fail(self, status: int, message: str) -> None:
        """The worker died running the connection's request: answer it ``status`` with ``message``, then close."""


def describe_exit(exitcode: int | None) -> str:
    """What a worker's exit code says, for a person: ``kernel crashed: SIGSEGV`` for a signal."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"kernel crashed: {name}"
    if exitcode is None:
        return "the session's worker is gone (its exit status is unknown)"
    return f"the session's worker exited with status {exitcode}"
