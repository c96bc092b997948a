"""Matrix multiply C[M, N] = A[M, K] @ B[K, N] (row-major): naive, tiled through local memory, register-tiled, and
blocked for CPUs (register blocks of FMAs over contiguous rows of B, which compilers vectorize).

Float references are float64 products rounded to float32, checked with an absolute tolerance that covers the kernels'
own summation order; int32 references are exact and wrap modulo 2**32.
"""

from __future__ import annotations

import numpy as np

from harness.kernels import values as V
from harness.kernels.case import KernelCase
from harness.kernels.semantics import wrap
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, KernelBuilder, UOp

__all__ = ["matmul_cases", "blocked_matmul_kernel", "M", "N", "K", "TILE", "REG"]

M, N, K = 24, 16, 40  # multiples of TILE and REG
TILE = 8              # local-memory tile edge (TILE x TILE threads per group)
REG = 2               # register tile edge (REG x REG outputs per thread)
_F32_ATOL = 1e-4      # K=40 products of |x| <= 1: order-dependent rounding stays far below this


def _naive(dt: DType) -> Kernel:
    kb = KernelBuilder(f"matmul_naive_{dt.name}", (N, M))
    a, b, c = kb.buffer(dt), kb.buffer(dt), kb.buffer(dt)
    col, row = kb.global_id(0), kb.global_id(1)
    acc = kb.acc(0, dt)
    with kb.range(0, K) as k:
        kb.assign(acc, kb.add(acc, kb.mul(kb.load(a, kb.add(kb.mul(row, K), k)), kb.load(b, kb.add(kb.mul(k, N), col)))))
    kb.store(c, kb.add(kb.mul(row, N), col), acc)
    return kb.build()


