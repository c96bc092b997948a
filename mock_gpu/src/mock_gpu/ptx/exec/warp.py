"""Warp-level instructions: shfl.sync (PTX ISA 9.7.8.6), vote.sync (9.7.8.9), activemask (9.7.8.11),
redux.sync (9.7.8.12) and match.sync (9.7.8.10).

A warp is 32 consecutive linear thread ids of a block. The threads taking part are those of the executing group
(threads at the same pc) that belong to the warp and to ``membermask``. shfl reads the source lane's register even if
that lane is not in the group (hardware leaves this undefined; reading the register keeps results deterministic).
"""

from __future__ import annotations

import numpy as np

from ..ops import Reader, Writer

__all__ = ["shfl", "vote", "activemask", "redux", "match"]


def _sel(arr: np.ndarray, idx):
    return arr if idx is None else arr[idx]


def _threads(c, idx) -> np.ndarray:
    return np.arange(c.n) if idx is None else idx


def shfl(mode: str, d: Writer, p: Writer | None, a_full: Reader, b: Reader, cc: Reader, mask: Reader | None):
    """Build ``shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask``."""
    def run(c, idx):
        n = c.n if idx is None else idx.size
        lane = _sel(c.lane, idx)
        bval = b(c, idx, n).astype(np.int64) & 31
        cv = cc(c, idx, n).astype(np.int64)
        cval = cv & 31
        segmask = (cv >> 8) & 31
        max_lane = (lane & segmask) | (cval & ~segmask & 31)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~segmask & 31)
            ok = j <= max_lane
        src_ltid = _sel(c.ltid, idx) - lane + j
        exists = ok & (src_ltid < c.T) & (j >= 0) & (j < 32)
        src = np.where(exists, _threads(c, idx) - lane + j, _threads(c, idx))
        d(c, idx, a_full(c, None, c.n)[src])
        if p is not None:
            p(c, idx, ok)
    return run


def _warp_segments(c, idx) -> tuple[np.ndarray, np.ndarray]:
    """(segment start positions, segment id per selected thread) of the selected threads grouped by warp."""
    key = _sel(c.warp_key, idx)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    seg = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, key.size]))
    return starts, seg


def _members(c, idx, mask: Reader | None, n: int) -> np.ndarray:
    if mask is None:
        return np.ones(n, bool)
    lane = _sel(c.lane, idx)
    return ((mask(c, idx, n).astype(np.uint64) >> lane.astype(np.uint64)) & np.uint64(1)).astype(bool)


def _ballot(c, idx, bits_on: np.ndarray) -> np.ndarray:
    starts, seg = _warp_segments(c, idx)
    lane = _sel(c.lane, idx).astype(np.uint64)
    bits = np.where(bits_on, np.uint64(1) << lane, np.uint64(0))
    return np.add.reduceat(bits, starts)[seg].astype(np.uint32)


def vote(mode: str, d: Writer, a: Reader, mask: Reader | None):
    """Build ``vote{.sync}.{all,any,uni}.pred d, {!}a{, membermask}`` or ``vote{.sync}.ballot.b32``."""
    def run(c, idx):
        n = c.n if idx is None else idx.size
        pred = a(c, idx, n)
        member = _members(c, idx, mask, n)
        if mode == "ballot":
            d(c, idx, _ballot(c, idx, pred & member))
            return
        starts, seg = _warp_segments(c, idx)
        n_true = np.add.reduceat((pred & member).astype(np.int64), starts)[seg]
        n_mem = np.add.reduceat(member.astype(np.int64), starts)[seg]
        if mode == "all":
            out = n_true == n_mem
        elif mode == "any":
            out = n_true > 0
        else:
            out = (n_true == n_mem) | (n_true == 0)
        d(c, idx, out)
    return run


def activemask(d: Writer):
    """Build ``activemask.b32 d``: the lanes of the executing group in the thread's warp."""
    def run(c, idx):
        n = c.n if idx is None else idx.size
        d(c, idx, _ballot(c, idx, np.ones(n, bool)))
    return run


_REDUX = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}


def redux(op: str, d: Writer, a: Reader, mask: Reader | None):
    """Build ``redux.sync.{add,min,max,and,or,xor}.type d, a, membermask`` (integer types)."""
    uf = _REDUX[op]

    def run(c, idx):
        n = c.n if idx is None else idx.size
        vals = a(c, idx, n)
        starts, seg = _warp_segments(c, idx)
        d(c, idx, uf.reduceat(vals, starts)[seg].astype(vals.dtype))
    return run


def match(mode: str, d: Writer, p: Writer | None, a: Reader, mask: Reader | None):
    """Build ``match.any.sync.b32/b64 d, a, membermask`` / ``match.all.sync d{|p}, a, membermask``."""
    def run(c, idx):
        n = c.n if idx is None else idx.size
        vals = a(c, idx, n).astype(np.uint64)
        key = _sel(c.warp_key, idx)
        if mode == "any":
            order = np.lexsort((vals, key))
            ks, vs = key[order], vals[order]
            starts = np.flatnonzero(np.r_[True, (ks[1:] != ks[:-1]) | (vs[1:] != vs[:-1])])
            seg = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, ks.size]))
            lane = _sel(c.lane, idx)[order].astype(np.uint64)
            m = np.add.reduceat(np.uint64(1) << lane, starts)[seg]
            out = np.empty(n, np.uint32)
            out[order] = m.astype(np.uint32)
            d(c, idx, out)
            return
        starts, seg = _warp_segments(c, idx)
        same = (np.minimum.reduceat(vals, starts) == np.maximum.reduceat(vals, starts))[seg]
        d(c, idx, np.where(same, _ballot(c, idx, np.ones(n, bool)), np.uint32(0)).astype(np.uint32))
        if p is not None:
            p(c, idx, same)
    return run
