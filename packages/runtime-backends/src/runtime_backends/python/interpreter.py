"""The PYTHON backend's interpreter: runs a kernel IR with numpy, vectorized over every thread of a launch.

Threads execute in lockstep, op by op, each value an array with one element per thread (group-major order). Control flow
is masked: IF narrows the active mask, RANGE repeats its body while any active thread is still in the loop. Lockstep
execution makes every BARRIER trivially satisfied, so local memory needs no further synchronization. Every memory access
is bounds-checked; an out-of-range access raises ``IndexError`` naming the kernel, the op and the first bad thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime_backends.python.alu import alu, bitcast, cast
from runtime_core.ir import ALU_OPS, Kernel, Ops, UOp

__all__ = ["run_kernel"]


@dataclass
class _Loop:
    op_index: int      # index of the RANGE op
    outer: np.ndarray  # mask when the loop was entered


class _Launch:
    def __init__(self, kernel: Kernel, bufs: list[np.ndarray], vals: tuple[int, ...],
                 global_size: tuple[int, ...], local_size: tuple[int, ...]) -> None:
        self.k = kernel
        self.bufs = {u.arg: b.view(u.dtype.np) for u, b in zip(kernel.buffers, bufs)}
        self.varvals = {id(u): np.int32(v) for u, v in zip(kernel.vars, vals)}
        self.gsize, self.lsize = global_size, local_size
        self.ngroups, self.nlocal = int(np.prod(global_size)), int(np.prod(local_size))
        self.nthreads = self.ngroups * self.nlocal
        tid = np.arange(self.nthreads, dtype=np.int64)
        self.group_linear = tid // self.nlocal
        self.specials = self._specials(tid)
        self.values: dict[int, Any] = {}
        self.locals: dict[int, np.ndarray] = {}
        self.ends = self._match_blocks()

    def _specials(self, tid: np.ndarray) -> dict[tuple[str, int], Any]:
        g, loc = tid // self.nlocal, tid % self.nlocal
        out: dict[tuple[str, int], Any] = {}
        for d, (gs, ls) in enumerate(zip(self.gsize, self.lsize)):
            gstride, lstride = int(np.prod(self.gsize[:d])), int(np.prod(self.lsize[:d]))
            out[("group", d)] = ((g // gstride) % gs).astype(np.int32)
            out[("local", d)] = ((loc // lstride) % ls).astype(np.int32)
            out[("lsize", d)], out[("gsize", d)] = np.int32(ls), np.int32(gs)
        return out

    def _match_blocks(self) -> dict[int, int]:
        """RANGE/IF op index -> index of its ENDRANGE/ENDIF."""
        index = {id(u): i for i, u in enumerate(self.k.ops)}
        return {index[id(u.src[0])]: i for i, u in enumerate(self.k.ops) if u.op in (Ops.ENDRANGE, Ops.ENDIF)}

    def run(self) -> None:
        ops = self.k.ops
        mask = np.ones(self.nthreads, dtype=bool)
        masks: list[np.ndarray] = []
        loops: list[_Loop] = []
        pc = 0
        with np.errstate(all="ignore"):  # inactive lanes may divide by zero etc.; their results are discarded
            while pc < len(ops):
                u = ops[pc]
                if u.op is Ops.IF:
                    masks.append(mask)
                    mask = mask & self.get(u.src[0])
                elif u.op is Ops.ENDIF:
                    mask = masks.pop()
                elif u.op is Ops.RANGE:
                    start, end = self.get(u.src[0]), self.get(u.src[1])
                    self.values[id(u)] = np.broadcast_to(start, (self.nthreads,)).astype(u.dtype.np)
                    inside = mask & (self.values[id(u)] < end)
                    if not inside.any():
                        pc = self.ends[pc] + 1
                        continue
                    loops.append(_Loop(pc, mask))
                    mask = inside
                elif u.op is Ops.ENDRANGE:
                    loop = loops[-1]
                    r = ops[loop.op_index]
                    var = self.values[id(r)]
                    self.values[id(r)] = var = np.where(mask, var + var.dtype.type(1), var)
                    mask = loop.outer & (var < self.get(r.src[1]))
                    if mask.any():
                        pc = loop.op_index + 1
                        continue
                    mask = loops.pop().outer
                else:
                    self.execute(u, mask)
                pc += 1

    def get(self, u: UOp) -> Any:
        return self.values[id(u)]

    def execute(self, u: UOp, mask: np.ndarray) -> None:
        op = u.op
        if op is Ops.CONST:
            self.values[id(u)] = u.dtype.np.type(u.arg)
        elif op is Ops.VAR:
            self.values[id(u)] = self.varvals[id(u)]
        elif op is Ops.SPECIAL:
            self.values[id(u)] = self.specials[u.arg]
        elif op is Ops.PARAM:
            self.values[id(u)] = self.bufs[u.arg]
        elif op is Ops.LOCAL:
            self.values[id(u)] = np.zeros(self.ngroups * u.arg[1], dtype=u.dtype.np)
        elif op is Ops.ACC:
            self.values[id(u)] = np.broadcast_to(self.get(u.src[0]), (self.nthreads,)).copy()
        elif op is Ops.ASSIGN:
            acc = u.src[0]
            self.values[id(acc)] = np.where(mask, self.get(u.src[1]), self.get(acc)).astype(acc.dtype.np)
        elif op in ALU_OPS:
            dt = u.src[-1].dtype
            self.values[id(u)] = alu(op, dt, *(self.get(s) for s in u.src))
        elif op is Ops.CAST:
            self.values[id(u)] = cast(self.get(u.src[0]), u.src[0].dtype, u.dtype)
        elif op is Ops.BITCAST:
            self.values[id(u)] = bitcast(np.asarray(self.get(u.src[0])), u.dtype)
        elif op is Ops.LOAD:
            self.load(u, mask)
        elif op is Ops.STORE:
            self.store(u, mask)
        elif op is Ops.BARRIER:
            pass  # lockstep: every active thread of the group is already here

    def address(self, u: UOp, mask: np.ndarray, gate: UOp | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(memory array, flat element indices of the active threads, active mask) of a LOAD/STORE."""
        ptr = u.src[0]
        mem = self.get(ptr)
        active = mask if gate is None else mask & self.get(gate)
        idx = np.broadcast_to(self.get(u.src[1]), (self.nthreads,)).astype(np.int64)[active]
        limit = len(mem) if ptr.op is Ops.PARAM else ptr.arg[1]
        if len(idx) and (bad := np.flatnonzero((idx < 0) | (idx >= limit))).size:
            thread = int(np.flatnonzero(active)[bad[0]])
            what = f"buffer {ptr.arg}" if ptr.op is Ops.PARAM else f"local {ptr.arg[0]!r}"
            raise IndexError(f"kernel {self.k.name!r}: {u.op.name} out of bounds: thread {thread} (group "
                             f"{thread // self.nlocal}, local {thread % self.nlocal}) index {int(idx[bad[0]])} of {what} "
                             f"with {limit} elements")
        if ptr.op is Ops.LOCAL:
            idx = idx + self.group_linear[active] * ptr.arg[1]
        return mem, idx, active

    def load(self, u: UOp, mask: np.ndarray) -> None:
        gated = len(u.src) == 4
        mem, idx, active = self.address(u, mask, u.src[2] if gated else None)
        out = np.empty(self.nthreads, dtype=u.dtype.np)
        out[active] = mem[idx]
        if gated:
            out[~active] = np.broadcast_to(self.get(u.src[3]), (self.nthreads,))[~active]
        self.values[id(u)] = out

    def store(self, u: UOp, mask: np.ndarray) -> None:
        mem, idx, active = self.address(u, mask, u.src[3] if len(u.src) == 4 else None)
        mem[idx] = np.broadcast_to(self.get(u.src[2]), (self.nthreads,))[active]


def run_kernel(kernel: Kernel, bufs: list[np.ndarray], vals: tuple[int, ...], global_size: tuple[int, ...],
               local_size: tuple[int, ...]) -> None:
    """Run ``kernel`` over ``prod(global_size) * prod(local_size)`` threads on uint8 host arrays ``bufs`` (slot order).

    Raises ``IndexError`` for an out-of-bounds access (memory written before the bad op stays written, as on a device).
    """
    if kernel.uses_local and int(np.prod(local_size)) > 1024:
        raise ValueError(f"kernel {kernel.name!r}: a group of {int(np.prod(local_size))} threads exceeds 1024")
    _Launch(kernel, bufs, vals, global_size, local_size).run()
