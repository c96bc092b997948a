"""Host <-> device copy bandwidth: ``Buffer.copyin`` from and ``Buffer.copyout`` to preallocated host numpy arrays, at
4 KiB, 1 MiB, 64 MiB and 256 MiB (one group per size). Limit: ``numpy.copyto`` between two host arrays of the same
size. Unit: GB/s (1e9 bytes per second) of payload.

A 4 KiB copy measures a call's overhead: its bytes stay in L1. How long it takes depends on where the host bytes sit
in their page relative to the device buffer (measured here, one process: 0.7 to 2.5 us for a CPU copy-in as the
source's page offset steps through a page; loads falsely depend on stores whose address matches in its low 12 bits).
A process gets one such offset for its life from its heap, so two processes of the same code read up to 1.3x apart
and no number of rounds averages that out. One timed call therefore sweeps the page: ``PAGE // ALIGNMENT_STEP`` copies,
the host side at each cache-line offset in turn, so every process times the same mix of offsets.

From 1 MiB up a copy measures streaming bandwidth: each timed call uses the next of ``buffer_sets`` (source,
destination) pairs, so the bytes in flight exceed a core's cache (``STREAM_BYTES`` at least). With one pair, 1 MiB
each way is a core's whole L2 here (2 MiB), and how many lines conflict depends on the physical pages a process
happened to get."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from harness.benchmarks.measure import HOST, MakeBuffer, check_equal, probe, random_bytes, record_rate, run
from runtime_core.dtype import dtypes

KiB, MiB = 1 << 10, 1 << 20
STREAM_BYTES = 64 * MiB  # bytes a streaming copy's rotation covers: beyond any core's L2, and most L3 slices
CACHE_HOT_BYTES = 64 * KiB  # copies up to this size sweep the page offsets of one pair: they measure the call
PAGE = 4096  # the window of the false store-to-load dependence (an address's low 12 bits), whatever the MMU page size
ALIGNMENT_STEP = 64  # bytes between the page offsets a cache-hot copy's host views sweep: one cache line


def _size_param(label: str, nbytes: int) -> Any:
    return pytest.param(nbytes, id=label, marks=pytest.mark.benchmark(group=f"copy-{label}"))


SIZES = [_size_param("4KiB", 4 * KiB), _size_param("1MiB", MiB), _size_param("64MiB", 64 * MiB),
         _size_param("256MiB", 256 * MiB)]


def buffer_sets(nbytes: int) -> int:
    """How many (source, destination) pairs of ``nbytes`` bytes each a streaming copy benchmark rotates through:
    enough that source and destination bytes together reach ``STREAM_BYTES`` (1 for a cache-hot size)."""
    if nbytes <= CACHE_HOT_BYTES:
        return 1
    return -(-STREAM_BYTES // (2 * nbytes))  # ceiling division


def page_offset_views(base: np.ndarray, nbytes: int) -> list[np.ndarray]:
    """``PAGE // ALIGNMENT_STEP`` views of ``nbytes`` bytes into ``base`` (contiguous 1-D uint8, at least
    ``nbytes + 2 * PAGE`` bytes), the k-th starting ``k * ALIGNMENT_STEP`` bytes past a PAGE boundary: every offset a
    cache line can start at. Raises ValueError for another ``base`` or an ``nbytes`` that is not a positive int."""
    if not isinstance(nbytes, int) or nbytes < 1:
        raise ValueError(f"nbytes must be a positive int, got {nbytes!r}")
    if (not isinstance(base, np.ndarray) or base.dtype != np.uint8 or base.ndim != 1 or not base.flags.c_contiguous
            or base.size < nbytes + 2 * PAGE):
        raise ValueError(f"need a contiguous 1-D uint8 array of at least {nbytes + 2 * PAGE} bytes, got "
                         f"{getattr(base, 'dtype', type(base).__name__)} {getattr(base, 'shape', '')}")
    start = -base.ctypes.data % PAGE
    return [base[start + offset:start + offset + nbytes] for offset in range(0, PAGE, ALIGNMENT_STEP)]


def _sweep(copy: Callable[[np.ndarray], Any], views: Sequence[np.ndarray]) -> Callable[[], None]:
    """One call: ``copy`` of each of ``views`` in turn."""
    def call() -> None:
        for view in views:
            copy(view)
    return call


def _rotating(calls: list[Callable[[], Any]]) -> Callable[[], Any]:
    """One call of the next of ``calls`` each time (a single call is returned as it is: no rotation cost)."""
    if len(calls) == 1:
        return calls[0]
    ring = itertools.cycle(calls)
    return lambda: next(ring)()


def _host_pairs(rng: np.random.Generator, nbytes: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``buffer_sets(nbytes)`` pairs of random source bytes and a destination whose pages are already touched (no page
    faults in timed calls)."""
    return [(random_bytes(rng, nbytes), np.ones(nbytes, dtype=np.uint8)) for _ in range(buffer_sets(nbytes))]


