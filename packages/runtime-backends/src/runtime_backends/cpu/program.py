"""CPUProgram: a compiled kernel object loaded into executable memory and called through ctypes."""

from __future__ import annotations

import ctypes
import functools
import mmap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime_backends.cpu.execmem import ExecutableImage
from runtime_backends.cpu.renderer import INT32_MAX, MAX_PARAMS, SIGNATURE_MAGIC, SIGNATURE_SYMBOL
from runtime_core.compiler import CompileError
from runtime_core.program import check_launch

__all__ = ["CPUProgram"]



class CPUProgram:
    """Kernel ``name`` of the ELF relocatable object ``lib`` (what ``ClangCompiler.compile`` returns for C from
    ``CRenderer``), linked and mapped read+execute in this process by ``execmem.ExecutableImage``.

    The argument counts come from the object's ``rtk_signature`` record (``{magic, buffers, vals}``, written by the
    renderer), so a launch is validated by ``runtime_core.program.check_launch`` before any code runs. The mapping is
    released when the program is garbage collected (or by :meth:`close`). ``dev`` is the ``CPUDevice`` it runs on
    (``dev.runtime`` is ``functools.partial(CPUProgram, dev)``).

    Raises (construction):
        CompileError: the object cannot be linked (unsupported content, a symbol outside the loader's whitelist), it
            lacks a valid signature record (not rendered by this backend's ``CRenderer``), or it does not define
            ``name``.
        ValueError: the object is for another machine.
        OSError: mapping or protecting memory failed.
    """

    def __init__(self, dev: Any, name: str, lib: bytes) -> None:
        self.dev, self.name = dev, name
        image = ExecutableImage.load(lib)
        try:
            self.nbufs, self.nvals = _signature(image, name)
            if name not in image.symbols:
                raise CompileError(f"the object does not define kernel {name!r}; it defines {sorted(image.symbols)}")
            argtypes = [ctypes.c_void_p] * self.nbufs + [ctypes.c_int] * (self.nvals + 6)
            self._fn = image.function(name, None, argtypes)
        except BaseException:
            image.close()
            raise
        self._image = image

    def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 vals: Sequence[int] = (), wait: bool = False) -> float | None:
        """Run ``prod(global_size)`` groups of ``prod(local_size)`` threads on buffers ``bufs`` (int host addresses,
        e.g. ``MallocAllocator`` handles) with int32 ``vals``; the call returns when the kernel has finished.

        Returns the elapsed wall time of the call in seconds (``time.perf_counter``) when ``wait`` is true, else None.

        Raises:
            ValueError: wrong number of buffers or vals, a val outside int32, a size that is not a positive int or
                exceeds ``2**31 - 1``, or a buffer that is not an int address in the user address space
                (``/proc/sys/vm/mmap_min_addr`` up to ``2**56``). Nothing runs in these cases.

        What cannot be checked: whether an address inside the user address space is mapped, belongs to a live buffer
        or is large enough for the kernel's accesses. Handles are plain addresses; callers may legitimately pass memory
        the runtime did not allocate or a pointer offset from an allocation (the kernel indexes it back into range),
        so a stale or wrong address in that range crashes the process. ``Buffer.opaque`` refuses freed buffers.
        """
        gs, ls = check_launch(self.name, bufs, vals, self.nbufs, self.nvals, global_size, local_size)
        for what, size in (("global_size", gs), ("local_size", ls)):
            if max(size) > INT32_MAX:
                raise ValueError(f"kernel {self.name!r}: {what} {size} exceeds the CPU backend's limit of "
                                 f"{INT32_MAX} per dimension")
        low = _lowest_address()
        for slot, b in enumerate(bufs):
            if isinstance(b, bool) or not isinstance(b, int) or b <= 0:
                raise ValueError(f"kernel {self.name!r}: buffer {slot} must be a host address (a positive int, the "
                                 f"opaque handle of a CPU buffer), got {b!r}")
            if not low <= b < _USER_SPACE_END:
                raise ValueError(f"kernel {self.name!r}: buffer {slot} is {b:#x}, which is not a user-space address "
                                 f"(Linux maps nothing below {low:#x} or above {_USER_SPACE_END:#x}); pass the "
                                 f"opaque handle of an allocated CPU buffer")
        start = time.perf_counter()
        self._fn(*bufs, *vals, *gs, *ls)
        return time.perf_counter() - start if wait else None

    def close(self) -> None:
        """Unmap the code now (idempotent); the program must not be called afterwards."""
        self._image.close()


_USER_SPACE_END = 1 << 56  # above every Linux user address space (x86-64 5-level paging: 2**56; AArch64: <= 2**52)


@functools.cache
def _lowest_address() -> int:
    """The lowest address Linux lets a process map (``vm.mmap_min_addr``), and at least one page (never NULL's)."""
    try:
        return max(mmap.PAGESIZE, int(Path("/proc/sys/vm/mmap_min_addr").read_text()))
    except (OSError, ValueError):
        return mmap.PAGESIZE


def _signature(image: ExecutableImage, name: str) -> tuple[int, int]:
    if SIGNATURE_SYMBOL not in image.symbols:
        raise CompileError(f"the object for kernel {name!r} has no {SIGNATURE_SYMBOL} record: it was not rendered by "
                           f"the CPU backend's CRenderer (or by an incompatible version), so its arguments are unknown")
    magic, nbufs, nvals = (ctypes.c_int * 3).from_address(image.address(SIGNATURE_SYMBOL))
    if magic != SIGNATURE_MAGIC or nbufs < 0 or nvals < 0 or nbufs + nvals > MAX_PARAMS:
        raise CompileError(f"the {SIGNATURE_SYMBOL} record of kernel {name!r} is {(magic, nbufs, nvals)}, expected "
                           f"({SIGNATURE_MAGIC:#x}, buffers, vals): the object comes from another renderer version")
    return nbufs, nvals
