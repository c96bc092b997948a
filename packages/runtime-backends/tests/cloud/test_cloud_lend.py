"""Connections lent to a session's worker (``server.lend``): after a batch the worker keeps the client's connection and
serves that session's next batches on it itself; anything else on it goes back to the server, read as sent; a crash or
an overdue batch there is answered as on the server's own path; error answers close the connection (as the reference
server drops it).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator

import pytest
from cloud_helpers import SMALL, blob, eventually, post, spec, wire_body

from runtime_backends.cloud.server.app import CloudServer
from runtime_backends.cloud.server.lend import HeadTemplate
from runtime_backends.cloud.server.limits import Limits
from runtime_core.device import Device

CRASH = b"void crash(unsigned char* a) { *(volatile int*)0 = 1; }"
HEAD = [(b"Host", b"127.0.0.1:1"), (b"Content-Length", b"42"), (b"Cookie", b"session=a")]


def _lent(srv: CloudServer) -> int:
    """Connections lent to workers, as the server's transport has recorded them."""
    return sum(1 for c in list(srv._connections) if c._phase == "lent")


def _copy_round_trip(conn: http.client.HTTPConnection, session: str, data: bytes) -> bytes:
    return post(conn, wire_body(f"[CopyIn(1, '{blob(data)[0]}'), CopyOut(1)]", data), session).body


def test_the_next_batches_of_a_connection_are_served_by_the_sessions_worker(server: CloudServer,
                                                                            conn: http.client.HTTPConnection) -> None:
    assert post(conn, wire_body(f"[BufferAlloc(1, 8, {spec()})]")).status == 200
    assert eventually(lambda: _lent(server) == 1)
    for k in range(20):
        data = bytes([k]) * 8
        assert _copy_round_trip(conn, "s1", data) == data
    (only,) = server._connections
    assert only._phase == "lent"  # none of them went through the server's HTTP parser


def test_a_request_the_worker_does_not_serve_goes_back_to_the_server(server: CloudServer,
                                                                     conn: http.client.HTTPConnection) -> None:
    assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "a").status == 200
    assert eventually(lambda: _lent(server) == 1)
    conn.request("GET", "/renderer")  # another endpoint on the lent connection
    reply = conn.getresponse()
    assert reply.status == 200 and json.loads(reply.read())[1] == "PythonRenderer"
    assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "b").status == 200  # another session
    assert _copy_round_trip(conn, "a", b"aaaa") == b"aaaa" and _copy_round_trip(conn, "b", b"bbbb") == b"bbbb"
    assert set(server.sessions) == {"a", "b"}


def test_a_large_body_on_a_lent_connection_is_received_by_the_server() -> None:
    srv = CloudServer("PYTHON", port=0, limits=Limits()).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        data = bytes(range(256)) * 8192  # 2 MiB: received past h11 by the server, never on a lent connection
        assert post(conn, wire_body(f"[BufferAlloc(1, {len(data)}, {spec()})]")).status == 200
        assert eventually(lambda: _lent(srv) == 1)
        assert _copy_round_trip(conn, "s1", data) == data
        assert _copy_round_trip(conn, "s1", data[::-1]) == data[::-1]
    finally:
        srv.close()


def test_an_error_answer_closes_the_connection_on_either_path(server: CloudServer,
                                                              conn: http.client.HTTPConnection) -> None:
    missing = post(conn, wire_body("[CopyOut(7)]"))  # the server's path: the connection's first batch
    assert missing.status == 404 and missing.headers["connection"] == "close"
    assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()})]")).status == 200  # http.client reconnects
    assert eventually(lambda: _lent(server) == 1)
    missing = post(conn, wire_body("[CopyOut(7)]"))  # on the lent connection
    assert missing.status == 404 and missing.headers["connection"] == "close"
    assert b"buffer 7 is not allocated" in missing.body
    assert eventually(lambda: _lent(server) == 0)
    assert _copy_round_trip(conn, "s1", b"abcd") == b"abcd"  # the session is intact


def test_an_idle_lent_connection_is_closed() -> None:
    srv = CloudServer("PYTHON", port=0, limits=Limits(idle_timeout_s=1.0)).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()})]")).status == 200
        assert eventually(lambda: _lent(srv) == 1)
        assert conn.sock is not None
        conn.sock.settimeout(30)
        assert conn.sock.recv(1) == b""  # closed by the server once the worker gave it back
        assert "s1" in srv.sessions  # the session itself stays
    finally:
        srv.close()


def test_a_crash_on_a_connections_first_batch_and_on_a_lent_one_ends_only_that_session() -> None:
    ok, why = Device.probe("CPU")
    if not ok:
        pytest.skip(f"CPU unavailable: {why}")
    srv = CloudServer("CPU", port=0).start()
    try:
        alice = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        assert post(alice, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "alice").status == 200
        h = blob(CRASH)[0]
        launch = f"[ProgramAlloc('crash', '{h}'), ProgramExec('crash', '{h}', (1,), (), None, None, True)]"
        for first in (True, False):
            mallory = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            batch = f"[BufferAlloc(1, 4, {spec()}), " + launch[1:] if first else launch
            if not first:
                assert post(mallory, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "mallory").status == 200
                assert eventually(lambda: _lent(srv) == 2)  # alice's and mallory's
            crashed = post(mallory, wire_body(batch, CRASH), "mallory")
            assert crashed.status == 500 and crashed.body.startswith(b"kernel crashed: SIGSEGV"), (first, crashed)
            assert crashed.headers["connection"] == "close"
            assert eventually(lambda: "mallory" not in srv.sessions)
            assert _copy_round_trip(alice, "alice", b"\x01\x02\x03\x04") == b"\x01\x02\x03\x04"
    finally:
        srv.close()


