"""Operand readers and writers: closures built at load time that move values between registers and numpy arrays.

A reader is ``f(ctx, idx, n) -> np.ndarray`` giving the operand for the selected threads (``idx`` is None for every
thread of the chunk, else an index array; ``n`` the number of selected threads) in the storage dtype of the requested
PTX type. A writer is ``f(ctx, idx, value)``. Readers never return a register array object itself (always a view or a
copy), and writers copy a value that does not own its memory, so no two registers ever share storage.
"""

from __future__ import annotations

import numpy as np

from ..linker import Loc
from ..ops import Reader, Writer
from ..parse.syntax import FImm, Imm, Not, Reg, Sink, Special
from ..types import RAW, STORAGE, WIDTH, const_value, to_raw, to_type

__all__ = ["DecodeError", "OperandError", "is_uniform", "operand_count", "reader", "uniform", "writer"]


class OperandError(Exception):
    """An operand that does not fit its instruction (turned into a PTXError with the line by the decoder)."""


class DecodeError(Exception):
    """An instruction form the interpreter does not support, or malformed operands; the message says which."""


def operand_count(ops: list, want: int, form: str) -> None:
    """DecodeError unless ``ops`` has ``want`` operands; ``form`` is the instruction's operand syntax."""
    if len(ops) != want:
        raise DecodeError(f"expected {want} operands ({form}), found {len(ops)}")


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
        return uniform(np.array(val, dtype=STORAGE[t]))
    if isinstance(o, Special):
        return _special_reader(o.name, t)
    if isinstance(o, Loc):
        return _address_reader(o, t)
    raise OperandError(f"operand {o!r} cannot be used as a .{t} source")


def _special_reader(name: str, t: str) -> Reader:
    def read(c, i, n):
        v = c.special(name)
        if i is not None:
            v = np.broadcast_to(v[:1], (n,)) if is_uniform(v) else v[i]
        return _convert(v, v.dtype.itemsize * 8, t)
    return read


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
        raw = RAW[WIDTH[t]]
        return lambda c, i, n: np.broadcast_to(np.array((c.symaddr[name] + off) & mask, raw).view(dt), (n,))
    return uniform(np.array(loc.offset & mask, dtype=RAW[WIDTH[t]]).view(dt))


def is_uniform(x: np.ndarray) -> bool:
    """True for a broadcast view (stride 0): one value shared by every thread."""
    return x.ndim == 1 and x.size > 1 and x.strides == (0,)


def _owned(raw: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The array a register may keep: a uniform (read-only broadcast) value as it is, else storage no other object
    uses (``raw`` when it or the value it views was freshly computed, otherwise a copy)."""
    if is_uniform(raw):
        return raw
    if (raw.flags.owndata or v.flags.owndata) and raw.flags.c_contiguous and raw.flags.writeable:
        return raw
    return raw.copy()


def _scatter(c, rid: int, i: np.ndarray, value: np.ndarray) -> None:
    """Write the selected threads of a register, first giving a uniform register storage of its own."""
    reg = c.regs[rid]
    if not reg.flags.writeable:
        reg = c.regs[rid] = reg.copy()
    reg[i] = value


def uniform(value: np.ndarray) -> Reader:
    """A reader giving the 0-d ``value`` to every selected thread: a read-only broadcast view, no allocation. Writers
    copy such views, so a register never aliases it."""
    value.flags.writeable = False
    return lambda c, i, n: np.broadcast_to(value, (n,))


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
                c.regs[rid] = _owned(v.astype(np.bool_, copy=False), v)
            else:
                _scatter(c, rid, i, v)
        return write_pred

    def write(c, i, v):
        raw = to_raw(v, t, width)
        if i is None:
            c.regs[rid] = _owned(raw, v)
        else:
            _scatter(c, rid, i, raw)
    return write
