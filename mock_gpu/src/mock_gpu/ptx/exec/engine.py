"""Kernel execution: every thread of a chunk of whole blocks runs vectorized in numpy.

Scheduling (the SIMT model of PTX ISA 3.1, with independent thread scheduling made deterministic): threads that sit
at the same program counter form a group; the group with the smallest pc runs next, so divergent paths of structured
code reconverge at their join point before anything after it runs. A group keeps running straight-line code until its
pc reaches another group's pc (then they merge) or passes it. ``bar``/``barrier`` park threads; once nothing else can
run, every barrier whose block has all its non-exited threads (or the requested count) waiting is released, and if
none can be released the kernel fails with BarrierDivergence instead of hanging.

A group that spins (its registers come back to the same values at the same pc) is parked so that the other groups
run, as independent thread scheduling lets them on a GPU; it runs again once something else ran. In a cooperative
launch, which holds the whole grid, a spin that nothing else can end (no other group can run and no barrier can be
released: typically cooperative groups' grid.sync() that some block exited without reaching) is a deadlock: it fails
at once with LaunchTimeout, as it would after MOCKGPU_LAUNCH_TIMEOUT. In an ordinary launch the blocks of later
chunks might end the spin on a GPU, so it keeps spinning until the timeout.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time

import numpy as np

from ...address_space import AddressSpace, MemoryFault
from ..errors import BarrierDivergence, DeviceAssertion, ExecutionError, LaunchTimeout
from ..ops import BARRIER, BRANCH, EXIT, NORMAL, TRAP, Op
from ..types import RAW, WIDTH

__all__ = ["launch", "CHUNK_BYTES"]

CHUNK_BYTES = 256 << 20  # budget for per-thread state (registers, local memory) of one chunk
_MAX_BARRIER_ID = 16
_NWARPID = 64
_CLUSTER_GRID = {"%clusterid": "%ctaid", "%nclusterid": "%nctaid"}
_CHECK_EVERY = 0x3FF  # instruction groups between two looks at the clock
_SPIN_SAMPLE = 64  # threads whose registers are compared first when looking for a spin
_LOOK_EVERY = 16  # loop turns between two looks for a spin


class _Chunk:
    """Registers, memories and special registers of ``nblocks`` consecutive blocks starting at ``first``."""

    def __init__(self, kernel, first: int, nblocks: int, grid, block, dyn: int, params: bytes,
                 space: AddressSpace, symaddr: dict[str, int], smid_count: int, deadline: float,
                 envregs: dict[str, int]) -> None:
        self.kernel = kernel
        self.envregs = envregs  # %envregN values the driver sets for this launch (others read 0)
        self.deadline = deadline
        self.first = first
        self.B = nblocks
        self.grid = grid
        self.block = block
        self.T = block[0] * block[1] * block[2]
        self.n = self.T * nblocks
        self.space = space
        self.symaddr = symaddr
        self.smid_count = smid_count
        self.regs = [np.zeros(self.n, RAW[WIDTH[t]]) for t in kernel.reg_types]
        self.static_shared = kernel.dynamic_shared_offset
        self.dynamic_shared = dyn
        self.shared_size = kernel.dynamic_shared_offset + dyn
        self.shared_stride = _stride(self.shared_size)
        self.shared = np.zeros(self.B * self.shared_stride, np.uint8)
        self.local_size = kernel.local_bytes
        self.local_stride = _stride(self.local_size)
        self.local = np.zeros(self.n * self.local_stride, np.uint8)
        self.param_bytes = len(params)
        self.kparams = np.zeros(_stride(len(params)), np.uint8)
        self.kparams[:len(params)] = np.frombuffer(params, np.uint8)
        self.blk = np.repeat(np.arange(nblocks, dtype=np.int64), self.T)
        self.carry = np.zeros(self.n, np.uint64)
        self.alive = np.full(self.B, self.T, np.int64)
        self.arrivals = np.zeros(self.B * _MAX_BARRIER_ID, np.int64)
        self.clock = 0
        self._special: dict[str, np.ndarray] = {}
        self.cooperative = any(envregs.values())  # the driver passes a grid-barrier workspace to cooperative launches
        self._spins: dict[int, tuple[bytes, bytes]] = {}  # pc -> (sample, full) register digests at the last look
        self._parked: list[tuple[int, np.ndarray]] = []  # spinning groups that let the others run
        self._parked_clock = 0  # the clock when the last group was parked
        self._turns = 0  # backward branches taken (loop turns), to look for spins every _LOOK_EVERY of them

    @functools.cached_property
    def ltid(self) -> np.ndarray:
        """Linear thread id within its block, per chunk thread (int64)."""
        return np.tile(np.arange(self.T, dtype=np.int64), self.B)

    @functools.cached_property
    def lane(self) -> np.ndarray:
        """Lane (linear thread id % 32) per chunk thread (int64)."""
        return self.ltid % 32

    @functools.cached_property
    def warp_key(self) -> np.ndarray:
        """Chunk-wide warp number per chunk thread (int64), increasing with the thread index."""
        return self.blk * (-(-self.T // 32)) + self.ltid // 32

    # ----- special registers (PTX ISA chapter 10) -----
    def special(self, name: str) -> np.ndarray:
        if name in ("%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
            return self._counter(name)
        got = self._special.get(name)
        if got is None:
            got = self._compute_special(name)
            self._special[name] = got
        return got

    def _counter(self, name: str) -> np.ndarray:
        # deterministic clocks: the number of instruction groups executed so far (globaltimer: that many microseconds)
        val = self.clock * (1000 if name.startswith("%globaltimer") else 1)
        if name in ("%clock64", "%globaltimer"):
            return np.full(self.n, val, np.uint64)
        if name.endswith("_hi"):
            val >>= 32
        return np.full(self.n, val & 0xFFFFFFFF, np.uint32)

    def _compute_special(self, name: str) -> np.ndarray:
        if name.startswith("%envreg"):
            return self._uniform(self.envregs.get(name, 0))
        # without cluster launches every block is a cluster of one (PTX ISA 10.x cluster special registers)
        head, dot, comp = name.partition(".")
        if head in _CLUSTER_GRID:
            name = _CLUSTER_GRID[head] + dot + comp
        if name.startswith(("%cluster_ctaid", "%cluster_ctarank")):
            return self._uniform(0)
        if name.startswith(("%cluster_nctaid", "%cluster_nctarank")):
            return self._uniform(1)
        base, _, comp = name[1:].partition(".")
        axis = "xyz".index(comp or "x")
        if base == "ctaid" and self.B == 1 and self.n > 1:  # one block: its coordinates are uniform
            return self._uniform(self.coords(0)[0][axis])
        if base in ("tid", "ctaid"):
            dims = self.block if base == "tid" else self.grid
            lin = self.ltid if base == "tid" else self.first + self.blk
            v = lin if axis == 0 and dims[1] * dims[2] == 1 else [lin % dims[0], (lin // dims[0]) % dims[1],
                                                                  lin // (dims[0] * dims[1])][axis]
            return v.astype(np.uint32)
        if base in ("ntid", "nctaid"):
            return self._uniform((self.block if base == "ntid" else self.grid)[axis])
        lane = self.lane.astype(np.uint64)
        one = np.uint64(1)
        values = {
            "laneid": lambda: self.lane, "warpid": lambda: self.ltid // 32,
            "nwarpid": lambda: _NWARPID, "smid": lambda: (self.first + self.blk) % self.smid_count,
            "nsmid": lambda: self.smid_count, "gridid": lambda: 0, "dynamic_smem_size": lambda: self.dynamic_shared,
            "total_smem_size": lambda: self.shared_size, "aggr_smem_size": lambda: self.shared_size,
            "lanemask_eq": lambda: one << lane, "lanemask_lt": lambda: (one << lane) - one,
            "lanemask_le": lambda: (one << (lane + one)) - one,
            "lanemask_gt": lambda: ~((one << (lane + one)) - one), "lanemask_ge": lambda: ~((one << lane) - one),
        }
        v = np.asarray(values[base]())
        if v.ndim == 0:
            return self._uniform(int(v))
        return (v.astype(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32)

    def _uniform(self, value: int) -> np.ndarray:
        """A special register that holds one value for every thread of the chunk: a read-only broadcast view."""
        return np.broadcast_to(np.array(value, np.uint32), (self.n,))

    # ----- error context -----
    def coords(self, t: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """(block, thread) coordinates of chunk thread ``t``."""
        bx, by, _ = self.block
        gx, gy, _ = self.grid
        g = self.first + t // self.T
        lt = t % self.T
        return (g % gx, (g // gx) % gy, g // (gx * gy)), (lt % bx, (lt // bx) % by, lt // (bx * by))

    # ----- scheduler -----
    def run(self) -> None:
        code: list[Op] = self.kernel.code
        groups: dict[int, np.ndarray] = {0: np.arange(self.n, dtype=np.int64)}
        blocked: list[tuple[int, np.ndarray]] = []
        while True:
            while groups:
                pc = min(groups)
                self._run_group(code, pc, groups.pop(pc), groups, blocked)
            if self._parked:
                self._unpark(code, groups, blocked)
            elif not blocked:
                return
            else:
                self._release(code, groups, blocked)

    def _run_group(self, code: list[Op], pc: int, idx: np.ndarray, groups: dict[int, np.ndarray],
                   blocked: list[tuple[int, np.ndarray]]) -> None:
        other = min(groups) if groups else math.inf
        n = self.n
        ncode = len(code)
        while True:
            if pc >= ncode:  # falling off the end of the kernel is an implicit ret
                self._exit(idx)
                return
            op = code[pc]
            self.clock += 1
            if not self.clock & _CHECK_EVERY and time.monotonic() > self.deadline:
                self._timed_out(op, idx)
            act, rest = idx, None
            if op.guard is not None:
                g = self.regs[op.guard[0]]
                g = g if idx.size == n else g[idx]
                if op.guard[1]:
                    g = ~g
                if not g.all():
                    act, rest = idx[g], idx[~g]
            kind = op.kind
            if kind == NORMAL:
                if act.size:
                    self._call(op, act)
                pc += 1
            elif kind == BRANCH:
                back = op.target <= pc
                if rest is None:
                    pc = op.target
                elif act.size:
                    _merge(groups, pc + 1, rest)
                    idx, pc = act, op.target
                    other = min(groups)
                else:
                    pc += 1
                    back = False
                if back and self._park_if_spinning(pc, idx, groups):
                    return
            elif kind == EXIT:
                if act.size:
                    self._exit(act)
                    if rest is None:
                        return
                    idx = rest
                pc += 1
            elif kind == TRAP:
                if act.size:
                    t = int(act[0])
                    blk, thr = self.coords(t)
                    if op.fn is not None:
                        raise DeviceAssertion(op.fn(self, t), kernel=self.kernel.name, block=blk, thread=thr,
                                              line=op.line)
                    raise ExecutionError(f"trap instruction executed ({op.text})", kernel=self.kernel.name,
                                         block=blk, thread=thr, line=op.line)
                pc += 1
            elif kind == BARRIER:
                if rest is not None:
                    _merge(groups, pc + 1, rest)
                if act.size:
                    if self._barrier_arrive(op, pc, act, blocked):
                        _merge(groups, pc + 1, act)
                return
            if pc < other:
                continue
            _merge(groups, pc, idx)
            return

    def _timed_out(self, op: Op, idx: np.ndarray) -> None:
        blk, thr = self.coords(int(idx[0]))
        raise LaunchTimeout("the kernel exceeded its time limit (MOCKGPU_LAUNCH_TIMEOUT): an endless loop, or a "
                            "spin-wait on a flag set by another block, which the emulator (running blocks in order) "
                            f"never reaches; it was at {op.text}", kernel=self.kernel.name, block=blk, thread=thr,
                            line=op.line)

    def _park_if_spinning(self, pc: int, idx: np.ndarray, groups: dict[int, np.ndarray]) -> bool:
        """At a loop's backward branch of the threads ``idx`` to ``pc``: every _LOOK_EVERY such turns, park them if
        they spin (see :meth:`_spinning`) and another group or, in a cooperative launch, a parked or blocked one
        could end the spin. Looking at loop turns rather than at the clock finds a spin after a few turns of it,
        however few threads spin (a lock handed from thread to thread)."""
        self._turns += 1
        if self._turns % _LOOK_EVERY or not (groups or self.cooperative) or not self._spinning(pc, idx):
            return False
        self._parked.append((pc, idx))
        self._parked_clock = self.clock
        return True

    def _spinning(self, pc: int, idx: np.ndarray) -> bool:
        """Whether the threads ``idx`` are back at ``pc`` with the registers they had the last time they were seen
        there: a spin that only another thread's store can end. The registers of a few threads are compared first,
        so that code making progress costs little."""
        seen = self._spins.get(pc)
        quick = self._digest(idx, idx[:_SPIN_SAMPLE])
        if seen is None or seen[0] != quick:
            self._spins[pc] = (quick, b"")
            return False
        full = self._digest(idx, idx)
        self._spins[pc] = (quick, full)
        return seen[1] == full

    def _digest(self, idx: np.ndarray, sample: np.ndarray) -> bytes:
        digest = hashlib.blake2b(idx.tobytes() if sample is idx else np.int64(idx.size).tobytes(), digest_size=16)
        for reg in self.regs:
            digest.update(np.ascontiguousarray(reg if sample.size == self.n else reg[sample]).data)
        return digest.digest()

    def _unpark(self, code: list[Op], groups: dict[int, np.ndarray], blocked: list[tuple[int, np.ndarray]]) -> None:
        """Nothing else can run: give the parked groups another turn if something ran or a barrier can be released
        since they were parked; in a cooperative launch, a deadlock (LaunchTimeout) otherwise."""
        if self.clock == self._parked_clock and self.cooperative and not self._release_any(code, groups, blocked):
            self._deadlocked(code)
        for pc, idx in self._parked:
            _merge(groups, pc, idx)
        self._parked.clear()

    def _release_any(self, code: list[Op], groups: dict[int, np.ndarray], blocked: list[tuple[int, np.ndarray]]) -> bool:
        """Release the barriers that can be released; False if none can."""
        if not blocked:
            return False
        try:
            self._release(code, groups, blocked)
        except BarrierDivergence:
            return False
        return True

    def _deadlocked(self, code: list[Op]) -> None:
        pc, idx = self._parked[0]
        blk, thr = self.coords(int(idx[0]))
        exited = np.flatnonzero(self.alive == 0)
        gone = ", ".join(str(self.coords(int(b) * self.T)[0]) for b in exited[:8]) + (" ..." if exited.size > 8 else "")
        why = f"block(s) {gone} exited" if exited.size else "every other thread waits at a barrier or spins"
        grid_sync = any("%envreg" in op.text for op in code)  # the kernel uses cooperative groups' grid barrier
        hint = ("if it is a grid-wide sync (cooperative groups' this_grid().sync()), every block must reach it" if
                grid_sync else "nothing that is still running sets what it waits for")
        raise LaunchTimeout(f"deadlock: {sum(i.size for _, i in self._parked)} threads spin at {code[pc].text} and no "
                            f"other thread of the grid can run to end the wait ({why}); {hint}. On a GPU the kernel "
                            "would hang", kernel=self.kernel.name, block=blk, thread=thr, line=code[pc].line)

    def _call(self, op: Op, act: np.ndarray) -> None:
        sel = None if act.size == self.n else act
        try:
            op.fn(self, sel)  # type: ignore[misc]
        except MemoryFault as f:
            pos = 0 if f.position is None else f.position
            t = int(pos if sel is None else sel[pos])
            f.kernel = self.kernel.name
            f.block, f.thread = self.coords(t)
            f.detail = f"Faulting instruction (PTX line {op.line}): {op.text}"
            raise

    def _exit(self, act: np.ndarray) -> None:
        self.alive -= np.bincount(self.blk[act], minlength=self.B)

    # ----- barriers (PTX ISA 9.7.13.1 bar, barrier) -----
    def _barrier_arrive(self, op: Op, pc: int, act: np.ndarray, blocked: list[tuple[int, np.ndarray]]) -> bool:
        """Record the arrival of ``act``; True when they continue right away (bar.arrive)."""
        spec = op.bar
        sel = None if act.size == self.n else act
        bar_id = spec.barrier(self, sel, act.size).astype(np.int64)  # type: ignore[union-attr]
        if (bar_id >= _MAX_BARRIER_ID).any() or (bar_id < 0).any():
            blk, thr = self.coords(int(act[0]))
            raise ExecutionError(f"barrier id {int(bar_id.max())} is out of range 0..15", kernel=self.kernel.name,
                                 block=blk, thread=thr, line=op.line)
        if spec.arrive:  # type: ignore[union-attr]
            self.arrivals += np.bincount(self.blk[act] * _MAX_BARRIER_ID + bar_id,
                                         minlength=self.arrivals.size)
            return True
        blocked.append((pc, act))
        return False

    def _release(self, code: list[Op], groups: dict[int, np.ndarray], blocked: list[tuple[int, np.ndarray]]) -> None:
        if len(blocked) == 1 and not self.arrivals.any():
            pc, act = blocked[0]
            spec = code[pc].bar
            if spec.count is None and spec.red is None and act.size == int(self.alive.sum()):  # type: ignore[union-attr]
                bar_id = spec.barrier(self, None if act.size == self.n else act, act.size)  # type: ignore[union-attr]
                if (bar_id == bar_id[0]).all():  # every live thread waits at this one barrier: release all
                    _merge(groups, pc + 1, act)
                    blocked.clear()
                    return
        entries = []
        for pc, act in blocked:
            op = code[pc]
            spec = op.bar
            sel = None if act.size == self.n else act
            bar_id = spec.barrier(self, sel, act.size).astype(np.int64)  # type: ignore[union-attr]
            key = self.blk[act] * _MAX_BARRIER_ID + bar_id
            if spec.count is not None:  # type: ignore[union-attr]
                expected = spec.count(self, sel, act.size).astype(np.int64)  # type: ignore[union-attr]
            else:
                expected = self.alive[self.blk[act]]
            entries.append((pc, act, key, expected))
        arrived = self.arrivals.copy()
        for _, _, key, _ in entries:
            arrived += np.bincount(key, minlength=arrived.size)
        pc_min = np.full(arrived.size, np.iinfo(np.int64).max)
        pc_max = np.full(arrived.size, -1)
        if len({pc for pc, _, _, _ in entries}) > 1:
            for pc, _, key, _ in entries:
                np.minimum.at(pc_min, key, pc)
                np.maximum.at(pc_max, key, pc)
        else:
            pc_min[:] = pc_max[:] = entries[0][0]
        still: list[tuple[int, np.ndarray]] = []
        released_keys = []
        for pc, act, key, expected in entries:
            done = arrived[key] >= expected
            if done.any() and code[pc].bar.aligned and (pc_min[key[done]] != pc_max[key[done]]).any():  # type: ignore
                k = int(key[done][np.argmax(pc_min[key[done]] != pc_max[key[done]])])
                self._diverged(code, k // _MAX_BARRIER_ID, pc, "threads wait at different bar.sync instructions "
                               f"(pcs {int(pc_min[k])} and {int(pc_max[k])}) for the same barrier; .aligned barriers "
                               "must be reached by all threads at the same instruction")
            if done.any():
                rel = act[done]
                self._reduce(code[pc], act, key, done)
                _merge(groups, pc + 1, rel)
                released_keys.append(key[done])
            if not done.all():
                still.append((pc, act[~done]))
        if not released_keys:
            pc, act = blocked[0]
            k = int(entries[0][2][0])
            b = k // _MAX_BARRIER_ID
            self._diverged(code, b, pc, f"{int(arrived[k])} of the block's {int(entries[0][3][0])} threads "
                           f"arrived at barrier {k % _MAX_BARRIER_ID}; the other live threads of the block wait "
                           f"elsewhere ({self._waiting_elsewhere(code, blocked, b, pc)}) or can never arrive")
        for keys in released_keys:
            self.arrivals[keys] = 0
        blocked[:] = still

    def _waiting_elsewhere(self, code: list[Op], blocked, b: int, pc: int) -> str:
        where = sorted({(p, code[p].line) for p, act in blocked if p != pc and (self.blk[act] == b).any()})
        return ", ".join(f"pc {p} line {ln}" for p, ln in where) or "no other barrier"

    def _diverged(self, code: list[Op], b: int, pc: int, message: str) -> None:
        blk, _ = self.coords(b * self.T)
        raise BarrierDivergence(self.kernel.name, blk, pc, code[pc].line, message)

    def _reduce(self, op: Op, act: np.ndarray, key: np.ndarray, done: np.ndarray) -> None:
        spec = op.bar
        if spec is None or spec.red is None:
            return
        rel = act[done]
        sel = None if rel.size == self.n else rel
        pred = spec.red_pred(self, sel, rel.size)  # type: ignore[misc]
        k = key[done]
        counts = np.bincount(k, weights=pred.astype(np.float64), minlength=self.arrivals.size).astype(np.int64)
        totals = np.bincount(k, minlength=self.arrivals.size)
        if spec.red == "popc":
            val = counts[k].astype(np.uint32)
        elif spec.red == "and":
            val = counts[k] == totals[k]
        else:
            val = counts[k] > 0
        spec.red_dst(self, sel, val)  # type: ignore[misc]


def _stride(nbytes: int) -> int:
    """Bytes per block/thread for a region of ``nbytes``: rounded up to 16 bytes, at least 16."""
    return max(16, -(-nbytes // 16) * 16)


def _merge(groups: dict[int, np.ndarray], pc: int, idx: np.ndarray) -> None:
    if idx.size == 0:
        return
    have = groups.get(pc)
    groups[pc] = idx if have is None else np.sort(np.concatenate((have, idx)), kind="stable")


def _dims(name: str, value, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    try:
        dims = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"{name} must be a tuple of 3 ints, got {value!r}") from None
    if len(dims) != 3 or any(d < 1 or d > lim for d, lim in zip(dims, limits, strict=True)):
        raise ValueError(f"{name} dimensions must be 3 positive ints within {limits}, got {value!r}")
    return dims  # type: ignore[return-value]


def launch(module, kernel, grid, block, dynamic_shared_bytes: int, params: bytes, space: AddressSpace, device: int,
           *, smid_count: int = 132, timeout: float = 300.0, grid_workspace: int = 0) -> None:
    """Run ``kernel`` of ``module`` over the whole grid (the mock of cuLaunchKernel followed by completion).

    grid/block: (x, y, z) in blocks/threads; dynamic_shared_bytes: bytes of extern .shared; params: the kernel
    parameter buffer (``kernel.param_bytes`` long, laid out per ``kernel.params``); ``module`` must be bound to
    ``space`` (Module.bind). Raises ValueError for a bad launch configuration, MemoryFault (kernel, block, thread
    filled in), BarrierDivergence, ExecutionError (trap), DeviceAssertion or LaunchTimeout (after ``timeout`` seconds)
    for failures while running. Blocks run in chunks of whole
    blocks, in increasing block order, so results (including atomics' old values) are deterministic.
    ``grid_workspace`` (a cooperative launch): the device address of a zeroed counter that cooperative groups'
    grid barrier uses, read from %envreg1 (high half) and %envreg2 (low half); the whole grid then runs as one
    chunk, so that the barrier waits for every block (it is 0, and grid.sync() traps, otherwise).
    """
    grid = _dims("grid", grid, (2**31 - 1, 65535, 65535))
    block = _dims("block", block, (1024, 1024, 64))
    threads = block[0] * block[1] * block[2]
    if threads > kernel.max_threads:
        raise ValueError(f"block of {threads} threads exceeds the kernel's limit of {kernel.max_threads} "
                         f"(.maxntid / 1024) for {kernel.name!r}")
    if kernel.reqntid is not None and tuple(block) != kernel.reqntid:
        raise ValueError(f"kernel {kernel.name!r} requires block {kernel.reqntid} (.reqntid), got {block}")
    if len(params) != kernel.param_bytes:
        raise ValueError(f"kernel {kernel.name!r} takes a {kernel.param_bytes}-byte parameter buffer, got "
                         f"{len(params)} bytes")
    if dynamic_shared_bytes < 0:
        raise ValueError(f"dynamic shared memory size must be >= 0, got {dynamic_shared_bytes}")
    symaddr = module.symbol_addresses(space, device)
    nblocks = grid[0] * grid[1] * grid[2]
    per_thread = sum(max(1, WIDTH[t] // 8) for t in kernel.reg_types) + max(16, kernel.local_bytes) + 96
    per_chunk = nblocks if grid_workspace else max(1, CHUNK_BYTES // (per_thread * threads))
    envregs = {"%envreg1": grid_workspace >> 32, "%envreg2": grid_workspace & 0xFFFFFFFF}
    deadline = time.monotonic() + timeout
    for first in range(0, nblocks, per_chunk):
        count = min(per_chunk, nblocks - first)
        _Chunk(kernel, first, count, grid, block, dynamic_shared_bytes, bytes(params), space, symaddr,
               smid_count, deadline, envregs).run()
