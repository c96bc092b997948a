"""C renderer of the CPU backend: one kernel IR -> one freestanding C function plus its signature record.

The function follows the calling convention of ``abi`` (``void <name>(const long long* rtk_args)``, arguments in an
int64 block, a ``rtk_signature`` record naming the launch parameters it reads). It runs the rectangle of groups the
call is given (rows ``[rlo, rhi)`` times x groups ``[xlo, xhi)``) and every thread of them, each thread executing the
whole op list, so one object serves any launch shape and any split of the groups over threads. A kernel that stores
nothing has no effect and renders as an empty function that takes no launch parameters.

Loops shaped so the compiler's work matches the op. When the kernel reads its x group and x thread ids only as the
global x id (``group * lsize + local``, what ``KernelBuilder.global_id(0)`` builds) and is unchecked, it is two loops:
one over (row, z thread, y thread), which derives the ids it needs by division once per x row, around one counted loop
over the rectangle's global x ids (``rtk_gx``). Otherwise a row loop holds the x group loop and the z, y, x thread
loops (x innermost). The innermost loop runs over consecutive ids, which compilers vectorize; Clang is told not to
unroll it (``cexpr.HEADER``): runtime unrolling of a vectorized loop whose trip count is known only at run time was
most of what Clang spent compiling an elementwise kernel. Integer ADD/SUB/MUL of 32/64-bit values whose only use is a
LOAD/STORE index (directly or through other such ops) are computed in ``long long`` without wrapping (the IR leaves a
wrapped index undefined), so addresses are affine in the loop counters. Buffers the kernel only reads are ``const``.
Pointers are not ``restrict``: the IR cannot prove that a launch's buffers do not overlap, so compilers check at run
time where they vectorize.

Value semantics are in ``runtime_backends.cstyle`` (the C-family writer both C renderers share), the CPU's spelling in
``cexpr``. In checked mode (``memcheck``) every access first compares its index with the buffer's element count (from
the byte sizes in the argument block); a failing check fills the fault record with the op, slot, index, count, group
and thread ids and returns. Checked kernels keep the group and thread loops, so the first fault found is that of the
first thread in launch order.
"""

from __future__ import annotations

from runtime_backends.cpu.abi import FAULT_FIELDS, INT32_MAX, LAUNCH_PARAMS, MAX_PARAMS, SIGNATURE_SYMBOL, Signature
from runtime_backends.cpu.cexpr import CPU_DIALECT, HEADER
from runtime_backends.cpu.execmem import LIBC_WHITELIST, LIBM_WHITELIST
from runtime_backends.cpu.memcheck import memcheck_enabled
from runtime_backends.cstyle.values import helpers, storage_ctype
from runtime_backends.cstyle.writer import CWriter
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
_RECT = ("rlo", "rhi", "xlo", "xhi")  # the call's rectangle of groups (abi), held as rtk_rlo ...


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
    uses = _uses(kernel)
    found: set[int] = set()
    for u in reversed(kernel.ops):  # SSA: every use comes after its definition
        if u.op in _INDEX_ARITH and u.dtype in _INDEX_DTYPES and id(u) in uses and all(
                (user.op in (Ops.LOAD, Ops.STORE) and k == 1) or id(user) in found for user, k in uses[id(u)]):
            found.add(id(u))
    return found




def global_x_ops(kernel: Kernel) -> set[int] | None:
    """ids of the ADD ops computing the global x id (``ADD(MUL(group 0, lsize 0), local 0)``, any operand order) when
    the x group and x thread ids are read nowhere else (an empty set when not at all); None otherwise."""
    uses = _uses(kernel)
    adds: set[int] = set()
    for u in kernel.ops:
        if _is_special(u, "group"):
            for mul, _ in uses.get(id(u), []):
                if mul.op is not Ops.MUL or not any(_is_special(s, "lsize") for s in mul.src):
                    return None
                for add, _ in uses.get(id(mul), []):
                    if add.op is not Ops.ADD or not any(_is_special(s, "local") for s in add.src):
                        return None
                    adds.add(id(add))
    locals_ok = all(id(user) in adds for u in kernel.ops if _is_special(u, "local") for user, _ in uses.get(id(u), []))
    return adds if locals_ok else None


def _is_special(u: UOp, kind: str) -> bool:
    return u.op is Ops.SPECIAL and u.arg == (kind, 0)


