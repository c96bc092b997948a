"""Kernel throughput of three IR kernels (``harness.benchmarks.kernels``) against numpy on the host:

* elementwise add of 16M (16 * 2**20) float32: GB/s (12 bytes moved per element) and elements/s; limit
  ``numpy.add(a, b, out=c)``;
* row sums of a 4096 x 4096 float32 matrix, one thread per row with a serial RANGE + ACC loop: elements/s; limit
  ``numpy.sum(x, axis=1)``;
* naive matmul of 500 x 500 float32: GFLOP/s (2 n**3 flops); limit ``numpy.matmul`` (BLAS, one thread);
* on CPU, the matmul written for CPUs (``harness.kernels.matmul.blocked_matmul_kernel``: 8 x 32 register blocks of FMAs)
  at 1024 x 1024 and the add, each on one thread and on all cores (a CPU device opened with ``CPU_THREADS``), beside
  one-thread and all-core BLAS (threadpoolctl raises BLAS's threads for that limit only).

The PYTHON backend interprets the IR with numpy, materializing one array of every thread's value per op: at 16M
elements an add took about 4.8 s a round on the 2-core reference machine and a 1024 matmul would take over 15 s
(it scales as n**3 from 0.26 s at 256), so it runs the add at 1M elements, the row sums at 2048 x 2048 and the matmul
at 256 x 256 (``REDUCED``): an A/B run times every entry for at least 24 pairs of rounds, so a 0.5 s call (the add at
4M, the row sums at 4096 x 4096) cost 25 s of it. The size used is in each entry's ``elements``/``shape``. The
report's "x limit" divides median times within a group, so a group holds one problem size: its name ends with the
size, the device entries join the group of their size (set in the test, since the size depends on the device) and a
numpy limit is measured at every size in use.
Every kernel's output is checked once against numpy before timing, so a broken kernel cannot report a fast number.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from harness.assertions import assert_close
from harness.benchmarks.kernels import add_kernel, matmul_kernel, row_sum_kernel
from harness.benchmarks.measure import HOST, MakeBuffer, launcher, load, probe, record_rate, run
from harness.kernels.matmul import blocked_matmul_kernel
from runtime_backends.cpu.device import CPUDevice
from runtime_core.config import CPU_THREADS
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel
from runtime_core.program import Program

ADD_N = 16 * 2**20
ROWS = 4096  # and as many columns
# not a power of two: at 1024 the naive kernel walks B with a 4 KiB column stride, so every step of a column lands in
# the same cache sets and its speed follows which physical pages the buffers got: the same code in two processes ran
# 24% apart (0.39 vs 0.51 GFLOP/s), and a call took 4 s. At 500 the three matrices (3 MB) stay in the L3 cache.
MATMUL_N = 500
BLOCKED_N = 1024  # the CPU-written matmul: 1024 divides into its 8 x 32 blocks, and its access pattern is contiguous
REDUCED = {"PYTHON": {"add_n": 2**20, "rows": 2048, "matmul_n": 256}}  # see the module docstring; rows = columns
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
# the device entries run on every core (the CPU backend's default, CPU_THREADS set by the conftest); the paired runner
# then gives the workers every CPU for them, not one
ALL_CORES = pytest.mark.bench_threads(CORES)
CPU_ALL_CORES = pytest.mark.bench_threads(CORES, backends=["CPU"])  # the PYTHON backend runs one thread
THREADS = [pytest.param(1, id="1thread"), pytest.param(CORES, id=f"{CORES}threads", marks=ALL_CORES)]
BLOCK_ROWS, BLOCK_COLS, BLOCK_UNROLL = 8, 32, 4  # 16 AVX-512 (or 32 AVX2) accumulators; the k loop unrolled 4 times


# float32 recursive sums of n terms err by at most gamma_(n-1) * sum|x_i| and dot products of length n by
# gamma_n * |a|.|b|, gamma_k = k u / (1 - k u), u = 2**-24 (Higham, "Accuracy and Stability of Numerical Algorithms",
# 2nd ed., sections 3.1 and 4.2); the terms here are >= 0, so that is relative to the float64 reference (factor 1.01
# covers the denominator)
def _sum_rtol(n: int) -> float:
    return n * 2.0**-24 * 1.01


def _dot_rtol(n: int) -> float:
    return (n + 1) * 2.0**-24 * 1.01


def _cpu_program(monkeypatch: pytest.MonkeyPatch, threads: int, kernel: Kernel) -> Program:
    """``kernel`` on a CPU device of its own whose launches use ``threads`` threads (``CPU_THREADS``)."""
    monkeypatch.setenv(CPU_THREADS.name, str(threads))
    dev = CPUDevice()
    return dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))


def _size(device: str, key: str, full: int) -> int:
    return REDUCED.get(device, {}).get(key, full)


def _add_group(n: int) -> str:
    return f"kernel-add-float32-{n >> 20}M" if n % 2**20 == 0 else f"kernel-add-float32-{n}"


def _rowsum_group(rows: int) -> str:
    return f"kernel-rowsum-float32-{rows}x{rows}"


def _matmul_group(n: int) -> str:
    return f"kernel-matmul-float32-{n}"


def _sizes(key: str, full: int, group: Callable[[int], str]) -> list[Any]:
    """One pytest param per problem size in use (the full one and every reduced one), in its benchmark group."""
    sizes = sorted({full} | {r[key] for r in REDUCED.values() if key in r})
    return [pytest.param(n, id=str(n), marks=pytest.mark.benchmark(group=group(n))) for n in sizes]


@CPU_ALL_CORES
def test_add(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator) -> None:
    n = _size(device, "add_n", ADD_N)
    benchmark.group = _add_group(n)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    kernel = add_kernel(n)
    bufs = [device_buffers(a), device_buffers(b), device_buffers(n, dtypes.float32)]
    launch = launcher(load(device, kernel), kernel, bufs)
    _, t = probe(launch)
    assert_close(bufs[2].numpy(), a + b, dtypes.float32)
    run(benchmark, launch, t)
    record_rate(benchmark, device, {"GB/s": 12 * n / 1e9, "elements/s": n}, elements=n, size_bytes=12 * n)


@pytest.mark.backends("CPU")
@pytest.mark.benchmark(group=_add_group(ADD_N))
def test_add_cpu_one_thread(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = rng.random(ADD_N, dtype=np.float32), rng.random(ADD_N, dtype=np.float32)
    kernel = add_kernel(ADD_N)
    bufs = [device_buffers(a), device_buffers(b), device_buffers(ADD_N, dtypes.float32)]
    launch = launcher(_cpu_program(monkeypatch, 1, kernel), kernel, bufs)
    _, t = probe(launch)
    assert_close(bufs[2].numpy(), a + b, dtypes.float32)
    run(benchmark, launch, t)
    record_rate(benchmark, device, {"GB/s": 12 * ADD_N / 1e9, "elements/s": ADD_N}, elements=ADD_N,
                size_bytes=12 * ADD_N, threads=1)


@pytest.mark.parametrize("n", _sizes("add_n", ADD_N, _add_group))
@pytest.mark.bench_role("limit", reference="numpy.add(a, b, out=c)")
def test_add_limit_numpy(benchmark: Any, rng: np.random.Generator, n: int) -> None:
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.ones_like(a)
    _, t = probe(lambda: np.add(a, b, out=c))
    run(benchmark, lambda: np.add(a, b, out=c), t)
    record_rate(benchmark, HOST, {"GB/s": 12 * n / 1e9, "elements/s": n}, elements=n, size_bytes=12 * n)


@CPU_ALL_CORES
def test_row_sum(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator) -> None:
    n = _size(device, "rows", ROWS)
    benchmark.group = _rowsum_group(n)
    x = rng.random(n * n, dtype=np.float32)
    kernel = row_sum_kernel(n, n)
    bufs = [device_buffers(x), device_buffers(n, dtypes.float32)]
    launch = launcher(load(device, kernel), kernel, bufs)
    _, t = probe(launch)
    assert_close(bufs[1].numpy(), x.reshape(n, n).sum(axis=1, dtype=np.float64), dtypes.float32, rtol=_sum_rtol(n))
    run(benchmark, launch, t)
    record_rate(benchmark, device, {"elements/s": n * n, "GB/s": 4 * n * n / 1e9}, elements=n * n, shape=[n, n])


@pytest.mark.parametrize("n", _sizes("rows", ROWS, _rowsum_group))
@pytest.mark.bench_role("limit", reference="numpy.sum(x, axis=1)")
def test_row_sum_limit_numpy(benchmark: Any, rng: np.random.Generator, n: int) -> None:
    x = rng.random((n, n), dtype=np.float32)
    _, t = probe(lambda: np.sum(x, axis=1))
    run(benchmark, lambda: np.sum(x, axis=1), t)
    record_rate(benchmark, HOST, {"elements/s": n * n, "GB/s": 4 * n * n / 1e9}, elements=n * n, shape=[n, n])


@CPU_ALL_CORES
def test_matmul(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator) -> None:
    n = _size(device, "matmul_n", MATMUL_N)
    benchmark.group = _matmul_group(n)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    kernel = matmul_kernel(n)
    bufs = [device_buffers(a), device_buffers(b), device_buffers(n * n, dtypes.float32)]
    launch = launcher(load(device, kernel), kernel, bufs)
    _, t = probe(launch)
    assert_close(bufs[2].numpy(), (a.astype(np.float64) @ b).ravel(), dtypes.float32, rtol=_dot_rtol(n))
    run(benchmark, launch, t)
    record_rate(benchmark, device, {"GFLOP/s": 2 * n**3 / 1e9}, shape=[n, n, n])


@pytest.mark.backends("CPU")
@pytest.mark.benchmark(group=_matmul_group(BLOCKED_N))
@pytest.mark.parametrize("threads", THREADS)
def test_matmul_blocked_cpu(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator,
                            monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    n = BLOCKED_N
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    kernel = blocked_matmul_kernel(n, n, n, BLOCK_ROWS, BLOCK_COLS, BLOCK_UNROLL)
    bufs = [device_buffers(a), device_buffers(b), device_buffers(n * n, dtypes.float32)]
    launch = launcher(_cpu_program(monkeypatch, threads, kernel), kernel, bufs)
    _, t = probe(launch)
    assert_close(bufs[2].numpy(), (a.astype(np.float64) @ b).ravel(), dtypes.float32, rtol=_dot_rtol(n))
    run(benchmark, launch, t)
    record_rate(benchmark, device, {"GFLOP/s": 2 * n**3 / 1e9}, shape=[n, n, n], threads=threads,
                block=f"{BLOCK_ROWS}x{BLOCK_COLS}, k unrolled {BLOCK_UNROLL}x")


@pytest.mark.parametrize("n", [*_sizes("matmul_n", MATMUL_N, _matmul_group),
                               pytest.param(BLOCKED_N, id=str(BLOCKED_N),
                                            marks=pytest.mark.benchmark(group=_matmul_group(BLOCKED_N)))])
@pytest.mark.bench_role("limit", reference="numpy.matmul (BLAS)")
def test_matmul_limit_numpy(benchmark: Any, rng: np.random.Generator, n: int) -> None:
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.ones_like(a)
    _, t = probe(lambda: np.matmul(a, b, out=c))
    run(benchmark, lambda: np.matmul(a, b, out=c), t)
    record_rate(benchmark, HOST, {"GFLOP/s": 2 * n**3 / 1e9}, shape=[n, n, n], threads=1)


@pytest.mark.benchmark(group=_matmul_group(BLOCKED_N))
@pytest.mark.bench_role("limit", reference=f"numpy.matmul (BLAS, {CORES} threads)")
@ALL_CORES
def test_matmul_limit_numpy_all_threads(benchmark: Any, rng: np.random.Generator) -> None:
    n = BLOCKED_N
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.ones_like(a)
    with threadpool_limits(limits=CORES, user_api="blas"):
        _, t = probe(lambda: np.matmul(a, b, out=c))
        run(benchmark, lambda: np.matmul(a, b, out=c), t)
    record_rate(benchmark, HOST, {"GFLOP/s": 2 * n**3 / 1e9}, shape=[n, n, n], threads=CORES)
