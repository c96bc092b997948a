"""Device buffers: typed, sized memory on one device, with views and host copies."""

from __future__ import annotations

from typing import Any

import numpy as np

from runtime_core.allocator import Allocator
from runtime_core.buffer_spec import BufferSpec
from runtime_core.device import Device
from runtime_core.dtype import DType, dtypes

__all__ = ["Buffer"]


def _byteview(data: Any) -> memoryview:
    """A flat byte view of bytes, bytearray, memoryview or a C-contiguous numpy array."""
    if isinstance(data, np.ndarray):
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        return memoryview(data.reshape(-1).view(np.uint8))
    mv = memoryview(data)
    if not mv.c_contiguous:
        raise ValueError("host data must be C-contiguous")
    return mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv


class Buffer:
    """``size`` elements of ``dtype`` on ``device`` (``nbytes = size * dtype.itemsize``).

    A buffer is created unallocated; :meth:`allocate` gets memory from the device's allocator, :meth:`deallocate` returns
    it. :meth:`view` makes a buffer over a byte range of this one that shares its memory. Copies check sizes and raise
    ``ValueError`` naming both sizes; using an unallocated or deallocated buffer raises ``RuntimeError``.
    """

    def __init__(self, device: str, size: int, dtype: DType, spec: BufferSpec | None = None, *,
                 base: Buffer | None = None, offset: int = 0) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"buffer size must be a positive int number of elements, got {size!r}")
        if not isinstance(dtype, DType):
            raise TypeError(f"dtype must be a DType (e.g. dtypes.float32), got {dtype!r}")
        self.device, self.size, self.dtype = Device.canonicalize(device), size, dtype
        self.spec = spec if spec is not None else BufferSpec()
        self.base, self.offset = base, offset
        self._opaque: Any = None
        self._freed = False

    def __repr__(self) -> str:
        state = "allocated" if self.is_allocated else ("freed" if self._freed else "unallocated")
        view = f" view@{self.offset}" if self.base is not None else ""
        return f"<Buffer {self.device} {self.size}x{self.dtype.name} {state}{view}>"

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def allocator(self) -> Allocator:
        return Device[self.device].allocator

    @property
    def is_allocated(self) -> bool:
        if self.base is not None:
            return self._opaque is not None and self.base.is_allocated
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
            self._opaque = self._view_opaque()
        else:
            self._opaque = opaque if opaque is not None else self.allocator.alloc(self.nbytes, self.spec)
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

        Raises ``ValueError`` if the range does not fit inside this buffer.
        """
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
        if self.offset == 0:
            return base._opaque
        if not self.allocator.supports("_offset"):
            raise NotImplementedError(f"{self.device} does not support buffer views at an offset")
        return self.allocator._offset(base._opaque, self.nbytes, self.offset)

    def _require_allocated(self, what: str) -> None:
        if not self.is_allocated:
            why = "it was deallocated" if self._freed or (self.base is not None and self.base._freed) else \
                "it is not allocated"
            raise RuntimeError(f"cannot {what} {self!r}: {why}")

    def copyin(self, data: Any) -> Buffer:
        """Copy host ``data`` (bytes-like or numpy array) of exactly :attr:`nbytes` bytes into the buffer."""
        self._require_allocated("copy into")
        src = _byteview(data)
        if src.nbytes != self.nbytes:
            raise ValueError(f"copyin size mismatch: buffer holds {self.nbytes} bytes, host data has {src.nbytes} bytes")
        self.allocator._copyin(self._opaque, src)
        return self

    def copyout(self, dest: Any) -> memoryview:
        """Copy the buffer into writable host ``dest`` of exactly :attr:`nbytes` bytes; returns ``dest`` as bytes view."""
        self._require_allocated("copy out of")
        dst = _byteview(dest)
        if dst.readonly:
            raise ValueError("copyout destination is read-only")
        if dst.nbytes != self.nbytes:
            raise ValueError(f"copyout size mismatch: buffer holds {self.nbytes} bytes, destination has {dst.nbytes} bytes")
        Device[self.device].synchronize()
        self.allocator._copyout(dst, self._opaque)
        return dst

    def as_buffer(self, allow_zero_copy: bool = True, force_zero_copy: bool = False) -> memoryview:
        """A host memoryview of the contents: zero-copy when the allocator allows it, else a copy.

        ``force_zero_copy`` raises ``RuntimeError`` when zero-copy is impossible.
        """
        self._require_allocated("view")
        if allow_zero_copy and self.allocator.supports("_as_buffer"):
            Device[self.device].synchronize()
            return self.allocator._as_buffer(self._opaque, self.nbytes)
        if force_zero_copy:
            raise RuntimeError(f"{self.device} cannot expose {self!r} to the host without a copy")
        return self.copyout(bytearray(self.nbytes))

    def numpy(self) -> np.ndarray:
        """A new numpy array (1-D, ``size`` elements of ``dtype.np``) with the buffer's contents."""
        out = np.empty(self.size, dtype=self.dtype.np)
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
        """Copy ``src`` (same byte size, any device) into this buffer: device-to-device when both are on one backend
        whose allocator has ``_transfer``, else through host memory."""
        if src.nbytes != self.nbytes:
            raise ValueError(f"copy size mismatch: destination holds {self.nbytes} bytes, source {src.nbytes} bytes")
        self._require_allocated("copy into")
        src._require_allocated("copy out of")
        same_backend = src.device.partition(":")[0] == self.device.partition(":")[0]
        if same_backend and self.allocator.supports("_transfer"):
            self.allocator._transfer(self._opaque, src._opaque, self.nbytes, Device[src.device], Device[self.device])
        else:
            self.copyin(src.as_buffer(allow_zero_copy=True))
        return self