@pytest.mark.parametrize("direction", ["copyin", "copyout"])
@pytest.mark.parametrize("nbytes", SIZES)
def test_copy(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator, nbytes: int,
              direction: str) -> None:
    if nbytes <= CACHE_HOT_BYTES:
        _copy_cache_hot(benchmark, device, device_buffers, rng, nbytes, direction)
        return
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


def _copy_cache_hot(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator, nbytes: int,
                    direction: str) -> None:
    """A cache-hot copy: one device buffer; a timed call copies in from (or out to) host views at every page offset
    (``page_offset_views``)."""
    buf = device_buffers(nbytes, dtypes.uint8)
    sources = page_offset_views(random_bytes(rng, nbytes + 2 * PAGE), nbytes)
    destinations = page_offset_views(np.ones(nbytes + 2 * PAGE, dtype=np.uint8), nbytes)
    for src, dst in zip(sources, destinations):
        buf.copyin(src).copyout(dst)
        check_equal(dst, src, f"{device}: copyin then copyout of {nbytes} bytes at page offset "
                              f"{src.ctypes.data % PAGE} changed them")
    sweep = _sweep(buf.copyin, sources) if direction == "copyin" else _sweep(buf.copyout, destinations)
    run(benchmark, sweep, probe(sweep)[1])
    record_rate(benchmark, device, {"GB/s": nbytes * len(sources) / 1e9}, size_bytes=nbytes, direction=direction,
                page_offsets=len(sources))


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.bench_role("limit", reference="numpy.copyto of the same bytes")
def test_copy_limit_numpy_copyto(benchmark: Any, rng: np.random.Generator, nbytes: int) -> None:
    if nbytes <= CACHE_HOT_BYTES:
        _copyto_cache_hot(benchmark, rng, nbytes)
        return
    pairs = _host_pairs(rng, nbytes)
    copy = _rotating([lambda s=s, d=d: np.copyto(d, s) for s, d in pairs])
    t = sum(probe(copy)[1] for _ in pairs)
    for src, dst in pairs:
        check_equal(dst, src)
    run(benchmark, copy, t / len(pairs))
    record_rate(benchmark, HOST, {"GB/s": nbytes / 1e9}, size_bytes=nbytes, buffer_sets=len(pairs))


def _copyto_cache_hot(benchmark: Any, rng: np.random.Generator, nbytes: int) -> None:
    """The limit of a cache-hot copy: the destination stays put, the source sweeps the page offsets as an entry's host
    side does (``page_offset_views``)."""
    sources = page_offset_views(random_bytes(rng, nbytes + 2 * PAGE), nbytes)
    dst = np.ones(nbytes, dtype=np.uint8)
    for src in sources:
        np.copyto(dst, src)
        check_equal(dst, src)
    copy = _sweep(lambda src: np.copyto(dst, src), sources)
    run(benchmark, copy, probe(copy)[1])
    record_rate(benchmark, HOST, {"GB/s": nbytes * len(sources) / 1e9}, size_bytes=nbytes, page_offsets=len(sources))
