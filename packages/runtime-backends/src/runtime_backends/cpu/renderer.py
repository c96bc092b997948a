"""C renderer of the CPU backend: one kernel IR -> one freestanding C function plus its signature record.

The function follows the calling convention of ``abi`` (``void <name>(const long long* rtk_args)``, arguments in an
int64 block, a ``rtk_signature`` record naming the launch parameters it reads). It runs the groups of its range
``[glo, ghi)`` (linear group index, x fastest) and, inside each group, every thread (z, y, x loops, x innermost), each
thread executing the whole op list, so one object serves any launch shape and any split of the groups over threads.
A kernel that stores nothing has no effect and renders as an empty function that takes no launch parameters.

What compilers vectorize: the thread loops are plain counted loops whose x loop is innermost, so ``global id``
indexing is contiguous in it; integer ADD/SUB/MUL of 32/64-bit values whose only use is a LOAD/STORE index (directly or
through other such ops) are computed in ``long long`` without wrapping (the IR leaves a wrapped index undefined), so
addresses are affine in the loop counters. Buffers the kernel only reads are ``const``. Pointers are not ``restrict``:
the IR cannot prove that a launch's buffers do not overlap, so compilers check at run time where they vectorize.

Value semantics are in ``cexpr``. A gated load is ``gate ? p[i] : alt`` (the false arm never touches memory), a gated
store is ``if (gate) p[i] = v;``. In checked mode (``memcheck``) every access first compares its index with the
buffer's element count (from the byte sizes in the argument block); a failing check fills the fault record with the
op, slot, index, count, group and thread ids and returns.
"""

from __future__ import annotations

from runtime_backends.cpu.abi import FAULT_FIELDS, INT32_MAX, LAUNCH_PARAMS, MAX_PARAMS, SIGNATURE_SYMBOL, Signature
from runtime_backends.cpu.cexpr import PRELUDE, alu_expr, cast_expr, ctype, render_const, storage_ctype
from runtime_backends.cpu.execmem import LIBC_WHITELIST, LIBM_WHITELIST
from runtime_backends.cpu.memcheck import memcheck_enabled
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, Ops, UOp, validate
from runtime_core.renderer import Renderer

__all__ = ["CRenderer"]

_RESERVED = LIBM_WHITELIST | LIBC_WHITELIST  # a kernel of that name would capture the calls to the host function
_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int long register "
    "restrict return short signed sizeof static struct switch typedef union unsigned void volatile while _Alignas "
    "_Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local asm typeof "
    # C23 keywords (the default language of newer GCC and Clang)
    "alignas alignof bool constexpr false nullptr static_assert thread_local true typeof_unqual".split())
_INDEX_ARITH = frozenset({Ops.ADD, Ops.SUB, Ops.MUL})
_INDEX_DTYPES = frozenset({dtypes.int32, dtypes.uint32, dtypes.int64})
_SPECIAL_NAMES = {"group": "gid", "local": "lid", "gsize": "gsz", "lsize": "lsz"}


