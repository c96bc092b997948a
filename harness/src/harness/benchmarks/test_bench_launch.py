"""Launch latency: calling a loaded program of the empty kernel (no parameters, no ops) with ``wait=True`` and
``wait=False``, and replaying a launch prebound with ``program.bind(...)`` where the backend has it (CPU); the program
is compiled and loaded once, outside the timed part. Limit: a ctypes call of libc's ``labs`` (the floor of any
Python -> native call; one argument, as the CPU backend's call of a kernel, which takes one pointer to its argument
block). Unit: us/call."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

import pytest

from harness.benchmarks.kernels import empty_kernel
from harness.benchmarks.measure import HOST, launcher, load, probe, record_time, run

GROUP = "launch-empty"


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("wait", [True, False], ids=["wait", "nowait"])
def test_launch_empty(benchmark: Any, device: str, wait: bool) -> None:
    kernel = empty_kernel()
    launch = launcher(load(device, kernel), kernel, [], wait=wait)
    result, t = probe(launch)
    # the Program protocol: device seconds (a float >= 0) when waiting, None otherwise
    if not (isinstance(result, float) and result >= 0 if wait else result is None):
        pytest.fail(f"{device}: launch with wait={wait} returned {result!r}")
    run(benchmark, launch, t)
    record_time(benchmark, device, "us/call", wait=wait)


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("wait", [True, False], ids=["wait", "nowait"])
def test_launch_empty_prebound(benchmark: Any, device: str, wait: bool) -> None:
    kernel = empty_kernel()
    program = load(device, kernel)
    if not hasattr(program, "bind"):
        pytest.skip(f"{device} programs have no bind(): launches cannot be prebound")
    launch = program.bind(global_size=kernel.global_size, local_size=kernel.local_size)
    result, t = probe(lambda: launch(wait))
    if not (isinstance(result, float) and result >= 0 if wait else result is None):
        pytest.fail(f"{device}: prebound launch with wait={wait} returned {result!r}")
    run(benchmark, functools.partial(launch, True) if wait else launch, t)
    record_time(benchmark, device, "us/call", wait=wait, prebound=True)


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.bench_role("limit", reference="ctypes call of libc labs(long)")
def test_launch_limit_ctypes_call(benchmark: Any) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    labs = libc.labs
    labs.argtypes, labs.restype = [ctypes.c_long], ctypes.c_long
    if labs(-7) != 7:
        pytest.fail(f"libc labs(-7) returned {labs(-7)}")
    benchmark(labs, -7)
    record_time(benchmark, HOST, "us/call")
