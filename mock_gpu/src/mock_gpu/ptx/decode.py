"""Decoder: linked instructions -> pre-built closures (``Op``), done once at module load time.

Each Op has a ``kind`` the scheduler dispatches on (normal, branch, exit, barrier, trap), an optional guard predicate
and, for normal instructions, ``fn(ctx, idx)`` that executes it for the selected threads (``idx`` None = all threads of
the chunk). Everything that can be checked without running (opcode, types, operand kinds, ALU support) is checked here
and reported as PTXError with the line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..memory import MemoryFault
from . import alu, alu_video, memops, warp
from .errors import PTXError
from .linker import Label, LInstr, Loc
from .modifiers import ALLOWED, CACHE_HINT, unknown_modifiers
from .operands import GENERIC_WINDOWS, OperandError, Reader, is_uniform, reader, uniform, writer
from .parser import Addr, Imm, Not, Pair, Reg, Vec
from .types import RAW, STORAGE, WIDTH

__all__ = ["Op", "BarSpec", "decode", "NORMAL", "BRANCH", "EXIT", "BARRIER", "TRAP"]

NORMAL, BRANCH, EXIT, BARRIER, TRAP = range(5)
TYPES = frozenset(STORAGE)
CMPS = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu", "gtu", "geu",
                  "num", "nan"})
_UNARY = {"abs", "neg", "not", "cnot", "sqrt", "rsqrt", "rcp", "ex2", "lg2", "sin", "cos", "tanh", "brev"}
_COUNT = {"popc", "clz", "bfind"}
_BINARY = {"add", "sub", "min", "max", "and", "or", "xor", "div", "rem", "copysign", "mul", "mul24"}
_TERNARY = {"mad", "fma", "mad24", "sad"}
ALU_OPS = _UNARY | _COUNT | _BINARY | _TERNARY | {"shl", "shr", "bfe", "bfi", "prmt", "selp", "slct", "setp", "set",
                                                    "cvt", "testp", "shf", "dp4a", "dp2a", "bmsk", "szext"}
_TWO_TYPES = {"cvt", "set", "slct", "dp4a", "dp2a"}
_NOOPS = {"membar", "fence", "nanosleep", "prefetch", "prefetchu", "pmevent", "griddepcontrol", "discard",
          "applypriority"}
_SPACES = {"global": "global", "shared": "shared", "shared::cta": "shared", "local": "local", "const": "const",
           "param": "param", "param::entry": "param", "param::func": "param"}
_REJECTED = {
    "mma": "tensor-core matrix multiply is not emulated", "wmma": "tensor-core matrix multiply is not emulated",
    "wgmma": "tensor-core matrix multiply is not emulated", "ldmatrix": "matrix fragment loads are not emulated",
    "stmatrix": "matrix fragment stores are not emulated", "movmatrix": "matrix fragments are not emulated",
    "mapa": "distributed shared memory (thread block clusters) is not emulated",
    "mbarrier": "mbarrier objects are not emulated", "tex": "textures are not emulated",
    "tld4": "textures are not emulated", "suld": "surfaces are not emulated", "sust": "surfaces are not emulated",
    "tensormap": "tensor maps are not emulated",
    "alloca": "dynamic stack allocation is not emulated", "stacksave": "dynamic stack allocation is not emulated",
    "stackrestore": "dynamic stack allocation is not emulated", "setmaxnreg": "register reallocation is not emulated",
    "elect": "elect.sync is not emulated", "clusterlaunchcontrol": "cluster launch control is not emulated",
    "tcgen05": "tensor-core matrix multiply is not emulated",
}
_ATOM_OPS = {"add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"}


@dataclass
class BarSpec:
    """bar/barrier operands: barrier id, optional thread count, .aligned, arrive-only, bar.red operation."""

    barrier: Reader
    count: Reader | None
    aligned: bool
    arrive: bool
    red: str | None = None
    red_dst: Callable | None = None
    red_pred: Reader | None = None


@dataclass
class Op:
    """One decoded instruction."""

    kind: int
    fn: Callable | None
    guard: tuple[int, bool] | None
    line: int
    text: str
    target: int = -1
    bar: BarSpec | None = None


class _Err(Exception):
    pass


def decode(code: list[LInstr], reg_types: list[str], lines: list[str]) -> list[Op]:
    """Decode a linked kernel; raises PTXError naming the line of the first unsupported instruction."""
    out = []
    for li in code:
        text = lines[li.line - 1].strip() if 0 < li.line <= len(lines) else ".".join(li.op)
        try:
            out.append(_decode_one(li, reg_types, text))
        except (_Err, OperandError, TypeError, KeyError, ValueError, IndexError, StopIteration, OverflowError) as e:
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
        raise _Err(f"{base!r} is not supported by the interpreter: {_REJECTED[base]}")
    if base not in ALLOWED:
        raise _Err(f"opcode {base!r} is not supported by the interpreter")
    unknown = unknown_modifiers(base, _split(li.op)[3])
    if unknown:
        raise _Err(f"unknown or unsupported modifier(s) {', '.join('.' + m for m in unknown)} for {base!r}")
    if base == "bra" or base == "brx":
        if base == "brx" or len(ops) != 1 or not isinstance(ops[0], Label):
            raise _Err("only direct branches to a label are supported")
        return Op(BRANCH, None, li.guard, li.line, text, target=ops[0].pc)
    if base in ("ret", "exit"):
        return Op(EXIT, None, li.guard, li.line, text)
    if base in ("trap", "brkpt"):
        return Op(TRAP, None, li.guard, li.line, text)
    if base in ("bar", "barrier"):
        return _barrier(li, rt, text)
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
        return _carry(base, types, mods, ops, rt)
    if base == "lop3":
        return _lop3(types, mods, ops, rt)
    if base in alu_video.OPS:
        return _video(base, types, mods, ops, rt)
    if base in ALU_OPS:
        return _alu(base, types, cmp, boolop, mods, ops, rt)
    if base == "mov":
        return _mov(types, ops, rt)
    if base == "cvta":
        return _cvta(li.op, types, ops, rt)
    if base == "isspacep":
        return _isspacep(li.op[1], ops, rt)
    if base in ("ld", "ldu", "st"):
        return _ldst(base, li.op, types, mods, ops, rt)
    if base in ("atom", "red"):
        return _atom(base, types, mods, ops, rt)
    if base == "cp":
        return _cp_async(li.op, mods, ops, rt)
    if base == "shfl":
        return _shfl(types, mods, ops, rt)
    if base == "vote":
        return _vote(types, mods, ops, rt)
    if base == "activemask":
        return warp.activemask(writer(ops[0], "b32", rt))
    if base == "redux":
        op = next(m for m in mods if m in warp._REDUX)
        if types[0] not in (("b32",) if op in ("and", "or", "xor") else ("u32", "s32")):
            raise _Err(f"redux.sync.{op} is defined for {'.b32' if op in ('and', 'or', 'xor') else '.u32/.s32'}")
        mask = reader(ops[2], "b32", rt) if len(ops) > 2 else None
        return warp.redux(op, writer(ops[0], types[0], rt), reader(ops[1], types[0], rt), mask)
    if base == "match":
        mode = "any" if "any" in mods else "all"
        first = ops[0]
        p = writer(first.second, "pred", rt) if isinstance(first, Pair) else None
        d = writer(first.first if isinstance(first, Pair) else first, "b32", rt)
        return warp.match(mode, d, p, reader(ops[1], types[0], rt), reader(ops[2], "b32", rt))
    raise _Err(f"opcode {base!r} is not supported by the interpreter")


# ----- ALU -----
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
    if base in _UNARY:
        return t, None, t, [t]
    if base in _COUNT:
        return t, None, "u32", [t]
    if base in ("mul", "mad") and "wide" in mods:
        return t, None, _double(t), [t, t] + ([_double(t)] if base == "mad" else [])
    if base in _BINARY:
        return t, None, t, [t, t]
    if base in _TERNARY:
        return t, None, t, [t, t, t]
    if base in ("shl", "shr"):
        return t, None, t, [t, "u32"]
    if base == "bfe":
        return t, None, t, [t, "u32", "u32"]
    if base == "bfi":
        return t, None, t, [t, t, "u32", "u32"]
    if base == "prmt":
        return t, None, t, [t, t, t]
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
    raise _Err(f"no operand typing for {base!r}")


def _alu(base, types, cmp, boolop, mods, ops, rt) -> Callable:
    if len(types) != (2 if base in _TWO_TYPES else 1):
        raise _Err(f"expected {2 if base in _TWO_TYPES else 1} instruction type(s), found {len(types)}")
    nsrc = len(ops) - 1
    spec_t, stype, dst_t, src_ts = _alu_types(base, types, boolop, mods, nsrc)
    pair = isinstance(ops[0], Pair)
    if pair:
        mods = mods | {"pq"}
    spec = alu.AluSpec(base, spec_t, frozenset(mods), stype, cmp, boolop)
    if not alu.supports(spec):
        raise _Err(f"the ALU does not implement {spec}")
    if len(src_ts) != nsrc:
        raise _Err(f"expected {len(src_ts)} source operands, found {nsrc}")
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


def _video(base, types, mods, ops, rt) -> Callable:
    """vop2/vop4.dtype.atype.btype{.sat|.add} d, a, b, c and vset2/vset4.atype.btype.cmp{.add} d, a, b, c (PTX ISA
    9.7.16.2)."""
    vset = base.startswith("vset")
    want = 2 if vset else 3
    if len(types) != want or any(t not in ("u32", "s32") for t in types):
        raise _Err(f"{base} needs {want} types from .u32/.s32")
    cmp = next(iter(mods & alu_video.CMPS), None)
    if vset and (cmp is None or len(mods & alu_video.CMPS) != 1):
        raise _Err(f"{base} needs one comparison (.eq .ne .lt .le .gt .ge)")
    _operand_count(ops, 4, "d, a, b, c")
    _check_widths([(o, "b32") for o in ops], rt)
    signs = tuple(t == "s32" for t in (["u32"] + types if vset else types))
    a, b, c = (reader(o, "b32", rt) for o in ops[1:])
    d = writer(ops[0], "b32", rt)
    sat, add = "sat" in mods, "add" in mods

    def run(ctx, i):
        n = ctx.n if i is None else i.size
        d(ctx, i, alu_video.video(base, signs, sat, add, cmp, a(ctx, i, n), b(ctx, i, n), c(ctx, i, n)))  # type: ignore[arg-type]
    return run


def _check_widths(pairs: list[tuple[object, str]], rt: list[str]) -> None:
    """Registers of an arithmetic/logic instruction must have exactly the width of their operand type (PTX ISA 6.4.x
    "Operand Type Information"; only ld, st, cvt and mov accept wider or narrower registers)."""
    for k, (o, t) in enumerate(pairs):
        reg = o.reg if isinstance(o, Not) else o
        if isinstance(reg, Reg) and WIDTH[rt[reg.id]] != WIDTH[t]:
            raise _Err(f"operand {k + 1} is a .{rt[reg.id]} register but the instruction needs a {WIDTH[t]}-bit .{t} "
                       "operand")


def _lop3(types, mods, ops, rt) -> Callable:
    """lop3.b32 d, a, b, c, immLut and lop3.{or,and}.b32 d|p, a, b, c, immLut, q (PTX ISA 9.7.8.6), where
    p = (d != 0) BoolOp q."""
    boolop = next(iter(mods & {"or", "and"}), None)
    if types != ["b32"] or mods - {"or", "and"} or len(mods) > 1:
        raise _Err("lop3 takes .b32 and optionally one of .or/.and")
    if not isinstance(ops[4] if len(ops) > 4 else None, Imm):
        raise _Err("lop3 needs an immediate truth table (immLut) as its fifth operand")
    if len(ops) != (6 if boolop else 5) or isinstance(ops[0], Pair) != (boolop is not None):
        raise _Err("expected lop3.b32 d, a, b, c, immLut or lop3.{or,and}.b32 d|p, a, b, c, immLut, q")
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


def _carry(base, types, mods, ops, rt) -> Callable:
    """add.cc/addc/sub.cc/subc/mad.cc/madc (PTX ISA 9.7.2 extended precision): carry in/out through CC.CF."""
    t = types[0]
    w = WIDTH[t]
    if w not in (32, 64) or t[0] not in "us":
        raise _Err("extended-precision arithmetic needs .u32/.s32/.u64/.s64")
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


# ----- mov / cvta / isspacep -----
def _mov(types, ops, rt) -> Callable:
    t = types[0]
    d, a = ops
    if isinstance(a, Vec):
        return _pack(t, d, a, rt)
    if isinstance(d, Vec):
        return _unpack(t, d, a, rt)
    r = reader(a, t, rt)
    w = writer(d, t, rt)
    return lambda c, i: w(c, i, r(c, i, c.n if i is None else i.size))


def _pack(t, d, vec, rt) -> Callable:
    k = len(vec.items)
    part = WIDTH[t] // k
    pt = f"b{part}"
    items = [reader(x, pt, rt) for x in vec.items]
    w = writer(d, f"b{WIDTH[t]}", rt)
    out_dt = RAW[WIDTH[t]]

    def run(c, i):
        n = c.n if i is None else i.size
        acc = np.zeros(n, out_dt)
        for j, r in enumerate(items):
            acc |= r(c, i, n).astype(out_dt) << out_dt(j * part)
        w(c, i, acc)
    return run


def _unpack(t, vec, a, rt) -> Callable:
    k = len(vec.items)
    part = WIDTH[t] // k
    src = reader(a, f"b{WIDTH[t]}", rt)
    outs = [writer(x, f"b{part}", rt) for x in vec.items]
    src_dt = RAW[WIDTH[t]]
    part_dt = RAW[part]
    mask = src_dt((1 << part) - 1)

    def run(c, i):
        n = c.n if i is None else i.size
        v = src(c, i, n)
        for j, w in enumerate(outs):
            w(c, i, ((v >> src_dt(j * part)) & mask).astype(part_dt))
    return run


def _cvta(op, types, ops, rt) -> Callable:
    """cvta.space / cvta.to.space (PTX ISA 9.7.9.17): add or remove the space's generic window base."""
    to = "to" in op
    space = next((m for m in op[1:] if m in _SPACES), None)
    if space is None:
        raise _Err("cvta needs a state space")
    t = types[0]
    w = WIDTH[t]
    base = {"shared": GENERIC_WINDOWS["shared"], "local": GENERIC_WINDOWS["local"],
            "param": GENERIC_WINDOWS["kparam"]}.get(space, 0)
    r = reader(ops[1], t, rt)
    dst = writer(ops[0], t, rt)
    dt = RAW[w]
    delta = dt((-base if to else base) & ((1 << w) - 1))

    def run(c, i):
        v = r(c, i, c.n if i is None else i.size).view(dt)
        dst(c, i, (v + delta).view(STORAGE[t]))
    return run


