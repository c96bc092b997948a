"""PTX syntax nodes: the operands, declarations, statements and functions the parser produces (PTX ISA chapters 4,
5 and 11) and the linker, decoder and operand readers consume."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..types import STORAGE

__all__ = ["TYPES", "SPECIAL_REGS", "Reg", "Special", "Imm", "FImm", "Sym", "Addr", "Vec", "Not", "Sink", "Pair",
           "ArgList", "Decl", "Stmt", "Func", "ParsedModule"]

TYPES = frozenset(STORAGE) | {"b128"}


@dataclass(frozen=True)
class Reg:
    """A register, by id in its function's register table."""

    id: int


@dataclass(frozen=True)
class Special:
    """A special register such as ``%tid.x`` (PTX ISA chapter 10)."""

    name: str


@dataclass(frozen=True)
class Imm:
    """An integer or decimal floating-point immediate."""

    value: int | float


@dataclass(frozen=True)
class FImm:
    """A ``0f``/``0d`` floating-point literal: raw ``bits`` of ``width`` (32 or 64)."""

    bits: int
    width: int


@dataclass(frozen=True)
class Sym:
    """A named symbol plus byte offset. ``local`` is the index of a function-scope .local/.param declaration when the
    name resolved to one at parse time, ``fparam`` the index of a formal parameter, ``fret`` of a return parameter;
    otherwise the linker resolves ``name`` (label, module variable, shared variable, function)."""

    name: str
    offset: int = 0
    local: int | None = None
    fparam: int | None = None
    fret: int | None = None


@dataclass(frozen=True)
class Addr:
    """A memory operand ``[base+offset]``; base is a Reg, a Sym or None (absolute address)."""

    base: Reg | Sym | None
    offset: int


@dataclass(frozen=True)
class Vec:
    """A brace list ``{a, b, ...}`` of registers, immediates or sinks."""

    items: tuple


@dataclass(frozen=True)
class TexRef:
    """A texture operand ``[tex, {coordinates}]`` of ``tex`` (PTX ISA 9.7.10.3): the texture object handle (a .u64
    register) and the coordinate vector."""

    handle: object
    coords: Vec


@dataclass(frozen=True)
class Not:
    """A negated predicate operand ``!%p``."""

    reg: Reg


@dataclass(frozen=True)
class Sink:
    """The ``_`` sink operand."""


@dataclass(frozen=True)
class Pair:
    """Two destinations ``d|p`` (setp, shfl)."""

    first: Reg | Sink
    second: Reg | Sink


@dataclass(frozen=True)
class ArgList:
    """A parenthesised call argument list."""

    items: tuple


SPECIAL_REGS = frozenset(
    [f"%{n}.{c}" for n in ("tid", "ntid", "ctaid", "nctaid") for c in "xyz"]
    + ["%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid", "%gridid",
       "%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi", "%dynamic_smem_size",
       "%total_smem_size", "%aggr_smem_size", "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt",
       "%lanemask_ge", "%cluster_ctarank", "%cluster_nctarank"]
    + [f"%{n}.{c}" for n in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid") for c in "xyz"]
    + [f"%envreg{i}" for i in range(32)])


@dataclass
class Decl:
    """A variable or parameter declaration: ``size`` and ``align`` in bytes, ``elem`` the element type.

    ``init`` holds initializer items (int, float, or ("sym", name) for an address), or None.
    """

    name: str
    space: str
    elem: str
    size: int
    align: int
    line: int
    init: list | None = None
    extern: bool = False


@dataclass
class Stmt:
    """One instruction: ``op`` is the dotted opcode split on '.', operands as parsed."""

    line: int
    op: tuple[str, ...]
    operands: list
    guard: tuple[int, bool] | None = None  # (predicate register id, negated)


@dataclass
class Func:
    """A parsed .entry or .func."""

    name: str
    entry: bool
    line: int
    params: list[Decl] = field(default_factory=list)
    rets: list[Decl] = field(default_factory=list)
    regs: list[str] = field(default_factory=list)  # register id -> declared type
    body: list[Stmt] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    locals: list[Decl] = field(default_factory=list)  # function-scope .local and .param (per-thread storage)
    shared: list[Decl] = field(default_factory=list)
    perf: dict[str, tuple[int, ...]] = field(default_factory=dict)
    defined: bool = False


@dataclass
class ParsedModule:
    """Everything of one PTX module: version, target, module variables and functions."""

    version: tuple[int, int] = (0, 0)
    target: list[str] = field(default_factory=list)
    address_size: int = 64
    variables: list[Decl] = field(default_factory=list)  # .global / .const / .shared at module scope
    funcs: dict[str, Func] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
