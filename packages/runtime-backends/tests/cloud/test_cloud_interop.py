"""Interoperability with other implementations of the protocol, both ways.

* A client written from the protocol's description alone (its own request dataclasses, its own framing, plain
  ``http.client``) drives this project's server unchanged.
* This project's client drives a minimal server written from the description alone (``http.server``, ``struct``,
  ``ast``), which knows nothing of the signature header or any other addition, and records what it received.
"""

from __future__ import annotations

import ast
import hashlib
import http.client
import json
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from cloud_helpers import add_n_kernel, eventually, python_source

from runtime_backends.cloud.client.device import CloudDevice
from runtime_backends.cloud.server.app import CloudServer
from runtime_core.buffer import Buffer
from runtime_core.dtype import dtypes


# --- a protocol client of its own -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BufferSpec:
    image: Any | None = None
    uncached: bool = False
    cpu_access: bool = False
    host: bool = False
    nolru: bool = False
    external_ptr: int | None = None


@dataclass(frozen=True)
class BufferAlloc:
    buffer_num: int
    size: int
    options: BufferSpec


@dataclass(frozen=True)
class BufferFree:
    buffer_num: int


@dataclass(frozen=True)
class CopyIn:
    buffer_num: int
    datahash: str


@dataclass(frozen=True)
class CopyOut:
    buffer_num: int


@dataclass(frozen=True)
class ProgramAlloc:
    name: str
    datahash: str


@dataclass(frozen=True)
class ProgramFree:
    name: str
    datahash: str


@dataclass(frozen=True)
class ProgramExec:
    name: str
    datahash: str
    bufs: tuple
    vals: tuple
    global_size: tuple | None
    local_size: tuple | None
    wait: bool


