"""PTX instruction types and their numpy storage dtypes (PTX ISA 5.2 "Types"), internal to ``alu``."""

from __future__ import annotations

import numpy as np

INT_BITS = {f"{k}{n}": n for k in "bus" for n in (8, 16, 32, 64)}
INT_SIGNED = {name: name[0] == "s" for name in INT_BITS}
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
PACKED_TYPES = {"f16x2": "f16", "bf16x2": "bf16"}
INT_PACKED_TYPES = {"u16x2": "u16", "s16x2": "s16"}  # sm_90 add/sub/min/max on two 16-bit integers

_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def storage_dtype(ptx_type: str) -> np.dtype:
    """The numpy dtype that holds one value of ``ptx_type`` (see the module contract in ``alu``).

    Raises KeyError for a type name this module does not know.
    """
    if ptx_type == "pred":
        return np.dtype(np.bool_)
    if ptx_type in INT_BITS:
        table = _SIGNED if INT_SIGNED[ptx_type] else _UNSIGNED
        return np.dtype(table[INT_BITS[ptx_type]])
    if ptx_type in PACKED_TYPES or ptx_type in INT_PACKED_TYPES:
        return np.dtype(np.uint32)
    if ptx_type in ("e4m3x2", "e5m2x2"):
        return np.dtype(np.uint16)
    floats: dict[str, np.dtype] = {"f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16),
                                   "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
    return floats[ptx_type]


def int_type(bits: int, signed: bool) -> str:
    """PTX integer type name for a width and signedness, e.g. (32, True) -> "s32"."""
    return f"{'s' if signed else 'u'}{bits}"


def unsigned_dtype(bits: int) -> np.dtype:
    """numpy unsigned dtype of ``bits`` width."""
    return np.dtype(_UNSIGNED[bits])


def signed_dtype(bits: int) -> np.dtype:
    """numpy signed dtype of ``bits`` width."""
    return np.dtype(_SIGNED[bits])
