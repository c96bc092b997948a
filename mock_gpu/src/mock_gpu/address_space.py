"""The emulated device address space: allocations, bounds-checked host and vectorized device accesses.

Every mock device shares one flat 64-bit address space (like CUDA's unified virtual addressing). Allocations are
handed out by a bump pointer starting at ``1 << 40`` and are never reused, with an unmapped guard gap after each one, so
an access just past the end of a buffer, or to a freed buffer, is always detected instead of landing in a neighbour.
Every access is checked against the live allocations; a bad one raises :class:`MemoryFault`.

Kernels may touch the padding of a device allocation: the bytes from its requested size up to the next multiple of
:data:`ALLOC_ALIGN` (256). The CUDA C++ Programming Guide ("Device Memory Accesses") guarantees that every address
cuMemAlloc/cudaMalloc returns is aligned to at least 256 bytes, so the driver hands out memory in granules of at least
that size and a kernel reading a few bytes past a buffer's end does not fault on a GPU (real granules, pages of 2 MiB,
are far larger; 256 bytes is the smallest the documentation allows). Such an access is recorded
(:meth:`AddressSpace.take_padding_access`) so that the driver can warn about it. With ``exact_bounds`` (the mock's
``MOCKGPU_EXACT_BOUNDS=1``, like compute-sanitizer's memcheck) it faults instead. Host copies (cuMemcpy*, cuMemset*)
are always checked against the requested size, as the driver checks them against the allocation's range.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import NamedTuple

import numpy as np

from .texture import TextureTable

__all__ = ["AddressSpace", "MemoryFault", "OutOfMemory", "PaddingAccess", "BASE_ADDRESS", "ALLOC_ALIGN"]

BASE_ADDRESS = 1 << 40
ALLOC_ALIGN = 256  # alignment and granule of device allocations (CUDA C++ Programming Guide, "Device Memory Accesses")
_GUARD = 4096  # unmapped bytes after every allocation
_NULL_LIMIT = 1 << 16  # addresses below this are reported as null-pointer accesses
_FREED_HISTORY = 4096


class MemoryFault(Exception):
    """An illegal device memory access (the mock of CUDA_ERROR_ILLEGAL_ADDRESS / CUDA_ERROR_MISALIGNED_ADDRESS).

    Fields: ``kind`` ("out-of-bounds", "use-after-free", "misaligned" or "null"), ``address`` (int), ``size`` (access
    bytes), ``space`` ("global", "shared", "local", "param", "host-copy"), ``nearest`` (text describing the nearest
    allocation), and ``kernel``/``block``/``thread`` (filled in by the interpreter when a kernel faulted; None for host
    copies). ``position`` is the index of the faulting element in the address array of a vectorized access (None for
    host copies); the interpreter uses it to name the thread.
    """

    def __init__(self, kind: str, address: int, size: int, space: str, nearest: str, *,
                 position: int | None = None) -> None:
        self.kind = kind
        self.address = int(address)
        self.size = int(size)
        self.space = space
        self.nearest = nearest
        self.position = position
        self.kernel: str | None = None
        self.block: tuple[int, int, int] | None = None
        self.thread: tuple[int, int, int] | None = None
        self.detail: str = ""
        super().__init__()

    def __str__(self) -> str:
        where = ""
        if self.kernel is not None:
            where = f" in kernel {self.kernel!r}, block {self.block}, thread {self.thread}"
        detail = f" {self.detail}" if self.detail else ""
        return (f"illegal {self.space} memory access ({self.kind}){where}: {self.size}-byte access at address "
                f"{self.address:#x}; {self.nearest}.{detail} Check the index computation and the buffer sizes.")


class OutOfMemory(Exception):
    """A device allocation does not fit in the remaining capacity (the mock of CUDA_ERROR_OUT_OF_MEMORY)."""


class PaddingAccess(NamedTuple):
    """A kernel access that ran past a device allocation's requested ``size`` into its padding: the first bad
    ``address`` and its access ``size_accessed`` in bytes, the allocation's ``base`` and requested ``size``."""

    address: int
    size_accessed: int
    base: int
    size: int