@pytest.fixture
def template() -> Iterator[HeadTemplate]:
    made = HeadTemplate.of(b"POST", b"/batch", b"1.1", HEAD)
    assert made is not None
    yield HeadTemplate.decode(made.encode())  # as the worker gets it


def _head(*lines: bytes) -> bytes:
    return b"\r\n".join(lines)


def test_a_head_template_matches_only_the_same_head_with_another_length(template: HeadTemplate) -> None:
    same = _head(b"POST /batch HTTP/1.1", b"Host: 127.0.0.1:1", b"Content-Length: 1234", b"Cookie: session=a")
    assert template.body_length(same) == 1234
    assert template.body_length(same.replace(b"Content-Length: 1234", b"content-length:7")) == 7
    for changed in (same.replace(b"session=a", b"session=b"), same.replace(b"/batch", b"/renderer"),
                    same.replace(b"1234", b"-1"), same.replace(b"1234", b"12345678"), same.replace(b"1234", b"1 2"),
                    same + b"\r\nTransfer-Encoding: chunked", same.replace(b"Host: ", b"Host:  "),
                    same.replace(b"HTTP/1.1", b"HTTP/1.0")):
        assert template.body_length(changed) is None, changed


def test_a_request_without_a_length_makes_no_template() -> None:
    assert HeadTemplate.of(b"POST", b"/batch", b"1.1", [(b"Host", b"x")]) is None


def test_a_client_that_sends_its_head_in_pieces_is_served(server: CloudServer) -> None:
    body = wire_body(f"[BufferAlloc(1, 4, {spec()})]")
    head = f"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=p\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head + body)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        assert eventually(lambda: _lent(server) == 1)
        data = b"wxyz"
        body = wire_body(f"[CopyIn(1, '{blob(data)[0]}'), CopyOut(1)]", data)
        request = f"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=p\r\nContent-Length: {len(body)}\r\n\r\n"
        for piece in (request.encode()[:10], request.encode()[10:], body[:5], body[5:]):  # as slowly as a phone
            s.sendall(piece)
            time.sleep(0.05)
        answer = b""
        while not answer.endswith(data):
            answer += s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\n" + data)


def test_small_limits_still_bound_a_lent_connections_head(server: CloudServer) -> None:
    assert SMALL.max_header_bytes == 4096
    body = wire_body(f"[BufferAlloc(1, 4, {spec()})]")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(f"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=h\r\nContent-Length: {len(body)}\r\n\r\n"
                  .encode() + body)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        assert eventually(lambda: _lent(server) == 1)
        s.sendall(b"POST /batch HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 8000 + b"\r\n\r\n")
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 431"), answer  # back to the server, which refuses it


def test_shedding_a_lent_connection_frees_the_servers_descriptor_and_the_client_goes_on(
        server: CloudServer, conn: http.client.HTTPConnection) -> None:
    assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()})]")).status == 200
    assert eventually(lambda: _lent(server) == 1)
    (only,) = server._connections
    assert only.idle
    assert server._loop is not None
    server._loop.call_soon_threadsafe(server._shed, 1)  # as near the descriptor limit
    assert eventually(lambda: not server._connections)
    assert _copy_round_trip(conn, "s1", b"kept") == b"kept"  # the worker still serves it


def test_a_lent_connection_serves_only_requests_with_the_token_the_server_checked() -> None:
    srv = CloudServer("PYTHON", port=0, token="sesame", limits=SMALL).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        good = {"Authorization": "Bearer sesame"}
        assert post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), headers=good).status == 200
        assert eventually(lambda: _lent(srv) == 1)
        for bad in ({}, {"Authorization": "Bearer sesamE"}):
            refused = post(conn, wire_body("[CopyOut(1)]"), headers=bad)
            assert refused.status == 401 and refused.body.startswith(b"this server needs a token"), refused
        assert post(conn, wire_body("[CopyOut(1)]"), headers=good).body == bytes(4)
    finally:
        srv.close()


def test_the_slots_of_crashed_workers_come_back() -> None:
    """With one session at a time the server has 3 worker slots: each crashed worker's slot must come back, or the
    fourth session would find none."""
    ok, why = Device.probe("CPU")
    if not ok:
        pytest.skip(f"CPU unavailable: {why}")
    srv = CloudServer("CPU", port=0, limits=Limits(max_sessions=1, evict_idle_s=0.01)).start()
    try:
        h = blob(CRASH)[0]
        batch = wire_body(f"[BufferAlloc(1, 4, {spec()}), ProgramAlloc('crash', '{h}'), "
                          f"ProgramExec('crash', '{h}', (1,), (), None, None, True)]", CRASH)
        for k in range(6):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            crashed = post(conn, batch, f"m{k}")
            assert crashed.status == 500 and crashed.body.startswith(b"kernel crashed: SIGSEGV"), (k, crashed)
            conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        data = b"live"
        last = post(conn, wire_body(f"[BufferAlloc(1, 4, {spec()}), CopyIn(1, '{blob(data)[0]}'), CopyOut(1)]", data),
                    "last")
        assert last.body == data, last
    finally:
        srv.close()
