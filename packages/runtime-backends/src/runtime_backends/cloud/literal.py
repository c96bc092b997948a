"""Reading a request list back from its text without running it: a whitelist evaluator over Python's AST.

Accepted: ``int``/``str``/``bool``/``None`` constants, negative int literals (``-3``), tuples, lists, and calls of the
protocol's types (``protocol.REQUEST_TYPES``, ``BufferSpec``, ``dtypes.imagef``/``dtypes.imageh``) with positional and
keyword arguments. Everything else -- names, attributes, operators, floats, bytes, comprehensions, ``*args`` -- is
refused with a :class:`LiteralError` naming it. Nothing is ever imported, looked up or executed: the evaluator only
constructs the whitelisted dataclasses, whose own checks validate every field.

Bounds (``limits.Limits``) are checked before the work they bound: the text's length, then a cheap count of the
separators that every AST node needs (so a body of millions of tiny elements is refused before ``ast.parse`` builds
them), then the nesting depth and the number of requests while evaluating.
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Callable
from typing import Any

from runtime_backends.cloud.limits import Limits
from runtime_backends.cloud.protocol import IMAGE_KINDS, REQUEST_TYPES, BufferSpec, Image, ProtocolError, Request

__all__ = ["LiteralError", "decode_requests", "CALLABLES"]

CALLABLES: dict[str, Callable[..., Any]] = {cls.__name__: cls for cls in (*REQUEST_TYPES, BufferSpec)}
_CONSTANT_TYPES = (int, str, bool, type(None))
_SEPARATORS = (b",", b"(", b"[", b"=", b"-")
_FILENAME = "<cloud request list>"
# the tokenizer warns about oddities such as "1if" or "\\d" in hostile texts; refused anyway, they need not fill the log
warnings.filterwarnings("ignore", module=r"<cloud request list>\Z")
_NODES_PER_REQUEST = 64
"""A request's text holds at most ~20 separators (a ProgramExec with 3-dim sizes); the bound leaves room for bufs/vals."""


class LiteralError(ProtocolError):
    """A request list that is not a whitelisted literal, or exceeds a bound; the server answers ``400``."""


def decode_requests(text: bytes | bytearray | memoryview, limits: Limits) -> list[Request]:
    """The requests of a request-list blob (UTF-8 text of a list literal).

    Raises :class:`LiteralError` (a ``ProtocolError``) for text that is too long, not UTF-8, not Python syntax, not a
    list, nests deeper than ``limits.max_depth``, holds more than ``limits.max_requests`` requests or anything outside
    the whitelist; ``ProtocolError`` for a field a request type refuses. Messages name the request's index.
    """
    if len(text) > limits.max_literal_bytes:
        raise LiteralError(f"request list is {len(text)} bytes, the limit is {limits.max_literal_bytes}")
    raw = bytes(text)
    separators = sum(raw.count(s) for s in _SEPARATORS)
    if separators > _NODES_PER_REQUEST * limits.max_requests:
        raise LiteralError(f"request list has {separators} separators, more than {limits.max_requests} requests need")
    try:
        tree = ast.parse(raw.decode("utf-8"), filename=_FILENAME, mode="eval")
    except UnicodeDecodeError as e:
        raise LiteralError(f"request list is not UTF-8 text: {e}") from None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise LiteralError(f"request list is not a Python literal: {type(e).__name__}: {e}") from None
    if not isinstance(tree.body, ast.List):
        raise LiteralError(f"request list must be a list literal [...], got {type(tree.body).__name__}")
    if len(tree.body.elts) > limits.max_requests:
        raise LiteralError(f"request list has {len(tree.body.elts)} requests, the limit is {limits.max_requests}")
    out: list[Request] = []
    evaluator = _Evaluator(limits.max_depth)
    for i, node in enumerate(tree.body.elts):
        try:
            value = evaluator.eval(node, 2)
        except ProtocolError as e:
            raise type(e)(f"request {i}: {e}") from None
        if not isinstance(value, REQUEST_TYPES):
            raise LiteralError(f"request {i}: expected one of {', '.join(t.__name__ for t in REQUEST_TYPES)}, got "
                               f"{value!r:.80}")
        out.append(value)  # type: ignore[arg-type]  # an instance of one of REQUEST_TYPES, checked above
    return out


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