class CRenderer(Renderer):
    """Renders a :class:`~runtime_core.ir.Kernel` to C for the CPU backend (module docstring; ABI in ``abi``).

    Args:
        memcheck: render bounds-checked kernels (``memcheck`` module); None (default) reads ``$CPU_MEMCHECK`` at every
            :meth:`render`, so a process can switch per test.

    Groups and the threads of a group run serially, so there is no local memory (``has_shared`` False): kernels with
    LOCAL ops (and hence BARRIER) are rejected by :meth:`check` with ``ValueError``. Launch sizes are C ``int``s, so
    each dimension may be up to ``2**31 - 1``.
    """

    device = "CPU"
    has_local = False
    has_shared = False
    global_max = (INT32_MAX, INT32_MAX, INT32_MAX)
    local_max = (INT32_MAX, INT32_MAX, INT32_MAX)
    shared_max = 0

    def __init__(self, memcheck: bool | None = None) -> None:
        self.memcheck = memcheck

    def render(self, kernel: Kernel) -> str:
        """The C translation unit for ``kernel``.

        Raises:
            runtime_core.ir.IRError: the kernel is malformed (a ``ValueError``).
            ValueError: the kernel uses local memory, takes more than ``MAX_PARAMS`` buffers and vals, or its name is
                not usable as the function's symbol (not an ASCII C identifier, a C11/C23 keyword, a reserved
                identifier such as ``__int128``, a whitelisted host function such as ``sinf``, or ``rtk_*``);
                ``$CPU_MEMCHECK`` is not a boolean.
        """
        validate(kernel)
        self.check(kernel)
        name = kernel.name
        # C11 7.1.3: identifiers starting with "__" or "_" and a capital are reserved (__int128, __asm__, _Pragma)
        # validate() has checked that the name is an ASCII identifier
        reserved = name.startswith(("__", "rtk_")) or name[:1] == "_" and name[1:2].isupper()
        if name in _C_KEYWORDS or name in _RESERVED or reserved:
            raise ValueError(f"CPU: kernel name {name!r} must be an ASCII C identifier that is not a keyword, not "
                             f"reserved (starting with '__' or '_' and a capital letter), not a host function kernels "
                             f"call (libm/libc whitelist) and does not start with 'rtk_' (it becomes the function's "
                             f"symbol); rename the kernel")
        if (nparams := len(kernel.buffers) + len(kernel.vars)) > MAX_PARAMS:
            raise ValueError(f"CPU: kernel {name!r} takes {nparams} buffers and vals; the CPU backend's calling "
                             f"convention allows at most {MAX_PARAMS}")
        checked = memcheck_enabled() if self.memcheck is None else self.memcheck
        return _KernelWriter(kernel, checked).source()


def index_only_ops(kernel: Kernel) -> set[int]:
    """ids of the 32/64-bit integer ADD/SUB/MUL ops (uint64 excluded: it wraps by definition) whose every use is a
    LOAD/STORE index or an operand of another such op: the renderer computes them in ``long long``."""
    uses: dict[int, list[tuple[UOp, int]]] = {}
    for u in kernel.ops:
        for k, s in enumerate(u.src):
            uses.setdefault(id(s), []).append((u, k))
    found: set[int] = set()
    for u in reversed(kernel.ops):  # SSA: every use comes after its definition
        if u.op in _INDEX_ARITH and u.dtype in _INDEX_DTYPES and id(u) in uses and all(
                (user.op in (Ops.LOAD, Ops.STORE) and k == 1) or id(user) in found for user, k in uses[id(u)]):
            found.add(id(u))
    return found


