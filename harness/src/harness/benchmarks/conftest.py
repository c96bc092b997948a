"""Fixtures of the benchmark suites."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.bench_schema import SINGLE_THREAD_ENV, THREADS_KEY
from harness.benchmarks.measure import MakeBuffer
from harness.config import HARNESS_BENCH_SHARED_DIR, foreign_values
from runtime_backends.cpu.pool import threads_from_env
from runtime_core.allocator import LRUAllocator
from runtime_core.buffer import Buffer
from runtime_core.config import CPU_MEMCHECK, CPU_THREADS
from runtime_core.device import Device
from runtime_core.dtype import DType


def pytest_configure(config: pytest.Config) -> None:
    """CPU devices run launches on every core this process may use now (``CPU_THREADS``, unless set), whatever CPUs
    the paired benchmark runner later pins a worker to: a device opened while pinned would otherwise get one thread."""
    if not CPU_THREADS.is_set():
        os.environ[CPU_THREADS.name] = str(threads_from_env())


@pytest.fixture(scope="session")
def bench_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for input files whose place on disk affects their timing (``harness.bench_schema.SHARED_DIR_ENV``):
    the one both workers of an A/B run share, so both versions read the same file, else a private temporary one.
    Whatever a benchmark writes there it writes once (when absent, by a rename) and leaves; the runner removes it."""
    shared = HARNESS_BENCH_SHARED_DIR.get()
    return Path(shared) if shared else tmp_path_factory.mktemp("shared")


@pytest.fixture(autouse=True)
def _unchecked_cpu_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Benchmarks time the kernels users run: unchecked, whatever ``CPU_MEMCHECK`` says (the suites check them)."""
    monkeypatch.setenv(CPU_MEMCHECK.name, "0")


@pytest.fixture(autouse=True)
def _empty_allocator_caches() -> Iterator[None]:
    """After every benchmark, the LRU cache of every opened device is emptied: a freed 256 MiB buffer would otherwise
    stay cached (up to ``RUNTIME_LRU_MAX_BYTES``, 1 GiB, per device), and an A/B run keeps dozens of workers alive:
    36 workers holding about 1 GiB each ran a 24 GiB machine out of memory."""
    yield
    for name in Device.opened():
        allocator = Device[name].allocator
        if isinstance(allocator, LRUAllocator):
            allocator.free_cache()


@pytest.fixture
def device_buffers(device: str) -> Iterator[MakeBuffer]:
    """A factory of allocated buffers on ``device``: ``make(array)`` holds a copy of a numpy array, ``make(n, dtype)``
    is ``n`` uninitialized elements. At teardown every buffer is deallocated and the device's LRU cache emptied, so the
    hundreds of MiB a benchmark allocates are given back before the next one."""
    made: list[Buffer] = []

    def make(data: np.ndarray | int, dtype: DType | None = None) -> Buffer:
        if isinstance(data, np.ndarray):
            buf = Buffer.from_numpy(device, data)
        elif dtype is None:
            raise TypeError(f"make({data!r}) needs a dtype for an uninitialized buffer of {data} elements")
        else:
            buf = Buffer(device, data, dtype).allocate()
        made.append(buf)
        return buf

    yield make
    for buf in made:
        buf.deallocate()
    allocator = Device[device].allocator
    if isinstance(allocator, LRUAllocator):
        allocator.free_cache()


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook; without the plugin it has no spec
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Record the BLAS/OpenMP thread variables of this process (``harness.bench_schema``) in the run's
    ``machine_info[THREADS_KEY]``: the reports show whether the limits ran single-threaded."""
    machine_info[THREADS_KEY] = foreign_values(SINGLE_THREAD_ENV)
