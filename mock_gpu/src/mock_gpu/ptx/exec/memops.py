"""Memory instructions: ld/ldu/st (PTX ISA 9.7.9.8-9.7.9.10), atom/red (9.7.13.5-9.7.13.6), per state space.

State spaces (PTX ISA 5.1): global and const live in the AddressSpace; shared is one byte array per block of the chunk;
local (including ``.param`` variables of inlined calls) one byte array per thread; kparam is the kernel parameter
buffer (read-only). Generic addresses select a space by window (see operands.GENERIC_WINDOWS). Every access is bounds-
and alignment-checked; a bad one raises MemoryFault whose ``position`` indexes the accessing threads.

Atomics are applied in thread order: for every address the operations happen one after the other in increasing
thread index, and each thread gets the value before its own operation. Integer add uses a segmented prefix sum; other
operations run in rounds (the k-th access of every address in round k) or per address, whichever loops less.
"""

from __future__ import annotations

import numpy as np

from ...address_space import MemoryFault, gather, scatter
from .. import alu
from ..ops import GENERIC_WINDOWS

__all__ = ["resolve_space", "load", "store", "atomic", "space_of_generic"]


def _fault(kind: str, addr: int, size: int, space: str, nearest: str, pos: int) -> MemoryFault:
    return MemoryFault(kind, addr, size, space, nearest, position=pos)


def _window_check(addrs: np.ndarray, size: int, align: int, limit: int, space: str, what: str) -> np.ndarray:
    """Offsets (int64) of window-relative addresses, checked against ``limit`` bytes and alignment."""
    bad = addrs > np.uint64(max(limit - size, 0)) if limit >= size else np.ones(addrs.size, bool)
    if bad.any():
        pos = int(np.argmax(bad))
        raise _fault("out-of-bounds", int(addrs[pos]), size, space, f"the {what} is {limit} bytes", pos)
    if align > 1:
        mis = (addrs & np.uint64(align - 1)) != 0
        if mis.any():
            pos = int(np.argmax(mis))
            raise _fault("misaligned", int(addrs[pos]), size, space, f"{size}-byte accesses must be {align}-byte "
                         "aligned", pos)
    return addrs.astype(np.int64)


def resolve_space(c, space: str, addrs: np.ndarray, size: int, idx: np.ndarray | None,
                  align: int | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """(buffer, byte offsets, positions) groups for ``addrs`` (np.uint64, one per selected thread) in ``space``."""
    if align is None:
        align = size if size & (size - 1) == 0 else 1
    if space == "global":
        return c.space.resolve(addrs, size, align)
    if space == "shared":
        offs = _window_check(addrs, size, align, c.shared_size, "shared",
                             f"block's shared memory ({c.static_shared} static + {c.dynamic_shared} dynamic)")
        blk = c.blk if idx is None else c.blk[idx]
        return [(c.shared, blk * c.shared_stride + offs, None)]
    if space == "local":
        offs = _window_check(addrs, size, align, c.local_size, "local", "thread's local memory")
        tid = np.arange(c.n, dtype=np.int64) if idx is None else idx.astype(np.int64)
        return [(c.local, tid * c.local_stride + offs, None)]
    if space == "kparam":
        return [(c.kparams, _window_check(addrs, size, align, c.param_bytes, "param", "kernel parameter buffer"),
                 None)]
    if space == "generic":
        return _resolve_generic(c, addrs, size, idx, align)
    raise ValueError(f"unknown state space {space!r}")


def space_of_generic(addrs: np.ndarray) -> np.ndarray:
    """Window number of each generic address: 1 shared, 2 local, 3 kparam, 0 global/other."""
    win = (addrs >> np.uint64(32)).astype(np.int64)
    return np.where((win >= 1) & (win <= 3), win, 0)


def _resolve_generic(c, addrs, size, idx, align):
    lo = int(addrs.min())
    if lo >= 4 << 32:
        return c.space.resolve(addrs, size, align)
    win = space_of_generic(addrs)
    out = []
    for w, space in ((0, "global"), (1, "shared"), (2, "local"), (3, "kparam")):
        pos = np.flatnonzero(win == w)
        if pos.size == 0:
            continue
        sub = addrs[pos] - np.uint64(GENERIC_WINDOWS[space] if w else 0)
        try:
            groups = resolve_space(c, space, sub, size, pos if idx is None else idx[pos], align)
        except MemoryFault as f:
            if f.position is not None:
                f.position = int(pos[f.position])
                f.address = int(addrs[f.position])
            raise
        for buf, offs, p in groups:
            out.append((buf, offs, pos if p is None else pos[p]))
    return out


def load(c, space: str, addrs: np.ndarray, dtype: np.dtype, count: int, idx) -> np.ndarray:
    """Gather ``count`` elements of ``dtype`` per thread; shape (n,) or (n, count).

    A uniform address (a broadcast view, e.g. of a kernel parameter) in a space whose contents every thread sees alike
    (kernel parameters, global memory) is read once and broadcast (read-only result).
    """
    if addrs.size > 1 and addrs.strides == (0,) and space in ("kparam", "global"):
        one = load(c, space, addrs[:1], dtype, count, None)
        return np.broadcast_to(one, (addrs.size, *one.shape[1:]))
    size = np.dtype(dtype).itemsize * count
    groups = resolve_space(c, space, addrs, size, idx)
    if len(groups) == 1 and groups[0][2] is None:
        return gather(groups[0][0], groups[0][1], dtype, count)
    out = np.empty((addrs.size,) if count == 1 else (addrs.size, count), dtype=dtype)
    for buf, offs, pos in groups:
        out[pos] = gather(buf, offs, dtype, count)
    return out


def store(c, space: str, addrs: np.ndarray, values: np.ndarray, idx) -> None:
    """Scatter values ((n,) or (n, count)); all accesses are checked before any is written."""
    count = 1 if values.ndim == 1 else values.shape[1]
    if space == "kparam":
        raise _fault("out-of-bounds", int(addrs[0]), values.dtype.itemsize * count, "param",
                     "kernel parameters are read-only", 0)
    groups = resolve_space(c, space, addrs, values.dtype.itemsize * count, idx)
    for buf, _, pos in groups:
        if buf is c.kparams:
            raise _fault("out-of-bounds", int(addrs[0 if pos is None else pos[0]]), values.dtype.itemsize,
                         "param", "kernel parameters are read-only", 0 if pos is None else int(pos[0]))
    for buf, offs, pos in groups:
        scatter(buf, offs, values if pos is None else values[pos])


# ----- atomics -----
_BF16_ADD = alu.AluSpec("add", "bf16", frozenset({"rn"}))
_UFUNC = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}


