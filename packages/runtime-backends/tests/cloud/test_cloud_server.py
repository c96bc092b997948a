"""CloudServer over real loopback HTTP: endpoints, batches and their errors, sessions, bounds, timeouts, tokens.

Requests are written as wire text and framed by the tests' own helpers (``conftest``), as any protocol client would.
"""

from __future__ import annotations

import http.client
import json
import socket
import sqlite3
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cloud_helpers import SMALL, add_n_kernel, blob, eventually, post, python_source, spec, wire_body

from runtime_backends.cloud.server.app import CloudServer, _record, _Session
from runtime_backends.cloud.server.limits import Limits
from runtime_core.device import Device


def _ints(values: list[int]) -> bytes:
    return np.array(values, dtype=np.int32).tobytes()


def test_renderer_endpoint_answers_module_class_args(conn: http.client.HTTPConnection) -> None:
    conn.request("GET", "/renderer")
    r = conn.getresponse()
    assert (r.status, json.loads(r.read())) == (200, ["runtime_backends.python.device", "PythonRenderer", []])


def test_unknown_endpoint_and_wrong_method(conn: http.client.HTTPConnection) -> None:
    conn.request("GET", "/nothing")
    r = conn.getresponse()
    assert r.status == 404 and b"answers GET /renderer and POST /batch" in r.read()
    conn.request("POST", "/renderer", body=b"")
    r = conn.getresponse()
    assert r.status == 405 and r.getheader("allow") == "GET" and b"takes GET, not POST" in r.read()


def test_batch_needs_a_session_cookie(conn: http.client.HTTPConnection) -> None:
    conn.request("POST", "/batch", body=wire_body("[]"))
    r = conn.getresponse()
    assert r.status == 400 and b"Cookie: session=" in r.read()
    assert post(conn, wire_body("[]"), session="bad cookie!").status == 400


def test_copy_round_trip_answers_the_last_copyout(conn: http.client.HTTPConnection) -> None:
    h, _ = blob(b"0123456789abcdef")
    text = (f"[BufferAlloc(1, 16, {spec()}), BufferAlloc(2, 4, {spec()}), CopyIn(1, '{h}'), "
            f"CopyIn(2, '{blob(b'wxyz')[0]}'), CopyOut(2), CopyOut(1)]")
    reply = post(conn, wire_body(text, b"0123456789abcdef", b"wxyz"))
    assert (reply.status, reply.body) == (200, b"0123456789abcdef")
    assert post(conn, wire_body("[CopyOut(2)]")).body == b"wxyz"  # the session kept both buffers
    assert post(conn, wire_body("[BufferFree(1), BufferFree(2)]")).body == b""


def test_exec_with_wait_answers_seconds_and_computes(conn: http.client.HTTPConnection) -> None:
    src = python_source(add_n_kernel()).encode()
    hs, hd = blob(src)[0], blob(_ints(list(range(16))))[0]
    setup = (f"[BufferAlloc(1, 64, {spec()}), BufferAlloc(2, 64, {spec()}), CopyIn(1, '{hd}'), "
             f"ProgramAlloc('add_n', '{hs}')]")
    first = post(conn, wire_body(setup, src, _ints(list(range(16)))))
    assert first.status == 200 and first.headers["cloud-program-signature"] == "buffers=2, vals=1"
    run = post(conn, wire_body(f"[ProgramExec('add_n', '{hs}', (1, 2), (-3,), (16,), None, True)]"))
    assert run.status == 200 and float(run.body) >= 0.0
    out = post(conn, wire_body("[CopyOut(2)]")).body
    np.testing.assert_array_equal(np.frombuffer(out, np.int32), np.arange(16) - 3)


def test_refused_batch_applies_nothing(conn: http.client.HTTPConnection, server: CloudServer) -> None:
    h = blob(b"abcd")[0]
    reply = post(conn, wire_body(f"[BufferAlloc(7, 4, {spec()}), CopyIn(7, '{h}'), BufferFree(99)]", b"abcd"))
    assert reply.status == 404 and b"request 2 (BufferFree): buffer 99 is not allocated" in reply.body
    assert post(conn, wire_body("[CopyOut(7)]")).status == 404  # buffer 7 was never allocated
    assert eventually(lambda: server.sessions == {})