def _isspacep(space, ops, rt) -> Callable:
    r = reader(ops[1], "u64", rt)
    w = writer(ops[0], "pred", rt)
    win = {"shared": 1, "local": 2, "param": 3}.get(space, 0)

    def run(c, i):
        v = r(c, i, c.n if i is None else i.size)
        got = memops.space_of_generic(v)
        w(c, i, got == win if win else (got == 0) & (v >= np.uint64(1 << 40)))
    return run


# ----- memory -----
def _address(o: Addr, space: str | None, rt) -> tuple[str, Callable]:
    """(effective space, address closure) of a memory operand for an instruction of state space ``space``."""
    if not isinstance(o, Addr):
        raise _Err("memory operand must be [address]")
    off = o.offset
    base = o.base
    if isinstance(base, Loc):
        eff = {"kparam": "kparam", "local": "local", "shared": "shared", "global": "global"}[base.space]
        if space is None and eff != "global":
            return "generic", uniform(np.array(base.offset + off + GENERIC_WINDOWS[eff], np.uint64))
        if eff == "global":
            name, total = base.name, base.offset + off
            return "global", lambda c, i, n: np.broadcast_to(np.array(c.symaddr[name] + total, np.uint64), (n,))
        return eff, uniform(np.array(base.offset + off, np.uint64))
    eff = {"global": "global", "const": "global", "shared": "shared", "local": "local", "param": "kparam",
           None: "generic"}[space]
    if base is None:
        return eff, uniform(np.array(off & ((1 << 64) - 1), np.uint64))
    r = reader(base, "u64", rt)
    if off == 0:
        return eff, r
    delta = np.uint64(off & ((1 << 64) - 1))
    return eff, lambda c, i, n: r(c, i, n) + delta


