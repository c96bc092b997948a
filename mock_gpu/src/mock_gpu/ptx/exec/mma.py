"""Warp-level matrix multiply-accumulate ``mma.sync.aligned.m16n8k{8,16}.row.col`` (PTX ISA 9.7.14.5.14 mma).

The 32 lanes of a warp together hold A (M x K, row-major), B (K x N, column-major) and C/D (M x N) as per-lane
fragments (PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k8" and 9.7.14.5.9 "... mma.m16n8k16 with floating
point type"); with ``groupID = laneid >> 2`` and ``tig = laneid % 4``, fragment element ``e`` of a lane is at:

- A, m16n8k16 (8 halves): row ``groupID + 8*((e>>1)&1)``, col ``2*tig + (e&1) + 8*(e>>2)``
- A, m16n8k8 (4 halves):  row ``groupID + 8*(e>>1)``, col ``2*tig + (e&1)``
- B (K/4 halves): row ``2*tig + (e&1) + 8*(e>>1)``, col ``groupID``
- C, D (4 values): row ``groupID + 8*(e>>1)``, col ``2*tig + (e&1)``

Packed registers hold element ``2j`` in the low and ``2j+1`` in the high half of register ``j``. The products of
f16/bf16 inputs are exact and are summed in float64, then rounded once to the D type: results equal a real tensor
core's up to its (unspecified) fp32 accumulation order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ExecutionError
from ..ops import Reader, Writer

__all__ = ["SHAPES", "mma"]

M, N = 16, 8
SHAPES = {"m16n8k8": 8, "m16n8k16": 16}  # shape -> K


def _fragment_maps(k: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(row, col) per (lane, element) of the A, B and C/D fragments of m16n8k``k``."""
    lane = np.arange(32)[:, None]
    g, tig = lane >> 2, lane % 4
    ea, eb, ec = np.arange(k // 2)[None, :], np.arange(k // 4)[None, :], np.arange(4)[None, :]
    if k == 16:
        a = (g + 8 * ((ea >> 1) & 1), 2 * tig + (ea & 1) + 8 * (ea >> 2))
    else:
        a = (g + 8 * (ea >> 1), 2 * tig + (ea & 1))
    b = (2 * tig + (eb & 1) + 8 * (eb >> 1), np.broadcast_to(g, (32, eb.size)))
    cd = (g + 8 * (ec >> 1), 2 * tig + (ec & 1))
    return {"a": a, "b": b, "cd": cd}


_MAPS = {k: _fragment_maps(k) for k in SHAPES.values()}


def _halves(regs: list[np.ndarray], elem: str) -> np.ndarray:
    """float64 (threads, 2*len(regs)) of the packed f16/bf16 pairs in 32-bit registers (low half first)."""
    bits = np.stack(regs, axis=1).astype(np.uint32)
    pairs = np.stack([bits & np.uint32(0xFFFF), bits >> np.uint32(16)], axis=2).reshape(bits.shape[0], -1)
    if elem == "bf16":
        return (pairs << np.uint32(16)).view(np.float32).astype(np.float64)
    return pairs.astype(np.uint16).view(np.float16).astype(np.float64)


def _pack_f16(values: np.ndarray) -> list[np.ndarray]:
    """(threads, 4) values -> two f16x2 registers (uint32), element 2j in the low half of register j."""
    bits = values.astype(np.float16).view(np.uint16).astype(np.uint32)
    return [bits[:, 2 * j] | (bits[:, 2 * j + 1] << np.uint32(16)) for j in range(2)]


def _whole_warps(c, idx) -> int:
    """The number of warps of the selected threads, checking they are whole warps in lane order; ExecutionError if a
    warp is incomplete (mma.sync.aligned requires all 32 threads of the warp to execute it together)."""
    threads = np.arange(c.n) if idx is None else idx
    key, lane = c.warp_key[threads], c.lane[threads]
    whole = threads.size % 32 == 0
    if whole:
        whole = bool((lane.reshape(-1, 32) == np.arange(32)).all() and (key.reshape(-1, 32) == key[::32, None]).all())
    if not whole:
        block, thread = c.coords(int(threads[0]))
        raise ExecutionError("mma.sync.aligned needs all 32 threads of the warp to execute it together (a partial "
                             "warp or divergent threads reached it)", kernel=c.kernel.name, block=block, thread=thread)
    return threads.size // 32


def mma(k: int, elem: str, d_type: str, c_type: str, d: Sequence[Writer], a: Sequence[Reader],
        b: Sequence[Reader], cc: Sequence[Reader]):
    """Build ``mma.sync.aligned.m16n8k{k}.row.col.{d_type}.{elem}.{elem}.{c_type} d, a, b, c``.

    ``a``/``b`` read the 32-bit registers of packed ``elem`` (f16 or bf16) pairs (k/4 and k/8 of them); ``cc`` and
    ``d`` are four f32 registers, or two f16x2 registers for an f16 accumulator.
    """
    maps = _MAPS[k]

    def run(c, idx):
        w = _whole_warps(c, idx)
        n = w * 32
        # selected threads come in lane order per warp, so row 32*warp + lane of each operand is that lane's fragment
        av = _halves([r(c, idx, n) for r in a], elem).reshape(w, 32, -1)
        bv = _halves([r(c, idx, n) for r in b], elem).reshape(w, 32, -1)
        if c_type == "f32":
            cv = np.stack([r(c, idx, n).astype(np.float64) for r in cc], axis=1)
        else:
            cv = _halves([r(c, idx, n) for r in cc], "f16")
        cv = cv.reshape(w, 32, 4)
        ma, mb, mc = np.zeros((w, M, k)), np.zeros((w, k, N)), np.zeros((w, M, N))
        ma[:, maps["a"][0], maps["a"][1]] = av
        mb[:, maps["b"][0], maps["b"][1]] = bv
        mc[:, maps["cd"][0], maps["cd"][1]] = cv
        md = ma @ mb + mc
        dv = md[:, maps["cd"][0], maps["cd"][1]].reshape(n, 4)
        if d_type == "f32":
            for j, wr in enumerate(d):
                wr(c, idx, dv[:, j].astype(np.float32))
        else:
            for wr, reg in zip(d, _pack_f16(dv)):
                wr(c, idx, reg)
    return run