def test_failed_batch_that_allocated_and_freed_a_buffer_leaves_nothing(conn: http.client.HTTPConnection,
                                                                         server: CloudServer) -> None:
    src = python_source(add_n_kernel()).encode()
    hs = blob(src)[0]
    assert post(conn, wire_body(f"[ProgramAlloc('add_n', '{hs}')]", src)).status == 200
    # the launch fails while running (too many threads): once, buffer 5 came back although the batch freed it
    reply = post(conn, wire_body(f"[BufferAlloc(5, 64, {spec()}), BufferFree(5), BufferAlloc(5, 32, {spec()}), "
                                 f"BufferAlloc(6, 64, {spec()}), ProgramExec('add_n', '{hs}', (5, 6), (1,), "
                                 f"({1 << 30},), None, True)]"))
    assert reply.status == 400 and b"request 4 (ProgramExec)" in reply.body
    assert eventually(lambda: server.sessions["s1"].held_bytes == 0)
    assert eventually(lambda: server.budget.held() == 0)  # every allocation given back to the budget, once
    assert post(conn, wire_body("[CopyOut(5)]")).status == 404


@pytest.mark.parametrize("text, status, match", [
    (f"[BufferAlloc(1, 4, {spec()}), BufferAlloc(1, 4, {spec()})]", 409, "already allocated"),
    ("[CopyOut(3)]", 404, "buffer 3 is not allocated"),
    (f"[BufferAlloc(1, 4, {spec()}), CopyIn(1, '{'0' * 64}')]", 400, "no blob with datahash"),
    (f"[BufferAlloc(1, 2, {spec()}), CopyIn(1, '{blob(b'abcd')[0]}')]", 400, "4 bytes do not fit in buffer 1 of 2"),
    (f"[BufferAlloc(1, 4, {spec(external_ptr=4096)})]", 400, "external_ptr names memory"),
    ("[BufferAlloc(1, 4, BufferSpec(image=dtypes.imageh((1, 1, 4))))]", 400, "image buffers"),
    (f"[BufferAlloc(1, {2 << 20}, {spec()})]", 413, "exceed the 1048576 bytes a session may hold"),
    (f"[BufferAlloc(1, {600 << 10}, {spec()}), BufferAlloc(2, {600 << 10}, {spec()})]", 507, "free buffers first"),
    (f"[ProgramExec('k', '{'0' * 64}', (), (), None, None, True)]", 404, "program 'k'"),
    ("[CopyOut(1), Nope(2)]", 400, "request 1: call of 'Nope' is not allowed"),
])
def test_errors_answer_status_and_message(conn: http.client.HTTPConnection, text: str, status: int, match: str) -> None:
    datas = [b"abcd"] if "CopyIn" in text and "0000" not in text else []
    reply = post(conn, wire_body(text, *datas))
    assert reply.status == status and match.encode() in reply.body, reply.body


def test_compile_error_and_failing_launch_leave_the_session_usable(conn: http.client.HTTPConnection) -> None:
    bad = b"this is not kernel IR"
    reply = post(conn, wire_body(f"[BufferAlloc(1, 64, {spec()}), ProgramAlloc('k', '{blob(bad)[0]}')]", bad))
    assert reply.status == 422 and b"compile error" in reply.body
    src = python_source(add_n_kernel()).encode()
    hs = blob(src)[0]
    assert post(conn, wire_body(f"[BufferAlloc(1, 64, {spec()}), ProgramAlloc('add_n', '{hs}')]", src)).status == 200
    # counts are checked against the loaded program before anything runs: buffer 2 is not created
    wrong = post(conn, wire_body(f"[BufferAlloc(2, 64, {spec()}), ProgramExec('add_n', '{hs}', (1,), (1,), (16,), "
                                 f"None, True)]"))
    assert wrong.status == 400 and b"takes 2 buffers, got 1" in wrong.body
    # the device refuses the launch while running it (too many threads for PYTHON): rolled back, buffer 3 gone
    huge = post(conn, wire_body(f"[BufferAlloc(3, 64, {spec()}), ProgramExec('add_n', '{hs}', (1, 1), (1,), "
                                f"({1 << 30},), None, True)]"))
    assert huge.status == 400 and b"request 1 (ProgramExec): the device refused it" in huge.body
    assert post(conn, wire_body("[CopyOut(3)]")).status == 404
    assert post(conn, wire_body("[CopyOut(2)]")).status == 404
    assert post(conn, wire_body("[CopyOut(1)]")).status == 200


