"""The benchmark metadata schema: every key that benchmarks write and the runner and the reports read, in one place.

It imports only the standard library: the pytest plugin and the benchmark workers use it inside test runs, where
loading the report package (scipy, matplotlib) would cost half a second.

``benchmark.extra_info`` keys (pytest-benchmark stores them per benchmark in the run's JSON):

========================  ====================================================================================
ROLE_KEY ``role``         ENTRY (our code: the only role that can fail a run), LIMIT (what the machine allows for
                          the same work, measured beside the entries of its group) or PEER (another project's
                          figure, for scale). From ``@pytest.mark.bench_role``; absent means ENTRY, or LIMIT when
                          LIMIT_KEY is true (runs written before roles existed).
LIMIT_KEY ``limit``       ``true`` on a limit, ``false`` elsewhere (kept beside ``role`` for older readers).
REFERENCE_KEY             ``reference``: what a limit measures, e.g. ``"numpy.copyto of the same bytes"``.
PEER_KEY ``peer``         on a peer: the project it measures, e.g. ``"numba CUDA simulator"``.
THRESHOLD_KEY             ``threshold``: the benchmark's stored-baseline regression threshold, a fraction or
                          ``"25%"`` (from ``@pytest.mark.bench_threshold``).
UNIT_KEY, VALUE_KEY       ``unit``/``value``: the natural figure, e.g. ``"GB/s"``, ``12.3``.
HIGHER_IS_BETTER_KEY      ``higher_is_better``: the figure is a throughput (verdicts are always on time).
PAIRED_LIMIT_KEY          ``paired_limit``: on an entry timed next to its group's limit, ``{"fullname": <the
                          limit>, "data": [seconds per call]}`` with one limit round per round of ``stats.data``,
                          each taken right beside it (written by the paired runner, ``harness.paired.stored``).
========================  ====================================================================================

Run-level keys: ``machine_info[THREADS_KEY]`` records the BLAS/OpenMP thread variables (SINGLE_THREAD_ENV) of the
benchmark process; the top-level RUN_KEY object of a run written by the paired runner holds ``mode`` (MODE_STORED or
MODE_AB), in stored mode ``selection`` (the run's pytest arguments, [] for none: ``--promote`` refuses a run with some
without ``--save-partial-baseline``), and in A/B mode ``side`` ("A" = the git ref, "B" = the working
tree), ``pairing`` (an id shared by the two files of one A/B run, whose rounds pair up by index), ``ref`` and
``planted`` (``--plant-slowdown``'s factor or null).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.config import HARNESS_BENCH_SHARED_DIR

__all__ = [
    "ENTRY", "HIGHER_IS_BETTER_KEY", "LIMIT", "LIMIT_KEY", "MODE_AB", "MODE_STORED", "PAIRED_LIMIT_KEY", "PEER",
    "PEER_KEY", "PER_CALL_KEY", "REFERENCE_KEY", "ROLES", "ROLE_KEY", "RUN_KEY", "SHARED_DIR_ENV",
    "SINGLE_THREAD_ENV", "THREADS_KEY", "THRESHOLD_KEY", "TIME_UNITS", "UNIT_KEY", "VALUE_KEY", "WORK_KEYS",
    "check_role", "finite_float", "role_of", "short_name", "threshold_fraction", "work_change",
]

ROLE_KEY = "role"
LIMIT_KEY = "limit"
REFERENCE_KEY = "reference"
PEER_KEY = "peer"
THRESHOLD_KEY = "threshold"
UNIT_KEY = "unit"
VALUE_KEY = "value"
HIGHER_IS_BETTER_KEY = "higher_is_better"
PAIRED_LIMIT_KEY = "paired_limit"
# extra_info keys that say how much work one call does; two records that differ in one time different work
WORK_KEYS = ("size_bytes", "elements", "shape", "per_call")  # "per_call" is PER_CALL_KEY, below
# ``per_call``: {unit: amount of that unit's work done by one call}, e.g. {"GB/s": 0.004096} for 4 KiB (in GB), so a
# report computes a throughput figure from the very rounds it judges (amount / median seconds per call)
PER_CALL_KEY = "per_call"
# time figures: unit -> its count per second (a figure = median seconds per call x this)
TIME_UNITS = {"us/call": 1e6, "ms/compile": 1e3}

ENTRY, LIMIT, PEER = "entry", "limit", "peer"
ROLES = (ENTRY, LIMIT, PEER)

RUN_KEY = "harness"
MODE_STORED, MODE_AB = "stored", "ab"
SHARED_DIR_ENV = HARNESS_BENCH_SHARED_DIR.name  # declared, with why, in harness.config

# The CPU backend runs a kernel on one thread, so single-threaded numpy/BLAS is the fair practical limit beside it, and
# a multi-threaded BLAS on a loaded machine of few cores spreads its rounds by orders of magnitude. The libraries read
# these once when they load, so the runner sets them in the environment of the benchmark processes.
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
THREADS_KEY = "thread_env"  # machine_info: {variable: its value in the benchmark process, or None when unset}


def short_name(fullname: str) -> str:
    """A benchmark's name without its file and 'test_': '.../test_bench_copy.py::test_copy[CPU-4KiB]' ->
    'copy[CPU-4KiB]'."""
    name = fullname.rsplit("::", 1)[-1]
    return name[5:] if name.startswith("test_") else name


def role_of(extra_info: Mapping[str, Any]) -> str:
    """The role recorded in ``extra_info``: ROLE_KEY when it names a role, else LIMIT when LIMIT_KEY is ``true``, else
    ENTRY."""
    role = extra_info.get(ROLE_KEY)
    if role in ROLES:
        return str(role)
    return LIMIT if extra_info.get(LIMIT_KEY) is True else ENTRY


def check_role(value: object, source: str) -> str:
    """``value`` when it is one of ROLES; raises ValueError naming ``source`` otherwise."""
    if value not in ROLES:
        raise ValueError(f"{source}: role {value!r} is not one of {', '.join(ROLES)}")
    return str(value)


def finite_float(value: object) -> float | None:
    """``value`` as a float when it is a JSON number (not a bool) that is finite as a float, else None (an integer of
    more than ~309 digits does not fit a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def threshold_fraction(value: object, source: str) -> float:
    """Turn ``0.25``, ``"0.25"`` or ``"25%"`` into the fraction 0.25.

    A bare number is a fraction of the baseline median (0.1 = 10%); a string ending in ``%`` is a percent.
    ``source`` names where the value came from, for the message ('' when the caller names it, as argparse does).
    Raises ValueError when the value is not a finite number > 0 (booleans are refused too).
    """
    where = f"{source}: " if source else ""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where}threshold {value!r} is not a number or a percent string like '10%'")
    fraction: float
    if isinstance(value, str):
        text = value.strip()
        scale = 100.0 if text.endswith("%") else 1.0
        try:
            fraction = float(text.rstrip("%").strip()) / scale
        except ValueError:
            raise ValueError(f"{where}threshold {value!r} is not a number or a percent string like '10%'") from None
    else:
        number = finite_float(value)  # None for an integer too large for a float
        fraction = math.nan if number is None else number
    if not math.isfinite(fraction) or fraction <= 0:
        raise ValueError(f"{where}threshold {value!r} must be a fraction > 0 (e.g. 0.1 or '10%')")
    return fraction


def work_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    """How the work of one call differs between two records' ``extra_info``, e.g. ``'elements 4194304 -> 1048576'``:
    the first of WORK_KEYS set (not null) in both to values that differ as JSON would hold them (4 equals 4.0, NaN
    equals NaN, a tuple its list); None when none differs (a key on one side only says nothing)."""
    for key in WORK_KEYS:
        old, new = before.get(key), after.get(key)
        if old is not None and new is not None and _as_json(old) != _as_json(new):
            return f"{key} {_cut(repr(old))} -> {_cut(repr(new))}"
    return None


def _cut(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _as_json(value: Any) -> Any:
    """``value`` as decoded JSON compares: numbers by value (NaN as a string, so that it equals itself), tuples as
    lists, anything else by its repr."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return "NaN" if value != value else value
    if isinstance(value, (list, tuple)):
        return [_as_json(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _as_json(v) for k, v in value.items()}
    return repr(value)
