"""The harness markers: registration, and the skips and settings they imply for one backend."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import pytest

from runtime_core.device import Device
from runtime_core.dtype import DType

__all__ = ["MARKERS", "register", "restriction_reason", "capability_reason", "bench_threshold"]

MARKERS = {
    "backends": "backends(*names): run this test only on these backends, e.g. backends('CPU', 'PYTHON'); "
                "the others are skipped with a reason",
    "skip_backends": "skip_backends(*names, reason=None): skip this test on these backends",
    "needs_local": "needs_local: skip on backends whose renderer lacks real local thread ids and shared memory "
                   "(renderer.has_local and renderer.has_shared)",
    "needs_dtype": "needs_dtype(*dtypes): skip on backends whose renderer does not support every given DType",
    "bench_threshold": "bench_threshold(fraction): regression threshold of this benchmark (0.25 = 25% slower), "
                       "stored in benchmark.extra_info['threshold'] for the report",
    "slow": "slow: takes long; deselect with -m 'not slow'",
    "bigmem": "bigmem: needs more than 2 GiB of memory; runs only with --run-bigmem or HARNESS_RUN_BIGMEM=1",
}


class _Marked(Protocol):
    """A pytest item or ``metafunc.definition``: something whose markers can be walked from closest to farthest."""

    def iter_markers(self, name: str | None = None) -> Iterator[pytest.Mark]: ...


def register(config: pytest.Config) -> None:
    """Declare every harness marker (so ``--strict-markers`` accepts them and ``pytest --markers`` lists them)."""
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)


def _names(marks: Iterable[pytest.Mark], marker: str) -> set[str]:
    out = set()
    for m in marks:
        for n in m.args:
            if not isinstance(n, str):
                raise pytest.UsageError(f"@pytest.mark.{marker} takes backend names as strings, got {n!r}")
            out.add(Device.canonicalize(n))
    return out


def restriction_reason(node: _Marked, backend: str) -> str | None:
    """Why the ``backends``/``skip_backends`` markers of ``node`` exclude ``backend``, or ``None`` if they allow it.

    ``backends`` marks on the function, class and module all apply (the allowed set is their intersection).
    ``node`` is anything with ``iter_markers`` (an item, or ``metafunc.definition``).
    """
    for m in node.iter_markers("backends"):  # every level's restriction applies
        if backend not in (allowed := _names([m], "backends")):
            return f"test restricted to backends {', '.join(sorted(allowed))} by @pytest.mark.backends"
    for m in node.iter_markers("skip_backends"):
        if backend in _names([m], "skip_backends"):
            why = m.kwargs.get("reason") or "no reason given"
            return f"{backend} skipped by @pytest.mark.skip_backends: {why}"
    return None


def capability_reason(node: pytest.Item, backend: str) -> str | None:
    """Why ``needs_local``/``needs_dtype`` rule out ``backend`` (opened to read its renderer), or ``None``."""
    wanted_local = node.get_closest_marker("needs_local") is not None
    wanted_dtypes = [d for m in node.iter_markers("needs_dtype") for d in m.args]
    if not wanted_local and not wanted_dtypes:
        return None
    for d in wanted_dtypes:
        if not isinstance(d, DType):
            raise pytest.UsageError(f"@pytest.mark.needs_dtype takes runtime DTypes (dtypes.float16), got {d!r}")
    renderer = Device[backend].renderer
    if renderer is None:
        return f"{backend} has no renderer, so it runs no kernels"
    if wanted_local and not (renderer.has_local and renderer.has_shared):
        return (f"{backend} lacks local memory/thread ids (has_local={renderer.has_local}, "
                f"has_shared={renderer.has_shared}); test marked needs_local")
    if missing := [d.name for d in wanted_dtypes if d not in renderer.dtypes]:
        return f"{backend} does not support dtype(s) {', '.join(missing)}; test marked needs_dtype"
    return None


def bench_threshold(node: pytest.Item) -> float | None:
    """The ``bench_threshold`` marker's fraction, or ``None``. ``pytest.UsageError`` unless it is one number > 0."""
    mark = node.get_closest_marker("bench_threshold")
    if mark is None:
        return None
    if len(mark.args) != 1 or isinstance(mark.args[0], bool) or not isinstance(mark.args[0], (int, float)) \
            or not mark.args[0] > 0:
        raise pytest.UsageError(f"{node.nodeid}: @pytest.mark.bench_threshold takes one fraction > 0 "
                                f"(0.25 = 25% slower), got {mark.args!r}")
    return float(mark.args[0])
