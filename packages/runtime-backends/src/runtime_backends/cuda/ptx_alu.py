"""PTX for the IR's ALU ops, CAST and BITCAST (PTX ISA, "Instruction Set": integer, floating-point, comparison,
logic and conversion instructions), with the semantics of ``runtime_core.ir``.

Register classes: bool is ``.pred``; integers of up to 32 bits live in ``.b32`` registers, *extended* to 32 bits
(sign-extended for signed types, zero-extended for unsigned), and an op whose result can leave the type's range (ADD,
SUB, MUL, NEG, SHL) re-extends it (``cvt.s32.s8`` / ``and.b32``), which is wrap-around modulo 2**bits; 64-bit integers
are ``.b64``; float16/bfloat16 are their bit patterns in ``.b16`` registers, computed in float32 and rounded once
(float16 with ``cvt.rn.f16.f32``, bfloat16 with integer round-to-nearest-even); float32/float64 use the IEEE ``.rn``
instructions, ``max``/``min`` (maxNum/minNum), ``fma.rn`` for FMA (a 16-bit FMA adds the exact float64 product
rounding to odd with ``fma.rz/rm/rp``, then to odd in float32, then once to the type), ``setp.neu`` for CMPNE (true
for NaN). EXP2/LOG2 of float32 are
``ex2.approx.f32``/``lg2.approx.f32`` (2 ulp; 2**-22.6 absolute near 1); SIN of every float type and float64
EXP2/LOG2 call the subroutines of :mod:`runtime_backends.cuda.ptx_math`.

Every function returns a fresh register (an ACC register may change later, so no result aliases an operand).
"""

from __future__ import annotations

from typing import Protocol

from runtime_backends.cstyle.constants import HALF
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Ops

__all__ = ["Emitter", "alu", "assign", "cast", "bitcast", "rclass", "itype", "mtype", "mov", "normalize"]


class Emitter(Protocol):
    """What the ops need from the kernel writer: fresh registers, instructions, subroutines."""

    def reg(self, cls: str) -> str: ...
    def ins(self, text: str) -> None: ...
    def use_func(self, name: str) -> str: ...


def rclass(dt: DType) -> str:
    """Register class of a value of ``dt``: ``pred``, ``b16``, ``b32``, ``b64``, ``f32`` or ``f64``."""
    if dt is dtypes.bool:
        return "pred"
    if dt in HALF:
        return "b16"
    if dt.is_float:
        return "f32" if dt is dtypes.float32 else "f64"
    return "b64" if dt.itemsize == 8 else "b32"


def itype(dt: DType) -> str:
    """Instruction type of integer arithmetic on ``dt`` as it sits in its register (``s32 u32 s64 u64``)."""
    return f"{'u' if dt.is_unsigned else 's'}{64 if dt.itemsize == 8 else 32}"


def mtype(dt: DType) -> str:
    """Memory type of a load or store of ``dt`` (bool is a byte)."""
    if dt is dtypes.bool:
        return "u8"
    if dt in HALF:
        return "b16"
    return dt.name.replace("float", "f").replace("uint", "u").replace("int", "s")


_MOV = {"pred": "mov.pred", "b16": "mov.b16", "b32": "mov.b32", "b64": "mov.b64", "f32": "mov.f32", "f64": "mov.f64"}
_SEL = {"b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32", "f64": "f64"}
_ONE_BITS = {dtypes.float16: "0x3C00", dtypes.bfloat16: "0x3F80"}
_ZERO = {dtypes.float32: "0f00000000", dtypes.float64: "0d0000000000000000"}
_ONE = {dtypes.float32: "0f3F800000", dtypes.float64: "0d3FF0000000000000"}


def mov(w: Emitter, dt: DType, src: str) -> str:
    """A copy of ``src`` in a fresh register."""
    d = w.reg(rclass(dt))
    assign(w, dt, d, src)
    return d


def assign(w: Emitter, dt: DType, dst: str, src: str) -> None:
    """``dst = src`` for registers (or an immediate ``src``) of ``dt``."""
    w.ins(f"{_MOV[rclass(dt)]} {dst}, {src};")


def normalize(w: Emitter, reg: str, dt: DType) -> None:
    """Re-extend an integer below 32 bits in place (wrap it into ``dt``'s range)."""
    if dt.itemsize >= 4 or not dt.is_int:
        return
    if dt.is_unsigned:
        w.ins(f"and.b32 {reg}, {reg}, {(1 << dt.bits) - 1};")
    else:
        w.ins(f"cvt.s32.s{dt.bits} {reg}, {reg};")


