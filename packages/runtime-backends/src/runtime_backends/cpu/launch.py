"""Validated CPU launches: the argument block of a call (``abi``), run serially or split over the device's thread pool.

A :class:`Launch` is made once per distinct validated argument set (``CPUProgram`` memoizes it) and can be replayed.
Whether the thread pool pays is learnt by measuring: a first serial run shorter than ``POOL_MIN_S`` keeps the launch
(and later launches of its shape) serial, since waking the workers costs tens of microseconds. A longer one makes the
launch try the pool, then run the way whose fastest of its last ``WINDOW`` runs was faster, measuring the other way
again now and then (``probe_run``): on a machine whose cores other processes keep busy, the workers get little time,
and a serial run wins. The fastest run, not a mean, so that runs slowed by a passing load (a first run beside other
processes setting up) do not hold a launch to the slower way until several probes have averaged them out: one
unhindered probe is enough.
"""

from __future__ import annotations

import ctypes
import math
from collections import deque
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

from runtime_backends.cpu.abi import FAULT_FIELDS, LAUNCH_PARAMS, Signature
from runtime_backends.cpu.memcheck import fault_error
from runtime_backends.cpu.pool import GroupPool

__all__ = ["Launch", "ForeignLaunch", "POOL_MIN_S", "PROBE_EVERY", "WINDOW", "CHUNKS_PER_THREAD", "probe_run",
           "split_groups", "Rect"]

POOL_MIN_S = 200e-6
"""A launch whose serial run takes at least this many seconds tries the thread pool."""
PROBE_EVERY = 16
"""A launch that may use the pool runs the way it currently finds slower at its runs 2, 4, 8 and then every this many
runs, to measure it again (``probe_run``)."""
WINDOW = 4
"""Runs of each way (serial, pooled) kept: the fastest of them stands for that way; older ones are forgotten, so a way
that got slower (other processes came) loses within WINDOW runs of it."""
CHUNKS_PER_THREAD = 16
"""Chunks per pool thread: more chunks than threads keep every thread busy when other processes load some cores."""

_Fault = ctypes.c_longlong * len(FAULT_FIELDS)
Rect = tuple[int, int, int, int]
"""Groups a call runs (``abi``): rows ``[rlo, rhi)`` times x groups ``[xlo, xhi)``."""


def probe_run(n: int) -> bool:
    """Whether run ``n`` (counted from 1 since the pool became an option) measures the currently slower way."""
    return n >= 2 and (n & (n - 1) == 0 if n < PROBE_EVERY else n % PROBE_EVERY == 0)


