"""tox.ini, generated from noxfile.py: one tox env per nox session with the same requirements (pins included) and the
same commands, in order, with the same environment variables.

Each session function of the noxfile runs against a recording stand-in for ``nox.Session``: what it installs becomes
the env's ``deps``, what it runs its ``commands`` (``env NAME=VALUE ...`` where the session sets variables), the
sessions it hands on to (``session.notify``) ``tox -e NAME`` commands, and its arguments ``{posargs}``. The noxfile's
KNOBS (environment variables with defaults) become ``{env:NAME:default}``.

``python ci/tox_ini.py`` prints it, ``--write`` replaces tox.ini, ``--check`` exits 1 when tox.ini differs.
"""

from __future__ import annotations

import argparse
import functools
import os
import runpy
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOX_INI = ROOT / "tox.ini"
POSARGS = "{posargs}"


class Recorder:
    """The part of ``nox.Session`` the noxfile uses, writing down installs, commands and hand-offs."""

    virtualenv = None  # no environment: the noxfile installs unconditionally

    def __init__(self, posargs: Sequence[str]) -> None:
        self.posargs = list(posargs)
        self.deps: list[str] = []
        self.commands: list[str] = []

    def install(self, *args: str, **_: Any) -> None:
        pending = list(args)
        while pending:
            arg = pending.pop(0)
            self.deps.append(f"{arg} {pending.pop(0)}" if arg == "-e" and pending else arg)

    def run(self, *args: str, env: dict[str, str] | None = None, **_: Any) -> None:
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        self.commands.append(" ".join(_quote(a) for a in [*prefix, *args]))

    def notify(self, target: str, posargs: Sequence[str] | None = None) -> None:
        args = list(posargs) if posargs is not None else []
        self.commands.append(" ".join(["tox", "-e", target, *(["--", *map(_quote, args)] if args else [])]))

    def log(self, *_: Any) -> None:
        pass

    def error(self, message: str) -> None:
        raise SystemExit(f"noxfile.py: {message}")


def _quote(arg: str) -> str:
    return arg if arg.startswith("{") and arg.endswith("}") else shlex.quote(arg)


@functools.cache
def noxfile() -> dict[str, Any]:
    """The noxfile's globals (running it registers its sessions in nox's registry)."""
    return runpy.run_path(str(ROOT / "noxfile.py"))


def sessions() -> dict[str, Any]:
    """The noxfile's sessions by name, recorded with KNOBS set to tox placeholders."""
    import nox.registry

    knobs = noxfile()["KNOBS"]
    saved = {name: os.environ.get(name) for name in knobs}
    os.environ.update({name: f"{{env:{name}:{default}}}" for name, default in knobs.items()})
    try:
        return {name: _record(fn) for name, fn in nox.registry.get().items()}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _record(fn: Any) -> Recorder:
    rec = Recorder([POSARGS])
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        fn(rec)
    finally:
        os.chdir(cwd)
    return rec


def render() -> str:
    """The text of tox.ini."""
    recorded = sessions()
    default = noxfile()["nox"].options.sessions
    lines = ["# Generated from noxfile.py by `python ci/tox_ini.py --write`: edit the noxfile, not this file.",
             "[tox]", f"envlist = {', '.join(default)}", "skipsdist = true", ""]
    for name, rec in recorded.items():
        lines += [f"[testenv:{name}]", "passenv = *", "allowlist_externals = env, tox"]
        if rec.deps:
            lines += ["deps =", *(f"    {d}" for d in rec.deps)]
        lines += ["commands =", *(f"    {c}" for c in rec.commands), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print tox.ini, write it (``--write``) or check it (``--check``: exit 1 with a hint when it differs)."""
    parser = argparse.ArgumentParser(prog="python ci/tox_ini.py", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="replace tox.ini")
    mode.add_argument("--check", action="store_true", help="exit 1 when tox.ini is not what noxfile.py generates")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        TOX_INI.write_text(text, encoding="utf-8")
    elif args.check:
        if TOX_INI.read_text(encoding="utf-8") != text:
            print("tox.ini differs from what noxfile.py generates: run `python ci/tox_ini.py --write`", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
