"""``CloudServer``: one device of this machine served over HTTP with the CLOUD protocol.

Endpoints (the reference system's): ``GET /renderer`` answers the device's renderer as JSON ``[module, class, args]``;
``POST /batch`` takes a body of blobs (``framing``) ending with a request list (``literal``), runs it for the session
named by the ``session`` cookie (``session``), and answers the last ``CopyOut``'s bytes, or the last waited
``ProgramExec``'s device seconds as text, or nothing. Errors are answered as HTTP errors whose text body says what was
wrong; the server and the session stay usable. With a token (``CLOUD_TOKEN``) every request must carry
``Authorization: Bearer <token>`` (else ``401``).

Work on the device runs on one thread, in the order batches complete; the event loop keeps receiving and verifying
other clients' bodies meanwhile. A session ends when it holds nothing (the client freed everything, which is how a
client closes it) or when it has been idle for ``Limits.session_timeout_s`` (its buffers and programs are freed then).
The served device is an instance of its own (not the process's ``Device[...]`` one), so an in-process server never
shares allocator state with the client's thread.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor

from runtime_backends.cloud.framing import Blob, BodyDecoder, BufferPool, DecodedBody, FramingError
from runtime_backends.cloud.http_server import Bytes, HttpConnection, HTTPError, RequestHead, Response
from runtime_backends.cloud.limits import Limits
from runtime_backends.cloud.literal import decode_requests
from runtime_backends.cloud.protocol import SIGNATURE_HEADER, CopyOut, ProgramAlloc, ProgramExec, ProtocolError, Request
from runtime_backends.cloud.renderers import describe_renderer
from runtime_backends.cloud.session import BatchError, BatchResult, Session, release, run_batch
from runtime_core.device import Compiled, Device

__all__ = ["CloudServer", "DEFAULT_PORT"]

log = logging.getLogger(__name__)
DEFAULT_PORT = 6667
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_INLINE_BYTES = 256 << 10
_SMALL_LITERAL = 16 << 10
_DECODED_ENTRIES = 256
_POOL_BYTES = 256 << 20


class CloudServer:
    """Serves ``device`` (a device name of this machine, e.g. ``"CPU"``) on ``host:port``.

    ``host`` defaults to the loopback interface: only this machine can connect unless told otherwise. ``port=0`` picks
    a free port (see :attr:`port`). ``token``: the shared secret every request must present (``None``: no check).
    ``limits``: the server's bounds (:class:`~runtime_backends.cloud.limits.Limits`).

    Use :meth:`start` (a background thread; returns once listening) and :meth:`close`, or :meth:`serve_forever`.

    Raises (construction): ``ValueError`` for a CLOUD device (a server cannot serve itself); whatever opening the
    device raises (``DeviceError`` for an unknown backend, the backend's error when it is unavailable).
    """

    def __init__(self, device: str = "CPU", *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 token: str | None = None, limits: Limits | None = None) -> None:
        name = Device.canonicalize(device)
        backend = name.partition(":")[0]
        if backend == "CLOUD":
            raise ValueError(f"a CLOUD server serves a device of this machine, not {name}; use --device CPU (or PYTHON, "
                             f"CUDA...)")
        self.dev: Compiled = Device.backend_class(backend)(name)  # type: ignore[call-arg]
        self.host, self._port, self.token = host, port, token
        self.limits = limits or Limits()
        self.sessions: dict[str, Session] = {}
        self._renderer_json = json.dumps(describe_renderer(self.dev.renderer)).encode()
        self._device_thread = ThreadPoolExecutor(1, thread_name_prefix=f"cloud-{backend.lower()}")
        self._connections: set[HttpConnection] = set()
        self._inflight_bytes = 0
        self._device_lock = threading.Lock()  # the device thread and small batches run inline on the event loop
        self._decoded: OrderedDict[str, list[Request]] = OrderedDict()  # event loop only
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
        self._thread = threading.Thread(target=main, name=f"cloud-server-{self.dev.device}", daemon=True)
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
        """Stop listening, drop every connection, free every session's buffers and programs, finalize the device."""
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
        try:
            self._device_thread.submit(self._release_all).result()
        except RuntimeError:  # at interpreter exit the executor takes no more work (and its thread is idle)
            self._release_all()
        self._device_thread.shutdown()
        self.hashing.shutdown()
        self.dev.finalize()

    async def _main(self, started: threading.Event | None) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await self._loop.create_server(lambda: HttpConnection(self, self.limits, self._connections),
                                                self.host, self._port, reuse_address=True)
        self._port = server.sockets[0].getsockname()[1]
        log.info("CLOUD server for %s listening on %s", self.dev.device, self.address)
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

    # the Handler interface of http_server
    def head(self, request: RequestHead) -> Response | _BatchSink:
        """Route a request by its headers: renderer answer, batch body sink, or an ``HTTPError``."""
        self._authorize(request)
        if request.path == "/renderer":
            _allow(request, "GET")
            return Response(200, self._renderer_json, "application/json")
        if request.path == "/batch":
            _allow(request, "POST")
            return _BatchSink(self, self._session(_session_id(request)), request.content_length)
        raise HTTPError(404, f"no endpoint {request.method} {request.path}; this server answers GET /renderer and "
                             f"POST /batch")

    def _authorize(self, request: RequestHead) -> None:
        if self.token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise HTTPError(401, "this server needs a token: send Authorization: Bearer <token> (the client reads it "
                                 "from CLOUD_TOKEN)", (("www-authenticate", 'Bearer realm="cloud"'),))

    def _session(self, sid: str) -> Session:
        session = self.sessions.get(sid)
        if session is None:
            if len(self.sessions) >= self.limits.max_sessions:
                raise HTTPError(503, f"the server holds {len(self.sessions)} sessions, its limit; retry later")
            session = self.sessions[sid] = Session(sid)
        session.last_used = time.monotonic()
        return session

    def reserve(self, nbytes: int) -> None:
        """Count ``nbytes`` of body being received; ``HTTPError(503)`` beyond ``Limits.max_inflight_bytes``."""
        if self._inflight_bytes + nbytes > self.limits.max_inflight_bytes:
            raise HTTPError(503, f"the server is receiving {self._inflight_bytes} bytes of other bodies; a body of "
                                 f"{nbytes} bytes more would exceed its limit of {self.limits.max_inflight_bytes}; "
                                 f"retry later")
        self._inflight_bytes += nbytes

    def unreserve(self, nbytes: int) -> None:
        self._inflight_bytes -= nbytes

    def run_now(self, session: Session, body: DecodedBody) -> BatchResult | None:
        """Run a small batch that only moves data (no program loads or launches, at most ``_INLINE_BYTES``) right
        here on the event loop when the device is idle -- it takes microseconds, less than handing it to the device
        thread -- and return its result; ``None`` for any other batch (:meth:`run_on_device`). ``BatchError``."""
        requests = self._decode_small(body)
        if requests is None or not _moves_little(session, requests, body):
            return None
        if not self._device_lock.acquire(blocking=False):
            return None
        try:
            return run_batch(self.dev, session, requests, body.blobs, self.limits, self.pool)
        finally:
            self._device_lock.release()

    async def run_on_device(self, session: Session, body: DecodedBody) -> BatchResult:
        """Run a verified body for ``session`` on the device thread (``BatchError`` if refused or failed)."""
        requests = self._decode_small(body)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._device_thread, self._run, session, body, requests)

    def _decode_small(self, body: DecodedBody) -> list[Request] | None:
        """The requests of a request list of at most ``_SMALL_LITERAL`` bytes (``None`` for a larger one, which is
        decoded on the device thread). Lists are remembered by digest: a client repeating a batch (the same launch,
        the same copy) is not parsed again; the decoded requests are immutable."""
        if len(body.requests) > _SMALL_LITERAL:
            return None
        if (requests := self._decoded.get(body.requests_hash)) is not None:
            self._decoded.move_to_end(body.requests_hash)
            return requests
        requests = _decode(body.requests, self.limits)
        self._decoded[body.requests_hash] = requests
        if len(self._decoded) > _DECODED_ENTRIES:
            self._decoded.popitem(last=False)
        return requests

    def _run(self, session: Session, body: DecodedBody, requests: list[Request] | None) -> BatchResult:
        with self._device_lock:
            if requests is None:
                requests = _decode(body.requests, self.limits)
            return run_batch(self.dev, session, requests, body.blobs, self.limits, self.pool)

    def forget_if_empty(self, session: Session) -> None:
        """End ``session`` if it holds nothing and no request of it is in progress (a client ends its session by
        freeing everything; a failed first request leaves nothing behind either)."""
        if session.empty and not session.busy and self.sessions.get(session.sid) is session:
            del self.sessions[session.sid]

    # sessions that time out
    async def _reap_forever(self) -> None:
        period = min(60.0, self.limits.session_timeout_s / 4)
        while True:
            await asyncio.sleep(period)
            self.reap()

    def reap(self, now: float | None = None) -> list[str]:
        """End the sessions idle for longer than ``Limits.session_timeout_s`` (their resources are freed on the
        device thread); returns their ids. Called periodically by the running server."""
        now = time.monotonic() if now is None else now
        expired = [s for s in self.sessions.values()
                   if not s.busy and now - s.last_used > self.limits.session_timeout_s]
        for s in expired:
            del self.sessions[s.sid]
            log.info("session %s timed out; freeing %d buffers (%d bytes) and %d programs", s.sid[:8], len(s.buffers),
                     s.held_bytes, len(s.programs))
            self._device_thread.submit(self._release, s)
        return [s.sid for s in expired]

    def _release(self, session: Session) -> None:
        with self._device_lock:
            release(self.dev, session)

    def _release_all(self) -> None:
        for s in list(self.sessions.values()):
            self._release(s)
        self.sessions.clear()


