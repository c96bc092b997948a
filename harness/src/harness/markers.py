"""The harness markers: registration, and the skips and settings they imply for one backend."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn, Protocol

import pytest

from harness.bench_schema import LIMIT, LIMIT_KEY, PEER, PEER_KEY, REFERENCE_KEY, ROLE_KEY, ROLES, check_role, threshold_fraction
from runtime_core.device import Device
from runtime_core.dtype import DType

__all__ = ["MARKERS", "PROJECT_BACKENDS", "register", "restriction_reason", "capability_reason", "bench_threshold",
           "bench_role", "bench_group", "bench_threads", "threads_of", "backend_typo"]

PROJECT_BACKENDS = ("CPU", "PYTHON", "CUDA", "DISK", "CLOUD")
"""Backends this project ships: a marker may name one that is not installed here (the test then skips), while a name
that is neither registered nor one of these is a typo and fails the test."""

MARKERS = {
    "backends": "backends(*names): run this test only on these backends, e.g. backends('CPU', 'PYTHON'); "
                "the others are skipped with a reason",
    "skip_backends": "skip_backends(*names, reason=None): skip this test on these backends",
    "needs_local": "needs_local: skip on backends whose renderer lacks real local thread ids and shared memory "
                   "(renderer.has_local and renderer.has_shared)",
    "needs_dtype": "needs_dtype(*dtypes): skip on backends whose renderer does not support every given DType",
    "bench_threshold": "bench_threshold(fraction): regression threshold of this benchmark (0.25 or '25%' = 25% slower), "
                       "stored in benchmark.extra_info['threshold'] for the report",
    "bench_role": "bench_role(role, reference=None, peer=None): what a benchmark measures: 'entry' (our code, the "
                  "default), 'limit' (what the machine allows for the same work; reference= says what it runs) or "
                  "'peer' (another project, peer= names it); only entries can fail a run",
    "bench_threads": "bench_threads(n, backends=None): the benchmark runs n threads at once (an int >= 1; default 1) "
                     "on the given backends (default: on all): the paired benchmark runner gives its workers that "
                     "many CPUs, not one",
    "slow": "slow: takes long; deselect with -m 'not slow'",
    "bigmem": "bigmem: needs more than 2 GiB of memory; runs only with --run-bigmem or HARNESS_RUN_BIGMEM=1",
}


class _Marked(Protocol):
    """A pytest item or ``metafunc.definition``: something whose markers can be walked from closest to farthest."""

    @property
    def nodeid(self) -> str: ...

    def iter_markers(self, name: str | None = None) -> Iterator[pytest.Mark]: ...


def register(config: pytest.Config) -> None:
    """Declare every harness marker (so ``--strict-markers`` accepts them and ``pytest --markers`` lists them)."""
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)


def _misuse(node: _Marked, text: str) -> NoReturn:
    """Fail the test (or its collection) with ``text`` naming the test: a marker used wrongly is the test's error."""
    pytest.fail(f"{node.nodeid}: {text}", pytrace=False)


def _names(node: _Marked, mark: pytest.Mark) -> set[str]:
    """The canonical backend names of a ``backends``/``skip_backends`` mark; a misuse fails the test (a typo would
    otherwise skip it on every backend, or never skip it)."""
    if not mark.args:
        _misuse(node, f"@pytest.mark.{mark.name}() names no backend; give names such as {mark.name}('CPU', 'PYTHON')")
    out = set()
    for n in mark.args:
        if not isinstance(n, str) or not n:
            _misuse(node, f"@pytest.mark.{mark.name} takes backend names as non-empty strings, got {n!r}")
        if (problem := backend_typo(n)) is not None:
            _misuse(node, f"@pytest.mark.{mark.name} names {n!r}, {problem}")
        out.add(Device.canonicalize(n))
    return out


