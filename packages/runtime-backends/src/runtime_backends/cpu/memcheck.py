"""CPU memcheck: the ``CPU_MEMCHECK`` switch and the error a checked kernel's fault record turns into.

With ``CPU_MEMCHECK=1`` the renderer emits a bounds check before every LOAD and STORE (``abi.FLAG_CHECKED``): an index
outside ``[0, element count)`` of its buffer is not accessed; the kernel writes the fault record (``abi.FAULT_FIELDS``)
and returns, and the program raises :class:`OutOfBoundsError` after the call, so a bad kernel fails its test instead of
corrupting the heap or killing the process. Element counts come from the buffers' handles (``allocator.HostPointer``).
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime_backends.cpu.abi import FAULT_FIELDS
from runtime_core.config import CPU_MEMCHECK

__all__ = ["OutOfBoundsError", "memcheck_enabled", "fault_error"]



class OutOfBoundsError(IndexError):
    """A checked kernel indexed a buffer out of bounds; the message names kernel, op, buffer, index and thread.

    Attributes: ``kernel``, ``slot``, ``index``, ``count`` (elements of the buffer), ``store`` (bool), ``group`` and
    ``thread`` (3-tuples of the group id and the thread id within the group).
    """

    def __init__(self, kernel: str, fields: dict[str, int]) -> None:
        self.kernel, self.slot, self.index, self.count = kernel, fields["slot"], fields["index"], fields["count"]
        self.store = bool(fields["store"])
        self.group = (fields["gid0"], fields["gid1"], fields["gid2"])
        self.thread = (fields["lid0"], fields["lid1"], fields["lid2"])
        super().__init__(
            f"kernel {kernel!r}: {'STORE' if self.store else 'LOAD'} out of bounds: buffer {self.slot} index "
            f"{self.index}, but the buffer holds {self.count} elements; group {self.group}, thread {self.thread} "
            f"({CPU_MEMCHECK.name}=1 stopped the kernel before the access; what it stored before stays written)")


def memcheck_enabled() -> bool:
    """Whether ``$CPU_MEMCHECK`` asks for checked kernels: 1/true/yes/on, or 0/false/no/off/empty/unset (any case).

    Raises ``runtime_core.config.ConfigError`` (a ``ValueError``) naming the variable for any other value.
    """
    return bool(CPU_MEMCHECK.get())


def fault_error(kernel: str, record: Sequence[int]) -> OutOfBoundsError:
    """The error a filled fault record (``abi.FAULT_FIELDS``, ``hit`` set) of ``kernel`` describes."""
    return OutOfBoundsError(kernel, dict(zip(FAULT_FIELDS, record)))
