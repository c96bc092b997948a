"""SIMD video instructions on bytes and half-words of 32-bit registers (PTX ISA 9.7.16.2 "SIMD video instructions":
vadd2/4, vsub2/4, vavrg2/4, vabsdiff2/4, vmin2/4, vmax2/4, vset2/4), as CUDA's ``__v*`` intrinsics emit them.

Only the default operand selectors and destination mask (all elements) are supported: the parser rejects the
``%r.b3210``-style selector suffixes. Without ``.add`` every element of d is the element result (clamped to the
element range of dtype with ``.sat``, else wrapped); with ``.add`` d is c plus the sum of the element results.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OPS", "CMPS", "video"]

OPS = frozenset({f"{op}{n}" for op in ("vadd", "vsub", "vavrg", "vabsdiff", "vmin", "vmax", "vset") for n in "24"})
CMPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


def _elements(x: np.ndarray, width: int, signed: bool) -> list[np.ndarray]:
    """The 32 // width elements of each value (low element first) as int64."""
    u = x.astype(np.uint32).astype(np.int64)
    out = []
    for k in range(32 // width):
        e = (u >> (k * width)) & ((1 << width) - 1)
        out.append(np.where(e >= 1 << (width - 1), e - (1 << width), e) if signed else e)
    return out


def video(op: str, signs: tuple[bool, bool, bool], sat: bool, add: bool, cmp: str | None, a: np.ndarray,
          b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Evaluate ``op`` (e.g. "vabsdiff4") on np.uint32 operands; ``signs`` = (dtype, atype, btype) signedness.

    Returns np.uint32. ``cmp`` is vset's comparison (element result 1 or 0).
    """
    width = 16 if op.endswith("2") else 8
    name = op[:-1]
    xs, ys = _elements(a, width, signs[1]), _elements(b, width, signs[2])
    results = [_element(name, x, y, cmp) for x, y in zip(xs, ys, strict=True)]
    if add:
        total = c.astype(np.uint32).astype(np.int64) + sum(results)
        return (total & 0xFFFFFFFF).astype(np.uint32)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signs[0] else (0, (1 << width) - 1)
    out = np.zeros(a.shape, np.int64)
    for k, r in enumerate(results):
        r = np.clip(r, lo, hi) if sat else r
        out |= (r & ((1 << width) - 1)) << (k * width)
    return out.astype(np.uint32)


def _element(name: str, x: np.ndarray, y: np.ndarray, cmp: str | None) -> np.ndarray:
    if name == "vadd":
        return x + y
    if name == "vsub":
        return x - y
    if name == "vavrg":
        return (x + y + 1) >> 1
    if name == "vabsdiff":
        return np.abs(x - y)
    if name == "vmin":
        return np.minimum(x, y)
    if name == "vmax":
        return np.maximum(x, y)
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
          "ge": np.greater_equal}[cmp or ""]
    return fn(x, y).astype(np.int64)
