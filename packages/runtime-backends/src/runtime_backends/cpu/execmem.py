"""Executable memory for linked CPU kernels, and the resolver for the host functions kernels may call.

``ExecutableImage.load(obj)`` maps anonymous memory read+write (libc ``mmap``), links the relocatable object for that
address (``elf.RelocatableObject``), copies the image, then gives every segment its final protection with
``mprotect``: text read+execute, rodata (constant pools, jump tables, GOT) read-only, data/bss read+write. No page is
ever writable and executable at the same time (W^X). On AArch64 the instruction cache is then synchronised with the
data cache over the text range by libgcc's ``__clear_cache(begin, end)`` (the routine GCC's and Clang's
``__builtin___clear_cache`` call), loaded with ctypes from ``libgcc_s.so.1``; x86-64 keeps instruction fetch
coherent with stores, so nothing is needed there (Intel SDM vol. 3, 8.1.3 "Handling Self- and Cross-Modifying Code").

Lifetime: the mapping is released by ``close()`` or when the ``ExecutableImage`` is garbage collected. Function
pointers from ``function()`` hold a reference to their image, so the code stays mapped while they exist. An explicit
``close()`` unmaps at once: pointers obtained before it would then jump to unmapped memory, so close an image only
when its functions are no longer used (``address``/``function`` refuse to work on a closed image).

Host functions (``host_resolver``): a kernel object may only call the whitelisted libm functions below and the four
memory functions that GCC and Clang may emit calls to even in freestanding code (``memcpy``, ``memmove``, ``memset``,
``memcmp``; see GCC's manual, "C Language" / ``-ffreestanding``). They are resolved in the host's libm / libc
(``ctypes.util.find_library``); every other undefined symbol stays unresolved and linking fails with CompileError.
Linking happens per process because these addresses differ between processes (ASLR).

Linux only (anonymous ``mmap`` + ``mprotect`` through the C library).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
import os
import platform
import weakref
from typing import Any

from runtime_backends.cpu.elf import LinkedImage, RelocatableObject, Resolver

__all__ = ["LIBC_WHITELIST", "LIBM_WHITELIST", "ExecutableImage", "host_library", "host_resolver"]

LIBM_WHITELIST = frozenset(
    f + suffix
    for f in ("exp", "exp2", "log", "log2", "sin", "cos", "tan", "sqrt", "pow", "fmod", "trunc", "floor", "ceil",
              "fabs", "fmax", "fmin", "fma")
    for suffix in ("", "f"))
"""libm functions a kernel may call (double and float variants)."""

LIBC_WHITELIST = frozenset({"memcpy", "memmove", "memset", "memcmp"})
"""libc memory functions that compilers may emit calls to in freestanding code."""


@functools.cache
def host_library(name: str) -> ctypes.CDLL:
    """The host's C library ``lib<name>`` (``"c"``, ``"m"``, ``"gcc_s"``), loaded once. ``OSError`` if missing."""
    path = ctypes.util.find_library(name)
    if path is None:
        raise OSError(f"the host C library 'lib{name}' was not found by ctypes.util.find_library({name!r}); "
                      f"install the C runtime (e.g. `apt-get install libc6 libgcc-s1`)")
    return ctypes.CDLL(path, use_errno=True)


def host_resolver(name: str) -> int | None:
    """Address of whitelisted host function ``name`` (LIBM_WHITELIST from libm, LIBC_WHITELIST from libc), else None.

    Raises:
        OSError: the host libm/libc cannot be found or does not export a whitelisted name.
    """
    if name in LIBM_WHITELIST:
        lib = host_library("m")
    elif name in LIBC_WHITELIST:
        lib = host_library("c")
    else:
        return None
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


@functools.cache
def _libc() -> ctypes.CDLL:
    """libc with the prototypes of mmap/mprotect/munmap set (once: every load and unmap uses them)."""
    libc = host_library("c")
    libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                                                ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.restype, libc.mprotect.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.restype, libc.munmap.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _os_error(call: str, *args: int) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{call}({', '.join(hex(a) for a in args)}) failed: {os.strerror(err)}")


def _map(size: int) -> int:
    libc = _libc()
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        raise _os_error("mmap", size)
    return addr


def _unmap(addr: int, size: int) -> None:
    if _libc().munmap(addr, size) != 0:
        raise _os_error("munmap", addr, size)


def _protect(base: int, image: LinkedImage) -> None:
    libc = _libc()
    for seg in image.segments:
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if seg.writable else 0) | (mmap.PROT_EXEC if seg.executable else 0)
        if libc.mprotect(base + seg.offset, seg.size, prot) != 0:
            raise _os_error("mprotect", base + seg.offset, seg.size, prot)


def _flush_icache(base: int, image: LinkedImage) -> None:
    if image.machine != "aarch64":
        return
    clear = host_library("gcc_s").__clear_cache
    clear.restype, clear.argtypes = None, [ctypes.c_void_p, ctypes.c_void_p]
    for seg in image.segments:
        if seg.executable:
            clear(base + seg.offset, base + seg.offset + seg.size)


class ExecutableImage:
    """A relocatable object linked into, and protected in, its own anonymous mapping.

    Attributes:
        base: absolute address of the mapping; size: its length in bytes; symbols: name -> offset (LinkedImage).
    """

    def __init__(self, base: int, linked: LinkedImage):
        self.base, self.size, self.symbols, self.machine = base, linked.size, dict(linked.symbols), linked.machine
        self._finalizer = weakref.finalize(self, _unmap, base, linked.size)

    @classmethod
    def load(cls, obj: bytes, resolve: Resolver = host_resolver) -> ExecutableImage:
        """Map, link (for the mapped address), copy and protect ``obj``.

        Raises:
            CompileError: from the linker (unsupported object, unresolved symbol, relocation overflow).
            OSError: mmap/mprotect failed, or libgcc_s (AArch64 cache flush) or libc cannot be loaded.
        On error nothing stays mapped.
        """
        robj = RelocatableObject(obj)
        if robj.machine != _host_machine():
            raise ValueError(f"the object is for {robj.machine} but this host is {_host_machine()}; it cannot run here")
        base = _map(robj.size)
        try:
            linked = robj.link(base, resolve)
            ctypes.memmove(base, linked.image, linked.size)
            _protect(base, linked)
            _flush_icache(base, linked)
        except BaseException:
            _unmap(base, robj.size)
            raise
        return cls(base, linked)

    @property
    def closed(self) -> bool:
        """True once the mapping has been released."""
        return not self._finalizer.alive

    def address(self, symbol: str) -> int:
        """Absolute address of global symbol ``symbol``. Raises KeyError (listing the symbols) or ValueError (closed)."""
        if self.closed:
            raise ValueError("the executable image is closed; load the object again")
        if symbol not in self.symbols:
            raise KeyError(f"symbol {symbol!r} is not defined by the object; defined: {sorted(self.symbols)}")
        return self.base + self.symbols[symbol]

    def function(self, symbol: str, restype: Any, argtypes: list[Any] | tuple[Any, ...]) -> Any:
        """A ctypes function pointer (C calling convention) to ``symbol`` with the given result and argument types.

        The returned object keeps this image alive (attribute ``image``). Raises like ``address``.
        """
        fn = ctypes.CFUNCTYPE(restype, *argtypes)(self.address(symbol))
        fn.image = self  # type: ignore[attr-defined]  # ctypes function objects accept attributes
        return fn

    def close(self) -> None:
        """Unmap the code now (idempotent). Function pointers obtained earlier must not be called afterwards."""
        self._finalizer()


def _host_machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
