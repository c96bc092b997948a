"""Parser: PTX text -> module-level declarations and per-function statement lists (PTX ISA chapters 4, 5, 11).

Registers and scoped ``.param``/``.local`` declarations are resolved while parsing (nested ``{ }`` blocks may shadow
outer names, as NVRTC's inline-asm expansions do); labels, module symbols and callees are resolved by the linker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import PTXError
from .lexer import Token, tokenize
from .types import STORAGE, WIDTH

__all__ = ["Reg", "Special", "Imm", "FImm", "Sym", "Addr", "Vec", "Not", "Sink", "Pair", "ArgList", "Decl",
           "Stmt", "Func", "ParsedModule", "parse", "SPECIAL_REGS"]

TYPES = frozenset(STORAGE) | {"b128"}


# ----- operands -----
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
    + [f"%{n}.{c}" for n in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid") for c in "xyz"])


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


_MAX_REGS = 1 << 20  # registers per function; far above what compilers emit, low enough to fail fast on garbage
_LINKAGE = {".visible", ".extern", ".weak", ".common"}
_PERF = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".maxclusterrank",
         ".reqnctapercluster", ".explicitcluster", ".noreturn", ".blocksareclusters"}


def parse_int(text: str) -> int:
    """Value of a PTX integer literal (decimal, 0x hex, 0b binary, leading-0 octal, optional U suffix)."""
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0" and t.isdigit():
        return int(t, 8)
    return int(t)


class _Parser:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.toks: list[Token] = tokenize(text)
        self.i = 0
        self.mod = ParsedModule(lines=self.lines)

    # ----- token helpers -----
    def err(self, message: str, line: int | None = None) -> PTXError:
        if line is None:
            line = self.toks[min(self.i, len(self.toks) - 1)].line if self.toks else 1
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return PTXError(line, text, message)

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self) -> Token:
        if self.i >= len(self.toks):
            raise self.err("unexpected end of PTX text")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.text == text

    def expect(self, text: str) -> Token:
        tok = self.next()
        if tok.text != text:
            raise self.err(f"expected {text!r}, found {tok.text!r}", tok.line)
        return tok

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def int_lit(self) -> int:
        neg = self.accept("-")
        tok = self.next()
        if tok.kind != "num" or "." in tok.text or "e" in tok.text.lower().lstrip("0x"):
            raise self.err(f"expected an integer, found {tok.text!r}", tok.line)
        return -parse_int(tok.text) if neg else parse_int(tok.text)

    def skip_statement(self) -> None:
        while not self.accept(";"):
            self.next()

    def skip_braces(self) -> None:
        while not self.at("{"):
            self.next()
        depth = 0
        while True:
            tok = self.next()
            depth += tok.text == "{"
            depth -= tok.text == "}"
            if depth == 0:
                return

    # ----- module level -----
    def parse(self) -> ParsedModule:
        while self.peek() is not None:
            self.top_level()
        if self.mod.version == (0, 0) or not self.mod.target:
            raise PTXError(1, self.lines[0].strip() if self.lines else "",
                           "not a PTX module: the .version and .target directives are missing (PTX ISA 11.1)")
        return self.mod

    def top_level(self) -> None:
        tok = self.next()
        t = tok.text
        if t == ".version":
            num = self.next()
            major, _, minor = num.text.partition(".")
            if num.kind != "num" or not major.isdigit() or not (minor or "0").isdigit():
                raise self.err(f"expected a version number such as 8.0 after .version, found {num.text!r}", num.line)
            self.mod.version = (int(major), int(minor or 0))
        elif t == ".target":
            self.mod.target.append(self.next().text)
            while self.accept(","):
                self.mod.target.append(self.next().text)
        elif t == ".address_size":
            self.mod.address_size = self.int_lit()
            if self.mod.address_size != 64:
                raise self.err("only .address_size 64 is supported", tok.line)
        elif t == ".pragma":
            self.skip_statement()
        elif t == ".section":
            self.skip_braces()
        elif t in _LINKAGE or t in (".entry", ".func", ".global", ".const", ".shared", ".alias"):
            self.declaration(tok)
        else:
            raise self.err(f"unsupported module-level directive or token {t!r}", tok.line)

    def declaration(self, first: Token) -> None:
        linkage: set[str] = set()
        tok = first
        while tok.text in _LINKAGE:
            linkage.add(tok.text)
            tok = self.next()
        if tok.text in (".entry", ".func"):
            self.function(tok, tok.text == ".entry", ".extern" in linkage)
        elif tok.text in (".global", ".const", ".shared"):
            decl = self.variable(tok.text[1:], tok.line, extern=".extern" in linkage)
            self.mod.variables.append(decl)
        else:
            raise self.err(f"unsupported declaration {tok.text!r}", tok.line)

    def variable(self, space: str, line: int, *, extern: bool = False) -> Decl:
        """Parse ``[.align N] [.v2|.v4] .type name[dims] [= init] ;`` (after the state-space directive)."""
        align = 0
        vec = 1
        elem = None
        while True:
            t = self.next()
            if t.text == ".align":
                align = self.int_lit()
            elif t.text in (".v2", ".v4", ".v8"):
                vec = int(t.text[2:])
            elif t.text.startswith(".") and t.text[1:] in TYPES:
                elem = t.text[1:]
            elif t.text.startswith(".ptr") and space == "param":
                if t.text.endswith(".align"):
                    align = max(align, self.int_lit())
            elif t.text in (".global", ".shared", ".local", ".const") and space == "param":
                continue
            elif t.text.startswith("."):
                raise self.err(f"unsupported variable attribute {t.text!r}", t.line)
            else:
                name = t.text
                break
        if elem is None:
            raise self.err(f"variable {name!r} has no type", line)
        esize = 16 if elem == "b128" else max(1, WIDTH[elem] // 8)
        esize *= vec
        count = 1
        unsized = False
        while self.accept("["):
            if self.accept("]"):
                unsized = True
                continue
            count *= self.int_lit()
            self.expect("]")
        init = None
        if self.accept("="):
            init = self.initializer()
        if space != "param":
            self.expect(";")
        if unsized and not extern and init is None and space != "param":
            raise self.err(f"array {name!r} has no size", line)
        if unsized and init is not None:
            count = len(init)
        return Decl(name, space, elem, 0 if unsized else esize * count, max(align, esize // vec), line, init, extern)

    def initializer(self) -> list:
        items: list = []
        if not self.accept("{"):
            items.append(self.init_item())
            return items
        while not self.accept("}"):
            if self.at("{"):
                items.extend(self.initializer())
            else:
                items.append(self.init_item())
            self.accept(",")
        return items

    def init_item(self) -> object:
        tok = self.peek()
        if tok is None:
            raise self.err("unexpected end in initializer")
        if tok.kind == "fbits":
            self.next()
            return FImm(int(tok.text[2:], 16), 32 if tok.text[1] in "fF" else 64)
        if tok.text == "-" or tok.kind == "num":
            neg = self.accept("-")
            t = self.next()
            val: int | float = float(t.text) if ("." in t.text or "e" in t.text.lower()) and not t.text.startswith(
                ("0x", "0X")) else parse_int(t.text)
            return -val if neg else val
        if tok.text in ("generic", "global"):
            self.next()
            self.expect("(")
            name = self.next().text
            self.expect(")")
            return ("sym", name, self.sym_offset())
        if tok.kind == "id":
            self.next()
            return ("sym", tok.text, self.sym_offset())
        raise self.err(f"unsupported initializer item {tok.text!r}", tok.line)

    def sym_offset(self) -> int:
        if self.accept("+"):
            return self.int_lit()
        return 0

    # ----- functions -----
    def function(self, kw: Token, entry: bool, extern: bool) -> None:
        rets: list[Decl] = []
        if not entry and self.at("("):
            rets = self.param_list()
        name = self.next().text
        params = self.param_list() if self.at("(") else []
        func = self.mod.funcs.get(name)
        if func is None:
            func = Func(name, entry, kw.line, params, rets)
            self.mod.funcs[name] = func
        elif func.defined:
            raise self.err(f"function {name!r} is defined twice", kw.line)
        else:
            func.params, func.rets, func.line = params, rets, kw.line
        while self.peek() is not None and self.peek().text in _PERF:  # type: ignore[union-attr]
            d = self.next().text
            vals = []
            if d not in (".explicitcluster", ".noreturn", ".blocksareclusters"):
                vals.append(self.int_lit())
                while self.accept(","):
                    vals.append(self.int_lit())
            func.perf[d] = tuple(vals)
        if self.accept(";"):
            return
        if extern:
            raise self.err(f"extern function {name!r} cannot have a body", kw.line)
        func.defined = True
        _BodyParser(self, func).parse_body()

    def param_list(self) -> list[Decl]:
        self.expect("(")
        out: list[Decl] = []
        while not self.accept(")"):
            t = self.next()
            if t.text == ".reg":
                raise self.err("register (.reg) function parameters are not supported; use .param", t.line)
            if t.text != ".param":
                raise self.err(f"expected .param, found {t.text!r}", t.line)
            out.append(self.variable("param", t.line))
            self.accept(",")
        return out


class _BodyParser:
    """Parses one function body: declarations, labels and instructions with lexical scopes."""

    def __init__(self, p: _Parser, func: Func) -> None:
        self.p = p
        self.f = func
        base: dict[str, tuple[str, int]] = {}
        for k, d in enumerate(func.params):
            base[d.name] = ("fparam", k)
        for k, d in enumerate(func.rets):
            base[d.name] = ("fret", k)
        self.scopes: list[dict[str, tuple[str, int]]] = [base]

    def lookup(self, name: str) -> tuple[str, int] | None:
        for scope in reversed(self.scopes):
            hit = scope.get(name)
            if hit is not None:
                return hit
        return None

    def parse_body(self) -> None:
        p = self.p
        p.expect("{")
        self.scopes.append({})
        while True:
            tok = p.peek()
            if tok is None:
                raise p.err(f"function {self.f.name!r} is not closed with '}}'")
            if tok.text == "}":
                p.next()
                self.scopes.pop()
                if len(self.scopes) == 1:
                    return
            elif tok.text == "{":
                p.next()
                self.scopes.append({})
            else:
                self.statement()

    def statement(self) -> None:
        p = self.p
        tok = p.next()
        t = tok.text
        nxt = p.peek()
        if nxt is not None and nxt.text == ":" and not t.startswith("."):
            p.next()
            if t in self.f.labels:
                raise p.err(f"label {t!r} defined twice", tok.line)
            self.f.labels[t] = len(self.f.body)
            return
        if t == ".reg":
            self.reg_decl(tok)
        elif t in (".local", ".param", ".shared"):
            decl = p.variable(t[1:], tok.line)
            if t == ".param":
                p.expect(";")
            if t == ".shared":
                self.f.shared.append(decl)
            else:
                self.scopes[-1][decl.name] = ("local", len(self.f.locals))
                self.f.locals.append(decl)
        elif t == ".pragma":
            p.skip_statement()
        elif t.startswith(".") and t not in (".loc",):
            raise p.err(f"unsupported directive {t!r} in function body", tok.line)
        else:
            self.instruction(tok)

    def reg_decl(self, tok: Token) -> None:
        p = self.p
        rtype = None
        while True:
            t = p.next()
            if t.text in (".v2", ".v4"):
                raise p.err("vector registers are not supported", t.line)
            if t.text.startswith(".") and t.text[1:] in STORAGE:
                rtype = t.text[1:]
                continue
            if rtype is None:
                raise p.err(f"register declaration needs a type, found {t.text!r}", t.line)
            name = t.text
            if p.accept("<"):
                count = p.int_lit()
                p.expect(">")
                if not 0 <= count <= _MAX_REGS - len(self.f.regs):
                    raise p.err(f"register declaration {name}<{count}> exceeds the limit of {_MAX_REGS} registers "
                                "per function", t.line)
                for k in range(count):
                    self.add_reg(f"{name}{k}", rtype)
            else:
                self.add_reg(name, rtype)
            if p.accept(";"):
                return
            p.expect(",")

    def add_reg(self, name: str, rtype: str) -> None:
        self.scopes[-1][name] = ("reg", len(self.f.regs))
        self.f.regs.append(rtype)

    def instruction(self, tok: Token) -> None:
        p = self.p
        guard = None
        if tok.text == "@":
            neg = p.accept("!")
            g = p.next()
            hit = self.lookup(g.text)
            if hit is None or hit[0] != "reg" or self.f.regs[hit[1]] != "pred":
                raise p.err(f"guard {g.text!r} is not a predicate register", g.line)
            guard = (hit[1], neg)
            tok = p.next()
        if tok.kind != "id" or tok.text.startswith((".", "%")):
            raise p.err(f"expected an instruction, found {tok.text!r}", tok.line)
        op = tuple(tok.text.split("."))
        operands: list = []
        try:
            if not p.at(";"):
                operands.append(self.operand(op))
                while p.accept(","):
                    operands.append(self.operand(op))
            p.expect(";")
        except PTXError as e:
            raise p.err(f"cannot parse the operands of {tok.text!r} (unsupported form?): {e.message}", tok.line) from None
        self.f.body.append(Stmt(tok.line, op, operands, guard))

    def operand(self, op: tuple[str, ...]) -> object:
        p = self.p
        tok = p.peek()
        if tok is None:
            raise p.err("unexpected end of instruction")
        if tok.text == "{":
            p.next()
            items = []
            while not p.accept("}"):
                items.append(self.simple())
                p.accept(",")
            return Vec(tuple(items))
        if tok.text == "[":
            p.next()
            return self.address()
        if tok.text == "(":
            p.next()
            items = []
            while not p.accept(")"):
                items.append(self.simple())
                p.accept(",")
            return ArgList(tuple(items))
        if tok.text == "!":
            p.next()
            r = self.simple()
            if not isinstance(r, Reg):
                raise p.err("'!' applies only to predicate registers", tok.line)
            return Not(r)
        first = self.simple()
        if p.accept("|"):
            second = self.simple()
            if not isinstance(first, (Reg, Sink)) or not isinstance(second, (Reg, Sink)):
                raise p.err("'|' joins two destination registers", tok.line)
            return Pair(first, second)
        return first

    def simple(self) -> object:
        p = self.p
        tok = p.next()
        if tok.kind == "fbits":
            return FImm(int(tok.text[2:], 16), 32 if tok.text[1] in "fF" else 64)
        if tok.text == "-" or tok.kind == "num":
            neg = tok.text == "-"
            t = p.next() if neg else tok
            if t.kind == "fbits":
                raise p.err("negated 0f/0d literals are not supported", t.line)
            if t.kind != "num":
                raise p.err(f"expected a number after '-', found {t.text!r}", t.line)
            text = t.text
            is_f = ("." in text or "e" in text.lower()) and not text.lower().startswith("0x")
            val: int | float = float(text) if is_f else parse_int(text)
            return Imm(-val if neg else val)
        if tok.text == "_":
            return Sink()
        if tok.kind != "id":
            raise p.err(f"unexpected operand token {tok.text!r}", tok.line)
        return self.named(tok)

    def named(self, tok: Token) -> object:
        p = self.p
        hit = self.lookup(tok.text)
        if hit is not None and hit[0] == "reg":
            return Reg(hit[1])
        if hit is None and tok.text in SPECIAL_REGS:
            return Special(tok.text)
        if hit is None and tok.text.startswith("%"):
            raise p.err(f"undeclared register {tok.text!r}", tok.line)
        off = p.sym_offset()
        if hit is None:
            return Sym(tok.text, off)
        kind, k = hit
        return Sym(tok.text, off, local=k if kind == "local" else None, fparam=k if kind == "fparam" else None,
                   fret=k if kind == "fret" else None)

    def address(self) -> Addr:
        p = self.p
        base: Reg | Sym | None = None
        offset = 0
        tok = p.peek()
        if tok is not None and tok.kind == "id":
            b = self.named(p.next())
            if isinstance(b, Sym):
                base, offset = Sym(b.name, 0, b.local, b.fparam, b.fret), b.offset
            elif isinstance(b, Reg):
                base = b
                if p.accept("+"):
                    offset = p.int_lit()
            else:
                raise p.err(f"special register {tok.text} cannot be an address", tok.line)
        else:
            offset = p.int_lit()
        if p.accept("+"):
            offset += p.int_lit()
        p.expect("]")
        return Addr(base, offset)


def parse(text: str) -> ParsedModule:
    """Parse PTX text; raises PTXError (with line) on syntax errors or unsupported declarations."""
    return _Parser(text).parse()