def alu(w: Emitter, op: Ops, dt: DType, srcs: list[str]) -> str:
    """The register holding ALU ``op`` on operands of ``dt`` (for WHERE: the condition, then two ``dt`` values)."""
    if op is Ops.WHERE:
        return _where(w, dt, *srcs)
    if dt is dtypes.bool:
        return _bool_alu(w, op, srcs)
    if dt in HALF:
        return _half_alu(w, op, dt, srcs)
    if dt.is_float:
        return _float_alu(w, op, dt, srcs)
    return _int_alu(w, op, dt, srcs)


def _where(w: Emitter, dt: DType, c: str, a: str, b: str) -> str:
    if dt is dtypes.bool:
        t, n, e, d = w.reg("pred"), w.reg("pred"), w.reg("pred"), w.reg("pred")
        w.ins(f"and.pred {t}, {c}, {a};")
        w.ins(f"not.pred {n}, {c};")
        w.ins(f"and.pred {e}, {n}, {b};")
        w.ins(f"or.pred {d}, {t}, {e};")
        return d
    d = w.reg(rclass(dt))
    w.ins(f"selp.{_SEL[rclass(dt)]} {d}, {a}, {b}, {c};")
    return d


def _bool_alu(w: Emitter, op: Ops, srcs: list[str]) -> str:
    a, b = srcs
    d = w.reg("pred")
    if op is Ops.CMPLT:  # false < true only
        n = w.reg("pred")
        w.ins(f"not.pred {n}, {a};")
        w.ins(f"and.pred {d}, {n}, {b};")
        return d
    name = {Ops.AND: "and", Ops.OR: "or", Ops.XOR: "xor", Ops.CMPNE: "xor"}[op]
    w.ins(f"{name}.pred {d}, {a}, {b};")
    return d


_INT_BINARY = {Ops.ADD: "add.{t}", Ops.SUB: "sub.{t}", Ops.MUL: "mul.lo.{t}", Ops.IDIV: "div.{t}", Ops.MOD: "rem.{t}",
               Ops.MAX: "max.{t}", Ops.MIN: "min.{t}", Ops.AND: "and.{b}", Ops.OR: "or.{b}", Ops.XOR: "xor.{b}",
               Ops.SHL: "shl.{b}", Ops.SHR: "shr.{t}"}


def _int_alu(w: Emitter, op: Ops, dt: DType, srcs: list[str]) -> str:
    t, b = itype(dt), rclass(dt)
    if op in (Ops.CMPLT, Ops.CMPNE):
        p = w.reg("pred")
        w.ins(f"setp.{'lt' if op is Ops.CMPLT else 'ne'}.{t} {p}, {srcs[0]}, {srcs[1]};")
        return p
    d = w.reg(b)
    if op is Ops.NEG:
        w.ins(f"neg.s{t[1:]} {d}, {srcs[0]};")
    else:
        x, y = srcs
        if op in (Ops.SHL, Ops.SHR) and b == "b64":  # the shift amount is a .u32 register
            amount = w.reg("b32")
            w.ins(f"cvt.u32.u64 {amount}, {y};")
            y = amount
        w.ins(f"{_INT_BINARY[op].format(t=t, b=b)} {d}, {x}, {y};")
    if op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.SHL):
        normalize(w, d, dt)
    return d


def _float_alu(w: Emitter, op: Ops, dt: DType, srcs: list[str]) -> str:
    f = "f32" if dt is dtypes.float32 else "f64"
    if op in (Ops.CMPLT, Ops.CMPNE):
        p = w.reg("pred")
        w.ins(f"setp.{'lt' if op is Ops.CMPLT else 'neu'}.{f} {p}, {srcs[0]}, {srcs[1]};")
        return p
    if op is Ops.SIN or (f == "f64" and op in (Ops.EXP2, Ops.LOG2)):
        return _call_f64(w, op, f, srcs[0])
    d = w.reg(f)
    name = {Ops.ADD: "add.rn", Ops.SUB: "sub.rn", Ops.MUL: "mul.rn", Ops.DIV: "div.rn", Ops.MAX: "max", Ops.MIN: "min",
            Ops.FMA: "fma.rn",
            Ops.NEG: "neg", Ops.SQRT: "sqrt.rn", Ops.RECIP: "rcp.rn", Ops.EXP2: "ex2.approx", Ops.LOG2: "lg2.approx"}
    if op is Ops.TRUNC:
        w.ins(f"cvt.rzi.{f}.{f} {d}, {srcs[0]};")
    else:
        w.ins(f"{name[op]}.{f} {d}, {', '.join(srcs)};")
    return d


def _call_f64(w: Emitter, op: Ops, f: str, x: str) -> str:
    func = w.use_func(op.name.lower())
    arg = x
    if f == "f32":
        arg = w.reg("f64")
        w.ins(f"cvt.f64.f32 {arg}, {x};")
    y = w.reg("f64")
    w.ins(f"{{ .param .f64 rtk_arg; .param .f64 rtk_ret; st.param.f64 [rtk_arg], {arg}; "
          f"call (rtk_ret), {func}, (rtk_arg); ld.param.f64 {y}, [rtk_ret]; }}")
    if f == "f64":
        return y
    d = w.reg("f32")
    w.ins(f"cvt.rn.f32.f64 {d}, {y};")
    return d


