"""PTX fundamental types (PTX ISA 5.2.2), their numpy storage dtypes and register width conversions.

:data:`STORAGE` is the one table of storage dtypes, used by the parser, the decoder, the ALU and the memory ops:
u8..u64/b8..b64 -> np.uint8..np.uint64, s8..s64 -> np.int8..np.int64, f16 -> np.float16, bf16 -> np.uint16 (raw
bits), f32/f64 -> np.float32/np.float64, the packed f16x2/bf16x2/u16x2/s16x2 -> np.uint32 (lower half = element 0),
the fp8 pairs e4m3x2/e5m2x2 -> np.uint16, pred -> np.bool_.

Registers store raw bits: an unsigned array of the register's width (np.bool_ for predicates). Reading an operand of
instruction type ``t`` from a register of another width follows PTX ISA 5.4.x "Operand size exceeding
instruction-type size": wider registers are truncated; when writing, values are sign-extended for signed types and
zero-extended otherwise.
"""

from __future__ import annotations

import numpy as np

__all__ = ["STORAGE", "WIDTH", "RAW", "INT_BITS", "INT_SIGNED", "FLOAT_TYPES", "PACKED_TYPES", "INT_PACKED_TYPES",
           "storage_dtype", "int_type", "unsigned_dtype", "signed_dtype", "to_type", "to_raw", "is_signed", "is_float",
           "const_value"]

STORAGE: dict[str, type] = {
    "pred": np.bool_,
    "b8": np.uint8, "u8": np.uint8, "s8": np.int8,
    "b16": np.uint16, "u16": np.uint16, "s16": np.int16, "f16": np.float16, "bf16": np.uint16,
    "b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32, "f16x2": np.uint32, "bf16x2": np.uint32,
    "u16x2": np.uint32, "s16x2": np.uint32, "e4m3x2": np.uint16, "e5m2x2": np.uint16,
    "b64": np.uint64, "u64": np.uint64, "s64": np.int64, "f64": np.float64,
}
WIDTH: dict[str, int] = {t: (1 if t == "pred" else np.dtype(d).itemsize * 8) for t, d in STORAGE.items()}
RAW: dict[int, type] = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED_RAW = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
INT_BITS = {f"{k}{n}": n for k in "bus" for n in (8, 16, 32, 64)}
INT_SIGNED = {name: name[0] == "s" for name in INT_BITS}
FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
PACKED_TYPES = {"f16x2": "f16", "bf16x2": "bf16"}
INT_PACKED_TYPES = {"u16x2": "u16", "s16x2": "s16"}  # sm_90 add/sub/min/max on two 16-bit integers


def storage_dtype(ptx_type: str) -> np.dtype:
    """The numpy dtype that holds one value of ``ptx_type`` (:data:`STORAGE`); KeyError for an unknown type name."""
    return np.dtype(STORAGE[ptx_type])


def int_type(bits: int, signed: bool) -> str:
    """PTX integer type name for a width and signedness, e.g. (32, True) -> "s32"."""
    return f"{'s' if signed else 'u'}{bits}"


def unsigned_dtype(bits: int) -> np.dtype:
    """numpy unsigned dtype of ``bits`` width (8..64)."""
    return np.dtype(RAW[bits])


def signed_dtype(bits: int) -> np.dtype:
    """numpy signed dtype of ``bits`` width (8..64)."""
    return np.dtype(_SIGNED_RAW[bits])


def is_signed(t: str) -> bool:
    """True for the signed integer types s8..s64."""
    return t[0] == "s"


def is_float(t: str) -> bool:
    """True for f16, f32, f64 (not the packed or bf16 types, which are handled as raw bits)."""
    return t in ("f16", "f32", "f64")


def to_type(raw: np.ndarray, reg_width: int, t: str) -> np.ndarray:
    """View/convert register bits (unsigned array of ``reg_width`` bits) as operand type ``t``'s storage dtype."""
    w = WIDTH[t]
    if w == reg_width:
        return raw.view(STORAGE[t]) if w > 1 else raw
    if w == 1 or reg_width == 1:
        raise TypeError(f"predicate/non-predicate mismatch: register of {reg_width} bits read as .{t}")
    if w < reg_width:
        return raw.astype(RAW[w]).view(STORAGE[t])
    if is_signed(t):
        return raw.view(_SIGNED_RAW[reg_width]).astype(STORAGE[t])
    return raw.astype(RAW[w]).view(STORAGE[t])


def to_raw(val: np.ndarray, t: str, reg_width: int) -> np.ndarray:
    """Convert a value of type ``t`` (its storage dtype) to register bits of ``reg_width`` (sign/zero extension)."""
    w = WIDTH[t]
    if w == 1:
        return val.astype(np.bool_, copy=False)
    bits: np.ndarray = val.view(RAW[w]) if val.dtype.itemsize * 8 == w else val.astype(STORAGE[t]).view(RAW[w])
    if w == reg_width:
        return bits
    if w > reg_width:
        return bits.astype(RAW[reg_width])
    if is_signed(t):
        return bits.view(_SIGNED_RAW[w]).astype(_SIGNED_RAW[reg_width]).view(RAW[reg_width])
    return bits.astype(RAW[reg_width])


def const_value(value: int | float, t: str, *, float_width: int | None = None) -> np.generic:
    """An immediate as a numpy scalar of type ``t``'s storage dtype.

    Integers wrap modulo 2**width (so -1 as .b32 is 0xffffffff). ``float_width`` (32 or 64): ``value`` is the raw bit
    pattern of a ``0f``/``0d`` literal (PTX ISA 4.5.3 floating-point constants); for a float type it is converted to
    that type, for a bit type its bits are used.
    """
    dt = np.dtype(STORAGE[t])
    w = WIDTH[t]
    if t == "pred":
        return np.bool_(bool(value))
    if float_width is not None:
        src = np.array([int(value)], dtype=RAW[float_width]).view(np.float32 if float_width == 32 else np.float64)
        if dt.kind == "f":
            return dt.type(src[0])
        if w == float_width:
            return src.view(dt)[0]
        value = float(src[0])
    if dt.kind == "f":
        return dt.type(value)
    if isinstance(value, float):
        value = int(value)
    return np.array([int(value) & ((1 << w) - 1)], dtype=RAW[w]).view(dt)[0]
