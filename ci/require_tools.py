"""Pre-checks shared by the nox sessions and their tox twins: fail early, with the install command, when a system tool
a session needs is missing. ``python ci/require_tools.py cc`` checks the CPU backend's C compiler (``$CC``, default
clang). Exit status 0 when everything is there, 1 with one line per missing tool on stderr."""

from __future__ import annotations

import os
import shutil
import sys


def c_compiler() -> str | None:
    """The problem with ``$CC`` (default ``clang``), or ``None`` when it is on PATH."""
    cc = os.environ.get("CC", "clang")
    if shutil.which(cc) is not None:
        return None
    hint = " gcc is installed: run with CC=gcc, or" if cc != "gcc" and shutil.which("gcc") else ""
    return (f"the CPU backend needs a C compiler: CC={cc!r} is not on PATH.{hint} install one with "
            f"`apt-get install clang` (or `apt-get install gcc` and set CC=gcc), or run ci/install-system-deps.sh")


CHECKS = {"cc": c_compiler}


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a not in CHECKS]
    if unknown or not argv:
        print(f"usage: python ci/require_tools.py {{{','.join(CHECKS)}}}...; unknown: {unknown}", file=sys.stderr)
        return 2
    problems = [p for a in argv if (p := CHECKS[a]()) is not None]
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