def test_sessions_are_isolated_and_end_when_empty(server: CloudServer, conn: http.client.HTTPConnection) -> None:
    ha = blob(b"AAAA")[0]
    assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()}), CopyIn(1, '{ha}')]", b"AAAA"), "alice").status == 200
    assert post(conn, wire_body("[CopyOut(1)]"), "bob").status == 404  # bob cannot see alice's buffer 1
    hb = blob(b"BBBB")[0]
    assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()}), CopyIn(1, '{hb}'), CopyOut(1)]", b"BBBB"),
                "bob").body == b"BBBB"
    assert post(conn, wire_body("[CopyOut(1)]"), "alice").body == b"AAAA"
    assert post(conn, wire_body("[BufferFree(1)]"), "bob").status == 200
    assert eventually(lambda: set(server.sessions) == {"alice"})


def test_idle_sessions_time_out_and_are_freed(conn: http.client.HTTPConnection, server: CloudServer) -> None:
    assert post(conn, wire_body(f"[BufferAlloc(1, 64, {spec()})]"), "idle").status == 200
    assert eventually(lambda: server.budget.held() == 64)  # the buffer; the body is no longer held
    assert server.reap(now=time.monotonic() + 10) == []
    assert server.reap(now=time.monotonic() + SMALL.session_timeout_s + 1) == ["idle"]
    deadline = time.monotonic() + 30
    while server.budget.held() and time.monotonic() < deadline:  # the worker frees its buffers and exits
        time.sleep(0.01)
    assert server.budget.held() == 0 and "idle" not in server.sessions
    assert post(conn, wire_body("[CopyOut(1)]"), "idle").status == 404


def test_program_source_goes_through_the_compile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok, why = Device.probe("CPU")
    if not ok:
        pytest.skip(f"CPU unavailable: {why}")
    db = tmp_path / "cache.db"
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(db))
    monkeypatch.delenv("RUNTIME_DISABLE_COMPILE_CACHE", raising=False)
    src = Device["CPU"].renderer.render(add_n_kernel()).encode()
    srv = CloudServer("CPU", port=0, limits=SMALL).start()
    try:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        body = wire_body(f"[ProgramAlloc('add_n', '{blob(src)[0]}')]", src)
        assert post(c, body, "one").status == 200 and post(c, body, "two").status == 200
        with sqlite3.connect(db) as cache:
            assert cache.execute("SELECT COUNT(*) FROM compiled").fetchone()[0] == 1  # compiled once, for both
    finally:
        srv.close()


def test_oversized_body_is_refused_before_reading_it(server: CloudServer) -> None:
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    c.putrequest("POST", "/batch")
    c.putheader("Cookie", "session=s")
    c.putheader("Content-Length", str(SMALL.max_body_bytes + 1))
    c.endheaders()
    r = c.getresponse()
    assert r.status == 413 and r.getheader("connection") == "close"
    assert b"exceeds the server's limit of 1048576 bytes" in r.read()


def test_keep_alive_serves_many_requests_on_one_connection_with_nodelay(server: CloudServer,
                                                                        conn: http.client.HTTPConnection) -> None:
    for _ in range(5):
        conn.request("GET", "/renderer")
        conn.getresponse().read()
    (only,) = server._connections
    sock = only.transport.get_extra_info("socket")
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def _raw(server: CloudServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=60)


