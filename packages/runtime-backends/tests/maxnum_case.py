"""One MAX/MIN kernel and its inputs, run on every backend against the PYTHON backend's reference interpreter: the IR
defines float MAX/MIN as IEEE 754-2008 maxNum/minNum (a NaN operand loses to a number), the sign of a zero result
unspecified."""

from __future__ import annotations

import math

import numpy as np

from runtime_core.dtype import DType
from runtime_core.ir import Kernel, KernelBuilder, Ops

_PAIRS = [(math.nan, 4.0), (1.0, math.nan), (math.nan, math.nan), (-2.0, -3.0), (math.inf, math.nan),
          (math.nan, -math.inf), (-math.inf, 5.0), (0.5, 0.5), (3.0, 3.25), (-1e-3, 7.0), (0.0, -0.0), (-0.0, 0.0),
          (2.0, math.inf), (-1.5, -1.5)]
N = 16


def maxmin_kernel(dt: DType) -> Kernel:
    """``mx[i] = MAX(a[i], b[i])``, ``mn[i] = MIN(a[i], b[i])``; buffers ``(a, b, mx, mn)``, one group of ``N``."""
    kb = KernelBuilder(f"maxmin_{dt.name}", (1,), (N,))
    a, b, mx, mn = (kb.buffer(dt) for _ in range(4))
    i = kb.global_id(0)
    x, y = kb.load(a, i), kb.load(b, i)
    kb.store(mx, i, kb.alu(Ops.MAX, x, y))
    kb.store(mn, i, kb.alu(Ops.MIN, x, y))
    return kb.build()


def maxmin_inputs(dt: DType) -> tuple[np.ndarray, np.ndarray]:
    """Operands with NaNs, infinities, signed zeros and ties, padded to ``N`` with ordinary numbers."""
    pairs = _PAIRS + [(float(k), float(-k)) for k in range(N - len(_PAIRS))]
    a, b = (np.array(col, np.float64).astype(dt.np) for col in zip(*pairs))
    return a, b


def assert_maxnum(got: np.ndarray, want: np.ndarray) -> None:
    """Equal as numbers (a NaN equals a NaN, -0 equals +0: the IR leaves a zero result's sign open)."""
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
