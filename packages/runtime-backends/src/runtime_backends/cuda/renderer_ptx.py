"""PTX renderer: one kernel IR -> one PTX module with one ``.entry``, written directly (no NVRTC).

The module's ``.version``/``.target`` lines are placeholders (``VERSION``, ``TARGET``) that
:class:`~runtime_backends.cuda.compiler.PTXCompiler` stamps for the device. The entry takes ``.u64`` buffer pointers
(slot order) then ``.u32`` vals (``Kernel.vars`` order), like the CUDA C renderer, so both load the same way. Values
live in registers as :mod:`runtime_backends.cuda.ptx_alu` describes; loads and stores address ``base + index *
itemsize`` in 64 bits (``mul.wide`` for 32-bit indices), so indices above 2**31 bytes work. LOCAL arrays share one
``.extern .shared`` array (dynamic shared memory) whose size is recorded like the CUDA C renderer's
(:mod:`runtime_backends.cuda.ptx_info`). RANGE is a counted loop whose bound is read once, IF a branch around its
block, BARRIER ``bar.sync 0``, a gated load a predicated ``ld`` over a register holding the ``alt`` value.
"""

from __future__ import annotations

from collections import defaultdict

from runtime_backends.cstyle.constants import HALF, float_bits
from runtime_backends.cuda import ptx_alu as A
from runtime_backends.cuda.layout import CUDARendererBase, SharedLayout
from runtime_backends.cuda.ptx_info import shared_record
from runtime_backends.cuda.ptx_math import func_source
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, Ops, UOp

__all__ = ["PTXRenderer"]

_PREFIX = {"pred": "%p", "b16": "%h", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}
_SPECIAL = {"group": "%ctaid", "local": "%tid", "lsize": "%ntid", "gsize": "%nctaid"}


