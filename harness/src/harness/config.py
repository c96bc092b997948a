"""The harness's environment variables, declared once (name, kind, default, doc) with :mod:`runtime_core.config`'s
classes and parsed one way; the only harness module that reads ``os.environ``.

The A/B runner's channel to its workers (``HARNESS_BENCH_CHANNEL``) is read by ``harness.paired.worker`` itself: the
worker runs inside the tree under test, whose harness may predate this module.

The variables of the runtime and its backends (``CPU_MEMCHECK``, ``MOCKGPU``, ``CC``, ...) are declared in
:mod:`runtime_core.config` and read from there. docs/configuration.md lists both tables (``harness.config_doc``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from runtime_core.config import COUNT, FLAG, PATH, Kind, Setting

__all__ = ["SETTINGS", "RANDOM_SEED", "HARNESS_BACKENDS", "HARNESS_SEED", "HARNESS_RUN_BIGMEM", "HARNESS_REQUIRE_TESTS",
           "HARNESS_DISK_BENCH_MIB", "HARNESS_HEARTBEAT_S", "REQUIRE_IO_URING", "HARNESS_BASELINE_DIR",
           "HARNESS_BENCH_SHARED_DIR", "child_environ", "foreign_values"]

RANDOM_SEED = "random"


def _seed(text: str) -> int | str:
    word = text.strip()
    if word.lower() == RANDOM_SEED:
        return RANDOM_SEED
    try:
        seed = int(word, 0)
    except ValueError:
        raise ValueError("expected an integer seed or 'random'") from None
    if seed < 0:
        raise ValueError("a seed must be >= 0")
    return seed


def _backend_list(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError("names no backend; give a comma-separated list such as CPU,PYTHON")
    return names


def _quiet_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ValueError("expected seconds >= 0 (0: no progress lines)")
    return value


SEED: Kind[int | str] = Kind("int >= 0 or 'random'", _seed)
BACKEND_LIST: Kind[tuple[str, ...]] = Kind("comma-separated device names", _backend_list)

HARNESS_BACKENDS = Setting("HARNESS_BACKENDS", BACKEND_LIST, None, "devices the device tests run on (--backends)",
                           "every registered backend with a default priority that opens")
HARNESS_SEED = Setting("HARNESS_SEED", SEED, None, "seed of the rng fixture for every test (--harness-seed)",
                       "a stable seed derived from each test's node id")
HARNESS_RUN_BIGMEM = Setting("HARNESS_RUN_BIGMEM", FLAG, False,
                             "run the tests marked bigmem, which need more than 2 GiB of memory (--run-bigmem)")
HARNESS_REQUIRE_TESTS = Setting("HARNESS_REQUIRE_TESTS", FLAG, False,
                                "fail a session in which no test ran (--require-tests)")
HARNESS_DISK_BENCH_MIB = Setting("HARNESS_DISK_BENCH_MIB", COUNT, 256,
                                 "MiB of the file the DISK read benchmarks read (--disk-bench-mib; 1024 for 1 GiB)")
HARNESS_HEARTBEAT_S = Setting("HARNESS_HEARTBEAT_S", Kind("seconds >= 0", _quiet_seconds), 60.0,
                              "after this long without a finished test, print which tests are running (0: never)")
REQUIRE_IO_URING = Setting("REQUIRE_IO_URING", FLAG, False,
                           "the DISK suite fails, not falls back, where io_uring cannot be used (the io_uring image)")
HARNESS_BASELINE_DIR = Setting("HARNESS_BASELINE_DIR", PATH, None,
                               "directory of the stored benchmark baselines (--baseline-dir)", ".benchmarks/baselines")
# Input files whose place on disk affects their timing go there, so both versions of an A/B run read the same blocks
# (two files written apart were read up to 1.8x apart, cold, on the 2-core reference VM).
HARNESS_BENCH_SHARED_DIR = Setting("HARNESS_BENCH_SHARED_DIR", PATH, None,
                                   "set by the A/B runner: the directory of input files both workers read",
                                   "a private temporary dir")

SETTINGS: tuple[Setting, ...] = (HARNESS_BACKENDS, HARNESS_SEED, HARNESS_RUN_BIGMEM, HARNESS_REQUIRE_TESTS,
                                 HARNESS_DISK_BENCH_MIB, HARNESS_HEARTBEAT_S, REQUIRE_IO_URING, HARNESS_BASELINE_DIR,
                                 HARNESS_BENCH_SHARED_DIR)
"""Every variable of the harness, in the order the docs list them."""


def foreign_values(names: Iterable[str]) -> dict[str, str | None]:
    """The values (``None``: unset) of variables other programs read (``OMP_NUM_THREADS``), as this process sees them:
    what a benchmark run records about its environment."""
    return {name: os.environ.get(name) for name in names}


def child_environ(changes: dict[str, str | None]) -> dict[str, str]:
    """This process's environment with ``changes`` applied (a ``None`` value removes the variable): the environment of
    a child process (a benchmark worker, a server)."""
    env = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env
