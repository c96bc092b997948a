"""Random input values for kernel cases, with edge values mixed in and ranges that keep every op defined."""

from __future__ import annotations

import numpy as np

from runtime_core.dtype import DType, dtypes

__all__ = ["ints", "floats", "bools", "log_uniform", "values", "with_zeros"]


def ints(rng: np.random.Generator, dt: DType, n: int, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """``n`` integers of ``dt`` uniform in ``[lo, hi]`` (default: the whole range), the first few replaced by the range's
    edges and 0/1/-1 where they fit."""
    lo = int(dt.min) if lo is None else lo
    hi = int(dt.max) if hi is None else hi
    out = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.uint64 if dt is dtypes.uint64 else np.int64)
    out = out.astype(dt.np)
    edges = [v for v in (lo, hi, 0, 1, -1, lo + 1, hi - 1) if lo <= v <= hi]
    out[:min(n, len(edges))] = edges[:n]
    return out


def floats(rng: np.random.Generator, dt: DType, n: int, lo: float, hi: float, specials: bool = False) -> np.ndarray:
    """``n`` floats of ``dt`` uniform in ``[lo, hi]`` (rounded to ``dt``); with ``specials`` a few are NaN and +-inf."""
    out = rng.uniform(lo, hi, size=n).astype(dt.np)
    if specials:
        pos = rng.choice(n, size=min(n, 6), replace=False)
        out[pos] = np.array([np.nan, np.nan, np.inf, -np.inf, 0.0, -0.0])[:len(pos)].astype(dt.np)
    return out


def log_uniform(rng: np.random.Generator, dt: DType, n: int, lo: float, hi: float) -> np.ndarray:
    """``n`` floats of ``dt`` with magnitudes log-uniform in ``[lo, hi]`` (both > 0) and random signs."""
    mag = np.exp(rng.uniform(np.log(lo), np.log(hi), size=n))
    return (mag * rng.choice([-1.0, 1.0], size=n)).astype(dt.np)


def bools(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2, size=n).astype(bool)


def values(rng: np.random.Generator, dt: DType, n: int) -> np.ndarray:
    """Generic values of ``dt``: whole range for ints, random bools, uniform [-100, 100] for floats."""
    if dt is dtypes.bool:
        return bools(rng, n)
    return ints(rng, dt, n) if dt.is_int else floats(rng, dt, n, -100.0, 100.0)


def with_zeros(rng: np.random.Generator, x: np.ndarray, fraction: float = 0.3) -> np.ndarray:
    """``x`` with about ``fraction`` of its elements set to zero (and to -0.0 for half of those, if float)."""
    x = x.copy()
    pick = rng.random(x.size) < fraction
    x[pick] = 0
    if x.dtype.kind == "f" or x.dtype == dtypes.bfloat16.np:
        x[pick & (rng.random(x.size) < 0.5)] = -0.0
    return x
