"""Black-box tests of backend selection: --backends, HARNESS_BACKENDS, defaults, strict mode, header, xdist."""

from __future__ import annotations

import pytest

DEVICE_TEST = """
def test_dev(device):
    assert device.startswith("FAKE")
"""


def test_default_is_every_default_backend_that_opens(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_dev?FAKEOK? PASSED*", "*test_dev?FAKELOCAL? PASSED*"])
    result.stdout.fnmatch_lines(["harness backends (default): FAKEOK, FAKELOCAL; "
                                 "unavailable: FAKEBAD (no fake hardware in this machine)"])
    result.stdout.no_fnmatch_line("*FAKEARGS*")  # no default priority: never a default


def test_option_selects_and_orders_backends(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("-v", "--backends", "fakelocal,FAKEARGS")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["harness backends (requested): FAKELOCAL, FAKEARGS",
                                 "*test_dev?FAKELOCAL? PASSED*", "*test_dev?FAKEARGS? PASSED*"])


def test_env_selects_backends_and_option_wins(fake_pytester: pytest.Pytester,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    monkeypatch.setenv("HARNESS_BACKENDS", "FAKEARGS")
    fake_pytester.runpytest("-v").stdout.fnmatch_lines(["*test_dev?FAKEARGS? PASSED*"])
    result = fake_pytester.runpytest("-v", "--backends", "FAKEOK")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_dev?FAKEOK? PASSED*"])


def test_unavailable_requested_backend_is_skipped_with_reason(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("-rs", "--backends", "FAKEOK,FAKEBAD,NOPE")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "harness backends (requested): FAKEOK; unavailable: FAKEBAD (no fake hardware in this machine); "
        "NOPE (unknown device 'NOPE'; registered backends: FAKEARGS, FAKEBAD, FAKELOCAL, FAKEOK)",
        "SKIPPED*FAKEBAD unavailable: no fake hardware in this machine",
        "SKIPPED*NOPE unavailable: unknown device 'NOPE'*"])


def test_strict_backends_fails_the_session_with_the_reason(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("--backends", "FAKEOK,FAKEBAD", "--strict-backends")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--strict-backends: requested backend(s) unavailable:",
                                 "*FAKEBAD: no fake hardware in this machine"])
    result.stdout.no_fnmatch_line("*passed*")


def test_strict_backends_passes_when_all_open(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("--backends", "FAKEOK", "--strict-backends")
    result.assert_outcomes(passed=1)


def test_empty_backend_list_is_a_usage_error(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("--backends", " , ")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*names no backend*"])


def test_no_usable_backend_skips_with_reason(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST)
    result = fake_pytester.runpytest("-rs", "--backends", "FAKEBAD")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*FAKEBAD unavailable: no fake hardware in this machine"])


def test_tests_without_device_do_not_parametrize(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("def test_plain():\n    pass\n")
    fake_pytester.runpytest("-v").stdout.fnmatch_lines(["*test_plain PASSED*"])


def test_xdist_workers_parametrize_identically(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(DEVICE_TEST + """
import pytest

@pytest.mark.parametrize("k", range(6))
def test_many(device, k):
    pass
""")
    result = fake_pytester.runpytest_subprocess("-n", "2", "--backends", "FAKEOK,FAKELOCAL,FAKEBAD")
    result.assert_outcomes(passed=14, skipped=7)