class _Writer:
    """Emits the entry's body op by op; registers are numbered per class and declared at the top."""

    def __init__(self, kernel: Kernel, layout: SharedLayout) -> None:
        self.k, self.layout = kernel, layout
        self.counts: defaultdict[str, int] = defaultdict(int)
        self.lines: list[str] = []
        self.regs: dict[int, str] = {}
        self.space: dict[int, str] = {}  # pointer op -> state space ("global" or "shared")
        self.blocks: dict[int, tuple[str, ...]] = {}  # RANGE/IF op -> its labels (and loop registers)
        self.funcs: list[str] = []
        self.nlabels = 0

    # the Emitter protocol of ptx_alu
    def reg(self, cls: str) -> str:
        n = self.counts[cls]
        self.counts[cls] += 1
        return f"{_PREFIX[cls]}{n}"

    def ins(self, text: str) -> None:
        self.lines.append(f"\t{text}")

    def use_func(self, name: str) -> str:
        if name not in self.funcs:
            self.funcs.append(name)
        return f"rtk_{name}_f64"

    def label(self) -> str:
        self.nlabels += 1
        return f"$L{self.nlabels}"

    def source(self) -> str:
        k = self.k
        for i, u in enumerate(k.ops):
            self.emit(i, u)
        params = [f"\t.param .u64 {k.name}_param_{b.arg}" for b in k.buffers]
        params += [f"\t.param .u32 {k.name}_param_{len(k.buffers) + n}" for n in range(len(k.vars))]
        decls = [f"\t.reg .{c} {_PREFIX[c]}<{n}>;" for c, n in sorted(self.counts.items())]
        head = [".version VERSION", ".target TARGET", ".address_size 64", ""]
        head += [func_source(f) for f in self.funcs]
        if self.layout.nbytes:
            head += [shared_record(k.name, self.layout.nbytes),
                     f".extern .shared .align {self.layout.align} .b8 rtk_smem[];", ""]
        entry = [f".visible .entry {k.name}(", ",\n".join(params), ")", "{", *decls, *self.lines, "\tret;", "}", ""]
        return "\n".join(head + entry)

    def emit(self, i: int, u: UOp) -> None:
        op = u.op
        handler = getattr(self, f"op_{op.name.lower()}", None)
        if handler is not None:
            handler(u)
        elif op is Ops.CAST:
            self.regs[id(u)] = A.cast(self, self.r(u.src[0]), u.src[0].dtype, u.dtype)
        elif op is Ops.BITCAST:
            self.regs[id(u)] = A.bitcast(self, self.r(u.src[0]), u.src[0].dtype, u.dtype)
        else:
            self.regs[id(u)] = A.alu(self, op, u.src[-1].dtype, [self.r(s) for s in u.src])

    def r(self, u: UOp) -> str:
        return self.regs[id(u)]

    def op_param(self, u: UOp) -> None:
        raw, ptr = self.reg("b64"), self.reg("b64")
        self.ins(f"ld.param.u64 {raw}, [{self.k.name}_param_{u.arg}];")
        self.ins(f"cvta.to.global.u64 {ptr}, {raw};")
        self.regs[id(u)], self.space[id(u)] = ptr, "global"

    def op_var(self, u: UOp) -> None:
        slot = len(self.k.buffers) + next(n for n, v in enumerate(self.k.vars) if v is u)
        d = self.reg("b32")
        self.ins(f"ld.param.u32 {d}, [{self.k.name}_param_{slot}];")
        self.regs[id(u)] = d

    def op_special(self, u: UOp) -> None:
        kind, dim = u.arg
        d = self.reg("b32")
        self.ins(f"mov.u32 {d}, {_SPECIAL[kind]}.{'xyz'[dim]};")
        self.regs[id(u)] = d

    def op_local(self, u: UOp) -> None:
        d = self.reg("b64")
        self.ins(f"mov.u64 {d}, rtk_smem;")
        if (offset := self.layout.offsets[id(u)]):
            self.ins(f"add.u64 {d}, {d}, {offset};")
        self.regs[id(u)], self.space[id(u)] = d, "shared"

    def op_const(self, u: UOp) -> None:
        self.regs[id(u)] = A.mov(self, u.dtype, _immediate(u.arg, u.dtype))

    def op_acc(self, u: UOp) -> None:
        self.regs[id(u)] = A.mov(self, u.dtype, self.r(u.src[0]))

    def op_assign(self, u: UOp) -> None:
        acc, value = u.src
        A.assign(self, acc.dtype, self.r(acc), self.r(value))

    def address(self, ptr: UOp, idx: UOp) -> str:
        off, addr = self.reg("b64"), self.reg("b64")
        size = ptr.dtype.itemsize
        if idx.dtype.itemsize == 8:
            self.ins(f"mul.lo.s64 {off}, {self.r(idx)}, {size};")
        else:
            self.ins(f"mul.wide.{'u32' if idx.dtype.is_unsigned else 's32'} {off}, {self.r(idx)}, {size};")
        self.ins(f"add.s64 {addr}, {self.r(ptr)}, {off};")
        return addr

    def op_load(self, u: UOp) -> None:
        ptr, idx = u.src[0], u.src[1]
        addr, space = self.address(ptr, idx), self.space[id(ptr)]
        guard = f"@{self.r(u.src[2])} " if len(u.src) == 4 else ""
        if u.dtype is dtypes.bool:
            byte, d = self.reg("b32"), self.reg("pred")
            if guard:
                self.ins(f"selp.u32 {byte}, 1, 0, {self.r(u.src[3])};")
            self.ins(f"{guard}ld.{space}.u8 {byte}, [{addr}];")
            self.ins(f"setp.ne.u32 {d}, {byte}, 0;")
        else:
            d = A.mov(self, u.dtype, self.r(u.src[3])) if guard else self.reg(A.rclass(u.dtype))
            self.ins(f"{guard}ld.{space}.{A.mtype(u.dtype)} {d}, [{addr}];")
        self.regs[id(u)] = d

    def op_store(self, u: UOp) -> None:
        ptr, idx, value = u.src[:3]
        addr, space = self.address(ptr, idx), self.space[id(ptr)]
        guard = f"@{self.r(u.src[3])} " if len(u.src) == 4 else ""
        v = self.r(value)
        if value.dtype is dtypes.bool:
            byte = self.reg("b32")
            self.ins(f"selp.u32 {byte}, 1, 0, {v};")
            v = byte
        self.ins(f"{guard}st.{space}.{A.mtype(value.dtype)} [{addr}], {v};")

    def op_range(self, u: UOp) -> None:
        var, end = A.mov(self, u.dtype, self.r(u.src[0])), A.mov(self, u.dtype, self.r(u.src[1]))
        top, done, stop = self.label(), self.label(), self.reg("pred")
        self.lines.append(f"{top}:")
        self.ins(f"setp.ge.{A.itype(u.dtype)} {stop}, {var}, {end};")
        self.ins(f"@{stop} bra {done};")
        self.regs[id(u)], self.blocks[id(u)] = var, (top, done)

    def op_endrange(self, u: UOp) -> None:
        rng = u.src[0]
        top, done = self.blocks[id(rng)]
        var = self.r(rng)
        self.ins(f"add.{A.itype(rng.dtype)} {var}, {var}, 1;")
        A.normalize(self, var, rng.dtype)
        self.ins(f"bra {top};")
        self.lines.append(f"{done}:")

    def op_if(self, u: UOp) -> None:
        done = self.label()
        self.ins(f"@!{self.r(u.src[0])} bra {done};")
        self.blocks[id(u)] = (done,)

    def op_endif(self, u: UOp) -> None:
        self.lines.append(f"{self.blocks[id(u.src[0])][0]}:")

    def op_barrier(self, u: UOp) -> None:
        self.ins("bar.sync 0;")


def _immediate(value: int | float | bool, dt: DType) -> str:
    """A PTX immediate with exactly the constant's value (integers extended as their registers hold them)."""
    if dt is dtypes.bool:
        return "1" if value else "0"
    if dt.is_int:
        v = int(value)
        return f"0x{v & (2**64 - 1):016X}" if dt.itemsize == 8 else str(v)
    bits = float_bits(value, dt)
    if dt in HALF:
        return f"0x{bits:04X}"
    return f"0f{bits:08X}" if dt is dtypes.float32 else f"0d{bits:016X}"


class PTXRenderer(CUDARendererBase):
    """Renders a :class:`~runtime_core.ir.Kernel` to a PTX module (see the module docstring) whose ``.version`` and
    ``.target`` the compiler stamps."""

    writer = _Writer
