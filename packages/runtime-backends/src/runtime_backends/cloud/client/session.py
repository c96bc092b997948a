"""The client's side of a session: the queue of requests not sent yet, and what the client holds on the server.

Requests are queued and sent together as one batch (one ``POST /batch``) when an answer is needed: a ``CopyOut``, a
``ProgramExec`` with ``wait=True``, :meth:`RemoteSession.synchronize`, and a program load (so that a compile error is
raised where the program is made, and the server's argument counts let launches be checked locally). A copy-in of
``EAGER_COPYIN_BYTES`` or more is sent at once, straight from the caller's memory, instead of keeping a copy of it.

A batch the server refuses (it answers an error) changed nothing on the server -- this project's server checks a
batch whole and rolls back its allocations and frees when a request fails -- so the client forgets that batch's
allocations and keeps its freed buffers as held. The session ends with :meth:`RemoteSession.close`: every buffer and
program still held is freed in one last batch, which is how a protocol client ends its session (the server forgets a
session that holds nothing).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import re
import threading
from dataclasses import dataclass

from runtime_backends.cloud.client.link import CloudError, Link, Reply
from runtime_backends.cloud.wire.framing import BodyBuilder
from runtime_backends.cloud.wire.protocol import (
    SIGNATURE_HEADER,
    BufferAlloc,
    BufferFree,
    BufferSpec,
    CopyIn,
    CopyOut,
    ProgramAlloc,
    ProgramExec,
    ProgramFree,
    Request,
    encode_requests,
)
from runtime_core.buffer_spec import BufferSpec as CoreBufferSpec
from runtime_core.compiler import CompileError

__all__ = ["RemoteSession", "EAGER_COPYIN_BYTES", "ProgramKey"]

log = logging.getLogger(__name__)
EAGER_COPYIN_BYTES = 1 << 20
ProgramKey = tuple[str, str]
_SIGNATURE = re.compile(r"\s*buffers=(\d+),\s*vals=(\d+)\s*")


@dataclass
class _Loaded:
    users: int
    signature: tuple[int, int] | None


class RemoteSession:
    """The session ``link.session_id`` on the server behind ``link``; thread-safe.

    Buffer numbers are chosen here (1, 2, ...). ``live`` maps each allocated buffer number to its size in bytes.
    """

    def __init__(self, link: Link) -> None:
        self.link = link
        self.live: dict[int, int] = {}
        self._lock = threading.Lock()
        self._queue: list[Request] = []
        self._blobs = BodyBuilder()
        self._last_buffer = 0
        self._programs: dict[ProgramKey, _Loaded] = {}
        self._released: collections.deque[ProgramKey] = collections.deque()  # appended by GC, drained under the lock
        self._freeing: dict[int, int] = {}  # freed buffers (-> size) whose BufferFree is not answered yet
        self._refused: set[int] = set()  # allocations the server refused, still referenced by their Buffer
        self.closed = False

    # buffers
    def alloc(self, size: int, spec: CoreBufferSpec) -> int:
        """Queue the allocation of ``size`` bytes; returns the buffer number."""
        wire = BufferSpec.from_core(spec)
        with self._lock:
            self._check_open()
            self._last_buffer += 1
            num = self._last_buffer
            self._queue.append(BufferAlloc(num, size, wire))
            self.live[num] = size
        return num

    def free(self, num: int) -> None:
        """Queue freeing buffer ``num``; ``ValueError`` if it is not live. A buffer whose allocation the server
        refused is just forgotten."""
        with self._lock:
            if num in self._refused:
                self._refused.discard(num)
                return
            self._freeing[num] = self._size(num)
            del self.live[num]
            self._queue.append(BufferFree(num))

    def copyin(self, num: int, src: memoryview) -> None:
        """Queue copying ``src`` into the start of buffer ``num`` (sent at once from ``EAGER_COPYIN_BYTES`` up)."""
        with self._lock:
            if src.nbytes > (size := self._size(num)):
                raise ValueError(f"copyin of {src.nbytes} bytes into CLOUD buffer {num} of {size} bytes")
            eager = src.nbytes >= EAGER_COPYIN_BYTES
            self._queue.append(CopyIn(num, self._blobs.add(src if eager else bytes(src))))
            if eager:
                self._flush()

    def copyout(self, dest: memoryview, num: int) -> None:
        """Copy the first ``dest.nbytes`` bytes of buffer ``num`` into ``dest`` (sends the batch)."""
        with self._lock:
            if dest.nbytes > (size := self._size(num)):
                raise ValueError(f"copyout of {dest.nbytes} bytes from CLOUD buffer {num} of {size} bytes")
            self._queue.append(CopyOut(num))
            reply = self._flush(into=dest)
        if not reply.filled:
            if len(reply.body) < dest.nbytes:
                raise CloudError(f"CLOUD server {self.link.host} answered {len(reply.body)} bytes for buffer {num} "
                                 f"of {dest.nbytes} bytes")
            dest[:] = reply.body[:dest.nbytes]

    # programs
    def load_program(self, name: str, lib: bytes) -> tuple[ProgramKey, tuple[int, int] | None]:
        """Load kernel ``name`` of source ``lib`` on the server (sent at once); returns its key and, when the server
        tells them, its ``(buffers, vals)`` counts. ``CompileError`` with the server's message if it fails to build."""
        key = (name, hashlib.sha256(lib).hexdigest())
        with self._lock:
            self._check_open()
            if (loaded := self._programs.get(key)) is not None:
                loaded.users += 1
                return key, loaded.signature
            self._queue.append(ProgramAlloc(name, self._blobs.add(lib)))
            try:
                reply = self._flush()
            except CloudError as e:
                if e.status == 422:
                    raise CompileError(f"CLOUD server {self.link.host} failed to build {name!r}: {e.message}",
                                       source=lib.decode("utf-8", "replace")) from e
                raise
            match = _SIGNATURE.fullmatch(reply.headers.get(SIGNATURE_HEADER, ""))
            signature = (int(match[1]), int(match[2])) if match else None
            self._programs[key] = _Loaded(1, signature)
        return key, signature

    def release_program(self, key: ProgramKey) -> None:
        """One user of program ``key`` is gone (may be called by the garbage collector at any point: only queues)."""
        self._released.append(key)

    def execute(self, request: ProgramExec) -> float | None:
        """Queue a launch; with ``request.wait`` send the batch and return the launch's device seconds.

        Raises ``ValueError`` for a buffer number that is not live here (freed, or of another device)."""
        with self._lock:
            for slot, num in enumerate(request.bufs):
                if num not in self.live:
                    raise ValueError(f"kernel {request.name!r}: buffer {slot} ({num!r}) is not a live buffer of this "
                                     f"CLOUD device; pass the opaque handle of an allocated buffer")
            self._queue.append(request)
            if not request.wait:
                return None
            body = self._flush().body
        try:
            return float(body)
        except ValueError:
            raise CloudError(f"CLOUD server {self.link.host} answered {body[:80]!r} to a launch with wait=True, not "
                             f"its seconds") from None

    # sending
    def synchronize(self) -> None:
        """Send everything queued and wait until the server has run it."""
        with self._lock:
            if self._queue or self._released:
                self._flush()

    def close(self, send: bool = True) -> None:
        """Free every buffer and program the session holds on the server (one last batch; ``send=False`` when the
        server is about to go away anyway), then close the link. Failures are logged: the server ends the session on
        its own after its session timeout."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._queue += [BufferFree(num) for num in self.live]
            self._queue += [ProgramFree(*key) for key in self._programs]
            self.live.clear()
            self._programs.clear()
            self._released.clear()
            self._refused.clear()
            try:
                if self._queue and send:
                    self._flush()
            except CloudError as e:
                log.warning("ending CLOUD session on %s failed: %s", self.link.host, e)
            finally:
                self.link.close()

    def _flush(self, into: memoryview | None = None) -> Reply:
        """Send the queue as one batch (the lock is held). The queue is emptied first: a failed batch is not resent."""
        self._drain_released()
        requests, blobs, freeing = self._queue, self._blobs, self._freeing
        self._queue, self._blobs, self._freeing = [], BodyBuilder(), {}
        try:
            return self.link.request("POST", "/batch", blobs.pieces(encode_requests(requests)), into)
        except CloudError as e:
            if e.status is not None:  # the server answered: it applied none of the batch's allocations and frees
                self._undo(requests, freeing)
            raise

    def _undo(self, requests: list[Request], freeing: dict[int, int]) -> None:
        allocated = {r.buffer_num for r in requests if isinstance(r, BufferAlloc)}
        for num in allocated:
            if self.live.pop(num, None) is not None:
                self._refused.add(num)
        for num, size in freeing.items():
            if num not in allocated:
                self.live[num] = size  # still held on the server: freed when the session ends

    def _drain_released(self) -> None:
        while self._released:
            key = self._released.popleft()
            loaded = self._programs.get(key)
            if loaded is None:
                continue
            loaded.users -= 1
            if loaded.users == 0:
                del self._programs[key]
                self._queue.append(ProgramFree(*key))

    def _size(self, num: int) -> int:
        if num not in self.live:
            raise ValueError(f"CLOUD buffer {num!r} is not allocated (freed already, or not from this device)")
        return self.live[num]

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"the CLOUD session on {self.link.host} is closed (the device was finalized)")
