"""``python -m mock_gpu run prog.py [args...]`` / ``python -m mock_gpu run -m module [args...]``: run a cuda-python
program unmodified on the emulated GPU (:func:`mock_gpu.install` first, then the program as ``__main__`` with
``sys.argv`` set as if it had been started itself). The exit status is the program's."""

from __future__ import annotations

import argparse
import os
import runpy
import sys

from .install import install


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mock_gpu", description="Run CUDA programs on the emulated GPU.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a Python program (or -m module) with CUDA provided by mock_gpu")
    run.add_argument("-m", dest="module", help="run a library module as a script, like python -m")
    run.add_argument("target", nargs=argparse.REMAINDER, help="the program's path, then its arguments")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the program; returns its exit status (2 for a usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.module is None and not args.target:
        parser.error("run: give the program to run (prog.py [args...] or -m module [args...])")
    install()
    if args.module is not None:
        sys.argv = [args.module, *args.target]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        return 0
    program = args.target[0]
    if not os.path.isfile(program):
        parser.error(f"run: {program!r} is not a file")
    sys.argv = list(args.target)
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))
    runpy.run_path(program, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
