"""CLOUD RPC: a client in this process, the server in another (``python -m runtime_backends.cloud serve`` on a free
loopback port, serving CPU, or PYTHON where no C compiler exists), as a remote device is used.

Groups and their in-run limits:

* ``cloud-roundtrip`` -- a tiny batch (``Buffer.copyout`` of 16 bytes: one ``POST /batch`` holding one ``CopyOut``)
  against a raw ``http.client`` keep-alive round trip to the same server: ``GET /renderer`` (a constant answer: the
  HTTP stack alone) and ``POST /batch`` of the same bytes the client sends (the same exchange without the client
  runtime). The report's "x limit" is against the faster of the two. Target: <= 1.2x.
* ``cloud-exec-wait`` -- launching the empty kernel with ``wait=True`` (one round trip that runs a program), against
  the raw ``GET`` round trip, and beside the peer: the same client launching an empty C kernel on tinygrad 0.10.2's
  own server (its CPU device, ``TCP_NODELAY`` set on its connections; skipped without tinygrad). Target: <= 1.0x
  the peer.
* ``cloud-copyin-64MiB`` / ``cloud-copyout-64MiB`` -- ``Buffer.copyin`` (+ ``synchronize``) and ``Buffer.copyout`` of
  64 MiB, against sending 64 MiB over a raw loopback TCP socket to a thread of this process. Target: >= 0.5x the
  socket's throughput. Copy-in cannot reach it: a blob's SHA-256 precedes its bytes, so the client hashes all of it
  before sending any, which alone bounds it near 0.45x on a 2-core VM (docs/cloud.md, Speed).

Units: us/call for round trips, GB/s (1e9 bytes/s) for copies.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from harness.benchmarks.kernels import empty_kernel
from harness.benchmarks.measure import HOST, check_equal, probe, random_bytes, record_rate, record_time, run
from harness.config import child_environ
from runtime_backends.cloud.client.device import CloudDevice
from runtime_backends.cloud.wire.framing import BodyBuilder
from runtime_backends.cloud.wire.protocol import CopyOut, encode_requests
from runtime_core import config
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import dtypes

MiB = 1 << 20
BIG = 64 * MiB
# 64 MiB over loopback moves with the machine's memory bandwidth and load; the socket limit timed beside each round
# cancels most of it, the rest (two processes, a server's scheduling) needs 20% in stored-baseline mode
_NOISY = 0.2
_START_S = 60


@pytest.fixture(scope="module")
def server_address() -> Iterator[str]:
    """``host:port`` of a server process serving CPU (or PYTHON without a C compiler), stopped at the end."""
    served = "CPU" if Device.probe("CPU")[0] else "PYTHON"
    cmd = [sys.executable, "-m", "runtime_backends.cloud", "serve", "--port", "0", "--device", served,
           "--log-level", "WARNING"]
    env = child_environ({config.CLOUD_TOKEN.name: None, config.HOST.name: None})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""  # "serving CPU on http://127.0.0.1:PORT ..."
        if "http://" not in line:
            pytest.fail(f"the CLOUD server did not start: {' '.join(cmd)} printed {line!r}")
        yield line.split("http://", 1)[1].split()[0]
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=_START_S)
        if proc.poll() is None:
            proc.kill()


@pytest.fixture(scope="module")
def cloud(server_address: str) -> Iterator[CloudDevice]:
    """A CloudDevice on the server process (``HOST`` set only while it opens)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(config.HOST.name, server_address)
        dev = CloudDevice("CLOUD")
    yield dev
    dev.finalize()


def _buffer(dev: CloudDevice, nbytes: int) -> Buffer:
    buf = Buffer("CLOUD", nbytes, dtypes.uint8)
    buf._dev = dev  # this module's device, not the registry's
    return buf.allocate()


def _label(dev: CloudDevice) -> str:
    return f"CLOUD:{dev.renderer.device if dev.renderer else '?'}"


