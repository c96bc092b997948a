"""Connections lent to a session's worker: after a batch, the server may leave the client's connection with the worker,
which then serves that connection's next batches itself -- no hop through the server, no HTTP work there.

The worker serves a request on a lent connection only when its head is, line for line and byte for byte, the head of
the request the server parsed (h11), authorized and lent the connection with -- the same request line, cookie, token
and every other header -- except the value of ``Content-Length`` (decimal digits, below ``RAW_BODY_BYTES``). Anything
else (another path or session, a large or chunked body, a head that does not arrive whole within
``PATIENCE_S``, the client closing) gives the connection back to the server untouched: the worker reads requests with
``MSG_PEEK`` and takes bytes off the socket only for a request it serves, so the server finds the rest as it was sent.

The worker tells the server where things stand through a :class:`Board` in shared memory, one row per budget slot
(written by the worker only, read by the server): which lent connection's request it is running (so when the worker
dies the server answers that request ``500``/``504``), when it last served one (so an active session is not reaped as
idle), and what the session holds. Connections are given back over a ``SOCK_SEQPACKET`` socket, one ``<QB`` (connection
id, :class:`Back` reason) per message.
"""

from __future__ import annotations

import enum
import logging
import mmap
import os
import re
import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Board", "Back", "HeadTemplate", "LentConnections", "RETURN", "RAW_BODY_BYTES", "PATIENCE_S"]

log = logging.getLogger(__name__)

RAW_BODY_BYTES = 1 << 20
"""Bodies from this size up are received by the server (past h11, into shared memory), never on a lent connection."""
PATIENCE_S = 0.5
"""A request that has begun to arrive on a lent connection and is not whole after this long goes back to the server,
whose header and body deadlines then apply."""
RETURN = struct.Struct("<QB")
_CONTENT_LENGTH = re.compile(rb"content-length: ?([0-9]{1,7})", re.IGNORECASE)
_FIELDS = 4  # per slot: lent connection being served, last served (monotonic ns), bytes held, empty


class Back(enum.IntEnum):
    """Why a lent connection is given back: ``REQUEST`` -- the next request is the server's to read; ``CLOSE`` -- the
    server closes it (no request for ``Limits.idle_timeout_s``, or an error answer, which closes the connection);
    ``CUT`` -- an answer did not reach the client whole (the server drops it)."""

    REQUEST = 0
    CLOSE = 1
    CUT = 2


@dataclass(frozen=True)
class HeadTemplate:
    """The head of a request the server parsed and authorized, as lines of bytes without ``Content-Length``'s value:
    ``lines[length_at]`` is where that header was."""

    lines: tuple[bytes, ...]
    length_at: int

    @classmethod
    def of(cls, method: bytes, target: bytes, version: bytes, raw_headers: list[tuple[bytes, bytes]]) -> HeadTemplate | None:
        """From h11's parse of a request (names as sent); ``None`` when it has no ``Content-Length``."""
        lines = [b"%s %s HTTP/%s" % (method, target, version)]
        length_at = -1
        for name, value in raw_headers:
            if name.lower() == b"content-length":
                length_at = len(lines)
                lines.append(b"")
            else:
                lines.append(name + b": " + value)
        return cls(tuple(lines), length_at) if length_at > 0 else None

    def encode(self) -> bytes:
        """For the message that lends a connection: ``<H`` index of the length line, then the lines joined by CRLF."""
        return struct.pack("<H", self.length_at) + b"\r\n".join(self.lines)

    @classmethod
    def decode(cls, data: bytes) -> HeadTemplate:
        (length_at,) = struct.unpack_from("<H", data)
        return cls(tuple(data[2:].split(b"\r\n")), length_at)

    def body_length(self, head: bytes | bytearray) -> int | None:
        """The ``Content-Length`` of ``head`` (a request head without its final blank line) when it is this
        template's head with that length, else ``None``."""
        lines = bytes(head).split(b"\r\n")
        m = None
        if len(lines) != len(self.lines):
            return None
        for i, (line, want) in enumerate(zip(lines, self.lines)):
            if i == self.length_at:
                if (m := _CONTENT_LENGTH.fullmatch(line)) is None:
                    return None
            elif line != want:
                return None
        return int(m.group(1)) if m is not None else None


class Board:
    """Per budget slot, what the slot's worker says of its lent connections (see the module docstring). Made by the
    server (:attr:`fd` passed to each worker, which :meth:`attach`\\ es it); written by the worker, read by the server."""

    def __init__(self, slots: int) -> None:
        self.fd = os.memfd_create("cloud-lent-board", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, slots * _FIELDS * 8)
        self._open()

    @classmethod
    def attach(cls, fd: int) -> Board:
        board = cls.__new__(cls)
        board.fd = fd
        board._open()
        return board

    def _open(self) -> None:
        self._map = mmap.mmap(self.fd, os.fstat(self.fd).st_size)
        self._rows = memoryview(self._map).cast("q")

    def serving(self, slot: int, conn_id: int) -> None:
        """The worker of ``slot`` runs a request of lent connection ``conn_id`` (0: none)."""
        self._rows[slot * _FIELDS] = conn_id

    def served(self, slot: int, held: int, empty: bool) -> None:
        """A request of a lent connection was answered; the session holds ``held`` bytes (nothing at all: ``empty``)."""
        base = slot * _FIELDS
        self._rows[base] = 0
        self._rows[base + 1] = time.monotonic_ns()
        self._rows[base + 2] = held
        self._rows[base + 3] = int(empty)

    def serving_now(self, slot: int) -> int:
        """The lent connection whose request ``slot``'s worker is running (0: none)."""
        return int(self._rows[slot * _FIELDS])

    def last_served(self, slot: int) -> tuple[float, int, bool] | None:
        """``(monotonic seconds, bytes held, empty)`` as of the last request served on a lent connection (``None``:
        none yet)."""
        base = slot * _FIELDS
        if not self._rows[base + 1]:
            return None
        return self._rows[base + 1] / 1e9, int(self._rows[base + 2]), bool(self._rows[base + 3])

    def clear(self, slot: int) -> None:
        """Forget ``slot``'s row (its worker is gone; the slot goes to another)."""
        for i in range(_FIELDS):
            self._rows[slot * _FIELDS + i] = 0


