"""Per-backend outcome counts of a session, and the guard that a strict run really executed each backend.

Each test report carries its backend (the ``device`` parameter) in ``user_properties``, so the counts are right under
pytest-xdist too: the controller sees every worker's reports. The terminal summary prints one line per backend; with
``--strict-backends`` a requested backend none of whose tests executed (all skipped or deselected) fails the session,
and with ``--require-tests`` (env ``HARNESS_REQUIRE_TESTS=1``, set by every CI job) so does a session in which no test
executed at all, so a CI job cannot go green while silently testing nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

__all__ = ["BACKEND_PROPERTY", "BackendCounts", "backend_of"]

BACKEND_PROPERTY = "harness_backend"


def backend_of(item: pytest.Item) -> str | None:
    """The backend a test instance runs on (its ``device`` parameter), or ``None`` for tests without one."""
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("device") if callspec is not None else None
    return name if isinstance(name, str) else None


class BackendCounts:
    """Counts passed / failed / skipped tests per backend from the reports of a session (a pytest plugin object)."""

    def __init__(self) -> None:
        self.counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.total: Counter[str] = Counter()
        """Outcomes of every test, with or without a backend."""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = _outcome(report)
        elif report.when == "teardown" and report.failed:
            outcome = "error"
        else:
            return
        self.total[outcome] += 1
        if isinstance(backend := dict(report.user_properties).get(BACKEND_PROPERTY), str):
            self.counts[backend][outcome] += 1

    @property
    def executed_total(self) -> int:
        """Tests that ran (passed, failed or errored), on any backend or none."""
        return self.total["passed"] + self.total["failed"] + self.total["error"]

    def executed(self, backend: str) -> int:
        c = self.counts.get(backend, Counter())
        return c["passed"] + c["failed"] + c["error"]

    def lines(self) -> list[str]:
        out = []
        for backend in sorted(self.counts):
            c = self.counts[backend]
            out.append(f"{backend}: {self.executed(backend)} executed ({c['passed']} passed, {c['failed']} failed, "
                       f"{c['error']} errors), {c['skipped']} skipped")
        return out

    def unexecuted(self, requested: list[str]) -> list[str]:
        """The backends of ``requested`` none of whose tests executed."""
        return [b for b in requested if self.executed(b) == 0]


def _outcome(report: Any) -> str:
    if report.passed:
        return "passed"
    if report.skipped:
        return "skipped"
    return "failed" if report.when == "call" else "error"