def _space(op: tuple[str, ...]) -> str | None:
    """The state space named by an instruction's modifiers (None: generic addressing)."""
    if "shared::cluster" in op:
        raise _Err("the .shared::cluster space (distributed shared memory) is not emulated")
    found = [_SPACES[m] for m in op[1:] if m in _SPACES]
    if len(found) > 1:
        raise _Err(f"more than one state space: {found}")
    return found[0] if found else None


def _vector(mods: set[str]) -> int:
    vec = [int(m[1:]) for m in mods if m in ("v2", "v4", "v8")]
    if len(vec) > 1:
        raise _Err("more than one vector modifier")
    return vec[0] if vec else 1


def _operand_count(ops: list, want: int, form: str) -> None:
    if len(ops) != want:
        raise _Err(f"expected {want} operands ({form}), found {len(ops)}")


def _ldst(base, op, types, mods, ops, rt) -> Callable:
    """ld/ldu/st{.space}{.cache ops}{.L2::cache_hint}{.vN}.type (PTX ISA 9.7.9.8-9.7.9.10); the cache policy operand
    of .L2::cache_hint is read and ignored."""
    space = _space(op)
    if base == "ldu" and space is None:
        space = "global"
    vec = _vector(mods)
    if len(types) != 1:
        raise _Err("ld/st need exactly one type")
    hint = CACHE_HINT in mods
    _operand_count(ops, 3 if hint else 2, f"{base} {'[a], b' if base == 'st' else 'd, [a]'}"
                   + (", cache-policy" if hint else ""))
    if hint:
        reader(ops[2], "b64", rt)
    t = types[0]
    dt = np.dtype(STORAGE[t])
    if base == "st":
        eff, addr = _address(ops[0], space, rt)
        vals = ops[1].items if isinstance(ops[1], Vec) else (ops[1],)
        if len(vals) != vec:
            raise _Err(f"expected {vec} source values")
        rs = [reader(v, t, rt) for v in vals]

        def run_st(c, i):
            n = c.n if i is None else i.size
            a = addr(c, i, n)
            v = rs[0](c, i, n) if vec == 1 else np.stack([r(c, i, n) for r in rs], axis=1)
            memops.store(c, eff, a, v, i)
        return run_st
    eff, addr = _address(ops[1], space, rt)
    dsts = ops[0].items if isinstance(ops[0], Vec) else (ops[0],)
    if len(dsts) != vec:
        raise _Err(f"expected {vec} destinations")
    ws = [writer(d, t, rt) for d in dsts]

    def run_ld(c, i):
        n = c.n if i is None else i.size
        v = memops.load(c, eff, addr(c, i, n), dt, vec, i)
        if vec == 1:
            ws[0](c, i, v)
        else:
            for j, w in enumerate(ws):
                w(c, i, np.ascontiguousarray(v[:, j]))
    return run_ld


