"""The CPU device's thread pool: a launch's groups split into chunks, run by worker threads and the caller.

A chunk is one call of the kernel on its own argument block (a rectangle of groups, see ``abi``). ctypes releases the GIL
for the duration of a foreign call, so the chunks run in parallel on the cores. Chunks are taken from one queue by
whichever thread is free, which keeps all threads busy when other processes load some cores. Which thread runs which
chunk changes nothing in the results: each group is run by exactly one call, and groups of a race-free kernel write
disjoint memory.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from runtime_core.config import CPU_THREADS

__all__ = ["GroupPool", "threads_from_env"]


def threads_from_env() -> int:
    """Threads a CPU launch may use: ``$CPU_THREADS``, else the cores this process may run on (its CPU affinity).

    Raises ``runtime_core.config.ConfigError`` (a ``ValueError``) naming the variable when it is set to anything but
    an int >= 1.
    """
    threads = CPU_THREADS.get()
    if threads is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return threads


Task = Callable[[Any], Any]


def _drain(fn: Task, todo: queue.SimpleQueue) -> BaseException | None:
    """Run ``fn`` on chunks from ``todo`` until it is empty; the first exception stops this thread and is returned."""
    while True:
        try:
            chunk = todo.get_nowait()
        except queue.Empty:
            return None
        try:
            fn(chunk)
        except BaseException as e:  # handed to the launching thread, which raises it
            return e


def _work(inbox: queue.SimpleQueue) -> None:
    while True:
        fn, todo, done = inbox.get()
        done.put(_drain(fn, todo))


class GroupPool:
    """``threads - 1`` daemon worker threads (started at the first parallel launch) plus the launching thread.

    One launch runs at a time (launches from several Python threads take turns). After ``os.fork`` the child starts
    its own workers (the parent's do not exist there).
    """

    def __init__(self, threads: int) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {threads!r}")
        self.threads = threads
        self._lock = threading.Lock()
        self._inboxes: list[queue.SimpleQueue] = []
        self._pid = -1

    def start(self) -> None:
        """Start the worker threads if this process has none yet (``run`` does it too)."""
        with self._lock:
            self._workers()

    def _workers(self) -> list[queue.SimpleQueue]:
        if self._pid != os.getpid():
            self._inboxes, self._pid = [], os.getpid()
            for n in range(self.threads - 1):
                inbox: queue.SimpleQueue = queue.SimpleQueue()
                threading.Thread(target=_work, args=(inbox,), name=f"cpu-launch-{n}", daemon=True).start()
                self._inboxes.append(inbox)
        return self._inboxes

    def run(self, fn: Task, chunks: Sequence[Any]) -> None:
        """Call ``fn(chunk)`` once for every chunk, spread over the threads; return when all calls have returned.

        Raises the first exception a call raised (the other calls still finish first).
        """
        with self._lock:
            todo: queue.SimpleQueue = queue.SimpleQueue()
            for chunk in chunks:
                todo.put(chunk)
            done: queue.SimpleQueue = queue.SimpleQueue()
            helpers = self._workers()[:len(chunks) - 1]
            for inbox in helpers:
                inbox.put((fn, todo, done))
            errors = [_drain(fn, todo)] + [done.get() for _ in helpers]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