class _KernelWriter:
    """Writes one kernel: the body (one C statement per op, blocks indented), then the entry around it."""

    def __init__(self, kernel: Kernel, checked: bool) -> None:
        self.k, self.checked = kernel, checked
        self.index_only = index_only_ops(kernel)
        self.written = kernel.written_buffers()
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.depth = 2  # inside the function and the group/thread loops
        self.specials: set[tuple[str, int]] = set()

    def source(self) -> str:
        k = self.k
        for n, v in enumerate(k.vars):
            self.names[id(v)] = f"a{n}"
        for b in k.buffers:
            self.names[id(b)] = f"b{b.arg}"
        stores = any(u.op is Ops.STORE for u in k.ops)
        if stores:
            for i, u in enumerate(k.ops):
                self.emit_op(i, u)
        launch = self.launch_params() if stores else ()
        sig = Signature(len(k.buffers), len(k.vars), launch, self.checked)
        record = f"const int {SIGNATURE_SYMBOL}[5] = {{{', '.join(hex(v) for v in sig.record())}}};\n"
        head = f"void {k.name}(const long long* rtk_args) {{\n"
        if not stores:
            return f"{PRELUDE}{record}{head}  (void)rtk_args;  /* stores nothing: no effect */\n}}\n"
        prologue = "\n".join("  " + line for line in self.prologue(sig))
        loops = "\n".join("  " + line for line in self.loops())
        return f"{PRELUDE}{self.fault_macro()}{record}{head}{prologue}\n{loops} {{\n" + "\n".join(self.lines) + \
            "\n  }\n  }\n}\n"

    # ---- entry -------------------------------------------------------------------------------------------------
    def group_ids(self) -> bool:
        """Whether gid1/gid2 are needed (referenced, or reported by a checked kernel)."""
        return self.checked or any(("group", d) in self.specials for d in (1, 2))

    def launch_params(self) -> tuple[str, ...]:
        need = {"gsz0", "lsz0", "lsz1", "lsz2", "glo", "ghi"} | {f"gsz{d}" for d in (1, 2) if ("gsize", d) in self.specials}
        if self.group_ids():
            need.add("gsz1")
        return tuple(p for p in LAUNCH_PARAMS if p in need)

    def prologue(self, sig: Signature) -> list[str]:
        k = self.k
        lines = []
        for b in k.buffers:
            const = "" if b.arg in self.written else "const "
            lines.append(f"{const}{storage_ctype(b.dtype)}* b{b.arg} = ({const}{storage_ctype(b.dtype)}*)rtk_args[{b.arg}];")
        lines += [f"const int a{n} = (int)rtk_args[{sig.buffers + n}];  /* {v.arg} */" for n, v in enumerate(k.vars)]
        for j, p in enumerate(sig.launch):
            t = "long long" if p in ("glo", "ghi") else "int"
            lines.append(f"const {t} {'rtk_' + p if t == 'long long' else p} = ({t})rtk_args[{sig.launch_offset + j}];")
        if self.checked:
            lines += [f"const unsigned long long rtk_n{b.arg} = (unsigned long long)rtk_args[{sig.sizes_offset + b.arg}] "
                      f"/ sizeof(*b{b.arg});" for b in k.buffers]
            lines.append(f"long long* const rtk_fault = (long long*)rtk_args[{sig.fault_offset}];")
        return lines

    def loops(self) -> list[str]:
        """The group range loop (one division per row of groups) and the thread loops, innermost x."""
        lines = ["for (long long rtk_g = rtk_glo; rtk_g < rtk_ghi;) {",
                 "  int gid0 = (int)(rtk_g % gsz0);"]
        if self.group_ids():
            lines += ["  const long long rtk_row = rtk_g / gsz0;",
                      "  const int gid1 = (int)(rtk_row % gsz1), gid2 = (int)(rtk_row / gsz1);"]
        lines += ["  const int rtk_end0 = rtk_ghi - rtk_g < gsz0 - gid0 ? gid0 + (int)(rtk_ghi - rtk_g) : gsz0;",
                  "  rtk_g += rtk_end0 - gid0;",
                  "  for (; gid0 < rtk_end0; gid0++)"]
        return lines + [f"  for (int lid{d} = 0; lid{d} < lsz{d}; lid{d}++)" for d in (2, 1, 0)]

    def fault_macro(self) -> str:
        if not self.checked:
            return ""
        fields = {"hit": "1", "slot": "(s)", "index": "(long long)(i)", "count": "(long long)(n)", "store": "(st)",
                  "gid0": "gid0", "gid1": "gid1", "gid2": "gid2", "lid0": "lid0", "lid1": "lid1", "lid2": "lid2"}
        sets = " ".join(f"rtk_fault[{j}] = {fields[f]};" for j, f in enumerate(FAULT_FIELDS))
        return f"#define RTK_FAULT(s, i, n, st) do {{ {sets} return; }} while (0)\n"

    # ---- body --------------------------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def n(self, u: UOp) -> str:
        return self.names[id(u)]

    def define(self, i: int, u: UOp, expr: str, t: str | None = None) -> None:
        self.names[id(u)] = f"v{i}"
        self.line(f"{t or ctype(u.dtype)} v{i} = {expr};")

    def emit_op(self, i: int, u: UOp) -> None:
        op = u.op
        if op in (Ops.PARAM, Ops.VAR):
            return
        if op is Ops.SPECIAL:
            kind, dim = u.arg
            self.specials.add((kind, dim))
            self.names[id(u)] = _SPECIAL_NAMES[kind] + str(dim)
        elif op is Ops.CONST:
            self.define(i, u, render_const(u.arg, u.dtype))
        elif op is Ops.ACC:
            self.define(i, u, self.n(u.src[0]))
        elif op is Ops.ASSIGN:
            self.line(f"{self.n(u.src[0])} = {self.n(u.src[1])};")
        elif op is Ops.LOAD:
            self.load(i, u)
        elif op is Ops.STORE:
            self.store(u)
        elif op is Ops.RANGE:
            v, t, (start, end) = f"v{i}", ctype(u.dtype), u.src
            self.names[id(u)] = v
            # the bound is read once, at the RANGE op (it may be an ACC that the loop body assigns)
            self.line(f"for ({t} {v} = {self.n(start)}, {v}_end = {self.n(end)}; {v} < {v}_end; {v}++) {{")
            self.depth += 1
        elif op is Ops.IF:
            self.line(f"if ({self.n(u.src[0])}) {{")
            self.depth += 1
        elif op in (Ops.ENDRANGE, Ops.ENDIF):
            self.depth -= 1
            self.line("}")
        elif op is Ops.BITCAST:
            self.bitcast(i, u)
        elif op is Ops.CAST:
            self.define(i, u, cast_expr(self.n(u.src[0]), u.src[0].dtype, u.dtype))
        elif id(u) in self.index_only:
            a, b = (self.n(s) if id(s) in self.index_only else f"(long long){self.n(s)}" for s in u.src)
            self.define(i, u, f"{a} {'+' if op is Ops.ADD else '-' if op is Ops.SUB else '*'} {b}", "long long")
        else:  # ALU; LOCAL and BARRIER were rejected by Renderer.check
            self.define(i, u, alu_expr(op, u.src[-1].dtype, [self.n(s) for s in u.src]))

    def bounds(self, u: UOp, store: bool) -> str:
        """The checked kernel's test of one access (empty when unchecked)."""
        ptr, idx = u.src[0], u.src[1]
        index = self.n(idx)
        as_unsigned = f"(unsigned long long){index}" if idx.dtype.is_unsigned or id(idx) in self.index_only \
            else f"(unsigned long long)(long long){index}"
        count = f"rtk_n{ptr.arg}"
        return f"if ({as_unsigned} >= {count}) RTK_FAULT({ptr.arg}, {index}, {count}, {int(store)});"

    def load(self, i: int, u: UOp) -> None:
        ptr, idx = self.n(u.src[0]), self.n(u.src[1])
        access = f"({ptr}[{idx}] != 0)" if u.dtype is dtypes.bool else f"{ptr}[{idx}]"
        gated = len(u.src) == 4
        if not self.checked:
            self.define(i, u, f"({self.n(u.src[2])} ? {access} : {self.n(u.src[3])})" if gated else access)
        elif gated:
            self.define(i, u, self.n(u.src[3]))
            self.line(f"if ({self.n(u.src[2])}) {{ {self.bounds(u, False)} v{i} = {access}; }}")
        else:
            self.line(self.bounds(u, False))
            self.define(i, u, access)

    def store(self, u: UOp) -> None:
        ptr, idx, val = self.n(u.src[0]), self.n(u.src[1]), self.n(u.src[2])
        stmt = f"{ptr}[{idx}] = {val};"
        if self.checked:
            stmt = f"{{ {self.bounds(u, True)} {stmt} }}"
        self.line(f"if ({self.n(u.src[3])}) {stmt}" if len(u.src) == 4 else stmt)

    def bitcast(self, i: int, u: UOp) -> None:
        src, sdt, dt = self.n(u.src[0]), u.src[0].dtype, u.dtype
        if dt is dtypes.bool:
            self.define(i, u, f"({src} != 0)")
        elif sdt is dtypes.bool or sdt.itemsize == 2 or sdt.is_int and dt.is_int:
            self.define(i, u, f"({ctype(dt)}){src}")  # same-size integer patterns (16-bit floats are bit patterns)
        else:
            self.names[id(u)] = f"v{i}"
            self.line(f"{ctype(dt)} v{i}; __builtin_memcpy(&v{i}, &{src}, {dt.itemsize});")
