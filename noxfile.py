"""nox sessions of the monorepo: `nox -l` lists them. tox.ini mirrors them."""

from __future__ import annotations

import os
import shutil

import nox

nox.options.sessions = ["tests-cpu", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PACKAGES = ["packages/runtime-core", "packages/runtime-backends", "mock_gpu", "harness"]
UNIT_TESTS = ["packages/runtime-core/tests", "packages/runtime-backends/tests", "mock_gpu/tests", "harness/tests"]
SUITES = ["harness/src/harness/suites"]
TEST_DEPS = ["pytest>=7", "pytest-xdist>=3", "pytest-benchmark>=4"]
NVRTC_DEPS = ["cuda-bindings>=12", "nvidia-cuda-nvrtc"]


def install_packages(session: nox.Session, *extra: str) -> None:
    """Editable installs of every package of the monorepo plus ``extra`` requirements."""
    session.install(*[arg for p in PACKAGES for arg in ("-e", p)], *extra)


def require_c_compiler(session: nox.Session) -> None:
    """Fail early, with the install command, when the C compiler the CPU backend will run is missing."""
    cc = os.environ.get("CC", "clang")
    if shutil.which(cc) is None:
        hint = " gcc is installed: run with CC=gcc, or" if cc != "gcc" and shutil.which("gcc") else ""
        session.error(f"the CPU backend needs a C compiler: CC={cc!r} is not on PATH.{hint} install one with "
                      f"`apt-get install clang` (or `apt-get install gcc` and set CC=gcc)")


@nox.session(name="tests-cpu")
def tests_cpu(session: nox.Session) -> None:
    """Unit tests of every package (mock GPU included) and the harness suites on CPU and PYTHON.

    Extra arguments go to pytest, e.g. `nox -s tests-cpu -- --backends CPU -x`.
    """
    require_c_compiler(session)
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS)
    session.run("pytest", "-n", os.environ.get("PYTEST_WORKERS", "auto"), "-p", "no:cacheprovider",
                *UNIT_TESTS, *SUITES, *session.posargs)


@nox.session(name="tests-mockgpu")
def tests_mockgpu(session: nox.Session) -> None:
    """The mock GPU's own tests: driver API, PTX interpreter and the NVRTC-compiled kernel corpus."""
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS)
    session.run("pytest", "-n", os.environ.get("PYTEST_WORKERS", "auto"), "mock_gpu/tests", *session.posargs,
                env={"MOCKGPU": "1"})


@nox.session
def bench(session: nox.Session) -> None:
    """The main job: benchmarks on every available backend, then the regression report (reports/report.*).

    Stored-baseline mode by default (this machine's baseline and history; exit 1 on a real regression of our code);
    A/B mode with `nox -s bench -- --against [REF]` (the ref and the working tree in alternating rounds: use it for a
    change). Arguments after `--` go to `python -m harness bench` (see its --help): `--save-baseline`,
    `--promote RUN.json`, `-k EXPR`, `--backends CPU`, ...; pytest options it does not know go after a second `--`.
    """
    require_c_compiler(session)
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS, "numba")
    session.run("python", "-m", "harness", "bench", *session.posargs)


@nox.session
def report(session: nox.Session) -> None:
    """`python -m harness report` on saved runs: `nox -s report -- --current A.json --baseline B.json`."""
    install_packages(session)
    session.run("python", "-m", "harness", "report", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.install("ruff>=0.4")
    session.run("ruff", "check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the packages' sources."""
    install_packages(session, "mypy>=1.8", *TEST_DEPS)
    session.run("mypy", "packages/runtime-core/src/runtime_core", "packages/runtime-backends/src/runtime_backends",
                "mock_gpu/src/mock_gpu", "harness/src/harness")
