"""Facts about the machine a benchmark ran on, for pytest-benchmark's ``machine_info`` and the report headers."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import numpy as np

from runtime_core.config import CC

__all__ = ["machine_facts"]


def _first_line(cmd: list[str]) -> str | None:
    """First output line of ``cmd``, or None when it is missing or fails (within 10 s)."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "Model", "Hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def machine_facts() -> dict[str, object]:
    """CPU model, logical cores, memory (bytes), OS, Python, numpy, C compiler versions, and the NVIDIA GPU, driver
    and CUDA version when ``nvidia-smi`` reports one. Values that cannot be found are ``None``."""
    gpu = _first_line(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    cuda = _first_line(["nvidia-smi", "--query-gpu=cuda_version", "--format=csv,noheader"]) if gpu else None
    return {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cc": CC.get(),
        "clang": _first_line(["clang", "--version"]),
        "gcc": _first_line(["gcc", "--version"]),
        "gpu": gpu,
        "cuda": cuda,
    }