class _BatchSink:
    """The body of one ``POST /batch``: verified as it arrives, run when complete."""

    def __init__(self, server: CloudServer, session: Session, length: int | None) -> None:
        self.server, self.session = server, session
        self.reserved = length if length is not None else 0
        try:
            server.reserve(self.reserved)
        except HTTPError:
            server.forget_if_empty(session)
            raise
        self.decoder = BodyDecoder(server.limits, length, server.pool, server.hashing)
        self.session.busy += 1  # not reaped while its body arrives
        self._open = True

    def feed(self, chunk: Bytes) -> None:
        if self.decoder.total is None:  # chunked: reserve as it comes
            self.server.reserve(len(chunk))
            self.reserved += len(chunk)
        try:
            self.decoder.feed(chunk)
        except FramingError as e:
            raise HTTPError(400, f"bad batch body: {e}") from None

    def complete(self) -> Response | Awaitable[Response]:
        """The answer at once for a small data-only batch (``CloudServer.run_now``), else an awaitable of it."""
        try:
            body = self.decoder.finish()
            self.server.unreserve(self.reserved)  # the body is whole: it now counts as the session's work
            self.reserved = 0
            result = self.server.run_now(self.session, body)
        except FramingError as e:
            self.abort()
            raise HTTPError(400, f"bad batch body: {e}") from None
        except BatchError as e:
            self.abort()
            raise HTTPError(e.status, e.message) from None
        if result is not None:
            self.abort()
            return _answer(result, self.server.pool)
        return self._on_device(body)

    async def _on_device(self, body: DecodedBody) -> Response:
        try:
            return _answer(await self.server.run_on_device(self.session, body), self.server.pool)
        except BatchError as e:
            raise HTTPError(e.status, e.message) from None
        finally:
            self.abort()

    def abort(self) -> None:
        """The request is over (answered, refused or cut): release its reservation and let its session end if empty."""
        if self._open:
            self._open = False
            self.server.pool.give(self.decoder.buffers())
            self.server.unreserve(self.reserved)
            self.session.busy -= 1
            self.server.forget_if_empty(self.session)


def _answer(result: BatchResult, pool: BufferPool) -> Response:
    headers: tuple[tuple[str, str], ...] = ()
    if result.signature is not None:
        headers = ((SIGNATURE_HEADER, f"buffers={result.signature[0]}, vals={result.signature[1]}"),)
    body = result.body
    sent = (lambda: pool.give([body])) if isinstance(body, memoryview) else None
    return Response(200, body, "application/octet-stream", headers, sent)


def _decode(text: Blob, limits: Limits) -> list[Request]:
    try:
        return decode_requests(text, limits)
    except ProtocolError as e:
        raise BatchError(400, f"bad request list: {e}") from None


def _moves_little(session: Session, requests: list[Request], body: DecodedBody) -> bool:
    """Whether ``requests`` only allocate, free and copy, at most ``_INLINE_BYTES`` in all."""
    nbytes = sum(len(b) for b in body.blobs.values())
    for r in requests:
        if isinstance(r, (ProgramAlloc, ProgramExec)):
            return False
        if isinstance(r, CopyOut) and (buf := session.buffers.get(r.buffer_num)) is not None:
            nbytes += buf.size
    return nbytes <= _INLINE_BYTES


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

