"""Allocators: the backend hooks behind :class:`~runtime_core.buffer.Buffer`."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import numbers
import os
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from runtime_core.buffer_spec import DEFAULT_SPEC, BufferSpec, normalize_spec
from runtime_core.config import RUNTIME_LRU_MAX_BYTES
from runtime_core.sink import CopySink

__all__ = ["Allocator", "Capabilities", "LRUAllocator", "MallocAllocator", "DEFAULT_SPEC"]

log = logging.getLogger(__name__)
MAX_ALLOC_BYTES = sys.maxsize
"""Largest size any allocation may request (``ssize_t`` max): larger sizes cannot exist in an address space and would
wrap when passed to C as ``size_t``."""


def _check_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError(f"allocation size must be an int number of bytes, got {size!r}")
    if size <= 0:
        raise ValueError(f"allocation size must be > 0 bytes, got {size}")
    if size > MAX_ALLOC_BYTES:
        raise ValueError(f"allocation size {size} bytes exceeds the largest possible allocation ({MAX_ALLOC_BYTES} "
                         f"bytes); check the element count and dtype")
    return size


def _check_opaque(opaque: Any) -> Any:
    if opaque is None:
        raise ValueError("cannot free None: pass the handle that alloc() returned")
    return opaque


@dataclass(frozen=True)
class Capabilities:
    """The optional operations of an allocator class, as flags.

    ``host_view``: zero-copy host memory views (hook ``_as_buffer``); ``views``: handles at a byte offset into another
    (``_offset``, what :meth:`Buffer.view` needs); ``transfer``: copies between two buffers of the backend, on one device
    or two (``_transfer``); ``streams_out``: copies out delivered in pieces to a :class:`~runtime_core.sink.CopySink`
    (``_copyout_sink``: DISK's file reads); ``own_sink``: its own destination of streamed copies (``_sink``: CUDA's
    pinned staging).
    """

    host_view: bool = False
    views: bool = False
    transfer: bool = False
    streams_out: bool = False
    own_sink: bool = False

    @classmethod
    def of(cls, allocator: type[Allocator]) -> Capabilities:
        """The flags of ``allocator``: a flag is set where the class overrides the base class's hook."""
        def has(hook: str) -> bool:
            return getattr(allocator, hook) is not getattr(Allocator, hook)
        return cls(host_view=has("_as_buffer"), views=has("_offset"), transfer=has("_transfer"),
                   streams_out=has("_copyout_sink"), own_sink=has("_sink"))


