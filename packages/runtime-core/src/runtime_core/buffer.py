"""Device buffers: typed, sized memory on one device, with views and host copies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime_core import transfer
from runtime_core.allocator import Allocator
from runtime_core.buffer_spec import BufferSpec, normalize_spec
from runtime_core.device import Compiled, Device
from runtime_core.dtype import DType, dtypes
from runtime_core.sink import CopySink

__all__ = ["Buffer"]

_UINT8 = np.dtype(np.uint8)


def _byteview(data: Any, dtype: DType, what: str) -> memoryview:
    """A flat byte view of bytes-like ``data`` or of a numpy array of ``dtype`` (or uint8, taken as raw bytes).

    Non-contiguous numpy sources are copied; a non-contiguous memoryview is refused (``ValueError``).
    """
    if type(data) is np.ndarray and (data.dtype is _UINT8 or data.dtype == dtype.np):
        try:  # the quick way for C-contiguous arrays whose dtype the buffer protocol can describe
            return data.data.cast("B")
        except (TypeError, ValueError):
            pass
    if isinstance(data, np.ndarray):
        if data.dtype != dtype.np and data.dtype != np.uint8:
            raise ValueError(f"{what}: numpy array has dtype {data.dtype}, the buffer holds {dtype.name}; convert it "
                             f"with .astype({dtype.np}) (or pass raw bytes as uint8)")
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        return memoryview(data.reshape(-1).view(np.uint8))
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"{what}: expected bytes, bytearray, memoryview or a numpy array, got "
                        f"{type(data).__name__}") from None
    if not mv.c_contiguous:
        raise ValueError(f"{what}: host memory must be C-contiguous (use numpy.ascontiguousarray)")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


def _shape(shape: int | Sequence[int], size: int) -> tuple[int, ...]:
    """``shape`` with a ``-1`` dimension worked out, checked to hold exactly ``size`` elements (numpy.reshape's rule)."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}")
    dims = tuple(int(d) for d in dims)
    free = [i for i, d in enumerate(dims) if d == -1]
    known = math.prod(d for d in dims if d != -1)
    if len(free) == 1 and known > 0 and size % known == 0:
        dims = dims[:free[0]] + (size // known,) + dims[free[0] + 1:]
    if any(d < 0 for d in dims) or math.prod(dims) != size:
        raise ValueError(f"shape {shape!r} does not hold the buffer's {size} elements")
    return dims


def _check_dtype(dtype: Any) -> DType:
    if not isinstance(dtype, DType):
        raise TypeError(f"dtype must be a DType (e.g. dtypes.float32), got {dtype!r}")
    return dtype


class Buffer:
    """``size`` elements of ``dtype`` on ``device`` (``nbytes = size * dtype.itemsize``).

    A buffer is created unallocated; :meth:`allocate` gets memory from the device's allocator, :meth:`deallocate` returns
    it. :meth:`view` makes a buffer over a byte range of this one that shares its memory. Copies check sizes and raise
    ``ValueError`` naming both sizes; using an unallocated or deallocated buffer raises ``RuntimeError``, and so does
    using a view whose base buffer was deallocated since the view was allocated (its memory may be gone), even if the
    base was allocated again: call the view's :meth:`allocate` to attach it to the base's new memory.
    """

    def __init__(self, device: str, size: int, dtype: DType, spec: BufferSpec | None = None, *,
                 base: Buffer | None = None, offset: int = 0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"buffer size must be a positive int number of elements, got {size!r}")
        self.device, self.size, self.dtype = Device.canonicalize(device), size, _check_dtype(dtype)
        self.spec = normalize_spec(spec)
        self.base, self.offset = base, offset
        self._opaque: Any = None
        self._dev: Compiled | None = None  # bound once on allocate: no registry lookup per copy
        self._freed = False
        self._generation = 0  # a root buffer counts its allocations; a view remembers the one it was attached to

    def __repr__(self) -> str:
        state = "allocated" if self.is_allocated else ("freed" if self._freed else "unallocated")
        view = f" view@{self.offset}" if self.base is not None else ""
        return f"<Buffer {self.device} {self.size}x{self.dtype.name} {state}{view}>"

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def dev(self) -> Compiled:
        """The ``Compiled`` device this buffer lives on (bound when allocated; ``DeviceError`` if it cannot open)."""
        if self._dev is None:
            self._dev = self.base.dev if self.base is not None else Device[self.device]
        return self._dev

    @property
    def allocator(self) -> Allocator:
        return self.dev.allocator

    @property
    def is_allocated(self) -> bool:
        if self.base is not None:
            return self._opaque is not None and self.base.is_allocated and self._generation == self.base._generation
        return self._opaque is not None

    @property
    def opaque(self) -> Any:
        """The backend handle (what programs take); ``RuntimeError`` if not allocated."""
        self._require_allocated("use")
        return self._opaque

    def allocate(self, opaque: Any = None) -> Buffer:
        """Allocate memory (or adopt ``opaque`` from the same allocator); returns self. ``MemoryError`` when out of memory."""
        if self.is_allocated:
            raise RuntimeError(f"{self!r} is already allocated")
        if self.base is not None:
            if opaque is not None:
                raise ValueError(f"{self!r} is a view: it takes its memory from its base buffer, not an opaque handle")
            self._opaque, self._generation = self._view_opaque(), self.base._generation
        else:
            self._opaque = opaque if opaque is not None else self.allocator.alloc(self.nbytes, self.spec)
            self._generation += 1
        self._freed = False
        return self

    def deallocate(self) -> None:
        """Return the memory to the allocator; a view only drops its handle. ``RuntimeError`` if not allocated."""
        self._require_allocated("deallocate")
        if self.base is None:
            self.allocator.free(self._opaque, self.nbytes, self.spec)
        self._opaque, self._freed = None, True

    def view(self, size: int, dtype: DType, offset: int) -> Buffer:
        """A buffer of ``size`` elements of ``dtype`` starting ``offset`` bytes into this one, sharing its memory.

        Raises ``ValueError`` if the range does not fit inside this buffer, ``TypeError`` for a dtype that is not a
        ``DType``. The offset need not be a multiple of ``dtype.itemsize`` (raw byte views); kernels on devices that
        require aligned accesses (CUDA) fail on a misaligned view.
        """
        _check_dtype(dtype)
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"view size must be a positive int number of elements, got {size!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"view offset must be an int >= 0 bytes, got {offset!r}")
        if offset + size * dtype.itemsize > self.nbytes:
            raise ValueError(f"view of {size * dtype.itemsize} bytes at offset {offset} does not fit in a buffer of "
                             f"{self.nbytes} bytes")
        root = self.base if self.base is not None else self
        v = Buffer(self.device, size, dtype, self.spec, base=root, offset=self.offset + offset)
        return v.allocate() if root.is_allocated else v

    def _view_opaque(self) -> Any:
        base = self.base
        if base is None or not base.is_allocated:
            raise RuntimeError(f"{self!r}: the base buffer is not allocated")
        offset_views = self.allocator.capabilities.views
        if self.offset == 0 and (self.nbytes == base.nbytes or not offset_views):
            return base._opaque  # a smaller view gets its own handle where it can: handles may carry their size
        if not offset_views:
            raise NotImplementedError(f"{self.device} does not support buffer views at an offset")
        return self.allocator.offset(base._opaque, self.nbytes, self.offset)

    def _require_allocated(self, what: str) -> None:
        if not self.is_allocated:
            raise RuntimeError(f"cannot {what} {self!r}: {self._why_unallocated()}")

    def _why_unallocated(self) -> str:
        base = self.base
        if base is not None and self._opaque is not None and base.is_allocated:
            return "its base buffer was deallocated and allocated again since the view was made; call allocate() on " \
                   "the view to attach it to the new memory"
        if self._freed or (base is not None and base._freed):
            return "it was deallocated"
        return "it is not allocated"

    def copyin(self, data: Any) -> Buffer:
        """Copy host ``data`` (bytes-like or numpy array) of exactly :attr:`nbytes` bytes into the buffer."""
        if self._opaque is None or self.base is not None:
            self._require_allocated("copy into")
        src = _byteview(data, self.dtype, "copyin")
        if src.nbytes != self.size * self.dtype.itemsize:
            raise ValueError(f"copyin size mismatch: buffer holds {self.nbytes} bytes, host data has {src.nbytes} bytes")
        (self._dev or self.dev).allocator.copyin(self._opaque, src)
        return self

    def copyout(self, dest: Any) -> memoryview:
        """Copy the buffer into writable host ``dest`` of exactly :attr:`nbytes` bytes; returns ``dest`` as bytes view.

        ``dest`` is bytearray, a writable memoryview or a C-contiguous numpy array of the buffer's dtype (or uint8);
        ``ValueError`` for a read-only, non-contiguous or wrongly sized destination (nothing is written then).
        """
        if self._opaque is None or self.base is not None:
            self._require_allocated("copy out of")
        if isinstance(dest, np.ndarray) and not dest.flags.c_contiguous:
            raise ValueError("copyout destination must be C-contiguous (a non-contiguous array would receive a copy, "
                             "not the data); copy into numpy.empty(...) and assign from it")
        dst = _byteview(dest, self.dtype, "copyout")
        if dst.readonly:
            raise ValueError("copyout destination is read-only")
        if dst.nbytes != self.size * self.dtype.itemsize:
            raise ValueError(f"copyout size mismatch: buffer holds {self.nbytes} bytes, destination has {dst.nbytes} bytes")
        dev = self._dev or self.dev
        if not dev.allocator.copyout_orders:
            dev.synchronize()
        dev.allocator.copyout(dst, self._opaque)
        return dst

    def as_buffer(self, allow_zero_copy: bool = True, force_zero_copy: bool = False) -> memoryview:
        """A host memoryview of the contents: zero-copy when the allocator allows it, else a copy.

        ``force_zero_copy`` raises ``RuntimeError`` when zero-copy is impossible.
        """
        self._require_allocated("view")
        dev = self.dev
        if allow_zero_copy and dev.allocator.capabilities.host_view:
            dev.synchronize()
            return dev.allocator.host_view(self._opaque, self.nbytes)
        if force_zero_copy:
            raise RuntimeError(f"{self.device} cannot expose {self!r} to the host without a copy")
        return self.copyout(bytearray(self.nbytes))

    def numpy(self, shape: int | Sequence[int] | None = None) -> np.ndarray:
        """A new numpy array of ``dtype.np`` with the buffer's contents: 1-D (``size`` elements), or of ``shape`` (C
        order, as ``numpy.reshape``; one dimension may be ``-1``).

        Raises ``ValueError`` naming both when ``shape`` does not hold exactly ``size`` elements (nothing is copied).
        """
        target = (self.size,) if shape is None else _shape(shape, self.size)
        out = np.empty(target, dtype=self.dtype.np)
        self.copyout(out)
        return out

    @classmethod
    def from_numpy(cls, device: str, array: np.ndarray, spec: BufferSpec | None = None) -> Buffer:
        """An allocated buffer on ``device`` holding a copy of ``array`` (flattened); dtype from ``array.dtype``."""
        array = np.asarray(array)
        if array.size == 0:
            raise ValueError("cannot make a buffer from an empty array")
        return cls(device, array.size, dtypes.from_numpy(array.dtype), spec).allocate().copyin(array)

    def copy_from(self, src: Buffer) -> Buffer:
        """Copy ``src`` (same byte size, any device) into this buffer, the way the copy router picks
        (:func:`runtime_core.transfer.route`: same device, peer, streamed from DISK, through host memory)."""
        if not isinstance(src, Buffer):
            raise TypeError(f"copy_from takes a Buffer, got {type(src).__name__}; use copyin for host data")
        if src.nbytes != self.nbytes:
            raise ValueError(f"copy size mismatch: destination holds {self.nbytes} bytes, source {src.nbytes} bytes")
        self._require_allocated("copy into")
        src._require_allocated("copy out of")
        transfer.copy(self, src)
        return self

    def copy_sink(self) -> CopySink | None:
        """How this buffer takes a streamed copy (:func:`runtime_core.transfer.sink_for`); ``None`` when its allocator
        offers no way. ``RuntimeError`` if the buffer is not allocated."""
        self._require_allocated("copy into")
        return transfer.sink_for(self)