@pytest.mark.benchmark(group="cloud-roundtrip")
def test_cloud_roundtrip_tiny_batch(benchmark: Any, cloud: CloudDevice) -> None:
    buf = _buffer(cloud, 16)
    buf.copyin(bytes(range(16)))
    out = bytearray(16)
    cloud.synchronize()
    buf.copyout(out)
    if bytes(out) != bytes(range(16)):
        pytest.fail(f"copyout of 16 bytes returned {bytes(out)!r}")
    benchmark(buf.copyout, out)
    record_time(benchmark, _label(cloud), "us/call", requests=1, size_bytes=16)
    buf.deallocate()


def _raw_get(address: str) -> Any:
    conn = http.client.HTTPConnection(address, timeout=30)

    def get() -> bytes:
        conn.request("GET", "/renderer", headers={"Cookie": "session=bench-limit"})
        return conn.getresponse().read()
    return get


@pytest.mark.benchmark(group="cloud-roundtrip")
@pytest.mark.bench_role("limit", reference="raw http.client keep-alive GET /renderer on the same server")
def test_cloud_roundtrip_limit_http_get(benchmark: Any, server_address: str) -> None:
    get = _raw_get(server_address)
    if not get().startswith(b"["):
        pytest.fail("GET /renderer did not answer a renderer description")
    benchmark(get)
    record_time(benchmark, HOST, "us/call")


@pytest.mark.benchmark(group="cloud-roundtrip")
@pytest.mark.bench_role("limit", reference="raw http.client keep-alive POST /batch of the same tiny batch")
def test_cloud_roundtrip_limit_http_post_same_batch(benchmark: Any, cloud: CloudDevice, server_address: str) -> None:
    buf = _buffer(cloud, 16)
    cloud.synchronize()
    body = b"".join(BodyBuilder().pieces(encode_requests([CopyOut(buf.opaque)])))
    conn = http.client.HTTPConnection(server_address, timeout=30)
    cookie = {"Cookie": f"session={cloud.remote.link.session_id}"}

    def post() -> bytes:
        conn.request("POST", "/batch", body=body, headers=cookie)
        return conn.getresponse().read()
    if len(post()) != 16:
        pytest.fail("a raw POST of the tiny batch did not answer 16 bytes")
    benchmark(post)
    record_time(benchmark, HOST, "us/call")
    buf.deallocate()


@pytest.mark.benchmark(group="cloud-exec-wait")
def test_cloud_exec_wait(benchmark: Any, cloud: CloudDevice) -> None:
    kernel = empty_kernel()
    prg = cloud.runtime(kernel.name, cloud.compiler.compile(cloud.renderer.render(kernel)))
    seconds, t = probe(lambda: prg(wait=True))
    if not (isinstance(seconds, float) and seconds >= 0):
        pytest.fail(f"launch with wait=True returned {seconds!r}")
    run(benchmark, lambda: prg(wait=True), t)
    record_time(benchmark, _label(cloud), "us/call", wait=True)


@pytest.mark.benchmark(group="cloud-exec-wait")
@pytest.mark.bench_role("limit", reference="raw http.client keep-alive GET /renderer on the same server")
def test_cloud_exec_wait_limit_http_get(benchmark: Any, server_address: str) -> None:
    benchmark(_raw_get(server_address))
    record_time(benchmark, HOST, "us/call")