def atomic(c, space: str, addrs: np.ndarray, op: str, values: np.ndarray, compare: np.ndarray | None,
           idx) -> np.ndarray:
    """Apply atom/red ``op`` (add min max inc dec and or xor exch cas, and add.f16 / add.bf16 on 16-bit raw or
    float16 values) in thread order; returns the old values (same dtype as ``values``).

    ``values`` is b (the new value for exch/cas); ``compare`` is cas's compare operand. inc/dec follow PTX ISA
    9.7.13.5: inc stores (old >= b) ? 0 : old + 1; dec stores (old == 0 || old > b) ? b : old - 1 (unsigned).
    add.f16 rounds every addition to nearest (float16 arithmetic through float32 is correctly rounded: 24 >= 2*11+2
    bits); add.bf16 rounds each addition with the ALU's bf16 add.
    """
    if op == "add.f16":
        return atomic(c, space, addrs, "add", values.view(np.float16), None, idx).view(values.dtype)
    old = np.empty_like(values)
    for buf, offs, pos in resolve_space(c, space, addrs, values.dtype.itemsize, idx):
        view = buf.view(values.dtype)
        el = offs // values.dtype.itemsize
        sel = slice(None) if pos is None else pos
        old[sel] = _sequential(view, el, op, values[sel], None if compare is None else compare[sel])
    return old


def _sequential(view: np.ndarray, el: np.ndarray, op: str, v: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    order = np.argsort(el, kind="stable")
    es, vs = el[order], v[order]
    starts = np.flatnonzero(np.r_[True, es[1:] != es[:-1]])
    seg_len = np.diff(np.r_[starts, es.size])
    uniq = es[starts]
    seg = np.repeat(np.arange(starts.size), seg_len)
    cur = view[uniq].copy()
    olds = np.empty_like(vs)
    cs = None if cmp is None else cmp[order]
    if op == "add" and vs.dtype.kind in "iu":
        u = vs.view(np.dtype(f"u{vs.dtype.itemsize}"))
        incl = np.cumsum(u, dtype=u.dtype)
        before = np.r_[np.zeros(1, u.dtype), incl[:-1]]
        excl = before - before[starts][seg]
        olds = (cur.view(u.dtype)[seg] + excl).view(vs.dtype)
        view[uniq] = (cur.view(u.dtype) + (incl[starts + seg_len - 1] - before[starts])).view(vs.dtype)
    elif op == "exch":
        prev = np.r_[vs[:1], vs[:-1]]
        is_start = np.zeros(es.size, bool)
        is_start[starts] = True
        olds = np.where(is_start, cur[seg], prev)
        view[uniq] = vs[starts + seg_len - 1]
    elif int(seg_len.max()) <= starts.size or op not in _UFUNC:
        rank = np.arange(es.size) - starts[seg]
        for r in range(int(seg_len.max())):
            at = np.flatnonzero(rank == r)
            s = seg[at]
            olds[at] = cur[s]
            cur[s] = _apply(op, cur[s], vs[at], None if cs is None else cs[at])
        view[uniq] = cur
    else:
        uf = _UFUNC[op]
        for k in range(starts.size):
            a, b = starts[k], starts[k] + seg_len[k]
            acc = uf.accumulate(np.r_[cur[k:k + 1], vs[a:b]].astype(vs.dtype))
            olds[a:b] = acc[:-1]
            cur[k] = acc[-1]
        view[uniq] = cur
    out = np.empty_like(olds)
    out[order] = olds
    return out


def _apply(op: str, old: np.ndarray, b: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    if op == "add.bf16":
        return np.asarray(alu.execute(_BF16_ADD, old, b))
    if op in _UFUNC:
        return _UFUNC[op](old, b).astype(old.dtype)
    if op == "inc":
        return np.where(old >= b, 0, old + 1).astype(old.dtype)
    if op == "dec":
        return np.where((old == 0) | (old > b), b, old - 1).astype(old.dtype)
    if op == "cas":
        return np.where(old == cmp, b, old).astype(old.dtype)
    raise ValueError(f"unknown atomic operation {op!r}")

