"""Decoding of the warp-level matrix multiply-accumulate ``mma`` (PTX ISA 9.7.14.5.14): the forms tinygrad's CUDA
renderer and CUTLASS-style kernels emit for f16/bf16 tensor cores, ``mma.sync.aligned.m16n8k{8,16}.row.col`` with
f16 or f32 accumulators (bf16 inputs: m16n8k16 or m16n8k8 with f32 accumulators). Other shapes and types (m8n8k4,
tf32, fp8, integer, sparse and block-scaled forms) are refused at load time with a message naming the form."""

from __future__ import annotations

from collections.abc import Callable

from ..exec import mma as exec_mma
from ..parse.syntax import Vec
from .operands import DecodeError, reader, writer

__all__ = ["mma"]


def _registers(o: object, count: int, what: str) -> tuple:
    if not isinstance(o, Vec) or len(o.items) != count:
        raise DecodeError(f"mma operand {what} must be a brace list of {count} registers")
    return o.items


def mma(li_op: tuple[str, ...], types: list[str], mods: set[str], ops: list, rt: list[str]) -> Callable:
    """``mma.sync.aligned.shape.row.col.dtype.atype.btype.ctype d, a, b, c``; DecodeError for a form not emulated."""
    form = ".".join(li_op)
    shapes = [m for m in mods if m.startswith("m") and m[1:2].isdigit()]
    if not {"sync", "aligned"} <= mods or len(shapes) != 1:
        raise DecodeError(f"{form}: mma needs .sync.aligned and one shape")
    if shapes[0] not in exec_mma.SHAPES:
        raise DecodeError(f"{form}: shape .{shapes[0]} is not emulated (emulated: m16n8k8, m16n8k16)")
    if not {"row", "col"} <= mods or li_op.index("row") > li_op.index("col"):
        raise DecodeError(f"{form}: m16n8k8/m16n8k16 take the .row.col layouts only")
    if len(types) != 4 or types[1] != types[2] or types[1] not in ("f16", "bf16") \
            or any(t not in ("f16", "f32") for t in (types[0], types[3])) \
            or (types[1] == "bf16" and types[0] + types[3] != "f32f32"):
        raise DecodeError(f"{form}: types .{'.'.join(types)} are not emulated (emulated: .f16/.f32 accumulators with "
                          ".f16 inputs, .f32.bf16.bf16.f32)")
    if len(ops) != 4:
        raise DecodeError(f"{form}: expected 4 operands (d, a, b, c), found {len(ops)}")
    k = exec_mma.SHAPES[shapes[0]]
    d_type, c_type = types[0], types[3]
    n_acc = 4 if d_type == "f32" else 2
    d = [writer(o, "f32" if d_type == "f32" else "b32", rt) for o in _registers(ops[0], n_acc, "d")]
    a = [reader(o, "b32", rt) for o in _registers(ops[1], k // 4, "a")]
    b = [reader(o, "b32", rt) for o in _registers(ops[2], k // 8, "b")]
    cc = [reader(o, "f32" if c_type == "f32" else "b32", rt)
          for o in _registers(ops[3], 4 if c_type == "f32" else 2, "c")]
    return exec_mma.mma(k, types[1], d_type, c_type, d, a, b, cc)