_HALF_ATOMS = {"f16": "f16", "bf16": "bf16", "f16x2": "f16", "bf16x2": "bf16"}


def _atom_type(op: str, t: str, mods: set[str]) -> str:
    """The operand type of atom/red ``op`` on ``t`` (PTX ISA 9.7.13.5 atom: which types each operation takes)."""
    if any(m in mods for m in ("v2", "v4", "v8")):
        raise _Err("vector atomics are not supported")
    if t in _HALF_ATOMS:
        if op != "add" or "noftz" not in mods:
            raise _Err(f"atom/red on .{t} is supported for .add.noftz only")
        return t
    if "noftz" in mods:
        raise _Err(".noftz applies to .f16/.bf16/.f16x2/.bf16x2 atomics only")
    if WIDTH[t] == 16:
        if op != "cas" or t != "b16":
            raise _Err("16-bit atomics other than atom.cas.b16 are not defined")
        return t
    if WIDTH[t] not in (32, 64):
        raise _Err(f"atomics on .{t} are not defined")
    if t[0] == "f" and op not in ("add", "exch", "min", "max"):
        raise _Err(f"atom.{op} is not defined for .{t}")
    if op in ("inc", "dec") and t != "u32":
        raise _Err(f"atom.{op} is defined for .u32 only")
    if op in ("and", "or", "xor", "exch", "cas") and t[0] != "f":
        return f"b{WIDTH[t]}"
    return t


