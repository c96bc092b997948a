"""The calling convention between the CPU backend's renderer and its program loader (one definition for both).

A rendered kernel is ``void <name>(const long long* args)``: one pointer to a block of int64 launch arguments, so a
launch is one ctypes call with one argument whatever the kernel's arity (ctypes converts every argument of a call
separately, about 0.1 us each). The block holds, in this order:

1. the buffers' host addresses, in slot order;
2. the int32 vals, in ``Kernel.vars`` order (sign-extended);
3. the launch parameters the kernel uses, in ``LAUNCH_PARAMS`` order: groups per dimension (``gsz0..2``), threads per
   group (``lsz0..2``), and the rectangle of groups this call runs: rows ``[rlo, rhi)`` (a row is the groups of one
   y and z, numbered ``gid1 + gsz1 * gid2``) times x groups ``[xlo, xhi)``. A launch runs its groups in one call or
   splits them into rectangles over a thread pool;
4. checked kernels (``CPU_MEMCHECK=1``) only: every buffer's size in bytes (slot order), then the address of a fault
   record of ``len(FAULT_FIELDS)`` int64s that the kernel fills at its first out-of-bounds access before it returns.

The object also defines ``const int rtk_signature[5] = {SIGNATURE_MAGIC, buffers, vals, launch mask, flags}``: bit
``i`` of the launch mask says that ``LAUNCH_PARAMS[i]`` is in the block, flag ``FLAG_CHECKED`` marks a checked kernel.
A loader learns the block layout from that record alone (``Signature.from_record``). An object without the record is a
foreign kernel with ordinary C parameters (see ``program.CPUProgram``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SIGNATURE_SYMBOL", "SIGNATURE_MAGIC", "INT32_MAX", "MAX_PARAMS", "LAUNCH_PARAMS", "FLAG_CHECKED",
           "FAULT_FIELDS", "Signature"]

SIGNATURE_SYMBOL = "rtk_signature"
SIGNATURE_MAGIC = 0x52544B33  # "RTK3": version 3 of this calling convention (2 passed a linear group range, 1 C parameters)
INT32_MAX = 2**31 - 1
"""Largest launch size per dimension, and largest int32 val: the kernel holds sizes and vals in C ``int``s."""
MAX_PARAMS = 4096
"""Buffers + vals a kernel may take; a record claiming more is corrupt (the block costs 8 bytes per parameter)."""
LAUNCH_PARAMS = ("gsz0", "gsz1", "gsz2", "lsz0", "lsz1", "lsz2", "rlo", "rhi", "xlo", "xhi")
FLAG_CHECKED = 1
FAULT_FIELDS = ("hit", "slot", "index", "count", "store", "gid0", "gid1", "gid2", "lid0", "lid1", "lid2")
"""The fault record of a checked kernel: ``hit`` is 1 once an access was out of bounds; ``store`` is 1 for a STORE."""


@dataclass(frozen=True)
class Signature:
    """What the ``rtk_signature`` record says: buffer and val counts, the launch parameters passed, checked or not."""

    buffers: int
    vals: int
    launch: tuple[str, ...]
    checked: bool = False

    def record(self) -> tuple[int, int, int, int, int]:
        """The five ints of the ``rtk_signature`` record."""
        mask = sum(1 << i for i, p in enumerate(LAUNCH_PARAMS) if p in self.launch)
        return SIGNATURE_MAGIC, self.buffers, self.vals, mask, FLAG_CHECKED if self.checked else 0

    @classmethod
    def from_record(cls, record: Sequence[int]) -> Signature:
        """Decode a record; ``ValueError`` for a wrong magic (another version), absurd counts or unknown bits."""
        magic, nbufs, nvals, mask, flags = record
        if magic != SIGNATURE_MAGIC or not 0 <= nbufs <= MAX_PARAMS or not 0 <= nvals <= MAX_PARAMS - nbufs \
                or not 0 <= mask < 1 << len(LAUNCH_PARAMS) or flags & ~FLAG_CHECKED:
            raise ValueError(f"signature record {tuple(record)} is not ({SIGNATURE_MAGIC:#x}, buffers, vals, launch "
                             f"mask, flags) of this version with at most {MAX_PARAMS} parameters")
        launch = tuple(p for i, p in enumerate(LAUNCH_PARAMS) if mask >> i & 1)
        return cls(nbufs, nvals, launch, bool(flags & FLAG_CHECKED))

    @property
    def launch_offset(self) -> int:
        """Block index of the first launch parameter."""
        return self.buffers + self.vals

    @property
    def sizes_offset(self) -> int:
        """Block index of buffer 0's byte size (checked kernels)."""
        return self.launch_offset + len(self.launch)

    @property
    def fault_offset(self) -> int:
        """Block index of the fault record's address (checked kernels)."""
        return self.sizes_offset + self.buffers

    @property
    def block_len(self) -> int:
        """int64s in the launch block."""
        return self.fault_offset + 1 if self.checked else self.sizes_offset
