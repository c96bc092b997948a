"""Host <-> device copy bandwidth: ``Buffer.copyin`` from and ``Buffer.copyout`` to a preallocated host numpy array, at
4 KiB, 1 MiB, 64 MiB and 256 MiB (one group per size). Limit: ``numpy.copyto`` between two host arrays of the same
size. Unit: GB/s (1e9 bytes per second) of payload.

A 4 KiB copy measures a call's overhead: its bytes stay in L1. From 1 MiB up a copy measures streaming bandwidth:
each timed call uses the next of ``buffer_sets`` (source, destination) pairs, so the bytes in flight exceed a core's
cache (``STREAM_BYTES`` at least). With one pair, 1 MiB each way is a core's whole L2 here (2 MiB), and how many lines
conflict depends on the physical pages a process happened to get: two processes of the same code stayed 0.81-1.30x
apart for their whole lives, which no number of rounds averages out."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from harness.benchmarks.measure import HOST, MakeBuffer, check_equal, probe, random_bytes, record_rate, run
from runtime_core.dtype import dtypes

KiB, MiB = 1 << 10, 1 << 20
STREAM_BYTES = 64 * MiB  # bytes a streaming copy's rotation covers: beyond any core's L2, and most L3 slices
CACHE_HOT_BYTES = 64 * KiB  # copies up to this size reuse one pair: they measure the call, not the memory


def _size_param(label: str, nbytes: int) -> Any:
    return pytest.param(nbytes, id=label, marks=pytest.mark.benchmark(group=f"copy-{label}"))


SIZES = [_size_param("4KiB", 4 * KiB), _size_param("1MiB", MiB), _size_param("64MiB", 64 * MiB),
         _size_param("256MiB", 256 * MiB)]


def buffer_sets(nbytes: int) -> int:
    """How many (source, destination) pairs of ``nbytes`` bytes each a copy benchmark rotates through: 1 up to
    ``CACHE_HOT_BYTES``, else enough that source and destination bytes together reach ``STREAM_BYTES``."""
    if nbytes <= CACHE_HOT_BYTES:
        return 1
    return -(-STREAM_BYTES // (2 * nbytes))  # ceiling division


def _host_pairs(rng: np.random.Generator, nbytes: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``buffer_sets(nbytes)`` pairs of random source bytes and a destination whose pages are already touched (no page
    faults in timed calls)."""
    return [(random_bytes(rng, nbytes), np.ones(nbytes, dtype=np.uint8)) for _ in range(buffer_sets(nbytes))]


def _rotating(calls: list[Callable[[], Any]]) -> Callable[[], Any]:
    """One call of the next of ``calls`` each time (a single call is returned as it is: no rotation cost)."""
    if len(calls) == 1:
        return calls[0]
    ring = itertools.cycle(calls)
    return lambda: next(ring)()


@pytest.mark.parametrize("direction", ["copyin", "copyout"])
@pytest.mark.parametrize("nbytes", SIZES)
def test_copy(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator, nbytes: int,
              direction: str) -> None:
    pairs = _host_pairs(rng, nbytes)
    bufs = [device_buffers(nbytes, dtypes.uint8) for _ in pairs]
    copyins = _rotating([lambda b=b, s=s: b.copyin(s) for b, (s, _) in zip(bufs, pairs)])
    copyouts = _rotating([lambda b=b, d=d: b.copyout(d) for b, (_, d) in zip(bufs, pairs)])
    t_in = sum(probe(copyins)[1] for _ in pairs)
    t_out = sum(probe(copyouts)[1] for _ in pairs)
    for i, (src, dst) in enumerate(pairs):
        check_equal(dst, src, f"{device}: copyin then copyout of {nbytes} bytes (buffer {i}) changed them")

    if direction == "copyin":
        run(benchmark, copyins, t_in / len(pairs))
    else:
        run(benchmark, copyouts, t_out / len(pairs))
    record_rate(benchmark, device, {"GB/s": nbytes / 1e9}, size_bytes=nbytes, direction=direction,
                buffer_sets=len(pairs))


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.bench_role("limit", reference="numpy.copyto of the same bytes")
def test_copy_limit_numpy_copyto(benchmark: Any, rng: np.random.Generator, nbytes: int) -> None:
    pairs = _host_pairs(rng, nbytes)
    copy = _rotating([lambda s=s, d=d: np.copyto(d, s) for s, d in pairs])
    t = sum(probe(copy)[1] for _ in pairs)
    for src, dst in pairs:
        check_equal(dst, src)
    run(benchmark, copy, t / len(pairs))
    record_rate(benchmark, HOST, {"GB/s": nbytes / 1e9}, size_bytes=nbytes, buffer_sets=len(pairs))
