"""CPUDevice: the CPU backend's Compiled record (entry point ``runtime_backends.cpu.device:CPUDevice``)."""

from __future__ import annotations

import functools

from runtime_backends.cpu.allocator import CPUAllocator
from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.pool import GroupPool, threads_from_env
from runtime_backends.cpu.program import CPUProgram
from runtime_backends.cpu.renderer import CRenderer
from runtime_core.device import Compiled

__all__ = ["CPUDevice"]

CACHE_KEY = "cpu-c"


class CPUDevice(Compiled):
    """The host CPU: ``CPUAllocator`` memory, ``CRenderer`` C (checked with ``CPU_MEMCHECK=1``), ``ClangCompiler``
    ($CC, default clang) objects and ``CPUProgram`` in-process execution, large launches spread over ``pool``
    (``$CPU_THREADS`` threads, default: the cores this process may use). There is one CPU device, named ``"CPU"``.

    Opening fails when no C compiler can be run: the constructor raises the compiler module's
    ``CompilerNotFoundError`` (a ``CompileError``) naming ``$CC`` and how to install one, so ``Device["CPU"]`` raises a
    ``DeviceError`` with that reason and ``python -m runtime_core`` prints it.

    Raises:
        ValueError: ``device`` is not ``"CPU"``, or ``$CPU_THREADS`` is not an int >= 1.
        CompilerNotFoundError: the C compiler is missing.
    """

    DEFAULT_PRIORITY = 10

    def __init__(self, device: str = "CPU") -> None:
        if device != "CPU":
            raise ValueError(f"the CPU backend has a single device named 'CPU', got {device!r}")
        self.pool = GroupPool(threads_from_env())
        super().__init__(device, CPUAllocator(self), CRenderer(), ClangCompiler(CACHE_KEY),
                         functools.partial(CPUProgram, self))
