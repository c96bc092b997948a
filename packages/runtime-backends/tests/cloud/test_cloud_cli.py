"""``python -m runtime_backends.cloud serve``: starts, prints where it listens, serves, stops on SIGTERM."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys

import pytest

from runtime_backends.cloud.server.app import CloudServer


def _serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "runtime_backends.cloud", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_serve_prints_its_address_serves_and_stops_on_sigterm() -> None:
    proc = _serve("--port", "0", "--device", "PYTHON", "--log-level", "WARNING")
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("serving PYTHON on http://127.0.0.1:"), line
        address = line.split("http://", 1)[1].split()[0]
        conn = http.client.HTTPConnection(address, timeout=30)
        conn.request("GET", "/renderer")
        assert json.loads(conn.getresponse().read())[1] == "PythonRenderer"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("args, message", [(["--device", "NOSUCH"], "unknown device 'NOSUCH'"),
                                           (["--device", "CLOUD"], "serves a device of this machine")])
def test_serve_refuses_a_bad_device_with_status_1(args: list[str], message: str) -> None:
    proc = _serve("--port", "0", *args)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and message in err


@pytest.mark.parametrize("port", ["-5", "65536", "http"])
def test_serve_refuses_a_bad_port_with_usage_and_status_2(port: str) -> None:
    proc = _serve("--port", port)  # once an OverflowError traceback from bind()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "argument --port" in err and "Traceback" not in err


def test_a_port_in_use_is_an_os_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError, match="address already in use"):
            CloudServer("PYTHON", port=taken.getsockname()[1]).start()
