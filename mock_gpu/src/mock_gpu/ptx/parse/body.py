"""Function bodies: register declarations, scoped ``.local``/``.param``/``.shared`` declarations, labels and
instructions with their operands (PTX ISA 11.2 function bodies, 6 instruction operands).

Registers and scoped declarations are resolved while parsing (nested ``{ }`` blocks may shadow outer names, as
NVRTC's inline-asm expansions do); labels, module symbols and callees are resolved by the linker.
"""

from __future__ import annotations

from ..errors import PTXError
from ..types import STORAGE
from .declarations import variable
from .lexer import Token
from .syntax import SPECIAL_REGS, Addr, ArgList, FImm, Func, Imm, Not, Pair, Reg, Sink, Special, Stmt, Sym, TexRef, Vec
from .tokens import TokenStream, parse_int

__all__ = ["BodyParser"]

_MAX_REGS = 1 << 20  # registers per function; far above what compilers emit, low enough to fail fast on garbage


class BodyParser:
    """Parses one function body: declarations, labels and instructions with lexical scopes."""

    def __init__(self, p: TokenStream, func: Func) -> None:
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
            decl = variable(p, t[1:], tok.line)
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
            return self.texture() if op[0] == "tex" else self.address()
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

    def texture(self) -> TexRef:
        p = self.p
        handle = self.simple()
        p.expect(",")
        coords = self.operand(("tex",))
        if not isinstance(coords, Vec):
            raise p.err("a texture operand is [texture, {coordinates}]")
        p.expect("]")
        return TexRef(handle, coords)

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
