"""CAST between every dtype pair and BITCAST between every same-size pair of non-bool dtypes.

One kernel per source dtype holds every conversion from it, each on its own input buffer, so the values of each pair
can stay in the range where the conversion is defined (float->int in range, nothing out of a float type's range).
"""

from __future__ import annotations

import functools

import numpy as np

from harness.kernels import values as V
from harness.kernels.case import KernelCase
from harness.kernels.semantics import reference_cast
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, KernelBuilder

__all__ = ["cast_cases", "bitcast_pairs", "N"]

N = 128
_F16_MAX = 65504.0


def bitcast_pairs(src: DType) -> list[DType]:
    """Non-bool dtypes of ``src``'s size other than ``src`` (bool has invalid bit patterns, so it is left out)."""
    if src is dtypes.bool:
        return []
    return [d for d in dtypes.all if d.itemsize == src.itemsize and d is not src and d is not dtypes.bool]


@functools.cache
def _kernel(src: DType) -> tuple[Kernel, dict[tuple[str, DType], tuple[int, int]]]:
    """The conversions kernel of ``src``; (kind, dst) -> (input slot, output slot), kind "cast" or "bitcast"."""
    kb = KernelBuilder(f"casts_from_{src.name}", (N,))
    pairs = [("cast", d) for d in dtypes.all] + [("bitcast", d) for d in bitcast_pairs(src)]
    bufs = [(kind, dst, kb.buffer(src), kb.buffer(dst)) for kind, dst in pairs]
    i = kb.global_id(0)
    for kind, dst, a, out in bufs:
        x = kb.load(a, i)
        kb.store(out, i, kb.cast(x, dst) if kind == "cast" else kb.bitcast(x, dst))
    return kb.build(), {(kind, dst): (a.arg, out.arg) for kind, dst, a, out in bufs}


def _float_limit(dt: DType) -> float:
    return _F16_MAX if dt is dtypes.float16 else 1e30 if dt in (dtypes.bfloat16, dtypes.float32) else 1e300


def _cast_input(src: DType, dst: DType, rng: np.random.Generator) -> np.ndarray:
    """Values of ``src`` whose conversion to ``dst`` is defined (and, into bool, with zeros in them)."""
    if src is dtypes.bool:
        return V.bools(rng, N)
    if dst is dtypes.bool:
        x = V.values(rng, src, N) if not src.is_float else V.floats(rng, src, N, -100, 100, specials=True)
        return V.with_zeros(rng, x)
    if src.is_int:
        if not dst.is_float or dst in (dtypes.float32, dtypes.float64):
            return V.ints(rng, src, N)
        bound = int(_F16_MAX) if dst is dtypes.float16 else 2**53  # exact in the float64 reference
        return V.ints(rng, src, N, max(int(src.min), -bound), min(int(src.max), bound))
    if dst.is_float:
        limit = min(_float_limit(src), _float_limit(dst))
        x = V.log_uniform(rng, src, N, 1e-3, limit)
        x[:4] = np.array([np.nan, np.inf, -np.inf, -0.0]).astype(src.np)
        return x
    # float -> int: truncation must land in dst's range; 0.99 leaves room for rounding the bound to src
    lo, hi = max(float(dst.min), -_float_limit(src)) * 0.99, min(float(dst.max), _float_limit(src)) * 0.99
    wide = V.floats(rng, src, N, lo, hi)
    narrow = V.floats(rng, src, N, max(lo, -100.0), min(hi, 100.0))
    return np.where(rng.random(N) < 0.5, wide, narrow).astype(src.np)


def _bitcast_input(src: DType, dst: DType, rng: np.random.Generator) -> np.ndarray:
    """Bit patterns that are finite numbers in both types (no NaN payloads to canonicalize)."""
    if dst.is_float:
        return V.floats(rng, dst, N, -1000.0, 1000.0).view(src.np)
    return V.floats(rng, src, N, -1000.0, 1000.0) if src.is_float else V.ints(rng, src, N)


def _inputs(src: DType):
    kernel, slots = _kernel(src)

    def make(rng: np.random.Generator) -> list[np.ndarray]:
        arrays: list[np.ndarray] = [np.zeros(0)] * len(kernel.buffers)
        for (kind, dst), (a, out) in slots.items():
            arrays[a] = (_cast_input if kind == "cast" else _bitcast_input)(src, dst, rng)
            arrays[out] = np.zeros(N, dtype=dst.np)
        return arrays
    return make


def _case(kind: str, src: DType, dst: DType) -> KernelCase:
    kernel, slots = _kernel(src)
    a, out = slots[(kind, dst)]

    def reference(arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        x = arrays[a]
        return {out: reference_cast(x, src, dst) if kind == "cast" else x.view(dst.np)}
    return KernelCase(f"{kind}_{src.name}_to_{dst.name}", kernel, _inputs(src), reference, dst)


def cast_cases() -> list[KernelCase]:
    """Every CAST pair (13 x 13) and every BITCAST pair, grouped by source dtype."""
    return [_case(kind, src, dst) for src in dtypes.all
            for kind, dst in [("cast", d) for d in dtypes.all] + [("bitcast", d) for d in bitcast_pairs(src)]]
