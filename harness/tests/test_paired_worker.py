"""The benchmark worker keeps a module's fixtures for the next test of that module, and only then; its ``benchmark``
returns what pytest-benchmark's would."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.paired.engine import Side
from harness.paired.process import WorkerProcess, close_all
from harness.paired.session import PASSED, collected, finish, release_all, start

_QUIET = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q"]
_MODULE = """
import pytest

@pytest.fixture(scope="module")
def served():
    with open({events!r}, "a") as f:
        f.write("up {name}\\n")
    yield
    with open({events!r}, "a") as f:
        f.write("down {name}\\n")

def test_one(served):
    pass

def test_two(served):
    pass
"""


@pytest.fixture
def suite(tmp_path: Path) -> tuple[Path, Path]:
    """Two test modules whose module-scoped fixture logs its setups and teardowns, and that log."""
    events = tmp_path / "events.log"
    for name in ("mod_a", "mod_b"):
        (tmp_path / f"test_{name}.py").write_text(_MODULE.format(events=str(events), name=name))
    return tmp_path, events


def _run(suite: tuple[Path, Path], plan: list[tuple[str, bool]]) -> list[str]:
    """Run ``plan`` ((test, keep) in turn) on one real worker and return the fixture events, after it quit."""
    folder, events = suite
    worker = WorkerProcess("w", sys.executable, folder, [str(folder), *_QUIET], dict(os.environ), folder / "w.log")
    try:
        names = list(collected(worker).items)
        for test, keep in plan:
            if test == "release":
                release_all([worker])
                with (folder / "events.log").open("a") as log:
                    log.write("released\n")
                continue
            nodeid = next(n for n in names if n.endswith(test))
            done = start(worker, nodeid, keep)
            assert (done["ev"], done["outcome"]) == ("done", PASSED), done
    finally:
        close_all([worker])
    return events.read_text().split("\n")[:-1]


def test_a_module_is_set_up_once_for_its_tests_and_torn_down_when_another_module_starts(suite) -> None:
    events = _run(suite, [("test_mod_a.py::test_one", True), ("test_mod_a.py::test_two", True),
                          ("test_mod_b.py::test_one", True)])
    assert events == ["up mod_a", "down mod_a", "up mod_b", "down mod_b"]


def test_without_keep_a_test_is_torn_down_completely(suite) -> None:
    events = _run(suite, [("test_mod_a.py::test_one", False), ("test_mod_a.py::test_two", False)])
    assert events == ["up mod_a", "down mod_a", "up mod_a", "down mod_a"]


def test_release_tears_down_what_a_worker_keeps(suite) -> None:
    events = _run(suite, [("test_mod_a.py::test_one", True), ("release", True), ("test_mod_a.py::test_two", True)])
    assert events == ["up mod_a", "down mod_a", "released", "up mod_a", "down mod_a"]


_BENCH = """
import itertools

def _counter():
    count = itertools.count(1)
    return lambda: next(count)

def test_single_calls(benchmark):
    fn = _counter()
    got = benchmark.pedantic(fn, setup=lambda: None, rounds=3, warmup_rounds=0)
    assert got == fn() - 1 == 3, got

def test_looped_calls(benchmark):
    fn = _counter()
    got = benchmark(fn)
    assert got == fn() - 1 == 11, got

def test_plain_single_calls(benchmark):
    fn = _counter()
    got = benchmark(fn)
    assert got == fn() - 1 == 3, got

def test_bad_warmup(benchmark):
    benchmark.pedantic(lambda: 1, iterations=2, warmup_rounds="2")
"""


def test_a_benchmark_returns_its_result_as_pytest_benchmark_does_and_says_its_warmup(tmp_path: Path) -> None:
    """pytest-benchmark's pedantic returns the last timed call's result when a round makes one call; after rounds of
    several, and always for ``benchmark(fn)``, it makes one more call for it; pedantic's ``warmup_rounds`` reaches the
    controller when the calls are fixed, and a bad one fails the test in pytest-benchmark's words. The test bodies
    assert the call counts (pedantic, 3 rounds of one call: 3; 2 rounds of 5: 10 and one more; plain, 2 of one: 3)."""
    (tmp_path / "test_bench_calls.py").write_text(_BENCH)
    worker = WorkerProcess("w", sys.executable, tmp_path, [str(tmp_path), *_QUIET], dict(os.environ), tmp_path / "w.log")
    try:
        names = list(collected(worker).items)
        single = start(worker, next(n for n in names if n.endswith("test_single_calls")))
        assert (single["ev"], single["iterations"], single["warmup_rounds"]) == ("ready", 1, 0)
        for _ in range(3):
            Side(worker).time(1)
        assert finish(worker).outcome == PASSED
        looped = start(worker, next(n for n in names if n.endswith("test_looped_calls")))
        assert (looped["ev"], looped["iterations"], looped["warmup_rounds"]) == ("ready", None, None)
        for _ in range(2):
            Side(worker).time(5)
        ended = finish(worker)
        assert ended.outcome == PASSED, ended.message
        plain = start(worker, next(n for n in names if n.endswith("test_plain_single_calls")))
        assert plain["ev"] == "ready"
        for _ in range(2):
            Side(worker).time(1)
        ended = finish(worker)
        assert ended.outcome == PASSED, ended.message
        bad = start(worker, next(n for n in names if n.endswith("test_bad_warmup")))
        assert (bad["ev"], bad["outcome"]) == ("done", "failed") and "positive int for `warmup_rounds`" in bad["message"]
    finally:
        close_all([worker])
