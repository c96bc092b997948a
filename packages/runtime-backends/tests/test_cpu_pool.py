"""The CPU thread pool: CPU_THREADS, group ranges, chunks run exactly once, errors handed back, results identical
with one thread and with many."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from runtime_backends.cpu.device import CPUDevice
from runtime_backends.cpu.launch import PROBE_EVERY, probe_run, split_groups
from runtime_backends.cpu.pool import GroupPool, threads_from_env
from runtime_core import Buffer, dtypes
from runtime_core.config import CPU_THREADS
from runtime_core.ir import Kernel, KernelBuilder


def test_default_threads_are_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.delenv(CPU_THREADS.name, raising=False)
    assert threads_from_env() == len(os.sched_getaffinity(0))
    monkeypatch.setenv(CPU_THREADS.name, "3")
    assert threads_from_env() == 3


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_thread_count_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(CPU_THREADS.name, value)
    with pytest.raises(ValueError, match=rf"CPU_THREADS='{value}': expected an integer >= 1"):
        CPUDevice()


def test_probe_runs_thin_out():
    assert [n for n in range(1, 70) if probe_run(n)] == [2, 4, 8, 16, 32, 48, 64]


@pytest.mark.parametrize("gs, chunks", [((1, 1, 1), 8), ((7, 1, 1), 3), ((100, 1, 1), 8), ((5, 1, 1), 5),
                                        ((2**40 + 3, 1, 1), 16), ((3, 4, 5), 8), ((9, 2, 1), 8), ((4, 3, 1), 5)])
def test_group_rectangles_cover_every_group_once_in_group_order(gs, chunks):
    rects = split_groups(gs, chunks)
    assert 1 <= len(rects) <= chunks
    rows, width = gs[1] * gs[2], gs[0]
    # each rectangle's groups in launch order (x fastest), as (row, x) pairs; small grids only
    if rows * width <= 1000:
        order = [(r, x) for rlo, rhi, xlo, xhi in rects for r in range(rlo, rhi) for x in range(xlo, xhi)]
        assert order == [(r, x) for r in range(rows) for x in range(width)]
    else:  # one row: consecutive x ranges from 0 to the width
        assert all(r[:2] == (0, 1) for r in rects) and rects[0][2] == 0 and rects[-1][3] == width
        assert all(a[3] == b[2] for a, b in zip(rects, rects[1:]))
    sizes = [(rhi - rlo) * (xhi - xlo) for rlo, rhi, xlo, xhi in rects]
    assert max(sizes) - min(sizes) <= max(width, 1)


def test_pool_runs_every_chunk_once():
    pool = GroupPool(3)
    seen: list[int] = []
    lock = threading.Lock()

    def work(chunk: int) -> None:
        with lock:
            seen.append(chunk)
    for _ in range(3):
        seen.clear()
        pool.run(work, list(range(50)))
        assert sorted(seen) == list(range(50))


def test_pool_hands_back_the_first_error_after_all_chunks_ran():
    pool = GroupPool(2)
    ran: list[int] = []

    def work(chunk: int) -> None:
        ran.append(chunk)
        if chunk == 3:
            raise RuntimeError("chunk 3 failed")
    with pytest.raises(RuntimeError, match="chunk 3 failed"):
        pool.run(work, list(range(6)))
    pool.run(ran.append, [10])  # the pool still works
    assert 3 in ran and ran[-1] == 10


def ids_kernel() -> Kernel:
    """out[linear global id] = a value mixing the x, y, z global ids, over a 3-d launch of 3-d groups."""
    kb = KernelBuilder("mixed_ids", (37, 5, 3), (4, 2, 1))
    out = kb.buffer(dtypes.int32)
    x, y, z = (kb.global_id(d) for d in range(3))
    t = kb.add(kb.mul(kb.add(kb.mul(z, 10), y), 148), x)  # 148 x 10 x 3 threads in all
    kb.store(out, t, kb.add(kb.add(kb.mul(x, 1000003), kb.mul(y, 10007)), kb.mul(z, 101)))
    return kb.build()


def test_results_are_identical_with_one_and_many_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    monkeypatch.setattr("runtime_backends.cpu.launch.POOL_MIN_S", 0.0)  # every multi-group launch uses the pool
    kernel = ids_kernel()
    results = {}
    for threads in (1, 4):
        monkeypatch.setenv(CPU_THREADS.name, str(threads))
        dev = CPUDevice()
        prg = dev.runtime(kernel.name, dev.compiler.compile_cached(dev.renderer.render(kernel)))
        out = Buffer.from_numpy("CPU", np.full(148 * 10 * 3, -1, np.int32))
        launch = prg.bind(out.opaque, global_size=kernel.global_size, local_size=kernel.local_size)
        launch()  # the first run decides; the threshold 0 sends the next ones to the pool
        launch()
        assert (launch.chunks is not None) == (threads > 1)
        results[threads] = out.numpy()
    z, y, x = np.meshgrid(np.arange(3), np.arange(10), np.arange(148), indexing="ij")
    np.testing.assert_array_equal(results[1], (x * 1000003 + y * 10007 + z * 101).ravel())
    np.testing.assert_array_equal(results[4], results[1])


class _CountingPool(GroupPool):
    """A pool that adds ``delay`` seconds to every run (to its first ``slow_runs`` only, when given) and counts its
    runs."""

    def __init__(self, threads: int, delay: float, slow_runs: int | None = None) -> None:
        super().__init__(threads)
        self.delay, self.slow_runs, self.runs = delay, slow_runs, 0

    def run(self, fn, chunks) -> None:
        self.runs += 1
        if self.slow_runs is None or self.runs <= self.slow_runs:
            time.sleep(self.delay)
        super().run(fn, chunks)


def _slowed_launch(tmp_path, monkeypatch, pool: GroupPool, serial_delay: float):
    """A bound CPU launch of ``ids_kernel`` on ``pool`` whose serial runs take ``serial_delay`` seconds more."""
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    monkeypatch.setattr("runtime_backends.cpu.launch.POOL_MIN_S", 0.0)
    dev = CPUDevice()
    dev.pool = pool
    kernel = ids_kernel()
    prg = dev.runtime(kernel.name, dev.compiler.compile_cached(dev.renderer.render(kernel)))
    out = Buffer.from_numpy("CPU", np.zeros(148 * 10 * 3, np.int32))
    launch = prg.bind(out.opaque, global_size=kernel.global_size, local_size=kernel.local_size)
    kernel_fn = launch.fn

    def call(block):  # a serial run is the call on the whole range; the pool calls the function on chunks
        if block is launch.block:
            time.sleep(serial_delay)
        kernel_fn(block)
    launch.fn = call
    return launch


@pytest.mark.parametrize("pool_delay, serial_delay", [(0.02, 0.0), (0.0, 0.02)], ids=["slow-pool", "slow-serial"])
def test_a_launch_runs_the_way_that_was_faster(tmp_path, monkeypatch, pool_delay, serial_delay):
    """A pool slowed by other processes (here: 20 ms more per run) loses to serial runs, apart from a re-measuring run
    every PROBE_EVERY runs; when serial runs are the slow ones, the pool wins."""
    pool = _CountingPool(2, pool_delay)
    launch = _slowed_launch(tmp_path, monkeypatch, pool, serial_delay)
    runs = 4 * PROBE_EVERY
    for _ in range(runs):
        launch()
    probes = sum(map(probe_run, range(1, runs + 1))) + 2  # re-measuring runs, the first serial and first pooled run
    assert (pool.runs <= probes) if pool_delay else (pool.runs >= runs - probes)


def test_a_pool_slowed_only_at_first_wins_from_its_first_unhindered_probe(tmp_path, monkeypatch):
    """The pool's first two runs are slowed (other processes setting up beside it), serial runs are 20 ms slower
    throughout: the third pooled run (the probe at run 4) is unhindered and the pool is used from then on, apart from
    serial probes (runs 8 and 16). An average of the runs would have held it serial until the probe at run 16."""
    pool = _CountingPool(2, 0.1, slow_runs=2)
    launch = _slowed_launch(tmp_path, monkeypatch, pool, 0.02)
    runs = 2 * PROBE_EVERY
    for _ in range(runs):
        launch()
    serial = runs - pool.runs
    assert serial == 4  # the first run (it decides that the pool may pay), the run after the slow probe, 2 probes
