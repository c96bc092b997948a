#!/usr/bin/env bash
# One entry point for every CI path: `ci/job.sh SESSION [ARGS...]` runs nox session SESSION (ARGS go to it after
# `--`); `ci/job.sh prepare SESSION...` builds those sessions' environments only (docker image builds). The GitHub
# workflow, the docker images and .ci/run call this script. What a session runs, with which environment, is defined in
# noxfile.py alone (docs/ci.md); this script adds only CI_NOX_FLAGS, extra nox flags (the docker images set "-R":
# reuse the environments built into the image and install nothing, since the containers run without network).
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a NOX_FLAGS <<< "${CI_NOX_FLAGS:-}"
if [ $# -lt 1 ]; then
    echo "usage: ci/job.sh SESSION [ARGS...] | ci/job.sh prepare SESSION...; the sessions: python3 -m nox -l" >&2
    exit 2
fi
if [ "$1" = prepare ]; then
    shift
    exec python3 -m nox "${NOX_FLAGS[@]}" --install-only -s "$@"
fi
session=$1
shift
exec python3 -m nox "${NOX_FLAGS[@]}" -s "$session" -- "$@"