def _atom(base, types, mods, ops, rt) -> Callable:
    """atom/red{.sem}{.scope}{.space}.op{.noftz}{.L2::cache_hint}.type (PTX ISA 9.7.13.5/9.7.13.6)."""
    space = _space((base, *mods))
    aop = [m for m in mods if m in _ATOM_OPS]
    if len(aop) != 1 or len(types) != 1:
        raise _Err("atom/red need one operation and one type")
    op = aop[0]
    if base == "red" and op in ("exch", "cas"):
        raise _Err(f"red.{op} does not exist; use atom")
    t = _atom_type(op, types[0], mods)
    hint = CACHE_HINT in mods
    want = (2 if base == "red" else 4 if op == "cas" else 3) + hint
    _operand_count(ops, want, "atom d, [a], b{, c}" if base == "atom" else "red [a], b")
    if hint:
        reader(ops[-1], "b64", rt)
    apply = _half_atomic if t in _HALF_ATOMS else memops.atomic
    if base == "red":
        eff, addr = _address(ops[0], space, rt)
        b = reader(ops[1], t, rt)

        def run_red(c, i):
            n = c.n if i is None else i.size
            apply(c, eff, addr(c, i, n), op if t not in _HALF_ATOMS else t, b(c, i, n), None, i)
        return run_red
    d = writer(ops[0], t, rt)
    eff, addr = _address(ops[1], space, rt)
    b = reader(ops[2], t, rt)
    new = reader(ops[3], t, rt) if op == "cas" else None

    def run_atom(c, i):
        n = c.n if i is None else i.size
        if new is not None:
            d(c, i, memops.atomic(c, eff, addr(c, i, n), op, new(c, i, n), b(c, i, n), i))
        else:
            d(c, i, apply(c, eff, addr(c, i, n), op if t not in _HALF_ATOMS else t, b(c, i, n), None, i))
    return run_atom


