"""A progress line when a pytest run has gone quiet: which tests are still running, and for how long.

With pytest-xdist a long test shows as silence (the dots come as tests finish), which reads like a hang. The
controller (or a plain run) registers :class:`Heartbeat`: when no test has finished for ``quiet_s`` seconds
(``$HARNESS_HEARTBEAT_S``, default 60; 0 turns it off), a background thread writes one line naming the running tests
and how long each has run, then again after every further ``quiet_s`` seconds of silence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Heartbeat", "SHOWN"]

SHOWN = 4
"""Running tests a line names (the longest-running first); the rest are counted."""


class Heartbeat:
    """Tracks running tests from the report hooks; :meth:`check` says what to print at time ``now`` (seconds of
    ``clock``), :meth:`start`/:meth:`stop` run it on a thread that wakes every ``quiet_s / 4`` seconds."""

    def __init__(self, write: Callable[[str], None], quiet_s: float, clock: Callable[[], float] = time.monotonic):
        self.write, self.quiet_s, self.clock = write, quiet_s, clock
        self.running: dict[str, float] = {}
        self.last = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self._lock:
            self.running.setdefault(nodeid, self.clock())

    def pytest_runtest_logreport(self, report: Any) -> None:
        with self._lock:
            self.last = self.clock()
            if report.when == "teardown":
                self.running.pop(report.nodeid, None)

    def check(self, now: float) -> str | None:
        """The line to print at ``now`` (and the silence then counts from ``now``), or ``None``."""
        with self._lock:
            quiet = now - self.last
            if quiet < self.quiet_s or not self.running:
                return None
            self.last = now
            oldest = sorted(self.running.items(), key=lambda kv: kv[1])
        names = ", ".join(f"{nodeid} ({now - since:.0f} s)" for nodeid, since in oldest[:SHOWN])
        more = f" and {len(oldest) - SHOWN} more" if len(oldest) > SHOWN else ""
        return f"harness: {quiet:.0f} s without a result; running: {names}{more}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="harness-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.quiet_s / 4):
            if (line := self.check(self.clock())) is not None:
                self.write(line)