def _half_alu(w: Emitter, op: Ops, dt: DType, srcs: list[str]) -> str:
    if op is Ops.NEG:
        d = w.reg("b16")
        w.ins(f"xor.b16 {d}, {srcs[0]}, 0x8000;")
        return d
    if op is Ops.FMA:  # the product is exact in float64; the sum rounds to odd twice, then once to the type
        wide = []
        for s in srcs:
            wide.append(w.reg("f64"))
            w.ins(f"cvt.f64.f32 {wide[-1]}, {to_f32(w, dt, s)};")
        return from_f32(w, dt, _f32_for_half(w, _fma_odd(w, wide), dtypes.float64))
    result = _float_alu(w, op, dtypes.float32, [to_f32(w, dt, s) for s in srcs])
    return result if op in (Ops.CMPLT, Ops.CMPNE) else from_f32(w, dt, result)


def to_f32(w: Emitter, dt: DType, h: str) -> str:
    """The float32 value (exact) of float16/bfloat16 bits ``h``."""
    f = w.reg("f32")
    if dt is dtypes.float16:
        w.ins(f"cvt.f32.f16 {f}, {h};")
        return f
    r = w.reg("b32")
    w.ins(f"cvt.u32.u16 {r}, {h};")
    w.ins(f"shl.b32 {r}, {r}, 16;")
    w.ins(f"mov.b32 {f}, {r};")
    return f


def from_f32(w: Emitter, dt: DType, f: str) -> str:
    """float32 ``f`` rounded to nearest even into float16/bfloat16 bits (NaN stays NaN)."""
    h = w.reg("b16")
    if dt is dtypes.float16:
        w.ins(f"cvt.rn.f16.f32 {h}, {f};")
        return h
    x, mag, lsb, rounded, quiet = (w.reg("b32") for _ in range(5))
    nan = w.reg("pred")
    w.ins(f"mov.b32 {x}, {f};")
    w.ins(f"and.b32 {mag}, {x}, 0x7FFFFFFF;")
    w.ins(f"setp.gt.u32 {nan}, {mag}, 0x7F800000;")
    w.ins(f"shr.u32 {lsb}, {x}, 16;")
    w.ins(f"and.b32 {lsb}, {lsb}, 1;")
    w.ins(f"add.u32 {lsb}, {lsb}, 0x7FFF;")
    w.ins(f"add.u32 {rounded}, {x}, {lsb};")
    w.ins(f"shr.u32 {rounded}, {rounded}, 16;")
    w.ins(f"shr.u32 {quiet}, {x}, 16;")
    w.ins(f"or.b32 {quiet}, {quiet}, 0x40;")
    w.ins(f"selp.b32 {rounded}, {quiet}, {rounded}, {nan};")
    w.ins(f"cvt.u16.u32 {h}, {rounded};")
    return h


def _jam(w: Emitter, t: str, inexact: str) -> str:
    """float32 ``t`` (truncated) with its last bit set where ``inexact``: rounding to odd."""
    bits, odd, out = w.reg("b32"), w.reg("b32"), w.reg("f32")
    w.ins(f"mov.b32 {bits}, {t};")
    w.ins(f"or.b32 {odd}, {bits}, 1;")
    w.ins(f"selp.b32 {odd}, {odd}, {bits}, {inexact};")
    w.ins(f"mov.b32 {out}, {odd};")
    return out


def _fma_odd(w: Emitter, args: list[str]) -> str:
    """float64 ``a * b + c`` rounded to odd: exact where rounding down and up agree, else truncated with the last bit
    set (``fma.rz``/``fma.rm``/``fma.rp``)."""
    t, lo, hi, bits, odd, out = (w.reg(c) for c in ("f64", "f64", "f64", "b64", "b64", "f64"))
    inexact = w.reg("pred")
    operands = ", ".join(args)
    for mode, reg in (("rz", t), ("rm", lo), ("rp", hi)):
        w.ins(f"fma.{mode}.f64 {reg}, {operands};")
    w.ins(f"setp.ne.f64 {inexact}, {lo}, {hi};")
    w.ins(f"mov.b64 {bits}, {t};")
    w.ins(f"or.b64 {odd}, {bits}, 1;")
    w.ins(f"selp.b64 {odd}, {odd}, {bits}, {inexact};")
    w.ins(f"mov.b64 {out}, {odd};")
    return out


