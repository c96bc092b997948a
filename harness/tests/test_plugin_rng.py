"""Black-box tests of the seeded ``rng`` fixture: stable defaults, fixed and random seeds, seed in failure reports."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

PRINTING = """
def test_a(rng):
    print("DRAW", rng.integers(2**62))

def test_b(rng):
    print("DRAW", rng.integers(2**62))
"""


def _draws(result: pytest.RunResult) -> list[int]:
    return [int(m) for m in re.findall(r"DRAW (\d+)", result.stdout.str())]


def test_default_seed_is_stable_per_test_and_differs_between_tests(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(test_seeds=PRINTING)
    first, second = _draws(fake_pytester.runpytest("-s")), _draws(fake_pytester.runpytest("-s"))
    assert first == second and len(first) == 2
    assert first[0] != first[1]
    seed_a = int.from_bytes(hashlib.sha256(b"test_seeds.py::test_a").digest()[:4], "little")
    assert first[0] == np.random.default_rng(seed_a).integers(2**62)


@pytest.mark.parametrize("how", ["option", "env"])
def test_fixed_seed_applies_to_every_test(fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                          how: str) -> None:
    fake_pytester.makepyfile(PRINTING)
    if how == "env":
        monkeypatch.setenv("HARNESS_SEED", "1234")
        result = fake_pytester.runpytest("-s")
    else:
        result = fake_pytester.runpytest("-s", "--harness-seed", "1234")
    expected = int(np.random.default_rng(1234).integers(2**62))
    assert _draws(result) == [expected, expected]


def test_random_seed_opts_out_of_determinism(fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pytester.makepyfile(PRINTING)
    monkeypatch.setenv("HARNESS_SEED", "random")
    runs = [_draws(fake_pytester.runpytest("-s")) for _ in range(2)]
    assert runs[0] != runs[1]  # 2 x 62 random bits: a collision is practically impossible


def test_bad_seed_is_a_usage_error(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(PRINTING)
    result = fake_pytester.runpytest("--harness-seed", "abc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --harness-seed='abc': expected an integer seed or 'random'*"])


def test_seed_is_printed_on_failure_and_reproduces(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("""
def test_fails(rng):
    value = int(rng.integers(1000))
    print("VALUE", value)
    assert value < 0

def test_passes_without_rng():
    pass
""")
    result = fake_pytester.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    text = result.stdout.str()
    seed_match, value_match = re.search(r"rng seed (\d+); reproduce with --harness-seed=\d+", text), \
        re.search(r"VALUE (\d+)", text)
    assert seed_match is not None and value_match is not None
    seed, value = int(seed_match.group(1)), int(value_match.group(1))
    again = fake_pytester.runpytest("-s", f"--harness-seed={seed}")
    assert f"VALUE {value}" in again.stdout.str()
    assert text.count("rng seed") == 1
