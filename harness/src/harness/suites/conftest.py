"""Setup shared by the correctness suites: CPU kernels are bounds-checked here.

Unless the environment already sets ``CPU_MEMCHECK``, every suite test runs with ``CPU_MEMCHECK=1``, so the CPU
backend renders checked kernels (``runtime_backends.cpu.memcheck``): a kernel that indexes out of bounds fails its test
with an error naming the kernel, buffer, index and thread, instead of corrupting memory or killing the session.
Benchmarks (``harness.benchmarks``) run unchecked kernels. ``CPU_MEMCHECK=0`` turns the checks off here too.
"""

from __future__ import annotations

import pytest

from runtime_core.config import CPU_MEMCHECK


@pytest.fixture(autouse=True)
def _checked_cpu_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    if not CPU_MEMCHECK.is_set():
        monkeypatch.setenv(CPU_MEMCHECK.name, "1")
