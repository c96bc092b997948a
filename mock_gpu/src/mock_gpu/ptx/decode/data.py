"""Decoding of data movement instructions (PTX ISA 9.7.9): mov, cvta, isspacep, ld/ldu/st and cp.async, with the
memory operand and state space helpers the atomics share."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...address_space import MemoryFault
from ..exec import memops
from ..linker import Loc
from ..ops import GENERIC_WINDOWS
from ..parse.syntax import Addr, Imm, Vec
from ..types import RAW, STORAGE, WIDTH
from .modifiers import CACHE_HINT
from .operands import DecodeError, operand_count, reader, uniform, writer

__all__ = ["SPACES", "address", "cp_async", "cvta", "is_pred", "isspacep", "ldst", "mov", "state_space"]

SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared", "local": "local", "const": "const",
           "param": "param", "param::entry": "param", "param::func": "param"}


def mov(types, ops, rt) -> Callable:
    t = types[0]
    d, a = ops
    if isinstance(a, Vec):
        return _pack(t, d, a, rt)
    if isinstance(d, Vec):
        return _unpack(t, d, a, rt)
    r = reader(a, t, rt)
    w = writer(d, t, rt)
    return lambda c, i: w(c, i, r(c, i, c.n if i is None else i.size))


def _pack(t, d, vec, rt) -> Callable:
    k = len(vec.items)
    part = WIDTH[t] // k
    pt = f"b{part}"
    items = [reader(x, pt, rt) for x in vec.items]
    w = writer(d, f"b{WIDTH[t]}", rt)
    out_dt = RAW[WIDTH[t]]

    def run(c, i):
        n = c.n if i is None else i.size
        acc = np.zeros(n, out_dt)
        for j, r in enumerate(items):
            acc |= r(c, i, n).astype(out_dt) << out_dt(j * part)
        w(c, i, acc)
    return run


def _unpack(t, vec, a, rt) -> Callable:
    k = len(vec.items)
    part = WIDTH[t] // k
    src = reader(a, f"b{WIDTH[t]}", rt)
    outs = [writer(x, f"b{part}", rt) for x in vec.items]
    src_dt = RAW[WIDTH[t]]
    part_dt = RAW[part]
    mask = src_dt((1 << part) - 1)

    def run(c, i):
        n = c.n if i is None else i.size
        v = src(c, i, n)
        for j, w in enumerate(outs):
            w(c, i, ((v >> src_dt(j * part)) & mask).astype(part_dt))
    return run


def cvta(op, types, ops, rt) -> Callable:
    """cvta.space / cvta.to.space (PTX ISA 9.7.9.17): add or remove the space's generic window base."""
    to = "to" in op
    space = next((m for m in op[1:] if m in SPACES), None)
    if space is None:
        raise DecodeError("cvta needs a state space")
    t = types[0]
    w = WIDTH[t]
    base = {"shared": GENERIC_WINDOWS["shared"], "local": GENERIC_WINDOWS["local"],
            "param": GENERIC_WINDOWS["kparam"]}.get(space, 0)
    r = reader(ops[1], t, rt)
    dst = writer(ops[0], t, rt)
    dt = RAW[w]
    delta = dt((-base if to else base) & ((1 << w) - 1))

    def run(c, i):
        v = r(c, i, c.n if i is None else i.size).view(dt)
        dst(c, i, (v + delta).view(STORAGE[t]))
    return run


def isspacep(space, ops, rt) -> Callable:
    r = reader(ops[1], "u64", rt)
    w = writer(ops[0], "pred", rt)
    win = {"shared": 1, "local": 2, "param": 3}.get(space, 0)

    def run(c, i):
        v = r(c, i, c.n if i is None else i.size)
        got = memops.space_of_generic(v)
        w(c, i, got == win if win else (got == 0) & (v >= np.uint64(1 << 40)))
    return run


def address(o: Addr, space: str | None, rt) -> tuple[str, Callable]:
    """(effective space, address closure) of a memory operand for an instruction of state space ``space``."""
    if not isinstance(o, Addr):
        raise DecodeError("memory operand must be [address]")
    off = o.offset
    base = o.base
    if isinstance(base, Loc):
        eff = {"kparam": "kparam", "local": "local", "shared": "shared", "global": "global"}[base.space]
        if space is None and eff != "global":
            return "generic", uniform(np.array(base.offset + off + GENERIC_WINDOWS[eff], np.uint64))
        if eff == "global":
            name, total = base.name, base.offset + off
            return "global", lambda c, i, n: np.broadcast_to(np.array(c.symaddr[name] + total, np.uint64), (n,))
        return eff, uniform(np.array(base.offset + off, np.uint64))
    eff = {"global": "global", "const": "global", "shared": "shared", "local": "local", "param": "kparam",
           None: "generic"}[space]
    if base is None:
        return eff, uniform(np.array(off & ((1 << 64) - 1), np.uint64))
    r = reader(base, "u64", rt)
    if off == 0:
        return eff, r
    delta = np.uint64(off & ((1 << 64) - 1))
    return eff, lambda c, i, n: r(c, i, n) + delta


def state_space(op: tuple[str, ...]) -> str | None:
    """The state space named by an instruction's modifiers (None: generic addressing)."""
    if "shared::cluster" in op:
        raise DecodeError("the .shared::cluster space (distributed shared memory) is not emulated")
    found = [SPACES[m] for m in op[1:] if m in SPACES]
    if len(found) > 1:
        raise DecodeError(f"more than one state space: {found}")
    return found[0] if found else None


