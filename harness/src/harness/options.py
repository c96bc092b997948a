"""Command-line options of the harness plugin and their environment-variable twins."""

from __future__ import annotations

import os

import pytest

__all__ = ["add_options", "requested_backends", "strict_backends", "require_tests", "seed_setting", "run_bigmem",
           "disk_bench_bytes", "BACKENDS_ENV", "SEED_ENV", "BIGMEM_ENV", "REQUIRE_TESTS_ENV", "DISK_BENCH_ENV",
           "DISK_BENCH_DEFAULT_MIB"]

BACKENDS_ENV = "HARNESS_BACKENDS"
SEED_ENV = "HARNESS_SEED"
BIGMEM_ENV = "HARNESS_RUN_BIGMEM"
DISK_BENCH_ENV = "HARNESS_DISK_BENCH_MIB"
DISK_BENCH_DEFAULT_MIB = 256  # 1024 (the 1 GiB of issue 9) makes `nox -s bench` about a minute longer
REQUIRE_TESTS_ENV = "HARNESS_REQUIRE_TESTS"
RANDOM_SEED = "random"


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


def _split(names: str) -> list[str]:
    return [n.strip() for n in names.split(",") if n.strip()]


def requested_backends(config: pytest.Config) -> list[str] | None:
    """Backend names asked for by ``--backends`` (first) or ``HARNESS_BACKENDS``, in order; ``None`` if neither.

    Raises ``pytest.UsageError`` for a value that names no backend (e.g. ``--backends ,``).
    """
    raw = config.getoption("backends")
    source = "--backends"
    if raw is None:
        raw, source = os.environ.get(BACKENDS_ENV), BACKENDS_ENV
    if raw is None:
        return None
    names = _split(raw)
    if not names:
        raise pytest.UsageError(f"{source}={raw!r} names no backend; give a comma-separated list such as CPU,PYTHON")
    return names


def strict_backends(config: pytest.Config) -> bool:
    return bool(config.getoption("strict_backends"))


def require_tests(config: pytest.Config) -> bool:
    """``--require-tests``, or ``HARNESS_REQUIRE_TESTS`` set to anything but empty or ``0``."""
    return bool(config.getoption("require_tests")) or os.environ.get(REQUIRE_TESTS_ENV, "0").strip() not in ("", "0")


def seed_setting(config: pytest.Config) -> int | str | None:
    """The requested seed: an int, ``"random"``, or ``None`` (derive from the node id).

    Raises ``pytest.UsageError`` for anything else.
    """
    raw = config.getoption("harness_seed")
    source = "--harness-seed"
    if raw is None:
        raw, source = os.environ.get(SEED_ENV), SEED_ENV
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    if raw.lower() == RANDOM_SEED:
        return RANDOM_SEED
    try:
        seed = int(raw, 0)
    except ValueError:
        raise pytest.UsageError(f"{source}={raw!r} is not an integer seed or 'random'") from None
    if seed < 0:
        raise pytest.UsageError(f"{source}={raw!r}: a seed must be >= 0")
    return seed


def run_bigmem(config: pytest.Config) -> bool:
    """Whether tests marked ``bigmem`` run: ``--run-bigmem`` or ``HARNESS_RUN_BIGMEM`` set to a value other than 0."""
    return bool(config.getoption("run_bigmem")) or os.environ.get(BIGMEM_ENV, "0") not in ("", "0")


def disk_bench_bytes(config: pytest.Config) -> int:
    """Bytes of the DISK read benchmarks' file, from ``--disk-bench-mib`` (first) or ``HARNESS_DISK_BENCH_MIB``.

    Raises ``pytest.UsageError`` for a value that is not a positive integer.
    """
    raw, source = config.getoption("disk_bench_mib"), "--disk-bench-mib"
    if raw is None:
        raw, source = os.environ.get(DISK_BENCH_ENV), DISK_BENCH_ENV
    if raw is None or not raw.strip():
        return DISK_BENCH_DEFAULT_MIB << 20
    try:
        mib = int(raw)
    except ValueError:
        mib = 0
    if mib <= 0:
        raise pytest.UsageError(f"{source}={raw!r} is not a positive number of MiB (e.g. 1024)")
    return mib << 20