def _f32_for_half(w: Emitter, x: str, src: DType) -> str:
    """A float32 of ``x`` that rounds correctly to 16 bits: exact, or rounded to odd (Boldo & Melquiond, 2008)."""
    if src is dtypes.float32:
        return x
    t, p = w.reg("f32"), w.reg("pred")
    if src is dtypes.float64:
        back = w.reg("f64")
        w.ins(f"cvt.rz.f32.f64 {t}, {x};")
        w.ins(f"cvt.f64.f32 {back}, {t};")
        w.ins(f"setp.ne.f64 {p}, {back}, {x};")  # ordered: a NaN is not "inexact"
        return _jam(w, t, p)
    it = itype(src)
    if src.itemsize <= 2:
        w.ins(f"cvt.rn.f32.{it} {t}, {x};")  # exact
        return t
    back = w.reg(rclass(src))
    w.ins(f"cvt.rz.f32.{it} {t}, {x};")
    w.ins(f"cvt.rzi.{it}.f32 {back}, {t};")
    w.ins(f"setp.ne.{it} {p}, {back}, {x};")
    return _jam(w, t, p)


def cast(w: Emitter, x: str, src: DType, dst: DType) -> str:
    """The register holding ``x`` (of ``src``) converted to ``dst`` with the IR's CAST semantics."""
    if src is dst:
        return mov(w, dst, x)
    if dst is dtypes.bool:
        return _to_bool(w, x, src)
    if src is dtypes.bool:
        d = w.reg(rclass(dst))
        if dst in HALF:
            w.ins(f"selp.b16 {d}, {_ONE_BITS[dst]}, 0x0000, {x};")
        elif dst.is_float:
            w.ins(f"selp.{rclass(dst)} {d}, {_ONE[dst]}, {_ZERO[dst]}, {x};")
        else:
            w.ins(f"selp.{itype(dst)} {d}, 1, 0, {x};")
        return d
    if src in HALF:
        f = to_f32(w, src, x)
        return from_f32(w, dst, f) if dst in HALF else cast(w, f, dtypes.float32, dst)
    if dst in HALF:
        return from_f32(w, dst, _f32_for_half(w, x, src))
    d = w.reg(rclass(dst))
    if src.is_float and dst.is_float:
        w.ins(f"cvt.f64.f32 {d}, {x};" if dst is dtypes.float64 else f"cvt.rn.f32.f64 {d}, {x};")
    elif src.is_float:
        w.ins(f"cvt.rzi.{itype(dst)}.{rclass(src)} {d}, {x};")
        normalize(w, d, dst)
    elif dst.is_float:
        w.ins(f"cvt.rn.{rclass(dst)}.{itype(src)} {d}, {x};")
    else:
        _int_to_int(w, d, x, src, dst)
    return d


def _to_bool(w: Emitter, x: str, src: DType) -> str:
    p = w.reg("pred")
    if src in HALF:
        mag = w.reg("b16")
        w.ins(f"and.b16 {mag}, {x}, 0x7FFF;")
        w.ins(f"setp.ne.b16 {p}, {mag}, 0;")
    elif src.is_float:
        w.ins(f"setp.neu.{rclass(src)} {p}, {x}, {_ZERO[src]};")
    else:
        w.ins(f"setp.ne.{itype(src)} {p}, {x}, 0;")
    return p


def _int_to_int(w: Emitter, d: str, x: str, src: DType, dst: DType) -> None:
    wide_src, wide_dst = src.itemsize == 8, dst.itemsize == 8
    if wide_src and wide_dst:
        w.ins(f"mov.b64 {d}, {x};")
    elif wide_dst:  # the source is already extended to 32 bits by its own signedness; extend on to 64
        w.ins(f"cvt.u64.u32 {d}, {x};" if src.is_unsigned else f"cvt.s64.s32 {d}, {x};")
    else:
        w.ins(f"cvt.u32.u64 {d}, {x};" if wide_src else f"mov.b32 {d}, {x};")
        normalize(w, d, dst)


def bitcast(w: Emitter, x: str, src: DType, dst: DType) -> str:
    """The register holding the bits of ``x`` (``src``) reinterpreted as ``dst`` (same size)."""
    if dst is dtypes.bool or src is dtypes.bool:
        return cast(w, x, src, dst)  # bool <-> a byte: 0/1 and != 0 are the bit patterns
    d = w.reg(rclass(dst))
    if src in HALF and dst in HALF:
        w.ins(f"mov.b16 {d}, {x};")
    elif src in HALF:
        w.ins(f"cvt.{'u32.u16' if dst.is_unsigned else 's32.s16'} {d}, {x};")
    elif dst in HALF:
        w.ins(f"cvt.u16.u32 {d}, {x};")
    else:
        w.ins(f"mov.b{dst.bits if dst.itemsize >= 4 else 32} {d}, {x};")
        normalize(w, d, dst)
    return d
