"""Tokenizer for PTX text (PTX ISA chapter 4 "Syntax")."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ..errors import PTXError

__all__ = ["Token", "tokenize"]


@dataclass(frozen=True)
class Token:
    """One token: ``kind`` is "id", "num", "fbits" (0f/0d literal), "str" or "punct"; ``line`` is 1-based."""

    kind: str
    text: str
    line: int


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"[^"\n]*")
  | (?P<fbits>0[fF][0-9a-fA-F]{8}(?![\w$])|0[dD][0-9a-fA-F]{16}(?![\w$]))
  | (?P<num>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)U?(?![\w$]))
  | (?P<id>[A-Za-z_$%.](?:[A-Za-z0-9_$.%]|::)*)
  | (?P<punct>[{}()\[\],;:@!|+\-<>=*])
""", re.VERBOSE)
# debug-line directives have no terminating semicolon, so they are removed line by line
_LINE_DIRECTIVE = re.compile(r"^\s*(\.loc|\.file|@@DWARF)\b.*$", re.MULTILINE)


def _strip_comments(text: str) -> str:
    """Blank out // and /* */ comments, keeping newlines so line numbers stay right (strings are respected)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            j = n if j < 0 else j + 1
            out.append(text[i:j])
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            j = i
            while j < n and text[j] not in '"/':
                j += 1
            if j == i:
                j += 1
            out.append(text[i:j])
            i = j
    return "".join(out)


def tokenize(text: str) -> list[Token]:
    """Split PTX text into tokens; raises PTXError at the first character that starts no token."""
    clean = _LINE_DIRECTIVE.sub("", _strip_comments(text))
    line_starts = [0] + [m.end() for m in re.finditer("\n", clean)]
    lines = text.splitlines()
    tokens: list[Token] = []
    pos = 0
    while pos < len(clean):
        m = _TOKEN.match(clean, pos)
        if m is None:
            ln = bisect.bisect_right(line_starts, pos)
            raise PTXError(ln, lines[ln - 1].strip() if ln <= len(lines) else "", f"unexpected character {clean[pos]!r}")
        kind = m.lastgroup
        if kind != "ws":
            line = bisect.bisect_right(line_starts, m.start())
            text = m.group()
            if kind == "id" and text.startswith(".") and "." in text[1:] and "::" not in text:
                # a directive glued to its type, as in CUDA headers' inline asm: ".reg.b32" is ".reg" ".b32"
                tokens.extend(Token("id", "." + part, line) for part in text[1:].split("."))
            else:
                tokens.append(Token(kind or "", text, line))
        pos = m.end()
    return tokens
