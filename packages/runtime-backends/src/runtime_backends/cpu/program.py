"""CPUProgram: a compiled kernel object loaded into executable memory and called through ctypes."""

from __future__ import annotations

import ctypes
import functools
import math
import mmap
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import Any

from runtime_backends.cpu.abi import INT32_MAX, SIGNATURE_SYMBOL, Signature
from runtime_backends.cpu.execmem import ExecutableImage
from runtime_backends.cpu.launch import ForeignLaunch, Launch
from runtime_core.compiler import CompileError
from runtime_core.program import check_launch

__all__ = ["CPUProgram"]

_MAX_GROUPS = 2**63 - 1  # the group range is a C long long
_MAX_LAUNCHES = 256  # validated argument shapes kept per program; more distinct shapes restart the memo


class CPUProgram:
    """Kernel ``name`` of the ELF relocatable object ``lib`` (what ``ClangCompiler.compile`` returns), linked and mapped
    read+execute in this process by ``execmem.ExecutableImage``. ``dev`` is the ``CPUDevice`` it runs on
    (``dev.runtime`` is ``functools.partial(CPUProgram, dev)``; its thread pool spreads large launches), or None.

    Two kinds of objects load:

    * rendered by this backend's ``CRenderer``: the ``rtk_signature`` record (``abi``) gives the buffer and val counts,
      so every launch is validated before any code runs (see :meth:`__call__`);
    * foreign: any other freestanding C function ``void name(T* buf0, ..., int val0, ...)`` its compiler built (hand
      written, or another renderer's, e.g. ``void E_4(float* restrict data0, const float* restrict data1, int var0)``).
      It is called once per launch with the buffers then the vals **as given, unvalidated**: the counts, the types and
      the addresses are the caller's responsibility, ``global_size``/``local_size`` are ignored (such a kernel loops
      itself), and a wrong argument crashes the process like a wrong call in C.

    The mapping is released when the program is garbage collected (or by :meth:`close`).

    Raises (construction):
        CompileError: the object cannot be linked (unsupported content, a symbol outside the loader's whitelist), its
            signature record is of another version, or it does not define ``name`` (the message lists what it defines).
        ValueError: the object is for another machine.
        OSError: mapping or protecting memory failed.
    """

    def __init__(self, dev: Any, name: str, lib: bytes) -> None:
        self.dev, self.name = dev, name
        image = ExecutableImage.load(lib)
        try:
            if name not in image.symbols or name == SIGNATURE_SYMBOL:
                defined = sorted(s for s in image.symbols if s != SIGNATURE_SYMBOL)
                raise CompileError(f"the object does not define kernel {name!r}; it defines {defined}")
            self.signature = _signature(image, name) if SIGNATURE_SYMBOL in image.symbols else None
            self._fn = image.function(name, None, ())
        except BaseException:
            image.close()
            raise
        self._image = image
        self._launches: dict[Any, Launch] = {}
        self._last: tuple[Any, Any, Any, Any, Any, Any] | None = None  # bufs, sizes, vals, fn, block
        self._parallel: dict[tuple[Any, Any], bool] = {}  # launch shape -> worth the thread pool (learnt per shape)

    @property
    def arg_counts(self) -> tuple[int, int] | None:
        """``(buffers, vals)`` from the renderer's signature record, ``None`` for a foreign kernel (unvalidated)."""
        return None if self.signature is None else (self.signature.buffers, self.signature.vals)

    def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 vals: Sequence[int] = (), wait: bool = False) -> float | None:
        """Run ``prod(global_size)`` groups of ``prod(local_size)`` threads on buffers ``bufs`` (host addresses: the
        opaque handles of CPU buffers, or any int address) with int32 ``vals``; returns when the kernel has finished.

        Returns the elapsed wall time of the call in seconds (``time.perf_counter``) when ``wait`` is true, else None.
        A launch whose arguments equal (``==``) one already validated reuses its checked argument block, so a
        repeated launch costs little more than the ctypes call; :meth:`bind` prebinds one for replays.

        Raises:
            ValueError: wrong number of buffers or vals, a val outside int32, a size that is not a positive int or
                exceeds ``2**31 - 1`` (or more than ``2**63 - 1`` groups), or a buffer that is not an int address in
                the user address space (``/proc/sys/vm/mmap_min_addr`` up to ``2**56``); for a checked kernel
                (``CPU_MEMCHECK``) a buffer whose handle does not carry its size. Nothing runs in these cases.
            runtime_backends.cpu.memcheck.OutOfBoundsError: a checked kernel indexed a buffer out of bounds (raised
                after the call; the access was not made).

        What cannot be checked: whether an address inside the user address space is mapped, belongs to a live buffer
        or is large enough for the kernel's accesses (unless the kernel is checked). Handles are plain addresses;
        callers may legitimately pass memory the runtime did not allocate or a pointer offset from an allocation (the
        kernel indexes it back into range), so a stale or wrong address in that range crashes the process.
        ``Buffer.opaque`` refuses freed buffers.
        """
        last = self._last  # the previous direct launch, when its sizes and vals were tuples (identity suffices)
        if last is not None and global_size is last[1] and local_size is last[2] and vals is last[3] and bufs == last[0]:
            if wait:  # the common case: the kernel called with its argument block, nothing else
                start = perf_counter()
                last[4](last[5])
                return perf_counter() - start
            last[4](last[5])
            return None
        try:
            launch = self._launches[bufs, global_size, local_size, vals]
        except (KeyError, TypeError):  # new arguments, or unhashable ones (lists): validate
            return self._prepare(bufs, global_size, local_size, vals)(wait)
        # True or 4.0 hash like 1 and 4: never let them ride a validated launch (in bufs, vals or sizes)
        if not _plain_ints(bufs, (*vals, *global_size, *local_size)):
            return self._prepare(bufs, global_size, local_size, vals)(wait)
        if launch.direct and type(global_size) is tuple and type(local_size) is tuple and type(vals) is tuple:
            self._last = (bufs, global_size, local_size, vals, launch.fn, launch.block)
        return launch(wait)

    def bind(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
             vals: Sequence[int] = ()) -> Launch | ForeignLaunch:
        """The launch of these arguments, validated once, to replay: ``launch()`` (or ``launch(wait=True)``) runs it.

        Raises like :meth:`__call__`, before anything runs. A foreign kernel's launch converts its arguments once.
        """
        return self._prepare(bufs, global_size, local_size, vals)

    def close(self) -> None:
        """Unmap the code now (idempotent); the program must not be called afterwards."""
        self._image.close()

    def _prepare(self, bufs: tuple[Any, ...], global_size: Sequence[int], local_size: Sequence[int],
                 vals: Sequence[int]) -> Launch | ForeignLaunch:
        sig = self.signature
        if sig is None:
            return ForeignLaunch(self._fn, bufs, vals)
        gs, ls = check_launch(self.name, bufs, vals, sig.buffers, sig.vals, global_size, local_size)
        for what, size in (("global_size", gs), ("local_size", ls)):
            if max(size) > INT32_MAX:
                raise ValueError(f"kernel {self.name!r}: {what} {size} exceeds the CPU backend's limit of "
                                 f"{INT32_MAX} per dimension")
        if (groups := math.prod(gs)) > _MAX_GROUPS:
            raise ValueError(f"kernel {self.name!r}: global_size {gs} is {groups} groups, more than {_MAX_GROUPS}")
        _check_addresses(self.name, bufs)
        sizes = _byte_sizes(self.name, bufs) if sig.checked else None
        shape = (gs, ls)
        pool = getattr(self.dev, "pool", None)
        launch = Launch(self.name, self._fn, sig, bufs, vals, gs, ls, sizes, pool if groups > 1 else None,
                        self._parallel.get(shape))
        launch.on_decided = functools.partial(self._parallel.__setitem__, shape)
        if not sig.checked:  # a checked launch re-reads the sizes from the handles every time
            if len(self._launches) >= _MAX_LAUNCHES:
                self._launches.clear()
                self._last = None
            try:
                self._launches[bufs, global_size, local_size, vals] = launch
            except TypeError:
                pass  # unhashable arguments (lists): validated on every call
        return launch


