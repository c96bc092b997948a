"""Variable and parameter declarations (PTX ISA 5.1 state spaces, 5.4 variables: ``.align``, vectors, arrays,
initializers), shared by module-scope, parameter-list and function-body parsing."""

from __future__ import annotations

from ..types import WIDTH
from .syntax import TYPES, Decl, FImm
from .tokens import TokenStream, parse_int

__all__ = ["initializer", "variable"]


def variable(ts: TokenStream, space: str, line: int, *, extern: bool = False) -> Decl:
    """Parse ``[.align N] [.v2|.v4] .type name[dims] [= init] ;`` (after the state-space directive)."""
    align = 0
    vec = 1
    elem = None
    while True:
        t = ts.next()
        if t.text == ".align":
            align = ts.int_lit()
        elif t.text in (".v2", ".v4", ".v8"):
            vec = int(t.text[2:])
        elif t.text.startswith(".") and t.text[1:] in TYPES:
            elem = t.text[1:]
        elif t.text.startswith(".ptr") and space == "param":
            if t.text.endswith(".align"):
                align = max(align, ts.int_lit())
        elif t.text in (".global", ".shared", ".local", ".const") and space == "param":
            continue
        elif t.text.startswith("."):
            raise ts.err(f"unsupported variable attribute {t.text!r}", t.line)
        else:
            name = t.text
            break
    if elem is None:
        raise ts.err(f"variable {name!r} has no type", line)
    esize = 16 if elem == "b128" else max(1, WIDTH[elem] // 8)
    esize *= vec
    count = 1
    unsized = False
    while ts.accept("["):
        if ts.accept("]"):
            unsized = True
            continue
        count *= ts.int_lit()
        ts.expect("]")
    init = None
    if ts.accept("="):
        init = initializer(ts)
    if space != "param":
        ts.expect(";")
    if unsized and not extern and init is None and space != "param":
        raise ts.err(f"array {name!r} has no size", line)
    if unsized and init is not None:
        count = len(init)
    return Decl(name, space, elem, 0 if unsized else esize * count, max(align, esize // vec), line, init, extern)


def initializer(ts: TokenStream) -> list:
    items: list = []
    if not ts.accept("{"):
        items.append(_init_item(ts))
        return items
    while not ts.accept("}"):
        if ts.at("{"):
            items.extend(initializer(ts))
        else:
            items.append(_init_item(ts))
        ts.accept(",")
    return items


def _init_item(ts: TokenStream) -> object:
    tok = ts.peek()
    if tok is None:
        raise ts.err("unexpected end in initializer")
    if tok.kind == "fbits":
        ts.next()
        return FImm(int(tok.text[2:], 16), 32 if tok.text[1] in "fF" else 64)
    if tok.text == "-" or tok.kind == "num":
        neg = ts.accept("-")
        t = ts.next()
        val: int | float = float(t.text) if ("." in t.text or "e" in t.text.lower()) and not t.text.startswith(
            ("0x", "0X")) else parse_int(t.text)
        return -val if neg else val
    if tok.text in ("generic", "global"):
        ts.next()
        ts.expect("(")
        name = ts.next().text
        ts.expect(")")
        return ("sym", name, ts.sym_offset())
    if tok.kind == "id":
        ts.next()
        return ("sym", tok.text, ts.sym_offset())
    raise ts.err(f"unsupported initializer item {tok.text!r}", tok.line)
