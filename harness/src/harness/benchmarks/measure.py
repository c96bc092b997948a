"""Helpers shared by the benchmark modules: loading a kernel on a device, timing it, recording its figures.

``record_time``/``record_rate`` store in ``benchmark.extra_info`` (keys from ``harness.bench_schema``):

* ``device``: the device name, or HOST for a limit or peer measured without any device;
* UNIT_KEY and VALUE_KEY: the benchmark's natural figure (e.g. ``"GB/s"``), computed from the median time of a round
  (pytest-benchmark's per-iteration median, in seconds), plus one key per unit with the same kind of figure
  (``"GB/s"``, ``"elements/s"``), which the report prints as figures named by their key;
* HIGHER_IS_BETTER_KEY: ``True`` for throughput figures (noted in the report; verdicts are always on time);
* the sizes of the work (``size_bytes``, ``elements``, ``shape``) as the benchmark defines them.

The role (entry, limit, peer) and the threshold come from markers (``@pytest.mark.bench_role``,
``@pytest.mark.bench_threshold``), which the harness plugin copies into ``extra_info`` before the test body runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pytest

from harness.bench_schema import HIGHER_IS_BETTER_KEY, PER_CALL_KEY, TIME_UNITS, UNIT_KEY, VALUE_KEY
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import DType
from runtime_core.ir import Kernel
from runtime_core.program import Program

__all__ = ["MakeBuffer", "HOST", "ROUNDS", "SLOW_CALL_S", "check_equal", "load", "launcher", "probe", "run",
           "median_seconds", "random_bytes", "record_time", "record_rate"]

HOST = "host"  # the ``device`` of limits and peers that use no device at all
ROUNDS = 10  # rounds of a slow benchmark: 10 vs 10 lets the rank test reach p ~ 2e-4 (7 vs 7: 6e-4, exact)
_CHUNK = 1 << 16  # elements compared at once: small temporaries, reused instead of faulted in afresh
SLOW_CALL_S = 0.05  # a call this long gets explicit rounds; quicker ones let pytest-benchmark calibrate (~1 s each)



class MakeBuffer(Protocol):
    """``make(array)`` or ``make(n_elements, dtype)``: an allocated :class:`Buffer` (the ``device_buffers`` fixture)."""

    def __call__(self, data: np.ndarray | int, dtype: DType | None = None) -> Buffer: ...


def load(device: str, kernel: Kernel) -> Program:
    """Render, compile (``Compiler.compile``: no compile cache is read or written) and load ``kernel`` on ``device``.

    Skips the calling test (``pytest.skip``, with the reason) when the device has no renderer/compiler/runtime, as a
    storage-only device such as DISK; raises whatever the backend raises for an unsupported kernel (``ValueError``) or a
    failed compile (``CompileError``).
    """
    dev = Device[device]
    if dev.renderer is None or dev.compiler is None or dev.runtime is None:
        pytest.skip(f"{device} has no renderer/compiler/runtime, so it cannot run kernel {kernel.name!r}")
    return dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))


def launcher(program: Program, kernel: Kernel, buffers: Sequence[Buffer], *,
             wait: bool = True) -> Callable[[], float | None]:
    """A no-argument callable that launches ``program`` on ``buffers`` with ``kernel``'s launch shape and returns what
    the program returns (device seconds when ``wait``). Buffer handles are looked up once, outside the timed call."""
    handles = [b.opaque for b in buffers]
    gs, ls = kernel.global_size, kernel.local_size

    def launch() -> float | None:
        return program(*handles, global_size=gs, local_size=ls, wait=wait)
    return launch


def run(benchmark: Any, fn: Callable[[], Any], probe_s: float) -> None:
    """Time ``fn`` (no arguments): ``benchmark(fn)`` (calibrated, ``--benchmark-max-time``) when one call took less
    than ``SLOW_CALL_S``, else ``benchmark.pedantic`` with ``ROUNDS`` rounds of one iteration, so a slow call still
    yields ``ROUNDS`` per-round times.

    ``probe_s`` is the duration of an untimed call of ``fn`` made just before (the correctness check). That first call
    may have paid one-off costs (page faults on fresh buffers, cold caches), so a probe between ``SLOW_CALL_S`` and 1 s
    is repeated before deciding. A probe of 1 s or more counts as the warm-up round: repeating such a call only to warm
    caches would cost seconds per device.
    """
    if SLOW_CALL_S <= probe_s < 1.0:
        _, probe_s = probe(fn)
    if probe_s < SLOW_CALL_S:
        benchmark(fn)
    else:
        benchmark.pedantic(fn, rounds=ROUNDS, iterations=1, warmup_rounds=0 if probe_s >= 1.0 else 1)


def check_equal(got: Any, want: Any, what: str = "") -> None:
    """Raise AssertionError, with numpy.testing's report of where and how many elements differ (and ``what``), unless
    the arrays ``got`` and ``want`` have the same shape and elements (NaNs in the same places count as equal).

    ``numpy.array_equal`` on 64 Ki elements at a time decides first: ``numpy.testing.assert_array_equal`` alone takes
    ~10 ns per element (2-3 s for 256 MiB of bytes), and one ``array_equal`` of the whole arrays faults in a temporary
    as large as them (0.6 s for 256 MiB), which every worker of a paired run paid in the setup of every large
    benchmark."""
    a, b = np.asarray(got), np.asarray(want)
    if a.shape != b.shape or not _chunks_equal(a.reshape(-1), b.reshape(-1), _has_nan_kind(a) and _has_nan_kind(b)):
        np.testing.assert_array_equal(got, want, err_msg=what)


def _chunks_equal(a: np.ndarray, b: np.ndarray, equal_nan: bool) -> bool:
    return all(np.array_equal(a[i:i + _CHUNK], b[i:i + _CHUNK], equal_nan=equal_nan) for i in range(0, a.size, _CHUNK))


def random_bytes(rng: np.random.Generator, nbytes: int) -> np.ndarray:
    """``nbytes`` random bytes (a 1-D uint8 array) from ``rng``, drawn as 64-bit words and viewed as bytes: every
    worker of an A/B run pays this in the setup of every copy benchmark, and 256 MiB take 0.18 s this way against
    0.91 s as ``integers(0, 256, dtype=uint8)`` and 3.8 s as ``Generator.bytes`` (measured here)."""
    words = rng.integers(0, np.iinfo(np.uint64).max, -(-nbytes // 8), dtype=np.uint64, endpoint=True)
    return words.view(np.uint8)[:nbytes]


def _has_nan_kind(values: Any) -> bool:
    return np.asarray(values).dtype.kind in "fc"


def probe(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Call ``fn`` once; return its result and the wall time in seconds (``time.perf_counter``)."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def median_seconds(benchmark: Any) -> float:
    """The median time of one call in seconds, from the finished benchmark's stats.

    Raises ``RuntimeError`` when the benchmark has not run yet (call this after ``benchmark(...)``/``pedantic``).
    """
    if benchmark.stats is None:
        raise RuntimeError(f"benchmark {benchmark.name!r} has no stats yet: record after benchmark(...) has run")
    return float(benchmark.stats.stats.median)


def _base(benchmark: Any, device: str, info: Mapping[str, Any]) -> None:
    benchmark.extra_info.update({"device": device, **info})


def record_time(benchmark: Any, device: str, unit: str, **info: Any) -> None:
    """Record the median time per call in ``unit`` (``"us/call"`` or ``"ms/compile"``) plus ``info``.

    Does nothing when the benchmark is disabled (``--benchmark-disable`` runs the function once without timing).
    Raises ``ValueError`` for another unit.
    """
    if unit not in TIME_UNITS:
        raise ValueError(f"time unit must be one of {sorted(TIME_UNITS)}, got {unit!r}")
    if benchmark.disabled:
        return
    value = median_seconds(benchmark) * TIME_UNITS[unit]
    _base(benchmark, device, info)
    benchmark.extra_info.update({UNIT_KEY: unit, VALUE_KEY: value, unit: value})


def record_rate(benchmark: Any, device: str, per_call: Mapping[str, float], **info: Any) -> None:
    """Record throughput figures: for each ``unit -> amount done by one call`` of ``per_call`` (e.g.
    ``{"GB/s": nbytes / 1e9, "elements/s": n}``), ``amount / median seconds`` under the key ``unit``. The first entry is
    also UNIT_KEY/VALUE_KEY. Does nothing when the benchmark is disabled.

    Raises ``ValueError`` for an empty ``per_call`` or a non-positive amount.
    """
    if not per_call or any(not amount > 0 for amount in per_call.values()):
        raise ValueError(f"per_call must map units to positive amounts per call, got {dict(per_call)!r}")
    if benchmark.disabled:
        return
    median = median_seconds(benchmark)
    rates = {unit: amount / median for unit, amount in per_call.items()}
    first = next(iter(rates))
    _base(benchmark, device, info)
    benchmark.extra_info.update({UNIT_KEY: first, VALUE_KEY: rates[first], **rates, HIGHER_IS_BETTER_KEY: True,
                                 PER_CALL_KEY: dict(per_call)})
