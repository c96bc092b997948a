"""The one error type of the report tool: input that cannot be used."""

from __future__ import annotations


class ReportInputError(ValueError):
    """An input of the report (a file, a field, an option) is unusable.

    The message is one line that names the input, what was wrong with it and what to do; the command line prints it
    and exits with status 2.
    """


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (ending in '...') when longer, so that one message stays one line."""
    return text if len(text) <= limit else text[:limit - 3] + "..."
