"""Reductions: serial (one thread per output, a RANGE loop into an ACC) and a shared-memory tree (LOCAL + BARRIER).

References replay the kernel's own order of operations in the element type, so the float results are exact: the IR
rounds every op's result to its type and fixes the order.
"""

from __future__ import annotations

import numpy as np

from harness.kernels import values as V
from harness.kernels.case import KernelCase
from harness.kernels.semantics import reference_alu
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, KernelBuilder, Ops

__all__ = ["serial_reduce_cases", "tree_reduce_cases", "OUTPUTS", "LENGTH", "TREE_GROUP"]

OUTPUTS = 12     # reductions per launch (one thread each)
LENGTH = 37      # elements reduced per output (not a power of two)
TREE_GROUP = 64  # threads per group of the tree reduction (a power of two)

_SERIAL = ((Ops.ADD, dtypes.float32), (Ops.ADD, dtypes.float16), (Ops.ADD, dtypes.bfloat16), (Ops.ADD, dtypes.float64),
           (Ops.ADD, dtypes.int32), (Ops.ADD, dtypes.uint8), (Ops.MAX, dtypes.float32), (Ops.MAX, dtypes.int64),
           (Ops.MIN, dtypes.int8))


def _identity(op: Ops, dt: DType) -> int | float:
    if op is Ops.ADD:
        return 0
    if dt.is_float:
        return -float("inf") if op is Ops.MAX else float("inf")
    return int(dt.min) if op is Ops.MAX else int(dt.max)


def _serial_kernel(op: Ops, dt: DType) -> Kernel:
    kb = KernelBuilder(f"reduce_{op.name.lower()}_{dt.name}", (OUTPUTS,))
    src, out = kb.buffer(dt), kb.buffer(dt)
    g = kb.global_id(0)
    acc = kb.acc(_identity(op, dt), dt)
    with kb.range(0, LENGTH) as j:
        kb.assign(acc, kb.alu(op, acc, kb.load(src, kb.add(kb.mul(g, LENGTH), j))))
    kb.store(out, g, acc)
    return kb.build()


def _fold(op: Ops, dt: DType, x: np.ndarray) -> np.ndarray:
    """Left fold of the rows of ``x`` (outputs x length) with the IR's ``op`` on ``dt``, one rounding per step."""
    acc = np.full(x.shape[0], _identity(op, dt), dtype=dt.np)
    for j in range(x.shape[1]):
        acc = reference_alu(op, dt, acc, x[:, j])
    return acc


def _serial_case(op: Ops, dt: DType) -> KernelCase:
    kernel = _serial_kernel(op, dt)

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = V.floats(rng, dt, OUTPUTS * LENGTH, -10.0, 10.0, specials=op is not Ops.ADD) if dt.is_float \
            else V.ints(rng, dt, OUTPUTS * LENGTH)
        return [x, np.zeros(OUTPUTS, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        return {1: _fold(op, dt, arrays[0].reshape(OUTPUTS, LENGTH))}
    return KernelCase(kernel.name, kernel, inputs, reference, dt)


def serial_reduce_cases() -> list[KernelCase]:
    """Sum/max/min of rows of length 37, one thread per row, in several dtypes (ints wrap; floats exact order)."""
    return [_serial_case(op, dt) for op, dt in _SERIAL]


def _tree_kernel(dt: DType, groups: int) -> Kernel:
    """Each group of TREE_GROUP threads sums its TREE_GROUP elements by halving strides in local memory."""
    kb = KernelBuilder(f"tree_reduce_{dt.name}", (groups,), (TREE_GROUP,))
    src, out = kb.buffer(dt), kb.buffer(dt)
    shared = kb.local("partial", dt, TREE_GROUP)
    lid, grp = kb.special("local", 0), kb.special("group", 0)
    kb.store(shared, lid, kb.load(src, kb.add(kb.mul(grp, TREE_GROUP), lid)))
    kb.barrier()
    steps = TREE_GROUP.bit_length() - 1
    with kb.range(0, steps) as k:
        stride = kb.alu(Ops.SHR, kb.const(TREE_GROUP // 2, dtypes.int32), k)
        with kb.if_(kb.lt(lid, stride)):
            s = kb.add(kb.load(shared, lid), kb.load(shared, kb.add(lid, stride)))
            kb.store(shared, lid, s)
        kb.barrier()
    kb.store(out, grp, kb.load(shared, 0), gate=kb.lt(lid, 1))
    return kb.build()


def _tree(dt: DType, x: np.ndarray) -> np.ndarray:
    """The kernel's pairwise order: x[:, :s] += x[:, s:2s] for s = G/2 ... 1, rounding to ``dt`` each step."""
    x = x.copy()
    s = x.shape[1] // 2
    while s:
        x[:, :s] = reference_alu(Ops.ADD, dt, x[:, :s].ravel(), x[:, s:2 * s].ravel()).reshape(x.shape[0], s)
        s //= 2
    return x[:, 0]


def _tree_case(dt: DType, groups: int = 5) -> KernelCase:
    kernel = _tree_kernel(dt, groups)

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        x = V.floats(rng, dt, groups * TREE_GROUP, -10.0, 10.0) if dt.is_float else V.ints(rng, dt, groups * TREE_GROUP)
        return [x, np.zeros(groups, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        return {1: _tree(dt, arrays[0].reshape(groups, TREE_GROUP))}
    return KernelCase(kernel.name, kernel, inputs, reference, dt, needs_local=True)


def tree_reduce_cases() -> list[KernelCase]:
    """Shared-memory tree sums (float32, int32); need local memory and real group threads."""
    return [_tree_case(dtypes.float32), _tree_case(dtypes.int32)]
