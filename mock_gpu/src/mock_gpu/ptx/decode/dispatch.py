"""Decoder: linked instructions -> pre-built closures (``Op``, see :mod:`mock_gpu.ptx.ops`), once at load time.

This module dispatches each instruction to its family's decoder (``decode.alu``, ``decode.data``, ``decode.sync``)
and decodes control flow (bra, ret/exit, trap, device-side assert) itself. Everything that can be checked without
running (opcode, types, operand kinds, ALU support) is checked here and reported as PTXError with the line.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..alu import video
from ..errors import PTXError
from ..exec import memops, warp
from ..linker import Label, LInstr, Loc
from ..ops import BRANCH, EXIT, NORMAL, TRAP, Op
from ..types import STORAGE
from . import alu, data, matrix, mbarrier, sync, texture
from .modifiers import ALLOWED, unknown_modifiers
from .operands import DecodeError, OperandError, writer

__all__ = ["decode"]

TYPES = frozenset(STORAGE)
CMPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
                  "num", "nan"})
_NOOPS = {"membar", "fence", "nanosleep", "prefetch", "prefetchu", "pmevent", "griddepcontrol", "discard",
          "applypriority"}
_REJECTED = {
    "wmma": "tensor-core matrix multiply is not emulated",
    "wgmma": "tensor-core matrix multiply is not emulated", "ldmatrix": "matrix fragment loads are not emulated",
    "stmatrix": "matrix fragment stores are not emulated", "movmatrix": "matrix fragments are not emulated",
    "mapa": "distributed shared memory (thread block clusters) is not emulated",
    "tld4": "texture gathers are not emulated", "suld": "surfaces are not emulated", "sust": "surfaces are not emulated",
    "tensormap": "tensor maps are not emulated",
    "alloca": "dynamic stack allocation is not emulated", "stacksave": "dynamic stack allocation is not emulated",
    "stackrestore": "dynamic stack allocation is not emulated", "setmaxnreg": "register reallocation is not emulated",
    "elect": "elect.sync is not emulated", "clusterlaunchcontrol": "cluster launch control is not emulated",
    "tcgen05": "tensor-core matrix multiply is not emulated",
}


def decode(code: list[LInstr], reg_types: list[str], lines: list[str]) -> list[Op]:
    """Decode a linked kernel; raises PTXError naming the line of the first unsupported instruction."""
    out = []
    for li in code:
        text = lines[li.line - 1].strip() if 0 < li.line <= len(lines) else ".".join(li.op)
        try:
            out.append(_decode_one(li, reg_types, text))
        except (DecodeError, OperandError, TypeError, KeyError, ValueError, IndexError, StopIteration, OverflowError) as e:
            raise PTXError(li.line, text, f"unsupported or malformed instruction {'.'.join(li.op)!r}: {e}") from None
    return out


def _split(op: tuple[str, ...]) -> tuple[list[str], str | None, str | None, set[str]]:
    types, cmp, boolop, mods = [], None, None, set()
    for m in op[1:]:
        if m in TYPES:
            types.append(m)
        elif op[0] in ("setp", "set") and m in CMPS and cmp is None:
            cmp = m
        elif op[0] in ("setp", "set") and m in ("and", "or", "xor"):
            boolop = m
        else:
            mods.add(m)
    return types, cmp, boolop, mods


def _decode_one(li: LInstr, rt: list[str], text: str) -> Op:
    base = li.op[0]
    ops = li.operands
    if base == "__assertfail":
        return _assertion(li, text)
    if base in _REJECTED:
        raise DecodeError(f"{base!r} is not supported by the interpreter: {_REJECTED[base]}")
    if base not in ALLOWED:
        raise DecodeError(f"opcode {base!r} is not supported by the interpreter")
    unknown = unknown_modifiers(base, _split(li.op)[3])
    if unknown:
        raise DecodeError(f"unknown or unsupported modifier(s) {', '.join('.' + m for m in unknown)} for {base!r}")
    if base == "bra" or base == "brx":
        if base == "brx" or len(ops) != 1 or not isinstance(ops[0], Label):
            raise DecodeError("only direct branches to a label are supported")
        return Op(BRANCH, None, li.guard, li.line, text, target=ops[0].pc)
    if base in ("ret", "exit"):
        return Op(EXIT, None, li.guard, li.line, text)
    if base in ("trap", "brkpt"):
        return Op(TRAP, None, li.guard, li.line, text)
    if base in ("bar", "barrier"):
        return sync.barrier(li, rt, text)
    return Op(NORMAL, _normal(li, rt), li.guard, li.line, text)


def _normal(li: LInstr, rt: list[str]) -> Callable:
    base = li.op[0]
    types, cmp, boolop, mods = _split(li.op)
    ops = li.operands
    if base in _NOOPS:
        return lambda c, i: None
    if base == "createpolicy":
        w = writer(ops[0], "b64", rt)
        return lambda c, i: w(c, i, np.zeros(c.n if i is None else i.size, np.uint64))
    if base in ("add", "sub", "addc", "subc", "mad", "madc") and ("cc" in mods or base.endswith("c")):
        return alu.carry(base, types, mods, ops, rt)
    if base == "lop3":
        return alu.lop3(types, mods, ops, rt)
    if base in video.OPS:
        return alu.video(base, types, mods, ops, rt)
    if base in alu.ALU_OPS:
        return alu.alu_instruction(base, types, cmp, boolop, mods, ops, rt)
    if base == "mov":
        return data.mov(types, ops, rt)
    if base == "cvta":
        return data.cvta(li.op, types, ops, rt)
    if base == "isspacep":
        return data.isspacep(li.op[1], ops, rt)
    if base in ("ld", "ldu", "st"):
        return data.ldst(base, li.op, types, mods, ops, rt)
    if base == "cp" and "mbarrier" in li.op and "arrive" in li.op:
        return mbarrier.cp_async_arrive(li.op, ops, rt)
    if base == "cp" and "bulk" in li.op:
        return mbarrier.bulk_copy(li.op, ops, rt)
    if base == "cp":
        return data.cp_async(li.op, mods, ops, rt)
    if base == "mbarrier":
        return mbarrier.mbarrier(li.op, mods, ops, rt)
    if base in ("atom", "red"):
        return sync.atom(base, types, mods, ops, rt)
    if base == "tex":
        return texture.tex(types, mods, ops, rt)
    if base == "shfl":
        return sync.shfl(types, mods, ops, rt)
    if base == "vote":
        return sync.vote(types, mods, ops, rt)
    if base == "activemask":
        return warp.activemask(writer(ops[0], "b32", rt))
    if base == "redux":
        return sync.redux(types, mods, ops, rt)
    if base == "match":
        return sync.match(types, mods, ops, rt)
    if base == "mma":
        return matrix.mma(li.op, types, mods, ops, rt)
    raise DecodeError(f"opcode {base!r} is not supported by the interpreter")


def _assertion(li: LInstr, text: str) -> Op:
    """The linker's stand-in for ``call __assertfail, (message, file, line, function, charSize)``: a trap whose
    ``fn(ctx, thread)`` formats the assertion of one failing thread from its call arguments."""
    if len(li.operands) < 4 or not all(isinstance(o, Loc) and o.space == "local" for o in li.operands):
        raise DecodeError("__assertfail takes (message, file, line, function, ...) .param arguments")
    msg, path, line, func = li.operands[:4]

    def describe(c, t: int) -> str:
        def arg(loc: Loc, dt) -> int:
            return int(memops.load(c, "local", np.array([loc.offset], np.uint64), np.dtype(dt), 1,
                                   np.array([t]))[0])
        return (f"device-side assertion `{_c_string(c, arg(msg, np.uint64))}` failed at "
                f"{_c_string(c, arg(path, np.uint64))}:{arg(line, np.uint32)} in {_c_string(c, arg(func, np.uint64))}")
    return Op(TRAP, describe, li.guard, li.line, text)


def _c_string(c, address: int, limit: int = 400) -> str:
    """The NUL-terminated string at a global/generic device address ('?' when it is not readable)."""
    found = c.space.allocation(address)
    if found is None:
        return "?"
    base, size, _ = found
    raw = c.space.read(address, min(limit, base + size - address))
    return raw.split(b"\x00", 1)[0].decode(errors="replace")
