"""Data movement: transpose of a non-square matrix with a 2-D launch."""

from __future__ import annotations

import numpy as np

from harness.kernels import values as V
from harness.kernels.case import KernelCase
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import KernelBuilder

__all__ = ["transpose_cases", "ROWS", "COLS"]

ROWS, COLS = 13, 7


def _transpose_case(dt: DType) -> KernelCase:
    """out[COLS, ROWS] = in[ROWS, COLS].T, thread (x=col, y=row)."""
    kb = KernelBuilder(f"transpose_{dt.name}", (COLS, ROWS))
    src, out = kb.buffer(dt), kb.buffer(dt)
    col, row = kb.global_id(0), kb.global_id(1)
    kb.store(out, kb.add(kb.mul(col, ROWS), row), kb.load(src, kb.add(kb.mul(row, COLS), col)))
    kernel = kb.build()

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        return [V.values(rng, dt, ROWS * COLS), np.zeros(ROWS * COLS, dtype=dt.np)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        return {1: arrays[0].reshape(ROWS, COLS).T.ravel()}
    return KernelCase(kernel.name, kernel, inputs, reference, dt)


def transpose_cases() -> list[KernelCase]:
    return [_transpose_case(dt) for dt in (dtypes.float32, dtypes.uint8, dtypes.float16, dtypes.int64)]
