"""Decoding of arithmetic, logic, comparison, conversion and video instructions (PTX ISA 9.7.1-9.7.8, 9.7.9.21
cvt, 9.7.16 video) into closures over :mod:`mock_gpu.ptx.alu`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import alu
from ..alu import video as simd
from ..alu.spec import ARITY
from ..parse.syntax import Imm, Not, Pair, Reg
from ..types import STORAGE, WIDTH
from .operands import DecodeError, is_uniform, operand_count, reader, writer

__all__ = ["ALU_OPS", "alu_instruction", "carry", "lop3", "video"]

ALU_OPS = frozenset(ARITY) - {"lop3"} | {"cvt"}
_COUNT = {"popc", "clz", "bfind"}  # the result is a u32 count, whatever the source type
_TWO_TYPES = {"cvt", "set", "slct", "dp4a", "dp2a"}


def _double(t: str) -> str:
    return t[0] + str(WIDTH[t] * 2)


def _alu_types(base: str, types: list[str], boolop: str | None, mods: set[str], nsrc: int
               ) -> tuple[str, str | None, str, list[str]]:
    """(spec type, spec stype, destination type, source types) of an ALU instruction (PTX ISA 9.7.1-9.7.9)."""
    t = types[0]
    stype = None
    if base == "cvt":
        dst, stype = types[0], types[1]
        return t, stype, dst, [stype] * nsrc
    if base in ("set", "slct"):
        stype = types[1]
    if base in ("dp4a", "dp2a"):
        acc = "s32" if "s32" in types else "u32"
        return t, types[1], acc, [t, types[1], acc]
    if base == "shf":
        return t, None, t, [t, t, "u32"]
    if base in ("bmsk", "szext"):
        return t, None, t, [t, "u32"]
    if base in _COUNT:
        return t, None, "u32", [t]
    if base in ("mul", "mad") and "wide" in mods:
        return t, None, _double(t), [t, t] + ([_double(t)] if base == "mad" else [])
    if base in ("shl", "shr"):
        return t, None, t, [t, "u32"]
    if base == "bfe":
        return t, None, t, [t, "u32", "u32"]
    if base == "bfi":
        return t, None, t, [t, t, "u32", "u32"]
    if base == "selp":
        return t, None, t, [t, t, "pred"]
    if base == "slct":
        return t, stype, t, [t, t, stype or t]
    if base == "setp":
        return t, None, "pred", [t, t] + (["pred"] if boolop else [])
    if base == "set":
        return t, stype, t, [stype or t, stype or t] + (["pred"] if boolop else [])
    if base == "testp":
        return t, None, "pred", [t]
    return t, None, t, [t] * ARITY[base]  # every source of the instruction's own type


def alu_instruction(base, types, cmp, boolop, mods, ops, rt) -> Callable:
    if len(types) != (2 if base in _TWO_TYPES else 1):
        raise DecodeError(f"expected {2 if base in _TWO_TYPES else 1} instruction type(s), found {len(types)}")
    nsrc = len(ops) - 1
    spec_t, stype, dst_t, src_ts = _alu_types(base, types, boolop, mods, nsrc)
    pair = isinstance(ops[0], Pair)
    if pair:
        mods = mods | {"pq"}
    spec = alu.AluSpec(base, spec_t, frozenset(mods), stype, cmp, boolop)
    if not alu.supports(spec):
        raise DecodeError(f"the ALU does not implement {spec}")
    if len(src_ts) != nsrc:
        raise DecodeError(f"expected {len(src_ts)} source operands, found {nsrc}")
    if base != "cvt":
        dsts = [ops[0].first, ops[0].second] if pair else [ops[0]]
        _check_widths(list(zip(dsts + ops[1:], [dst_t] * len(dsts) + src_ts, strict=True)), rt)
    srcs = [reader(o, st, rt) for o, st in zip(ops[1:], src_ts, strict=True)]
    if pair:
        wp, wq = writer(ops[0].first, dst_t, rt), writer(ops[0].second, dst_t, rt)

        def run_pair(c, i):
            n = c.n if i is None else i.size
            p, q = _execute(spec, [r(c, i, n) for r in srcs], n)
            wp(c, i, p)
            wq(c, i, q)
        return run_pair
    w = writer(ops[0], dst_t, rt)
    if len(srcs) == 2:
        r0, r1 = srcs

        def run2(c, i):
            n = c.n if i is None else i.size
            w(c, i, _execute(spec, [r0(c, i, n), r1(c, i, n)], n))
        return run2

    def run(c, i):
        n = c.n if i is None else i.size
        w(c, i, _execute(spec, [r(c, i, n) for r in srcs], n))
    return run


def _execute(spec: alu.AluSpec, values: list[np.ndarray], n: int):
    """alu.execute, computed once and broadcast when every operand is uniform (the same for all threads)."""
    if n > 1 and all(is_uniform(v) for v in values):
        out = alu.execute(spec, *[v[:1] for v in values])
        if isinstance(out, tuple):
            return tuple(np.broadcast_to(o, (n,)) for o in out)
        return np.broadcast_to(out, (n,))
    return alu.execute(spec, *values)


def video(base, types, mods, ops, rt) -> Callable:
    """vop2/vop4.dtype.atype.btype{.sat|.add} d, a, b, c and vset2/vset4.atype.btype.cmp{.add} d, a, b, c (PTX ISA
    9.7.16.2)."""
    vset = base.startswith("vset")
    want = 2 if vset else 3
    if len(types) != want or any(t not in ("u32", "s32") for t in types):
        raise DecodeError(f"{base} needs {want} types from .u32/.s32")
    cmp = next(iter(mods & simd.CMPS), None)
    if vset and (cmp is None or len(mods & simd.CMPS) != 1):
        raise DecodeError(f"{base} needs one comparison (.eq .ne .lt .le .gt .ge)")
    operand_count(ops, 4, "d, a, b, c")
    _check_widths([(o, "b32") for o in ops], rt)
    signs = tuple(t == "s32" for t in (["u32"] + types if vset else types))
    a, b, c = (reader(o, "b32", rt) for o in ops[1:])
    d = writer(ops[0], "b32", rt)
    sat, add = "sat" in mods, "add" in mods

    def run(ctx, i):
        n = ctx.n if i is None else i.size
        d(ctx, i, simd.video(base, signs, sat, add, cmp, a(ctx, i, n), b(ctx, i, n), c(ctx, i, n)))  # type: ignore[arg-type]
    return run


def _check_widths(pairs: list[tuple[object, str]], rt: list[str]) -> None:
    """Registers of an arithmetic/logic instruction must have exactly the width of their operand type (PTX ISA 6.4.x
    "Operand Type Information"; only ld, st, cvt and mov accept wider or narrower registers)."""
    for k, (o, t) in enumerate(pairs):
        reg = o.reg if isinstance(o, Not) else o
        if isinstance(reg, Reg) and WIDTH[rt[reg.id]] != WIDTH[t]:
            raise DecodeError(f"operand {k + 1} is a .{rt[reg.id]} register but the instruction needs a {WIDTH[t]}-bit .{t} "
                       "operand")


def lop3(types, mods, ops, rt) -> Callable:
    """lop3.b32 d, a, b, c, immLut and lop3.{or,and}.b32 d|p, a, b, c, immLut, q (PTX ISA 9.7.8.6), where
    p = (d != 0) BoolOp q."""
    boolop = next(iter(mods & {"or", "and"}), None)
    if types != ["b32"] or mods - {"or", "and"} or len(mods) > 1:
        raise DecodeError("lop3 takes .b32 and optionally one of .or/.and")
    if not isinstance(ops[4] if len(ops) > 4 else None, Imm):
        raise DecodeError("lop3 needs an immediate truth table (immLut) as its fifth operand")
    if len(ops) != (6 if boolop else 5) or isinstance(ops[0], Pair) != (boolop is not None):
        raise DecodeError("expected lop3.b32 d, a, b, c, immLut or lop3.{or,and}.b32 d|p, a, b, c, immLut, q")
    srcs = [reader(o, "b32", rt) for o in ops[1:5]]
    q = reader(ops[5], "pred", rt) if boolop else None
    dst = ops[0].first if boolop else ops[0]
    wd = writer(dst, "b32", rt)
    wp = writer(ops[0].second, "pred", rt) if boolop else None

    def run(c, i):
        n = c.n if i is None else i.size
        d = alu.execute(alu.AluSpec("lop3", "b32"), *[r(c, i, n) for r in srcs])
        wd(c, i, d)
        if wp is not None:
            qv = q(c, i, n)  # type: ignore[misc]
            wp(c, i, ((d != 0) | qv) if boolop == "or" else ((d != 0) & qv))
    return run


def carry(base, types, mods, ops, rt) -> Callable:
    """add.cc/addc/sub.cc/subc/mad.cc/madc (PTX ISA 9.7.2 extended precision): carry in/out through CC.CF."""
    t = types[0]
    w = WIDTH[t]
    if w not in (32, 64) or t[0] not in "us":
        raise DecodeError("extended-precision arithmetic needs .u32/.s32/.u64/.s64")
    cin = base.endswith("c")
    cout = "cc" in mods
    kind = base.rstrip("c") if base not in ("add", "sub", "mad") else base
    hi = "hi" in mods
    ut = f"u{w}"
    srcs = [reader(o, ut, rt) for o in ops[1:]]
    sreaders = [reader(o, t, rt) for o in ops[1:3]] if kind == "mad" else []
    dst = writer(ops[0], ut, rt)
    mask = (1 << w) - 1

    def run(c, i):
        n = c.n if i is None else i.size
        vals = [r(c, i, n) for r in srcs]
        carry = (c.carry if i is None else c.carry[i]) if cin else np.zeros(n, np.uint64)
        if kind == "mad":
            prod = _product_part(sreaders[0](c, i, n), sreaders[1](c, i, n), w, hi, t[0] == "s")
            a, b, sign = prod, vals[2], 1
        else:
            a, b, sign = vals[0], vals[1], 1 if kind == "add" else -1
        res, co = _add_with_carry(a.astype(np.uint64), b.astype(np.uint64), carry.astype(np.uint64), w, sign)
        dst(c, i, (res & np.uint64(mask)).astype(STORAGE[ut]))
        if cout:
            if i is None:
                c.carry = co
            else:
                c.carry[i] = co
    return run


def _product_part(a: np.ndarray, b: np.ndarray, w: int, hi: bool, signed: bool) -> np.ndarray:
    """lo or hi half of the exact 2w-bit product, as np.uint64 (w = 32 or 64)."""
    if w == 32:
        p = a.astype(np.int64) * b.astype(np.int64) if signed else a.astype(np.uint64) * b.astype(np.uint64)
        p = p.view(np.uint64) if p.dtype == np.int64 else p
        return (p >> np.uint64(32)) & np.uint64(0xFFFFFFFF) if hi else p & np.uint64(0xFFFFFFFF)
    spec = alu.AluSpec("mul", "s64" if signed else "u64", frozenset({"hi" if hi else "lo"}))
    return np.asarray(alu.execute(spec, a, b)).view(np.uint64)


def _add_with_carry(a, b, cin, w, sign):
    """(a + b + cin) or (a - b - cin) modulo 2**w with the carry/borrow out, all np.uint64."""
    if w == 32:
        if sign > 0:
            s = a + b + cin
            return s, (s >> np.uint64(32)) & np.uint64(1)
        s = a - b - cin
        return s, (a < b + cin).astype(np.uint64)
    if sign > 0:
        s1 = a + b
        c1 = s1 < a
        s = s1 + cin
        c2 = s < s1
        return s, (c1 | c2).astype(np.uint64)
    d1 = a - b
    b1 = a < b  # borrow when b > a, or when the second subtraction wraps
    s = d1 - cin
    b2 = d1 < cin
    return s, (b1 | b2).astype(np.uint64)
