"""Decoding of synchronization and communication instructions (PTX ISA 9.7.13): atom/red, bar/barrier, and the
warp-level shfl, vote, redux and match (9.7.9.6 shfl, 9.7.13.7-9.7.13.10)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..exec import memops, warp
from ..linker import LInstr
from ..ops import BARRIER, NORMAL, BarSpec, Op
from ..parse.syntax import Pair
from ..types import WIDTH
from .data import address, state_space
from .modifiers import CACHE_HINT
from .operands import DecodeError, operand_count, reader, writer

__all__ = ["atom", "barrier", "match", "redux", "shfl", "vote"]

_ATOM_OPS = {"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"}
_HALF_ATOMS = {"f16": "f16", "bf16": "bf16", "f16x2": "f16", "bf16x2": "bf16"}


def _atom_type(op: str, t: str, mods: set[str]) -> str:
    """The operand type of atom/red ``op`` on ``t`` (PTX ISA 9.7.13.5 atom: which types each operation takes)."""
    if any(m in mods for m in ("v2", "v4", "v8")):
        raise DecodeError("vector atomics are not supported")
    if t in _HALF_ATOMS:
        if op != "add" or "noftz" not in mods:
            raise DecodeError(f"atom/red on .{t} is supported for .add.noftz only")
        return t
    if "noftz" in mods:
        raise DecodeError(".noftz applies to .f16/.bf16/.f16x2/.bf16x2 atomics only")
    if WIDTH[t] == 16:
        if op != "cas" or t != "b16":
            raise DecodeError("16-bit atomics other than atom.cas.b16 are not defined")
        return t
    if WIDTH[t] not in (32, 64):
        raise DecodeError(f"atomics on .{t} are not defined")
    if t[0] == "f" and op not in ("add", "exch", "min", "max"):
        raise DecodeError(f"atom.{op} is not defined for .{t}")
    if op in ("inc", "dec") and t != "u32":
        raise DecodeError(f"atom.{op} is defined for .u32 only")
    if op in ("and", "or", "xor", "exch", "cas") and t[0] != "f":
        return f"b{WIDTH[t]}"
    return t


def atom(base, types, mods, ops, rt) -> Callable:
    """atom/red{.sem}{.scope}{.space}.op{.noftz}{.L2::cache_hint}.type (PTX ISA 9.7.13.5/9.7.13.6)."""
    space = state_space((base, *mods))
    aop = [m for m in mods if m in _ATOM_OPS]
    if len(aop) != 1 or len(types) != 1:
        raise DecodeError("atom/red need one operation and one type")
    op = aop[0]
    if base == "red" and op in ("exch", "cas"):
        raise DecodeError(f"red.{op} does not exist; use atom")
    t = _atom_type(op, types[0], mods)
    hint = CACHE_HINT in mods
    want = (2 if base == "red" else 4 if op == "cas" else 3) + hint
    operand_count(ops, want, "atom d, [a], b{, c}" if base == "atom" else "red [a], b")
    if hint:
        reader(ops[-1], "b64", rt)
    apply = _half_atomic if t in _HALF_ATOMS else memops.atomic
    if base == "red":
        eff, addr = address(ops[0], space, rt)
        b = reader(ops[1], t, rt)

        def run_red(c, i):
            n = c.n if i is None else i.size
            apply(c, eff, addr(c, i, n), op if t not in _HALF_ATOMS else t, b(c, i, n), None, i)
        return run_red
    d = writer(ops[0], t, rt)
    eff, addr = address(ops[1], space, rt)
    b = reader(ops[2], t, rt)
    new = reader(ops[3], t, rt) if op == "cas" else None

    def run_atom(c, i):
        n = c.n if i is None else i.size
        if new is not None:
            d(c, i, memops.atomic(c, eff, addr(c, i, n), op, new(c, i, n), b(c, i, n), i))
        else:
            d(c, i, apply(c, eff, addr(c, i, n), op if t not in _HALF_ATOMS else t, b(c, i, n), None, i))
    return run_atom


def _half_atomic(c, eff: str, addrs: np.ndarray, t: str, values: np.ndarray, _cmp, i) -> np.ndarray:
    """atom.add.noftz on .f16/.bf16 (one 16-bit value) or .f16x2/.bf16x2 (two independent 16-bit halves of a 32-bit
    word, each added with its own rounding): returns the old values in the storage dtype of ``t``."""
    half = _HALF_ATOMS[t]
    if t == half:
        return memops.atomic(c, eff, addrs, f"add.{half}", values, None, i)
    memops.resolve_space(c, eff, addrs, 4, i)  # the packed word must be 4-byte aligned and in bounds
    bits = values.view(np.uint32)
    olds = [memops.atomic(c, eff, addrs + np.uint64(2 * k), f"add.{half}",
                          ((bits >> np.uint32(16 * k)) & np.uint32(0xFFFF)).astype(np.uint16), None, i)
             for k in (0, 1)]
    return olds[0].astype(np.uint32) | (olds[1].astype(np.uint32) << np.uint32(16))


def shfl(types, mods, ops, rt) -> Callable:
    mode = next((m for m in mods if m in ("up", "down", "bfly", "idx")), None)
    if mode is None or types != ["b32"]:
        raise DecodeError("shfl needs a mode (up/down/bfly/idx) and .b32")
    first = ops[0]
    p = writer(first.second, "pred", rt) if isinstance(first, Pair) else None
    d = writer(first.first if isinstance(first, Pair) else first, "b32", rt)
    mask = reader(ops[4], "b32", rt) if len(ops) > 4 else None
    return warp.shfl(mode, d, p, reader(ops[1], "b32", rt), reader(ops[2], "b32", rt), reader(ops[3], "b32", rt),
                     mask)


def vote(types, mods, ops, rt) -> Callable:
    mode = next((m for m in mods if m in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        raise DecodeError("vote needs a mode")
    mask = reader(ops[2], "b32", rt) if len(ops) > 2 else None
    d = writer(ops[0], "b32" if mode == "ballot" else "pred", rt)
    return warp.vote(mode, d, reader(ops[1], "pred", rt), mask)


def redux(types, mods, ops, rt) -> Callable:
    """redux.sync.op.type d, a, membermask (PTX ISA 9.7.13.10)."""
    op = next(m for m in mods if m in warp._REDUX)
    if types[0] not in (("b32",) if op in ("and", "or", "xor") else ("u32", "s32")):
        raise DecodeError(f"redux.sync.{op} is defined for {'.b32' if op in ('and', 'or', 'xor') else '.u32/.s32'}")
    mask = reader(ops[2], "b32", rt) if len(ops) > 2 else None
    return warp.redux(op, writer(ops[0], types[0], rt), reader(ops[1], types[0], rt), mask)


def match(types, mods, ops, rt) -> Callable:
    """match.any/all.sync.type d{|p}, a, membermask (PTX ISA 9.7.13.9)."""
    mode = "any" if "any" in mods else "all"
    first = ops[0]
    p = writer(first.second, "pred", rt) if isinstance(first, Pair) else None
    d = writer(first.first if isinstance(first, Pair) else first, "b32", rt)
    return warp.match(mode, d, p, reader(ops[1], types[0], rt), reader(ops[2], "b32", rt))


def barrier(li: LInstr, rt, text: str) -> Op:
    """bar{.cta}.sync/arrive/red, barrier{.cta}.sync/arrive/red{.aligned} (PTX ISA 9.7.13.1); bar.warp.sync."""
    parts = set(li.op[1:])
    ops = li.operands
    if "warp" in parts:
        return Op(NORMAL, lambda c, i: None, li.guard, li.line, text)
    if "cluster" in parts:
        raise DecodeError("cluster barriers are not supported")
    aligned = li.op[0] == "bar" or "aligned" in parts
    if "red" in parts:
        red = next(m for m in ("popc", "and", "or") if m in parts)
        dst_t = "u32" if red == "popc" else "pred"
        count = reader(ops[2], "u32", rt) if len(ops) == 4 else None
        spec = BarSpec(reader(ops[1], "u32", rt), count, aligned, False, red, writer(ops[0], dst_t, rt),
                       reader(ops[-1], "pred", rt))
        return Op(BARRIER, None, li.guard, li.line, text, bar=spec)
    if not ({"sync", "arrive"} & parts) and li.op[0] == "barrier" and len(li.op) > 1 and "aligned" not in parts:
        raise DecodeError("unknown barrier form")
    count = reader(ops[1], "u32", rt) if len(ops) > 1 else None
    spec = BarSpec(reader(ops[0], "u32", rt), count, aligned, "arrive" in parts)
    return Op(BARRIER, None, li.guard, li.line, text, bar=spec)
