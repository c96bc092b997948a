"""One benchmark worker process (``harness.paired.worker``) and the JSON-lines channel to it."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.paired.worker import CHANNEL_ENV

__all__ = ["ANSWER_SECONDS", "WORKER_SCRIPT", "WorkerError", "WorkerProcess", "close_all", "describe_status"]

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
# How long the controller waits for any one answer of a worker (a setup, a timed round, a teardown) before it calls
# the benchmark hung and kills the worker: far above the slowest setup measured here (about 30 s for twelve workers
# setting up a 1 GiB DISK read at once on two loaded cores). ``harness bench --worker-timeout`` sets it.
ANSWER_SECONDS = 600.0
_LOG_TAIL_LINES = 25
# personality(2) flag ADDR_NO_RANDOMIZE (<linux/personality.h>): the child's address space is not randomized
_ADDR_NO_RANDOMIZE = 0x0040000
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal the child gets when its parent thread exits
# What makes two processes of the same code lay out memory alike (see ``WorkerProcess``). The glibc tunables make
# malloc ask for transparent huge pages (madvise) for the large blocks it maps, as numpy already does for its arrays,
# and fix its thresholds: by default glibc raises them whenever a mapped block is freed, so whether a 1 MiB buffer is
# mapped or carved from the heap depends on what that process freed before (a PYTHON add of 1M elements ran 43 or
# 50 ms a call in one process depending on whether it had freed a 16 MiB array before). Blocks of 32 MiB and more
# (glibc's own ceiling) are mapped; the heap is never trimmed while a benchmark runs (at 64 MiB, the PYTHON
# interpreter's temporaries gave pages back and faulted them in again on every call: 38 against 33 ms), only after
# each benchmark, by the worker (``malloc_trim``), so each starts from a trimmed heap whatever ran before it.
ISOLATION_ENV = {
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295",
}


def _prepare_child() -> None:
    """``preexec_fn`` of a worker (runs in the child before exec): no address-space randomization (a refusal by
    seccomp is found by ``randomized``), and SIGKILL when the controller dies (``PR_SET_PDEATHSIG``), so a killed
    controller leaves no worker behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality(_ADDR_NO_RANDOMIZE)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _processes_of_tree(pid: int) -> list[int]:
    """Process ``pid`` and all its descendants (``/proc/<pid>/task/<tid>/children``, Linux with
    CONFIG_PROC_CHILDREN); what cannot be read (a process that exited) is left out."""
    found, todo = [], [pid]
    while todo:
        process = todo.pop()
        try:
            threads = list(Path(f"/proc/{process}/task").iterdir())
        except OSError:
            continue
        found.append(process)
        for thread in threads:
            try:
                todo += [int(child) for child in (thread / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    return found


def _tasks_of_tree(pid: int) -> list[int]:
    """The thread ids of process ``pid`` and of all its descendants; what cannot be read is left out."""
    tasks = []
    for process in _processes_of_tree(pid):
        try:
            tasks += [int(thread.name) for thread in Path(f"/proc/{process}/task").iterdir()]
        except OSError:
            continue
    return tasks


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) and of its children that exited and were
    waited for (``/proc/<pid>/stat`` fields 14-17: utime, stime, cutime, cstime, in clock ticks), so a compiler run
    per call or a server stopped at teardown still counts once it is gone; 0.0 when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class WorkerError(RuntimeError):
    """A worker exited, broke the protocol or reported an error; the message ends with the tail of its log."""


class WorkerProcess:
    """``python worker.py <pytest args>`` in ``cwd`` with its output in ``log``; only the controller talks to it.

    ``label`` names the worker in messages ('A (main)', 'B (working tree)'). The worker runs in its own session, so a
    Ctrl-C on the terminal reaches the controller alone, which then stops it (``close``). Raises WorkerError when it
    cannot be started.

    Two processes running the same code differ by several percent on this kind of machine unless their memory is laid
    out alike: measured on the 2-core reference VM, identical code in two workers differed by up to 6% (a ctypes call)
    with address-space randomization, 4-9% (copies of 64-256 MiB) with buffers on small pages, 4.5% (a 1 MiB
    alloc/free) with glibc's moving mmap threshold, and 1-5% when the two ran on different CPUs. So every worker
    starts with address-space randomization off (``personality(2)``
    ADDR_NO_RANDOMIZE; ``randomized`` says whether that was refused), a fixed hash seed (PYTHONHASHSEED =
    ``hash_seed``) and malloc asking for transparent huge pages (ISOLATION_ENV), and the controller keeps the workers
    of a comparison on one CPU (``pin``).

    The flip side: every process started alike lays out alike, so a layout difference between two trees (their paths
    differ by a letter, which moves what hashes and iterates by path) is the same in every process of a side, and
    pooling process pairs cannot average it out (measured: the same code x0.956-0.976 on all three pairs of one
    A/B run, a numpy.empty limit x0.962-0.974). The A/B runner therefore gives each process pair a hash seed of its
    own (the same for both of its workers), so that difference changes from pair to pair.
    """

    def __init__(self, label: str, python: str, cwd: Path, pytest_args: Sequence[str], env: Mapping[str, str],
                 log: Path, hash_seed: int = 0, answer_seconds: float = ANSWER_SECONDS) -> None:
        self.label, self.log, self.answer_seconds = label, log, answer_seconds
        to_worker_read, to_worker_write = os.pipe()
        from_worker_read, from_worker_write = os.pipe()
        log.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(log, "w", encoding="utf-8") as out:
                self._process = subprocess.Popen(
                    [python, str(WORKER_SCRIPT), *pytest_args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, pass_fds=(to_worker_read, from_worker_write), start_new_session=True,
                    preexec_fn=_prepare_child if sys.platform == "linux" else None,
                    env={**env, **ISOLATION_ENV, "PYTHONHASHSEED": str(hash_seed),
                         CHANNEL_ENV: f"{to_worker_read},{from_worker_write}"},
                )
        except OSError as exc:
            for fd in (to_worker_read, to_worker_write, from_worker_read, from_worker_write):
                os.close(fd)
            raise WorkerError(f"cannot start the {label} benchmark worker with {python!r}: {exc}") from None
        os.close(to_worker_read)
        os.close(from_worker_write)
        self._send = os.fdopen(to_worker_write, "w", encoding="utf-8")
        self._receive = os.fdopen(from_worker_read, "rb", buffering=0)
        self._pending = b""  # received bytes after the last complete line

    @property
    def randomized(self) -> bool:
        """True when the worker's address space is randomized after all (``/proc/<pid>/personality`` lacks
        ADDR_NO_RANDOMIZE, e.g. a container's seccomp profile refused it); False when it is not, or not Linux."""
        try:
            flags = int(Path(f"/proc/{self._process.pid}/personality").read_text().strip(), 16)
        except (OSError, ValueError):
            return False
        return not flags & _ADDR_NO_RANDOMIZE

    def pin(self, cpus: set[int]) -> None:
        """Run the worker on ``cpus`` only: all its threads and every process it started (a server it talks to), so
        that both ends of a round trip run where the round is timed; does nothing where affinity cannot be set."""
        if not hasattr(os, "sched_setaffinity"):
            return
        for task in _tasks_of_tree(self._process.pid):
            try:
                os.sched_setaffinity(task, cpus)
            except OSError:
                pass  # it exited meanwhile (a dead worker is reported by the next request)

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by the worker and the live processes it started (a process that exited no longer
        counts); 0.0 where /proc cannot be read."""
        return sum(_cpu_seconds(pid) for pid in _processes_of_tree(self._process.pid))

    def send(self, op: str, **fields: Any) -> None:
        """Send one command; raises WorkerError when the worker has gone."""
        try:
            self._send.write(json.dumps({"op": op, **fields}) + "\n")
            self._send.flush()
        except (BrokenPipeError, ValueError):
            raise self._gone(f"could not send {op!r}") from None

    @property
    def exit_status(self) -> int | None:
        """The worker's exit status (negative: the signal that ended it), None while it runs."""
        return self._process.poll()

    def receive(self, *expected: str) -> dict[str, Any]:
        """The next message, which must be one of the ``expected`` events; raises WorkerError otherwise, and when
        none came within ``answer_seconds`` (the worker is then killed: a benchmark that hangs)."""
        line = self._read_line()
        if not line:
            raise self._gone("stopped answering")
        try:
            message = json.loads(line)
        except ValueError:
            raise self._gone(f"sent a line that is not JSON: {line[:200]!r}") from None
        if message.get("ev") not in expected:
            raise self._gone(f"expected {' or '.join(expected)}, got {message!r}")
        return message

    def _read_line(self) -> bytes:
        """The next line from the worker without its newline; b"" when the worker closed the channel."""
        deadline = time.monotonic() + self.answer_seconds
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._receive], [], [], left)[0]:
                self.kill()
                raise WorkerError(f"the {self.label} benchmark worker did not answer within {self.answer_seconds:g} s "
                                  f"(a benchmark that hangs?), so it was killed (--worker-timeout). Last lines of "
                                  f"{self.log}:\n" + _tail(self.log))
            chunk = os.read(self._receive.fileno(), 1 << 16)
            if not chunk:
                return b""
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def request(self, op: str, expected: Sequence[str], **fields: Any) -> dict[str, Any]:
        """``send`` then ``receive``."""
        self.send(op, **fields)
        return self.receive(*expected)

    def ask_to_quit(self) -> None:
        """Tell a running worker to quit without waiting for it (``close`` waits); does nothing once it has gone."""
        if self._process.poll() is None:
            try:
                self.send("quit")
            except WorkerError:
                pass

    def close(self, timeout: float = 20.0) -> None:
        """Ask the worker to quit, wait up to ``timeout`` seconds, then kill it. Safe to call more than once."""
        if self._process.poll() is None:
            self.ask_to_quit()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for stream in (self._send, self._receive):
            try:
                stream.close()
            except OSError:
                pass

    def kill(self) -> None:
        """Stop the worker at once (Ctrl-C, or a controller error), with every process it started: killed with
        SIGKILL, its fixtures' teardowns never run, so a benchmark's server (a CLOUD server and its workers) would
        outlive it."""
        if self._process.poll() is None:
            for pid in reversed(_processes_of_tree(self._process.pid)):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self._process.wait()
        self.close()

    def _gone(self, what: str) -> WorkerError:
        try:
            status = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = None
        state = "is still running" if status is None else f"exited: {describe_status(status)}"
        return WorkerError(f"the {self.label} benchmark worker {what}; it {state}. Last lines of {self.log}:\n"
                           + _tail(self.log))


def describe_status(status: int) -> str:
    """An exit status as words: 'status 3', or 'killed by SIGSEGV' for a negative one (``Popen.returncode``)."""
    if status >= 0:
        return f"status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"killed by signal {-status}"


def close_all(workers: Sequence[WorkerProcess], timeout: float = 20.0) -> None:
    """``close`` every worker, all asked to quit first: their pytest sessions wind down (fixture teardowns, servers
    stopped) at the same time instead of one after another (12 workers: 18 s at the end of an A/B run)."""
    for worker in workers:
        worker.ask_to_quit()
    for worker in workers:
        worker.close(timeout)


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return f"  (cannot read the log: {exc})"
    return "\n".join("  " + line for line in lines[-_LOG_TAIL_LINES:])
