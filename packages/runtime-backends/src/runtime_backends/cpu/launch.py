"""Validated CPU launches: the argument block of a call (``abi``), run serially or split over the device's thread pool.

A :class:`Launch` is made once per distinct validated argument set (``CPUProgram`` memoizes it) and can be replayed.
Whether a launch shape is worth the thread pool is learnt from its first run: a serial run that took at least
``POOL_MIN_S`` makes this and later launches of the same shape run in chunks on the pool, because waking the workers
costs tens of microseconds, more than a small launch takes.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from runtime_backends.cpu.abi import FAULT_FIELDS, Signature
from runtime_backends.cpu.memcheck import fault_error
from runtime_backends.cpu.pool import GroupPool

__all__ = ["Launch", "ForeignLaunch", "POOL_MIN_S", "CHUNKS_PER_THREAD", "split_groups"]

POOL_MIN_S = 200e-6
"""A launch whose serial run takes at least this many seconds runs on the thread pool from then on."""
CHUNKS_PER_THREAD = 16
"""Chunks per pool thread: more chunks than threads keep every thread busy when other processes load some cores."""

_Fault = ctypes.c_longlong * len(FAULT_FIELDS)


def split_groups(groups: int, chunks: int) -> list[tuple[int, int]]:
    """``[0, groups)`` cut into ``min(chunks, groups)`` consecutive ranges whose lengths differ by at most one."""
    n = min(chunks, groups)
    return [(groups * k // n, groups * (k + 1) // n) for k in range(n)]


def argument_block(sig: Signature, bufs: Sequence[int], vals: Sequence[int], gs: Sequence[int], ls: Sequence[int],
                   sizes: Sequence[int] | None, groups: tuple[int, int], fault: ctypes.Array | None) -> ctypes.Array:
    """The int64 argument block of one call running groups ``[groups[0], groups[1])`` (layout in ``abi``)."""
    block = (ctypes.c_longlong * sig.block_len)()
    block[:sig.buffers] = list(bufs)
    block[sig.buffers:sig.launch_offset] = list(vals)
    params = dict(zip(("gsz0", "gsz1", "gsz2", "lsz0", "lsz1", "lsz2", "glo", "ghi"), (*gs, *ls, *groups)))
    block[sig.launch_offset:sig.sizes_offset] = [params[p] for p in sig.launch]
    if sig.checked and sizes is not None and fault is not None:
        block[sig.sizes_offset:sig.fault_offset] = list(sizes)
        block[sig.fault_offset] = ctypes.addressof(fault)
    return block


class Launch:
    """A validated launch of a rendered kernel, ready to run again: ``launch()`` or ``launch(wait=True)``.

    Args:
        name, fn: the kernel's name (for errors) and its ctypes function (one argument: the block).
        sig, bufs, vals, gs, ls: the kernel's signature and the validated arguments (sizes padded to 3 dims).
        sizes: byte sizes of the buffers (checked kernels only).
        pool: the device's thread pool, or None to run serially.
        parallel: whether this shape runs on the pool; None: not known yet (decided by the first run, then reported to
            ``on_decided(parallel)``).

    Attributes:
        direct: True when a run is just ``fn(block)`` (serial, unchecked, decided): callers may make that call
            themselves.
    """

    def __init__(self, name: str, fn: Any, sig: Signature, bufs: Sequence[int], vals: Sequence[int],
                 gs: Sequence[int], ls: Sequence[int], sizes: Sequence[int] | None, pool: GroupPool | None,
                 parallel: bool | None) -> None:
        self.name, self.fn, self.sig = name, fn, sig
        self._args = (bufs, vals, gs, ls, sizes)
        self.groups = math.prod(gs)
        self.pool = pool if pool is not None and pool.threads > 1 and self.groups > 1 else None
        self.faults: list[ctypes.Array] = []
        self.block = self._block((0, self.groups))
        self.chunks: list[ctypes.Array] | None = None
        self.undecided = self.pool is not None and parallel is None
        self.on_decided: Callable[[bool], Any] | None = None
        if self.pool is not None and parallel:
            self._use_pool(self.pool)
        self.direct = self._is_direct()

    def _is_direct(self) -> bool:
        return not self.sig.checked and self.chunks is None and not self.undecided

    def _block(self, groups: tuple[int, int]) -> ctypes.Array:
        fault = _Fault() if self.sig.checked else None
        if fault is not None:
            self.faults.append(fault)
        return argument_block(self.sig, *self._args, groups, fault)

    def _use_pool(self, pool: GroupPool) -> None:
        ranges = split_groups(self.groups, CHUNKS_PER_THREAD * pool.threads)
        self.chunks = [self._block(r) for r in ranges]

    def __call__(self, wait: bool = False) -> float | None:
        """Run the launch; the elapsed seconds when ``wait``, else None. Raises ``OutOfBoundsError`` (checked)."""
        for fault in self.faults:
            fault[0] = 0
        start = time.perf_counter()
        if self.pool is not None and self.chunks is not None:
            self.pool.run(self.fn, self.chunks)
        else:
            self.fn(self.block)
        elapsed = time.perf_counter() - start
        if self.undecided:
            self._decide(elapsed)
        for fault in self.faults:  # chunks in group order: the first fault of the lowest groups is reported
            if fault[0]:
                raise fault_error(self.name, list(fault))
        return elapsed if wait else None

    def _decide(self, serial_s: float) -> None:
        parallel = serial_s >= POOL_MIN_S
        self.undecided = False
        if parallel and self.pool is not None:
            self._use_pool(self.pool)
        self.direct = self._is_direct()
        if self.on_decided is not None:
            self.on_decided(parallel)


class ForeignLaunch:
    """A call of a foreign kernel (no signature record) with its arguments as given: buffers as ``void*``, vals as
    ``int32_t``, converted by ctypes (``TypeError`` for what it cannot convert); nothing else is checked."""

    direct = False

    def __init__(self, fn: Any, bufs: Sequence[Any], vals: Sequence[Any]) -> None:
        self.fn = fn
        self.args = [ctypes.c_void_p(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]

    def __call__(self, wait: bool = False) -> float | None:
        start = time.perf_counter()
        self.fn(*self.args)
        return time.perf_counter() - start if wait else None
