"""``CloudServer``: one device of this machine served over HTTP with the CLOUD protocol.

Endpoints (the reference system's): ``GET /renderer`` answers the device's renderer as JSON ``[module, class, args]``
-- in the reference's names where this project's renderer has a counterpart there (``wire.renderers``), so
tinygrad 0.10.2's own client accepts it, with this project's own description in the ``cloud-renderer`` header;
``POST /batch`` takes a body of blobs (``framing``) ending with a request list (``literal``), runs it for the session
named by the ``session`` cookie, and answers the last ``CopyOut``'s bytes, or the last waited ``ProgramExec``'s
device seconds as text, or nothing -- written by the session's worker itself to the client's connection (a
``CopyOut`` straight from the device's memory). Errors are answered as HTTP errors whose text body says what was
wrong; the server and the session stay usable. With a token (``CLOUD_TOKEN``) every request must carry
``Authorization: Bearer <token>`` (else ``401``).

Each session's device work runs in a worker process of its own (``worker``): a kernel that crashes or runs past
``Limits.max_kernel_seconds`` ends its own session (``500 kernel crashed: SIGSEGV`` or ``504``), every other session
goes on, and the operating system shares the cores among sessions. This process only receives, verifies and forwards;
its event loop is never blocked by device work. A session ends when it holds nothing (the client freed everything,
which is how a client closes it), when it has been idle for ``Limits.session_timeout_s``, or -- when the session
table is full -- to make room for a new one once idle for ``Limits.evict_idle_s``. One memory budget
(``budget``) counts every session's buffers and the bodies being received.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import resource
import struct
import threading
import time
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from runtime_backends.cloud.server.budget import BudgetExceeded, MemoryBudget
from runtime_backends.cloud.server.lend import Board
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.server.transport import (
    CLOSING_STATUS,
    AnswerCut,
    Bytes,
    HttpConnection,
    HTTPError,
    RequestHead,
    Response,
)
from runtime_backends.cloud.server.worker import MAX_SHARED_BLOBS, SHARED_BLOB, LentConnection, Worker, WorkerGone, Zygote, lends
from runtime_backends.cloud.wire.framing import BodyDecoder, BufferPool, DecodedBody, FramingError, SharedBuffer
from runtime_backends.cloud.wire.protocol import RENDERER_HEADER
from runtime_backends.cloud.wire.renderers import describe_renderer, reference_description
from runtime_core.device import Device

__all__ = ["CloudServer", "DEFAULT_PORT"]

log = logging.getLogger(__name__)
DEFAULT_PORT = 6667
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_POOL_BYTES = 256 << 20
_FD_RESERVE = 64  # descriptors kept free for workers, the listening socket and files when shedding connections
_FDS_PER_SESSION = 5  # the worker's socket, its second descriptor, the socket of lent connections coming back, spares
_LENGTH = struct.Struct("<Q")
_IDLE_WORKERS = 2


@dataclass
class _Session:
    """The server's record of a session: its worker (started at its first batch), and what the worker last said."""

    sid: str
    worker: Worker | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    busy: int = 0
    held_bytes: int = 0
    empty: bool = True
    state_at: float = 0.0  # when the worker reported held_bytes and empty (monotonic seconds, the worker's clock)
    last_used: float = field(default_factory=time.monotonic)


