"""One memory budget over every session of a CLOUD server: buffers held by the session workers and the request
bodies the server is receiving, all processes together.

The budget is an array of byte counts in shared memory (a ``memfd``), one slot per holder (slot 0: the server's
bodies; one slot per session worker), under one lock (``flock`` on the shared file; each process opens its own file
description of it, which is what makes ``flock`` exclude between processes). A holder only adds to and subtracts
from its own slot, so when a worker dies the server zeroes its slot and nothing it held is counted twice or lost.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import threading
from collections.abc import Iterator

__all__ = ["MemoryBudget", "BudgetExceeded"]

_SLOT_BYTES = 8


class BudgetExceeded(MemoryError):
    """Taking the bytes would exceed the server's memory budget (the server answers ``507``)."""


class MemoryBudget:
    """``total`` bytes shared by ``slots`` holders. A worker process joins with :meth:`attach` on the descriptor
    :attr:`fd` passed to it. Thread- and process-safe."""

    def __init__(self, total: int, slots: int) -> None:
        self.total = total
        self.fd = os.memfd_create("cloud-memory-budget", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, slots * _SLOT_BYTES)
        self._open(self.fd)

    @classmethod
    def attach(cls, fd: int, total: int) -> MemoryBudget:
        """The budget whose shared file is ``fd`` (inherited from the server), with a file description of its own."""
        budget = cls.__new__(cls)
        budget.total, budget.fd = total, os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
        os.close(fd)
        budget._open(budget.fd)
        return budget

    def _open(self, fd: int) -> None:
        self._map = mmap.mmap(fd, os.fstat(fd).st_size)
        self._held = memoryview(self._map).cast("q")
        self._thread_lock = threading.Lock()

    @property
    def slots(self) -> int:
        """How many holders the budget has slots for."""
        return len(self._held)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def take(self, slot: int, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more for ``slot``; :class:`BudgetExceeded` (naming ``what``) when all holders together
        would hold more than :attr:`total`."""
        with self._locked():
            held = sum(self._held)
            if held + nbytes > self.total:
                raise BudgetExceeded(f"{what}: the server holds {held} bytes for all sessions; {nbytes} more would "
                                     f"exceed its memory budget of {self.total} bytes; free buffers or retry later")
            self._held[slot] += nbytes

    def give(self, slot: int, nbytes: int) -> None:
        """Count ``nbytes`` fewer for ``slot``."""
        with self._locked():
            self._held[slot] -= nbytes

    def clear(self, slot: int) -> int:
        """Forget everything ``slot`` held (its worker is gone); returns how much that was."""
        with self._locked():
            held, self._held[slot] = self._held[slot], 0
        return held

    def held(self, slot: int | None = None) -> int:
        """Bytes held by ``slot`` (all slots when ``None``)."""
        with self._locked():
            return sum(self._held) if slot is None else self._held[slot]
