"""Print, after a CI run, the end of each failed nox session's output, so the last screen of the log says what broke.

CI shows only the last part of a long log, and nox ends with the sessions' one-line results: a session that failed
early (e.g. `images`, whose job table sits minutes above the end) would leave no trace of why. Usage:

    python3 ci/failure_digest.py REPORT.json LOG [LINES]

REPORT.json is nox's ``--report`` file, LOG the run's whole output (``tee``); LINES (default 60) how many of each
failed session's last lines to print. Prints nothing when every session passed. Exit status 0, or 2 when an input
cannot be read (the run's own exit status is the CI result, not this script's).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SESSION_START = re.compile(r"^nox > Running session (\S+)\s*$")


def sections(log: str) -> dict[str, list[str]]:
    """Each session's lines in ``log``, keyed by session name (nox's "Running session NAME" starts each)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in log.splitlines():
        if (start := SESSION_START.match(line)) is not None:
            current = found.setdefault(start.group(1), [])
        if current is not None:
            current.append(line)
    return found


def failed(report: dict[str, object]) -> list[str]:
    """Names of the sessions nox's report marks as failed."""
    sessions = report.get("sessions", [])
    return [s["name"] for s in sessions if isinstance(s, dict) and s.get("result") == "failed"] \
        if isinstance(sessions, list) else []


def digest(report: dict[str, object], log: str, lines: int) -> str:
    """The text to print: for each failed session, a heading and its last ``lines`` lines ('' when none failed)."""
    names = failed(report)
    if not names:
        return ""
    by_name = sections(log)
    parts = [f"== CI: {len(names)} session(s) failed: {', '.join(names)}; the end of each one's output follows =="]
    for name in names:
        tail = by_name.get(name, ["(no output of this session in the log)"])[-lines:]
        parts += [f"---- {name} (last {len(tail)} lines) ----", *tail]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        report = json.loads(Path(argv[0]).read_text())
        log = Path(argv[1]).read_text(errors="replace")
        lines = int(argv[2]) if len(argv) == 3 else 60
    except (OSError, ValueError) as e:
        print(f"failure_digest: {e}", file=sys.stderr)
        return 2
    text = digest(report, log, lines)
    if text:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