_TINYGRAD_SERVER = """
import socket, sys
from tinygrad.runtime.ops_cloud import CloudHandler, cloud_server
setup = CloudHandler.setup
def nodelay_setup(self):
    setup(self)
    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
CloudHandler.setup = nodelay_setup
CloudHandler.log_message = lambda self, *args: None
cloud_server(int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def tinygrad_cloud() -> Iterator[CloudDevice]:
    """A CloudDevice (this project's client) on tinygrad 0.10.2's own server serving its CPU device."""
    pytest.importorskip("tinygrad", reason="the peer is tinygrad 0.10.2's server (pip install tinygrad==0.10.2)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = child_environ({"CPU": "1", config.HOST.name: None})
    proc = subprocess.Popen([sys.executable, "-c", _TINYGRAD_SERVER, str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    if proc.stdout is None or b"start cloud server" not in proc.stdout.readline():
        pytest.fail("tinygrad's CLOUD server did not start")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(config.HOST.name, f"127.0.0.1:{port}")
        patch.setenv(config.CLOUD_CONNECT_TIMEOUT.name, str(_START_S))
        dev = CloudDevice("CLOUD")
    try:
        yield dev
    finally:
        dev.finalize()
        proc.kill()
        proc.wait(_START_S)


@pytest.mark.benchmark(group="cloud-exec-wait")
@pytest.mark.bench_role("peer", peer="tinygrad 0.10.2's own CLOUD server (CPU, TCP_NODELAY), same client")
def test_cloud_exec_wait_peer_tinygrad_server(benchmark: Any, tinygrad_cloud: CloudDevice) -> None:
    prg = tinygrad_cloud.runtime("empty", tinygrad_cloud.compiler.compile("void empty(void) {}"))
    seconds, t = probe(lambda: prg(wait=True))
    if not (isinstance(seconds, float) and seconds >= 0):
        pytest.fail(f"launch with wait=True on tinygrad's server returned {seconds!r}")
    run(benchmark, lambda: prg(wait=True), t)
    record_time(benchmark, "tinygrad-0.10.2-server", "us/call", wait=True)


class _Sink:
    """A loopback TCP connection whose far end, a thread of this process, reads ``nbytes`` and answers one byte."""

    def __init__(self, nbytes: int) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        self.sock = socket.create_connection(listener.getsockname())
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.peer, _ = listener.accept()
        listener.close()
        self.nbytes = nbytes
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        buf = memoryview(bytearray(self.nbytes))
        while True:
            got = 0
            while got < self.nbytes:
                n = self.peer.recv_into(buf[got:])
                if not n:
                    return
                got += n
            self.peer.sendall(b"k")

    def send(self, data: memoryview) -> None:
        self.sock.sendall(data)
        self.sock.recv(1)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)
        self.peer.close()


# each direction is a group of its own, known at collection, so the paired runner times the limit beside the entry
DIRECTIONS = [pytest.param(d, id=d, marks=pytest.mark.benchmark(group=f"cloud-{d}-64MiB")) for d in ("copyin", "copyout")]


def _src(rng: np.random.Generator) -> np.ndarray:
    return random_bytes(rng, BIG)


@pytest.mark.bench_threshold(_NOISY)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_cloud_copy_64mib(benchmark: Any, cloud: CloudDevice, rng: np.random.Generator, direction: str) -> None:
    src, dst = _src(rng), np.ones(BIG, dtype=np.uint8)
    buf = _buffer(cloud, BIG)

    def copyin() -> None:
        buf.copyin(src)
        cloud.synchronize()
    _, t_in = probe(copyin)
    _, t_out = probe(lambda: buf.copyout(dst))
    check_equal(dst, src, "CLOUD: 64 MiB copyin then copyout changed them")
    if direction == "copyin":
        run(benchmark, copyin, t_in)
    else:
        run(benchmark, lambda: buf.copyout(dst), t_out)
    record_rate(benchmark, _label(cloud), {"GB/s": BIG / 1e9}, size_bytes=BIG, direction=direction)
    buf.deallocate()
    if isinstance(cloud.allocator, LRUAllocator):
        cloud.allocator.free_cache()


@pytest.mark.bench_threshold(_NOISY)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.bench_role("limit", reference="64 MiB over a raw loopback TCP socket (sendall, then a 1-byte answer)")
def test_cloud_copy_64mib_limit_socket(benchmark: Any, rng: np.random.Generator, direction: str) -> None:
    data = _src(rng).data
    sink = _Sink(BIG)
    try:
        _, t = probe(lambda: sink.send(data))
        run(benchmark, lambda: sink.send(data), t)
    finally:
        sink.close()
    record_rate(benchmark, HOST, {"GB/s": BIG / 1e9}, size_bytes=BIG)
