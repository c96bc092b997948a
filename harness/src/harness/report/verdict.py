"""The outcome of one benchmark's comparison."""

from __future__ import annotations

from enum import Enum

__all__ = ["Verdict"]


class Verdict(str, Enum):
    """The outcome for one benchmark (keyed by fullname): compared on both sides, or present on one side only;
    UNJUDGED: compared, but its rounds cannot be trusted (A/B: a multi-threaded benchmark whose CPUs other programs
    used, ``harness.report.compare``)."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    UNJUDGED = "unjudged"
    NEW = "new"
    MISSING = "missing"