class Batch:
    """Blobs keyed by hex digest, each framed digest + <Q length + data; the request list's repr framed last."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.blobs: dict[str, bytes] = {}

    def h(self, data: bytes) -> str:
        digest = hashlib.sha256(data).digest()
        self.blobs[digest.hex()] = digest + struct.pack("<Q", len(data)) + data
        return digest.hex()

    def serialize(self) -> bytes:
        self.h(repr(self.queue).encode())
        return b"".join(self.blobs.values())


def _submit(conn: http.client.HTTPConnection, batch: Batch, session: str) -> bytes:
    conn.request("POST", "/batch", batch.serialize(), headers={"Cookie": f"session={session}"})
    r = conn.getresponse()
    body = r.read()
    assert r.status == 200, body
    return body


def test_an_independent_client_drives_our_server() -> None:
    srv = CloudServer("PYTHON", port=0).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("GET", "/renderer", headers={"Cookie": "session=0123abcd"})
        module, cls, args = json.loads(conn.getresponse().read())
        assert (module, cls, args) == ("runtime_backends.python.device", "PythonRenderer", [])

        src = python_source(add_n_kernel())
        setup = Batch()
        data = np.arange(16, dtype=np.int32).tobytes()
        setup.queue += [BufferAlloc(1, 64, BufferSpec()), BufferAlloc(2, 64, BufferSpec()),
                        CopyIn(1, setup.h(data)), ProgramAlloc("add_n", prog := setup.h(src.encode()))]
        assert _submit(conn, setup, "0123abcd") == b""
        run = Batch()
        run.queue.append(ProgramExec("add_n", prog, (1, 2), (100,), (16,), None, True))
        assert float(_submit(conn, run, "0123abcd")) >= 0
        read = Batch()
        read.queue.append(CopyOut(2))
        np.testing.assert_array_equal(np.frombuffer(_submit(conn, read, "0123abcd"), np.int32), np.arange(16) + 100)
        end = Batch()
        end.queue += [ProgramFree("add_n", prog), BufferFree(1), BufferFree(2)]
        assert _submit(conn, end, "0123abcd") == b""
        assert eventually(lambda: srv.sessions == {})
    finally:
        srv.close()


# --- a minimal server of its own ------------------------------------------------------------------------------------
KNOWN = {c.__name__: c for c in (BufferSpec, BufferAlloc, BufferFree, CopyIn, CopyOut, ProgramAlloc, ProgramFree,
                                 ProgramExec)}


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_literal(node.operand)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KNOWN:
        return KNOWN[node.func.id](*map(_literal, node.args), **{k.arg: _literal(k.value) for k in node.keywords})
    raise ValueError(f"not allowed: {ast.dump(node)[:80]}")


@dataclass
class MinimalState:
    buffers: dict[int, bytearray] = field(default_factory=dict)
    programs: dict[tuple[str, str], str] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    launches: list[ProgramExec] = field(default_factory=list)
    cookies: set[str] = field(default_factory=set)


def _handler(state: MinimalState) -> type[BaseHTTPRequestHandler]:
    class Minimal(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            state.cookies.add(self.headers.get("Cookie", ""))
            self._answer(json.dumps(["runtime_backends.python.device", "PythonRenderer", []]).encode())

        def do_POST(self) -> None:  # noqa: N802
            state.cookies.add(self.headers.get("Cookie", ""))
            data = self.rfile.read(int(self.headers["Content-Length"]))
            blobs, pos, last = {}, 0, ""
            while pos < len(data):
                digest, (length,) = data[pos:pos + 32].hex(), struct.unpack("<Q", data[pos + 32:pos + 40])
                blobs[digest] = data[pos + 40:pos + 40 + length]
                assert hashlib.sha256(blobs[digest]).hexdigest() == digest
                pos, last = pos + 40 + length, digest
            text = blobs[last].decode()
            state.texts.append(text)
            out = b""
            for r in _literal(ast.parse(text, mode="eval").body):
                if isinstance(r, BufferAlloc):
                    state.buffers[r.buffer_num] = bytearray(r.size)
                elif isinstance(r, BufferFree):
                    del state.buffers[r.buffer_num]
                elif isinstance(r, CopyIn):
                    state.buffers[r.buffer_num][:len(blobs[r.datahash])] = blobs[r.datahash]
                elif isinstance(r, CopyOut):
                    out = bytes(state.buffers[r.buffer_num])
                elif isinstance(r, ProgramAlloc):
                    state.programs[(r.name, r.datahash)] = blobs[r.datahash].decode()
                elif isinstance(r, ProgramFree):
                    del state.programs[(r.name, r.datahash)]
                elif isinstance(r, ProgramExec):
                    state.launches.append(r)
                    out = b"0.25" if r.wait else out
            self._answer(out)

        def log_message(self, *args: object) -> None:
            pass
    return Minimal


@pytest.fixture
def minimal(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MinimalState, CloudDevice]]:
    state = MinimalState()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("HOST", f"127.0.0.1:{httpd.server_address[1]}")
    monkeypatch.delenv("CLOUD_TOKEN", raising=False)
    dev = CloudDevice("CLOUD")
    try:
        yield state, dev
    finally:
        dev.finalize()
        httpd.shutdown()
        httpd.server_close()


def test_our_client_drives_a_minimal_server(minimal: tuple[MinimalState, CloudDevice]) -> None:
    state, dev = minimal
    buf = Buffer("CLOUD", 4, dtypes.int32)
    buf._dev = dev
    buf.allocate().copyin(np.array([5, 6, 7, 8], np.int32))
    assert buf.numpy().tolist() == [5, 6, 7, 8]
    datahash = hashlib.sha256(np.array([5, 6, 7, 8], np.int32).tobytes()).hexdigest()
    assert state.texts[-1] == ("[BufferAlloc(buffer_num=1, size=16, options=BufferSpec(image=None, uncached=False, "
                               "cpu_access=False, host=False, nolru=False, external_ptr=None)), "
                               f"CopyIn(buffer_num=1, datahash='{datahash}'), CopyOut(buffer_num=1)]")
    src = python_source(add_n_kernel())
    prg = dev.runtime("add_n", dev.compiler.compile(src))
    assert prg.signature is None  # this server tells no argument counts: launches are checked on the server only
    assert state.programs == {("add_n", hashlib.sha256(src.encode()).hexdigest()): src}
    assert prg(buf.opaque, buf.opaque, global_size=(4, 1, 1), vals=(1,), wait=True) == 0.25
    assert state.launches[-1] == ProgramExec("add_n", prg.key[1], (1, 1), (1,), (4, 1, 1), (1, 1, 1), True)
    buf.deallocate()
    dev.allocator.free_cache()
    dev.synchronize()
    assert state.buffers == {} and len(state.cookies) == 1 and next(iter(state.cookies)).startswith("session=")
