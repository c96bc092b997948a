"""What the decoder produces and the scheduler runs: decoded instructions (``Op``) and their kinds.

Each Op has a ``kind`` the scheduler dispatches on (normal, branch, exit, barrier, trap), an optional guard predicate
and, for normal instructions, ``fn(ctx, idx)`` that executes it for the selected threads (``idx`` None = all threads of
the chunk). The family decoders (``decode_alu``, ``decode_data``, ``decode_sync``) raise :class:`DecodeError` for a
form they do not support; :func:`mock_gpu.ptx.decode.decode` turns it into a PTXError with the line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .operands import Reader

__all__ = ["BARRIER", "BRANCH", "EXIT", "NORMAL", "TRAP", "BarSpec", "DecodeError", "Op", "operand_count"]

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


class DecodeError(Exception):
    """An instruction form the interpreter does not support, or malformed operands; the message says which."""


def operand_count(ops: list, want: int, form: str) -> None:
    """DecodeError unless ``ops`` has ``want`` operands; ``form`` is the instruction's operand syntax."""
    if len(ops) != want:
        raise DecodeError(f"expected {want} operands ({form}), found {len(ops)}")