def test_slow_headers_body_and_idle_connections_are_cut(server: CloudServer) -> None:
    slow_head, slow_body, idle = _raw(server), _raw(server), _raw(server)
    slow_head.sendall(b"POST /batch HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
    slow_body.sendall(b"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=s\r\nContent-Length: 100\r\n\r\nabc")
    fast = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    for _ in range(3):  # the stalled clients do not hold the others up
        fast.request("GET", "/renderer")
        assert fast.getresponse().read()
    start = time.monotonic()
    assert slow_head.recv(100) == b""  # closed without an answer after header_timeout_s
    assert b"408 Request Timeout" in slow_body.recv(1000)
    assert time.monotonic() - start < SMALL.header_timeout_s + 5  # generous: CI machines are loaded
    idle.settimeout(SMALL.idle_timeout_s + 3)
    assert idle.recv(100) == b""
    for s in (slow_head, slow_body, idle):
        s.close()


def test_garbage_gets_400_and_the_server_goes_on(server: CloudServer) -> None:
    s = _raw(server)
    s.sendall(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
    assert s.recv(1000).startswith(b"HTTP/1.1 400")
    s.close()
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    c.request("GET", "/renderer")
    assert c.getresponse().status == 200


def test_huge_headers_get_431(server: CloudServer) -> None:
    s = _raw(server)
    s.sendall(b"GET /renderer HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (2 * SMALL.max_header_bytes) + b"\r\n\r\n")
    assert s.recv(1000).startswith(b"HTTP/1.1 431")
    s.close()


@pytest.mark.parametrize("given, status", [(None, 401), ("wrong", 401), ("s3cret", 200)])
def test_token_is_checked_on_every_request(given: str | None, status: int) -> None:
    srv = CloudServer("PYTHON", port=0, token="s3cret", limits=SMALL).start()
    try:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        headers = {} if given is None else {"Authorization": f"Bearer {given}"}
        for method, path in (("GET", "/renderer"), ("POST", "/batch")):
            c.request(method, path, body=wire_body("[]") if method == "POST" else None,
                      headers={"Cookie": "session=t", **headers})
            r = c.getresponse()
            body = r.read()
            assert r.status == status, body
            if status == 401:
                assert b"Authorization: Bearer" in body and r.getheader("www-authenticate", "").startswith("Bearer")
    finally:
        srv.close()


def test_concurrent_clients_each_get_their_own_results(server: CloudServer) -> None:
    results: dict[int, bytes] = {}

    def client(k: int) -> None:
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        data = bytes([k]) * 1000
        h = blob(data)[0]
        for _ in range(20):
            reply = post(c, wire_body(f"[BufferAlloc(1, 1000, {spec()}), CopyIn(1, '{h}'), CopyOut(1), BufferFree(1)]",
                                      data), f"client{k}")
            assert reply.status == 200
        results[k] = reply.body
        c.close()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {k: bytes([k]) * 1000 for k in range(6)}
    assert eventually(lambda: server.sessions == {})


def test_too_many_sessions_get_503() -> None:
    srv = CloudServer("PYTHON", port=0, limits=Limits(max_sessions=2)).start()
    try:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        for sid in ("a", "b"):
            assert post(c, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), sid).status == 200
        third = post(c, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "c")
        assert third.status == 503 and b"2 sessions, its limit" in third.body
    finally:
        srv.close()


def test_cloud_cannot_serve_itself() -> None:
    with pytest.raises(ValueError, match="serves a device of this machine"):
        CloudServer("CLOUD:CPU", port=0)


def test_copyin_shorter_than_the_buffer_fills_its_start(conn: http.client.HTTPConnection) -> None:
    h = blob(b"abcd")[0]
    reply = post(conn, wire_body(f"[BufferAlloc(1, 8, {spec()}), CopyIn(1, '{h}'), CopyOut(1)]", b"abcd"))
    assert (reply.status, reply.body) == (200, b"abcd\0\0\0\0")  # a PYTHON buffer starts zeroed


def test_chunked_body_refused_midway_is_answered_at_once(server: CloudServer) -> None:
    s = _raw(server)
    s.sendall(b"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=c\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"30\r\n" + b"\xff" * 32 + struct.pack("<Q", 1 << 40) + b"\r\n")  # a blob longer than any body
    answer = s.recv(1000)
    assert answer.startswith(b"HTTP/1.1 400") and b"declares 1099511627776 bytes" in answer
    assert s.recv(100) == b""  # closed: nothing bounds the rest of a chunked body
    s.close()


def test_a_session_record_keeps_the_worker_s_latest_report_whatever_order_they_arrive_in() -> None:
    # A lent connection's request (the client's last free) can be served and put on the board before the server
    # reads the reply of the request that lent the connection; that older reply must not undo it.
    session = _Session("s")
    _record(session, at=20.0, held=0, empty=True)  # the board: the last free, served later
    _record(session, at=10.0, held=4096, empty=False)  # the lending request's reply, read after it
    assert (session.held_bytes, session.empty, session.state_at) == (0, True, 20.0)
    _record(session, at=30.0, held=64, empty=False)
    assert (session.held_bytes, session.empty) == (64, False)
