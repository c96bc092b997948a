"""The client's HTTP link to a CLOUD server: one keep-alive ``http.client`` connection, reconnects, deadlines.

* Connecting retries with exponential backoff (20 ms doubling to 1 s) until ``connect_timeout_s``
  (``CLOUD_CONNECT_TIMEOUT``), or for at most ``REFUSED_RETRY_S`` while every attempt is refused (nothing listens
  there: a server that is starting listens within that time), then raises :class:`CloudConnectionError` saying which
  addresses it tried, how often, and how to start a server -- one line, no chained traceback.
* Before a request goes out on a kept-alive connection, the connection is checked: one the server has closed
  meanwhile (its idle timeout, or a restart) is replaced by a new one. Once a ``POST /batch`` has been written it is
  never sent again -- batches are not idempotent (a second ``BufferAlloc`` of the same number fails, a launch runs
  twice) -- so a connection lost after that raises :class:`CloudConnectionError` saying the batch's outcome is
  unknown. A ``GET`` is retried once.
* A server that accepts but does not answer raises :class:`CloudTimeoutError` after ``timeout_s``.
* An error answer raises :class:`CloudError` with the server's status and message.

Every request carries the session cookie (``Cookie: session=<id>``) and, with a token, ``Authorization: Bearer``.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import select
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["CloudError", "CloudRequestError", "CloudMemoryError", "CloudConnectionError", "CloudTimeoutError", "Reply",
           "Link", "REFUSED_RETRY_S"]

log = logging.getLogger(__name__)

Bytes = bytes | bytearray | memoryview
_JOIN_BELOW = 64 << 10  # bodies smaller than this go out in one send
REFUSED_RETRY_S = 3.0
"""Seconds connecting goes on while every attempt is refused."""
_MAX_MESSAGE = 8000  # characters of a server's error message kept in the exception


class CloudError(RuntimeError):
    """A CLOUD server refused a request or failed it: ``status`` is the HTTP status (``None`` when no answer came),
    ``message`` the server's text."""

    def __init__(self, message: str, status: int | None = None, server_message: str = "") -> None:
        super().__init__(message)
        self.status, self.message = status, server_message or message


class CloudRequestError(CloudError, ValueError):
    """The server refused a request as wrong (4xx: malformed, unknown buffer or program, a launch the device refuses)."""


class CloudMemoryError(CloudError, MemoryError):
    """The server is out of memory for this session (``507``: the session's byte bound or the device's memory)."""


class CloudConnectionError(CloudError, ConnectionError):
    """The server cannot be reached, or the connection was lost during a request."""


class CloudTimeoutError(CloudError, TimeoutError):
    """The server did not answer within the link's timeout."""


@dataclass(frozen=True)
class Reply:
    """A ``200`` answer: ``body`` (empty when it was read into the caller's buffer: ``filled``) and ``headers``."""

    body: bytes
    filled: bool
    headers: http.client.HTTPMessage


