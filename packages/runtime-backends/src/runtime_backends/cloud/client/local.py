"""A CLOUD server started by a client for itself (``HOST`` unset): ``python -m runtime_backends.cloud serve`` in a
child process, on a free loopback port, with a random token, ending when the client closes its standard input (or
exits). The client reaches it over HTTP like any other server and never imports the server's code.
"""

from __future__ import annotations

import logging
import re
import secrets
import selectors
import subprocess
import sys
import threading
import time

from runtime_core.config import environ_snapshot
from runtime_core.device import DeviceError

__all__ = ["LocalServer", "START_TIMEOUT_S"]

log = logging.getLogger(__name__)
START_TIMEOUT_S = 120.0
"""Seconds a local server may take to open its device and listen."""
_ADDRESS = re.compile(r" on http://(\S+) ")


class LocalServer:
    """A server serving ``device`` of this machine to this process only: :attr:`address` (``host:port``), its
    :attr:`host` part and :attr:`token`. Raises ``DeviceError`` with the server's own message when it cannot start
    (for instance, the device is not available here)."""

    def __init__(self, device: str) -> None:
        self.device, self.token = device, secrets.token_hex(16)
        cmd = [sys.executable, "-m", "runtime_backends.cloud", "serve", "--port", "0", "--device", device,
               "--stop-on-stdin-eof", "--log-level", "WARNING"]
        self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        env=environ_snapshot(CLOUD_TOKEN=self.token))
        self._errors: list[str] = []
        threading.Thread(target=self._forward_stderr, name="cloud-local-stderr", daemon=True).start()
        try:
            self.address = self._wait_listening()
            self.host = self.address.rpartition(":")[0].strip("[]")
        except BaseException:
            self.close()
            raise

    def _wait_listening(self) -> str:
        stdout = self.process.stdout
        if stdout is None:
            raise RuntimeError("the local CLOUD server's stdout is not a pipe")
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)
            if not sel.select(START_TIMEOUT_S):
                raise DeviceError(f"the local CLOUD server for {self.device} did not listen within {START_TIMEOUT_S} s")
        line = stdout.readline().decode("utf-8", "replace")
        if (m := _ADDRESS.search(line)) is None:
            self.process.wait(10)
            time.sleep(0.05)  # the stderr thread takes the server's last lines
            why = " ".join(self._errors[-3:]) or line.strip() or f"exit status {self.process.returncode}"
            raise DeviceError(f"cannot start a local CLOUD server for {self.device}: {why}")
        return m.group(1)

    def _forward_stderr(self) -> None:
        stderr = self.process.stderr
        if stderr is None:
            return
        for raw in stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            self._errors = [*self._errors[-9:], line]
            log.warning("local CLOUD server: %s", line)

    def close(self) -> None:
        """Stop the server (it ends every session) and wait for it to exit."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
