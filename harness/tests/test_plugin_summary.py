"""Per-backend counts in the terminal summary, and --strict-backends failing a run that executed nothing on a backend."""

from __future__ import annotations

import pytest

TWO_TESTS = """
import pytest

def test_a(device):
    pass

@pytest.mark.skip_backends("FAKELOCAL", reason="not there")
def test_b(device):
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_the_summary_counts_each_backend(fake_pytester: pytest.Pytester, workers: list[str]) -> None:
    fake_pytester.makepyfile(TWO_TESTS)
    result = fake_pytester.runpytest_subprocess("--backends", "FAKEOK,FAKELOCAL", *workers)
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines(["*harness: tests per backend*",
                                 "FAKELOCAL: 1 executed (1 passed, 0 failed, 0 errors), 1 skipped",
                                 "FAKEOK: 2 executed (2 passed, 0 failed, 0 errors), 0 skipped"])


def test_strict_run_fails_when_a_backend_executed_nothing(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("import pytest\n\n@pytest.mark.skip_backends('FAKELOCAL', reason='x')\n"
                             "def test_b(device):\n    pass\n")
    result = fake_pytester.runpytest_subprocess("--backends", "FAKEOK,FAKELOCAL", "--strict-backends")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*--strict-backends: no test executed on FAKELOCAL (all skipped or deselected)*"])


def test_strict_run_that_deselects_everything_fails(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TWO_TESTS)
    result = fake_pytester.runpytest_subprocess("--backends", "FAKEOK", "--strict-backends", "-k", "nothing")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no test ran on any backend*", "*no test executed on FAKEOK*"])


def test_strict_run_that_executed_every_backend_passes(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(TWO_TESTS)
    result = fake_pytester.runpytest_subprocess("--backends", "FAKEOK,FAKELOCAL", "--strict-backends")
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("how", ["option", "env"])
def test_require_tests_fails_a_run_that_executed_nothing(fake_pytester: pytest.Pytester, monkeypatch, how) -> None:
    fake_pytester.makepyfile("import pytest\n\n@pytest.mark.skip(reason='x')\ndef test_plain():\n    pass\n")
    args = ["--require-tests"] if how == "option" else []
    if how == "env":
        monkeypatch.setenv("HARNESS_REQUIRE_TESTS", "1")
    result = fake_pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*--require-tests (HARNESS_REQUIRE_TESTS=1): no test executed*"])


def test_require_tests_passes_when_something_ran(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("def test_plain():\n    pass\n")
    assert fake_pytester.runpytest_subprocess("--require-tests").ret == pytest.ExitCode.OK


def test_require_tests_on_an_empty_collection_fails_not_exit_5(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("x = 1\n")
    assert fake_pytester.runpytest_subprocess("--require-tests").ret == pytest.ExitCode.TESTS_FAILED
