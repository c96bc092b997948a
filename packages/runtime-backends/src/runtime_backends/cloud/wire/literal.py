"""Reading a request list back from its text without running it: a whitelist evaluator over Python's AST.

Accepted: ``int``/``str``/``bool``/``None`` constants, negative int literals (``-3``), tuples, lists, and calls of the
protocol's types (``protocol.REQUEST_TYPES``, ``BufferSpec``, ``dtypes.imagef``/``dtypes.imageh``) with positional and
keyword arguments. Everything else -- names, attributes, operators, floats, bytes, comprehensions, ``*args`` -- is
refused with a :class:`LiteralError` naming it. Nothing is ever imported, looked up or executed: the evaluator only
constructs the whitelisted dataclasses, whose own checks validate every field.

Bounds (``protocol.WireBounds``, the server's ``Limits``) are checked before the work they bound. ``ast.parse`` costs
~1 KiB of memory per node, so a whole 16 MiB list of tiny elements would take gigabytes: the text is first split at
its top-level commas by a scanner that knows string literals (so the number of requests is bounded before anything is
parsed), each request is bounded in bytes and separators (which every AST node needs), and the requests are parsed in
groups of at most ``_GROUP_BYTES``. Nesting depth is checked while evaluating.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings
from collections.abc import Callable
from typing import Any

from runtime_backends.cloud.wire.protocol import (
    IMAGE_KINDS,
    MAX_ARGS,
    REQUEST_TYPES,
    BufferSpec,
    Image,
    ProtocolError,
    Request,
    WireBounds,
)

__all__ = ["LiteralError", "decode_requests", "CALLABLES"]

CALLABLES: dict[str, Callable[..., Any]] = {cls.__name__: cls for cls in (*REQUEST_TYPES, BufferSpec)}
_CONSTANT_TYPES = (int, str, bool, type(None))
_SEPARATORS = (b",", b"(", b"[", b"=", b"-")
_FILENAME = "<cloud request list>"
# the tokenizer warns about oddities such as "1if" or "\\d" in hostile texts; refused anyway, they need not fill the log
warnings.filterwarnings("ignore", module=r"<cloud request list>\Z")
_MAX_REQUEST_BYTES = 256 << 10
"""Text of one request: a ProgramExec with MAX_ARGS buffers and MAX_ARGS vals of 20 digits takes ~180 KiB."""
_MAX_REQUEST_SEPARATORS = 2 * MAX_ARGS + 64
"""Separators of one request: one per buffer and val, ~20 for the rest of a ProgramExec."""
_GROUP_BYTES = 64 << 10
"""Requests parsed by one ``ast.parse`` (its memory is ~500 times its text at worst)."""
# strings as "unrolled loops" (a class repeated, not an alternation: re keeps no state per character of a long string)
_TOKENS = re.compile(rb"""'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"|[][(){},]""", re.S)
_OPENERS = {ord(")"): ord("("), ord("]"): ord("["), ord("}"): ord("{")}


class LiteralError(ProtocolError):
    """A request list that is not a whitelisted literal, or exceeds a bound; the server answers ``400``."""


def decode_requests(text: bytes | bytearray | memoryview, limits: WireBounds) -> list[Request]:
    """The requests of a request-list blob (UTF-8 text of a list literal).

    Raises :class:`LiteralError` (a ``ProtocolError``) for text that is too long, not UTF-8, not Python syntax, not a
    list, nests deeper than ``limits.max_depth``, holds more than ``limits.max_requests`` requests or anything outside
    the whitelist; ``ProtocolError`` for a field a request type refuses. Messages name the request's index.
    """
    if len(text) > limits.max_literal_bytes:
        raise LiteralError(f"request list is {len(text)} bytes, the limit is {limits.max_literal_bytes}")
    raw = bytes(text)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LiteralError(f"request list is not UTF-8 text: {e}") from None
    out: list[Request] = []
    evaluator = _Evaluator(limits.max_depth)
    for group in _groups(raw, _element_spans(raw, limits.max_requests)):
        for node in _parse_group(group):
            out.append(_request(evaluator, node, len(out)))
    if len(out) > limits.max_requests:
        raise LiteralError(f"request list has {len(out)} requests, the limit is {limits.max_requests}")
    return out


