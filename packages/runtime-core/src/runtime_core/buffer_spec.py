"""How a buffer is to be allocated."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BufferSpec"]


@dataclass(frozen=True)
class BufferSpec:
    """Allocation options of a buffer; hashable, so it can key allocator caches.

    Attributes:
        uncached: the device may skip caching this memory (e.g. write-combined).
        cpu_access: the host must be able to map it.
        host: allocate host (pinned) memory owned by the device's driver instead of device memory.
        nolru: never keep it in an :class:`~runtime_core.allocator.LRUAllocator` cache after free.
        external_ptr: wrap memory the caller owns at this address instead of allocating; never freed by the runtime.
    """

    uncached: bool = False
    cpu_access: bool = False
    host: bool = False
    nolru: bool = False
    external_ptr: int | None = None
