"""CPUDevice: the CPU backend's Compiled record (entry point ``runtime_backends.cpu.device:CPUDevice``)."""

from __future__ import annotations

import functools

from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.program import CPUProgram
from runtime_backends.cpu.renderer import CRenderer
from runtime_core.allocator import MallocAllocator
from runtime_core.device import Compiled

__all__ = ["CPUDevice"]

CACHE_KEY = "cpu-c"


class CPUDevice(Compiled):
    """The host CPU: ``MallocAllocator`` memory, ``CRenderer`` C, ``ClangCompiler`` ($CC, default clang) objects and
    ``CPUProgram`` in-process execution. There is one CPU device, named ``"CPU"``.

    Opening fails when no C compiler can be run: the constructor raises the compiler module's
    ``CompilerNotFoundError`` (a ``CompileError``) naming ``$CC`` and how to install one, so ``Device["CPU"]`` raises a
    ``DeviceError`` with that reason and ``python -m runtime_core`` prints it.

    Raises:
        ValueError: ``device`` is not ``"CPU"``.
        CompilerNotFoundError: the C compiler is missing.
    """

    DEFAULT_PRIORITY = 10

    def __init__(self, device: str = "CPU") -> None:
        if device != "CPU":
            raise ValueError(f"the CPU backend has a single device named 'CPU', got {device!r}")
        super().__init__(device, MallocAllocator(self), CRenderer(), ClangCompiler(CACHE_KEY),
                         functools.partial(CPUProgram, self))
