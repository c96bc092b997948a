"""A cursor over PTX tokens with the small parsing steps every part of the parser uses (PTX ISA 4.x literals)."""

from __future__ import annotations

from ..errors import PTXError
from .lexer import Token, tokenize

__all__ = ["TokenStream", "parse_int"]


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


class TokenStream:
    """The tokens of one PTX text and the position ``i`` of the next one; errors name the current line."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.toks: list[Token] = tokenize(text)
        self.i = 0

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

    def sym_offset(self) -> int:
        if self.accept("+"):
            return self.int_lit()
        return 0
