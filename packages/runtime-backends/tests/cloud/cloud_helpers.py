"""Helpers of the CLOUD backend's tests: a bare protocol client, wire texts, small limits and kernels.

``wire_body`` and ``post`` build and send ``POST /batch`` bodies from the protocol's description (SHA-256 digest,
``<Q`` length, bytes; the request list last) with hashlib/struct/http.client only, independently of the backend's own
framing code, so the tests check the backend against the protocol rather than against itself.
"""

from __future__ import annotations

import hashlib
import http.client
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from runtime_backends.cloud.server.limits import Limits
from runtime_backends.python.device import PythonRenderer
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder

SMALL = Limits(max_body_bytes=1 << 20, max_inflight_bytes=4 << 20, max_session_bytes=1 << 20, max_requests=64,
               max_blobs=64, max_literal_bytes=64 << 10, max_header_bytes=4096, idle_timeout_s=5.0,
               header_timeout_s=1.0, body_timeout_s=1.0)


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]


def blob(data: bytes) -> tuple[str, bytes]:
    """(hex sha256, framed blob) as the protocol describes it."""
    digest = hashlib.sha256(data).digest()
    return digest.hex(), digest + struct.pack("<Q", len(data)) + data


def wire_body(request_list: str, *datas: bytes) -> bytes:
    """A body: the data blobs, then the request list (its text as written) as the last blob."""
    return b"".join(blob(d)[1] for d in datas) + blob(request_list.encode())[1]


def post(conn: http.client.HTTPConnection, body: bytes, session: str = "s1", path: str = "/batch",
         headers: dict[str, str] | None = None) -> Reply:
    conn.request("POST", path, body=body, headers={"Cookie": f"session={session}", **(headers or {})})
    r = conn.getresponse()
    return Reply(r.status, r.read(), {k.lower(): v for k, v in r.getheaders()})


def spec(**flags: object) -> str:
    """The wire text of a BufferSpec with the reference's field order."""
    values = {"image": None, "uncached": False, "cpu_access": False, "host": False, "nolru": False,
              "external_ptr": None, **flags}
    return "BufferSpec(" + ", ".join(f"{k}={v!r}" for k, v in values.items()) + ")"


def add_n_kernel(n_threads: int = 16) -> Kernel:
    """IR kernel ``out[i] = a[i] + n`` over int32 (buffers a, out; one int var n), one thread per element."""
    kb = KernelBuilder("add_n", (n_threads,))
    a, out, n = kb.buffer(dtypes.int32), kb.buffer(dtypes.int32), kb.var("n")
    i = kb.global_id(0)
    kb.store(out, i, kb.add(kb.load(a, i), n))
    return kb.build()


def python_source(kernel: Kernel) -> str:
    """The PYTHON device's program source (IR text) of ``kernel``."""
    return PythonRenderer().render(kernel)


def eventually(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Whether ``condition()`` holds within ``timeout_s``: a session's worker writes the answer to the client itself,
    so the server's record of the session (ended when it holds nothing) follows the answer instead of preceding it."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()
