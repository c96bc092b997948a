"""The CLOUD server's fork server: a process started once per server (``python -m
runtime_backends.cloud.server.zygote FD DEVICE``) that has imported the runtime and the served backend, and forks one
session worker per request in milliseconds. Workers so inherit no thread, lock or device state of the server, and
nothing of the server's ``__main__`` is run again (a script that embeds a server needs no ``__main__`` guard).

Messages on the control socket (``SOCK_SEQPACKET``, one JSON object each; :class:`worker.Zygote` is the other end):

* server -> zygote: ``{"device", "limits", "slot", "budget_total", "environ"}`` with four descriptors attached, the
  worker's end of its socket pair, the memory budget's shared file, the lent-connection board's shared file and the
  worker's end of the socket it gives lent connections back on (``lend``);
* zygote -> server: ``{"started": pid}`` for each request, in order; ``{"exited": pid, "code": c}`` when a worker
  exits (``c`` negative: killed by signal ``-c``, as ``os.waitstatus_to_exitcode`` says).

The zygote ends when the server closes the control socket; its workers end when the server closes their sockets.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import traceback
from typing import Any

from runtime_backends.cloud.server.budget import MemoryBudget
from runtime_backends.cloud.server.lend import Board
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.server.worker import serve_session
from runtime_core.device import Device

__all__ = ["main"]

_MAX_MESSAGE = 1 << 20


def main(argv: list[str]) -> int:
    """Serve fork requests on the control socket ``argv[0]`` (a descriptor number) for device ``argv[1]``."""
    control = socket.socket(fileno=int(argv[0]))
    Device.backend_class(argv[1].partition(":")[0])  # import the backend once, here, for every worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C in a terminal: the server ends the zygote
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wake-up pipe
    try:
        while True:
            ready, _, _ = select.select([control.fileno(), wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 4096)
                _report_exits(control)
            if control.fileno() in ready:
                message, fds, _, _ = socket.recv_fds(control, _MAX_MESSAGE, 4)
                if not message:
                    return 0
                _fork(control, json.loads(message), fds, (wake_r, wake_w))
    except (BrokenPipeError, ConnectionResetError):  # the server is gone
        return 0


def _fork(control: socket.socket, request: dict[str, Any], fds: list[int], wake: tuple[int, int]) -> None:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            control.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in wake:
                os.close(fd)
            budget = MemoryBudget.attach(fds[1], request["budget_total"])
            serve_session(socket.socket(fileno=fds[0]), request["device"], Limits(**request["limits"]), budget,
                          request["slot"], request["environ"], Board.attach(fds[2]), socket.socket(fileno=fds[3]))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    control.send(json.dumps({"started": pid}).encode())


def _report_exits(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        control.send(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
