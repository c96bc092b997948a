"""Command-line options of the harness plugin and their environment-variable twins."""

from __future__ import annotations

from typing import TypeVar

import pytest

from harness.config import (
    HARNESS_BACKENDS,
    HARNESS_DISK_BENCH_MIB,
    HARNESS_REQUIRE_TESTS,
    HARNESS_RUN_BIGMEM,
    HARNESS_SEED,
    RANDOM_SEED,
)
from runtime_core.config import ConfigError, Setting

__all__ = ["add_options", "requested_backends", "strict_backends", "require_tests", "seed_setting", "run_bigmem",
           "disk_bench_bytes", "BACKENDS_ENV", "SEED_ENV", "BIGMEM_ENV", "REQUIRE_TESTS_ENV", "DISK_BENCH_ENV",
           "DISK_BENCH_DEFAULT_MIB", "RANDOM_SEED"]

T = TypeVar("T")
BACKENDS_ENV = HARNESS_BACKENDS.name
SEED_ENV = HARNESS_SEED.name
BIGMEM_ENV = HARNESS_RUN_BIGMEM.name
DISK_BENCH_ENV = HARNESS_DISK_BENCH_MIB.name
DISK_BENCH_DEFAULT_MIB = HARNESS_DISK_BENCH_MIB.default  # 1024 (the 1 GiB of issue 9): `nox -s bench` a minute longer
REQUIRE_TESTS_ENV = HARNESS_REQUIRE_TESTS.name


def add_options(parser: pytest.Parser) -> None:
    """Register the ``harness`` option group."""
    group = parser.getgroup("harness", "cross-backend correctness harness")
    group.addoption("--backends", default=None, metavar="NAMES",
                    help=f"comma-separated devices to run device tests on, e.g. CPU,PYTHON (env {BACKENDS_ENV}; "
                         "default: every registered backend with a default priority that opens)")
    group.addoption("--strict-backends", action="store_true", default=False,
                    help="fail the session when a requested backend is unavailable instead of skipping its tests")
    group.addoption("--require-tests", action="store_true", default=False,
                    help=f"fail the session when no test executed (all skipped, deselected or none collected); env "
                         f"{REQUIRE_TESTS_ENV}=1")
    group.addoption("--harness-seed", default=None, metavar="SEED",
                    help=f"seed of the rng fixture for every test: an int, or 'random' (env {SEED_ENV}; "
                         "default: a stable seed derived from each test's node id)")
    group.addoption("--run-bigmem", action="store_true", default=False,
                    help=f"run tests marked bigmem, which need more than 2 GiB of memory (env {BIGMEM_ENV}=1)")
    group.addoption("--disk-bench-mib", default=None, metavar="MIB",
                    help=f"size of the file the DISK read benchmarks read, in MiB (env {DISK_BENCH_ENV}; default "
                         f"{DISK_BENCH_DEFAULT_MIB}; 1024 for the 1 GiB figures)")


def _resolve(raw: str | None, flag: str, setting: Setting[T]) -> T:
    """Option value ``raw`` (first) or the variable's, parsed by the setting's kind; ``pytest.UsageError`` naming the
    source for a bad value."""
    try:
        return setting.get() if raw is None else setting.parse(raw, source=flag)
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None


def _flag(setting: Setting[bool]) -> bool:
    return _resolve(None, setting.name, setting)


def requested_backends(config: pytest.Config) -> list[str] | None:
    """Backend names asked for by ``--backends`` (first) or ``HARNESS_BACKENDS``, in order; ``None`` if neither.

    Raises ``pytest.UsageError`` for a value that names no backend (e.g. ``--backends ,``).
    """
    names = _resolve(config.getoption("backends"), "--backends", HARNESS_BACKENDS)
    return None if names is None else list(names)


def strict_backends(config: pytest.Config) -> bool:
    return bool(config.getoption("strict_backends"))


def require_tests(config: pytest.Config) -> bool:
    """``--require-tests``, or ``HARNESS_REQUIRE_TESTS`` true."""
    return bool(config.getoption("require_tests")) or _flag(HARNESS_REQUIRE_TESTS)


def seed_setting(config: pytest.Config) -> int | str | None:
    """The requested seed: an int, ``"random"``, or ``None`` (derive from the node id).

    Raises ``pytest.UsageError`` for anything else.
    """
    raw = config.getoption("harness_seed")
    return None if raw is not None and not raw.strip() else _resolve(raw, "--harness-seed", HARNESS_SEED)


def run_bigmem(config: pytest.Config) -> bool:
    """Whether tests marked ``bigmem`` run: ``--run-bigmem`` or ``HARNESS_RUN_BIGMEM`` true."""
    return bool(config.getoption("run_bigmem")) or _flag(HARNESS_RUN_BIGMEM)


def disk_bench_bytes(config: pytest.Config) -> int:
    """Bytes of the DISK read benchmarks' file, from ``--disk-bench-mib`` (first) or ``HARNESS_DISK_BENCH_MIB``.

    Raises ``pytest.UsageError`` for a value that is not a positive integer.
    """
    mib = _resolve(config.getoption("disk_bench_mib"), "--disk-bench-mib", HARNESS_DISK_BENCH_MIB)
    return mib << 20
