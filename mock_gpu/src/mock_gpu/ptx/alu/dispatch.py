"""PTX arithmetic, logic, comparison, conversion and math semantics, vectorized over threads with numpy.

Entry point of the ALU: the interpreter describes one instruction with an :class:`AluSpec`, asks :func:`supports`
at module load time, and calls :func:`execute` with one 1-D array per source operand (one element per active
thread). The families live in ``integer`` (PTX ISA 9.7.1 integer arithmetic), ``bits`` (9.7.1 bit
manipulation, 9.7.8 logic and shift, prmt), ``floating`` (9.7.3/9.7.4 floating point), ``compare`` (9.7.6
comparison and selection, testp) and ``convert`` (9.7.9.21 cvt, with ``fp8`` for 8-bit floats); ``fp``
holds the exact-rounding helpers. The SIMD video instructions live in ``video`` (called by the decoder).

Operand and result storage dtypes: u8..u64/b8..b64 -> np.uint8..np.uint64, s8..s64 -> np.int8..np.int64,
f16 -> np.float16, bf16 -> np.uint16 (raw bits), f32 -> np.float32, f64 -> np.float64, f16x2/bf16x2 -> np.uint32
(packed raw bits, lower half = element 0), pred -> np.bool_ (the table ``types.STORAGE``). Exceptions to "result
dtype = storage of spec.type": mul.wide/mad.wide return the doubled width (mad.wide's c is already wide); popc, clz
and bfind return np.uint32; setp and testp return np.bool_ (setp returns (p, q) when spec.mods contains the
pseudo-modifier "pq", for the ``setp p|q`` form); set returns its destination type spec.type with spec.stype the
compared type; cvt converts from spec.stype to spec.type.
"""

from __future__ import annotations

import numpy as np

from ..types import FLOAT_TYPES, INT_BITS, INT_PACKED_TYPES, PACKED_TYPES, storage_dtype
from . import bits, compare, convert, floating, integer
from .spec import AluSpec, UnsupportedInstruction, describe, source_count

__all__ = ["AluSpec", "UnsupportedInstruction", "execute", "supports"]


# ops of the float family that also exist for packed f16x2/bf16x2 (element-wise)
_PACKED_OPS = {"add", "sub", "mul", "fma", "mad", "neg", "abs", "min", "max", "ex2", "tanh"}


def _family(spec: AluSpec):  # -> module with supports/execute, or None
    if spec.op in compare.OPS:
        return compare
    if spec.op in convert.OPS:
        return convert
    if spec.op in bits.OPS:
        return bits
    if spec.type in FLOAT_TYPES and spec.op in floating.OPS:
        return floating
    if spec.type in INT_BITS and spec.op in integer.OPS:
        return integer
    return None


def _scalar_of_packed(spec: AluSpec) -> AluSpec | None:
    if spec.type in PACKED_TYPES and spec.op in _PACKED_OPS:
        return AluSpec(spec.op, PACKED_TYPES[spec.type], spec.mods, spec.stype, spec.cmp, spec.boolop)
    if spec.type in INT_PACKED_TYPES and spec.op in ("add", "sub", "min", "max"):
        return AluSpec(spec.op, INT_PACKED_TYPES[spec.type], spec.mods, spec.stype, spec.cmp, spec.boolop)
    return None


def _packed_compare(spec: AluSpec) -> str | None:
    """The packed type compared by a setp/set on .f16x2/.bf16x2 halves (PTX ISA 9.7.4.x half comparisons)."""
    if spec.op == "setp" and spec.type in PACKED_TYPES and "pq" in spec.mods:
        return spec.type
    if spec.op == "set" and spec.stype in PACKED_TYPES and spec.type in (spec.stype, "u32", "s32"):
        return spec.stype
    return None


def supports(spec: AluSpec) -> bool:
    """Whether :func:`execute` implements ``spec``, decided without executing anything (no exceptions)."""
    packed = _packed_compare(spec)
    if packed is not None:
        return compare.supports(AluSpec("setp", PACKED_TYPES[packed], spec.mods - {"pq"}, None, spec.cmp,
                                        spec.boolop))
    scalar = _scalar_of_packed(spec)
    if scalar is not None:
        return supports(scalar)
    family = _family(spec)
    return family is not None and bool(family.supports(spec))


