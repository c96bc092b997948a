"""Operand readers and writers: closures built at load time that move values between registers and numpy arrays.

A reader is ``f(ctx, idx, n) -> np.ndarray`` giving the operand for the selected threads (``idx`` is None for every
thread of the chunk, else an index array; ``n`` the number of selected threads) in the storage dtype of the requested
PTX type. A writer is ``f(ctx, idx, value)``. Readers never return a register array object itself (always a view or a
copy), and writers copy a value that does not own its memory, so no two registers ever share storage.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .linker import Loc
from .parser import FImm, Imm, Not, Reg, Sink, Special
from .types import RAW, STORAGE, WIDTH, const_value, to_raw, to_type

__all__ = ["Reader", "Writer", "reader", "writer", "OperandError", "GENERIC_WINDOWS"]

Reader = Callable[..., np.ndarray]
Writer = Callable[..., None]

# Generic-address windows (PTX ISA 6.4.1 generic addressing): shared, local and kernel-param windows sit below the
# global allocations (which start at 1 << 40), each 4 GiB wide.
GENERIC_WINDOWS = {"shared": 1 << 32, "local": 2 << 32, "kparam": 3 << 32}
WINDOW_SIZE = 1 << 32


class OperandError(Exception):
    """An operand that does not fit its instruction (turned into a PTXError with the line by the decoder)."""


def reader(o: object, t: str, reg_types: list[str]) -> Reader:
    """Closure reading operand ``o`` as PTX type ``t``; raises OperandError for an operand kind that cannot be read."""
    if isinstance(o, Reg):
        return _reg_reader(o.id, WIDTH[reg_types[o.id]], t)
    if isinstance(o, Not):
        if reg_types[o.reg.id] != "pred" or t != "pred":
            raise OperandError("'!' negates predicate operands only")
        rid = o.reg.id
        return lambda c, i, n: ~(c.regs[rid] if i is None else c.regs[rid][i])
    if isinstance(o, (Imm, FImm)):
        if t == "pred":
            raise OperandError("an immediate cannot be a predicate operand")
        val = const_value(o.bits, t, float_width=o.width) if isinstance(o, FImm) else const_value(o.value, t)
        dt = STORAGE[t]
        return lambda c, i, n: np.full(n, val, dtype=dt)
    if isinstance(o, Special):
        name = o.name
        return lambda c, i, n: _convert(c.special(name) if i is None else c.special(name)[i], 32 if
                                        c.special(name).dtype.itemsize == 4 else 64, t)
    if isinstance(o, Loc):
        return _address_reader(o, t)
    raise OperandError(f"operand {o!r} cannot be used as a .{t} source")


def _convert(raw: np.ndarray, width: int, t: str) -> np.ndarray:
    return to_type(raw, width, t) if WIDTH[t] != width else raw.view(STORAGE[t])


def _reg_reader(rid: int, width: int, t: str) -> Reader:
    if (width == 1) != (t == "pred"):
        raise OperandError(f"register of {'predicate' if width == 1 else f'{width}-bit'} type used as .{t} operand")
    if width == WIDTH[t]:
        dt = STORAGE[t]
        return lambda c, i, n: (c.regs[rid] if i is None else c.regs[rid][i]).view(dt)
    return lambda c, i, n: to_type(c.regs[rid] if i is None else c.regs[rid][i], width, t)


def _address_reader(loc: Loc, t: str) -> Reader:
    """The address of a symbol (``mov.u64 %rd, sym``): a state-space address, not generic (PTX ISA 9.7.9.1 mov)."""
    if WIDTH[t] < 32 or t[0] == "f":
        raise OperandError(f"a symbol address needs a 32- or 64-bit integer type, not .{t}")
    dt = STORAGE[t]
    mask = (1 << WIDTH[t]) - 1
    if loc.space == "global":
        name, off = loc.name, loc.offset
        return lambda c, i, n: np.full(n, (c.symaddr[name] + off) & mask, dtype=RAW[WIDTH[t]]).view(dt)
    val = loc.offset & mask
    return lambda c, i, n: np.full(n, val, dtype=RAW[WIDTH[t]]).view(dt)


def writer(o: object, t: str, reg_types: list[str]) -> Writer:
    """Closure writing a value of PTX type ``t`` to destination ``o`` (a register or the sink ``_``)."""
    if isinstance(o, Sink):
        return lambda c, i, v: None
    if not isinstance(o, Reg):
        raise OperandError(f"destination {o!r} is not a register")
    rid = o.id
    width = WIDTH[reg_types[rid]]
    if (width == 1) != (t == "pred"):
        raise OperandError(f"register of {'predicate' if width == 1 else f'{width}-bit'} type written as .{t}")
    if width == 1:
        def write_pred(c, i, v):
            if i is None:
                c.regs[rid] = v.astype(np.bool_, copy=not v.flags.owndata)
            else:
                c.regs[rid][i] = v
        return write_pred

    def write(c, i, v):
        raw = to_raw(v, t, width)
        if i is None:
            if not (raw.flags.owndata or v.flags.owndata) or not raw.flags.c_contiguous:
                raw = raw.copy()
            c.regs[rid] = raw
        else:
            c.regs[rid][i] = raw
    return write
