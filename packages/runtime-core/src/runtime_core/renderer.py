"""Renderers turn a kernel IR into a backend's source language."""

from __future__ import annotations

from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, Ops

__all__ = ["Renderer"]


class Renderer:
    """What a backend's code generator can do, and ``render(kernel) -> str``.

    Attributes:
        device: the backend name this renderer targets.
        has_local: thread ids within a group and group-shared (local) memory are real (False: groups run serially).
        has_shared: the device has group-shared memory usable by LOCAL ops.
        global_max: largest launch size (groups) per dimension.
        local_max: largest group size (threads) per dimension.
        shared_max: bytes of local memory per group.
        dtypes: element types the backend supports.
    """

    device: str = ""
    has_local: bool = False
    has_shared: bool = False
    global_max: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    local_max: tuple[int, int, int] = (1, 1, 1)
    shared_max: int = 0
    dtypes: tuple[DType, ...] = dtypes.all

    def render(self, kernel: Kernel) -> str:
        """Source text of ``kernel``; raises ``ValueError`` if the kernel needs something this backend lacks."""
        raise NotImplementedError(f"{type(self).__name__} must implement render")

    def check(self, kernel: Kernel) -> None:
        """Raise ``ValueError`` naming what ``kernel`` needs that this backend lacks (dtypes, local memory, sizes)."""
        if kernel.uses_local and not self.has_shared:
            raise ValueError(f"{self.device}: kernel {kernel.name!r} uses local memory, which this backend lacks")
        if kernel.uses_local:
            nbytes = sum(u.arg[1] * u.dtype.itemsize for u in kernel.ops if u.op is Ops.LOCAL)
            if nbytes > self.shared_max:
                raise ValueError(f"{self.device}: kernel {kernel.name!r} needs {nbytes} bytes of local memory, "
                                 f"the device has {self.shared_max}")
        used = {u.dtype for u in kernel.ops if u.dtype is not None}
        if missing := sorted(d.name for d in used if d not in self.dtypes):
            raise ValueError(f"{self.device}: kernel {kernel.name!r} uses unsupported dtypes {missing}")
