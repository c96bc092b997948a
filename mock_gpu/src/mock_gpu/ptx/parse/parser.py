"""Parser: PTX text -> module-level directives and declarations plus per-function statement lists (PTX ISA
chapter 11 directives; function bodies are parsed by :mod:`mock_gpu.ptx.body`, declarations by
:mod:`mock_gpu.ptx.declarations`, the nodes are those of :mod:`mock_gpu.ptx.syntax`)."""

from __future__ import annotations

from ..errors import PTXError
from .body import BodyParser
from .declarations import variable
from .lexer import Token
from .syntax import Decl, Func, ParsedModule
from .tokens import TokenStream

__all__ = ["parse"]

_LINKAGE = {".visible", ".extern", ".weak", ".common"}
_PERF = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".maxclusterrank",
         ".reqnctapercluster", ".explicitcluster", ".noreturn", ".blocksareclusters"}


class _ModuleParser(TokenStream):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.mod = ParsedModule(lines=self.lines)

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
            decl = variable(self, tok.text[1:], tok.line, extern=".extern" in linkage)
            self.mod.variables.append(decl)
        else:
            raise self.err(f"unsupported declaration {tok.text!r}", tok.line)

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
        BodyParser(self, func).parse_body()

    def param_list(self) -> list[Decl]:
        self.expect("(")
        out: list[Decl] = []
        while not self.accept(")"):
            t = self.next()
            if t.text == ".reg":
                raise self.err("register (.reg) function parameters are not supported; use .param", t.line)
            if t.text != ".param":
                raise self.err(f"expected .param, found {t.text!r}", t.line)
            out.append(variable(self, "param", t.line))
            self.accept(",")
        return out


def parse(text: str) -> ParsedModule:
    """Parse PTX text; raises PTXError (with line) on syntax errors or unsupported declarations."""
    return _ModuleParser(text).parse()
