"""Elementwise cases: every ALU op on every dtype the IR validator allows it on.

One kernel per dtype computes every op that applies to it, each op on its own input and output buffers, so a backend
compiles 13 kernels for ~200 (op, dtype) cases. Each case checks only its own op's output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from harness.kernels import values as V
from harness.kernels.case import KernelCase
from harness.kernels.semantics import reference_alu
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import BINARY, FLOAT_ONLY, INT_ONLY, TERNARY, Kernel, KernelBuilder, Ops

__all__ = ["ops_for", "operand_slots", "elementwise_cases", "N", "GROUP"]

N = 256     # elements per buffer
GROUP = 32  # threads per group (N // GROUP groups)

_ORDER = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN, Ops.NEG, Ops.CMPLT, Ops.CMPNE,
          Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.WHERE, Ops.FMA, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT,
          Ops.RECIP, Ops.TRUNC)


def ops_for(dt: DType) -> list[Ops]:
    """The ALU ops the IR validator accepts on operands of ``dt``, in a fixed order."""
    def ok(op: Ops) -> bool:
        if op in FLOAT_ONLY:
            return dt.is_float
        if op in INT_ONLY:
            return dt.is_int
        if op in (Ops.AND, Ops.OR, Ops.XOR):
            return not dt.is_float
        if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.MIN, Ops.NEG):
            return dt is not dtypes.bool
        return True  # comparisons and WHERE take every dtype
    return [op for op in _ORDER if ok(op)]


def _arity(op: Ops) -> int:
    return 3 if op in TERNARY else 2 if op in BINARY else 1


def _result(op: Ops, dt: DType) -> DType:
    return dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dt


@functools.cache
def _kernel(dt: DType) -> tuple[Kernel, dict[Ops, tuple[list[int], int]]]:
    """The fused kernel of ``dt`` and, per op, (input slots, output slot)."""
    kb = KernelBuilder(f"alu_{dt.name}", (N // GROUP,), (GROUP,))
    slots: dict[Ops, tuple[list[int], int]] = {}
    params = []
    for op in ops_for(dt):
        ins = [kb.buffer(dtypes.bool if (op is Ops.WHERE and k == 0) else dt) for k in range(_arity(op))]
        out = kb.buffer(_result(op, dt))
        params.append((op, ins, out))
        slots[op] = ([u.arg for u in ins], out.arg)
    i = kb.global_id(0)
    for op, ins, out in params:
        kb.store(out, i, kb.alu(op, *[kb.load(p, i) for p in ins]))
    return kb.build(), slots


def operand_slots(op: Ops, dt: DType) -> tuple[list[int], int]:
    """(input slots, output slot) of ``op`` in the fused kernel of ``dt``; ``KeyError`` if ``op`` does not apply."""
    return _kernel(dt)[1][op]


def _operands(op: Ops, dt: DType, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs of ``op`` on ``dt`` chosen so the op is defined (no division by zero, INT_MIN/-1, bad shift, log of <= 0)."""
    n = N
    if op is Ops.WHERE:
        return [V.bools(rng, n), V.values(rng, dt, n), V.values(rng, dt, n)]
    if dt.is_float:
        return _float_operands(op, dt, rng)
    if op in (Ops.IDIV, Ops.MOD):
        a, b = V.ints(rng, dt, n), V.ints(rng, dt, n)
        small = V.ints(rng, dt, n, 0 if dt.is_unsigned else -9, 9)
        b = np.where(rng.random(n) < 0.5, b, small).astype(dt.np)
        b[b == 0] = 1
        if not dt.is_unsigned:
            b[(a == dt.min) & (b == -1)] = 1
            a[:4], b[:4] = np.array([-7, 7, -7, dt.min], dtype=dt.np), np.array([2, -2, -2, 1], dtype=dt.np)
        return [a, b]
    if op in (Ops.SHL, Ops.SHR):
        return [V.ints(rng, dt, n), V.ints(rng, dt, n, 0, dt.bits - 1)]
    return [V.values(rng, dt, n) for _ in range(_arity(op))]


_FLOAT_RANGES: dict[Ops, tuple[float, float]] = {
    Ops.EXP2: (-10.0, 10.0), Ops.LOG2: (2.0**-6, 1000.0), Ops.SIN: (-8.0, 8.0), Ops.SQRT: (0.0, 1000.0),
    Ops.TRUNC: (-100.0, 100.0)}


def _float_operands(op: Ops, dt: DType, rng: np.random.Generator) -> list[np.ndarray]:
    n = N
    if op in _FLOAT_RANGES:
        return [V.floats(rng, dt, n, *_FLOAT_RANGES[op])]
    if op is Ops.RECIP:
        return [V.log_uniform(rng, dt, n, 0.01, 100.0)]
    if op is Ops.DIV:
        return [V.floats(rng, dt, n, -100.0, 100.0), V.log_uniform(rng, dt, n, 0.5, 50.0)]
    specials = op in (Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPNE, Ops.NEG)  # NaN and inf behaviour is defined and tested
    return [V.floats(rng, dt, n, -100.0, 100.0, specials=specials) for _ in range(_arity(op))]


def _inputs_fn(dt: DType) -> Callable[[np.random.Generator], list[np.ndarray]]:
    kernel, slots = _kernel(dt)

    def make(rng: np.random.Generator) -> list[np.ndarray]:
        arrays: list[np.ndarray | None] = [None] * len(kernel.buffers)
        for op, (ins, out) in slots.items():
            for s, a in zip(ins, _operands(op, dt, rng)):
                arrays[s] = a
            arrays[out] = np.zeros(N, dtype=_result(op, dt).np)
        return arrays  # type: ignore[return-value]
    return make


def _case(op: Ops, dt: DType) -> KernelCase:
    kernel, slots = _kernel(dt)
    ins, out = slots[op]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        return {out: reference_alu(op, dt, *[arrays[s] for s in ins])}
    return KernelCase(f"alu_{op.name.lower()}_{dt.name}", kernel, _inputs_fn(dt), reference, dt)


def elementwise_cases() -> list[KernelCase]:
    """One case per (ALU op, dtype) pair the validator accepts."""
    return [_case(op, dt) for dt in dtypes.all for op in ops_for(dt)]
