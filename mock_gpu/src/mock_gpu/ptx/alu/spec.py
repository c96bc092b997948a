"""The description of one ALU instruction form, and how many source operands each opcode takes.

A leaf module: the ALU families (``integer``, ``floating``...) and the decoder import it; it imports none of them.
:data:`ARITY` is the one table of source operand counts (PTX ISA chapter 9, each instruction's syntax).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..types import PACKED_TYPES

__all__ = ["ARITY", "AluSpec", "UnsupportedInstruction", "describe", "source_count"]


@dataclass(frozen=True)
class AluSpec:
    """One ALU instruction form.

    op: base opcode ("add", "setp", "cvt", ...); type: instruction type ("u32", "f32", "pred", "f16x2", ...);
    mods: every other dotted modifier ("rn", "ftz", "sat", "lo", "wide", "approx", "f4e", ...);
    stype: cvt source type, slct/set comparison-operand type; cmp: setp/set comparison operator;
    boolop: setp/set combination "and"/"or"/"xor" or None.
    """

    op: str
    type: str
    mods: frozenset[str] = field(default_factory=frozenset)
    stype: str | None = None
    cmp: str | None = None
    boolop: str | None = None


class UnsupportedInstruction(Exception):
    """The ALU does not implement this instruction form; the message names it and what is missing."""


ARITY = {"add": 2, "sub": 2, "mul": 2, "mad": 3, "fma": 3, "mul24": 2, "mad24": 3, "sad": 3, "div": 2, "rem": 2,
         "abs": 1, "neg": 1, "min": 2, "max": 2, "copysign": 2, "and": 2, "or": 2, "xor": 2, "not": 1, "cnot": 1,
         "shl": 2, "shr": 2, "bfe": 3, "bfi": 4, "prmt": 3, "popc": 1, "clz": 1, "brev": 1, "bfind": 1, "selp": 3,
         "slct": 3, "setp": 2, "set": 2, "testp": 1, "ex2": 1, "lg2": 1, "sin": 1, "cos": 1, "sqrt": 1,
         "rsqrt": 1, "rcp": 1, "tanh": 1, "shf": 3, "lop3": 4, "dp4a": 3, "dp2a": 3,
         "bmsk": 2, "szext": 2}


def source_count(spec: AluSpec) -> int:
    """Source operands of ``spec``: :data:`ARITY`, plus the predicate c of setp/set with .and/.or/.xor; cvt takes
    two f32 sources when it packs two halves (f16x2, bf16x2, e4m3x2, e5m2x2) and one otherwise."""
    if spec.op == "cvt":
        return 2 if spec.type in (*PACKED_TYPES, "e4m3x2", "e5m2x2") and spec.stype == "f32" else 1
    return ARITY[spec.op] + (1 if spec.op in ("setp", "set") and spec.boolop else 0)


def describe(spec: AluSpec) -> str:
    """The dotted instruction name of ``spec``, e.g. ``setp.lt.and.f32``."""
    parts = [spec.op]
    if spec.cmp:
        parts.append(spec.cmp)
    if spec.boolop:
        parts.append(spec.boolop)
    parts += sorted(spec.mods)
    parts.append(spec.type)
    if spec.stype:
        parts.append(spec.stype)
    return ".".join(parts)