class AddressSpace:
    """The device address space of all mock devices of one emulated system.

    ``capacity`` maps device ordinal -> bytes available on it. Pointers returned by :meth:`alloc` are >= 2**40,
    256-byte aligned, never reused after :meth:`free`. Memory is zero-initialized (deterministic; real CUDA leaves it
    undefined). ``exact_bounds``: kernel accesses fault past the requested size of a device allocation; otherwise
    only past its size rounded up to :data:`ALLOC_ALIGN` (see the module's docstring).
    """

    def __init__(self, capacity: dict[int, int], *, exact_bounds: bool = False) -> None:
        for dev, cap in capacity.items():
            if not isinstance(dev, int) or not isinstance(cap, int) or cap < 0 or dev < 0:
                raise ValueError(f"capacity must map device ordinals >= 0 to byte counts >= 0, got {dev!r}: {cap!r}")
        self._capacity = dict(capacity)
        self._used = dict.fromkeys(capacity, 0)
        self._next = BASE_ADDRESS
        self._bases: list[int] = []
        self._allocs: dict[int, tuple[int, int, np.ndarray]] = {}  # base -> (size, device, backing bytes)
        self._suspended: dict[int, tuple[int, int, np.ndarray]] = {}  # allocations :meth:`suspend` hid
        self._freed: deque[tuple[int, int, int]] = deque(maxlen=_FREED_HISTORY)
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # cached bases, ends, limits (uint64)
        self.exact_bounds = exact_bounds
        self._padding_access: PaddingAccess | None = None
        self.textures = TextureTable()  # texture objects, which kernels reach by handle as they reach memory

    # ----- allocation -----
    def alloc(self, size: int, device: int = 0) -> int:
        """Allocate ``size`` bytes (> 0) on ``device``; returns the device pointer.

        Raises ValueError for a non-positive size or unknown device, OutOfMemory when the device's capacity would be
        exceeded (mirrors cuMemAlloc).
        """
        if device not in self._capacity:
            raise ValueError(f"unknown device {device}; devices are {sorted(self._capacity)}")
        if not isinstance(size, (int, np.integer)) or size <= 0:
            raise ValueError(f"allocation size must be a positive number of bytes, got {size!r}")
        size = int(size)
        padded = -(-size // ALLOC_ALIGN) * ALLOC_ALIGN
        self.charge(device, padded)  # whole granules are in use, as cuMemGetInfo counts them
        base = self._next
        self._allocs[base] = (size, device, np.zeros(padded, dtype=np.uint8))
        bisect.insort(self._bases, base)  # host mappings may lie above the bump pointer
        self._next = base + padded + _GUARD
        self._arrays = None
        return base

    def charge(self, device: int, nbytes: int) -> None:
        """Count ``nbytes`` of device memory that lives outside the address space (CUDA arrays, cuMemCreate physical
        memory) as used on ``device``; OutOfMemory (nothing counted) when it exceeds the remaining capacity."""
        if self._used[device] + nbytes > self._capacity[device]:
            raise OutOfMemory(f"cannot allocate {nbytes} bytes on device {device}: {self._used[device]} of "
                              f"{self._capacity[device]} bytes are in use; free buffers or lower the demand")
        self._used[device] += nbytes

    def refund(self, device: int, nbytes: int) -> None:
        """Give back ``nbytes`` counted by :meth:`charge` on ``device``."""
        self._used[device] -= nbytes

    def free(self, ptr: int) -> None:
        """Free the allocation whose base is ``ptr``; ValueError if ``ptr`` is not the base of a live allocation."""
        ptr = int(ptr)
        if ptr in self._suspended:
            self.resume(ptr)
        rec = self._allocs.get(ptr)
        if rec is None:
            raise ValueError(f"{ptr:#x} is not the base of a live allocation (double free or interior pointer?)")
        size, device, buf = rec
        del self._allocs[ptr]
        self._bases.pop(bisect.bisect_left(self._bases, ptr))
        self._used[device] -= buf.size
        self._freed.append((ptr, size, device))
        self._arrays = None

    def suspend(self, ptr: int) -> None:
        """Make the allocation at base ``ptr`` inaccessible (accesses fault as to freed memory) while keeping its
        address, contents and the device memory it counts (a graph allocation its program gave back); nothing
        happens if it is hidden already; ValueError if ``ptr`` is not the base of a live allocation."""
        ptr = int(ptr)
        if ptr in self._suspended:
            return
        if ptr not in self._allocs:
            raise ValueError(f"{ptr:#x} is not the base of a live allocation")
        self._suspended[ptr] = self._allocs.pop(ptr)
        self._bases.pop(bisect.bisect_left(self._bases, ptr))
        self._freed.append((ptr, self._suspended[ptr][0], self._suspended[ptr][1]))
        self._arrays = None

    def resume(self, ptr: int) -> None:
        """Make an allocation :meth:`suspend` hid accessible again (nothing happens if it is accessible)."""
        ptr = int(ptr)
        if ptr in self._suspended:
            self._allocs[ptr] = self._suspended.pop(ptr)
            bisect.insort(self._bases, ptr)
            self._arrays = None

    def reserve(self, size: int, alignment: int = 0) -> int:
        """Reserve ``size`` bytes of addresses (> 0) aligned to ``alignment`` (a power of two; 0 for the default),
        with nothing behind them until :meth:`map` (cuMemAddressReserve). Returns the base address."""
        if size <= 0:
            raise ValueError(f"a reservation must be a positive number of bytes, got {size!r}")
        align = max(ALLOC_ALIGN, alignment)
        if align & (align - 1):
            raise ValueError(f"alignment must be a power of two, got {alignment}")
        base = -(-self._next // align) * align
        self._next = base + -(-size // ALLOC_ALIGN) * ALLOC_ALIGN + _GUARD
        return base

    def map(self, base: int, backing: np.ndarray, device: int) -> None:
        """Make the bytes of ``backing`` (a 1-D uint8 array: host memory, or physical memory of cuMemCreate)
        accessible at ``base`` .. ``base + backing.size`` (cuMemMap, mapped host memory). ValueError if the range
        overlaps a live allocation or mapping, or starts near null."""
        base, size = int(base), int(backing.size)
        if size <= 0 or base < _NULL_LIMIT:
            raise ValueError(f"cannot map {size} bytes at {base:#x}")
        i = bisect.bisect_right(self._bases, base + size - 1) - 1
        if i >= 0 and self._bases[i] + self._allocs[self._bases[i]][0] > base:
            raise ValueError(f"the range {base:#x} + {size} overlaps the allocation at {self._bases[i]:#x}")
        self._allocs[base] = (size, device, backing)
        bisect.insort(self._bases, base)
        self._arrays = None

    def unmap(self, base: int) -> None:
        """Remove the mapping made by :meth:`map` at ``base``; ValueError if there is none. Later accesses fault."""
        if int(base) not in self._allocs:
            raise ValueError(f"{int(base):#x} is not the base of a mapping")
        size, device, _ = self._allocs.pop(int(base))
        self._bases.pop(bisect.bisect_left(self._bases, int(base)))
        self._freed.append((int(base), size, device))
        self._arrays = None

    def allocation(self, ptr: int) -> tuple[int, int, int] | None:
        """(base, size, device) of the live allocation containing ``ptr``, or None."""
        ptr = int(ptr)
        i = bisect.bisect_right(self._bases, ptr) - 1
        if i < 0:
            return None
        base = self._bases[i]
        size, device, _ = self._allocs[base]
        return (base, size, device) if ptr < base + size else None

    def is_host(self, ptr: int) -> bool:
        """Whether ``ptr`` lies in host memory mapped at its own address (page-locked, registered or managed memory,
        as unified addressing maps them), as opposed to device memory or a cuMemMap of physical memory."""
        found = self.allocation(ptr)
        return found is not None and int(self._allocs[found[0]][2].ctypes.data) == found[0]

    def used(self, device: int) -> int:
        """Bytes currently allocated on ``device``."""
        return self._used[device]

    def capacity(self, device: int) -> int:
        """Total bytes of ``device``."""
        return self._capacity[device]

    def take_padding_access(self) -> PaddingAccess | None:
        """The first kernel access into an allocation's padding since the last call (None if there was none), and
        forget it."""
        found, self._padding_access = self._padding_access, None
        return found

    # ----- host-side byte access (cuMemcpy*, cuMemset*) -----
    def _host_range(self, ptr: int, nbytes: int) -> tuple[np.ndarray, int]:
        if nbytes < 0:
            raise ValueError(f"byte count must be >= 0, got {nbytes}")
        ptr = int(ptr)
        i = bisect.bisect_right(self._bases, ptr) - 1
        if i >= 0:
            base = self._bases[i]
            size, _, buf = self._allocs[base]
            if ptr + nbytes <= base + size:
                return buf, ptr - base
        raise MemoryFault(self._classify(ptr, max(nbytes, 1)), ptr, nbytes, "host-copy", self.describe_nearest(ptr))

    def _segments(self, ptr: int, nbytes: int) -> list[tuple[np.ndarray, int, int]]:
        """(backing, offset, length) pieces covering ``nbytes`` at ``ptr``: one allocation, or mappings that follow
        each other without a gap (cuMemMap chunks of one reservation). MemoryFault if any byte is outside them."""
        try:
            buf, off = self._host_range(ptr, nbytes)
            return [(buf, off, nbytes)]
        except MemoryFault as fault:
            first = fault
        pieces, at, left = [], int(ptr), nbytes
        while left > 0:
            i = bisect.bisect_right(self._bases, at) - 1
            if i < 0 or at >= self._bases[i] + self._allocs[self._bases[i]][0]:
                raise first
            base = self._bases[i]
            size, _, buf = self._allocs[base]
            take = min(left, base + size - at)
            pieces.append((buf, at - base, take))
            at, left = at + take, left - take
        return pieces

    def check(self, ptr: int, nbytes: int) -> None:
        """MemoryFault unless the ``nbytes`` bytes at device address ``ptr`` are all mapped (one allocation, or
        adjacent mappings) or lie in one :meth:`suspend`-ed allocation (work still pending may make it accessible
        before the access runs; the access itself faults if it is not)."""
        try:
            self._segments(ptr, nbytes)
        except MemoryFault:
            if not any(base <= ptr and ptr + nbytes <= base + size for base, (size, _, _) in self._suspended.items()):
                raise

    def read(self, ptr: int, nbytes: int) -> bytes:
        """Copy ``nbytes`` from device address ``ptr``; MemoryFault if any byte is not mapped."""
        segments = self._segments(ptr, nbytes)
        if len(segments) == 1:
            buf, off, _ = segments[0]
            return buf[off:off + nbytes].tobytes()
        return b"".join(buf[off:off + n].tobytes() for buf, off, n in segments)

    def write(self, ptr: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` to device address ``ptr``; MemoryFault (nothing written) if any byte is not mapped."""
        src = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        done = 0
        for buf, off, n in self._segments(ptr, src.size):
            buf[off:off + n] = src[done:done + n]
            done += n

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device-to-device copy of ``nbytes`` (overlap-safe); MemoryFault before anything is written."""
        sources, targets = self._segments(src, nbytes), self._segments(dst, nbytes)
        if len(sources) == len(targets) == 1:
            (sbuf, soff, _), (dbuf, doff, _) = sources[0], targets[0]
            dbuf[doff:doff + nbytes] = sbuf[soff:soff + nbytes].copy()
        else:
            self.write(dst, self.read(src, nbytes))

    def fill(self, ptr: int, pattern: bytes, count: int) -> None:
        """memset: repeat ``pattern`` (1, 2 or 4 bytes, as cuMemsetD8/D16/D32) ``count`` times from ``ptr``."""
        if len(pattern) not in (1, 2, 4):
            raise ValueError(f"fill pattern must be 1, 2 or 4 bytes, got {len(pattern)}")
        nbytes = len(pattern) * int(count)
        segments = self._segments(ptr, nbytes)
        if len(segments) == 1:
            buf, off, _ = segments[0]
            buf[off:off + nbytes] = np.tile(np.frombuffer(bytes(pattern), dtype=np.uint8), int(count))
        else:
            self.write(ptr, bytes(pattern) * int(count))

    # ----- vectorized device access -----
    def _sorted_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bases, ends (requested sizes) and the ends kernels may reach (the backing, padded for device memory)."""
        if self._arrays is None:
            bases = np.array(self._bases, dtype=np.uint64)
            ends = np.array([b + self._allocs[b][0] for b in self._bases], dtype=np.uint64)
            limits = ends if self.exact_bounds else bases + np.array(
                [self._allocs[b][2].size for b in self._bases], dtype=np.uint64)
            self._arrays = (bases, ends, limits)
        return self._arrays

    def _limit(self, base: int) -> int:
        size, _, buf = self._allocs[base]
        return base + (size if self.exact_bounds else buf.size)

    def _note_padding(self, address: int, size: int, base: int) -> None:
        if self._padding_access is None:
            self._padding_access = PaddingAccess(address, size, base, self._allocs[base][0])

    def resolve(self, addrs: np.ndarray, size: int, align: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """Map device addresses to backing storage, checking bounds and alignment of every access.

        ``addrs``: 1-D np.uint64, one address per access; ``size``: bytes accessed at each address; ``align``: required
        alignment in bytes (a power of two, 1 for none). Returns a list of ``(backing uint8 array, byte offsets as
        np.int64, positions)`` with one entry per allocation touched; ``positions`` indexes ``addrs`` (None means all,
        in order). Raises MemoryFault (``position`` = index of the first bad access) for an access that is misaligned,
        not entirely inside one live allocation (its padding included unless ``exact_bounds``), to freed memory or
        near null; an access into the padding is recorded (:meth:`take_padding_access`).
        """
        addrs = np.asarray(addrs, dtype=np.uint64)
        if addrs.size == 0:
            return []
        if align > 1:
            bad = (addrs & np.uint64(align - 1)) != 0
            if bad.any():
                pos = int(np.argmax(bad))
                raise MemoryFault("misaligned", int(addrs[pos]), size, "global",
                                  f"{size}-byte accesses must be {align}-byte aligned", position=pos)
        lo, hi = int(addrs.min()), int(addrs.max())
        i = bisect.bisect_right(self._bases, lo) - 1
        if i >= 0:
            base = self._bases[i]
            asize, _, buf = self._allocs[base]
            if hi + size <= self._limit(base):
                if hi + size > base + asize:
                    self._note_padding(int(addrs[int(np.argmax(addrs + np.uint64(size) > base + asize))]), size, base)
                return [(buf, (addrs - np.uint64(base)).astype(np.int64), None)]
        return self._resolve_many(addrs, size)

    def _resolve_many(self, addrs: np.ndarray, size: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        bases, ends, limits = self._sorted_arrays()
        which = np.searchsorted(bases, addrs, side="right").astype(np.int64) - 1
        safe = np.maximum(which, 0)
        last = addrs + np.uint64(size)
        ok = (which >= 0) & (last <= limits[safe]) if bases.size else np.zeros(addrs.size, bool)
        if not ok.all():
            pos = int(np.argmin(ok))
            addr = int(addrs[pos])
            raise MemoryFault(self._classify(addr, size), addr, size, "global", self.describe_nearest(addr),
                              position=pos)
        padded = last > ends[safe]
        if padded.any():
            pos = int(np.argmax(padded))
            self._note_padding(int(addrs[pos]), size, self._bases[int(which[pos])])
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
        for w in np.unique(which):
            pos_arr = np.flatnonzero(which == w)
            base = self._bases[int(w)]
            out.append((self._allocs[base][2], (addrs[pos_arr] - np.uint64(base)).astype(np.int64), pos_arr))
        return out

    def load(self, addrs: np.ndarray, dtype: np.dtype, count: int = 1) -> np.ndarray:
        """Gather one element (or ``count`` consecutive elements) of ``dtype`` at each address.

        Returns shape (n,) for count == 1, else (n, count). Accesses must be aligned to the element size times
        ``count`` when that is a power of two (PTX ISA 6.4 "vector data types" alignment). Raises MemoryFault.
        """
        dtype = np.dtype(dtype)
        addrs = np.asarray(addrs, dtype=np.uint64)
        size = dtype.itemsize * count
        shape = (addrs.size,) if count == 1 else (addrs.size, count)
        out = np.empty(shape, dtype=dtype)
        for buf, offs, pos in self.resolve(addrs, size, _natural_align(size, dtype.itemsize)):
            vals = gather(buf, offs, dtype, count)
            if pos is None:
                out = vals
            else:
                out[pos] = vals
        return out

    def store(self, addrs: np.ndarray, values: np.ndarray) -> None:
        """Scatter ``values`` (shape (n,) or (n, count)) to the addresses; all accesses are checked before any write.

        When two accesses hit the same address the later one (higher index) wins.
        """
        values = np.asarray(values)
        addrs = np.asarray(addrs, dtype=np.uint64)
        count = 1 if values.ndim == 1 else values.shape[1]
        size = values.dtype.itemsize * count
        for buf, offs, pos in self.resolve(addrs, size, _natural_align(size, values.dtype.itemsize)):
            scatter(buf, offs, values if pos is None else values[pos])

    # ----- fault descriptions -----
    def _classify(self, addr: int, size: int) -> str:
        for base, fsize, _ in self._freed:
            if base <= addr < base + fsize:
                return "use-after-free"
        if addr < _NULL_LIMIT:
            return "null"
        return "out-of-bounds"

    def describe_nearest(self, addr: int) -> str:
        """Text naming the live (or recently freed) allocation nearest to ``addr``, for fault reports."""
        for base, fsize, dev in self._freed:
            if base <= addr < base + fsize:
                return f"the address is inside a freed allocation at {base:#x} of {fsize} bytes (device {dev})"
        if not self._bases:
            return "there are no live allocations"
        i = bisect.bisect_right(self._bases, addr) - 1
        cands = [self._bases[j] for j in (i, i + 1) if 0 <= j < len(self._bases)]

        def distance(b: int) -> int:
            end = b + self._allocs[b][0]
            return b - addr if addr < b else max(0, addr - end + 1)

        base = min(cands, key=distance)
        size, dev, _ = self._allocs[base]
        if addr < base:
            rel = f"{base - addr} bytes before its start"
        elif addr >= base + size:
            rel = f"{addr - (base + size)} bytes past its end"
        else:
            rel = f"at offset {addr - base} (the access runs past its end)"
        return f"nearest allocation: {base:#x} of {size} bytes (device {dev}), address is {rel}"


def _natural_align(size: int, itemsize: int) -> int:
    return size if size & (size - 1) == 0 else itemsize


def gather(buf: np.ndarray, offs: np.ndarray, dtype: np.dtype, count: int = 1) -> np.ndarray:
    """Read ``count`` elements of ``dtype`` at each byte offset of ``buf`` (uint8, length a multiple of 16).

    Offsets must be multiples of the item size (checked by the caller). Returns (n,) or (n, count).
    """
    dtype = np.dtype(dtype)
    view = buf.view(dtype)
    el = offs // dtype.itemsize
    # np.take with mode="clip" skips the bounds check that plain indexing makes (the caller checked the offsets)
    if count == 1:
        return np.take(view, el, mode="clip")
    return np.take(view, el[:, None] + np.arange(count), mode="clip")


def scatter(buf: np.ndarray, offs: np.ndarray, values: np.ndarray) -> None:
    """Write ``values`` ((n,) or (n, count)) at byte offsets of ``buf``; the later of two writes to one address wins."""
    view = buf.view(values.dtype)
    el = offs // values.dtype.itemsize
    if values.ndim == 1:
        view[el] = values
    else:
        view[el[:, None] + np.arange(values.shape[1])] = values