def _tiled_local(dt: DType) -> Kernel:
    """Groups of TILE x TILE threads; each K-step stages a tile of A and of B in local memory between barriers."""
    kb = KernelBuilder(f"matmul_tiled_local_{dt.name}", (N // TILE, M // TILE), (TILE, TILE))
    a, b, c = kb.buffer(dt), kb.buffer(dt), kb.buffer(dt)
    ta, tb = kb.local("tile_a", dt, TILE * TILE), kb.local("tile_b", dt, TILE * TILE)
    tx, ty = kb.special("local", 0), kb.special("local", 1)
    col, row = kb.global_id(0), kb.global_id(1)
    acc = kb.acc(0, dt)
    with kb.range(0, K // TILE) as t:
        kbase = kb.mul(t, TILE)
        kb.store(ta, kb.add(kb.mul(ty, TILE), tx), kb.load(a, kb.add(kb.mul(row, K), kb.add(kbase, tx))))
        kb.store(tb, kb.add(kb.mul(ty, TILE), tx), kb.load(b, kb.add(kb.mul(kb.add(kbase, ty), N), col)))
        kb.barrier()
        with kb.range(0, TILE) as k:
            prod = kb.mul(kb.load(ta, kb.add(kb.mul(ty, TILE), k)), kb.load(tb, kb.add(kb.mul(k, TILE), tx)))
            kb.assign(acc, kb.add(acc, prod))
        kb.barrier()
    kb.store(c, kb.add(kb.mul(row, N), col), acc)
    return kb.build()


def _register_tiled(dt: DType) -> Kernel:
    """Each thread computes a REG x REG block with REG*REG accumulators, reusing each loaded A and B value REG times."""
    kb = KernelBuilder(f"matmul_register_tiled_{dt.name}", (N // REG, M // REG))
    a, b, c = kb.buffer(dt), kb.buffer(dt), kb.buffer(dt)
    col0, row0 = kb.mul(kb.global_id(0), REG), kb.mul(kb.global_id(1), REG)
    accs = [[kb.acc(0, dt) for _ in range(REG)] for _ in range(REG)]
    with kb.range(0, K) as k:
        av: list[UOp] = [kb.load(a, kb.add(kb.mul(kb.add(row0, r), K), k)) for r in range(REG)]
        bv: list[UOp] = [kb.load(b, kb.add(kb.mul(k, N), kb.add(col0, s))) for s in range(REG)]
        for r in range(REG):
            for s in range(REG):
                kb.assign(accs[r][s], kb.add(accs[r][s], kb.mul(av[r], bv[s])))
    for r in range(REG):
        for s in range(REG):
            kb.store(c, kb.add(kb.mul(kb.add(row0, r), N), kb.add(col0, s)), accs[r][s])
    return kb.build()


def blocked_matmul_kernel(m: int, n: int, k: int, rows: int = 8, cols: int = 32, unroll: int = 1,
                          name: str = "matmul_blocked_float32") -> Kernel:
    """``C[m, n] = A[m, k] @ B[k, n]`` (row-major float32) written for CPUs: register blocking and FMA.

    Thread ``(x, y)`` (``n / cols`` by ``m / rows`` groups of one thread) computes the ``rows x cols`` block of C at row
    ``y * rows``, column ``x * cols``, in ``rows * cols`` accumulators. Each step of ``k`` loads ``rows`` values of A
    and ``cols`` consecutive values of B's row ``k``, then does ``rows * cols`` FMAs, so every loaded value is used
    ``cols`` (A) or ``rows`` (B) times; compilers turn the consecutive B loads into vector loads and the accumulators
    into vector registers. The k loop is unrolled ``unroll`` times. Each C element is one chain of k FMAs in order, so
    results are the same for any thread count.

    Raises ``ValueError`` unless ``rows`` divides ``m``, ``cols`` divides ``n``, ``unroll`` divides ``k`` and the
    matrices fit int32 indexing.
    """
    for what, size, tile in (("m", m, rows), ("n", n, cols), ("k", k, unroll)):
        if tile < 1 or size < 1 or size % tile:
            raise ValueError(f"{what}={size} must be a positive multiple of its tile {tile}")
    if max(m * k, k * n, m * n) > 2**31 - 1:
        raise ValueError(f"{m}x{k} @ {k}x{n} does not fit int32 indices")
    f32 = dtypes.float32
    kb = KernelBuilder(name, (n // cols, m // rows))
    a, b, c = kb.buffer(f32), kb.buffer(f32), kb.buffer(f32)
    row0, col0 = kb.mul(kb.special("group", 1), rows), kb.mul(kb.special("group", 0), cols)
    a_rows = [kb.mul(kb.add(row0, r), k) for r in range(rows)]
    accs = [[kb.acc(0.0, f32) for _ in range(cols)] for _ in range(rows)]
    with kb.range(0, k // unroll) as step:
        for u in range(unroll):
            kk = kb.add(kb.mul(step, unroll), u)
            b_row = kb.add(kb.mul(kk, n), col0)
            av = [kb.load(a, kb.add(a_rows[r], kk)) for r in range(rows)]
            bv = [kb.load(b, kb.add(b_row, s)) for s in range(cols)]
            for r in range(rows):
                for s in range(cols):
                    kb.assign(accs[r][s], kb.fma(av[r], bv[s], accs[r][s]))
    for r in range(rows):
        c_row = kb.add(kb.mul(kb.add(row0, r), n), col0)
        for s in range(cols):
            kb.store(c, kb.add(c_row, s), accs[r][s])
    return kb.build()


def _inputs(dt: DType):
    def make(rng: np.random.Generator) -> list[np.ndarray]:
        if dt.is_float:
            a, b = V.floats(rng, dt, M * K, -1.0, 1.0), V.floats(rng, dt, K * N, -1.0, 1.0)
        else:  # large enough that sums wrap, small enough that int64 products and sums are exact
            a, b = V.ints(rng, dt, M * K, -2**20, 2**20), V.ints(rng, dt, K * N, -2**20, 2**20)
        return [a, b, np.zeros(M * N, dtype=dt.np)]
    return make


def _reference(dt: DType):
    def ref(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        a, b = arrays[0].reshape(M, K), arrays[1].reshape(K, N)
        if dt.is_float:
            return {2: (a.astype(np.float64) @ b.astype(np.float64)).astype(dt.np).ravel()}
        return {2: wrap((a.astype(np.int64) @ b.astype(np.int64)).astype(object).ravel(), dt)}
    return ref


def _case(kernel: Kernel, dt: DType, needs_local: bool = False) -> KernelCase:
    atol = _F32_ATOL if dt.is_float else None
    return KernelCase(kernel.name, kernel, _inputs(dt), _reference(dt), dt, needs_local=needs_local, atol=atol)


def matmul_cases() -> list[KernelCase]:
    """Naive and register-tiled (float32, int32) run everywhere; the local-memory tiled ones need has_local; the
    CPU-blocked one (float32, FMA) runs everywhere too, with small tiles."""
    out = []
    for dt in (dtypes.float32, dtypes.int32):
        out += [_case(_naive(dt), dt), _case(_register_tiled(dt), dt), _case(_tiled_local(dt), dt, needs_local=True)]
    blocked = blocked_matmul_kernel(M, N, K, rows=4, cols=8, unroll=2)
    return out + [_case(blocked, dtypes.float32)]
