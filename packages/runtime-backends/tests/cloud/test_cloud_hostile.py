"""CloudServer against hostile HTTP clients, from public bug reports of HTTP servers: deep pipelining, clients that
send without reading, request smuggling headers, HEAD. Raw sockets only; each test checks the server still serves.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import socket
import time

import numpy as np
from cloud_helpers import spec, wire_body

from runtime_backends.cloud.server.app import CloudServer
from runtime_backends.cloud.server.limits import Limits

RENDERER = b"GET /renderer HTTP/1.1\r\nHost: x\r\n\r\n"


def _raw(server: CloudServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=60)


def _batch(text: str, session: str = "h1") -> bytes:
    body = wire_body(text)
    return (f"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session={session}\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)


def _read_all(s: socket.socket) -> bytes:
    out = bytearray()
    while chunk := s.recv(1 << 20):
        out += chunk
    return bytes(out)


def _still_serves(server: CloudServer) -> None:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    c.request("GET", "/renderer")
    assert c.getresponse().status == 200
    c.close()


def test_thousands_of_pipelined_requests_are_all_answered_in_order(server: CloudServer) -> None:
    s = _raw(server)
    s.sendall(RENDERER * 2000)  # once answered by recursion: the connection died at ~330 with a RecursionError
    s.shutdown(socket.SHUT_WR)
    answers = _read_all(s)
    s.close()
    assert answers.count(b"HTTP/1.1 200 OK") == 2000
    _still_serves(server)


def test_pipelined_answers_wait_for_a_client_that_does_not_read(server: CloudServer) -> None:
    size = 256 << 10
    s = _raw(server)
    s.sendall(_batch(f"[BufferAlloc(1, {size}, {spec()})]"))
    assert s.recv(1000).startswith(b"HTTP/1.1 200")
    n = 200  # 50 MiB of answers if the server wrote them all at once into its memory
    s.sendall(_batch("[CopyOut(1)]") * n + _batch("[BufferFree(1)]"))
    time.sleep(0.5)  # time to read every pipelined request and, before the fix, to answer them all
    buffered = sum(c.transport.get_write_buffer_size() for c in server._connections if c.transport is not None)
    assert buffered <= size  # at most the answer being sent is held, not one per pipelined request
    s.shutdown(socket.SHUT_WR)  # half-closed: what was sent is still answered
    answers = _read_all(s)
    s.close()
    assert answers.count(b"HTTP/1.1 200 OK") == n + 1  # once read, every answer comes, in order
    assert len(answers) > n * size
    _still_serves(server)


def test_a_client_that_never_reads_its_answer_is_dropped() -> None:
    size = 16 << 20  # more than the kernel's socket buffers take
    srv = CloudServer("PYTHON", port=0, limits=Limits(max_session_bytes=size, body_timeout_s=1.0)).start()
    try:
        s = _raw(srv)
        s.sendall(_batch(f"[BufferAlloc(1, {size}, {spec()}), CopyOut(1)]", "never-reads"))
        deadline = time.monotonic() + 30  # generous: CI machines are loaded
        while not srv._connections and time.monotonic() < deadline:
            time.sleep(0.05)
        while srv._connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not srv._connections  # dropped after body_timeout_s: its answer no longer held
        s.settimeout(30)
        got = 0
        with contextlib.suppress(ConnectionResetError):  # an aborted connection
            while chunk := s.recv(1 << 20):
                got += len(chunk)
        assert got < size  # the answer was cut, not delivered
        s.close()
        _still_serves(srv)
    finally:
        srv.close()


def test_content_length_with_chunked_is_refused_and_closed(server: CloudServer) -> None:
    s = _raw(server)
    s.sendall(b"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=h2\r\nContent-Length: 4\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + RENDERER)
    answer = _read_all(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 400") and b"both Transfer-Encoding and Content-Length" in answer
    assert answer.count(b"HTTP/1.1") == 1  # RFC 9112 section 6.3: the connection is closed after answering
    _still_serves(server)


def test_head_gets_an_answer_without_a_body(server: CloudServer) -> None:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    c.request("HEAD", "/renderer")
    r = c.getresponse()
    assert (r.status, r.getheader("allow"), r.read()) == (405, "GET", b"")
    c.request("GET", "/renderer")  # the connection goes on
    assert c.getresponse().status == 200
    c.close()


def test_a_large_body_with_pipelined_requests_behind_it_is_read_exactly() -> None:
    """A body of 1 MiB or more is received past h11: the bytes after it in the same segments are the next requests,
    answered in order, and the blob arrives intact (checked against the client's bytes)."""
    size = 3 << 20
    data = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8).tobytes()
    digest = hashlib.sha256(data).hexdigest()
    srv = CloudServer("PYTHON", port=0).start()
    try:
        s = _raw(srv)
        body = wire_body(f"[BufferAlloc(1, {size}, {spec()}), CopyIn(1, '{digest}'), CopyOut(1)]", data)
        head = f"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=big\r\nContent-Length: {len(body)}\r\n\r\n"
        s.sendall(head.encode() + body + RENDERER + _batch("[BufferFree(1)]", "big") + RENDERER)
        s.shutdown(socket.SHUT_WR)
        answers = _read_all(s)
        s.close()
        first, rest = answers.split(b"\r\n\r\n", 1)
        assert first.startswith(b"HTTP/1.1 200") and rest[:size] == data
        assert rest[size:].count(b"HTTP/1.1 200 OK") == 3  # the renderer, the free, the renderer again
        _still_serves(srv)
    finally:
        srv.close()


def test_connection_close_is_honoured_by_the_answer_the_worker_writes(server: CloudServer) -> None:
    s = _raw(server)
    ha = hashlib.sha256(b"ABCD").hexdigest()
    body = wire_body(f"[BufferAlloc(1, 4, {spec()}), CopyIn(1, '{ha}'), CopyOut(1), BufferFree(1)]", b"ABCD")
    s.sendall(b"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=c1\r\nConnection: close\r\nContent-Length: %d\r\n"
              b"\r\n" % len(body) + body + RENDERER)
    answers = _read_all(s)  # the server closes after the answer: the request behind it is not read
    s.close()
    assert answers.startswith(b"HTTP/1.1 200") and b"connection: close" in answers.lower()
    assert answers.count(b"HTTP/1.1") == 1 and answers.endswith(b"\r\n\r\nABCD")
    _still_serves(server)
