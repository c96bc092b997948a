"""What one CUDA device allows: compute capability, block/grid limits, shared memory (``cuDeviceGetAttribute``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime_backends.cuda.driver import check

__all__ = ["DeviceLimits", "query_limits", "DEFAULT_SHARED_BYTES"]

DEFAULT_SHARED_BYTES = 48 * 1024
"""Shared memory a block gets without opting in (CUDA C++ Programming Guide, "Technical Specifications")."""


@dataclass(frozen=True)
class DeviceLimits:
    """Limits of a device, as the driver reports them.

    Attributes:
        name: the device's name (``cuDeviceGetName``).
        arch: compute capability ``(major, minor)``, e.g. ``(9, 0)``.
        max_block: largest block per dimension (threads, x y z).
        max_threads_per_block: most threads in one block.
        max_grid: largest grid per dimension (blocks, x y z).
        shared_optin: bytes of shared memory one block may use after opting in
            (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``).
    """

    name: str = "generic sm_80"
    arch: tuple[int, int] = (8, 0)
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_threads_per_block: int = 1024
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    shared_optin: int = DEFAULT_SHARED_BYTES

    @property
    def sm(self) -> int:
        """The compute capability as one number, ``10 * major + minor`` (``sm_90`` -> 90)."""
        return 10 * self.arch[0] + self.arch[1]


def query_limits(cu: Any, device: Any) -> DeviceLimits:
    """The :class:`DeviceLimits` of driver device ``device`` (a ``CUdevice``); ``CUDAError`` if a query fails."""
    attr = cu.CUdevice_attribute

    def get(name: str) -> int:
        return int(check(cu, cu.cuDeviceGetAttribute(getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"), device),
                         "cuDeviceGetAttribute", attrib=name))

    raw = check(cu, cu.cuDeviceGetName(256, device), "cuDeviceGetName")
    name = bytes(raw).split(b"\0", 1)[0].decode(errors="replace").strip()
    return DeviceLimits(
        name=name,
        arch=(get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")),
        max_block=(get("MAX_BLOCK_DIM_X"), get("MAX_BLOCK_DIM_Y"), get("MAX_BLOCK_DIM_Z")),
        max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
        max_grid=(get("MAX_GRID_DIM_X"), get("MAX_GRID_DIM_Y"), get("MAX_GRID_DIM_Z")),
        shared_optin=max(get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), DEFAULT_SHARED_BYTES),
    )