class Link:
    """A keep-alive connection to the server at ``host`` (``"host:port"``) for session ``session_id``.

    ``timeout_s``: seconds to wait on a mute server (per socket operation); ``connect_timeout_s``: the deadline for
    reaching it. Raises ``ValueError`` at construction for a ``host`` that is not ``host:port``. Not thread-safe: the
    device serializes its use.
    """

    def __init__(self, host: str, *, session_id: str, token: str | None = None, timeout_s: float = 120.0,
                 connect_timeout_s: float = 3.0) -> None:
        try:
            probe = http.client.HTTPConnection(host)
        except http.client.InvalidURL as e:
            raise ValueError(f"CLOUD host {host!r} is not host:port ({e})") from None
        if not probe.host:
            raise ValueError(f"CLOUD host {host!r} names no host; give host:port, e.g. 127.0.0.1:6667")
        self.host, self.session_id, self.token = host, session_id, token
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self._conn: _Connection | None = None

    def get(self, path: str) -> Reply:
        """``GET path``; ``CloudError`` subclasses as the module docstring says."""
        return self.request("GET", path)

    def request(self, method: str, path: str, pieces: Sequence[Bytes] = (), into: memoryview | None = None) -> Reply:
        """Send ``method path`` with the concatenation of ``pieces`` as body (``POST``). When ``into`` is given and
        the answer has exactly ``into.nbytes`` bytes, they are read straight into it (``Reply.filled``)."""
        try:
            response = self._send_checked(method, path, pieces)
        except CloudError:  # could not connect: its own message says where it tried and what to do
            raise
        except TimeoutError:
            self.close()
            raise self._timeout(method, path) from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            outcome = " The batch was sent whole or in part; whether the server ran it is unknown (it is not sent " \
                      "again: batches are not idempotent)." if method == "POST" else ""
            raise CloudConnectionError(f"connection to CLOUD server {self.host} lost during {method} {path} before "
                                       f"an answer: {type(e).__name__}: {e}.{outcome}") from None
        return self._receive(response, method, path, into)

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> tuple[_Connection, bool]:
        if self._conn is not None:
            return self._conn, True
        self._conn = self._connect()
        return self._conn, False

    def _connect(self) -> _Connection:
        start = time.monotonic()
        deadline, delay, attempts = start + self.connect_timeout_s, 0.02, 0
        refused_until = start + min(self.connect_timeout_s, REFUSED_RETRY_S)
        while True:
            attempts += 1
            conn = _Connection(self.host, timeout=min(self.timeout_s, self.connect_timeout_s))
            try:
                conn.connect()
            except OSError as e:
                conn.close()
                left = (refused_until if isinstance(e, ConnectionRefusedError) else deadline) - time.monotonic()
                if left <= 0:
                    raise CloudConnectionError(
                        f"cannot reach a CLOUD server at {self.host} ({_addresses(conn.host, conn.port)}): "
                        f"{e.strerror or e} ({attempts} attempts in {time.monotonic() - start:.1f} s, "
                        f"CLOUD_CONNECT_TIMEOUT={self.connect_timeout_s:g}). Start one there with `python -m "
                        f"runtime_backends.cloud serve --port PORT --device CPU` and set HOST=host:PORT, or unset HOST "
                        f"to start one for this process") from None
                if attempts == 1:
                    log.info("CLOUD server %s not reachable (%s); retrying for %.1f s", self.host, e, left)
                time.sleep(min(delay, left))
                delay = min(2 * delay, 1.0)
                continue
            if conn.sock is not None:
                conn.sock.settimeout(self.timeout_s)
            return conn

    def _send_checked(self, method: str, path: str, pieces: Sequence[Bytes]) -> http.client.HTTPResponse:
        """Send on a live connection: a kept-alive one the server has closed is replaced first; a ``GET`` that
        fails is sent once more on a new connection, a ``POST`` never (see the module docstring)."""
        if self._conn is not None and _dropped(self._conn):
            log.debug("kept-alive connection to %s was closed by the server; reconnecting", self.host)
            self.close()
        conn, reused = self._connection()
        try:
            return self._send(conn, method, path, pieces)
        except (ConnectionError, http.client.BadStatusLine):
            if not reused or method == "POST":
                raise
            self.close()
        conn, _ = self._connection()
        return self._send(conn, method, path, pieces)

    def _send(self, conn: _Connection, method: str, path: str, pieces: Sequence[Bytes]) -> http.client.HTTPResponse:
        total = sum(memoryview(p).nbytes for p in pieces)
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.putheader("Cookie", f"session={self.session_id}")
        if self.token is not None:
            conn.putheader("Authorization", f"Bearer {self.token}")
        if method == "POST":
            conn.putheader("Content-Length", str(total))
        with conn.gathered(total < _JOIN_BELOW):
            conn.endheaders()
            for piece in pieces:
                conn.send(piece)
        return conn.getresponse()

    def _receive(self, response: http.client.HTTPResponse, method: str, path: str, into: memoryview | None) -> Reply:
        try:
            if response.status == 200 and into is not None and response.length == into.nbytes:
                _read_into(response, into)
                body, filled = b"", True
            else:
                body, filled = response.read(), False
        except TimeoutError:
            self.close()
            raise self._timeout(method, path) from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise CloudConnectionError(f"connection to CLOUD server {self.host} lost while reading the answer to "
                                       f"{method} {path}: {type(e).__name__}: {e}") from None
        if response.will_close:
            self.close()
        if response.status != 200:
            message = body.decode("utf-8", "replace")[:_MAX_MESSAGE]
            raise _error_class(response.status)(f"CLOUD server {self.host} answered {response.status} "
                                                f"{response.reason} to {method} {path}: {message}",
                                                response.status, message)
        return Reply(body, filled, response.headers)

    def _timeout(self, method: str, path: str) -> CloudTimeoutError:
        return CloudTimeoutError(f"CLOUD server {self.host} did not answer {method} {path} within {self.timeout_s} s "
                                 f"(CLOUD_TIMEOUT); it may be stalled, or a kernel runs longer than that")


class _Connection(http.client.HTTPConnection):
    """``http.client.HTTPConnection`` whose :meth:`send` calls can be gathered into one: a small request then goes out
    as one segment (headers and body together), which halves the wake-ups of the server per round trip."""

    _gathering: list[Bytes] | None = None

    @contextlib.contextmanager
    def gathered(self, enabled: bool = True) -> Iterator[None]:
        """Within the block, :meth:`send` collects; at its end everything is sent at once (when ``enabled``)."""
        if not enabled:
            yield
            return
        self._gathering = []
        try:
            yield
            data = b"".join(self._gathering)
        finally:
            self._gathering = None
        super().send(data)

    def send(self, data: Any) -> None:
        if self._gathering is not None:
            self._gathering.append(data)
        else:
            super().send(data)


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether the server has closed a kept-alive connection (it is readable with no request outstanding: EOF, or
    an unsolicited answer such as a server's notice before it closed)."""
    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _addresses(host: str, port: int) -> str:
    """The addresses ``host:port`` resolves to, for an error message (or why it does not resolve)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        return f"{host} does not resolve: {e.strerror or str(e)}"
    shown = sorted({_show(family, sockaddr) for family, _, _, _, sockaddr in infos})
    return "tried " + ", ".join(shown)


def _show(family: int, sockaddr: tuple[Any, ...]) -> str:
    host, port = sockaddr[0], sockaddr[1]
    return f"[{host}]:{port}" if family == socket.AF_INET6 else f"{host}:{port}"


def _error_class(status: int) -> type[CloudError]:
    if status == 507:
        return CloudMemoryError
    if 400 <= status < 500 and status not in (401, 408, 429):
        return CloudRequestError
    return CloudError


def _read_into(response: http.client.HTTPResponse, into: memoryview) -> None:
    filled = 0
    while filled < into.nbytes:
        n = response.readinto(into[filled:])
        if not n:
            raise http.client.IncompleteRead(bytes(0), into.nbytes - filled)
        filled += n