_USER_SPACE_END = 1 << 56  # above every Linux user address space (x86-64 5-level paging: 2**56; AArch64: <= 2**52)


@functools.cache
def _lowest_address() -> int:
    """The lowest address Linux lets a process map (``vm.mmap_min_addr``), and at least one page (never NULL's)."""
    try:
        return max(mmap.PAGESIZE, int(Path("/proc/sys/vm/mmap_min_addr").read_text()))
    except (OSError, ValueError):
        return mmap.PAGESIZE


def _plain_ints(bufs: tuple[Any, ...], vals: Sequence[int]) -> bool:
    return all(isinstance(x, int) and not isinstance(x, bool) for x in bufs) and all(type(v) is int for v in vals)


def _check_addresses(name: str, bufs: Sequence[Any]) -> None:
    low = _lowest_address()
    for slot, b in enumerate(bufs):
        if isinstance(b, bool) or not isinstance(b, int) or b <= 0:
            raise ValueError(f"kernel {name!r}: buffer {slot} must be a host address (a positive int, the opaque handle "
                             f"of a CPU buffer), got {b!r}")
        if not low <= b < _USER_SPACE_END:
            raise ValueError(f"kernel {name!r}: buffer {slot} is {b:#x}, which is not a user-space address (Linux "
                             f"maps nothing below {low:#x} or above {_USER_SPACE_END:#x}); pass the opaque handle of "
                             f"an allocated CPU buffer")


def _byte_sizes(name: str, bufs: Sequence[Any]) -> list[int]:
    sizes = []
    for slot, b in enumerate(bufs):
        nbytes = getattr(b, "nbytes", None)
        if not isinstance(nbytes, int):
            raise ValueError(f"kernel {name!r} is bounds-checked (CPU_MEMCHECK=1) but buffer {slot} is a plain address "
                             f"without a size; pass the opaque handle of a CPU Buffer (a HostPointer), or render the "
                             f"kernel unchecked")
        sizes.append(nbytes)
    return sizes


def _signature(image: ExecutableImage, name: str) -> Signature:
    record = tuple((ctypes.c_int * 5).from_address(image.address(SIGNATURE_SYMBOL)))
    try:
        return Signature.from_record(record)
    except ValueError as e:
        raise CompileError(f"the {SIGNATURE_SYMBOL} record of kernel {name!r}: {e}: the object comes from another "
                           f"renderer version") from None

