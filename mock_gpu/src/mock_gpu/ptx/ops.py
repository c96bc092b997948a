"""The interface between the decoder and the engine: decoded instructions (``Op``), their kinds, operand closures.

Each Op has a ``kind`` the scheduler dispatches on (normal, branch, exit, barrier, trap), an optional guard predicate
and, for normal instructions, ``fn(ctx, idx)`` that executes it for the selected threads (``idx`` None = all threads of
the chunk). Operands are read and written by closures (``Reader``, ``Writer``; see :mod:`mock_gpu.ptx.decode.operands`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["BARRIER", "BRANCH", "EXIT", "GENERIC_WINDOWS", "NORMAL", "TRAP", "BarSpec", "Op", "Reader", "Writer"]

Reader = Callable[..., np.ndarray]
Writer = Callable[..., None]

# Generic-address windows (PTX ISA 6.4.1 generic addressing): shared, local and kernel-param windows sit below the
# global allocations (which start at 1 << 40), each 4 GiB wide.
GENERIC_WINDOWS = {"shared": 1 << 32, "local": 2 << 32, "kparam": 3 << 32}

NORMAL, BRANCH, EXIT, BARRIER, TRAP = range(5)


@dataclass
class BarSpec:
    """bar/barrier operands: barrier id, optional thread count, .aligned, arrive-only, bar.red operation."""

    barrier: Reader
    count: Reader | None
    aligned: bool
    arrive: bool
    red: str | None = None
    red_dst: Callable | None = None
    red_pred: Reader | None = None


@dataclass
class Op:
    """One decoded instruction."""

    kind: int
    fn: Callable | None
    guard: tuple[int, bool] | None
    line: int
    text: str
    target: int = -1
    bar: BarSpec | None = None

