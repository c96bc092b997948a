"""The quiet-run progress line (harness.heartbeat), driven by a fake clock: no test here depends on real time."""

from __future__ import annotations

from types import SimpleNamespace

from harness.heartbeat import Heartbeat


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _report(nodeid: str, when: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, when=when)


def test_a_quiet_run_names_the_running_tests_longest_first():
    clock = _Clock()
    beat = Heartbeat(print, 60, clock)
    beat.pytest_runtest_logstart("t.py::slow", None)
    clock.now += 10
    beat.pytest_runtest_logstart("t.py::other", None)
    beat.pytest_runtest_logreport(_report("t.py::other", "setup"))
    clock.now += 59
    assert beat.check(clock.now) is None
    clock.now += 1
    assert beat.check(clock.now) == "harness: 60 s without a result; running: t.py::slow (70 s), t.py::other (60 s)"
    assert beat.check(clock.now + 59) is None  # the next line after another full quiet period
    assert beat.check(clock.now + 60).startswith("harness: 60 s without a result")


def test_finished_tests_leave_the_list_and_reset_the_silence():
    clock = _Clock()
    beat = Heartbeat(print, 60, clock)
    for name in ("a", "b", "c", "d", "e", "f"):
        beat.pytest_runtest_logstart(name, None)
    beat.pytest_runtest_logreport(_report("f", "teardown"))
    clock.now += 100
    assert beat.check(clock.now).endswith("running: a (100 s), b (100 s), c (100 s), d (100 s) and 1 more")
    for name in ("a", "b", "c", "d", "e"):
        beat.pytest_runtest_logreport(_report(name, "teardown"))
    assert beat.check(clock.now + 1000) is None  # nothing running: nothing to say


def test_the_thread_writes_and_stops():
    lines: list[str] = []
    clock = _Clock()
    beat = Heartbeat(lines.append, 0.01, clock)
    beat.pytest_runtest_logstart("t", None)
    clock.now += 1
    beat.start()
    beat.stop()  # joins: whatever it wrote is in lines, and it writes nothing after
    assert all(line.startswith("harness: ") for line in lines)


def test_a_bad_quiet_time_is_a_usage_error(fake_pytester, monkeypatch):
    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "soon")
    fake_pytester.makepyfile("def test_x():\n    pass\n")
    result = fake_pytester.runpytest()
    assert result.ret == 4  # pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: HARNESS_HEARTBEAT_S='soon': expected seconds >= 0*"])
