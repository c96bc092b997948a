"""What ``harness bench`` checks before it runs: ``--out`` can take the reports (and an earlier run's are removed), and
one A/B run at a time uses a clone's ref checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bench import _cache_lock, _clear_reports
from harness.report import ReportInputError


def test_an_earlier_runs_reports_are_removed_before_a_run(tmp_path: Path) -> None:
    for name in ("report.md", "report.json", "ab/A.json", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("old")
    _clear_reports(tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["notes.txt"]  # the user's own file stays


def test_an_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(ReportInputError, match="--out"):
        _clear_reports(tmp_path / "f")


def test_a_second_ab_run_on_the_same_cache_is_refused(tmp_path: Path) -> None:
    with _cache_lock(tmp_path / "ab"):
        with pytest.raises(ReportInputError, match="another A/B run"):
            with _cache_lock(tmp_path / "ab"):
                pass
    with _cache_lock(tmp_path / "ab"):  # released: the next run may go
        pass
