"""``python -m harness <command> ...``: one entry per command, each imported only when it runs."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

# command -> module whose ``main(argv, prog) -> int`` runs it
COMMANDS = {"bench": "harness.bench", "report": "harness.report.cli"}


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default: sys.argv[1:]) to its command and return the exit status (2 for a bad command)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        given = repr(args[0]) if args else "none"
        print(f"usage: python -m harness {{{','.join(COMMANDS)}}} ...; unknown command {given}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[args[0]])
    return int(module.main(args[1:], prog=f"python -m harness {args[0]}"))


if __name__ == "__main__":
    sys.exit(main())
