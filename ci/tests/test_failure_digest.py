"""ci/failure_digest.py: the end of each failed nox session's output, printed again at the end of a CI log."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import failure_digest  # noqa: E402

LOG = "\n".join([
    "nox > Running session tests-cpu", "collected 3 items", "3 passed",
    "nox > Session tests-cpu was successful in 2 seconds.",
    "nox > Running session images", *[f"line {i}" for i in range(100)], "| mockgpu | exited 1 |",
    "nox > Session images failed.",
    "nox > Running session lint", "ok", "nox > Ran 3 sessions in 1 minute:",
])
REPORT = {"sessions": [{"name": "tests-cpu", "result": "success"}, {"name": "images", "result": "failed"},
                       {"name": "lint", "result": "success"}]}


def test_only_the_failed_sessions_tail_is_printed():
    text = failure_digest.digest(REPORT, LOG, 5).splitlines()
    assert text[0].startswith("== CI: 1 session(s) failed: images")
    assert text[1:] == ["---- images (last 5 lines) ----", "line 97", "line 98", "line 99", "| mockgpu | exited 1 |",
                        "nox > Session images failed."]


def test_nothing_is_printed_when_every_session_passed():
    assert failure_digest.digest({"sessions": [{"name": "lint", "result": "success"}]}, LOG, 5) == ""


def test_a_failed_session_missing_from_the_log_is_said(capsys, tmp_path):
    report, log = tmp_path / "r.json", tmp_path / "log"
    report.write_text('{"sessions": [{"name": "bench", "result": "failed"}]}')
    log.write_text(LOG)
    assert failure_digest.main([str(report), str(log)]) == 0
    assert "(no output of this session in the log)" in capsys.readouterr().out


def test_unreadable_input_is_exit_status_2(tmp_path, capsys):
    assert failure_digest.main([str(tmp_path / "missing.json"), str(tmp_path / "log")]) == 2
    assert "failure_digest:" in capsys.readouterr().err