class CloudServer:
    """Serves ``device`` (a device name of this machine, e.g. ``"CPU"``) on ``host:port``.

    ``host`` defaults to the loopback interface: only this machine can connect unless told otherwise. ``port=0`` picks
    a free port (see :attr:`port`). ``token``: the shared secret every request must present (``None``: no check).
    ``limits``: the server's bounds (:class:`~runtime_backends.cloud.server.limits.Limits`).

    Use :meth:`start` (a background thread; returns once listening) and :meth:`close`, or :meth:`serve_forever`.

    Raises (construction): ``ValueError`` for a CLOUD device (a server cannot serve itself); whatever opening the
    device raises (``DeviceError`` for an unknown backend, the backend's error when it is unavailable): the device is
    opened once here to check it and describe its renderer, then by each session's worker.
    """

    def __init__(self, device: str = "CPU", *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 token: str | None = None, limits: Limits | None = None) -> None:
        name = Device.canonicalize(device)
        backend = name.partition(":")[0]
        if backend == "CLOUD":
            raise ValueError(f"a CLOUD server serves a device of this machine, not {name}; use --device CPU (or PYTHON, "
                             f"CUDA...)")
        probe = Device.backend_class(backend)(name)  # type: ignore[call-arg]
        try:
            self.device: str = probe.device
            native = describe_renderer(probe.renderer)
            self._renderer_json = json.dumps(reference_description(probe.renderer) or native).encode()
            self._renderer_header = json.dumps(native)
        finally:
            probe.finalize()
        self.host, self._port, self.token = host, port, token
        self.limits = limits or Limits()
        self.sessions: dict[str, _Session] = {}
        # slots: slot 0, the spare, every session, and as many again for workers still exiting
        self.budget = MemoryBudget(self.limits.memory_budget_bytes, 2 * self.limits.max_sessions + 2)
        self.board = Board(self.budget.slots)
        self._zygote: Zygote | None = None
        self._idle: list[Worker] = []  # workers whose sessions ended holding nothing
        self._reaps: set[asyncio.Task[None]] = set()
        self._free_slots = list(range(self.budget.slots - 1, 0, -1))  # slot 0: bodies being received
        self._spare: asyncio.Task[Worker] | None = None
        self._connections: set[HttpConnection] = set()
        self._inflight_bytes = 0
        self.pool = BufferPool(min(self.limits.max_body_bytes, _POOL_BYTES))
        self.hashing = ThreadPoolExecutor(1, thread_name_prefix="cloud-hash")  # one thread: jobs stay in order
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def port(self) -> int:
        """The port listened on (the one picked when constructed with ``port=0``, once started)."""
        return self._port

    @property
    def address(self) -> str:
        """``host:port``, what a client's ``HOST`` is set to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self._port}"

    # lifecycle
    def start(self) -> CloudServer:
        """Serve from a daemon thread; returns once the socket listens. ``OSError`` if it cannot bind."""
        started, failure = threading.Event(), []

        def main() -> None:
            try:
                asyncio.run(self._main(started))
            except BaseException as e:
                failure.append(e)
                started.set()
        self._thread = threading.Thread(target=main, name=f"cloud-server-{self.device}", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            self.close()
            raise failure[0]
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`close` is called from another thread (or the process is interrupted)."""
        asyncio.run(self._main(None))

    def close(self) -> None:
        """Stop listening, drop every connection, end every session (each worker frees its buffers and exits)."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop stopped in the meantime
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self.hashing.shutdown()

    async def _main(self, started: threading.Event | None) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await self._loop.create_server(self._accept, self.host, self._port, reuse_address=True)
        self._port = server.sockets[0].getsockname()[1]
        log.info("CLOUD server for %s listening on %s", self.device, self.address)
        self._zygote = Zygote(self.device)
        self._zygote.attach(self._loop)
        self._spare = self._loop.create_task(self._start_worker())
        self._spare.add_done_callback(_quiet)
        if started is not None:
            started.set()
        reaper = self._loop.create_task(self._reap_forever())
        try:
            await self._stop.wait()
        finally:
            reaper.cancel()
            server.close()
            for conn in list(self._connections):
                if conn.transport is not None:
                    conn.transport.abort()
            await server.wait_closed()
            await self._end_all()

    def _accept(self) -> HttpConnection:
        """A new connection; near the process's descriptor limit the longest idle connections are closed first, so
        new clients are served instead of waiting for a descriptor."""
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft != resource.RLIM_INFINITY:
            room = soft - _FD_RESERVE - _FDS_PER_SESSION * len(self.sessions) - len(self._connections)
            if room <= 0:
                self._shed(1 - room)
        return HttpConnection(self, self.limits, self._connections)

    def _shed(self, count: int) -> None:
        idle = sorted((c for c in self._connections if c.idle and c.transport is not None), key=lambda c: c.last_active)
        for conn in idle[:count]:
            log.info("closing idle connection %s: the server is near its descriptor limit",
                     conn.transport.get_extra_info("peername") if conn.transport else "?")
            if conn.transport is not None:
                conn.transport.close()
            self._connections.discard(conn)

    # the Handler interface of transport
    def head(self, request: RequestHead) -> Response | _BatchSink:
        """Route a request by its headers: renderer answer, batch body sink, or an ``HTTPError``."""
        self._authorize(request)
        if request.path == "/renderer":
            _allow(request, "GET")
            return Response(200, self._renderer_json, "application/json", ((RENDERER_HEADER, self._renderer_header),))
        if request.path == "/batch":
            _allow(request, "POST")
            return _BatchSink(self, self._session(_session_id(request)), request.closes)
        raise HTTPError(404, f"no endpoint {request.method} {request.path}; this server answers GET /renderer and "
                             f"POST /batch")

    def _authorize(self, request: RequestHead) -> None:
        if self.token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise HTTPError(401, "this server needs a token: send Authorization: Bearer <token> (the client reads it "
                                 "from CLOUD_TOKEN)", (("www-authenticate", 'Bearer realm="cloud"'),))

    def _session(self, sid: str) -> _Session:
        session = self.sessions.get(sid)
        if session is None:
            if len(self.sessions) >= self.limits.max_sessions:
                self._evict_one()
            session = self.sessions[sid] = _Session(sid)
        session.last_used = time.monotonic()
        return session

    def _evict_one(self) -> None:
        """Make room in a full session table by ending the longest idle session, if one has been idle for
        ``Limits.evict_idle_s``; else ``HTTPError(503)``."""
        now = time.monotonic()
        for s in self.sessions.values():
            _sync(s)
        idle = [s for s in self.sessions.values() if not s.busy and now - s.last_used >= self.limits.evict_idle_s]
        if not idle:
            wait = min((self.limits.evict_idle_s - (now - s.last_used) for s in self.sessions.values() if not s.busy),
                       default=self.limits.evict_idle_s)
            raise HTTPError(503, f"the server holds {len(self.sessions)} sessions, its limit, all active in the last "
                                 f"{self.limits.evict_idle_s:g} s; retry in {max(wait, 0.1):.1f} s",
                            (("retry-after", str(max(1, round(wait)))),))
        oldest = min(idle, key=lambda s: s.last_used)
        log.info("session %s ended after %.0f s idle to make room for a new session (%d bytes freed)", oldest.sid[:8],
                 now - oldest.last_used, oldest.held_bytes)
        self._end(oldest)

    def receive(self, nbytes: int) -> None:
        """Count ``nbytes`` more of received body; ``HTTPError(503)`` beyond ``Limits.max_inflight_bytes`` or the
        memory budget."""
        if self._inflight_bytes + nbytes > self.limits.max_inflight_bytes:
            raise HTTPError(503, f"the server holds {self._inflight_bytes} bytes of bodies not yet run; {nbytes} more "
                                 f"would exceed its limit of {self.limits.max_inflight_bytes}; retry later")
        try:
            self.budget.take(0, nbytes, "receiving a batch body")
        except BudgetExceeded as e:
            raise HTTPError(503, str(e)) from None
        self._inflight_bytes += nbytes

    def received(self, nbytes: int) -> None:
        """``nbytes`` of received body are no longer held."""
        self._inflight_bytes -= nbytes
        self.budget.give(0, nbytes)

    # workers
    async def _start_worker(self) -> Worker:
        if not self._free_slots and self._reaps:  # workers of ended sessions are exiting: their slots come back
            await asyncio.wait(set(self._reaps), timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if not self._free_slots or self._zygote is None:
            raise HTTPError(503, "the server runs as many session workers as it has slots; retry later")
        slot = self._free_slots.pop()
        try:
            worker = await Worker.start(self._zygote, self.device, self.limits, self.budget, self.board, slot)
        except WorkerGone as e:
            self._free_slots.append(slot)
            raise HTTPError(503, f"cannot start a worker for the session: {e}") from None
        except BaseException:
            self._free_slots.append(slot)
            raise
        worker.on_exit = self._worker_exited
        worker.on_return = self._worker_returned
        return worker

    async def _worker(self) -> Worker:
        """A started worker for a new session: one whose session ended empty, else the spare when it is ready (and a
        new spare started behind it)."""
        if self._idle:
            return self._idle.pop()
        spare, self._spare = self._spare, None
        worker = None
        if spare is not None:
            try:
                worker = await spare
            except HTTPError:
                worker = None
        if worker is None:
            worker = await self._start_worker()
        if not self._closed:
            self._spare = asyncio.get_running_loop().create_task(self._start_worker())
            self._spare.add_done_callback(_quiet)
        return worker

    def _retire(self, worker: Worker) -> None:
        """Close a worker; once its process has exited its budget slot is free again. Callable from any thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.current_thread() is not self._thread and self._thread is not None:
            loop.call_soon_threadsafe(self._retire, worker)
            return
        worker.close()

        async def reap() -> None:
            await worker.reap(10.0)
            self._free_slots.append(worker.slot)
        task = loop.create_task(reap())
        self._reaps.add(task)
        task.add_done_callback(self._reaps.discard)

    def _end(self, session: _Session, reuse: bool = False) -> None:
        """Forget ``session`` and retire its worker (which frees its buffers and programs); with ``reuse``, a session
        that ended holding nothing leaves its worker to the next new session (a fork and a device open saved)."""
        if self.sessions.get(session.sid) is session:
            del self.sessions[session.sid]
        if session.worker is not None:
            if reuse and not session.worker.lent and len(self._idle) < _IDLE_WORKERS and not self._closed:
                self._idle.append(session.worker)
            else:
                self._retire(session.worker)
            session.worker = None

    async def _end_all(self) -> None:
        for session in list(self.sessions.values()):
            self._end(session)
        while self._idle:
            self._retire(self._idle.pop())
        if self._spare is not None:
            try:
                self._retire(await self._spare)
            except Exception:  # a spare that could not start holds nothing
                pass
        if self._reaps:
            await asyncio.wait(set(self._reaps), timeout=30)
        if self._zygote is not None:
            self._zygote.close()

    async def run(self, session: _Session, body: DecodedBody, answer_to: int | None, close: bool,
                  lend: LentConnection | None = None) -> Response:
        """Run a verified body in ``session``'s worker, which writes the answer to the client's connection
        ``answer_to`` itself (``close``: the answer says the connection closes); returns what it wrote
        (``Response.written``). With ``lend``, the connection stays with the worker after the answer
        (``Response.lent``): it serves the connection's next requests of this session itself and gives the
        connection back for anything else (``lend``). ``HTTPError`` when the batch could not run (its worker died or
        was stopped: the session is gone), ``AnswerCut`` when the answer did not reach the client whole."""
        async with session.lock:
            try:
                if session.worker is None:
                    session.worker = await self._worker()
                worker = session.worker
                if lend is not None and lends(lend, answer_to):  # before the worker can give it back
                    worker.lent[lend.conn_id] = lend
                try:
                    reply = await worker.run(*_frames(body), answer_to, close, self.limits.max_kernel_seconds, lend)
                except WorkerGone as e:
                    self._lose(session, str(e))
                    raise HTTPError(e.status, f"{e}; the session's buffers and programs are gone (other sessions go "
                                              f"on); start a new session") from None
                _record(session, float(reply.meta.get("at", 0.0)), int(reply.meta.get("held", 0)),
                        bool(reply.meta.get("empty")))
                try:
                    whole = await worker.written()
                except WorkerGone as e:
                    self._lose(session, str(e))
                    whole = False
                if not whole:
                    if lend is not None:
                        worker.lent.pop(lend.conn_id, None)
                    raise AnswerCut(f"the answer of {reply.length} bytes did not reach the client whole")
                lent = lends(lend, answer_to) and reply.status < CLOSING_STATUS
                if not lent and lend is not None:
                    worker.lent.pop(lend.conn_id, None)
                return Response(reply.status, length=reply.length, written=True, lent=lent)
            finally:
                session.last_used = time.monotonic()

    def _lose(self, session: _Session, why: str) -> None:
        """``session``'s worker is gone (crashed, or stopped at the batch deadline): so is the session; the worker's
        budget slot comes back once its exit has been seen."""
        log.warning("session %s lost: %s", session.sid[:8], why)
        worker, session.worker = session.worker, None
        self._end(session)
        if worker is not None:
            self._retire(worker)

    def _worker_returned(self, worker: Worker) -> None:
        """A worker gave a lent connection back: its session ends if the client freed everything there."""
        for session in list(self.sessions.values()):
            if session.worker is worker:
                self.forget_if_empty(session)

    def _worker_exited(self, worker: Worker) -> None:
        """A worker has exited (its lent connections are already back or answered): if its session still had it,
        the session is lost."""
        for session in list(self.sessions.values()):
            if session.worker is worker:
                self._lose(session, worker.stopped_because or "its worker exited")

    def forget_if_empty(self, session: _Session) -> None:
        """End ``session`` if it holds nothing and no request of it is in progress (a client ends its session by
        freeing everything; a failed first request leaves nothing behind either)."""
        _sync(session)
        if session.empty and not session.busy and not session.lock.locked():
            self._end(session, reuse=True)

    # sessions that time out
    async def _reap_forever(self) -> None:
        period = min(60.0, self.limits.session_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            self.reap()

    def reap(self, now: float | None = None) -> list[str]:
        """End the sessions idle for longer than ``Limits.session_timeout_s`` (their workers free their buffers and
        programs); returns their ids. Called periodically by the running server."""
        now = time.monotonic() if now is None else now
        for s in self.sessions.values():
            _sync(s)
        expired = [s for s in self.sessions.values()
                   if not s.busy and not s.lock.locked() and now - s.last_used > self.limits.session_timeout_s]
        for s in expired:
            log.info("session %s timed out; freeing %d bytes", s.sid[:8], s.held_bytes)
            self._end(s)
        return [s.sid for s in expired]


def _sync(session: _Session) -> None:
    """Bring ``session``'s record up to what its worker last said on the board about requests it served on lent
    connections (busy while it serves one)."""
    worker = session.worker
    if worker is None:
        return
    if worker.serving_lent():
        session.last_used, session.empty = time.monotonic(), False
    elif (seen := worker.last_served()) is not None:
        _record(session, *seen)


def _record(session: _Session, at: float, held: int, empty: bool) -> None:
    """Keep the worker's report of ``session``'s state made at ``at`` unless a later one is already kept: a request
    served on a lent connection can finish before the server has read the reply of the request that lent it."""
    if at >= session.state_at:
        session.state_at, session.held_bytes, session.empty = at, held, empty
        session.last_used = max(session.last_used, at)


def _quiet(task: asyncio.Task[Worker]) -> None:
    """A spare worker that could not start is retried when a session needs it; its error is not lost there."""
    if not task.cancelled():
        task.exception()


class _BatchSink:
    """The body of one ``POST /batch``: verified as it arrives, run when complete."""

    def __init__(self, server: CloudServer, session: _Session, closes: bool) -> None:
        self.server, self.session, self.closes = server, session, closes
        self.held = 0
        self.decoder = BodyDecoder(server.limits, None, server.pool, server.hashing)
        self.session.busy += 1  # not reaped or evicted while its body arrives
        self._open = True

    def feed(self, chunk: Bytes) -> None:
        n = memoryview(chunk).nbytes
        self.server.receive(n)
        self.held += n
        try:
            self.decoder.feed(chunk)
        except FramingError as e:
            raise HTTPError(400, f"bad batch body: {e}") from None

    def complete(self, answer_to: int | None, lend: LentConnection | None) -> Response | Awaitable[Response]:
        """An awaitable of the answer, which the session's worker writes to ``answer_to`` as it runs the batch (and
        keeps the connection ``lend`` when given)."""
        try:
            body = self.decoder.finish()
        except FramingError as e:
            self.abort()
            raise HTTPError(400, f"bad batch body: {e}") from None
        return self._run(body, answer_to, lend)

    async def _run(self, body: DecodedBody, answer_to: int | None, lend: LentConnection | None) -> Response:
        try:
            return await self.server.run(self.session, body, answer_to, self.closes, lend)
        finally:
            self.abort()

    def abort(self) -> None:
        """The request is over (answered, refused or cut): release its bytes and let its session end if empty."""
        if self._open:
            self._open = False
            self.server.pool.give(self.decoder.buffers())
            self.server.received(self.held)
            self.session.busy -= 1
            self.server.forget_if_empty(self.session)


def _frames(body: DecodedBody) -> tuple[list[Bytes], list[int]]:
    """The body's blobs framed for the worker, the request list last, and the descriptors of those passed by
    descriptor (see ``worker``)."""
    pieces: list[Bytes] = []
    fds: list[int] = []
    for datahash, data in [*((h, d) for h, d in body.blobs.items() if h != body.requests_hash),
                           (body.requests_hash, body.requests)]:
        view = memoryview(data)
        if isinstance(view.obj, SharedBuffer) and len(fds) < MAX_SHARED_BLOBS:
            pieces.append(bytes.fromhex(datahash) + _LENGTH.pack(view.nbytes | SHARED_BLOB))
            fds.append(view.obj.memfd)
        else:
            pieces += (bytes.fromhex(datahash) + _LENGTH.pack(view.nbytes), data)
    return pieces, fds


def _allow(request: RequestHead, method: str) -> None:
    if request.method != method:
        raise HTTPError(405, f"{request.path} takes {method}, not {request.method}", (("allow", method),))


def _session_id(request: RequestHead) -> str:
    for part in request.headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "session":
            if not _SESSION_ID.fullmatch(value):
                raise HTTPError(400, "the session cookie must be 1 to 128 characters of [A-Za-z0-9_-]")
            return value
    raise HTTPError(400, "POST /batch needs a session: send Cookie: session=<random hex>, the same for every batch "
                         "of one client")
