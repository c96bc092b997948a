"""The CLOUD server's HTTP/1.1 transport: asyncio connections parsed by h11, with the timeouts and bounds of a server
that faces clients it does not trust.

Why h11 on asyncio: h11 (python-hyper) is a strict, well-kept HTTP/1.1 parser that leaves the I/O to us, so each
bound is one explicit line here -- an idle keep-alive timeout, a deadline for a request's headers (a client that
trickles headers is cut, which a single socket timeout, as in ``http.server``, cannot do), a deadline for its body, a
header size limit, a body size limit checked on ``Content-Length`` before any of the body is read -- and one event
loop serves every connection, so a stalled client costs a few objects, not a thread. Bodies are handed to the
application piece by piece as they arrive (the batch decoder verifies them while the rest is still in flight; a body
of 1 MiB or more goes past h11, which would copy every byte twice); responses go out without being joined into one
buffer, or are written by the application itself from another process, given the socket (``Response.written``).
Sockets use ``TCP_NODELAY`` and connections stay open between requests (keep-alive), so a small request costs one
round trip.

The application implements :class:`Handler`: ``head(request)`` returns a :class:`Response` at once or a
:class:`BodySink` that takes the body and produces the response. :class:`HTTPError` anywhere becomes that response;
any other exception becomes a ``500`` with its message, and the connection goes on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol

import h11

from runtime_backends.cloud.server.lend import RAW_BODY_BYTES, Back, HeadTemplate
from runtime_backends.cloud.server.limits import Limits

__all__ = ["RequestHead", "Response", "HTTPError", "BodySink", "Handler", "HttpConnection"]

log = logging.getLogger(__name__)

Bytes = bytes | bytearray | memoryview


@dataclass(frozen=True)
class RequestHead:
    """A request's line and headers. ``headers`` has lower-case names; repeated headers are joined with ``", "``
    (``"; "`` for ``cookie``). ``content_length`` is ``None`` for a chunked body, 0 when there is no body."""

    method: str
    path: str
    headers: dict[str, str]
    content_length: int | None
    closes: bool = False
    """The connection closes after the answer (an HTTP/1.0 request, or ``Connection: close``)."""


@dataclass(frozen=True)
class Response:
    """A response to send: ``status``, ``body`` and extra ``headers`` (name, value). ``sent`` is called once the body
    has left the process (or the connection is gone): until then the transport may still read ``body``.

    A ``written`` response was written whole to the connection by someone else (another process, given the socket
    by :meth:`BodySink.complete`): the transport only records that an answer of ``status`` with ``length`` bytes of
    body went out."""

    status: int
    body: Bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    sent: Callable[[], None] | None = None
    length: int = 0
    written: bool = False
    lent: bool = False
    """A ``written`` answer after which the connection stays with whoever wrote it (``lend``): the transport neither
    reads nor writes it until :meth:`HttpConnection.give_back`."""


class HTTPError(Exception):
    """An error answer: ``status`` with ``message`` as the text body (and extra ``headers``)."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers

    def response(self) -> Response:
        return Response(self.status, self.message.encode(), headers=self.headers)


class AnswerCut(Exception):
    """An answer written by someone else (``Response.written``) did not reach the client whole: the connection is
    dropped."""


class BodySink(Protocol):
    """Receives one request's body: ``feed`` per piece (may raise :class:`HTTPError`: the rest of the body is then
    read and dropped, and that error answered), ``complete`` once it has all arrived -- the response, or an awaitable
    of it when producing it takes a while -- and ``abort`` if the body never arrives whole.

    ``complete(answer_to, lend)`` gets the connection's socket descriptor (``None`` when the connection is gone), with
    nothing of an earlier answer left to send on it: a sink may have the answer written there directly (and say so
    with ``Response.written``), or raise :class:`AnswerCut` when that failed part-way. ``lend`` is the connection
    when it may be lent after the answer (nothing of a next request has been read, and the request is one a lent
    connection serves: see ``lend``), else ``None``."""

    def feed(self, chunk: Bytes) -> None: ...

    def complete(self, answer_to: int | None, lend: HttpConnection | None) -> Response | Awaitable[Response]: ...

    def abort(self) -> None: ...


class Handler(Protocol):
    """The application: ``head`` is called once a request's headers have arrived."""

    def head(self, request: RequestHead) -> Response | BodySink: ...


