"""The ``POST /batch`` body: content-addressed blobs, the request list last.

Each blob is framed as its 32-byte SHA-256 digest, its length as an 8-byte little-endian unsigned int, then the bytes
(the reference system's framing). Requests name blobs by the lowercase hex of the digest (``datahash``). The body is
the blobs one after the other; the last blob is the request list (``protocol.encode_requests``).

:class:`BodyBuilder` writes bodies (client side) without copying large data; :class:`BodyDecoder` reads them
incrementally as they arrive (server side), checking every declared length against what can still arrive and every
digest against the data, so a bad body is refused early and never held whole before it is checked.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import threading
import weakref
from collections.abc import Iterable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from runtime_backends.cloud.wire.protocol import ProtocolError, WireBounds

__all__ = ["DIGEST_BYTES", "HEADER_BYTES", "FramingError", "blob_header", "BodyBuilder", "BodyDecoder", "DecodedBody",
           "SharedBuffer", "BufferPool", "decode_body"]

DIGEST_BYTES = 32
HASH_STEP = 4 << 20
"""Bytes of a large blob hashed per job on the hashing thread."""
HEADER_BYTES = DIGEST_BYTES + 8
_LENGTH = struct.Struct("<Q")

Bytes = bytes | bytearray | memoryview
Blob = bytearray | memoryview


class FramingError(ProtocolError):
    """A body that is not a well-formed sequence of blobs; the server answers ``400`` with the message."""


def blob_header(data: Bytes) -> tuple[str, bytes]:
    """``(datahash, header)`` of ``data``: the hex SHA-256 and the 40-byte frame header (digest + ``<Q`` length)."""
    digest = hashlib.sha256(data).digest()
    return digest.hex(), digest + _LENGTH.pack(memoryview(data).nbytes)


class BodyBuilder:
    """The blobs of one batch, deduplicated by digest, in the order first added.

    Data is referenced, not copied: the caller keeps it unchanged until :meth:`pieces` has been sent.
    """

    def __init__(self) -> None:
        self._blobs: dict[str, tuple[bytes, Bytes]] = {}

    def __len__(self) -> int:
        return len(self._blobs)

    def add(self, data: Bytes) -> str:
        """Add ``data`` as a blob; returns its datahash (the same for equal data, which is sent once)."""
        datahash, header = blob_header(data)
        self._blobs.setdefault(datahash, (header, data))
        return datahash

    def pieces(self, request_list: bytes) -> list[Bytes]:
        """The body as a list of byte strings to send in order: every blob, then ``request_list`` as the last blob."""
        out: list[Bytes] = []
        for header, data in self._blobs.values():
            out += (header, data)
        out += blob_header(request_list)[1], request_list
        return out


class SharedBuffer(mmap.mmap):
    """A memory map of a ``memfd`` (Linux ``memfd_create``): :attr:`memfd` can be passed to another process, which
    maps the same pages instead of receiving a copy. Its pages take memory only once written."""

    memfd: int

    @classmethod
    def new(cls, nbytes: int) -> SharedBuffer:
        """A zero-filled shared buffer of ``nbytes`` (> 0); ``OSError`` when the system refuses it."""
        fd = os.memfd_create("cloud-blob", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, nbytes)
            buf = cls(fd, nbytes)
        except BaseException:
            os.close(fd)
            raise
        buf.memfd = fd
        weakref.finalize(buf, os.close, fd)
        return buf


class BufferPool:
    """Large buffers (received blobs) kept for reuse: a fresh 64 MiB buffer costs ~16,000 page faults each time (as
    much as hashing it), a reused one none. A new large buffer is a :class:`SharedBuffer`, whose pages take memory
    only once written (a blob that declares gigabytes and never sends them costs nothing) and which the server hands
    to a session's worker by descriptor. Buffers below ``MIN_BYTES`` are not pooled; at most ``max_bytes`` are kept
    idle. Thread-safe."""

    MIN_BYTES = 1 << 20

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._idle: list[mmap.mmap] = []
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> Blob:
        """A writable buffer of exactly ``nbytes`` (a view of a pooled buffer of at most twice that size)."""
        if nbytes < self.MIN_BYTES:
            return bytearray(nbytes)
        with self._lock:
            fits = [b for b in self._idle if nbytes <= len(b) <= 2 * nbytes]
            if fits:
                best = min(fits, key=len)
                self._idle.remove(best)
                return memoryview(best)[:nbytes]
        return memoryview(SharedBuffer.new(nbytes))

    def give(self, blobs: Iterable[Blob]) -> None:
        """Return buffers from :meth:`take` once nothing uses them any more."""
        with self._lock:
            for blob in blobs:
                base = blob.obj if isinstance(blob, memoryview) else None
                if isinstance(base, mmap.mmap) and sum(map(len, self._idle)) + len(base) <= self.max_bytes \
                        and all(b is not base for b in self._idle):
                    self._idle.append(base)


@dataclass(frozen=True)
class DecodedBody:
    """A verified body: ``blobs`` maps datahash -> bytes (the request list included); ``requests`` is the last blob
    and ``requests_hash`` its datahash."""

    blobs: dict[str, Blob]
    requests: Blob
    requests_hash: str


class BodyDecoder:
    """Incremental reader of one body of ``total`` bytes (``None`` when the length is not known in advance, as with
    chunked transfer encoding; ``limits.max_body_bytes`` bounds it then). Large blobs come from ``pool`` when given
    and are hashed on the one-thread executor ``hashing`` when given, as they arrive.

    :meth:`feed` takes the body's bytes in pieces of any size and raises :class:`FramingError` as soon as something is
    wrong: a declared length longer than the rest of the body, a digest that does not match its data, more than
    ``limits.max_blobs`` blobs, more data than ``total``. :meth:`finish` raises it for a body that ends inside a blob or
    holds no blob at all. Memory is allocated per blob only after its length has been checked.
    """

    def __init__(self, limits: WireBounds, total: int | None, pool: BufferPool | None = None,
                 hashing: Executor | None = None) -> None:
        self.limits, self.total, self.pool, self.hashing = limits, total, pool, hashing
        self._hashed = 0  # bytes of the open blob handed to the hasher
        self._hash_jobs: list[Future[None]] = []
        self.received = 0
        self._limit = total if total is not None else limits.max_body_bytes
        self._blobs: dict[str, Blob] = {}
        self._count = 0  # blobs started, duplicates included
        self._last: tuple[str, Blob] | None = None
        self._header = bytearray()
        self._data: Blob = bytearray()  # the blob being filled, while ``_open``
        self._open = False
        self._filled = 0
        self._hasher = hashlib.sha256()
        self._digest = b""

    def feed(self, chunk: Bytes) -> None:
        """Consume the next bytes of the body."""
        view = memoryview(chunk).cast("B")
        if self.received + view.nbytes > self._limit:
            raise FramingError(f"body is longer than {self._limit} bytes")
        while view.nbytes:
            if self._open:
                view = self._feed_data(view)
            elif not self._header and view.nbytes >= HEADER_BYTES:
                view = self._feed_blob(view)
            else:
                view = self._feed_header(view)

    def _feed_blob(self, view: memoryview) -> memoryview:
        """A blob header at the start of ``view``: take the whole blob at once when ``view`` holds it (the common
        case for small blobs), else start it."""
        (length,) = _LENGTH.unpack_from(view, DIGEST_BYTES)
        if view.nbytes < HEADER_BYTES + length:
            return self._feed_header(view)
        self._check_start(length, HEADER_BYTES)
        self._digest = bytes(view[:DIGEST_BYTES])
        self._data = bytearray(view[HEADER_BYTES:HEADER_BYTES + length])
        self._hasher = hashlib.sha256(self._data)
        self.received += HEADER_BYTES + length
        self._end_blob()
        return view[HEADER_BYTES + length:]

    def _check_start(self, length: int, header_pending: int) -> None:
        """Bounds of the blob about to start, whose header ``header_pending`` bytes are not counted yet."""
        if self._count >= self.limits.max_blobs:
            raise FramingError(f"body holds more than {self.limits.max_blobs} blobs")
        if length > (remaining := self._limit - self.received - header_pending):
            raise FramingError(f"blob {self._count} declares {length} bytes, but the body has at most {remaining} "
                               f"more")
        self._count += 1

    def _feed_header(self, view: memoryview) -> memoryview:
        take = min(HEADER_BYTES - len(self._header), view.nbytes)
        self._header += view[:take]
        self.received += take
        if len(self._header) == HEADER_BYTES:
            self._start_blob()
        return view[take:]

    def _start_blob(self) -> None:
        (length,) = _LENGTH.unpack_from(self._header, DIGEST_BYTES)
        self._check_start(length, 0)
        self._digest = bytes(self._header[:DIGEST_BYTES])
        self._header.clear()
        self._data = self.pool.take(length) if self.pool is not None else bytearray(length)
        self._filled, self._hashed, self._hasher, self._open = 0, 0, hashlib.sha256(), True
        if length == 0:
            self._end_blob()

    def _feed_data(self, view: memoryview) -> memoryview:
        take = min(len(self._data) - self._filled, view.nbytes)
        self._data[self._filled:self._filled + take] = view[:take]
        self._filled += take
        self.received += take
        self._hash_filled(self._filled == len(self._data))
        if self._filled == len(self._data):
            self._end_blob()
        return view[take:]

    def _hash_filled(self, last: bool) -> None:
        """Hash what has arrived of the open blob: in steps of ``HASH_STEP`` on the hashing thread when there is one
        (hashlib releases the GIL, so it overlaps with receiving the rest), else here."""
        if self._filled - self._hashed < (HASH_STEP if self.hashing is not None else 1) and not last:
            return
        region = memoryview(self._data)[self._hashed:self._filled]
        self._hashed = self._filled
        if self.hashing is None or len(self._data) < HASH_STEP:
            self._hasher.update(region)
        else:
            self._hash_jobs.append(self.hashing.submit(self._hasher.update, region))

    def _end_blob(self) -> None:
        data, index = self._data, self._count - 1
        for job in self._hash_jobs:  # in submission order on a one-thread executor: the hash is complete after them
            job.result()
        self._hash_jobs.clear()
        actual = self._hasher.digest()
        if actual != self._digest:
            raise FramingError(f"blob {index} ({len(data)} bytes): its data hashes to {actual.hex()}, the header "
                               f"says {self._digest.hex()}")
        self._blobs[datahash := actual.hex()] = data
        self._last, self._open = (datahash, data), False

    def finish(self) -> DecodedBody:
        """The verified blobs, once the whole body has been fed."""
        if self._open:
            raise FramingError(f"body ends inside blob {self._count - 1}: {self._filled} of its {len(self._data)} "
                               f"bytes arrived")
        if self._header:
            raise FramingError(f"body ends inside a blob header: {len(self._header)} of {HEADER_BYTES} bytes")
        if self._last is None:
            raise FramingError("body holds no blob; it must end with the request list")
        if self.total is not None and self.received != self.total:
            raise FramingError(f"body ended after {self.received} of {self.total} bytes")
        return DecodedBody(self._blobs, self._last[1], self._last[0])

    def buffers(self) -> list[Blob]:
        """Every buffer this decoder filled (to give back to its pool when the body is done with)."""
        return [*self._blobs.values(), *([self._data] if self._open else [])]


def decode_body(body: Bytes | Iterable[Bytes], limits: WireBounds) -> DecodedBody:
    """Decode a whole body (bytes, or an iterable of pieces); ``FramingError`` as :class:`BodyDecoder` says."""
    pieces = [body] if isinstance(body, (bytes, bytearray, memoryview)) else list(body)
    decoder = BodyDecoder(limits, sum(memoryview(p).nbytes for p in pieces))
    for p in pieces:
        decoder.feed(p)
    return decoder.finish()
