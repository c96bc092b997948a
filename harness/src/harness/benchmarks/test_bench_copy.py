"""Host <-> device copy bandwidth: ``Buffer.copyin`` from and ``Buffer.copyout`` to a preallocated host numpy array, at
4 KiB, 1 MiB, 64 MiB and 256 MiB (one group per size). Limit: ``numpy.copyto`` between two host arrays of the same
size. Unit: GB/s (1e9 bytes per second) of payload."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from harness.benchmarks.measure import HOST, MakeBuffer, check_equal, probe, random_bytes, record_rate, run
from runtime_core.dtype import dtypes

KiB, MiB = 1 << 10, 1 << 20


def _size_param(label: str, nbytes: int) -> Any:
    return pytest.param(nbytes, id=label, marks=pytest.mark.benchmark(group=f"copy-{label}"))


SIZES = [_size_param("4KiB", 4 * KiB), _size_param("1MiB", MiB), _size_param("64MiB", 64 * MiB),
         _size_param("256MiB", 256 * MiB)]


def _host_pair(rng: np.random.Generator, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Random source bytes and a destination whose pages are already touched (no page faults in timed calls)."""
    return random_bytes(rng, nbytes), np.ones(nbytes, dtype=np.uint8)


@pytest.mark.parametrize("direction", ["copyin", "copyout"])
@pytest.mark.parametrize("nbytes", SIZES)
def test_copy(benchmark: Any, device: str, device_buffers: MakeBuffer, rng: np.random.Generator, nbytes: int,
              direction: str) -> None:
    src, dst = _host_pair(rng, nbytes)
    buf = device_buffers(nbytes, dtypes.uint8)
    _, t_in = probe(lambda: buf.copyin(src))
    _, t_out = probe(lambda: buf.copyout(dst))
    check_equal(dst, src, f"{device}: copyin then copyout of {nbytes} bytes changed them")

    if direction == "copyin":
        run(benchmark, lambda: buf.copyin(src), t_in)
    else:
        run(benchmark, lambda: buf.copyout(dst), t_out)
    record_rate(benchmark, device, {"GB/s": nbytes / 1e9}, size_bytes=nbytes, direction=direction)


@pytest.mark.parametrize("nbytes", SIZES)
@pytest.mark.bench_role("limit", reference="numpy.copyto of the same bytes")
def test_copy_limit_numpy_copyto(benchmark: Any, rng: np.random.Generator, nbytes: int) -> None:
    src, dst = _host_pair(rng, nbytes)
    _, t = probe(lambda: np.copyto(dst, src))
    check_equal(dst, src)
    run(benchmark, lambda: np.copyto(dst, src), t)
    record_rate(benchmark, HOST, {"GB/s": nbytes / 1e9}, size_bytes=nbytes)
