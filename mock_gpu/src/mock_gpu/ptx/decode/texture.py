"""Decoder of ``tex`` (PTX ISA 9.7.10.3): ``tex.geom.v4.dtype.ctype d, [a, c]`` with a texture object handle in a
.u64 register (unified texture mode) and the coordinate vector ``c``; the fetch itself is
:func:`mock_gpu.texture.sample` on the texture object the handle names. Level-of-detail, gradient, offset and
depth-compare forms are rejected at load."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...texture import GEOMETRIES, sample
from ..errors import ExecutionError
from ..parse.syntax import TexRef, Vec
from ..types import STORAGE
from .operands import DecodeError, operand_count, reader, writer

__all__ = ["tex"]

_DTYPES = {"f32", "s32", "u32"}
_CTYPES = {"f32", "s32"}
_VECTOR_LENGTH = {"1d": 1, "2d": 2, "3d": 4, "a1d": 2, "a2d": 4, "cube": 4, "acube": 4}


def tex(types: list[str], mods: set[str], ops: list, rt: list[str]) -> Callable:
    """The closure of one ``tex`` instruction; DecodeError for a form that is not emulated."""
    geometry = _geometry(mods)
    if len(types) != 2 or types[0] not in _DTYPES or types[1] not in _CTYPES:
        raise DecodeError("tex needs .v4, a destination type .f32/.s32/.u32 and a coordinate type .f32/.s32")
    operand_count(ops, 2, "d, [texture, {coordinates}]")
    dests, ref = ops
    if not isinstance(dests, Vec) or len(dests.items) != 4 or not isinstance(ref, TexRef):
        raise DecodeError("tex writes a vector of four registers from [texture, {coordinates}]")
    if len(ref.coords.items) != _VECTOR_LENGTH[geometry]:
        raise DecodeError(f"tex.{geometry} takes {_VECTOR_LENGTH[geometry]} coordinates")
    ndim, layered = GEOMETRIES[geometry]
    handle = reader(ref.handle, "b64", rt)
    layer = reader(ref.coords.items[0], "u32", rt) if layered else None
    coords = [reader(o, types[1], rt) for o in ref.coords.items[int(layered):int(layered) + ndim]]
    ws = [writer(d, types[0], rt) for d in dests.items]
    out_type = np.dtype(STORAGE[types[0]])

    def run(c, i):
        n = c.n if i is None else i.size
        handles = handle(c, i, n)
        layers = None if layer is None else layer(c, i, n)
        where = [r(c, i, n).astype(np.float64) for r in coords]
        result = np.zeros((n, 4), out_type)
        for h in np.unique(handles):
            texture = c.space.textures.lookup(int(h))
            if texture is None:
                raise ExecutionError(f"tex: {int(h):#x} is not a live texture object")
            sel = handles == h
            try:
                fetched = sample(texture, geometry, None if layers is None else layers[sel], [w[sel] for w in where])
            except ValueError as e:
                raise ExecutionError(f"tex.{geometry}: {e}") from None
            result[sel] = fetched.astype(out_type, copy=False)
        for k, w in enumerate(ws):
            w(c, i, np.ascontiguousarray(result[:, k]))
    return run


def _geometry(mods: set[str]) -> str:
    found = [m for m in mods if m in GEOMETRIES]
    if len(found) != 1 or "v4" not in mods or len(mods) != 2:
        raise DecodeError(f"tex needs one geometry of {', '.join(sorted(GEOMETRIES))} and .v4 (level, gradient, "
                          "offset and depth-compare forms are not emulated)")
    return found[0]