def _element_spans(raw: bytes, max_requests: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each top-level element of the list literal ``raw`` (its commas at depth 1), with the
    per-request bounds checked. Strings are skipped whole, so brackets and commas inside them do not count."""
    stack: list[int] = []
    spans: list[tuple[int, int]] = []
    start, end = 0, None
    for m in _TOKENS.finditer(raw):
        c = raw[m.start()]
        if not stack and (c != ord("[") or raw[:m.start()].strip()):
            raise LiteralError(f"request list must be a list literal [...], got {raw[:40]!r}")
        if c in b"'\"":
            continue
        if c in b"([{":
            stack.append(c)
            if len(stack) == 1:
                start = m.end()
        elif c == ord(","):
            if len(stack) == 1:
                spans.append(_span(raw, start, m.start(), len(spans), max_requests))
                start = m.end()
        elif not stack or stack.pop() != _OPENERS[c]:
            raise LiteralError(f"request list is not a Python literal: unbalanced {chr(c)!r} at byte {m.start()}")
        elif not stack:
            spans.append(_span(raw, start, m.start(), len(spans), max_requests))
            end = m.end()
            break
    if end is None:
        raise LiteralError("request list is not a Python literal: it is not a closed list [...]")
    if any(line.strip() and not line.lstrip().startswith(b"#") for line in raw[end:].splitlines()):
        raise LiteralError(f"request list must be one list literal [...]; text follows it at byte {end}")
    return spans


def _span(raw: bytes, start: int, end: int, index: int, max_requests: int) -> tuple[int, int]:
    piece = raw[start:end]
    if index >= max_requests and piece.strip():  # blank: the end of a list with a trailing comma, no request
        raise LiteralError(f"request list has more than {max_requests} requests, the limit is {max_requests}")
    if end - start > _MAX_REQUEST_BYTES:
        raise LiteralError(f"request {index} is {end - start} bytes, the limit is {_MAX_REQUEST_BYTES}")
    if (separators := sum(piece.count(s) for s in _SEPARATORS)) > _MAX_REQUEST_SEPARATORS:
        raise LiteralError(f"request {index} has {separators} separators, more than a request needs "
                           f"({_MAX_REQUEST_SEPARATORS})")
    return start, end


def _groups(raw: bytes, spans: list[tuple[int, int]]) -> list[bytes]:
    """The elements as list texts ``[a,b,...]`` of about ``_GROUP_BYTES`` each: within a group, the original text
    (a trailing comment ends at the added newline)."""
    groups: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for start, end in spans:
        if group and size + end - start > _GROUP_BYTES:
            groups.append(b"[" + b",".join(group) + b"\n]")
            group, size = [], 0
        group.append(raw[start:end])
        size += end - start
    return [*groups, b"[" + b",".join(group) + b"\n]"]


def _parse_group(group: bytes) -> list[ast.expr]:
    try:
        tree = ast.parse(group.decode("utf-8"), filename=_FILENAME, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise LiteralError(f"request list is not a Python literal: {type(e).__name__}: {e}") from None
    if not isinstance(tree.body, ast.List):  # a comprehension, say
        raise LiteralError(f"{type(tree.body).__name__} is not allowed in a request list (only a list literal)")
    return tree.body.elts


def _request(evaluator: _Evaluator, node: ast.expr, i: int) -> Request:
    try:
        value = evaluator.eval(node, 2)
    except ProtocolError as e:
        raise type(e)(f"request {i}: {e}") from None
    if not isinstance(value, REQUEST_TYPES):
        raise LiteralError(f"request {i}: expected one of {', '.join(t.__name__ for t in REQUEST_TYPES)}, got "
                           f"{value!r:.80}")
    return value  # type: ignore[return-value]  # an instance of one of REQUEST_TYPES, checked above


class _Evaluator:
    """Evaluates one request's AST; ``depth`` counts the enclosing nodes (the list is level 1)."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth

    def eval(self, node: ast.AST, depth: int) -> Any:
        if depth > self.max_depth:
            raise LiteralError(f"nesting deeper than {self.max_depth} levels")
        kind = type(node)
        if kind is ast.Constant:
            return _constant(node.value)  # type: ignore[attr-defined]
        if kind is ast.UnaryOp:
            return _negative(node)  # type: ignore[arg-type]
        if kind is ast.Tuple:
            return tuple(self.eval(e, depth + 1) for e in node.elts)  # type: ignore[attr-defined]
        if kind is ast.List:
            return [self.eval(e, depth + 1) for e in node.elts]  # type: ignore[attr-defined]
        if kind is ast.Call:
            return self._call(node, depth)  # type: ignore[arg-type]
        raise LiteralError(f"{kind.__name__} is not allowed in a request list (only constants, negative ints, tuples, "
                           f"lists and calls of {', '.join(sorted(CALLABLES))}, dtypes.imagef, dtypes.imageh)")

    def _call(self, node: ast.Call, depth: int) -> Any:
        func, name = _callee(node.func)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise LiteralError(f"{name}(...): *args and **kwargs are not allowed")
        args = [self.eval(a, depth + 1) for a in node.args]
        kwargs = {k.arg: self.eval(k.value, depth + 1) for k in node.keywords if k.arg is not None}
        try:
            return func(*args, **kwargs)
        except TypeError as e:  # wrong arity or an unknown keyword: the dataclass constructor's own message
            raise LiteralError(f"{name}(...): {e}") from None


def _constant(value: Any) -> Any:
    if type(value) not in _CONSTANT_TYPES:
        raise LiteralError(f"constant {value!r:.40} of type {type(value).__name__} is not allowed (only int, str, "
                           f"bool and None)")
    return value


def _negative(node: ast.UnaryOp) -> int:
    operand = node.operand
    if isinstance(node.op, ast.USub) and type(operand) is ast.Constant and type(operand.value) is int:
        return -operand.value
    raise LiteralError("the only operator allowed is unary minus on an int literal (-3)")


def _callee(func: ast.expr) -> tuple[Callable[..., Any], str]:
    if type(func) is ast.Name and func.id in CALLABLES:
        return CALLABLES[func.id], func.id
    if (type(func) is ast.Attribute and type(func.value) is ast.Name and func.value.id == "dtypes"
            and func.attr in IMAGE_KINDS):
        return functools.partial(Image, func.attr), f"dtypes.{func.attr}"
    shown = repr(func.id) if type(func) is ast.Name else f"a {type(func).__name__} expression"
    raise LiteralError(f"call of {shown} is not allowed; the callables are {', '.join(sorted(CALLABLES))}, "
                       f"dtypes.imagef and dtypes.imageh")
