"""Black-box tests of the harness markers: restriction, capabilities, bench_threshold, bigmem opt-in."""

from __future__ import annotations

import json

import pytest


def test_markers_are_registered_with_descriptions(fake_pytester: pytest.Pytester) -> None:
    result = fake_pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.backends(*names): run this test only on these backends*",
                                 "@pytest.mark.skip_backends(*names, reason=None):*",
                                 "@pytest.mark.needs_local:*", "@pytest.mark.needs_dtype(*dtypes):*",
                                 "@pytest.mark.bench_threshold(fraction):*", "@pytest.mark.bigmem:*"])


def test_backends_marker_restricts_and_skip_backends_excludes(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("""
import pytest

@pytest.mark.backends("fakelocal")
def test_only_local(device):
    assert device == "FAKELOCAL"

@pytest.mark.skip_backends("FAKELOCAL", reason="known bug #12")
def test_not_local(device):
    assert device == "FAKEOK"

pytestmark = pytest.mark.backends("FAKEOK", "FAKELOCAL")

def test_module_restriction(device):
    pass
""")
    result = fake_pytester.runpytest("-rs", "--strict-markers", "--backends", "FAKEOK,FAKELOCAL,FAKEARGS")
    result.assert_outcomes(passed=4, skipped=5)
    result.stdout.fnmatch_lines([
        "SKIPPED*test restricted to backends FAKELOCAL by @pytest.mark.backends",
        "SKIPPED*FAKELOCAL skipped by @pytest.mark.skip_backends: known bug #12",
        "SKIPPED*test restricted to backends FAKELOCAL, FAKEOK by @pytest.mark.backends"], consecutive=False)


def test_capability_markers_skip_with_reason(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("""
import pytest
from runtime_core import dtypes

@pytest.mark.needs_local
def test_local(device):
    assert device == "FAKELOCAL"

@pytest.mark.needs_dtype(dtypes.float16, dtypes.int32)
def test_half(device):
    assert device == "FAKELOCAL"

@pytest.mark.needs_dtype(dtypes.float32)
def test_single(device):
    pass
""")
    result = fake_pytester.runpytest("-rs", "--backends", "FAKEOK,FAKELOCAL")
    result.assert_outcomes(passed=4, skipped=2)
    result.stdout.fnmatch_lines([
        "SKIPPED*FAKEOK lacks local memory/thread ids (has_local=False, has_shared=False); test marked needs_local",
        "SKIPPED*FAKEOK does not support dtype(s) float16; test marked needs_dtype"], consecutive=False)


def test_needs_dtype_rejects_non_dtypes(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("""
import pytest

@pytest.mark.needs_dtype("float16")
def test_half(device):
    pass
""")
    result = fake_pytester.runpytest("--backends", "FAKEOK")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*needs_dtype takes runtime DTypes*"])


def test_bench_threshold_lands_in_benchmark_extra_info(fake_pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # pytest-benchmark disables itself inside xdist workers
    fake_pytester.makepyfile("""
import pytest

@pytest.mark.bench_threshold(0.25)
def test_fast(benchmark):
    benchmark(lambda: None)

def test_plain(benchmark):
    benchmark(lambda: None)
""")
    out = fake_pytester.path / "bench.json"
    result = fake_pytester.runpytest(f"--benchmark-json={out}", "--benchmark-min-rounds=1", "--benchmark-max-time=0.001")
    result.assert_outcomes(passed=2)
    extra = {b["name"]: b["extra_info"] for b in json.loads(out.read_text())["benchmarks"]}
    assert extra == {"test_fast": {"threshold": 0.25}, "test_plain": {}}


def test_bench_threshold_must_be_positive(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("""
import pytest

@pytest.mark.bench_threshold(-1)
def test_bad(benchmark):
    benchmark(lambda: None)
""")
    result = fake_pytester.runpytest("--benchmark-disable")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*test_bad: @pytest.mark.bench_threshold: threshold -1 must be a fraction > 0*"])


def test_bench_role_and_group_template_land_in_the_saved_run(fake_pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    fake_pytester.makepyfile("""
import pytest

@pytest.mark.benchmark(group="copy-{size}")
@pytest.mark.parametrize("size", ["4KiB"])
def test_entry(benchmark, size):
    benchmark(lambda: None)

@pytest.mark.benchmark(group="copy-{size}")
@pytest.mark.parametrize("size", ["4KiB"])
@pytest.mark.bench_role("limit", reference="numpy.copyto")
def test_limit(benchmark, size):
    benchmark(lambda: None)

@pytest.mark.bench_role("peer", peer="numba")
def test_peer(benchmark):
    benchmark(lambda: None)
""")
    out = fake_pytester.path / "bench.json"
    result = fake_pytester.runpytest(f"--benchmark-json={out}", "--benchmark-min-rounds=1", "--benchmark-max-time=0.001")
    result.assert_outcomes(passed=3)
    found = {b["name"]: (b["group"], b["extra_info"]) for b in json.loads(out.read_text())["benchmarks"]}
    assert found == {
        "test_entry[4KiB]": ("copy-4KiB", {}),
        "test_limit[4KiB]": ("copy-4KiB", {"role": "limit", "limit": True, "reference": "numpy.copyto"}),
        "test_peer": (None, {"role": "peer", "limit": False, "peer": "numba"}),
    }


@pytest.mark.parametrize(("mark", "said"), [
    ('bench_role("host")', "role 'host' is not one of entry, limit, peer"),
    ('bench_role("limit")', "bench_role('limit') needs reference='...' saying what it measures"),
    ('bench_role("entry", peer="x")', "bench_role('entry') takes no peer="),
])
def test_bench_role_misuse_fails_the_test_with_the_reason(fake_pytester: pytest.Pytester, mark: str, said: str) -> None:
    fake_pytester.makepyfile(f"""
import pytest

@pytest.mark.{mark}
def test_bad(benchmark):
    benchmark(lambda: None)
""")
    result = fake_pytester.runpytest("--benchmark-disable")
    assert result.ret != 0
    result.stdout.fnmatch_lines([f"*test_bad: @pytest.mark.{said}*" if "role '" not in said else f"*{said}*"])


@pytest.mark.parametrize("args", ["0", "'2'", "True", "1, 2", "n=2", "2, backends='CPU'", "2, devices=['CPU']"])
def test_bench_threads_misuse_fails_the_test_with_the_reason(fake_pytester: pytest.Pytester, args: str) -> None:
    fake_pytester.makepyfile(f"""
import pytest

@pytest.mark.bench_threads({args})
def test_bad(benchmark):
    benchmark(lambda: None)
""")
    result = fake_pytester.runpytest("--benchmark-disable")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*test_bad: @pytest.mark.bench_threads takes one int >= 1 (threads run at once) and "
                                 "optionally backends=?names? (where it runs them)*"])


BIGMEM_TEST = """
import pytest

@pytest.mark.bigmem
def test_huge():
    pass
"""


def test_bigmem_is_skipped_unless_enabled(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(BIGMEM_TEST)
    result = fake_pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*needs > 2 GiB of memory; enable with --run-bigmem or HARNESS_RUN_BIGMEM=1"])
    fake_pytester.runpytest("--run-bigmem").assert_outcomes(passed=1)


def test_bigmem_env_enables(fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pytester.makepyfile(BIGMEM_TEST)
    monkeypatch.setenv("HARNESS_RUN_BIGMEM", "1")
    fake_pytester.runpytest().assert_outcomes(passed=1)


RESTRICTED_MODULE = """
import pytest

pytestmark = pytest.mark.backends("FAKEOK")


def test_a(device):
    pass


def test_b(device):
    pass


def test_c(device):
    pass
"""


def test_backend_skips_are_one_summary_line_per_reason(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile(RESTRICTED_MODULE)
    result = fake_pytester.runpytest("-rs", "--backends", "FAKEOK,FAKELOCAL")
    result.assert_outcomes(passed=3, skipped=3)
    skips = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert len(skips) == 1 and skips[0].startswith("SKIPPED [3] ")
    assert skips[0].endswith("test restricted to backends FAKEOK by @pytest.mark.backends")
