"""``python -m harness <command> ...``: one entry per command, each imported only when it runs."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

# command -> module whose ``main(argv, prog) -> int`` runs it
COMMANDS = {"bench": "harness.bench", "report": "harness.report.cli"}


_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a program stopped by Ctrl-C
_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader went away (`... | head`)
USAGE = f"usage: python -m harness {{{','.join(COMMANDS)}}} ... (python -m harness COMMAND --help for its options)"


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default: sys.argv[1:]) to its command and return the exit status.

    ``-h``/``--help`` print the usage on stdout (status 0); a missing or unknown command prints it on stderr as one
    line naming what was given (status 2). A Ctrl-C while the command's modules import prints one line (status 130).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if not args or args[0] not in COMMANDS:
        given = f"unknown command {args[0]!r}" if args else "no command given"
        print(f"{USAGE}; {given}", file=sys.stderr)
        return 2
    try:  # the command's imports (numpy, scipy, ...) take a while: a Ctrl-C there is one line too, like in the command
        module = importlib.import_module(COMMANDS[args[0]])
    except KeyboardInterrupt:
        print(f"python -m harness {args[0]}: interrupted (Ctrl-C) while starting; nothing was run", file=sys.stderr)
        return _INTERRUPTED
    return int(module.main(args[1:], prog=f"python -m harness {args[0]}"))


def run() -> int:
    """``main`` for a process: a reader that stops reading (``| head``) ends it quietly with status 141, not a
    traceback; the reports already written stay."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit does not raise again
        return _BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(run())
