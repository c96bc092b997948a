"""Configuration of the emulated system, read from the environment when ``cuInit`` runs.

The variables are declared once, in :data:`SETTINGS` (name, accepted forms, default, doc); docs/configuration.md
lists them from there.

The per-architecture limits (SM count, shared memory per block with opt-in, threads per SM) are the published
values of the CUDA C++ Programming Guide, "Compute Capabilities" table, for the reference part of each generation.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple


class Variable(NamedTuple):
    """One environment variable of the emulator: ``name``, ``kind`` (the accepted forms), ``default`` (the text used
    when it is unset) and ``doc`` (one line)."""

    name: str
    kind: str
    default: str
    doc: str


MOCKGPU_DEVICES = Variable("MOCKGPU_DEVICES", "int 1..64", "1", "number of emulated devices")
MOCKGPU_ARCH = Variable("MOCKGPU_ARCH", "sm_80, 80, 8.0 or sm_90a", "sm_90", "compute capability of every device")
MOCKGPU_MEMORY = Variable("MOCKGPU_MEMORY", "bytes: 16GiB, 512MB, 1e9, 4096", "16GiB",
                          "device memory per device (backed lazily: a large capacity costs nothing until written)")
MOCKGPU_LAUNCH_TIMEOUT = Variable("MOCKGPU_LAUNCH_TIMEOUT", "seconds", "300",
                                  "a kernel running longer is stopped with CUDA_ERROR_LAUNCH_TIMEOUT (a spin-wait on "
                                  "another block never ends: blocks run in order)")
MOCKGPU_DEFERRED = Variable("MOCKGPU_DEFERRED", "0 or 1", "1",
                            "1: stream work runs in stream order when something waits for it, as on a GPU (missing "
                            "synchronization shows); 0: when enqueued")
MOCKGPU_EXACT_BOUNDS = Variable("MOCKGPU_EXACT_BOUNDS", "0 or 1", "0",
                                "1: a kernel access past a device buffer's requested size faults (like "
                                "compute-sanitizer memcheck); 0: only past the size rounded up to 256 bytes, the "
                                "allocation granule a GPU does not fault in")
SETTINGS = (MOCKGPU_DEVICES, MOCKGPU_ARCH, MOCKGPU_MEMORY, MOCKGPU_LAUNCH_TIMEOUT, MOCKGPU_DEFERRED,
            MOCKGPU_EXACT_BOUNDS)


class ConfigError(ValueError):
    """An environment variable of the emulator has an invalid value; the message names it and the accepted forms."""


@dataclass(frozen=True)
class ArchInfo:
    """Limits of one compute capability (CUDA C++ Programming Guide, "Compute Capabilities", table 21/22).

    ``sm_count``: multiprocessors of the reference part (e.g. 132 for H100 SXM); ``smem_optin``: bytes of shared
    memory one block may use after cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES); ``smem_per_sm``: bytes per
    multiprocessor; ``threads_per_sm``: resident threads per multiprocessor; ``name``: the reported device name.
    """

    major: int
    minor: int
    sm_count: int
    smem_optin: int
    smem_per_sm: int
    threads_per_sm: int
    name: str


ARCHES: dict[tuple[int, int], ArchInfo] = {
    (7, 0): ArchInfo(7, 0, 80, 98304, 98304, 2048, "Tesla V100-SXM2-16GB"),
    (7, 5): ArchInfo(7, 5, 40, 65536, 65536, 1024, "Tesla T4"),
    (8, 0): ArchInfo(8, 0, 108, 166912, 167936, 2048, "NVIDIA A100-SXM4-40GB"),
    (8, 6): ArchInfo(8, 6, 84, 101376, 102400, 1536, "NVIDIA GeForce RTX 3090"),
    (8, 9): ArchInfo(8, 9, 128, 101376, 102400, 1536, "NVIDIA GeForce RTX 4090"),
    (9, 0): ArchInfo(9, 0, 132, 232448, 233472, 2048, "NVIDIA H100 80GB HBM3"),
}

# Limits shared by every emulated compute capability (CUDA C++ Programming Guide, "Compute Capabilities", table 21)
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
SHARED_PER_BLOCK = 48 * 1024  # bytes of shared memory per block without opt-in
WARP_SIZE = 32

_SUFFIXES = {"": 1, "B": 1, "K": 1000, "KB": 1000, "M": 1000**2, "MB": 1000**2, "G": 1000**3, "GB": 1000**3,
             "T": 1000**4, "TB": 1000**4, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
MAX_DEVICES = 64
MAX_MEMORY = 1 << 50  # per device: the emulated address space gives each device far less than 2**64 bytes


@dataclass(frozen=True)
class MockConfig:
    """The emulated system: ``devices`` identical devices of architecture ``arch`` with ``memory`` bytes each;
    a kernel running longer than ``launch_timeout`` seconds is stopped (CUDA_ERROR_LAUNCH_TIMEOUT); ``deferred``:
    stream work runs when waited for (True) or when enqueued (False); ``exact_bounds``: kernel accesses fault past a
    device allocation's requested size (True) or past its 256-byte granule (False)."""

    devices: int
    arch: ArchInfo
    memory: int
    launch_timeout: float = 300.0
    deferred: bool = True
    exact_bounds: bool = False


