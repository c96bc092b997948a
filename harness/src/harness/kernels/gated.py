"""Masked tails and int var parameters: n elements processed by launches padded to a whole number of groups.

Gated loads must yield their ``alt`` without touching memory past the end of a buffer, gated stores (and stores inside
an IF) must leave the padding of an output untouched; ``n`` arrives either as a compile-time constant or as a VAR.
"""

from __future__ import annotations

import numpy as np

from harness.kernels import values as V
from harness.kernels.case import KernelCase
from harness.kernels.semantics import reference_alu, wrap
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import KernelBuilder, Ops

__all__ = ["gated_cases", "var_cases", "COUNT", "GROUP", "PADDED"]

COUNT = 100  # valid elements, not a multiple of GROUP
GROUP = 32
PADDED = 128  # threads launched: 4 groups
_SENTINEL = 7
_ALT = -3


def _gated_copy(dt: DType) -> KernelCase:
    """out[i] = in[i] (gated store, i < n); seen[i] = in[i] if i < n else ALT (gated load, ungated store)."""
    kb = KernelBuilder(f"gated_copy_{dt.name}", (PADDED // GROUP,), (GROUP,))
    src, out, seen = kb.buffer(dt), kb.buffer(dt), kb.buffer(dt)
    i = kb.global_id(0)
    ok = kb.lt(i, COUNT)
    x = kb.load(src, i, gate=ok, alt=_ALT)
    kb.store(out, i, x, gate=ok)
    kb.store(seen, i, x)
    kernel = kb.build()

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        return [V.values(rng, dt, COUNT), np.full(COUNT, _SENTINEL, dtype=dt.np), np.zeros(PADDED, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        tail = np.full(PADDED - COUNT, _ALT, dtype=dt.np)
        return {1: arrays[0].copy(), 2: np.concatenate([arrays[0], tail])}
    return KernelCase(kernel.name, kernel, inputs, reference, dt)


def _if_block() -> KernelCase:
    """Inside ``if (i < n)``: out[i] = a[i] * 3; the padding of ``out`` keeps its sentinel."""
    dt = dtypes.int32
    kb = KernelBuilder("if_block_int32", (PADDED // GROUP,), (GROUP,))
    a, out = kb.buffer(dt), kb.buffer(dt)
    i = kb.global_id(0)
    with kb.if_(kb.lt(i, COUNT)):
        kb.store(out, i, kb.mul(kb.load(a, i), 3))
    kernel = kb.build()

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        return [V.ints(rng, dt, COUNT), np.full(PADDED, _SENTINEL, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        body = wrap(arrays[0].astype(object) * 3, dt)
        return {1: np.concatenate([body, arrays[1][COUNT:]])}
    return KernelCase(kernel.name, kernel, inputs, reference, dt)


def gated_cases() -> list[KernelCase]:
    return [_gated_copy(dtypes.float32), _gated_copy(dtypes.int8), _gated_copy(dtypes.float16), _if_block()]


def _var_axpb() -> KernelCase:
    """out[i] = a[i] * 2.5 + float(n) for i < n, n a VAR; the padding keeps its sentinel."""
    dt = dtypes.float32
    kb = KernelBuilder("var_axpb_float32", (PADDED // GROUP,), (GROUP,))
    a, out = kb.buffer(dt), kb.buffer(dt)
    n = kb.var("n")
    i = kb.global_id(0)
    ok = kb.lt(i, n)
    y = kb.add(kb.mul(kb.load(a, i, gate=ok), 2.5), kb.cast(n, dt))
    kb.store(out, i, y, gate=ok)
    kernel = kb.build()

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        return [V.floats(rng, dt, PADDED, -100.0, 100.0), np.full(PADDED, _SENTINEL, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        a, out = arrays[0], arrays[1].copy()
        prod = reference_alu(Ops.MUL, dt, a[:COUNT], np.full(COUNT, 2.5, dtype=dt.np))
        out[:COUNT] = reference_alu(Ops.ADD, dt, prod, np.full(COUNT, COUNT, dtype=dt.np))
        return {1: out}
    return KernelCase(kernel.name, kernel, inputs, reference, dt, vals=(COUNT,))


def _var_loop() -> KernelCase:
    """out[g] = sum of the first n elements of row g (row length PADDED), n a VAR bounding a RANGE; int64 wraps."""
    dt, rows = dtypes.int64, 3
    kb = KernelBuilder("var_loop_sum_int64", (rows,))
    a, out = kb.buffer(dt), kb.buffer(dt)
    n = kb.var("n")
    g = kb.global_id(0)
    acc = kb.acc(0, dt)
    with kb.range(0, n) as j:
        kb.assign(acc, kb.add(acc, kb.load(a, kb.add(kb.mul(g, PADDED), j))))
    kb.store(out, g, acc)
    kernel = kb.build()

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        return [V.ints(rng, dt, rows * PADDED), np.zeros(rows, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        x = arrays[0].reshape(rows, PADDED)[:, :COUNT].astype(object)
        return {1: wrap(x.sum(axis=1), dt)}
    return KernelCase(kernel.name, kernel, inputs, reference, dt, vals=(COUNT,))


def var_cases() -> list[KernelCase]:
    return [_var_axpb(), _var_loop()]