def execute(spec: AluSpec, *operands: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
    """Compute one instruction for every thread.

    operands: 1-D numpy arrays of equal length in the storage dtype of their PTX type (see the module docstring).
    Returns an array (or a (p, q) tuple for ``setp`` with "pq") of that length.
    Raises UnsupportedInstruction when :func:`supports` is false for ``spec``, ValueError when the operand count or
    shapes do not fit the instruction.
    """
    if not supports(spec):
        raise UnsupportedInstruction(
            f"unsupported ALU instruction {describe(spec)}: no implementation for this opcode/type/modifier "
            "combination; check the PTX ISA form or add it to mock_gpu.ptx.alu")
    arrays = tuple(np.asarray(o) for o in operands)
    _check_operands(spec, arrays)
    if _packed_compare(spec) is not None:
        return _packed_cmp(spec, arrays)
    scalar = _scalar_of_packed(spec)
    if scalar is not None:
        return _packed(scalar, arrays)
    family = _family(spec)
    return family.execute(spec, arrays)  # type: ignore[union-attr]


def _packed(scalar: AluSpec, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    """Element-wise f16x2/bf16x2 (PTX ISA 9.7.4) and u16x2/s16x2 (PTX ISA 9.7.1, sm_90): run the scalar op on the low
    and the high halves."""
    dt = storage_dtype(scalar.type)
    family = _family(scalar)
    halves = []
    for shift in (0, 16):
        parts = tuple(((a.astype(np.uint32) >> np.uint32(shift)) & np.uint32(0xFFFF)).astype(np.uint16).view(dt)
                      for a in arrays)
        out = family.execute(scalar, parts)  # type: ignore[union-attr]
        halves.append(np.asarray(out).view(np.uint16).astype(np.uint32))
    return halves[0] | (halves[1] << np.uint32(16))


_HALF_ONE = {"f16x2": 0x3C00, "bf16x2": 0x3F80}  # 1.0 in each half format


def _packed_cmp(spec: AluSpec, arrays: tuple[np.ndarray, ...]) -> np.ndarray | tuple[np.ndarray, ...]:
    """setp.cmp.f16x2 p|q (p: lower half, q: upper half) and set.cmp.{f16x2,u32,s32}.f16x2 (each half of d is 1.0
    for .f16x2/.bf16x2 destinations, 0xffff for integer ones), with the optional .and/.or/.xor predicate c applied
    to both halves."""
    packed = _packed_compare(spec) or ""
    half = PACKED_TYPES[packed]
    scalar = AluSpec("setp", half, spec.mods - {"pq"}, None, spec.cmp, spec.boolop)
    dt = storage_dtype(half)
    results = []
    for shift in (0, 16):
        parts = [((a.astype(np.uint32) >> np.uint32(shift)) & np.uint32(0xFFFF)).astype(np.uint16).view(dt)
                 for a in arrays[:2]]
        results.append(np.asarray(compare.execute(scalar, (*parts, *arrays[2:]))))
    if spec.op == "setp":
        return results[0], results[1]
    one = np.uint32(_HALF_ONE.get(spec.type, 0xFFFF))
    word = np.where(results[0], one, np.uint32(0)) | (np.where(results[1], one, np.uint32(0)) << np.uint32(16))
    return word.astype(np.uint32).view(storage_dtype(spec.type))


def _check_operands(spec: AluSpec, arrays: tuple[np.ndarray, ...]) -> None:
    want = source_count(spec)
    if len(arrays) != want:
        raise ValueError(f"{describe(spec)} takes {want} source operands, got {len(arrays)}; pass one array per "
                         "source operand (setp/set with .and/.or/.xor take the predicate c last)")
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1 or any(a.ndim != 1 for a in arrays):
        raise ValueError(f"{describe(spec)} needs 1-D operand arrays of one length (one element per thread), got "
                         f"shapes {[a.shape for a in arrays]}")
