#!/usr/bin/env bash
# One entry point for every CI path: `ci/job.sh JOB [extra args for pytest]`. The GitHub workflows, the docker images
# and .ci/run all call this script, so each path runs the same steps everywhere.
#
# Every pytest run of a job has HARNESS_REQUIRE_TESTS=1: a run in which no test executed fails. GPU and io_uring jobs
# also declare what must have run (--strict-backends, REQUIRE_IO_URING=1) and fail when it did not.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 HARNESS_REQUIRE_TESTS=1
# CI_NOX_FLAGS: extra nox flags; the docker images set "-R" (reuse the environments built into the image, install
# nothing: the containers run without network)
read -r -a NOX_FLAGS <<< "${CI_NOX_FLAGS:-}"
NOX=(python3 -m nox "${NOX_FLAGS[@]}")

usage() {
    sed -n 's/^    \([a-z-]*\)) *# \(.*\)/  \1: \2/p' "$0"
}

[ $# -ge 1 ] || { echo "usage: ci/job.sh JOB [pytest args]; jobs:" >&2; usage >&2; exit 2; }
job=$1
shift
case "$job" in
    prepare)        # prepare SESSION...: build the sessions' environments only (docker image builds)
        for s in "$@"; do "${NOX[@]}" -s "$s" --install-only; done ;;
    lint)           # ruff + the import contract
        "${NOX[@]}" -s lint ;;
    typecheck)      # mypy over every package
        "${NOX[@]}" -s typecheck ;;
    tests-cpu)      # every package's unit tests + the harness suites on CPU and PYTHON ($CC, default clang)
        "${NOX[@]}" -s tests-cpu -- "$@" ;;
    tests-cpu-gcc)  # the CPU backend's tests and suites again with CC=gcc
        CC=gcc "${NOX[@]}" -s tests-cpu -- --backends CPU -k "cpu or CPU or elf or execmem" "$@" ;;
    tests-mockgpu)  # the CUDA backend on the mock GPU (MOCKGPU=1), both renderers, one and two devices
        "${NOX[@]}" -s tests-mockgpu -- "$@" ;;
    tests-disk)     # the DISK backend; io_uring required where REQUIRE_IO_URING=1 (the io_uring image sets it)
        "${NOX[@]}" -s tests-disk -- "$@" ;;
    tests-cloud)    # the CLOUD backend: server + client over loopback, protocol fuzzing
        "${NOX[@]}" -s tests-cloud -- "$@" ;;
    tests-cuda)     # the suites on a real GPU (--strict-backends: no GPU fails the job)
        "${NOX[@]}" -s tests-cuda -- "$@" ;;
    gpu)            # the GPU runner's whole job: tests-cuda, then the CUDA benchmarks
        "${NOX[@]}" -s tests-cuda -- "$@"
        "${NOX[@]}" -s bench -- --no-fail -- --backends CUDA --strict-backends ;;
    docker-lint)    # hadolint on every Dockerfile + the CI configuration tests (ci/tests)
        "${NOX[@]}" -s docker-lint ;;
    images)         # both CI images built with docker or podman and run here: io_uring allowed and refused, mock GPU
        "${NOX[@]}" -s images -- "$@" ;;
    bench-smoke)    # a short benchmark run that writes the reports (no gate: one round is no verdict)
        "${NOX[@]}" -s bench -- --no-fail --out reports/smoke -k "launch or alloc" --budget 0.5 ;;
    bench-baseline) # pushes to main: the benchmarks, stored as this runner's baseline
        "${NOX[@]}" -s bench -- --save-baseline ;;
    bench-ab)       # pull requests: paired A/B of the PR against BASE_REF (default origin/main); exit 1 on regression
        "${NOX[@]}" -s bench -- --against "${BASE_REF:-origin/main}" ;;
    *)
        echo "ci/job.sh: unknown job '$job'; jobs:" >&2
        usage >&2
        exit 2 ;;
esac
