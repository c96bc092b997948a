"""CloudDevice, the client: batching, errors surfaced from the server, reconnects and deadlines, the session's end,
tokens, and a server restart under a connected client."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from cloud_helpers import SMALL, add_n_kernel, eventually, python_source

from runtime_backends.cloud.client.device import CloudDevice
from runtime_backends.cloud.client.link import (
    CloudConnectionError,
    CloudError,
    CloudMemoryError,
    CloudRequestError,
    CloudTimeoutError,
    Link,
)
from runtime_backends.cloud.server.app import CloudServer
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.wire.renderers import RendererRefused
from runtime_core.buffer import Buffer
from runtime_core.compiler import CompileError
from runtime_core.device import Device
from runtime_core.dtype import dtypes


@pytest.fixture
def remote(monkeypatch: pytest.MonkeyPatch, server: CloudServer) -> Iterator[CloudDevice]:
    """A CloudDevice on the ``server`` fixture through HOST, its POSTs counted in ``dev.posts``."""
    monkeypatch.setenv("HOST", server.address)
    monkeypatch.delenv("CLOUD_TOKEN", raising=False)
    dev = CloudDevice("CLOUD")
    dev.posts = []  # type: ignore[attr-defined]
    real = dev.remote.link.request

    def counting(method, path, pieces=(), into=None):
        dev.posts.append(path)  # type: ignore[attr-defined]
        return real(method, path, pieces, into)
    monkeypatch.setattr(dev.remote.link, "request", counting)
    yield dev
    dev.finalize()


def _buffer(dev: CloudDevice, values: list[int]) -> Buffer:
    buf = Buffer("CLOUD", len(values), dtypes.int32)
    buf._dev = dev  # the test's own device object, not the registry's
    buf.allocate().copyin(np.array(values, dtype=np.int32))
    return buf


def test_requests_are_batched_until_an_answer_is_needed(remote: CloudDevice) -> None:
    bufs = [_buffer(remote, [k] * 4) for k in range(10)]
    assert remote.posts == []  # allocations and small copies wait
    assert bufs[3].numpy().tolist() == [3, 3, 3, 3]
    assert remote.posts == ["/batch"]  # all 10 allocs + 10 copyins + the copyout: one round trip
    remote.synchronize()
    assert remote.posts == ["/batch"]  # nothing queued: nothing sent
    bufs[0].deallocate()  # kept by the LRU cache: still allocated on the server, nothing to send
    remote.synchronize()
    assert remote.posts == ["/batch"]
    remote.allocator.free_cache()  # now a BufferFree is queued
    remote.synchronize()
    assert remote.posts == ["/batch", "/batch"]


def test_launch_is_queued_unless_wait_and_computes(remote: CloudDevice) -> None:
    a, out = _buffer(remote, list(range(16))), _buffer(remote, [0] * 16)
    prg = remote.runtime("add_n", remote.compiler.compile(python_source(add_n_kernel())))
    sent = len(remote.posts)  # loading sends at once (compile errors surface here)
    assert prg(a.opaque, out.opaque, global_size=(16, 1, 1), vals=(5,)) is None and len(remote.posts) == sent
    seconds = prg(a.opaque, out.opaque, global_size=(16, 1, 1), vals=(7,), wait=True)
    assert isinstance(seconds, float) and seconds >= 0 and len(remote.posts) == sent + 1
    np.testing.assert_array_equal(out.numpy(), np.arange(16) + 7)


def test_launch_counts_are_checked_locally_and_buffers_must_be_live(remote: CloudDevice) -> None:
    a = _buffer(remote, list(range(16)))
    prg = remote.runtime("add_n", remote.compiler.compile(python_source(add_n_kernel())))
    with pytest.raises(ValueError, match="takes 2 buffers, got 1"):
        prg(a.opaque, global_size=(16, 1, 1), vals=(1,))
    with pytest.raises(ValueError, match="is not a live buffer of this CLOUD device"):
        prg(a.opaque, 12345, global_size=(16, 1, 1), vals=(1,))


def test_compile_error_is_raised_where_the_program_is_made(remote: CloudDevice) -> None:
    with pytest.raises(CompileError, match="failed to build 'k'.*compile error"):
        remote.runtime("k", b"not kernel IR")


def test_server_errors_come_back_with_the_servers_message(remote: CloudDevice, server: CloudServer) -> None:
    keep = _buffer(remote, [1, 2])
    remote.synchronize()
    halves = [Buffer("CLOUD", (600 << 10) // 4, dtypes.int32) for _ in range(2)]
    for b in halves:
        b._dev = remote
        b.allocate()
    with pytest.raises(CloudMemoryError, match="507 Insufficient Storage.*the limit is 1048576; free buffers first"):
        remote.synchronize()
    for b in halves:
        b.deallocate()  # refused allocations: nothing to free on the server
    remote.allocator.free_cache()
    assert keep.numpy().tolist() == [1, 2]  # the session goes on
    with pytest.raises(CloudRequestError, match="413 Request Entity Too Large.*exceed the 1048576 bytes"):
        big = Buffer("CLOUD", 1 << 20, dtypes.int32)
        big._dev = remote
        big.allocate()
        remote.synchronize()
    remote.finalize()
    assert eventually(lambda: server.sessions == {})  # every buffer the server held was freed at the end


def test_finalize_ends_the_session_on_the_server(remote: CloudDevice, server: CloudServer) -> None:
    kept = [_buffer(remote, [k]) for k in range(3)]
    remote.runtime("add_n", remote.compiler.compile(python_source(add_n_kernel())))
    kept[0].deallocate()  # into the LRU cache: still allocated on the server
    remote.synchronize()
    assert len(server.sessions) == 1
    remote.finalize()
    assert eventually(lambda: server.sessions == {})
    with pytest.raises(RuntimeError, match="session .* is closed"):
        remote.remote.alloc(4, kept[1].spec)


def test_connect_retries_until_a_late_server_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    late: list[CloudServer] = []
    starter = threading.Timer(0.5, lambda: late.append(CloudServer("PYTHON", port=port, limits=SMALL).start()))
    starter.start()
    monkeypatch.setenv("HOST", f"127.0.0.1:{port}")
    try:
        dev = CloudDevice("CLOUD")
        assert dev.renderer is not None and dev.renderer.device == "PYTHON"
        dev.finalize()
    finally:
        starter.join()
        for srv in late:
            srv.close()


def test_connect_gives_up_after_its_deadline_with_a_clear_message() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    link = Link(f"127.0.0.1:{port}", session_id="x", connect_timeout_s=0.6)
    start = time.monotonic()
    with pytest.raises(CloudConnectionError, match=r"^cannot reach a CLOUD server at 127.0.0.1:\d+.*attempts.*serve"):
        link.get("/renderer")
    assert 0.5 < time.monotonic() - start < 5


def test_a_mute_server_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # accepts connections (the kernel does), never answers
        link = Link(f"127.0.0.1:{listener.getsockname()[1]}", session_id="x", timeout_s=0.5)
        start = time.monotonic()
        with pytest.raises(CloudTimeoutError, match="did not answer GET /renderer within 0.5 s"):
            link.get("/renderer")
        assert time.monotonic() - start < 5


def test_bad_host_and_foreign_renderer_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST", "127.0.0.1:notaport")
    with pytest.raises(ValueError, match="is not host:port"):
        CloudDevice("CLOUD")


def test_named_remote_device_must_match_the_servers(monkeypatch: pytest.MonkeyPatch, server: CloudServer) -> None:
    monkeypatch.setenv("HOST", server.address)
    with pytest.raises(ValueError, match="serves a PYTHON device, not CPU"):
        CloudDevice("CLOUD:CPU")


@pytest.mark.parametrize("client_token, expect", [("s3cret", None), (None, "401"), ("nope", "401")])
def test_token_on(monkeypatch: pytest.MonkeyPatch, client_token: str | None, expect: str | None) -> None:
    srv = CloudServer("PYTHON", port=0, token="s3cret", limits=SMALL).start()
    monkeypatch.setenv("HOST", srv.address)
    if client_token is None:
        monkeypatch.delenv("CLOUD_TOKEN", raising=False)
    else:
        monkeypatch.setenv("CLOUD_TOKEN", client_token)
    try:
        if expect is None:
            dev = CloudDevice("CLOUD")
            buf = Buffer("CLOUD", 3, dtypes.int32)
            buf._dev = dev
            assert buf.allocate().copyin(np.array([4, 5, 6], np.int32)).numpy().tolist() == [4, 5, 6]
            dev.finalize()
        else:
            with pytest.raises(CloudError, match="401 Unauthorized.*needs a token") as info:
                CloudDevice("CLOUD")
            assert info.value.status == 401
    finally:
        srv.close()


def test_in_process_server_uses_a_private_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOST", raising=False)
    monkeypatch.delenv("CLOUD_TOKEN", raising=False)
    dev = CloudDevice("CLOUD:PYTHON")
    try:
        assert dev.server is not None and dev.server.host == "127.0.0.1" and len(dev.server.token or "") >= 32
        stranger = Link(dev.server.address, session_id="stranger")
        with pytest.raises(CloudError, match="401"):
            stranger.get("/renderer")
    finally:
        dev.finalize()


def test_server_restart_under_a_connected_client(monkeypatch: pytest.MonkeyPatch) -> None:
    first = CloudServer("PYTHON", port=0, limits=SMALL).start()
    port = first.port
    monkeypatch.setenv("HOST", first.address)
    dev = CloudDevice("CLOUD")
    try:
        before = _buffer(dev, [1, 2, 3])
        assert before.numpy().tolist() == [1, 2, 3]  # the connection is now kept alive
        first.close()
        second = CloudServer("PYTHON", port=port, limits=SMALL).start()
        try:
            with pytest.raises(CloudRequestError, match="lost when the server restarted"):
                before.numpy()  # reconnected on its own; the old server's buffer is gone
            after = _buffer(dev, [7, 8])
            assert after.numpy().tolist() == [7, 8]
        finally:
            dev.finalize()
            second.close()
    finally:
        first.close()


def test_registry_names_and_default_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Device.canonicalize("cloud") == "CLOUD" and Device.canonicalize("cloud:0") == "CLOUD"
    assert Device.canonicalize("cloud:python") == "CLOUD:PYTHON"
    assert CloudDevice.DEFAULT_PRIORITY is None
    with pytest.raises(ValueError, match="cannot stand for another CLOUD device"):
        CloudDevice("CLOUD:CLOUD")


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="Limits.max_depth must be a positive finite number"):
        Limits(max_depth=0)
    with pytest.raises(ValueError, match="Limits.idle_timeout_s must be a positive finite number, got inf"):
        Limits(idle_timeout_s=float("inf"))  # once accepted: no idle timeout at all
    with pytest.raises(ValueError, match="must be an int"):
        Limits(max_requests=1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("answer", [b'["tinygrad.renderer.cstyle", "MetalRenderer", []]', b'["os", "system", ["ls"]]'])
def test_foreign_renderer_is_refused_at_open(monkeypatch: pytest.MonkeyPatch, answer: bytes) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Foreign(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = answer
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Foreign)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("HOST", f"127.0.0.1:{httpd.server_address[1]}")
    try:
        with pytest.raises(RendererRefused, match="cannot render for"):
            CloudDevice("CLOUD")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_view_at_offset_zero_copies_its_bytes_only(remote: CloudDevice) -> None:
    base = _buffer(remote, [1, 2, 3, 4])
    view = base.view(2, dtypes.int32, offset=0)
    view.copyin(np.array([-7, -8], np.int32))
    assert view.numpy().tolist() == [-7, -8]
    assert base.numpy().tolist() == [-7, -8, 3, 4]


def test_streamed_copy_is_staged_and_sent_at_finish(remote: CloudDevice) -> None:
    buf = _buffer(remote, [0] * 8)
    remote.synchronize()
    sink = buf.copy_sink()
    assert sink is not None and sink.host is not None
    data = np.arange(8, dtype=np.int32).view(np.uint8)
    sink.deliver(memoryview(data[16:]), 16, None)  # pieces in any order
    sink.deliver(memoryview(data[:16]), 0, None)
    sent = len(remote.posts)
    sink.finish()
    assert buf.numpy().tolist() == list(range(8))
    assert len(remote.posts) == sent + 1  # the copy-in went with the copy-out's batch
