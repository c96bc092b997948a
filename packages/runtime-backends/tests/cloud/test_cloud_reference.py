"""Interoperating with the reference system (tinygrad 0.10.2's ``ops_cloud``) unmodified, both ways, and the client's
behaviour on a lost or unreachable server.

The tinygrad tests need ``pip install tinygrad==0.10.2`` (skipped without it); they run tinygrad in a process of its
own, as a user would.
"""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from runtime_backends.cloud.client.device import CloudDevice
from runtime_backends.cloud.client.link import CloudConnectionError, Link
from runtime_backends.cloud.server.app import CloudServer
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import dtypes

CLOUD_SRC = Path(__file__).parents[2] / "src" / "runtime_backends" / "cloud"
ADD_ONE = "void add1(float* restrict out, const float* restrict a, int n) { for (int i = 0; i < n; i++) out[i] = a[i] + 1; }"


def _tinygrad() -> None:
    pytest.importorskip("tinygrad", reason="tinygrad==0.10.2 is the reference client and server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TINYGRAD_OPS = textwrap.dedent("""
    import json
    import numpy as np
    from tinygrad import Tensor, dtypes
    x = np.random.default_rng(25).standard_normal((8, 8)).astype(np.float32)
    a, b, t = Tensor([1.0, 2.0, 3.0]), Tensor([4.0, 5.0, 6.0]), Tensor(x)
    print(json.dumps({"add": (a + b).tolist(), "dot": (a * b).sum().item(),
                      "rows": Tensor.arange(12).reshape(3, 4).sum(1).tolist(), "matmul": (t @ t).tolist(),
                      "exp": t.exp().tolist(), "relu_max": t.relu().max(axis=0).tolist(),
                      "cumsum": t.cumsum(axis=1).tolist(), "int": (t * 10).cast(dtypes.int32).tolist()}))
""")


def _serve(device: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Our server started as a user would (``python -m runtime_backends.cloud serve``) on a free port: the process
    and its ``host:port``, read from the line it prints once it listens."""
    cmd = [sys.executable, "-m", "runtime_backends.cloud", "serve", "--device", device, "--port", "0",
           "--stop-on-stdin-eof", "--log-level", "WARNING"]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        pytest.fail(f"the server did not start: {line}{proc.stderr.read()[-2000:]}")
    return proc, line.split("HOST=")[1].strip()


@pytest.mark.parametrize("served, server_env", [("CPU", {}), ("CUDA", {"MOCKGPU": "1"})], ids=["CPU", "mock-CUDA"])
def test_tinygrads_own_client_runs_tensors_on_our_server(served: str, server_env: dict[str, str]) -> None:
    """tinygrad's own client (``CLOUD=1 HOST=...``, no proxy) renders with its C or CUDA renderer, our server compiles
    and runs the kernels; the values are checked against numpy."""
    _tinygrad()
    if served == "CUDA":
        pytest.importorskip("mock_gpu", reason="the CUDA server runs on the emulated GPU")
    else:
        ok, why = Device.probe("CPU")
        if not ok:
            pytest.skip(f"CPU unavailable: {why}")
    proc, host = _serve(served, {**os.environ, **server_env})
    try:
        env = {**os.environ, "CLOUD": "1", "HOST": host}
        out = subprocess.run([sys.executable, "-c", TINYGRAD_OPS], capture_output=True, text=True, env=env,
                             timeout=600)
    finally:
        proc.communicate(input="", timeout=60)  # standard input closes: the server stops
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.splitlines()[-1])
    x = np.random.default_rng(25).standard_normal((8, 8)).astype(np.float32)
    assert got["add"] == [5.0, 7.0, 9.0] and got["dot"] == 32.0 and got["rows"] == [6, 22, 38]
    np.testing.assert_allclose(got["matmul"], x @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["exp"], np.exp(x), rtol=1e-6)
    np.testing.assert_array_equal(got["relu_max"], np.maximum(x, 0).max(axis=0))
    np.testing.assert_allclose(got["cumsum"], np.cumsum(x, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["int"], (x * 10).astype(np.int32))
    assert proc.returncode == 0


@pytest.fixture
def tinygrad_server() -> Iterator[str]:
    """tinygrad's own server on a free port, started as its module says (``CPU=1 PORT=... python -m
    tinygrad.runtime.ops_cloud``: its CPU device): ``host:port``."""
    _tinygrad()
    port = _free_port()
    cmd = [sys.executable, "-m", "tinygrad.runtime.ops_cloud"]
    proc = subprocess.Popen(cmd, env={**os.environ, "CPU": "1", "PORT": str(port)}, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and b"start cloud server" in proc.stdout.readline()
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(30)


def test_our_client_runs_a_kernel_on_tinygrads_server(tinygrad_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST", tinygrad_server)
    monkeypatch.setenv("CLOUD_CONNECT_TIMEOUT", "30")  # the reference server imports tinygrad before it listens
    dev = Device["CLOUD"]  # the reference server serves one connection at a time: one device, opened once
    assert isinstance(dev, CloudDevice)
    try:
        assert dev.reference is not None and dev.reference.theirs == ("tinygrad.renderer.cstyle", "ClangRenderer")
        assert not dev.launch_sizes  # its CPU programs take no launch sizes: None goes on the wire
        prg = dev.runtime("add1", dev.compiler.compile(ADD_ONE))
        a, out = (Buffer(dev.device, 5, dtypes.float32).allocate() for _ in range(2))
        a.copyin(np.arange(5, dtype=np.float32))
        assert isinstance(prg(out.opaque, a.opaque, vals=(5,), wait=True), float)
        np.testing.assert_array_equal(out.numpy(), np.arange(5, dtype=np.float32) + 1)
        with pytest.raises(NotImplementedError, match="reference's own.*C parameters"):
            dev.renderer.render(None)  # type: ignore[arg-type]  # refused before looking at the kernel
    finally:
        dev.finalize()


def _one_shot_server(answer_get: bool) -> tuple[str, list[bytes]]:
    """A server that answers ``GET``s and closes the connection after reading each ``POST`` whole, never answering
    it; returns its address and the POST bodies it received."""
    listener = socket.create_server(("127.0.0.1", 0))
    posts: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as f:
                while line := f.readline():
                    headers = {}
                    while (h := f.readline()) not in (b"\r\n", b""):
                        name, _, value = h.decode().partition(":")
                        headers[name.strip().lower()] = value.strip()
                    if line.startswith(b"POST"):
                        posts.append(f.read(int(headers["content-length"])))
                        break
                    if answer_get:
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]")
    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{listener.getsockname()[1]}", posts


@pytest.mark.parametrize("kept_alive", [False, True])
def test_a_batch_whose_body_was_written_is_never_sent_again(kept_alive: bool) -> None:
    host, posts = _one_shot_server(answer_get=True)
    link = Link(host, session_id="s")
    if kept_alive:
        link.get("/renderer")
    with pytest.raises(CloudConnectionError, match="whether the server ran it is unknown") as caught:
        link.request("POST", "/batch", [b"x" * 100])
    assert posts == [b"x" * 100]  # sent once
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_an_unreachable_server_fails_at_once_saying_what_was_tried() -> None:
    port = _free_port()  # nothing listens there
    with pytest.raises(CloudConnectionError) as caught:
        Link(f"127.0.0.1:{port}", session_id="s", connect_timeout_s=0.5).get("/renderer")
    message = str(caught.value)
    assert f"tried 127.0.0.1:{port}" in message and "Connection refused" in message and "attempts in" in message
    assert "python -m runtime_backends.cloud serve" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # one line, no chained traceback


def test_the_client_never_imports_the_server() -> None:
    for path in sorted((CLOUD_SRC / "client").glob("*.py")) + sorted((CLOUD_SRC / "wire").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not [n for n in names if n.startswith("runtime_backends.cloud.server")], path


def test_the_reference_table_answers_what_tinygrad_accepts() -> None:
    ok, why = Device.probe("CPU")
    if not ok:
        pytest.skip(f"CPU unavailable: {why}")
    srv = CloudServer("CPU", port=0).start()
    try:
        link = Link(srv.address, session_id="s")
        reply = link.get("/renderer")
        module, cls, args = __import__("json").loads(reply.body)
        # tinygrad 0.10.2 accepts a class under tinygrad.renderer. whose name ends with Renderer
        assert module.startswith("tinygrad.renderer.") and cls.endswith("Renderer") and args == []
        assert "runtime_backends.cpu.renderer" in reply.headers["cloud-renderer"]
        link.close()
    finally:
        srv.close()


def test_a_script_without_a_main_guard_can_embed_a_server(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import http.client
        from runtime_backends.cloud.server.app import CloudServer
        srv = CloudServer("PYTHON", port=0).start()
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        c.request("POST", "/batch", body=b"", headers={"Cookie": "session=s"})
        print(c.getresponse().status)
        srv.close()
    """)
    (path := tmp_path / "embed.py").write_text(script)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "400", out.stderr[-2000:]  # an empty body: no blob
