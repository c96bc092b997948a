"""What a client can do to a CLOUD server, as an attacker or a busy user: each case of issue 25's first table.

A crashing kernel ends only its own session; a source cannot read the server's files; a large ``CopyOut`` is streamed;
a long kernel holds up no other session and is stopped at ``--max-kernel-seconds``; declared lengths, idle sessions and
idle connections cannot lock other clients out.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
from cloud_helpers import Reply, blob, post, spec, wire_body

from runtime_backends.cloud.server.app import CloudServer
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.server.sandbox import PUBLIC_HEADERS, SourceRefused, check_source
from runtime_core.device import Device

CRASH = b"void crash(unsigned char* a) { *(volatile int*)0 = 1; }"
SPIN = b"void spin(int* a) { volatile int x = 0; for (;;) x++; }"


def _cpu_server(limits: Limits | None = None) -> CloudServer:
    ok, why = Device.probe("CPU")
    if not ok:
        pytest.skip(f"CPU unavailable: {why}")
    return CloudServer("CPU", port=0, limits=limits).start()


@pytest.fixture
def cpu_server() -> Iterator[CloudServer]:
    srv = _cpu_server()
    yield srv
    srv.close()


def _connect(srv: CloudServer) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)


def _launch(name: str, src: bytes, buffer: int = 1) -> str:
    h = blob(src)[0]
    return f"[ProgramAlloc({name!r}, '{h}'), ProgramExec({name!r}, '{h}', ({buffer},), (), None, None, True)]"


def _load(conn: http.client.HTTPConnection, session: str, src: bytes) -> Reply:
    return post(conn, wire_body(f"[ProgramAlloc('f', '{blob(src)[0]}')]", src), session)


def test_a_crashing_kernel_ends_only_its_own_session(cpu_server: CloudServer) -> None:
    alice, mallory = _connect(cpu_server), _connect(cpu_server)
    data = bytes(range(64))
    assert post(alice, wire_body(f"[BufferAlloc(1, 64, {spec()}), CopyIn(1, '{blob(data)[0]}')]", data),
                "alice").status == 200
    assert post(mallory, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "mallory").status == 200
    crashed = post(mallory, wire_body(_launch("crash", CRASH), CRASH), "mallory")
    assert crashed.status == 500 and crashed.body.startswith(b"kernel crashed: SIGSEGV"), crashed
    assert b"buffers and programs are gone" in crashed.body
    assert post(alice, wire_body("[CopyOut(1)]"), "alice").body == data  # the other session goes on, intact
    assert post(mallory, wire_body("[CopyOut(1)]"), "mallory").status == 404  # the crashed session's state is gone
    assert post(mallory, wire_body(f"[BufferAlloc(2, 4, {spec()}), CopyOut(2)]"), "mallory").status == 200


@pytest.mark.parametrize("source, line", [
    ('#include "/etc/hostname"\nvoid f(int* a) {}', 1),
    ("void f(int* a) {}\n  # include </etc/hostname>\n", 2),
    ("/* a comment */ #include </etc/hostname>\nvoid f(int* a) {}", 1),
    ("void f(int* a) {}\n%:include </etc/hostname>\n", 2),
    ("void f(int* a) {}\n#inc\\\nlude </etc/hostname>\n", 2),
    ("int x;\n#embed </etc/hostname>\n", 2),
    ("int x;\n\n#if __has_include(</etc/hostname>)\nint y;\n#endif\n", 3),
    ('#pragma GCC dependency "/etc/hostname"\n', 1),
    ("??=include </etc/hostname>\n", 1),
])
def test_sources_that_read_server_files_are_refused_naming_the_line(source: str, line: int) -> None:
    with pytest.raises(SourceRefused, match=f"^line {line}: "):
        check_source(source)


def test_a_devices_public_toolkit_header_is_the_only_include_allowed() -> None:
    """tinygrad's CUDA renderer includes cuda_fp16.h by name: allowed for CUDA, and nothing else is."""
    cuda = PUBLIC_HEADERS["CUDA"]
    check_source("#include <cuda_fp16.h>\n#include <cuda_bf16.h> // half\nextern \"C\" __global__ void f() {}", cuda)
    for refused in ('#include "cuda_fp16.h"', "#include <cuda_fp16.h/../../etc/passwd>", "#include <stdio.h>",
                    "#include_next <cuda_fp16.h>", "#include <../cuda_fp16.h>"):
        with pytest.raises(SourceRefused, match="^line 1: "):
            check_source(refused + "\n", cuda)
    with pytest.raises(SourceRefused, match="^line 1: include is not allowed"):
        check_source("#include <cuda_fp16.h>\n", PUBLIC_HEADERS.get("CPU", frozenset()))