_IDLE, _HEAD, _BODY, _BUSY, _LENT = "idle", "head", "body", "busy", "lent"
_SEND = "send"  # a deadline only: an answer still in the write buffer
_JOIN_BELOW = 64 << 10
CLOSING_STATUS = 400
"""Error answers (this status and up) close the connection after them, as the reference server's do (it drops the
connection when a request fails): a client that does not read an error's body -- tinygrad 0.10.2's asserts on the
status and leaves the body unread -- then goes on with a new connection instead of a connection it cannot use."""


class HttpConnection(asyncio.Protocol):
    """One client connection (an ``asyncio.Protocol``; ``loop.create_server(lambda: HttpConnection(...))``); it adds
    itself to ``registry`` while open, so a server can close its connections when it stops."""

    def __init__(self, handler: Handler, limits: Limits, registry: set[HttpConnection] | None = None) -> None:
        self.handler, self.limits, self.registry = handler, limits, registry
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self.transport: asyncio.Transport | None = None
        self._phase = _IDLE
        self._timer: asyncio.TimerHandle | None = None
        self._deadline: float | None = None
        self._deadline_phase = _IDLE
        self._sink: BodySink | None = None
        self._answer: Response | None = None  # decided at the headers, sent at the end of the (dropped) body
        self._error: HTTPError | None = None  # raised while feeding the body
        self._task: asyncio.Task[None] | None = None
        self._write_paused = False
        self._pumping = False  # inside _pump: an answer given there must not pump again (pipelined requests recurse)
        self._head_request = False  # the request being answered is a HEAD (its answer carries no body)
        self._unsent: list[Callable[[], None]] = []  # ``sent`` callbacks of answers not yet written out
        self._chunked = False  # the request's body has no declared length
        self._raw_left = 0  # bytes of the body still to come past h11 (``_take_body_past_h11``)
        self._closes = False  # the request being answered closes the connection after its answer
        self._drained: asyncio.Future[None] | None = None  # an answer waits on it while an earlier one is unsent
        self.last_active = 0.0  # loop time of the last bytes received (the oldest idle connections are shed first)
        self.conn_id = id(self)  # names the connection while it is lent
        self.template: HeadTemplate | None = None  # the request being answered, as a lent connection would match it
        self._back: Callable[[], None] | None = None  # what the worker said of the connection before it was lent here

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=0)  # type: ignore[attr-defined]  # told when an answer has left
        if self.registry is not None:
            self.registry.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm(self.limits.idle_timeout_s, _IDLE)

    def data_received(self, data: bytes) -> None:
        self.last_active = asyncio.get_running_loop().time()
        if self._raw_left:
            data = self._raw_body(data)
            if not data:
                return
        if self._phase == _IDLE:
            self._phase = _HEAD
            self._arm(self.limits.header_timeout_s, _HEAD)
        self.h11.receive_data(data)
        self._pump()

    def eof_received(self) -> bool:
        self.h11.receive_data(b"")
        self._pump()
        return True  # half-closed: the requests still buffered (or running) are answered; h11 then says closed

    @property
    def idle(self) -> bool:
        """No request in progress and no answer being sent: the connection may be closed without losing anything. A
        lent connection is: closing this process's descriptor of it frees a descriptor here, while the worker, which
        holds its own, goes on serving it (and it ends when the worker gives it back)."""
        return self._phase in (_IDLE, _LENT) and self._task is None and not self._write_paused

    def connection_lost(self, exc: Exception | None) -> None:
        self._wake_writer()
        self._cancel_timer()
        self._drop_timer()
        self._flushed()
        if self.registry is not None:
            self.registry.discard(self)
        if self._sink is not None and self._phase == _BODY:
            self._sink.abort()
        self._sink = None

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writer()
        self._flushed()
        if self._phase == _IDLE and self.transport is not None and not self.transport.is_closing():
            self._arm(self.limits.idle_timeout_s, _IDLE)
            self.transport.resume_reading()
            self._pump()  # pipelined requests wait in h11's buffer until the previous answer has left

    # parsing
    def _pump(self) -> None:
        if self._pumping:
            return
        self._pumping = True
        try:
            self._pump_events()
        finally:
            self._pumping = False

    def _pump_events(self) -> None:
        while self._task is None and self.transport is not None and not self.transport.is_closing():
            if self._write_paused and self._phase == _IDLE:
                return  # a client that sends requests without reading answers: no answers pile up in memory
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as e:
                self._protocol_error(e)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._on_request(event)
            elif isinstance(event, h11.Data):
                self._on_data(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._on_end()
            elif isinstance(event, h11.ConnectionClosed):
                self.transport.close()
                return

    def _on_request(self, event: h11.Request) -> None:
        self._phase = _BODY
        self._arm(self.limits.body_timeout_s, _BODY)
        head = _head(event)
        has_body, self._chunked = head.content_length != 0, head.content_length is None
        self._head_request, self._closes = head.method == "HEAD", head.closes
        self.template = _template(event, head)
        try:
            if self._chunked and "content-length" in head.headers:  # RFC 9112 section 6.3: a smuggling attempt
                raise HTTPError(400, "request has both Transfer-Encoding and Content-Length; send one of them")
            # h11 bounds a head that arrives in pieces; one that arrives whole is measured here
            if (size := len(event.target) + sum(len(k) + len(v) + 4 for k, v in event.headers)) > \
                    self.limits.max_header_bytes:
                raise HTTPError(431, f"request headers of {size} bytes exceed the server's limit of "
                                     f"{self.limits.max_header_bytes} bytes")
            if head.content_length is not None and head.content_length > self.limits.max_body_bytes:
                raise HTTPError(413, f"request body of {head.content_length} bytes exceeds the server's limit of "
                                     f"{self.limits.max_body_bytes} bytes")
            outcome = self.handler.head(head)
        except HTTPError as e:
            outcome = e.response()
        except Exception as e:
            log.exception("handler failed on the headers of %s %s", head.method, head.path)
            outcome = Response(500, f"internal server error: {type(e).__name__}: {e}".encode())
        if isinstance(outcome, Response):
            if has_body:  # refused before its body: do not read (possibly gigabytes of) it
                self._respond(outcome, close=True)
            else:
                self._answer = outcome
            return
        self._sink = outcome
        if self.h11.they_are_waiting_for_100_continue and self.transport is not None:
            self.transport.write(self.h11.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")))
        if head.content_length is not None and head.content_length >= RAW_BODY_BYTES:
            self._take_body_past_h11(event, head.content_length)

    def _take_body_past_h11(self, event: h11.Request, length: int) -> None:
        """Receive a large body without h11, which would copy every byte twice: h11 continues with a connection that
        has read this request's head without its body, and the body goes straight to the sink as it arrives."""
        buffered, closed = self.h11.trailing_data
        bypass = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        bypass.receive_data(_head_bytes(event))
        if not (isinstance(bypass.next_event(), h11.Request) and isinstance(bypass.next_event(), h11.EndOfMessage)):
            return  # cannot happen for a head h11 has just parsed; the body then goes through h11 as usual
        self.h11, self._raw_left = bypass, length
        if rest := self._raw_body(buffered):
            self.h11.receive_data(rest)
        if closed:
            self.h11.receive_data(b"")

    def _raw_body(self, data: bytes) -> bytes:
        """Pass the next bytes of a body received past h11 to the sink; returns what follows the body."""
        take = min(self._raw_left, len(data))
        if take:
            self._raw_left -= take
            self._on_data(memoryview(data)[:take] if take < len(data) else data)
            if not self._raw_left:
                self._on_end()
        return data[take:]

    def _on_data(self, data: Bytes) -> None:
        if self._sink is None or self._error is not None:
            return
        try:
            self._sink.feed(data)
        except HTTPError as e:
            self._error = e
        except Exception as e:
            log.exception("body handler failed")
            self._error = HTTPError(500, f"internal server error: {type(e).__name__}: {e}")
        if self._error is not None:
            self._sink.abort()
            if self._chunked:  # no declared length bounds what is left to drop: answer now and close
                self._sink, error, self._error = None, self._error, None
                self._respond(error.response(), close=True)

    def _on_end(self) -> None:
        self._cancel_timer()
        sink, answer, error = self._sink, self._answer, self._error
        self._sink = self._answer = self._error = None
        if error is not None:
            self._respond(error.response())
        elif sink is not None:
            self._finish(sink)
        else:
            self._respond(answer or Response(500, b"internal server error: no response"))

    def _finish(self, sink: BodySink) -> None:
        self._phase = _BUSY
        if self.transport is not None:
            self.transport.pause_reading()
        self._task = asyncio.get_running_loop().create_task(self._complete(sink))

    async def _complete(self, sink: BodySink) -> None:
        """Have ``sink`` produce the answer once nothing is left to send on the connection (it may write there)."""
        transport = self.transport
        if self._write_paused:  # a 100 Continue the client has not taken: the answer goes after it
            self._arm(self.limits.body_timeout_s, _SEND)
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
            self._cancel_timer()
        sock = transport.get_extra_info("socket") if transport is not None and not transport.is_closing() else None
        lendable = self.template is not None and self.h11.trailing_data == (b"", False) and not self._write_paused
        try:
            outcome = sink.complete(sock.fileno() if sock is not None else None, self if lendable else None)
            response = outcome if isinstance(outcome, Response) else await outcome
        except AnswerCut as e:
            log.info("answer cut: %s", e)
            self._task = None
            if transport is not None:
                transport.abort()
            return
        except Exception as e:
            response = _error_response(e)
        self._task = None
        if self.transport is not None and not self.transport.is_closing():
            self._respond(response)

    # answering
    def _respond(self, response: Response, close: bool = False) -> None:
        transport = self.transport
        if transport is None:
            return
        if response.sent is not None:
            self._unsent.append(response.sent)
        back, self._back = self._back, None
        if response.written:
            if response.lent:
                self._lend(transport, back)
            else:
                self._record(transport, response.status)
            return
        length = memoryview(response.body).nbytes
        headers = [("content-length", str(length)), ("content-type", response.content_type), *response.headers]
        if close or response.status >= CLOSING_STATUS:
            headers.append(("connection", "close"))
        try:
            reason = HTTPStatus(response.status).phrase.encode()
            pieces: list[Bytes] = [self.h11.send(h11.Response(status_code=response.status, headers=headers,
                                                               reason=reason))]
            if memoryview(response.body).nbytes and not self._head_request:
                data = h11.Data(data=response.body)  # type: ignore[arg-type]  # h11 passes any bytes-like through
                pieces += self.h11.send_with_data_passthrough(data) or ()
            pieces.append(self.h11.send(h11.EndOfMessage()))
            _write(transport, pieces)
        except h11.LocalProtocolError as e:  # the request cannot be followed by another on this connection
            log.debug("closing connection after the response: %s", e)
            self._close_after_sending(transport)
            return
        self._next_cycle(transport)

    def _record(self, transport: asyncio.Transport, status: int) -> None:
        """An answer someone else wrote (with its ``Content-Length``) went out: close if the request said so, else a
        fresh h11 connection takes the next request, with what arrived after this one (telling h11 of an answer it
        did not write would cost as much as parsing a request)."""
        if transport.get_write_buffer_size() == 0:
            self._flushed()
        if self._closes or status >= CLOSING_STATUS:
            self._close_after_sending(transport)
            return
        buffered, closed = self.h11.trailing_data
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        if buffered:
            self.h11.receive_data(buffered)
        if closed:
            self.h11.receive_data(b"")
        self._await_next(transport)

    def _lend(self, transport: asyncio.Transport, back: Callable[[], None] | None) -> None:
        """The connection stays with the worker that wrote the answer: not read (reading is paused since the request
        arrived) nor timed here until :meth:`give_back`; a fresh h11 connection will take the next request then."""
        if transport.get_write_buffer_size() == 0:
            self._flushed()
        self._phase = _LENT
        self._cancel_timer()
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes)
        if back is not None:  # given back before the worker's answer was recorded here
            back()

    def give_back(self, why: Back) -> None:
        """The connection is back from the worker it was lent to: read its next request (still unread on the
        socket), or close it (``Back.IDLE``), or drop it (``Back.CUT``: an answer did not reach the client whole)."""
        transport = self.transport
        if self._phase == _BUSY:
            self._back = functools.partial(self.give_back, why)
            return
        if self._phase != _LENT or transport is None or transport.is_closing():
            return
        if why is Back.CUT:
            transport.abort()
        elif why is Back.CLOSE:
            transport.close()
        else:
            self._await_next(transport)

    def fail(self, status: int, message: str) -> None:
        """The worker the connection was lent to died running its request: answer ``status`` with ``message`` (the
        request was read by the worker, so this transport writes the answer without h11), then close."""
        transport = self.transport
        if self._phase == _BUSY:
            self._back = functools.partial(self.fail, status, message)
            return
        if self._phase != _LENT or transport is None or transport.is_closing():
            return
        body = message.encode()
        head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-length: {len(body)}\r\n"
                f"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n\r\n")
        transport.write(head.encode("latin-1") + body)
        self._phase = _IDLE
        self._close_after_sending(transport)

    def _wake_writer(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    def _next_cycle(self, transport: asyncio.Transport) -> None:
        """After an answer was written whole: close if the protocol says so, else wait for the next request."""
        if transport.get_write_buffer_size() == 0:
            self._flushed()
        if self.h11.our_state is h11.MUST_CLOSE:
            self._close_after_sending(transport)
            return
        try:
            self.h11.start_next_cycle()
        except h11.LocalProtocolError as e:  # the request cannot be followed by another on this connection
            log.debug("closing connection after the response: %s", e)
            self._close_after_sending(transport)
            return
        self._await_next(transport)

    def _await_next(self, transport: asyncio.Transport) -> None:
        self._phase = _IDLE
        if self._write_paused:  # resume_writing reads (and pumps) again once the client has taken the answer
            self._arm(self.limits.body_timeout_s, _SEND)
            transport.pause_reading()
        else:
            self._arm(self.limits.idle_timeout_s, _IDLE)
            transport.resume_reading()
        self._pump()  # a pipelined request may already be buffered

    def _close_after_sending(self, transport: asyncio.Transport) -> None:
        transport.close()  # asyncio sends what is buffered first: bounded by the send deadline
        if self._write_paused:
            self._arm(self.limits.body_timeout_s, _SEND)

    def _flushed(self) -> None:
        while self._unsent:
            self._unsent.pop(0)()

    def _protocol_error(self, e: h11.RemoteProtocolError) -> None:
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._respond(Response(e.error_status_hint, f"bad request: {e}".encode()), close=True)
        elif self.transport is not None:
            self.transport.close()

    # timeouts: one deadline per phase; a phase change only moves it, the timer is rescheduled when it fires early
    def _arm(self, seconds: float, phase: str) -> None:
        loop = asyncio.get_running_loop()
        self._deadline, self._deadline_phase = loop.time() + seconds, phase
        if self._timer is None or self._timer.when() > self._deadline:
            self._drop_timer()
            self._timer = loop.call_at(self._deadline, self._check_deadline)

    def _cancel_timer(self) -> None:
        self._deadline = None

    def _drop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check_deadline(self) -> None:
        self._timer = None
        if self._deadline is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self._deadline:
            self._timer = loop.call_at(self._deadline, self._check_deadline)
        else:
            self._on_timeout(self._deadline_phase)

    def _on_timeout(self, phase: str) -> None:
        self._deadline = None
        if self.transport is None:
            return
        if phase == _SEND:  # a client that does not read its answer holds it in memory: drop the connection
            log.info("dropping connection %s: answer not taken within %s s", self.transport.get_extra_info("peername"),
                     self.limits.body_timeout_s)
            self.transport.abort()
            return
        if self.transport.is_closing():
            return
        log.info("closing connection %s: %s timeout", self.transport.get_extra_info("peername"), phase)
        if phase == _BODY:
            if self._sink is not None:
                self._sink.abort()
                self._sink = None
            self._respond(Response(408, f"request body not received within {self.limits.body_timeout_s} s".encode()),
                          close=True)
        else:
            self.transport.close()


def _error_response(e: Exception) -> Response:
    if isinstance(e, HTTPError):
        return e.response()
    log.error("request failed", exc_info=e)
    return Response(500, f"internal server error: {type(e).__name__}: {e}".encode())


def _write(transport: asyncio.Transport, pieces: list[Bytes]) -> None:
    """Small answers in one write (one segment, one wake-up of the client); large bodies without joining them."""
    if sum(memoryview(p).nbytes for p in pieces) < _JOIN_BELOW:
        transport.write(b"".join(pieces))
    else:
        for p in pieces:
            if memoryview(p).nbytes:
                transport.write(p)


def _template(event: h11.Request, head: RequestHead) -> HeadTemplate | None:
    """The template a lent connection matches the next requests against, for a request that may be followed on a
    lent connection: a keep-alive HTTP/1.1 ``POST`` with a small declared body and nothing unusual."""
    if (head.method != "POST" or head.closes or event.http_version != b"1.1" or head.content_length is None
            or head.content_length >= RAW_BODY_BYTES or "expect" in head.headers
            or "transfer-encoding" in head.headers):
        return None
    return HeadTemplate.of(event.method, event.target, event.http_version, list(event.headers.raw_items()))


def _head_bytes(event: h11.Request) -> bytes:
    """``event``'s request line and headers as received, less its body's length."""
    lines = [b"%s %s HTTP/%s" % (event.method, event.target, event.http_version)]
    lines += [name + b": " + value for name, value in event.headers if name != b"content-length"]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _head(event: h11.Request) -> RequestHead:
    headers: dict[str, str] = {}
    for raw_name, raw_value in event.headers:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        if name in headers:
            value = headers[name] + ("; " if name == "cookie" else ", ") + value
        headers[name] = value
    if "chunked" in headers.get("transfer-encoding", "").lower():
        length = None
    else:
        length = int(headers.get("content-length", "0") or 0)  # h11 has checked it is a non-negative int
    path = event.target.decode("latin-1").partition("?")[0]
    tokens = {t.strip() for t in headers.get("connection", "").lower().split(",")}
    closes = event.http_version < b"1.1" or "close" in tokens
    return RequestHead(event.method.decode("latin-1"), path, headers, length, closes)