def _uses(kernel: Kernel) -> dict[int, list[tuple[UOp, int]]]:
    uses: dict[int, list[tuple[UOp, int]]] = {}
    for u in kernel.ops:
        for k, s in enumerate(u.src):
            uses.setdefault(id(s), []).append((u, k))
    return uses


class _KernelWriter(CWriter):
    """Writes one kernel: the body (``CWriter`` with the CPU's thread ids, index arithmetic and bounds checks), then
    the entry around it: argument block, row loop, thread loops."""

    dialect = CPU_DIALECT

    def __init__(self, kernel: Kernel, checked: bool) -> None:
        super().__init__(kernel, depth=2)  # inside the function and the group/thread loops
        self.checked = checked
        self.index_only = index_only_ops(kernel)
        self.global_x = None if checked else global_x_ops(kernel)
        self.written = kernel.written_buffers()
        self.specials: set[tuple[str, int]] = set()

    def source(self) -> str:
        k = self.k
        stores = any(u.op is Ops.STORE for u in k.ops)
        body = self.body() if stores else ""
        launch = self.launch_params() if stores else ()
        sig = Signature(len(k.buffers), len(k.vars), launch, self.checked)
        record = f"const int {SIGNATURE_SYMBOL}[5] = {{{', '.join(hex(v) for v in sig.record())}}};\n"
        head = f"void {k.name}(const long long* rtk_args) {{\n"
        if not stores:
            return f"{record}{head}  (void)rtk_args;  /* stores nothing: no effect */\n}}\n"
        prologue = "\n".join("  " + line for line in self.prologue(sig))
        loops = "\n".join("  " + line for line in self.loops())
        return f"{HEADER}{helpers(self.dialect, body)}{self.fault_macro()}{record}{head}{prologue}\n{loops} {{\n" \
            f"{body}\n  }}\n  }}\n}}\n"

    # ---- entry -------------------------------------------------------------------------------------------------
    def group_ids(self) -> bool:
        """Whether gid1/gid2 are needed (referenced, or reported by a checked kernel)."""
        return self.checked or any(("group", d) in self.specials for d in (1, 2))

    def launch_params(self) -> tuple[str, ...]:
        need = {"lsz0", "lsz1", "lsz2", "rlo", "rhi", "xlo", "xhi"}
        need |= {f"gsz{d}" for d in (0, 1, 2) if ("gsize", d) in self.specials}
        if self.group_ids():
            need.add("gsz1")
        return tuple(p for p in LAUNCH_PARAMS if p in need)

    def prologue(self, sig: Signature) -> list[str]:
        k = self.k
        lines = []
        for b in k.buffers:
            const = "" if b.arg in self.written else "const "
            t = storage_ctype(self.dialect, b.dtype)
            lines.append(f"{const}{t}* b{b.arg} = ({const}{t}*)rtk_args[{b.arg}];")
        lines += [f"const int a{n} = (int)rtk_args[{sig.buffers + n}];  /* {v.arg} */" for n, v in enumerate(k.vars)]
        for j, p in enumerate(sig.launch):
            t = "long long" if p in _RECT else "int"
            lines.append(f"const {t} {'rtk_' + p if t == 'long long' else p} = ({t})rtk_args[{sig.launch_offset + j}];")
        if self.checked:
            lines += [f"const unsigned long long rtk_n{b.arg} = (unsigned long long)rtk_args[{sig.sizes_offset + b.arg}] "
                      f"/ sizeof(*b{b.arg});" for b in k.buffers]
            lines.append(f"long long* const rtk_fault = (long long*)rtk_args[{sig.fault_offset}];")
        return lines

    def loops(self) -> list[str]:
        """The loops over the call's rectangle of groups and their threads, innermost a counted loop over x."""
        if self.global_x is None:
            lines = ["for (long long rtk_row = rtk_rlo; rtk_row < rtk_rhi; rtk_row++) {"]
            lines += self.group_ids_of("rtk_row")
            lines.append("  for (int gid0 = (int)rtk_xlo; gid0 < rtk_xhi; gid0++)")
            lines += [f"  for (int lid{d} = 0; lid{d} < lsz{d}; lid{d}++)" for d in (2, 1)]
            return lines + ["  RTK_THREADS", "  for (int lid0 = 0; lid0 < lsz0; lid0++)"]
        # flat: one loop over (row, lid2, lid1), lid1 fastest; the global x id counts the rectangle's x threads
        lines = ["const long long rtk_gx0 = rtk_xlo * lsz0, rtk_gx1 = rtk_xhi * lsz0;",
                 "for (long long rtk_r = 0, rtk_rn = (rtk_rhi - rtk_rlo) * lsz1 * lsz2; rtk_r < rtk_rn; rtk_r++) {"]
        if ("local", 1) in self.specials:
            lines.append("  const int lid1 = (int)(rtk_r % lsz1);")
        if ("local", 2) in self.specials:
            lines.append("  const int lid2 = (int)(rtk_r / lsz1 % lsz2);")
        if self.group_ids():
            lines.append("  const long long rtk_row = rtk_rlo + rtk_r / ((long long)lsz1 * lsz2);")
            lines += self.group_ids_of("rtk_row")
        return lines + ["  RTK_THREADS", "  for (long long rtk_gx = rtk_gx0; rtk_gx < rtk_gx1; rtk_gx++)"]

    def group_ids_of(self, row: str) -> list[str]:
        """gid1 and gid2 from the row index, where needed."""
        return [f"  const int gid1 = (int)({row} % gsz1), gid2 = (int)({row} / gsz1);"] if self.group_ids() else []

    def fault_macro(self) -> str:
        if not self.checked:
            return ""
        fields = {"hit": "1", "slot": "(s)", "index": "(long long)(i)", "count": "(long long)(n)", "store": "(st)",
                  "gid0": "gid0", "gid1": "gid1", "gid2": "gid2", "lid0": "lid0", "lid1": "lid1", "lid2": "lid2"}
        sets = " ".join(f"rtk_fault[{j}] = {fields[f]};" for j, f in enumerate(FAULT_FIELDS))
        return f"#define RTK_FAULT(s, i, n, st) do {{ {sets} return; }} while (0)\n"

    # ---- body: what the CPU decides ----------------------------------------------------------------------------
    def special(self, i: int, u: UOp) -> None:
        kind, dim = u.arg
        self.specials.add((kind, dim))
        self.names[id(u)] = _SPECIAL_NAMES[kind] + str(dim)

    def alu(self, i: int, u: UOp) -> None:
        if self.global_x is not None and u.op is Ops.MUL and any(_is_special(s, "group") for s in u.src):
            return  # only the global x id reads it (global_x_ops), which the flat loop counts
        if self.global_x is not None and id(u) in self.global_x:
            if id(u) in self.index_only:
                self.names[id(u)] = "rtk_gx"
            else:
                self.define(i, u, "(int)rtk_gx")  # int32 wraps as the IR's ADD does (modulo 2**32 conversion)
        elif id(u) in self.index_only:
            a, b = (self.n(s) if id(s) in self.index_only else f"(long long){self.n(s)}" for s in u.src)
            self.define(i, u, f"{a} {'+' if u.op is Ops.ADD else '-' if u.op is Ops.SUB else '*'} {b}", "long long")
        else:
            super().alu(i, u)

    def bounds(self, u: UOp, store: bool) -> str:
        """The checked kernel's test of one access (empty when unchecked)."""
        ptr, idx = u.src[0], u.src[1]
        index = self.n(idx)
        as_unsigned = f"(unsigned long long){index}" if idx.dtype.is_unsigned or id(idx) in self.index_only \
            else f"(unsigned long long)(long long){index}"
        count = f"rtk_n{ptr.arg}"
        return f"if ({as_unsigned} >= {count}) RTK_FAULT({ptr.arg}, {index}, {count}, {int(store)});"

    def load(self, i: int, u: UOp) -> None:
        if not self.checked:
            super().load(i, u)
        elif len(u.src) == 4:
            self.define(i, u, self.n(u.src[3]))
            self.line(f"if ({self.n(u.src[2])}) {{ {self.bounds(u, False)} v{i} = {self.access(u)}; }}")
        else:
            self.line(self.bounds(u, False))
            self.define(i, u, self.access(u))

    def store(self, u: UOp) -> None:
        if not self.checked:
            super().store(u)
        else:
            stmt = f"{self.n(u.src[0])}[{self.n(u.src[1])}] = {self.n(u.src[2])};"
            self.line(self.guarded(u, f"{{ {self.bounds(u, True)} {stmt} }}"))
