#!/usr/bin/env bash
# System packages the test and bench sessions need and cannot pip-install: a C compiler for the CPU backend
# (clang by default, gcc for CC=gcc). Debian/Ubuntu; run as root or with sudo available.
set -euo pipefail
missing=()
for tool in clang gcc; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
