"""One memory budget over every session of a CLOUD server: buffers held by the session workers and the request
bodies the server is receiving, all processes together.

The budget is an array of byte counts in shared memory, one slot per holder (slot 0: the server's bodies; one slot
per session worker), with one lock. A holder only adds to and subtracts from its own slot, so when a worker dies the
server zeroes its slot and nothing it held is counted twice or lost.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import BaseContext
from typing import Any

__all__ = ["MemoryBudget", "BudgetExceeded"]


class BudgetExceeded(MemoryError):
    """Taking the bytes would exceed the server's memory budget (the server answers ``507``)."""


class MemoryBudget:
    """``total`` bytes shared by ``slots`` holders; pass it to worker processes when they start (it is inherited, not
    pickled later). Thread- and process-safe."""

    def __init__(self, total: int, slots: int, ctx: BaseContext | None = None) -> None:
        self.total = total
        self._held: Any = (ctx or multiprocessing.get_context()).Array("q", slots, lock=True)

    @property
    def slots(self) -> int:
        """How many holders the budget has slots for."""
        return len(self._held)

    def take(self, slot: int, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more for ``slot``; :class:`BudgetExceeded` (naming ``what``) when all holders together
        would hold more than :attr:`total`."""
        with self._held.get_lock():
            held = sum(self._held.get_obj())
            if held + nbytes > self.total:
                raise BudgetExceeded(f"{what}: the server holds {held} bytes for all sessions; {nbytes} more would "
                                     f"exceed its memory budget of {self.total} bytes; free buffers or retry later")
            self._held[slot] += nbytes

    def give(self, slot: int, nbytes: int) -> None:
        """Count ``nbytes`` fewer for ``slot``."""
        with self._held.get_lock():
            self._held[slot] -= nbytes

    def clear(self, slot: int) -> int:
        """Forget everything ``slot`` held (its worker is gone); returns how much that was."""
        with self._held.get_lock():
            held, self._held[slot] = self._held[slot], 0
        return int(held)

    def held(self, slot: int | None = None) -> int:
        """Bytes held by ``slot`` (all slots when ``None``)."""
        with self._held.get_lock():
            return int(sum(self._held.get_obj()) if slot is None else self._held[slot])