def _vector(mods: set[str]) -> int:
    vec = [int(m[1:]) for m in mods if m in ("v2", "v4", "v8")]
    if len(vec) > 1:
        raise DecodeError("more than one vector modifier")
    return vec[0] if vec else 1


def ldst(base, op, types, mods, ops, rt) -> Callable:
    """ld/ldu/st{.space}{.cache ops}{.L2::cache_hint}{.vN}.type (PTX ISA 9.7.9.8-9.7.9.10); the cache policy operand
    of .L2::cache_hint is read and ignored."""
    space = state_space(op)
    if base == "ldu" and space is None:
        space = "global"
    vec = _vector(mods)
    if len(types) != 1:
        raise DecodeError("ld/st need exactly one type")
    hint = CACHE_HINT in mods
    operand_count(ops, 3 if hint else 2, f"{base} {'[a], b' if base == 'st' else 'd, [a]'}"
                   + (", cache-policy" if hint else ""))
    if hint:
        reader(ops[2], "b64", rt)
    t = types[0]
    dt = np.dtype(STORAGE[t])
    if base == "st":
        eff, addr = address(ops[0], space, rt)
        vals = ops[1].items if isinstance(ops[1], Vec) else (ops[1],)
        if len(vals) != vec:
            raise DecodeError(f"expected {vec} source values")
        rs = [reader(v, t, rt) for v in vals]

        def run_st(c, i):
            n = c.n if i is None else i.size
            a = addr(c, i, n)
            v = rs[0](c, i, n) if vec == 1 else np.stack([r(c, i, n) for r in rs], axis=1)
            memops.store(c, eff, a, v, i)
        return run_st
    eff, addr = address(ops[1], space, rt)
    dsts = ops[0].items if isinstance(ops[0], Vec) else (ops[0],)
    if len(dsts) != vec:
        raise DecodeError(f"expected {vec} destinations")
    ws = [writer(d, t, rt) for d in dsts]

    def run_ld(c, i):
        n = c.n if i is None else i.size
        v = memops.load(c, eff, addr(c, i, n), dt, vec, i)
        if vec == 1:
            ws[0](c, i, v)
        else:
            for j, w in enumerate(ws):
                w(c, i, np.ascontiguousarray(v[:, j]))
    return run_ld


def cp_async(op, mods, ops, rt) -> Callable:
    """cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy} and
    cp.async.commit_group / wait_group N / wait_all (PTX ISA 9.7.9.25). The copy happens immediately, so every wait
    is already satisfied; bytes past src-size (all of them when ignore-src is true) are zero-filled."""
    if "bulk" in op or "mbarrier" in op:
        raise DecodeError("cp.async.bulk and cp.async.mbarrier forms (TMA, mbarrier) are not emulated")
    if mods & {"commit_group", "wait_group", "wait_all"}:
        if len(mods) != 2 or "async" not in mods:
            raise DecodeError("expected cp.async.commit_group, cp.async.wait_group N or cp.async.wait_all")
        operand_count(ops, 1 if "wait_group" in mods else 0, "group count" if "wait_group" in mods else "none")
        return lambda c, i: None
    if "async" not in mods or len(mods & {"ca", "cg"}) != 1 or "global" not in mods or \
            state_space(tuple(m for m in op if m != "global")) != "shared":
        raise DecodeError("expected cp.async.{ca,cg}.shared{::cta}.global")
    hint = CACHE_HINT in mods
    if len(ops) - hint not in (3, 4):
        raise DecodeError("expected [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy}")
    if hint:
        reader(ops[-1], "b64", rt)
    size = ops[2].value if isinstance(ops[2], Imm) else None
    if size not in ((16,) if "cg" in mods else (4, 8, 16)):
        raise DecodeError(f"cp-size must be an immediate {'16' if 'cg' in mods else '4, 8 or 16'}, got {ops[2]!r}")
    _, dst = address(ops[0], "shared", rt)
    _, src = address(ops[1], "global", rt)
    extra = ops[3] if len(ops) - hint == 4 else None
    ignore = reader(extra, "pred", rt) if extra is not None and is_pred(extra, rt) else None
    src_size = reader(extra, "u32", rt) if extra is not None and ignore is None else None

    def run(c, i):
        n = c.n if i is None else i.size
        keep = np.full(n, size, np.int64)
        if src_size is not None:
            keep = np.minimum(src_size(c, i, n).astype(np.int64), size)
        if ignore is not None:
            keep = np.where(ignore(c, i, n), 0, size)
        data = np.zeros((n, size), np.uint8)
        if (keep == size).all():
            data = memops.load(c, "global", src(c, i, n), np.dtype(np.uint8), size, i)
        else:
            a = src(c, i, n)
            for k in range(size):
                sel = np.flatnonzero(keep > k)
                try:
                    data[sel, k] = memops.load(c, "global", a[sel] + np.uint64(k), np.dtype(np.uint8), 1, None)
                except MemoryFault as f:
                    f.position = None if f.position is None else int(sel[f.position])
                    raise
        memops.store(c, "shared", dst(c, i, n), data, i)
    return run


def is_pred(o, rt) -> bool:
    reg = getattr(o, "reg", o)
    return hasattr(reg, "id") and rt[reg.id] == "pred"
