"""Comparison and selection semantics (PTX ISA 9.7.6 "Comparison and Selection Instructions": set, setp, selp,
slct; PTX ISA 9.7.3.3 testp), internal to ``alu``.

Integer comparisons follow the operand type: eq ne lt le gt ge compare signed types as signed and unsigned/bit types
as unsigned; lo ls hi hs are the unsigned spellings. Float comparisons: eq ne lt le gt ge are ordered (false when
either operand is NaN), equ neu ltu leu gtu geu are unordered (true when either is NaN), num (neither NaN) and nan
(either NaN). setp/set with .and/.or/.xor combine the comparison with the predicate ``c`` passed as the last operand;
the second result q (``setp p|q``) is (not comparison) BOOLOP c, returned as (p, q) when spec.mods holds "pq".
"""

from __future__ import annotations

import numpy as np

from ..types import FLOAT_TYPES, INT_BITS, storage_dtype
from .fp import MIN_NORMAL, flush_f64, to_f64
from .spec import AluSpec

OPS = frozenset({"setp", "set", "selp", "slct", "testp"})
INT_CMPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"})
FLOAT_CMPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"})
TESTP_OPS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
BOOLOPS = frozenset({"and", "or", "xor"})
_ORDERED = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}
_UNSIGNED_ALIAS = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}


def _compare_ok(cmp: str | None, operand_type: str | None) -> bool:
    if operand_type in INT_BITS:
        return cmp in INT_CMPS
    return operand_type in FLOAT_TYPES and cmp in FLOAT_CMPS


def supports(spec: AluSpec) -> bool:
    """Whether the comparison family implements ``spec``."""
    op = spec.op
    if op == "setp":
        return _compare_ok(spec.cmp, spec.type) and (spec.boolop is None or spec.boolop in BOOLOPS)
    if op == "set":  # spec.type is the destination (u32, s32, f32), spec.stype the compared type
        return spec.type in _SET_TRUE and _compare_ok(spec.cmp, spec.stype) and (
            spec.boolop is None or spec.boolop in BOOLOPS)
    if op == "selp":
        return spec.type in INT_BITS or spec.type in FLOAT_TYPES or spec.type == "pred"
    if op == "slct":
        return (spec.type in INT_BITS or spec.type in FLOAT_TYPES) and spec.stype in ("s32", "f32")
    if op == "testp":
        return spec.type in ("f32", "f64") and len(spec.mods & set(TESTP_OPS)) == 1
    return False


def execute(spec: AluSpec, ops: tuple[np.ndarray, ...]) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Run one comparison/selection instruction (see the module docstring for operand order)."""
    op = spec.op
    if op == "selp":
        return np.where(ops[2], ops[0], ops[1]).astype(ops[0].dtype)
    if op == "slct":
        c = ops[2]
        if spec.stype == "f32":
            c64 = c.astype(np.float64)
            if "ftz" in spec.mods:
                c64 = flush_f64(c64, "f32")
            choose_a = c64 >= 0  # NaN compares false: b is selected
        else:
            choose_a = c >= 0
        return np.where(choose_a, ops[0], ops[1]).astype(ops[0].dtype)
    if op == "testp":
        return _testp(next(iter(spec.mods & set(TESTP_OPS))), ops[0].astype(np.float64), spec.type)
    operand_type = spec.type if op == "setp" else spec.stype
    t = compare(spec.cmp or "", operand_type or "", ops[0], ops[1], "ftz" in spec.mods)
    p, q = t, ~t
    if spec.boolop is not None:
        combine = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[spec.boolop]
        p, q = combine(t, ops[2]), combine(~t, ops[2])
    if op == "set":
        return _set_value(p, spec.type)
    return (p, q) if "pq" in spec.mods else p


def compare(cmp: str, operand_type: str, a: np.ndarray, b: np.ndarray, ftz: bool = False) -> np.ndarray:
    """Evaluate one PTX comparison operator on two storage-dtype arrays, returning np.bool_."""
    if operand_type in INT_BITS:
        return _ORDERED[_UNSIGNED_ALIAS.get(cmp, cmp)](a, b)
    x, y = to_f64(a, operand_type), to_f64(b, operand_type)
    if ftz:
        x, y = flush_f64(x, operand_type), flush_f64(y, operand_type)
    unordered = np.isnan(x) | np.isnan(y)
    if cmp == "num":
        return ~unordered
    if cmp == "nan":
        return unordered
    if cmp.endswith("u"):
        return _ORDERED[cmp[:-1]](x, y) | unordered
    return _ORDERED[cmp](x, y) & ~unordered


# raw bits of "true" per set destination type: all ones for integers, 1.0 for floats (PTX ISA 9.7.6.1 set, 9.7.4.x
# half-precision set); false is 0
_SET_TRUE = {"u32": 0xFFFFFFFF, "s32": 0xFFFFFFFF, "f32": 0x3F800000, "u16": 0xFFFF, "s16": 0xFFFF, "f16": 0x3C00,
             "bf16": 0x3F80}


def _set_value(p: np.ndarray, dtype_name: str) -> np.ndarray:
    """set: the destination type's "true" bits (see _SET_TRUE) where ``p``, else 0, in its storage dtype."""
    dt = storage_dtype(dtype_name)
    raw = np.uint32 if dt.itemsize == 4 else np.uint16
    return np.where(p, raw(_SET_TRUE[dtype_name]), raw(0)).astype(raw).view(dt)


def _testp(kind: str, x: np.ndarray, fmt: str) -> np.ndarray:
    """testp (PTX ISA 9.7.3.3): classify each value; zero is neither normal nor subnormal."""
    if kind == "finite":
        return np.isfinite(x)
    if kind == "infinite":
        return np.isinf(x)
    if kind == "number":
        return ~np.isnan(x)
    if kind == "notanumber":
        return np.isnan(x)
    magnitude = np.abs(x)
    if kind == "normal":
        return np.isfinite(x) & (magnitude >= MIN_NORMAL[fmt])
    return (magnitude < MIN_NORMAL[fmt]) & (magnitude > 0)