def _half_atomic(c, eff: str, addrs: np.ndarray, t: str, values: np.ndarray, _cmp, i) -> np.ndarray:
    """atom.add.noftz on .f16/.bf16 (one 16-bit value) or .f16x2/.bf16x2 (two independent 16-bit halves of a 32-bit
    word, each added with its own rounding): returns the old values in the storage dtype of ``t``."""
    half = _HALF_ATOMS[t]
    if t == half:
        return memops.atomic(c, eff, addrs, f"add.{half}", values, None, i)
    memops.resolve_space(c, eff, addrs, 4, i)  # the packed word must be 4-byte aligned and in bounds
    bits = values.view(np.uint32)
    olds = [memops.atomic(c, eff, addrs + np.uint64(2 * k), f"add.{half}",
                          ((bits >> np.uint32(16 * k)) & np.uint32(0xFFFF)).astype(np.uint16), None, i)
             for k in (0, 1)]
    return olds[0].astype(np.uint32) | (olds[1].astype(np.uint32) << np.uint32(16))


def _cp_async(op, mods, ops, rt) -> Callable:
    """cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy} and
    cp.async.commit_group / wait_group N / wait_all (PTX ISA 9.7.9.25). The copy happens immediately, so every wait
    is already satisfied; bytes past src-size (all of them when ignore-src is true) are zero-filled."""
    if "bulk" in op or "mbarrier" in op:
        raise _Err("cp.async.bulk and cp.async.mbarrier forms (TMA, mbarrier) are not emulated")
    if mods & {"commit_group", "wait_group", "wait_all"}:
        if len(mods) != 2 or "async" not in mods:
            raise _Err("expected cp.async.commit_group, cp.async.wait_group N or cp.async.wait_all")
        _operand_count(ops, 1 if "wait_group" in mods else 0, "group count" if "wait_group" in mods else "none")
        return lambda c, i: None
    if "async" not in mods or len(mods & {"ca", "cg"}) != 1 or "global" not in mods or \
            _space(tuple(m for m in op if m != "global")) != "shared":
        raise _Err("expected cp.async.{ca,cg}.shared{::cta}.global")
    hint = CACHE_HINT in mods
    if len(ops) - hint not in (3, 4):
        raise _Err("expected [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy}")
    if hint:
        reader(ops[-1], "b64", rt)
    size = ops[2].value if isinstance(ops[2], Imm) else None
    if size not in ((16,) if "cg" in mods else (4, 8, 16)):
        raise _Err(f"cp-size must be an immediate {'16' if 'cg' in mods else '4, 8 or 16'}, got {ops[2]!r}")
    _, dst = _address(ops[0], "shared", rt)
    _, src = _address(ops[1], "global", rt)
    extra = ops[3] if len(ops) - hint == 4 else None
    ignore = reader(extra, "pred", rt) if extra is not None and _is_pred(extra, rt) else None
    src_size = reader(extra, "u32", rt) if extra is not None and ignore is None else None

    def run(c, i):
        n = c.n if i is None else i.size
        keep = np.full(n, size, np.int64)
        if src_size is not None:
            keep = np.minimum(src_size(c, i, n).astype(np.int64), size)
        if ignore is not None:
            keep = np.where(ignore(c, i, n), 0, size)
        data = np.zeros((n, size), np.uint8)
        if (keep == size).all():
            data = memops.load(c, "global", src(c, i, n), np.dtype(np.uint8), size, i)
        else:
            a = src(c, i, n)
            for k in range(size):
                sel = np.flatnonzero(keep > k)
                try:
                    data[sel, k] = memops.load(c, "global", a[sel] + np.uint64(k), np.dtype(np.uint8), 1, None)
                except MemoryFault as f:
                    f.position = None if f.position is None else int(sel[f.position])
                    raise
        memops.store(c, "shared", dst(c, i, n), data, i)
    return run


