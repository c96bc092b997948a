"""Linker: turn a parsed .entry into one flat instruction list by inlining every ``call`` (PTX ISA 9.7.12.7 call).

Inlining gives each call its own registers, local frame (``__local_depot``) and ``.param`` slots, so the interpreter
needs no call stack: ``ret`` inside an inlined function becomes a branch to the instruction after the call. Direct
recursion or mutual recursion cannot be inlined and is rejected at load time, as are indirect calls and calls to
functions without a body (e.g. ``vprintf``), except ``__assertfail`` (the failure path of device-side ``assert``),
which becomes a trap that reports the assertion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import PTXError
from .parse.syntax import Addr, ArgList, Decl, Func, Not, Pair, ParsedModule, Reg, Stmt, Sym, TexRef, Vec

__all__ = ["Loc", "Label", "LInstr", "LinkedKernel", "link_kernel", "param_layout"]

_MAX_INLINE_INSTRUCTIONS = 1_000_000


@dataclass(frozen=True)
class Loc:
    """A resolved symbol: ``space`` is "kparam" (kernel parameter buffer offset), "local" (per-thread frame offset),
    "shared" (offset in the block's shared window) or "global" (module variable ``name``; address known at bind)."""

    space: str
    offset: int
    name: str = ""


@dataclass(frozen=True)
class Label:
    """A resolved branch target (instruction index)."""

    pc: int


@dataclass
class LInstr:
    """A linked instruction: register ids are kernel-wide, symbols are Loc/Label."""

    op: tuple[str, ...]
    operands: list
    guard: tuple[int, bool] | None
    line: int


@dataclass
class LinkedKernel:
    """A kernel ready to decode: code, register types, and the memory layouts of params, shared and local."""

    name: str
    code: list[LInstr]
    reg_types: list[str]
    params: list[tuple[int, int]]
    param_bytes: int
    shared: dict[str, int]
    static_shared_bytes: int
    dynamic_shared_offset: int
    local_bytes: int
    perf: dict[str, tuple[int, ...]]
    line: int


def param_layout(params: list[Decl]) -> tuple[list[tuple[int, int]], int]:
    """(offset, size) of each kernel parameter and the buffer size, with natural/.align alignment (PTX ISA 5.1.6.1)."""
    out: list[tuple[int, int]] = []
    off = 0
    for d in params:
        align = max(1, d.align)
        off = -(-off // align) * align
        out.append((off, d.size))
        off += d.size
    return out, off


@dataclass
class _Frame:
    """Per-inline-instance mapping of a function's names."""

    func: Func
    reg_base: int
    fparams: list[Loc]
    frets: list[Loc]
    locals: list[Loc]


@dataclass
class _Linker:
    mod: ParsedModule
    kernel: Func
    code: list[LInstr] = field(default_factory=list)
    reg_types: list[str] = field(default_factory=list)
    local_bytes: int = 0
    shared: dict[str, int] = field(default_factory=dict)
    shared_bytes: int = 0
    stack: list[str] = field(default_factory=list)

    def err(self, line: int, message: str) -> PTXError:
        lines = self.mod.lines
        return PTXError(line, lines[line - 1].strip() if 0 < line <= len(lines) else "", message)

    def alloc_local(self, decl: Decl) -> Loc:
        align = max(1, decl.align)
        off = -(-self.local_bytes // align) * align
        self.local_bytes = off + decl.size
        return Loc("local", off)

    def shared_loc(self, decl: Decl, key: str) -> Loc:
        if key not in self.shared:
            align = max(1, decl.align)
            off = -(-self.shared_bytes // align) * align
            self.shared[key] = off
            self.shared_bytes = off + decl.size
        return Loc("shared", self.shared[key])

    def emit_function(self, func: Func, fparams: list[Loc], frets: list[Loc], line: int) -> None:
        if func.name in self.stack:
            raise self.err(line, f"recursive call of {func.name!r} ({' -> '.join(self.stack + [func.name])}) is not "
                                 "supported by the interpreter, which inlines calls")
        self.stack.append(func.name)
        frame = _Frame(func, len(self.reg_types), fparams, frets, [self.alloc_local(d) for d in func.locals])
        self.reg_types.extend(func.regs)
        for d in func.shared:  # function-scope shared variables exist whether or not they are referenced
            self.shared_loc(d, f"{func.name}::{d.name}")
        stmt_pc: list[int] = []
        fixups: list[tuple[int, int, str]] = []  # (code index, operand index, label)
        ret_fixups: list[int] = []
        for st in func.body:
            stmt_pc.append(len(self.code))
            if len(self.code) > _MAX_INLINE_INSTRUCTIONS:
                raise self.err(st.line, "kernel is too large after inlining calls")
            if st.op[0] == "call":
                self.inline_call(st, frame)
            elif st.op[0] == "ret" and not func.entry:
                ret_fixups.append(len(self.code))
                self.code.append(LInstr(("bra", "uni"), [Label(-1)], self.guard(st, frame), st.line))
            else:
                self.code.append(self.resolve_stmt(st, frame, fixups))
        stmt_pc.append(len(self.code))
        end = len(self.code)
        for ci, oi, name in fixups:
            self.code[ci].operands[oi] = Label(stmt_pc[func.labels[name]])
        for ci in ret_fixups:
            self.code[ci].operands[0] = Label(end)
        self.stack.pop()

    def guard(self, st: Stmt, frame: _Frame) -> tuple[int, bool] | None:
        return None if st.guard is None else (st.guard[0] + frame.reg_base, st.guard[1])

    def resolve_stmt(self, st: Stmt, frame: _Frame, fixups: list[tuple[int, int, str]]) -> LInstr:
        ops: list = []
        for k, o in enumerate(st.operands):
            if isinstance(o, Sym) and o.local is None and o.fparam is None and o.fret is None \
                    and o.name in frame.func.labels:
                fixups.append((len(self.code), k, o.name))
                ops.append(Label(-1))
            else:
                ops.append(self.operand(o, frame, st.line))
        return LInstr(st.op, ops, self.guard(st, frame), st.line)

    def operand(self, o: object, frame: _Frame, line: int) -> object:
        if isinstance(o, Reg):
            return Reg(o.id + frame.reg_base)
        if isinstance(o, Not):
            return Not(Reg(o.reg.id + frame.reg_base))
        if isinstance(o, Pair):
            return Pair(self.operand(o.first, frame, line), self.operand(o.second, frame, line))  # type: ignore[arg-type]
        if isinstance(o, Vec):
            return Vec(tuple(self.operand(x, frame, line) for x in o.items))
        if isinstance(o, TexRef):
            return TexRef(self.operand(o.handle, frame, line), Vec(tuple(self.operand(x, frame, line)
                                                                         for x in o.coords.items)))
        if isinstance(o, Addr):
            base = self.operand(o.base, frame, line) if o.base is not None else None
            return Addr(base, o.offset)  # type: ignore[arg-type]
        if isinstance(o, Sym):
            return self.symbol(o, frame, line)
        return o

    def symbol(self, s: Sym, frame: _Frame, line: int) -> Loc:
        if s.local is not None:
            base = frame.locals[s.local]
        elif s.fparam is not None:
            base = frame.fparams[s.fparam]
        elif s.fret is not None:
            base = frame.frets[s.fret]
        else:
            base = self.module_symbol(s.name, frame, line)
        return Loc(base.space, base.offset + s.offset, base.name)

    def module_symbol(self, name: str, frame: _Frame, line: int) -> Loc:
        for d in frame.func.shared:
            if d.name == name:
                return self.shared_loc(d, f"{frame.func.name}::{name}")
        for d in self.mod.variables:
            if d.name != name:
                continue
            if d.space == "shared":
                return Loc("dynshared", 0, name) if d.extern and d.size == 0 else self.shared_loc(d, name)
            return Loc("global", 0, name)
        if name in self.mod.funcs:
            raise self.err(line, f"taking the address of function {name!r} (indirect calls) is not supported")
        raise self.err(line, f"unknown symbol {name!r}")

    def inline_call(self, st: Stmt, frame: _Frame) -> None:
        ops = list(st.operands)
        rets: tuple = ()
        if ops and isinstance(ops[0], ArgList):
            rets = ops.pop(0).items
        if not ops or not isinstance(ops[0], Sym):
            raise self.err(st.line, "indirect calls through a register are not supported")
        callee = self.mod.funcs.get(ops[0].name)
        args: tuple = ops[1].items if len(ops) > 1 and isinstance(ops[1], ArgList) else ()
        if len(ops) > 2 or (len(ops) == 2 and not isinstance(ops[1], ArgList)):
            raise self.err(st.line, "calls with a prototype (indirect calls) are not supported")
        if ops[0].name == "__assertfail" and (callee is None or not callee.defined):
            self.code.append(LInstr(("__assertfail",), [self.call_arg(a, frame, st.line) for a in args],
                                    self.guard(st, frame), st.line))
            return
        if callee is None or not callee.defined:
            raise self.err(st.line, f"call of {ops[0].name!r}, which has no body in this module (external functions "
                                    "such as vprintf/malloc are not supported by the interpreter)")
        if len(args) != len(callee.params) or len(rets) != len(callee.rets):
            raise self.err(st.line, f"call of {callee.name!r} passes {len(args)} arguments and {len(rets)} results; "
                                    f"it declares {len(callee.params)} and {len(callee.rets)}")
        actual = [self.call_arg(a, frame, st.line) for a in args]
        results = [self.call_arg(r, frame, st.line) for r in rets]
        skip = None
        if st.guard is not None:
            skip = len(self.code)
            g = self.guard(st, frame)
            self.code.append(LInstr(("bra",), [Label(-1)], (g[0], not g[1]) if g else None, st.line))
        self.emit_function(callee, actual, results, st.line)
        if skip is not None:
            self.code[skip].operands[0] = Label(len(self.code))

    def call_arg(self, a: object, frame: _Frame, line: int) -> Loc:
        if not isinstance(a, Sym):
            raise self.err(line, "call arguments must be .param variables (register arguments are not supported)")
        loc = self.symbol(a, frame, line)
        if loc.space != "local":
            raise self.err(line, f"call argument {a.name!r} is not a .param variable of the calling function")
        return loc


def link_kernel(mod: ParsedModule, kernel: Func) -> LinkedKernel:
    """Flatten ``kernel`` (an .entry) with all its callees inlined; raises PTXError for what cannot be linked."""
    layout, nbytes = param_layout(kernel.params)
    lk = _Linker(mod, kernel)
    lk.emit_function(kernel, [Loc("kparam", off) for off, _ in layout], [], kernel.line)
    dyn = -(-lk.shared_bytes // 16) * 16
    code = [LInstr(i.op, [_dyn_shared(o, dyn) for o in i.operands], i.guard, i.line) for i in lk.code]
    return LinkedKernel(kernel.name, code, lk.reg_types, layout, nbytes, lk.shared, lk.shared_bytes, dyn,
                        lk.local_bytes, dict(kernel.perf), kernel.line)


def _dyn_shared(o: object, dyn: int) -> object:
    """Place references to extern (dynamic) shared arrays after the static shared variables (16-byte aligned)."""
    if isinstance(o, Loc) and o.space == "dynshared":
        return Loc("shared", dyn + o.offset, o.name)
    if isinstance(o, Addr) and isinstance(o.base, Loc):
        return Addr(_dyn_shared(o.base, dyn), o.offset)  # type: ignore[arg-type]
    return o
