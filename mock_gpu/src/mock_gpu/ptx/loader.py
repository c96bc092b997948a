"""Loaded PTX modules: kernels ready to launch and module-scope variables (the mock of cuModuleLoadData)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..address_space import AddressSpace
from .decode.dispatch import decode
from .errors import PTXError
from .linker import link_kernel
from .ops import Op
from .parse.parser import parse
from .parse.syntax import Decl, FImm, ParsedModule
from .types import STORAGE, WIDTH, const_value

__all__ = ["Kernel", "Module", "load_module"]

_MAX_THREADS = 1024


@dataclass
class Kernel:
    """An .entry function, decoded.

    ``params``: (byte offset, byte size) of each parameter in the parameter buffer; ``param_bytes``: buffer size;
    ``static_shared_bytes``: .shared variables (dynamic shared starts at the next 16-byte boundary,
    ``dynamic_shared_offset``); ``local_bytes``: per-thread local memory (stack frames of the kernel and of inlined
    calls); ``max_threads``: threads per block allowed (.maxntid/.reqntid product, else 1024).
    """

    name: str
    params: list[tuple[int, int]]
    param_bytes: int
    static_shared_bytes: int
    local_bytes: int
    max_threads: int
    reqntid: tuple[int, int, int] | None
    dynamic_shared_offset: int
    code: list[Op]
    reg_types: list[str]


class Module:
    """A loaded PTX module: ``kernels`` (name -> Kernel) and ``globals`` (name -> (size bytes, align)) of its
    module-scope .global/.const variables, which :meth:`bind` places in device memory; ``version`` and ``target``
    repeat its .version and .target directives."""

    def __init__(self, parsed: ParsedModule, kernels: dict[str, Kernel]) -> None:
        self.kernels = kernels
        self.version = parsed.version  # .version (major, minor)
        self.target = list(parsed.target)  # .target entries, e.g. ["sm_90"]
        self._decls = {d.name: d for d in parsed.variables if d.space in ("global", "const")}
        self.globals: dict[str, tuple[int, int]] = {n: (d.size, d.align) for n, d in self._decls.items()}
        self._bound: tuple[AddressSpace, int, dict[str, int]] | None = None

    def bind(self, space: AddressSpace, device: int) -> None:
        """Allocate and initialize the module variables on ``device`` (zero where no initializer is given).

        Raises RuntimeError if already bound, OutOfMemory from the allocator (nothing stays allocated then), and
        ValueError for an initializer naming an unknown symbol.
        """
        if self._bound is not None:
            raise RuntimeError("module is already bound to a device; unbind it first")
        addrs: dict[str, int] = {}
        try:
            for name, d in self._decls.items():
                addrs[name] = space.alloc(max(1, d.size), device)
            for name, d in self._decls.items():
                if d.init:
                    space.write(addrs[name], _init_bytes(d, addrs))
        except Exception:
            for ptr in addrs.values():
                space.free(ptr)
            raise
        self._bound = (space, device, addrs)

    def unbind(self) -> None:
        """Free the module variables (cuModuleUnload); a no-op when not bound."""
        if self._bound is None:
            return
        space, _, addrs = self._bound
        for ptr in addrs.values():
            space.free(ptr)
        self._bound = None

    def global_address(self, name: str) -> tuple[int, int]:
        """(device pointer, size) of module variable ``name`` (cuModuleGetGlobal); KeyError if unknown,
        RuntimeError if the module is not bound."""
        if name not in self._decls:
            raise KeyError(f"module has no .global/.const variable {name!r}; it has {sorted(self._decls)}")
        if self._bound is None:
            raise RuntimeError("module is not bound to a device; call bind() first")
        return self._bound[2][name], self._decls[name].size

    def symbol_addresses(self, space: AddressSpace, device: int) -> dict[str, int]:
        """Name -> device address of every module variable, for a launch on ``space``/``device``."""
        if not self._decls:
            return {}
        if self._bound is None or self._bound[0] is not space or self._bound[1] != device:
            raise RuntimeError("module is not bound to this address space/device; call bind(space, device) first")
        return self._bound[2]


def _init_bytes(d: Decl, addrs: dict[str, int]) -> bytes:
    """Bytes of a variable's initializer (PTX ISA 5.4.4 variable initializers); missing elements are zero."""
    t = d.elem if d.elem in STORAGE else "b8"
    esize = max(1, WIDTH[t] // 8)
    out = np.zeros(d.size, np.uint8)
    vals = []
    for item in d.init or []:
        if isinstance(item, tuple):
            if item[1] not in addrs:
                raise ValueError(f"initializer of {d.name!r} names {item[1]!r}, which is not a module variable")
            vals.append(const_value(addrs[item[1]] + item[2], t))
        elif isinstance(item, FImm):
            vals.append(const_value(item.bits, t, float_width=item.width))
        else:
            vals.append(const_value(item, t))
    raw = np.array(vals, dtype=STORAGE[t]).view(np.uint8) if vals else np.zeros(0, np.uint8)
    if raw.size > d.size:
        raise ValueError(f"initializer of {d.name!r} has {raw.size // esize} elements, more than its size allows")
    out[:raw.size] = raw
    return out.tobytes()


def load_module(ptx_text: str) -> Module:
    """Parse, link and decode PTX text (the mock of cuModuleLoadData).

    Raises PTXError (line number, line text, what is unsupported) for anything the interpreter cannot run, before
    any code executes.
    """
    if not isinstance(ptx_text, str):
        raise TypeError(f"PTX text must be a str, got {type(ptx_text).__name__}")
    try:
        return _load(ptx_text)
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        # malformed input the parser's own checks did not anticipate: still an invalid-PTX error, never a crash
        raise PTXError(0, "", f"malformed PTX ({type(exc).__name__}: {exc})") from exc


def _load(ptx_text: str) -> Module:
    parsed = parse(ptx_text)
    kernels: dict[str, Kernel] = {}
    for name, f in parsed.funcs.items():
        if not f.entry or not f.defined:
            continue
        lk = link_kernel(parsed, f)
        code = decode(lk.code, lk.reg_types, parsed.lines)
        reqntid = lk.perf.get(".reqntid")
        limit = lk.perf.get(".maxntid") or reqntid
        max_threads = int(np.prod(limit)) if limit else _MAX_THREADS
        r = (*reqntid, 1, 1) if reqntid else None
        req = (r[0], r[1], r[2]) if r else None
        kernels[name] = Kernel(name, lk.params, lk.param_bytes, lk.static_shared_bytes, lk.local_bytes,
                               min(max_threads, _MAX_THREADS), req, lk.dynamic_shared_offset, code,
                               lk.reg_types)
    for d in parsed.variables:
        if d.elem not in STORAGE and d.elem != "b8":
            raise PTXError(d.line, parsed.lines[d.line - 1].strip(), f"unsupported variable type .{d.elem}")
    return Module(parsed, kernels)