def backend_typo(name: str) -> str | None:
    """None when ``name`` (``"CPU"``, ``"cuda:1"``) names a registered backend or one of PROJECT_BACKENDS (maybe not
    installed here); else what is wrong with it: "which is no backend; did you mean 'CPU'? registered: ..."."""
    known = set(Device.backends()) | set(PROJECT_BACKENDS)
    try:
        backend = Device.canonicalize(name).partition(":")[0]
    except ValueError:
        backend = name
    if backend in known:
        return None
    close = difflib.get_close_matches(backend, sorted(known), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"which is no backend; {hint}registered: {', '.join(sorted(Device.backends())) or 'none'}"


def _not_installed(names: set[str]) -> str:
    missing = sorted({n.partition(":")[0] for n in names} - set(Device.backends()))
    return f" ({', '.join(missing)}: not installed, no backend registered under that name)" if missing else ""


def restriction_reason(node: _Marked, backend: str) -> str | None:
    """Why the ``backends``/``skip_backends`` markers of ``node`` exclude ``backend``, or ``None`` if they allow it.

    ``backends`` marks on the function, class and module all apply (the allowed set is their intersection).
    A marker name without a device part (``"CUDA"``) covers every device of that backend (``CUDA:1``,
    ``DISK:/tmp/f``); one with it (``"CUDA:1"``) only that device.
    ``node`` is anything with ``iter_markers`` (an item, or ``metafunc.definition``).
    """
    for m in node.iter_markers("backends"):  # every level's restriction applies
        if not _covers(allowed := _names(node, m), backend):
            return (f"{backend} excluded: test restricted to backends {', '.join(sorted(allowed))} by @pytest.mark.backends"
                    f"{_not_installed(allowed)}")
    for m in node.iter_markers("skip_backends"):
        if _covers(_names(node, m), backend):
            why = m.kwargs.get("reason") or "no reason given"
            return f"{backend} skipped by @pytest.mark.skip_backends: {why}"
    return None


def _covers(names: set[str], device: str) -> bool:
    return device in names or device.partition(":")[0] in names


def capability_reason(node: pytest.Item, backend: str) -> str | None:
    """Why ``needs_local``/``needs_dtype`` rule out ``backend`` (opened to read its renderer), or ``None``."""
    wanted_local = node.get_closest_marker("needs_local") is not None
    dtype_marks = list(node.iter_markers("needs_dtype"))
    wanted_dtypes = [d for m in dtype_marks for d in m.args]
    if not wanted_local and not dtype_marks:
        return None
    if any(not m.args for m in dtype_marks):
        _misuse(node, "@pytest.mark.needs_dtype() names no dtype; give runtime DTypes such as dtypes.float16")
    for d in wanted_dtypes:
        if not isinstance(d, DType):
            _misuse(node, f"@pytest.mark.needs_dtype takes runtime DTypes (dtypes.float16), got {d!r}")
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
    """The ``bench_threshold`` marker's fraction, or ``None``. It takes one value that the report reads too: a fraction
    > 0 (0.25) or a percent string ('25%'), finite (``harness.threshold.threshold_fraction``); anything else fails
    the test with the reason."""
    mark = node.get_closest_marker("bench_threshold")
    if mark is None:
        return None
    if len(mark.args) != 1 or mark.kwargs:
        _misuse(node, f"@pytest.mark.bench_threshold takes one fraction (0.25 = 25% slower), got {mark.args!r}")
    try:
        return threshold_fraction(mark.args[0], "@pytest.mark.bench_threshold")
    except ValueError as exc:
        problem = str(exc)
    _misuse(node, problem)  # outside the except: the report then shows no chained exception


def bench_threads(node: pytest.Item) -> int:
    """The ``bench_threads`` marker's count of threads the benchmark runs at once: ``n`` on the item's backend (its
    ``device`` parameter) when ``backends=`` (a list of names) holds it or is not given, else 1; 1 without the marker.
    Anything but one int >= 1 and an optional list of backend names fails the test with the reason."""
    mark = node.get_closest_marker("bench_threads")
    if mark is None:
        return 1
    count, backends = threads_of(mark.args, mark.kwargs)
    if count is None:
        given = ", ".join([repr(a) for a in mark.args] + [f"{k}={v!r}" for k, v in mark.kwargs.items()])
        _misuse(node, f"@pytest.mark.bench_threads takes one int >= 1 (threads run at once) and optionally "
                      f"backends=[names] (where it runs them), got ({given})")
    device = getattr(getattr(node, "callspec", None), "params", {}).get("device")
    return count if backends is None or device in backends else 1


def threads_of(args: tuple, kwargs: Mapping[str, Any]) -> tuple[int | None, tuple[str, ...] | None]:
    """(n, backends) of a ``bench_threads(n, backends=...)`` marker's arguments; n is None when they are not one
    int >= 1 and an optional list or tuple of backend names."""
    count = args[0] if len(args) == 1 else None
    backends = kwargs.get("backends")
    if set(kwargs) - {"backends"} or not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None, None
    if backends is not None and (not isinstance(backends, (list, tuple)) or
                                 not all(isinstance(b, str) for b in backends)):
        return None, None
    return count, tuple(backends) if backends is not None else None


# the keyword each role requires, and the extra_info key it is stored under
_ROLE_DETAIL = {LIMIT: REFERENCE_KEY, PEER: PEER_KEY}


def bench_role(node: pytest.Item) -> dict[str, object] | None:
    """The ``extra_info`` entries of the ``bench_role`` marker (``harness.bench_schema``): ROLE_KEY, LIMIT_KEY, and
    REFERENCE_KEY for a limit or PEER_KEY for a peer; ``None`` without the marker. A role outside ROLES, a limit
    without ``reference=`` or a peer without ``peer=``, or another keyword fails the test with the reason."""
    mark = node.get_closest_marker("bench_role")
    if mark is None:
        return None
    if len(mark.args) != 1:
        _misuse(node, f"@pytest.mark.bench_role takes one role ({', '.join(ROLES)}), got {mark.args!r}")
    try:
        role = check_role(mark.args[0], "@pytest.mark.bench_role")
    except ValueError as exc:
        problem = str(exc)
    else:
        needed = _ROLE_DETAIL.get(role)
        extra = set(mark.kwargs) - ({needed} if needed else set())
        if extra:
            _misuse(node, f"@pytest.mark.bench_role({role!r}) takes no {', '.join(sorted(extra))}=")
        if needed and not (isinstance(mark.kwargs.get(needed), str) and mark.kwargs[needed]):
            _misuse(node, f"@pytest.mark.bench_role({role!r}) needs {needed}='...' saying what it measures")
        info: dict[str, object] = {ROLE_KEY: role, LIMIT_KEY: role == LIMIT}
        if needed:
            info[needed] = mark.kwargs[needed]
        return info
    _misuse(node, problem)


def bench_group(node: pytest.Item, group: str | None) -> str | None:
    """``group`` with the test's parameters filled in: ``@pytest.mark.benchmark(group="compile-cold-{device}")`` on
    the CPU instance is ``"compile-cold-CPU"``. So a group that depends on a parameter is known at collection, which
    the paired runner needs to pair a limit with its entries (``harness.paired.worker`` fills it in the same way).
    A group naming no parameter, or one the test does not have, is returned unchanged."""
    if not group or "{" not in group:
        return group
    params = getattr(getattr(node, "callspec", None), "params", {})
    try:
        return group.format_map({k: str(v) for k, v in params.items()})
    except (KeyError, ValueError, IndexError):
        return group
