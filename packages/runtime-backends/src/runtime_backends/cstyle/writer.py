"""The kernel body writer shared by the C-family renderers: one C statement per op, blocks indented.

Value ops (constants, accumulators, casts, bitcasts, ALU) and control flow (RANGE, IF) are written here once, with
the expressions of ``values``. A backend's writer subclasses :class:`CWriter`, sets its :class:`~.values.Dialect` and
overrides only what its machine decides: thread ids (:meth:`CWriter.special`), loads and stores (bounds checks),
local memory and barriers, and ALU ops it computes differently (wider index arithmetic); it also writes the function
around the body.

A RANGE loop reads its bound once, at the RANGE op (the bound may be an ACC that the loop body assigns). A gated load
is ``gate ? p[i] : alt`` (the false arm never touches memory), a gated store ``if (gate) p[i] = v;``.
"""

from __future__ import annotations

from runtime_backends.cstyle.values import Dialect, alu_expr, bitcast_expr, cast_expr, ctype, render_const
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, Ops, UOp

__all__ = ["CWriter"]


class CWriter:
    """Writes the body of ``kernel`` at indentation ``depth`` (two spaces a level); :meth:`body` returns it.

    Names: buffer slot ``s`` is ``bs``, val ``n`` is ``an``, the value of op ``i`` is ``vi``.
    """

    dialect: Dialect

    def __init__(self, kernel: Kernel, depth: int = 1) -> None:
        self.k, self.depth = kernel, depth
        self.names: dict[int, str] = {id(v): f"a{n}" for n, v in enumerate(kernel.vars)}
        self.names.update((id(b), f"b{b.arg}") for b in kernel.buffers)
        self.lines: list[str] = []

    def body(self) -> str:
        """The statements of every op, one per line."""
        for i, u in enumerate(self.k.ops):
            self.emit(i, u)
        return "\n".join(self.lines)

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def n(self, u: UOp) -> str:
        """The C name of op ``u``'s value."""
        return self.names[id(u)]

    def define(self, i: int, u: UOp, expr: str, t: str | None = None) -> None:
        """Declare ``vi`` (of ``u``'s C type unless ``t``) as ``expr``."""
        self.names[id(u)] = f"v{i}"
        self.line(f"{t or ctype(self.dialect, u.dtype)} v{i} = {expr};")

    def emit(self, i: int, u: UOp) -> None:
        op, d = u.op, self.dialect
        if op in (Ops.PARAM, Ops.VAR):
            return
        if op is Ops.SPECIAL:
            self.special(i, u)
        elif op is Ops.LOCAL:
            self.local(i, u)
        elif op is Ops.BARRIER:
            self.barrier()
        elif op is Ops.CONST:
            self.define(i, u, render_const(d, u.arg, u.dtype))
        elif op is Ops.ACC:
            self.define(i, u, self.n(u.src[0]))
        elif op is Ops.ASSIGN:
            self.line(f"{self.n(u.src[0])} = {self.n(u.src[1])};")
        elif op is Ops.LOAD:
            self.load(i, u)
        elif op is Ops.STORE:
            self.store(u)
        elif op in (Ops.RANGE, Ops.IF):
            self.open_block(i, u)
        elif op in (Ops.ENDRANGE, Ops.ENDIF):
            self.depth -= 1
            self.line("}")
        elif op is Ops.BITCAST:
            self.define(i, u, bitcast_expr(d, self.n(u.src[0]), u.src[0].dtype, u.dtype))
        elif op is Ops.CAST:
            self.define(i, u, cast_expr(d, self.n(u.src[0]), u.src[0].dtype, u.dtype))
        else:
            self.alu(i, u)

    def open_block(self, i: int, u: UOp) -> None:
        if u.op is Ops.RANGE:
            v, t, (start, end) = f"v{i}", ctype(self.dialect, u.dtype), u.src
            self.names[id(u)] = v
            self.line(f"for ({t} {v} = {self.n(start)}, {v}_end = {self.n(end)}; {v} < {v}_end; {v}++) {{")
        else:
            self.line(f"if ({self.n(u.src[0])}) {{")
        self.depth += 1

    def alu(self, i: int, u: UOp) -> None:
        self.define(i, u, alu_expr(self.dialect, u.op, u.src[-1].dtype, [self.n(s) for s in u.src]))

    def access(self, u: UOp) -> str:
        """The element ``u`` (a LOAD) reads; a bool element is a byte compared with 0."""
        ptr, idx = self.n(u.src[0]), self.n(u.src[1])
        return f"({ptr}[{idx}] != 0)" if u.dtype is dtypes.bool else f"{ptr}[{idx}]"

    def load(self, i: int, u: UOp) -> None:
        gated = len(u.src) == 4
        self.define(i, u, f"({self.n(u.src[2])} ? {self.access(u)} : {self.n(u.src[3])})" if gated else self.access(u))

    def store(self, u: UOp) -> None:
        self.line(self.guarded(u, f"{self.n(u.src[0])}[{self.n(u.src[1])}] = {self.n(u.src[2])};"))

    def guarded(self, u: UOp, stmt: str) -> str:
        """``stmt`` under STORE ``u``'s gate, if it has one."""
        return f"if ({self.n(u.src[3])}) {stmt}" if len(u.src) == 4 else stmt

    # ---- what each machine decides ---------------------------------------------------------------------------------
    def special(self, i: int, u: UOp) -> None:
        """Name the thread id or launch size ``u.arg == (kind, dim)``."""
        raise NotImplementedError(f"{type(self).__name__} must name the thread ids")

    def local(self, i: int, u: UOp) -> None:
        raise ValueError(f"{self.dialect.name}: kernel {self.k.name!r} uses local memory, which this backend lacks")

    def barrier(self) -> None:
        raise ValueError(f"{self.dialect.name}: kernel {self.k.name!r} uses a barrier, which this backend lacks")