def test_directive_words_in_comments_and_strings_are_not_directives() -> None:
    check_source('// #include <x>\n/* #include <y>\n */ const char* s = "#include <z>"; void f(int* a) {}\n')


def test_include_is_answered_422_and_messages_hold_only_the_clients_source(cpu_server: CloudServer) -> None:
    c = _connect(cpu_server)
    refused = _load(c, "s", b'#include "/etc/hostname"\nvoid f(int* a) {}')
    assert refused.status == 422 and b"compile refused: line 1: include is not allowed" in refused.body
    failed = _load(c, "s", b"void f(int* a) {\n  a[0] = undefined_name;\n}\n")
    text = failed.body.decode()
    assert failed.status == 422 and "<source>:2:" in text and "undefined_name" in text, text
    for server_text in ("/tmp", "-o ", "exit status", "stdin", "clang", "gcc"):
        assert server_text not in text, (server_text, text)


def test_a_large_copyout_is_streamed_not_built_whole(tmp_path: object) -> None:
    """The 197-byte amplification ``[BufferAlloc(1, N), CopyOut(1), BufferFree(1)]``: the server process's peak
    memory grows by at most about a piece (64 MiB), not by the N-byte answer (run in a process of its own, whose peak
    is its own)."""
    size = 512 << 20
    script = textwrap.dedent(f"""
        import resource, socket, sys
        sys.path.insert(0, {str(__import__("pathlib").Path(__file__).parent)!r})
        from cloud_helpers import spec, wire_body
        from runtime_backends.cloud.server.app import CloudServer
        def main():
            srv = CloudServer("PYTHON", port=0).start()
            body = wire_body(f"[BufferAlloc(1, {size}, {{spec()}}), CopyOut(1), BufferFree(1)]")
            s = socket.create_connection(("127.0.0.1", srv.port))
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            s.sendall(b"POST /batch HTTP/1.1\\r\\nHost: x\\r\\nCookie: session=a\\r\\nContent-Length: %d\\r\\n\\r\\n"
                      % len(body) + body)
            piece, got = memoryview(bytearray(1 << 20)), 0
            while True:
                n = s.recv_into(piece)
                if not n:
                    break
                got += n
                if got >= {size}:
                    break
            print(got, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
            s.close()
            srv.close()
        if __name__ == "__main__":
            main()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got, grown = map(int, out.stdout.split()[-2:])
    assert got >= size
    assert grown < size // 4, f"the server grew by {grown} bytes answering {size}"


def test_a_long_kernel_holds_up_no_other_session_and_is_stopped_at_its_limit() -> None:
    srv = _cpu_server(Limits(max_kernel_seconds=5.0))
    try:
        spinner, other = _connect(srv), _connect(srv)
        assert post(spinner, wire_body(f"[BufferAlloc(1, 4, {spec()})]"), "spin").status == 200
        answer: list[Reply] = []
        thread = threading.Thread(target=lambda: answer.append(post(spinner, wire_body(_launch("spin", SPIN), SPIN),
                                                                    "spin")))
        thread.start()
        data = b"\x2a" * 16
        for _ in range(5):  # served while the kernel spins
            reply = post(other, wire_body(f"[BufferAlloc(1, 16, {spec()}), CopyIn(1, '{blob(data)[0]}'), "
                                          f"CopyOut(1), BufferFree(1)]", data), "other")
            assert reply.body == data
        assert thread.is_alive() and not answer
        thread.join(120)
        assert answer[0].status == 504 and b"--max-kernel-seconds=5" in answer[0].body, answer
    finally:
        srv.close()


def test_a_batch_of_65536_copyouts_holds_up_no_other_session() -> None:
    """The table's 720 KB batch: 65,536 ``CopyOut(1)`` of a 1 MiB buffer (64 GiB of copies) runs in its own session's
    worker; another session's round trips are answered meanwhile, and the batch ends with its answer or, past
    ``--max-kernel-seconds``, a 504 for its own session only."""
    srv = CloudServer("PYTHON", port=0, limits=Limits(max_kernel_seconds=2.0)).start()
    try:
        hog, other = _connect(srv), _connect(srv)
        assert post(hog, wire_body(f"[BufferAlloc(1, {1 << 20}, {spec()})]"), "hog").status == 200
        batch = wire_body("[" + ", ".join(["CopyOut(1)"] * 65536) + "]")
        answer: list[Reply] = []
        thread = threading.Thread(target=lambda: answer.append(post(hog, batch, "hog")))
        thread.start()
        data = b"\x2a" * 16
        for _ in range(5):
            reply = post(other, wire_body(f"[BufferAlloc(1, 16, {spec()}), CopyIn(1, '{blob(data)[0]}'), "
                                          f"CopyOut(1), BufferFree(1)]", data), "other")
            assert reply.status == 200 and reply.body == data
        thread.join(300)
        assert (answer[0].status, answer[0].body) == (200, bytes(1 << 20)) or answer[0].status == 504, answer
    finally:
        srv.close()


def _head_only(srv: CloudServer, length: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall(f"POST /batch HTTP/1.1\r\nHost: x\r\nCookie: session=hog\r\nContent-Length: {length}\r\n\r\n".encode())
    return s


def test_declared_lengths_reserve_nothing() -> None:
    srv = CloudServer("PYTHON", port=0, limits=Limits(max_body_bytes=4 << 30, max_inflight_bytes=4 << 30)).start()
    try:
        hogs = [_head_only(srv, 4 << 30) for _ in range(2)]
        c = _connect(srv)
        assert post(c, wire_body(f"[BufferAlloc(1, 8, {spec()}), CopyOut(1), BufferFree(1)]"), "ok").status == 200
        for s in hogs:
            s.close()
    finally:
        srv.close()


def test_idle_sessions_cannot_fill_the_session_table() -> None:
    srv = CloudServer("PYTHON", port=0, limits=Limits(max_sessions=3, evict_idle_s=60.0)).start()
    try:
        c = _connect(srv)
        for i in range(3):
            assert post(c, wire_body(f"[BufferAlloc(1, 1, {spec()})]"), f"squat{i}").status == 200
        full = post(c, wire_body(f"[BufferAlloc(1, 1, {spec()})]"), "newcomer")
        assert full.status == 503 and "retry-after" in full.headers and b"retry in" in full.body
        for session in srv.sessions.values():  # a minute later: the squatters are idle for longer than evict_idle_s
            session.last_used -= 61.0
        assert post(c, wire_body(f"[BufferAlloc(1, 1, {spec()}), CopyOut(1)]"), "newcomer").status == 200
        assert post(c, wire_body("[CopyOut(1)]"), "squat0").status == 404  # the longest idle made room
    finally:
        srv.close()


def test_near_the_descriptor_limit_idle_connections_are_shed() -> None:
    limit = 160
    cmd = [sys.executable, "-c", textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        from runtime_backends.cloud.__main__ import main
        if __name__ == "__main__":
            sys.exit(main(["serve", "--port", "0", "--device", "PYTHON", "--log-level", "WARNING"]))
    """)]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        address = server.stdout.readline().split("http://")[1].split()[0] if server.stdout else ""
        host, port = address.rsplit(":", 1)
        idle = []
        for _ in range(limit + 20):  # more idle keep-alive connections than the server has descriptors
            c = http.client.HTTPConnection(host, int(port), timeout=30)
            c.request("GET", "/renderer")
            c.getresponse().read()
            idle.append(c)
        fresh = http.client.HTTPConnection(host, int(port), timeout=30)
        fresh.request("GET", "/renderer")
        response = fresh.getresponse()
        assert response.status == 200 and json.loads(response.read())
        for c in idle:
            c.close()
    finally:
        server.terminate()
        server.wait(30)
