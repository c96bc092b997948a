"""Texture sampling: what a texture unit computes for PTX ``tex`` (PTX ISA 9.7.10.3) from a texture object.

The rules are those of the CUDA C++ Programming Guide, "Texture Fetching" (address modes, nearest-point and linear
filtering with 9-bit fixed-point weights of 8 fractional bits) and "Cubemap Textures" (face selection from the
direction's major axis). Texel data is a numpy array of shape (layers, height, width, channels): a 1-D texture has
one layer and height 1, a 3-D texture its depth as layers, a cubemap six layers (the faces +x, -x, +y, -y, +z, -z)
and a layered cubemap six per cube.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["GEOMETRIES", "Texture", "TextureTable", "sample"]

# geometry -> (number of spatial coordinates, whether the first coordinate is a layer index)
GEOMETRIES = {"1d": (1, False), "2d": (2, False), "3d": (3, False), "a1d": (1, True), "a2d": (2, True),
              "cube": (3, False), "acube": (3, True)}
WRAP, CLAMP, MIRROR, BORDER = 0, 1, 2, 3  # CUaddress_mode / cudaTextureAddressMode values


@dataclass(eq=False)
class Texture:
    """A texture object: ``data`` (layers, height, width, channels) in the array's element type, and the sampler
    state of its texture descriptor. ``normalize_ints`` is cudaReadModeNormalizedFloat (8/16-bit integers read as
    floats in [0, 1] or [-1, 1]); ``three_d`` tells a 3-D texture (layers are depth) from a layered one."""

    data: np.ndarray
    address_modes: tuple[int, int, int] = (CLAMP, CLAMP, CLAMP)
    linear: bool = False
    normalized_coords: bool = False
    normalize_ints: bool = False
    cubemap: bool = False
    three_d: bool = False


@dataclass
class TextureTable:
    """The live texture objects of an emulated system by handle (what a ``.u64`` texture operand holds)."""

    objects: dict[int, Texture] = field(default_factory=dict)

    def lookup(self, handle: int) -> Texture | None:
        """The texture object ``handle`` names, or None."""
        return self.objects.get(int(handle))


def sample(tex: Texture, geometry: str, layer: np.ndarray | None, coords: list[np.ndarray]) -> np.ndarray:
    """Fetch ``tex`` at float ``coords`` (one array per spatial coordinate, length n) in ``layer`` (int array or
    None) for ``geometry`` (a key of GEOMETRIES). Returns (n, 4) float32 (float or normalized reads) or the integer
    element type; channels the texture lacks read 0. ValueError for a geometry the texture does not have."""
    ndim, layered = GEOMETRIES[geometry]
    if (geometry in ("cube", "acube")) != tex.cubemap:
        raise ValueError(f"a {geometry} fetch from a {'cubemap' if tex.cubemap else 'non-cubemap'} texture")
    n = coords[0].size
    base = np.zeros(n, np.int64) if layer is None else layer.astype(np.int64) * (6 if tex.cubemap else 1)
    if tex.cubemap:
        face, s, t = _cube_face(*coords)
        base, coords, normalized = base + face, [s, t], True
    else:
        normalized = tex.normalized_coords
    height, width = tex.data.shape[1:3]
    sizes = [width, height, tex.data.shape[0]][:len(coords)]
    scaled = [c.astype(np.float64) * (size if normalized else 1) for c, size in zip(coords, sizes)]
    return _finish(tex, _filter(tex, base, scaled, sizes, normalized))


def _cube_face(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Face index and normalized (s, t) of direction (x, y, z) ("Cubemap Textures": the major axis picks the face)."""
    ax, ay, az = np.abs(x), np.abs(y), np.abs(z)
    on_x = (ax >= ay) & (ax >= az)
    on_y = ~on_x & (ay >= az)
    face = np.where(on_x, np.where(x >= 0, 0, 1), np.where(on_y, np.where(y >= 0, 2, 3), np.where(z >= 0, 4, 5)))
    ma = np.where(on_x, ax, np.where(on_y, ay, az))
    sc = np.select([face == 0, face == 1, face == 5], [-z, z, -x], x)
    tc = np.select([face == 2, face == 3], [z, -z], -y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return face, (sc / ma + 1) / 2, (tc / ma + 1) / 2


def _filter(tex: Texture, base: np.ndarray, scaled: list[np.ndarray], sizes: list[int],
            normalized: bool) -> np.ndarray:
    """Nearest-point or linear filtering over the 1, 2 or 3 texel axes of ``scaled`` (texel-space coordinates)."""
    taps: list[list[tuple[np.ndarray, np.ndarray]]] = []
    for c in scaled:
        if not tex.linear:
            taps.append([(np.floor(c).astype(np.int64), np.ones(c.size))])
            continue
        shifted = c - 0.5
        i = np.floor(shifted).astype(np.int64)
        alpha = np.round((shifted - i) * 256) / 256  # 9-bit fixed point, 8 fractional bits
        taps.append([(i, 1 - alpha), (i + 1, alpha)])
    result = np.zeros((base.size, tex.data.shape[3]), np.float64)
    for combo in np.ndindex(*[len(t) for t in taps]):
        weight = np.ones(base.size)
        index = []
        inside = np.ones(base.size, bool)
        for k, choice in enumerate(combo):
            i, w = taps[k][choice]
            j, ok = _address(i, sizes[k], tex.address_modes[k], normalized)
            index.append(j)
            inside &= ok
            weight = weight * w
        x = index[0]
        y = index[1] if len(index) > 1 else np.zeros_like(x)
        layer = index[2] if tex.three_d else base
        texels = tex.data[layer, y, x].astype(np.float64) * inside[:, None]
        result += texels * weight[:, None]
    return result


def _address(i: np.ndarray, size: int, mode: int, normalized: bool) -> tuple[np.ndarray, np.ndarray]:
    """Texel index ``i`` under address ``mode`` for an axis of ``size`` texels; wrap and mirror need normalized
    coordinates (otherwise clamp applies, as the Programming Guide says). Returns (index, inside-the-texture)."""
    if mode == WRAP and normalized:
        return np.mod(i, size), np.ones(i.size, bool)
    if mode == MIRROR and normalized:
        period = np.mod(i, 2 * size)
        return np.where(period < size, period, 2 * size - 1 - period), np.ones(i.size, bool)
    if mode == BORDER:
        return np.clip(i, 0, size - 1), (i >= 0) & (i < size)
    return np.clip(i, 0, size - 1), np.ones(i.size, bool)


def _finish(tex: Texture, values: np.ndarray) -> np.ndarray:
    """Pad to four channels in the type a fetch returns (float32 unless an integer texture is read as is)."""
    kind = tex.data.dtype
    if tex.normalize_ints and kind.kind in "iu" and kind.itemsize <= 2:
        top = float(np.iinfo(kind).max)
        values = np.maximum(values / top, -1.0)
        kind = np.dtype(np.float32)
    elif kind.kind == "f":
        kind = np.dtype(np.float32)
    out = np.zeros((values.shape[0], 4), kind)
    out[:, :values.shape[1]] = values if kind.kind == "f" else np.round(values)
    return out