def parse_arch(text: str) -> ArchInfo:
    """Parse ``sm_80`` / ``sm_90a`` / ``80`` / ``8.0`` into the :class:`ArchInfo` of that compute capability.

    Raises ConfigError for a malformed value or a capability without a table entry (the message lists the known ones).
    """
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(?:\.(\d))?a?", text.strip().lower())
    if m is None:
        raise ConfigError(f"MOCKGPU_ARCH={text!r} is not a compute capability; use e.g. sm_90, 90 or 9.0")
    major, minor = (int(m.group(1)), int(m.group(2))) if m.group(2) else divmod(int(m.group(1)), 10)
    if (major, minor) not in ARCHES:
        known = ", ".join(f"sm_{a}{b}" for a, b in ARCHES)
        raise ConfigError(f"MOCKGPU_ARCH={text!r} (compute capability {major}.{minor}) is not emulated; use one of {known}")
    return ARCHES[(major, minor)]


def parse_size(text: str) -> int:
    """Parse a byte count such as ``2GiB``, ``512MB``, ``1e9`` or ``4096`` (decimal K/M/G/T, binary KiB/MiB/GiB/TiB).

    Raises ConfigError for a malformed, zero or negative value.
    """
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if m is None or m.group(2).upper() not in _SUFFIXES:
        raise ConfigError(f"MOCKGPU_MEMORY={text!r} is not a byte count; use e.g. 16GiB, 512MB, 1e9 or 4096")
    scaled = float(m.group(1)) * _SUFFIXES[m.group(2).upper()]
    if not scaled < MAX_MEMORY:
        raise ConfigError(f"MOCKGPU_MEMORY={text!r} exceeds the emulated maximum of 1024TiB (2**50 bytes) per device")
    value = int(scaled)
    if value <= 0:
        raise ConfigError(f"MOCKGPU_MEMORY={text!r} must be a positive number of bytes")
    return value


def parse_devices(text: str) -> int:
    """Parse the device count (an integer in 1..64). Raises ConfigError otherwise."""
    if not re.fullmatch(r"\s*\d+\s*", text) or not 1 <= int(text) <= MAX_DEVICES:
        raise ConfigError(f"MOCKGPU_DEVICES={text!r} must be an integer from 1 to {MAX_DEVICES}")
    return int(text)


def parse_timeout(text: str) -> float:
    """Parse MOCKGPU_LAUNCH_TIMEOUT: seconds, a finite number > 0. Raises ConfigError otherwise."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ConfigError(f"MOCKGPU_LAUNCH_TIMEOUT={text!r} must be a positive number of seconds, e.g. 300")
    return value


def _flag(var: Variable, text: str, meanings: str) -> bool:
    """A 0/1 flag; empty (``VAR=``) is the default, as for an unset variable. ConfigError for anything else."""
    value = text.strip() or var.default
    if value not in ("0", "1"):
        raise ConfigError(f"{var.name}={text!r} must be {meanings}")
    return value == "1"


def parse_deferred(text: str) -> bool:
    """Parse MOCKGPU_DEFERRED: ``1`` (deferred, stream-ordered execution) or ``0`` (run at enqueue); empty: ``1``."""
    return _flag(MOCKGPU_DEFERRED, text, "1 (run stream work when waited for) or 0 (run it at once)")


def parse_exact_bounds(text: str) -> bool:
    """Parse MOCKGPU_EXACT_BOUNDS: ``1`` (fault past the requested size) or ``0`` (past the allocation granule);
    empty: ``0``."""
    return _flag(MOCKGPU_EXACT_BOUNDS, text, "1 (fault past a buffer's requested size) or 0 (past its 256-byte "
                 "allocation granule)")


def set_numba_cuda_driver(path: str) -> bool:
    """Set numba-cuda's ``NUMBA_CUDA_DRIVER`` to ``path`` (for :func:`mock_gpu.install`), unless it is set already or
    ``NUMBA_CUDA_USE_NVIDIA_BINDING`` turns numba-cuda's cuda-python driver path off; True if it was set."""
    binding = os.environ.get("NUMBA_CUDA_USE_NVIDIA_BINDING", "").strip().lower()
    if os.environ.get("NUMBA_CUDA_DRIVER") or binding in ("0", "false", "no", "off"):
        return False
    os.environ["NUMBA_CUDA_DRIVER"] = path
    return True


def clear_numba_cuda_driver() -> None:
    """Remove the ``NUMBA_CUDA_DRIVER`` that :func:`set_numba_cuda_driver` set."""
    os.environ.pop("NUMBA_CUDA_DRIVER", None)


def load_config(environ: Mapping[str, str] | None = None) -> MockConfig:
    """Read MOCKGPU_DEVICES, MOCKGPU_ARCH, MOCKGPU_MEMORY, MOCKGPU_LAUNCH_TIMEOUT, MOCKGPU_DEFERRED and
    MOCKGPU_EXACT_BOUNDS from ``environ`` (default ``os.environ``).

    Raises ConfigError naming the first invalid variable.
    """
    env = os.environ if environ is None else environ
    def text(var: Variable) -> str:
        return env.get(var.name, var.default)

    return MockConfig(devices=parse_devices(text(MOCKGPU_DEVICES)), arch=parse_arch(text(MOCKGPU_ARCH)),
                      memory=parse_size(text(MOCKGPU_MEMORY)), launch_timeout=parse_timeout(text(MOCKGPU_LAUNCH_TIMEOUT)),
                      deferred=parse_deferred(text(MOCKGPU_DEFERRED)),
                      exact_bounds=parse_exact_bounds(text(MOCKGPU_EXACT_BOUNDS)))