def split_groups(gs: Sequence[int], chunks: int) -> list[Rect]:
    """The groups of grid ``gs`` cut into about ``chunks`` rectangles in group order (x fastest): ranges of whole rows,
    or, with fewer rows than chunks, each row cut into x ranges; sizes differ by at most one row or one x group."""
    rows = gs[1] * gs[2]
    if rows >= chunks:
        return [(lo, hi, 0, gs[0]) for lo, hi in _ranges(rows, chunks)]
    return [(r, r + 1, lo, hi) for r in range(rows) for lo, hi in _ranges(gs[0], max(1, chunks // rows))]


def _ranges(n: int, k: int) -> list[tuple[int, int]]:
    """``[0, n)`` cut into ``min(k, n)`` consecutive ranges whose lengths differ by at most one."""
    k = min(k, n)
    return [(n * j // k, n * (j + 1) // k) for j in range(k)]


def argument_block(sig: Signature, bufs: Sequence[int], vals: Sequence[int], gs: Sequence[int], ls: Sequence[int],
                   sizes: Sequence[int] | None, rect: Rect, fault: ctypes.Array | None) -> ctypes.Array:
    """The int64 argument block of one call running the groups of ``rect`` (layout in ``abi``)."""
    block = (ctypes.c_longlong * sig.block_len)()
    block[:sig.buffers] = list(bufs)
    block[sig.buffers:sig.launch_offset] = list(vals)
    params = dict(zip(LAUNCH_PARAMS, (*gs, *ls, *rect)))
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
        parallel: whether launches of this shape are long enough to try the pool; None: not known yet (learnt from
            the first run and reported to ``on_decided(parallel)``).

    Attributes:
        direct: True when a run is just ``fn(block)`` (serial for good, unchecked): callers may make that call
            themselves.
    """

    __slots__ = ("name", "fn", "sig", "_args", "groups", "pool", "faults", "block", "chunks", "undecided", "on_decided",
                 "direct", "_seconds", "_runs")

    def __init__(self, name: str, fn: Any, sig: Signature, bufs: Sequence[int], vals: Sequence[int],
                 gs: Sequence[int], ls: Sequence[int], sizes: Sequence[int] | None, pool: GroupPool | None,
                 parallel: bool | None) -> None:
        self.name, self.fn, self.sig = name, fn, sig
        self._args = (bufs, vals, gs, ls, sizes)
        self.groups = math.prod(gs)
        worth = parallel is not False and pool is not None and pool.threads > 1 and self.groups > 1
        self.pool = pool if worth else None
        self.faults: list[ctypes.Array] = []
        self.block = self._block((0, gs[1] * gs[2], 0, gs[0]))
        self.chunks: list[ctypes.Array] | None = None
        self.undecided = self.pool is not None and parallel is None
        self.on_decided: Callable[[bool], Any] | None = None
        # seconds of the last WINDOW serial / pooled runs
        self._seconds: dict[bool, deque[float]] = {False: deque(maxlen=WINDOW), True: deque(maxlen=WINDOW)}
        self._runs = 0
        if self.pool is not None and parallel:
            self._use_pool(self.pool)
        self.direct = not sig.checked and self.pool is None

    def _block(self, rect: Rect) -> ctypes.Array:
        fault = _Fault() if self.sig.checked else None
        if fault is not None:
            self.faults.append(fault)
        return argument_block(self.sig, *self._args, rect, fault)

    def _use_pool(self, pool: GroupPool) -> None:
        rects = split_groups(self._args[2], CHUNKS_PER_THREAD * pool.threads)
        self.chunks = [self._block(r) for r in rects]
        pool.start()  # now, so that starting threads does not count against the first pooled run

    def __call__(self, wait: bool = False) -> float | None:
        """Run the launch; the elapsed seconds when ``wait``, else None. Raises ``OutOfBoundsError`` (checked)."""
        if self.direct:
            if not wait:
                self.fn(self.block)
                return None
            start = perf_counter()
            self.fn(self.block)
            return perf_counter() - start
        return self._run(wait)

    def _run(self, wait: bool) -> float | None:
        for fault in self.faults:
            fault[0] = 0
        pooled = self._pooled_next()
        start = perf_counter()
        if pooled and self.pool is not None and self.chunks is not None:
            self.pool.run(self.fn, self.chunks)
        else:
            self.fn(self.block)
        elapsed = perf_counter() - start
        for fault in self.faults:  # chunks in group order: the first fault of the lowest groups is reported
            if fault[0]:  # a run cut short by its fault teaches nothing about how long the launch takes
                raise fault_error(self.name, list(fault))
        if self.pool is not None:
            self._learn(pooled, elapsed)
        return elapsed if wait else None

    def _pooled_next(self) -> bool:
        """Run on the pool this time? The faster way so far (unmeasured counts as fastest), the other one when probing."""
        if self.chunks is None:
            return False
        self._runs += 1
        faster = self._fastest(True) <= self._fastest(False)
        return faster != probe_run(self._runs)

    def _fastest(self, pooled: bool) -> float:
        """The fastest of the way's last runs in seconds; 0.0 when it has not run yet (so it is tried first)."""
        runs = self._seconds[pooled]
        return min(runs) if runs else 0.0

    def _learn(self, pooled: bool, elapsed: float) -> None:
        if self.undecided:
            self.undecided = False
            worth = elapsed >= POOL_MIN_S
            if worth and self.pool is not None:
                self._use_pool(self.pool)
            else:
                self.pool = None
                self.direct = not self.sig.checked
            if self.on_decided is not None:
                self.on_decided(worth)
        self._seconds[pooled].append(elapsed)


class ForeignLaunch:
    """A call of a foreign kernel (no signature record) with its arguments as given: buffers as ``void*``, vals as
    ``int32_t``, converted by ctypes (``TypeError`` for what it cannot convert); nothing else is checked."""

    direct = False

    def __init__(self, fn: Any, bufs: Sequence[Any], vals: Sequence[Any]) -> None:
        self.fn = fn
        self.args = [ctypes.c_void_p(b) for b in bufs] + [ctypes.c_int32(v) for v in vals]

    def __call__(self, wait: bool = False) -> float | None:
        start = perf_counter()
        self.fn(*self.args)
        return perf_counter() - start if wait else None