@dataclass
class _Lent:
    sock: socket.socket
    conn_id: int
    template: HeadTemplate
    last_active: float = field(default_factory=time.monotonic)
    partial_since: float | None = None  # a request has begun to arrive


Serve = Callable[[socket.socket, int, memoryview], "Back | None"]


class LentConnections:
    """The worker's side: the connections lent to it, watched with ``epoll`` (edge-triggered: a request that has
    begun to arrive is looked at again when more of it comes). ``serve(sock, conn_id, body)`` runs one request's body
    and answers it on ``sock``; it returns ``None`` to keep the connection, else why it goes back. ``returns``: the
    socket connections are given back on; ``max_header_bytes``: a head longer than this goes back unread;
    ``idle_s``: a connection with no request for this long goes back to be closed."""

    def __init__(self, epoll: select.epoll, returns: socket.socket, serve: Serve, max_header_bytes: int,
                 idle_s: float) -> None:
        self.epoll, self.returns, self.serve = epoll, returns, serve
        self.idle_s = idle_s
        self._by_fd: dict[int, _Lent] = {}
        self._peek = bytearray(max_header_bytes + 4 + RAW_BODY_BYTES)

    def __contains__(self, fd: int) -> bool:
        return fd in self._by_fd

    def add(self, sock: socket.socket, conn_id: int, template: HeadTemplate) -> None:
        """Watch ``sock`` (the client's connection, lent as ``conn_id``), and serve what has already arrived on it."""
        lent = _Lent(sock, conn_id, template)
        self._by_fd[sock.fileno()] = lent
        self.epoll.register(sock.fileno(), select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET)
        self.ready(sock.fileno())

    def ready(self, fd: int) -> None:
        """Bytes arrived on lent connection ``fd``: serve every whole request there; give the connection back at the
        first that is not the lender's kind."""
        lent = self._by_fd[fd]
        view = memoryview(self._peek)
        while True:
            try:
                n = lent.sock.recv_into(view, len(view), socket.MSG_PEEK)
            except BlockingIOError:
                return
            except OSError:
                n = 0
            if n == 0:  # the client closed (or reset) it: the server sees that itself
                self._give_back(lent, Back.REQUEST)
                return
            end = self._peek.find(b"\r\n\r\n", 0, n)
            length = lent.template.body_length(self._peek[:end]) if end >= 0 else None
            if end < 0 and n < len(view) - RAW_BODY_BYTES or (length is not None and end + 4 + length > n):
                lent.partial_since = lent.partial_since or time.monotonic()
                return  # the rest of the request is on its way
            if length is None or length >= RAW_BODY_BYTES:
                self._give_back(lent, Back.REQUEST)
                return
            whole = end + 4 + length
            body = bytearray(length)
            _take(lent.sock, memoryview(self._peek)[:whole])
            body[:] = self._peek[end + 4:whole]
            lent.partial_since = None
            if (why := self.serve(lent.sock, lent.conn_id, memoryview(body))) is not None:
                self._give_back(lent, why)
                return
            lent.last_active = time.monotonic()

    def timeout(self) -> float:
        """Seconds until the next connection's patience or idle time runs out (-1: none lent)."""
        if not self._by_fd:
            return -1.0
        now = time.monotonic()
        due = min(lent.partial_since + PATIENCE_S if lent.partial_since is not None else lent.last_active + self.idle_s
                  for lent in self._by_fd.values())
        return max(0.0, due - now)

    def expire(self) -> None:
        """Give back the connections whose request is late (to the server's deadlines) or that are idle."""
        now = time.monotonic()
        for lent in list(self._by_fd.values()):
            if lent.partial_since is not None and now - lent.partial_since >= PATIENCE_S:
                self._give_back(lent, Back.REQUEST)
            elif lent.partial_since is None and now - lent.last_active >= self.idle_s:
                self._give_back(lent, Back.CLOSE)

    def _give_back(self, lent: _Lent, why: Back) -> None:
        del self._by_fd[lent.sock.fileno()]
        self.epoll.unregister(lent.sock.fileno())
        lent.sock.close()  # this process's descriptor; the server holds its own
        try:
            self.returns.send(RETURN.pack(lent.conn_id, why))
        except OSError as e:  # the server is gone: so is the connection
            log.info("session worker %d: cannot give connection %d back: %s", os.getpid(), lent.conn_id, e)


def _take(sock: socket.socket, into: memoryview) -> None:
    """Read exactly ``into``'s bytes, which have arrived (they were peeked)."""
    got = 0
    while got < into.nbytes:
        got += sock.recv_into(into[got:])
