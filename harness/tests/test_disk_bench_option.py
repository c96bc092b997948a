"""The DISK read benchmarks' file size option (--disk-bench-mib / HARNESS_DISK_BENCH_MIB)."""

from __future__ import annotations

import pytest

from harness.options import DISK_BENCH_DEFAULT_MIB, DISK_BENCH_ENV, disk_bench_bytes


class _Config:
    def __init__(self, value: str | None) -> None:
        self.value = value

    def getoption(self, name: str) -> str | None:
        assert name == "disk_bench_mib"
        return self.value


def test_the_option_wins_over_the_env_and_the_default_applies_without_either(monkeypatch):
    monkeypatch.setenv(DISK_BENCH_ENV, "64")
    assert disk_bench_bytes(_Config("1024")) == 1 << 30
    assert disk_bench_bytes(_Config(None)) == 64 << 20
    monkeypatch.delenv(DISK_BENCH_ENV)
    assert disk_bench_bytes(_Config(None)) == DISK_BENCH_DEFAULT_MIB << 20


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "1GiB"])
def test_values_that_are_not_a_positive_number_of_mib_are_usage_errors(monkeypatch, value):
    with pytest.raises(pytest.UsageError, match=r"--disk-bench-mib=.*: expected an integer >= 1"):
        disk_bench_bytes(_Config(value))
    monkeypatch.setenv(DISK_BENCH_ENV, value)
    with pytest.raises(pytest.UsageError, match=f"{DISK_BENCH_ENV}=.*: expected an integer >= 1"):
        disk_bench_bytes(_Config(None))
