"""Matrix multiply C[M, N] = A[M, K] @ B[K, N] (row-major): naive, tiled through local memory, register-tiled.

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

__all__ = ["matmul_cases", "M", "N", "K", "TILE", "REG"]

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
    """Naive and register-tiled (float32, int32) run everywhere; the local-memory tiled ones need has_local."""
    out = []
    for dt in (dtypes.float32, dtypes.int32):
        out += [_case(_naive(dt), dt), _case(_register_tiled(dt), dt), _case(_tiled_local(dt), dt, needs_local=True)]
    return out
