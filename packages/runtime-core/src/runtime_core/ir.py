"""The kernel IR: a linear SSA list of typed ops that every renderer and the PYTHON interpreter take.

A :class:`Kernel` is a name, a list of :class:`UOp` in program order, and a default launch shape. A launch runs
``prod(global_size)`` groups (CUDA: blocks) of ``prod(local_size)`` threads each; every thread runs the whole op list.

Semantics (the one definition every backend implements; the PYTHON backend is its executable reference):

* Integer ``ADD SUB MUL NEG SHL`` wrap modulo 2**bits (two's complement), as if computed in unbounded precision and
  truncated.
* ``IDIV`` truncates toward zero and ``MOD`` takes the sign of the dividend (C99 6.5.5), so ``a == IDIV(a,b)*b + MOD(a,b)``.
  Division by zero and ``INT_MIN / -1`` are undefined: kernels must not do them.
* ``SHL``/``SHR`` shift by ``b`` in ``[0, bits)``; other amounts are undefined. ``SHR`` of a signed value is arithmetic.
* ``DIV`` is float division (IEEE 754, round to nearest). ``RECIP(x) = 1/x``.
* ``MAX``/``MIN`` on floats follow IEEE 754-2008 maxNum/minNum (C ``fmax``/``fmin``, PTX ``max.f32``): when exactly one
  operand is NaN the other one is returned; the sign of a zero result is unspecified.
* ``CMPLT``/``CMPNE`` give bool; any comparison with NaN is false except ``CMPNE`` which is true.
* ``WHERE(c, a, b)`` is ``a`` where ``c`` else ``b``; both are evaluated.
* ``FMA(a, b, c)`` is ``a * b + c`` rounded once (IEEE 754 fusedMultiplyAdd; C ``fma``/``fmaf``, PTX ``fma.rn``), floats
  only: the product is not rounded before the addition. float16/bfloat16 round the exact result once to the type.
  Separate ``MUL`` and ``ADD`` ops are never fused into an FMA.
* ``EXP2 LOG2 SIN SQRT RECIP TRUNC`` apply to floats only; results within the harness tolerance of the correctly rounded
  value (float16/bfloat16 compute in float32 and round once).
* ``CAST`` float->int truncates toward zero (out of range or NaN is undefined); int->float and float->float round to
  nearest even; int->int wraps (or sign/zero-extends); anything->bool is ``!= 0``; bool->number gives 0 or 1.
  ``BITCAST`` reinterprets the bits of a value of the same size.
* ``LOAD``/``STORE`` index in elements (not bytes) of the pointer's dtype; with a gate, a false gate does not access memory
  (a load yields its ``alt`` value). An index outside the buffer is undefined, and so is an index whose 32- or 64-bit
  integer arithmetic wrapped (overflowed) on the way: backends may compute index arithmetic in wider integers.
* float16 and bfloat16 arithmetic rounds every op's result to the type.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from runtime_core.dtype import DType, dtypes

__all__ = ["Ops", "UOp", "Kernel", "KernelBuilder", "IRError", "validate", "ALU_OPS", "UNARY", "BINARY",
           "TERNARY"]


class IRError(ValueError):
    """A malformed kernel; the message names the op (index and kind) and what is wrong."""


class Ops(Enum):
    # parameters, indices, storage
    PARAM = auto()    # buffer parameter; arg=slot (int, 0..n-1); dtype=element dtype
    VAR = auto()      # int32 scalar parameter; arg=name (str)
    SPECIAL = auto()  # arg=(kind, dim): kind "group" (block id), "local" (thread id in group), "lsize", "gsize"
    CONST = auto()    # arg=python value of the dtype
    LOCAL = auto()    # shared (local) memory array of one group; arg=(name, element count); dtype=element dtype
    ACC = auto()      # register accumulator; src=(init,)
    # ALU
    ADD = auto(); SUB = auto(); MUL = auto(); DIV = auto(); IDIV = auto(); MOD = auto()  # noqa: E702
    MAX = auto(); MIN = auto(); NEG = auto(); CMPLT = auto(); CMPNE = auto()  # noqa: E702
    AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto(); WHERE = auto(); FMA = auto()  # noqa: E702
    EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIP = auto(); TRUNC = auto()  # noqa: E702
    CAST = auto(); BITCAST = auto()  # noqa: E702
    # memory and control flow
    LOAD = auto()     # src=(ptr, index) or (ptr, index, gate, alt)
    STORE = auto()    # src=(ptr, index, value) or (ptr, index, value, gate); no value
    ASSIGN = auto()   # src=(acc, value); no value
    RANGE = auto()    # src=(start, end); the loop variable, start <= i < end, step 1
    ENDRANGE = auto() # src=(range,)
    IF = auto()       # src=(cond,)
    ENDIF = auto()    # src=(if,)
    BARRIER = auto()  # every thread of the group waits here (local memory fence)


UNARY = frozenset({Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC})
BINARY = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.DIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN, Ops.CMPLT, Ops.CMPNE,
                    Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
TERNARY = frozenset({Ops.WHERE, Ops.FMA})
ALU_OPS = UNARY | BINARY | TERNARY
FLOAT_ONLY = frozenset({Ops.FMA, Ops.DIV, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC})
INT_ONLY = frozenset({Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR})
BITWISE = frozenset({Ops.AND, Ops.OR, Ops.XOR})
COMPARE = frozenset({Ops.CMPLT, Ops.CMPNE})
NO_VALUE = frozenset({Ops.STORE, Ops.ASSIGN, Ops.ENDRANGE, Ops.ENDIF, Ops.BARRIER, Ops.IF})
SPECIAL_KINDS = ("group", "local", "lsize", "gsize")
_NSRC = {Ops.PARAM: (0,), Ops.VAR: (0,), Ops.SPECIAL: (0,), Ops.CONST: (0,), Ops.LOCAL: (0,), Ops.ACC: (1,),
         Ops.LOAD: (2, 4), Ops.STORE: (3, 4), Ops.ASSIGN: (2,), Ops.RANGE: (2,), Ops.ENDRANGE: (1,),
         Ops.IF: (1,), Ops.ENDIF: (1,), Ops.BARRIER: (0,), Ops.CAST: (1,), Ops.BITCAST: (1,), Ops.WHERE: (3,), Ops.FMA: (3,)}


@dataclass(eq=False)
class UOp:
    """One op. ``src`` are earlier ops; ``dtype`` is the result type (``None`` for ops without a value: STORE, ASSIGN,
    ENDRANGE, IF, ENDIF, BARRIER; typed as ``DType`` because every use site reads it from a value op)."""

    op: Ops
    dtype: DType
    src: tuple[UOp, ...] = ()
    arg: Any = None

    def __repr__(self) -> str:
        return f"UOp({self.op.name}, {self.dtype}, arg={self.arg!r}, nsrc={len(self.src)})"


@dataclass
class Kernel:
    """A kernel: ``ops`` in program order, default launch ``global_size`` (groups) and ``local_size`` (threads/group).

    ``buffers`` are the PARAM ops ordered by slot and ``vars`` the VAR ops in program order: a launch passes buffers in
    that order and int32 vals in that order.
    """

    name: str
    ops: list[UOp]
    global_size: tuple[int, int, int] = (1, 1, 1)
    local_size: tuple[int, int, int] = (1, 1, 1)
    buffers: list[UOp] = field(init=False)
    vars: list[UOp] = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.ops, (list, tuple)):
            raise IRError(f"kernel {self.name!r}: ops must be a list of UOp, got {type(self.ops).__name__}")
        ops = [u for u in self.ops if isinstance(u, UOp)]  # anything else is reported by validate()
        self.buffers = sorted((u for u in ops if u.op is Ops.PARAM), key=lambda u: u.arg if _is_int(u.arg) else -1)
        self.vars = [u for u in ops if u.op is Ops.VAR]

    @property
    def uses_local(self) -> bool:
        """Whether the kernel declares local (shared) memory."""
        return any(u.op is Ops.LOCAL for u in self.ops)

    def written_buffers(self) -> set[int]:
        """Slots of the PARAM buffers that some STORE writes."""
        return {u.src[0].arg for u in self.ops if u.op is Ops.STORE and u.src[0].op is Ops.PARAM}


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _const_ok(value: Any, dtype: DType) -> bool:
    if dtype is dtypes.bool:
        return isinstance(value, bool)
    if dtype.is_int:
        return _is_int(value) and dtype.min <= value <= dtype.max
    if _is_int(value):
        return abs(value) < 2**1024  # convertible to float64 (then rounded to the dtype, overflowing to inf)
    return isinstance(value, float)


class _Validator:
    def __init__(self, kernel: Kernel) -> None:
        self.k = kernel
        self.index: dict[int, int] = {}
        self.scopes: list[UOp] = []      # open RANGE/IF ops
        self.visible: list[set[int]] = [set()]

    def fail(self, i: int, u: UOp, msg: str) -> IRError:
        return IRError(f"kernel {self.k.name!r}: op {i} {u.op.name}: {msg}")

    def run(self) -> None:
        name = self.k.name
        if not isinstance(name, str) or not (name.isidentifier() and name.isascii()):
            raise IRError(f"kernel name must be an ASCII identifier (it becomes a symbol in compiled code), got {name!r}")
        self.check_shape()
        for i, u in enumerate(self.k.ops):
            self.check_structure(i, u)
            for s in u.src:
                if id(s) not in self.index:
                    raise self.fail(i, u, f"uses {s.op.name} before its definition (or it is not in the kernel)")
                if not any(id(s) in v for v in self.visible):
                    raise self.fail(i, u, f"uses {s.op.name} (op {self.index[id(s)]}) outside the block that defines it")
            self.check_op(i, u)
            self.index[id(u)] = i
            self.track_scope(i, u)
        if self.scopes:
            raise IRError(f"kernel {self.k.name!r}: {self.scopes[-1].op.name} at op {self.index[id(self.scopes[-1])]} "
                          "is never closed (missing ENDRANGE/ENDIF)")
        slots = sorted(u.arg for u in self.k.buffers)
        if slots != list(range(len(slots))):
            raise IRError(f"kernel {self.k.name!r}: PARAM slots must be 0..n-1 without gaps or repeats, got {slots}")
        for op, what in ((Ops.VAR, lambda u: u.arg), (Ops.LOCAL, lambda u: u.arg[0])):
            names = [what(u) for u in self.k.ops if u.op is op]
            if dups := sorted({n for n in names if names.count(n) > 1}):
                raise IRError(f"kernel {self.k.name!r}: {op.name} names must be unique, repeated: {dups}")

    def check_structure(self, i: int, u: Any) -> None:
        """The op is a UOp of a known kind whose sources are a tuple of UOps, and it is not listed twice."""
        if not isinstance(u, UOp):
            raise IRError(f"kernel {self.k.name!r}: op {i} is {type(u).__name__}, not a UOp")
        if not isinstance(u.op, Ops):
            raise IRError(f"kernel {self.k.name!r}: op {i} has kind {u.op!r}, not a member of Ops")
        if not isinstance(u.src, tuple) or not all(isinstance(s, UOp) for s in u.src):
            raise self.fail(i, u, f"src must be a tuple of UOp, got {u.src!r}")
        if id(u) in self.index:
            raise self.fail(i, u, f"is the same object as op {self.index[id(u)]}; every op appears once (make a new UOp)")

    def check_shape(self) -> None:
        for what in ("global_size", "local_size"):
            size = getattr(self.k, what)
            if not isinstance(size, (tuple, list)) or len(size) != 3 or not all(_is_int(s) and s >= 1 for s in size):
                raise IRError(f"kernel {self.k.name!r}: {what} must be 3 positive ints, got {size!r}")

    def track_scope(self, i: int, u: UOp) -> None:
        if u.op in (Ops.RANGE, Ops.IF):
            self.scopes.append(u)
            if u.op is Ops.IF:
                self.visible[-1].add(id(u))
            self.visible.append({id(u)} if u.op is Ops.RANGE else set())  # the loop variable lives inside the loop
            return
        if u.op in (Ops.ENDRANGE, Ops.ENDIF):
            want = Ops.RANGE if u.op is Ops.ENDRANGE else Ops.IF
            if not self.scopes or self.scopes[-1] is not u.src[0] or u.src[0].op is not want:
                top = self.scopes[-1].op.name if self.scopes else "nothing"
                raise self.fail(i, u, f"closes {u.src[0].op.name} but the innermost open block is {top}")
            self.scopes.pop()
            self.visible.pop()
            return
        self.visible[-1].add(id(u))

    def check_op(self, i: int, u: UOp) -> None:
        op, dt, src = u.op, u.dtype, u.src
        expect = _NSRC.get(op, (1,) if op in UNARY else (2,))
        if len(src) not in expect:
            raise self.fail(i, u, f"takes {' or '.join(map(str, expect))} sources, got {len(src)}")
        if op in NO_VALUE:
            if dt is not None:
                raise self.fail(i, u, f"has no value, so its dtype must be None (got {dt})")
        elif not isinstance(dt, DType):
            raise self.fail(i, u, f"needs a DType, got {dt!r}")
        for k, s in enumerate(src if op not in (Ops.ENDIF, Ops.ENDRANGE) else ()):
            if s.op in NO_VALUE:
                raise self.fail(i, u, f"uses {s.op.name}, which has no value")
            if self.is_ptr(s) and not (k == 0 and op in (Ops.LOAD, Ops.STORE)):
                raise self.fail(i, u, f"uses the {s.op.name} pointer (op {self.index[id(s)]}) as source {k}; pointers "
                                      f"may only be the first source of LOAD/STORE")
        check = getattr(self, f"check_{op.name.lower()}", None)
        if check is not None:
            check(i, u)
        elif op in ALU_OPS:
            self.check_alu(i, u)

    def is_ptr(self, u: UOp) -> bool:
        return u.op in (Ops.PARAM, Ops.LOCAL)

    def check_param(self, i: int, u: UOp) -> None:
        if not _is_int(u.arg) or u.arg < 0:
            raise self.fail(i, u, f"slot must be an int >= 0, got {u.arg!r}")

    def check_var(self, i: int, u: UOp) -> None:
        if u.dtype is not dtypes.int32 or not isinstance(u.arg, str) or not u.arg.isidentifier():
            raise self.fail(i, u, f"a VAR is int32 with an identifier name, got {u.dtype} {u.arg!r}")

    def check_special(self, i: int, u: UOp) -> None:
        ok = isinstance(u.arg, tuple) and len(u.arg) == 2 and u.arg[0] in SPECIAL_KINDS and _is_int(u.arg[1]) \
            and u.arg[1] in (0, 1, 2)
        if not ok or u.dtype is not dtypes.int32:
            raise self.fail(i, u, f"arg must be (kind in {SPECIAL_KINDS}, dim 0..2) with dtype int32, got {u.arg!r}")

    def check_const(self, i: int, u: UOp) -> None:
        if not _const_ok(u.arg, u.dtype):
            raise self.fail(i, u, f"value {u.arg!r} is not a valid {u.dtype.name}")

    def check_local(self, i: int, u: UOp) -> None:
        if self.scopes:
            raise self.fail(i, u, "local memory must be declared at kernel scope, not inside a RANGE or IF")
        ok = isinstance(u.arg, tuple) and len(u.arg) == 2 and isinstance(u.arg[0], str) and u.arg[0].isidentifier()
        if not ok or not _is_int(u.arg[1]) or u.arg[1] <= 0:
            raise self.fail(i, u, f"arg must be (identifier, element count > 0), got {u.arg!r}")

    def check_acc(self, i: int, u: UOp) -> None:
        if u.src[0].dtype is not u.dtype:
            raise self.fail(i, u, f"init value is {u.src[0].dtype}, accumulator is {u.dtype}")

    def check_assign(self, i: int, u: UOp) -> None:
        acc, val = u.src
        if acc.op is not Ops.ACC:
            raise self.fail(i, u, f"can only assign to an ACC, not {acc.op.name}")
        if val.dtype is not acc.dtype:
            raise self.fail(i, u, f"value is {val.dtype}, accumulator is {acc.dtype}")

    def check_index(self, i: int, u: UOp) -> None:
        ptr, idx = u.src[0], u.src[1]
        if not self.is_ptr(ptr):
            raise self.fail(i, u, f"first source must be a PARAM or LOCAL pointer, got {ptr.op.name}")
        if idx.dtype is None or not idx.dtype.is_int:
            raise self.fail(i, u, f"index must be an integer, got {idx.dtype}")

    def check_gate(self, i: int, u: UOp, gate: UOp) -> None:
        if gate.dtype is not dtypes.bool:
            raise self.fail(i, u, f"gate must be bool, got {gate.dtype}")

    def check_load(self, i: int, u: UOp) -> None:
        self.check_index(i, u)
        if u.dtype is not u.src[0].dtype:
            raise self.fail(i, u, f"loads {u.dtype} from a {u.src[0].dtype} pointer")
        if len(u.src) == 4:
            self.check_gate(i, u, u.src[2])
            if u.src[3].dtype is not u.dtype:
                raise self.fail(i, u, f"alt value is {u.src[3].dtype}, load is {u.dtype}")

    def check_store(self, i: int, u: UOp) -> None:
        self.check_index(i, u)
        if u.src[2].dtype is not u.src[0].dtype:
            raise self.fail(i, u, f"stores {u.src[2].dtype} to a {u.src[0].dtype} pointer")
        if len(u.src) == 4:
            self.check_gate(i, u, u.src[3])

    def check_range(self, i: int, u: UOp) -> None:
        if u.dtype is None or not u.dtype.is_int or any(s.dtype is not u.dtype for s in u.src):
            raise self.fail(i, u, f"start, end and the loop variable must share one integer dtype, got "
                                  f"{[s.dtype for s in u.src]} -> {u.dtype}")

    def check_if(self, i: int, u: UOp) -> None:
        if u.src[0].dtype is not dtypes.bool:
            raise self.fail(i, u, f"condition must be bool, got {u.src[0].dtype}")

    def check_barrier(self, i: int, u: UOp) -> None:
        if not self.k.uses_local:
            raise self.fail(i, u, "a BARRIER needs local memory to order; this kernel declares none")
        if any(s.op is Ops.IF for s in self.scopes):
            raise self.fail(i, u, "a BARRIER inside an IF may be reached by only some threads (divergent barrier)")

    def check_bitcast(self, i: int, u: UOp) -> None:
        if u.src[0].dtype.itemsize != u.dtype.itemsize:
            raise self.fail(i, u, f"bitcast {u.src[0].dtype} -> {u.dtype} changes the size")

    def check_alu(self, i: int, u: UOp) -> None:
        op, dt = u.op, u.dtype
        operands = u.src[1:] if op is Ops.WHERE else u.src
        if op is Ops.WHERE and u.src[0].dtype is not dtypes.bool:
            raise self.fail(i, u, f"condition must be bool, got {u.src[0].dtype}")
        sdt = operands[0].dtype
        if any(s.dtype is not sdt for s in operands):
            raise self.fail(i, u, f"operands must share one dtype, got {[s.dtype for s in operands]}")
        if op in COMPARE:
            if dt is not dtypes.bool:
                raise self.fail(i, u, f"a comparison gives bool, not {dt}")
        elif dt is not sdt:
            raise self.fail(i, u, f"result dtype {dt} differs from operand dtype {sdt}")
        if op in FLOAT_ONLY and not sdt.is_float:
            raise self.fail(i, u, f"applies to floats only, got {sdt}")
        if op in INT_ONLY and not sdt.is_int:
            raise self.fail(i, u, f"applies to integers only, got {sdt}")
        if op in BITWISE and sdt.is_float:
            raise self.fail(i, u, f"applies to integers and bool only, got {sdt}")
        if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MAX, Ops.MIN, Ops.NEG) and sdt is dtypes.bool:
            raise self.fail(i, u, "arithmetic on bool is not defined; cast first")


def validate(kernel: Kernel) -> Kernel:
    """Check ``kernel``; return it unchanged or raise :class:`IRError` naming the first bad op."""
    _Validator(kernel).run()
    return kernel


Operand = UOp | int | float | bool


class KernelBuilder:
    """Builds a :class:`Kernel` op by op.

    Python numbers given as operands become CONST ops of the other operand's dtype. ``with kb.range(a, b) as i:`` and
    ``with kb.if_(cond):`` open and close blocks. :meth:`build` validates.
    """

    def __init__(self, name: str, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1)) -> None:
        self.name = name
        self.ops: list[UOp] = []
        self.global_size = tuple(global_size) + (1,) * (3 - len(global_size))
        self.local_size = tuple(local_size) + (1,) * (3 - len(local_size))
        self._slots = 0

    def emit(self, op: Ops, dtype: DType | None, src: Sequence[UOp] = (), arg: Any = None) -> UOp:
        u = UOp(op, dtype, tuple(src), arg)  # type: ignore[arg-type]  # None for ops without a value
        self.ops.append(u)
        return u

    # parameters and indices
    def buffer(self, dtype: DType) -> UOp:
        """The next buffer parameter (slots count from 0 in call order)."""
        self._slots += 1
        return self.emit(Ops.PARAM, dtype, arg=self._slots - 1)

    def var(self, name: str) -> UOp:
        return self.emit(Ops.VAR, dtypes.int32, arg=name)

    def special(self, kind: str, dim: int) -> UOp:
        return self.emit(Ops.SPECIAL, dtypes.int32, arg=(kind, dim))

    def global_id(self, dim: int = 0) -> UOp:
        """``group_id * local_size + local_id`` in dimension ``dim`` (int32)."""
        return self.add(self.mul(self.special("group", dim), self.special("lsize", dim)), self.special("local", dim))

    def const(self, value: Any, dtype: DType) -> UOp:
        return self.emit(Ops.CONST, dtype, arg=value)

    def local(self, name: str, dtype: DType, count: int) -> UOp:
        return self.emit(Ops.LOCAL, dtype, arg=(name, count))

    def acc(self, init: Operand, dtype: DType | None = None) -> UOp:
        init = self._as(init, dtype)
        return self.emit(Ops.ACC, init.dtype, (init,))

    def assign(self, acc: UOp, value: Operand) -> None:
        self.emit(Ops.ASSIGN, None, (acc, self._as(value, acc.dtype)))

    # ALU
    def alu(self, op: Ops, *operands: Operand) -> UOp:
        """Emit an ALU op; the result dtype is bool for comparisons, else the operands' dtype."""
        typed = next((o.dtype for o in operands[1:] if isinstance(o, UOp)) if op is Ops.WHERE else
                     (o.dtype for o in operands if isinstance(o, UOp)), None)
        if typed is None:
            raise IRError(f"{op.name}: at least one operand must be a UOp to give the dtype")
        srcs = [self._as(o, dtypes.bool if (op is Ops.WHERE and k == 0) else typed) for k, o in enumerate(operands)]
        return self.emit(op, dtypes.bool if op in COMPARE else typed, srcs)

    def add(self, a: Operand, b: Operand) -> UOp: return self.alu(Ops.ADD, a, b)  # noqa: E704
    def sub(self, a: Operand, b: Operand) -> UOp: return self.alu(Ops.SUB, a, b)  # noqa: E704
    def mul(self, a: Operand, b: Operand) -> UOp: return self.alu(Ops.MUL, a, b)  # noqa: E704
    def lt(self, a: Operand, b: Operand) -> UOp: return self.alu(Ops.CMPLT, a, b)  # noqa: E704
    def ne(self, a: Operand, b: Operand) -> UOp: return self.alu(Ops.CMPNE, a, b)  # noqa: E704
    def where(self, c: Operand, a: Operand, b: Operand) -> UOp: return self.alu(Ops.WHERE, c, a, b)  # noqa: E704
    def fma(self, a: Operand, b: Operand, c: Operand) -> UOp: return self.alu(Ops.FMA, a, b, c)  # noqa: E704

    def cast(self, x: UOp, dtype: DType) -> UOp:
        return self.emit(Ops.CAST, dtype, (x,))

    def bitcast(self, x: UOp, dtype: DType) -> UOp:
        return self.emit(Ops.BITCAST, dtype, (x,))

    # memory
    def load(self, ptr: UOp, index: Operand, gate: UOp | None = None, alt: Operand | None = None) -> UOp:
        """Load ``ptr[index]``; with ``gate``, threads whose gate is false get ``alt`` (default 0) and touch no memory."""
        idx = self._as(index, dtypes.int32)
        if gate is None:
            return self.emit(Ops.LOAD, ptr.dtype, (ptr, idx))
        return self.emit(Ops.LOAD, ptr.dtype, (ptr, idx, gate, self._as(0 if alt is None else alt, ptr.dtype)))

    def store(self, ptr: UOp, index: Operand, value: Operand, gate: UOp | None = None) -> None:
        src = [ptr, self._as(index, dtypes.int32), self._as(value, ptr.dtype)]
        self.emit(Ops.STORE, None, src + ([gate] if gate is not None else []))

    def barrier(self) -> None:
        self.emit(Ops.BARRIER, None)

    # control flow
    @contextlib.contextmanager
    def range(self, start: Operand, end: Operand, dtype: DType = dtypes.int32) -> Iterator[UOp]:
        r = self.emit(Ops.RANGE, dtype, (self._as(start, dtype), self._as(end, dtype)))
        yield r
        self.emit(Ops.ENDRANGE, None, (r,))

    @contextlib.contextmanager
    def if_(self, cond: UOp) -> Iterator[UOp]:
        u = self.emit(Ops.IF, None, (cond,))
        yield u
        self.emit(Ops.ENDIF, None, (u,))

    def build(self) -> Kernel:
        """The validated kernel; raises :class:`IRError`."""
        return validate(Kernel(self.name, list(self.ops), self.global_size, self.local_size))  # type: ignore[arg-type]

    def _as(self, x: Operand, dtype: DType | None) -> UOp:
        if isinstance(x, UOp):
            return x
        if dtype is None:
            raise IRError(f"cannot infer a dtype for the constant {x!r}; pass dtype=")
        if dtype is dtypes.bool:
            x = bool(x)
        elif dtype.is_float:
            x = float(x)
        return self.const(x, dtype)
