"""``harness.paired.process.close_all``: every worker is asked to quit before the first is waited for."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.paired.process import WorkerProcess, close_all
from harness.paired.worker import CHANNEL_ENV

# a stand-in for the worker script: it stays until told "quit", then takes a while to wind down (a teardown)
_SLOW_TO_QUIT = """
import os, sys, time
receive = os.fdopen(int(os.environ[{channel!r}].split(",")[0]))
print("ready", flush=True)
for line in receive:
    if '"quit"' in line:
        time.sleep({wind_down})
        print("quit at", time.monotonic(), flush=True)
        sys.exit(0)
"""


class _Recorder:
    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    def ask_to_quit(self) -> None:
        self.calls.append(f"ask {self.name}")

    def close(self, timeout: float = 20.0) -> None:
        self.calls.append(f"close {self.name}")


def test_close_all_asks_every_worker_before_it_waits_for_one() -> None:
    calls: list[str] = []
    close_all([_Recorder(name, calls) for name in "abc"])  # type: ignore[list-item]
    assert calls == ["ask a", "ask b", "ask c", "close a", "close b", "close c"]


def test_real_workers_wind_down_side_by_side(tmp_path: Path, monkeypatch) -> None:
    """Three workers that each take 1 s to quit are all asked at once: the last exits about 1 s after the ask, not
    after the three wind-downs in turn (3 s)."""
    script = tmp_path / "worker.py"
    script.write_text(_SLOW_TO_QUIT.format(channel=CHANNEL_ENV, wind_down=1.0))
    monkeypatch.setattr("harness.paired.process.WORKER_SCRIPT", script)
    logs = [tmp_path / f"w{i}.log" for i in range(3)]
    workers = [WorkerProcess(f"w{i}", sys.executable, tmp_path, [], {}, log) for i, log in enumerate(logs)]
    while not all(log.read_text().startswith("ready") for log in logs):
        time.sleep(0.01)
    asked = time.monotonic()
    close_all(workers)
    quits = [float(log.read_text().split()[-1]) for log in logs]
    assert max(quits) - asked < 2.0, quits
