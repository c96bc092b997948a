"""The CPU backend's allocator: aligned host memory whose handles know their size."""

from __future__ import annotations

import ctypes
import functools
import logging
import mmap
from typing import Any

from runtime_backends.cpu.execmem import host_library
from runtime_core.allocator import MallocAllocator
from runtime_core.buffer_spec import BufferSpec

__all__ = ["CPUAllocator", "HostPointer", "HUGE_PAGE_MIN_BYTES"]

log = logging.getLogger(__name__)
HUGE_PAGE_MIN_BYTES = 4 << 20
"""Allocations of at least this size ask Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``, as numpy does for
its large arrays): a kernel streaming hundreds of MiB then misses the TLB 512x less often."""
_MADV_HUGEPAGE = 14  # <linux/mman.h>


class HostPointer(int):
    """A host address (an ``int``, what C and ctypes take) that also knows ``nbytes``, the size of the memory behind it.

    It is the opaque handle of a CPU buffer: programs take it as an address, and checked kernels (``CPU_MEMCHECK``) take
    the buffer's size from it. ``memory`` is a memoryview of the ``nbytes`` bytes, made once, for copies.
    """

    nbytes: int

    def __new__(cls, address: int, nbytes: int) -> HostPointer:
        ptr = super().__new__(cls, address)
        ptr.nbytes = nbytes
        return ptr

    def __repr__(self) -> str:
        return f"HostPointer({int(self):#x}, nbytes={self.nbytes})"

    @property
    def memory(self) -> memoryview:
        view = self.__dict__.get("_memory")
        if view is None:
            view = self.__dict__["_memory"] = _byte_view(self, self.nbytes)
        return view


def _byte_view(address: int, nbytes: int) -> memoryview:
    return memoryview((ctypes.c_uint8 * nbytes).from_address(address)).cast("B")


def _bytes_at(ptr: int, nbytes: int) -> memoryview:
    """``nbytes`` bytes at ``ptr``: the handle's cached view when it covers exactly those, else a new view."""
    if type(ptr) is HostPointer and ptr.nbytes == nbytes:
        return ptr.memory
    return _byte_view(ptr, nbytes)


@functools.cache
def _madvise() -> Any:
    fn = host_library("c").madvise
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return fn


def _advise_huge_pages(address: int, size: int) -> None:
    """Ask for huge pages on the whole pages inside ``[address, address + size)``; a refusal only costs speed."""
    start = -(-address // mmap.PAGESIZE) * mmap.PAGESIZE
    end = (address + size) // mmap.PAGESIZE * mmap.PAGESIZE
    if end > start and _madvise()(start, end - start, _MADV_HUGEPAGE) != 0:
        log.debug("madvise(MADV_HUGEPAGE) of %d bytes failed (errno %d); using normal pages", size, ctypes.get_errno())


class CPUAllocator(MallocAllocator):
    """``MallocAllocator`` memory (``posix_memalign``, 64-byte aligned, LRU reuse) handed out as :class:`HostPointer`;
    allocations of ``HUGE_PAGE_MIN_BYTES`` or more are advised to use transparent huge pages.

    Copies are one ``memcpy`` through a memoryview of the destination or source kept on the handle, so a 4 KiB copy
    costs about what ``numpy.copyto`` does. Constructed like ``MallocAllocator`` (``CPUAllocator(dev)``).
    """

    def _alloc(self, size: int, spec: BufferSpec) -> HostPointer:
        address = super()._alloc(size, spec)
        if size >= HUGE_PAGE_MIN_BYTES and spec.external_ptr is None:
            _advise_huge_pages(address, size)
        return HostPointer(address, size)

    def _offset(self, opaque: int, size: int, offset: int) -> HostPointer:
        return HostPointer(opaque + offset, size)

    def _copyin(self, dest: int, src: memoryview) -> None:
        _bytes_at(dest, src.nbytes)[:] = src

    def _copyout(self, dest: memoryview, src: int) -> None:
        dest[:] = _bytes_at(src, dest.nbytes)
