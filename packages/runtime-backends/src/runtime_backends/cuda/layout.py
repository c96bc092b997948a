"""What both CUDA renderers share: the device's limits, where LOCAL arrays live in shared memory, which kernel names
are usable as symbols."""

from __future__ import annotations

from typing import Protocol

from runtime_backends.cuda.limits import DeviceLimits
from runtime_core.ir import Kernel, Ops, validate
from runtime_core.renderer import Renderer

__all__ = ["CUDARendererBase", "SharedLayout", "check_kernel_name", "SHARED_ALIGN"]

SHARED_ALIGN = 16
"""Alignment of the dynamic shared array (bytes): enough for any element type and 16-byte vector accesses."""
_CPP_KEYWORDS = frozenset(
    "alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class "
    "compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype "
    "default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline "
    "int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register "
    "reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template "
    "this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t "
    "while xor xor_eq".split())


class SharedLayout:
    """Byte offsets of a kernel's LOCAL arrays inside one dynamic shared array, in program order, each aligned to its
    element size; ``nbytes`` in all (0 without LOCAL ops).

    Raises ``ValueError`` when the arrays need more than ``limit`` bytes.
    """

    def __init__(self, kernel: Kernel, limit: int) -> None:
        self.offsets: dict[int, int] = {}
        self.align = SHARED_ALIGN
        end = 0
        for u in kernel.ops:
            if u.op is Ops.LOCAL:
                size = u.dtype.itemsize
                start = -(-end // size) * size
                self.offsets[id(u)] = start
                end = start + u.arg[1] * size
        if end > limit:
            raise ValueError(f"CUDA: kernel {kernel.name!r} needs {end} bytes of local (shared) memory; the device "
                             f"allows {limit} per block")
        self.nbytes = end


def check_kernel_name(backend: str, name: str) -> None:
    """Raise ``ValueError`` unless ``name`` (already an ASCII identifier) can be the kernel's symbol: not a C++
    keyword, not reserved (``__x``, ``_X``; C++ [lex.name]) and not starting with ``rtk_`` (the backend's helpers)."""
    reserved = name.startswith(("__", "rtk_")) or (name[:1] == "_" and name[1:2].isupper())
    if name in _CPP_KEYWORDS or reserved:
        raise ValueError(f"{backend}: kernel name {name!r} becomes the kernel's symbol, so it must not be a C++ keyword, "
                         f"reserved (starting with '__' or '_' and a capital letter) or start with 'rtk_'; rename it")


class _Writer(Protocol):
    def __init__(self, kernel: Kernel, layout: SharedLayout) -> None: ...
    def source(self) -> str: ...


class CUDARendererBase(Renderer):
    """A CUDA renderer for a device with ``limits`` (default: a generic sm_80): blocks, grids and local (shared)
    memory up to the device's opt-in amount per block. Subclasses set ``writer``, which writes one kernel's source."""

    device = "CUDA"
    has_local = True
    has_shared = True
    writer: type[_Writer]

    def __init__(self, limits: DeviceLimits | None = None) -> None:
        self.limits = limits or DeviceLimits()
        self.local_max, self.global_max = self.limits.max_block, self.limits.max_grid
        self.shared_max = self.limits.shared_optin

    def render(self, kernel: Kernel) -> str:
        """The source of ``kernel``.

        Raises ``ValueError`` (``IRError``) for a malformed kernel, one whose local memory exceeds the device's
        shared memory, or whose name cannot be a kernel symbol (see :func:`check_kernel_name`).
        """
        self.check(validate(kernel))
        check_kernel_name(self.device, kernel.name)
        return self.writer(kernel, SharedLayout(kernel, self.shared_max)).source()