def _is_pred(o, rt) -> bool:
    reg = getattr(o, "reg", o)
    return hasattr(reg, "id") and rt[reg.id] == "pred"


# ----- warp -----
def _shfl(types, mods, ops, rt) -> Callable:
    mode = next((m for m in mods if m in ("up", "down", "bfly", "idx")), None)
    if mode is None or types != ["b32"]:
        raise _Err("shfl needs a mode (up/down/bfly/idx) and .b32")
    first = ops[0]
    p = writer(first.second, "pred", rt) if isinstance(first, Pair) else None
    d = writer(first.first if isinstance(first, Pair) else first, "b32", rt)
    mask = reader(ops[4], "b32", rt) if len(ops) > 4 else None
    return warp.shfl(mode, d, p, reader(ops[1], "b32", rt), reader(ops[2], "b32", rt), reader(ops[3], "b32", rt),
                     mask)


def _vote(types, mods, ops, rt) -> Callable:
    mode = next((m for m in mods if m in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        raise _Err("vote needs a mode")
    mask = reader(ops[2], "b32", rt) if len(ops) > 2 else None
    d = writer(ops[0], "b32" if mode == "ballot" else "pred", rt)
    return warp.vote(mode, d, reader(ops[1], "pred", rt), mask)


# ----- device-side assert -----
def _assertion(li: LInstr, text: str) -> Op:
    """The linker's stand-in for ``call __assertfail, (message, file, line, function, charSize)``: a trap whose
    ``fn(ctx, thread)`` formats the assertion of one failing thread from its call arguments."""
    if len(li.operands) < 4 or not all(isinstance(o, Loc) and o.space == "local" for o in li.operands):
        raise _Err("__assertfail takes (message, file, line, function, ...) .param arguments")
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
    data = c.space.read(address, min(limit, base + size - address))
    return data.split(b"\x00", 1)[0].decode(errors="replace")


# ----- barriers -----
def _barrier(li: LInstr, rt, text: str) -> Op:
    """bar{.cta}.sync/arrive/red, barrier{.cta}.sync/arrive/red{.aligned} (PTX ISA 9.7.13.1); bar.warp.sync."""
    parts = set(li.op[1:])
    ops = li.operands
    if "warp" in parts:
        return Op(NORMAL, lambda c, i: None, li.guard, li.line, text)
    if "cluster" in parts:
        raise _Err("cluster barriers are not supported")
    aligned = li.op[0] == "bar" or "aligned" in parts
    if "red" in parts:
        red = next(m for m in ("popc", "and", "or") if m in parts)
        dst_t = "u32" if red == "popc" else "pred"
        count = reader(ops[2], "u32", rt) if len(ops) == 4 else None
        spec = BarSpec(reader(ops[1], "u32", rt), count, aligned, False, red, writer(ops[0], dst_t, rt),
                       reader(ops[-1], "pred", rt))
        return Op(BARRIER, None, li.guard, li.line, text, bar=spec)
    if not ({"sync", "arrive"} & parts) and li.op[0] == "barrier" and len(li.op) > 1 and "aligned" not in parts:
        raise _Err("unknown barrier form")
    count = reader(ops[1], "u32", rt) if len(ops) > 1 else None
    spec = BarSpec(reader(ops[0], "u32", rt), count, aligned, "arrive" in parts)
    return Op(BARRIER, None, li.guard, li.line, text, bar=spec)