class Allocator:
    """Base class of device allocators.

    Public ``alloc``/``free`` validate their arguments and delegate to the backend hooks ``_alloc(size, spec)`` and
    ``_free(opaque, size, spec)``. Data movement hooks are ``_copyin(dest, src: memoryview)`` and
    ``_copyout(dest: memoryview, src)``; optional hooks are ``_as_buffer(opaque, size) -> memoryview`` (zero-copy host
    view of ``size`` bytes),
    ``_offset(opaque, size, offset) -> opaque`` (sub-buffer views), ``_transfer(dest, src, size, src_dev, dest_dev)``
    (device-to-device copies), and for streamed copies between backends (:mod:`runtime_core.sink`)
    ``_copyout_sink(sink, src, size)`` (a source that delivers its bytes in pieces, e.g. file reads) and
    ``_sink(dest, size) -> CopySink`` (a destination's own staging memory and asynchronous copies out of it).
    ``opaque`` is whatever the backend uses as a handle.

    Other modules use the public operations (``copyin``, ``copyout``, ``host_view``, ``offset``, ``transfer``,
    ``stream_out``, ``sink``), never the hooks, and ask :attr:`capabilities` which optional ones exist; the copy
    router (:mod:`runtime_core.transfer`) decides from those how bytes move between two buffers.

    ``copyout_orders``: ``True`` when ``_copyout`` itself runs after all work queued on the device (a queue that is
    executed in order, as on a CLOUD server), so :meth:`Buffer.copyout` need not ``synchronize()`` first.

    ``dev`` is the device the allocator serves (the backend's ``Compiled``, which constructs its allocator with
    ``MyAllocator(self)``), so multi-device backends reach their context in every hook; ``None`` for a free-standing
    allocator (tests, host memory).
    """

    copyout_orders = False
    capabilities = Capabilities()
    """Which optional hooks this allocator class implements: worked out for every subclass as it is defined (a class
    that sets ``capabilities`` itself keeps its own)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "capabilities" not in cls.__dict__:
            cls.capabilities = Capabilities.of(cls)

    def __init__(self, dev: Any = None) -> None:
        if isinstance(dev, (numbers.Number, str, bytes, type)):
            raise TypeError(f"{type(self).__name__}(dev): dev is the device the allocator serves (a Compiled instance: "
                            f"MyAllocator(self) in the device's __init__) or None, got {dev!r}; pass sizes and options "
                            f"by keyword")
        self.dev = dev

    def alloc(self, size: int, spec: BufferSpec | None = None) -> Any:
        """Allocate ``size`` bytes. Raises ``TypeError`` for a non-int size or a spec that is not a ``BufferSpec``,
        ``ValueError`` for size <= 0 or > ``MAX_ALLOC_BYTES``, ``MemoryError`` when the device is out of memory."""
        return self._alloc(_check_size(size), normalize_spec(spec))

    def free(self, opaque: Any, size: int, spec: BufferSpec | None = None) -> None:
        """Release memory returned by :meth:`alloc` with the same ``size`` (bytes) and ``spec``; ``ValueError`` for
        ``opaque=None``."""
        self._free(_check_opaque(opaque), _check_size(size), normalize_spec(spec))

    # public operations: what other modules call; each delegates to its backend hook
    def copyin(self, dest: Any, src: memoryview) -> None:
        """Copy host bytes ``src`` (C-contiguous, ``src.nbytes`` bytes) into ``dest`` (a handle of that many bytes)."""
        self._copyin(dest, src)

    def copyout(self, dest: memoryview, src: Any) -> None:
        """Copy ``dest.nbytes`` bytes of handle ``src`` into writable host memory ``dest``. Callers synchronize the
        device first unless :attr:`copyout_orders`."""
        self._copyout(dest, src)

    def host_view(self, opaque: Any, size: int) -> memoryview:
        """A zero-copy host view of ``size`` bytes of ``opaque`` (``capabilities.host_view``); ``NotImplementedError``
        naming the backend where it has none."""
        return self._as_buffer(opaque, size)

    def offset(self, opaque: Any, size: int, offset: int) -> Any:
        """A handle of the ``size`` bytes at byte ``offset`` of ``opaque``, sharing its memory (``capabilities.views``);
        ``NotImplementedError`` naming the backend where it has none."""
        return self._offset(opaque, size, offset)

    def transfer(self, dest: Any, src: Any, size: int, src_dev: Any, dest_dev: Any) -> None:
        """Copy ``size`` bytes from ``src`` on ``src_dev`` to ``dest`` on ``dest_dev``, both devices of this backend
        (``capabilities.transfer``); the backend picks its way (same device, peer access, its own staging)."""
        self._transfer(dest, src, size, src_dev, dest_dev)

    def stream_out(self, sink: CopySink, src: Any, size: int) -> None:
        """Deliver the ``size`` bytes of ``src`` in pieces to ``sink`` (``capabilities.streams_out``), then finish it."""
        self._copyout_sink(sink, src, size)

    def sink(self, dest: Any, size: int) -> CopySink:
        """This backend's own destination of a streamed copy into ``dest`` (``capabilities.own_sink``)."""
        return self._sink(dest, size)

    # backend hooks
    def _alloc(self, size: int, spec: BufferSpec) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement _alloc")

    def _free(self, opaque: Any, size: int, spec: BufferSpec) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _free")

    def _copyin(self, dest: Any, src: memoryview) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _copyin")

    def _copyout(self, dest: memoryview, src: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _copyout")

    def _as_buffer(self, src: Any, size: int) -> memoryview:
        raise NotImplementedError(f"{type(self).__name__} has no zero-copy host view")

    def _offset(self, opaque: Any, size: int, offset: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not support buffer views")

    def _transfer(self, dest: Any, src: Any, size: int, src_dev: Any, dest_dev: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support device-to-device transfer")

    def _copyout_sink(self, sink: CopySink, src: Any, size: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not stream copies out")

    def _sink(self, dest: Any, size: int) -> CopySink:
        raise NotImplementedError(f"{type(self).__name__} has no streaming copy destination of its own")


class LRUAllocator(Allocator):
    """An allocator that keeps freed buffers for reuse by a later allocation of the same size and spec.

    The cache is keyed by ``(size, spec)``; ``None`` and ``BufferSpec()`` are the same key. At most ``max_cached_bytes``
    bytes are kept (env ``RUNTIME_LRU_MAX_BYTES``, default 1 GiB); a free beyond that releases the memory at once.
    Specs with ``nolru`` or ``external_ptr`` are never cached. When ``_alloc`` raises ``MemoryError`` the cache is emptied
    and the allocation retried once. Freeing a handle that is already in the cache (a double free) raises
    ``ValueError``; a double free under another size or spec cannot be detected.

    Raises (construction): ``TypeError``/``ValueError`` for a bound that is not an int >= 0 (also from the env var).
    """

    def __init__(self, dev: Any = None, *, max_cached_bytes: int | None = None) -> None:
        super().__init__(dev)
        if max_cached_bytes is None:
            max_cached_bytes = RUNTIME_LRU_MAX_BYTES.get()
        if isinstance(max_cached_bytes, bool) or not isinstance(max_cached_bytes, int):
            raise TypeError(f"max_cached_bytes must be an int number of bytes, got {max_cached_bytes!r}")
        if max_cached_bytes < 0:
            raise ValueError(f"max_cached_bytes must be >= 0, got {max_cached_bytes}")
        self.max_cached_bytes = max_cached_bytes
        self.cached_bytes = 0
        self.cache: defaultdict[tuple[int, BufferSpec], list[Any]] = defaultdict(list)
        self._cached_handles: set[tuple[str, Any]] = set()

    def alloc(self, size: int, spec: BufferSpec | None = None) -> Any:
        size, spec = _check_size(size), normalize_spec(spec)
        if (entries := self.cache.get((size, spec))):
            self.cached_bytes -= size
            opaque = entries.pop()
            self._cached_handles.discard(_handle_key(opaque))
            if not entries:
                del self.cache[(size, spec)]
            return opaque
        try:
            return self._alloc(size, spec)
        except MemoryError:
            log.info("out of memory allocating %d bytes; freeing %d cached bytes and retrying", size, self.cached_bytes)
            self.free_cache()
            return self._alloc(size, spec)

    def free(self, opaque: Any, size: int, spec: BufferSpec | None = None) -> None:
        opaque, size, spec = _check_opaque(opaque), _check_size(size), normalize_spec(spec)
        if _handle_key(opaque) in self._cached_handles:
            raise ValueError(f"double free: handle {opaque!r} was already freed and is in the allocator's cache")
        if spec.nolru or spec.external_ptr is not None or self.cached_bytes + size > self.max_cached_bytes:
            self._free(opaque, size, spec)
            return
        self.cache[(size, spec)].append(opaque)
        self._cached_handles.add(_handle_key(opaque))
        self.cached_bytes += size

    def free_cache(self) -> None:
        """Release every cached buffer to the backend.

        Each handle leaves the cache before it is released, so if the backend's ``_free`` raises, the cache still holds
        exactly the handles not yet released; the one whose release failed is dropped (never handed out again).
        """
        while self.cache:
            (size, spec), opaques = next(iter(self.cache.items()))
            opaque = opaques.pop()
            if not opaques:
                del self.cache[(size, spec)]
            self._cached_handles.discard(_handle_key(opaque))
            self.cached_bytes -= size
            self._free(opaque, size, spec)


def _handle_key(opaque: Any) -> tuple[str, Any]:
    """Identity of a handle: by value when hashable (int addresses), else by object identity (numpy arrays)."""
    try:
        hash(opaque)
    except TypeError:
        return ("id", id(opaque))
    return ("value", opaque)


class _Libc:
    def __init__(self) -> None:
        lib = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.posix_memalign = lib.posix_memalign
        self.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
        self.posix_memalign.restype = ctypes.c_int
        self.free = lib.free
        self.free.argtypes = [ctypes.c_void_p]
        self.free.restype = None


_libc: _Libc | None = None


def _get_libc() -> _Libc:
    global _libc
    if _libc is None:
        _libc = _Libc()
    return _libc


class MallocAllocator(LRUAllocator):
    """Host memory from ``posix_memalign``, aligned to ``alignment`` bytes (default 64, a cache line).

    The opaque handle is the address as an ``int``. Supports zero-copy ``_as_buffer`` and ``_offset`` views.
    ``BufferSpec.external_ptr`` wraps caller-owned memory at that address without allocating or freeing it.
    """

    def __init__(self, dev: Any = None, *, alignment: int = 64, max_cached_bytes: int | None = None) -> None:
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"alignment must be an int number of bytes that is a power of two, got {alignment!r}")
        super().__init__(dev, max_cached_bytes=max_cached_bytes)
        self.alignment = alignment

    def _alloc(self, size: int, spec: BufferSpec) -> int:
        if spec.external_ptr is not None:
            return spec.external_ptr
        ptr = ctypes.c_void_p()
        err = _get_libc().posix_memalign(ctypes.byref(ptr), self.alignment, size)
        if err != 0 or not ptr.value:
            raise MemoryError(f"posix_memalign of {size} bytes failed: {os.strerror(err)}")
        return ptr.value

    def _free(self, opaque: int, size: int, spec: BufferSpec) -> None:
        if spec.external_ptr is None:
            _get_libc().free(opaque)

    def _as_buffer(self, src: int, size: int) -> memoryview:
        return memoryview((ctypes.c_uint8 * size).from_address(src)).cast("B")

    def _copyin(self, dest: int, src: memoryview) -> None:
        self._as_buffer(dest, src.nbytes)[:] = src  # a memcpy inside memoryview assignment: no numpy round trip

    def _copyout(self, dest: memoryview, src: int) -> None:
        dest[:] = self._as_buffer(src, dest.nbytes)

    def _offset(self, opaque: int, size: int, offset: int) -> int:
        return opaque + offset

