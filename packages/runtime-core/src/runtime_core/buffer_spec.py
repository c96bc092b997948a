"""How a buffer is to be allocated."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BufferSpec", "normalize_spec"]


@dataclass(frozen=True)
class BufferSpec:
    """Allocation options of a buffer; hashable, so it can key allocator caches.

    Attributes:
        uncached: the device may skip caching this memory (e.g. write-combined).
        cpu_access: the host must be able to map it.
        host: allocate host (pinned) memory owned by the device's driver instead of device memory.
        nolru: never keep it in an :class:`~runtime_core.allocator.LRUAllocator` cache after free.
        external_ptr: wrap memory the caller owns at this address instead of allocating; never freed by the runtime.
            The runtime cannot check that the memory exists or is large enough: the caller keeps it alive and sized.

    Raises ``TypeError`` for a flag that is not a bool or an ``external_ptr`` that is not a positive int (a NULL or
    negative address would crash the first copy).
    """

    uncached: bool = False
    cpu_access: bool = False
    host: bool = False
    nolru: bool = False
    external_ptr: int | None = None

    def __post_init__(self) -> None:
        for name in ("uncached", "cpu_access", "host", "nolru"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"BufferSpec.{name} must be a bool, got {getattr(self, name)!r}")
        ptr = self.external_ptr
        if ptr is not None and (isinstance(ptr, bool) or not isinstance(ptr, int) or ptr <= 0):
            raise TypeError(f"BufferSpec.external_ptr must be None or a positive int address, got {ptr!r}")


DEFAULT_SPEC = BufferSpec()


def normalize_spec(spec: BufferSpec | None) -> BufferSpec:
    """``spec`` itself, or the default ``BufferSpec()`` for ``None``; ``TypeError`` for anything else."""
    if spec is None:
        return DEFAULT_SPEC
    if not isinstance(spec, BufferSpec):
        raise TypeError(f"spec must be a BufferSpec or None, got {type(spec).__name__}")
    return spec
