"""Bad options and misused markers of the harness plugin: a usage error or a failing test with a clear message, never
a silent skip, a silent no-op or a traceback through the plugin."""

from __future__ import annotations

import json

import pytest

PLAIN = "def test_plain():\n    pass\n"


def _no_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "harness/markers.py" not in text and "harness/options.py" not in text


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--backends", ""], "ERROR: --backends='': names no backend; give a comma-separated list such as CPU,PYTHON*"),
        (["--backends", " , "], "ERROR: --backends=' , ': names no backend*"),
        (["--harness-seed", "abc"], "ERROR: --harness-seed='abc': expected an integer seed or 'random'*"),
        (["--harness-seed=-1"], "ERROR: --harness-seed='-1': a seed must be >= 0*"),
    ],
)
def test_bad_options_stop_the_session_even_without_device_or_rng_tests(fake_pytester: pytest.Pytester, args, said):
    # they were ignored when no test used the fixtures, and a collection error with a traceback under -q
    fake_pytester.makepyfile(PLAIN)
    result = fake_pytester.runpytest("-q", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([said])
    _no_traceback(result)


def test_bad_env_seed_stops_an_xdist_session(fake_pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_SEED", "0xZZ")
    fake_pytester.makepyfile(PLAIN)
    result = fake_pytester.runpytest_subprocess("-q", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: HARNESS_SEED='0xZZ': expected an integer seed or 'random'*"])


@pytest.mark.parametrize(
    ("mark", "said"),
    [
        # backends() skipped the test on every backend ("restricted to backends  by ...")
        ("backends()", "@pytest.mark.backends() names no backend; give names such as backends('CPU', 'PYTHON')"),
        # a typo skipped the test everywhere without a word
        ("backends('FAKEOKK')", "@pytest.mark.backends names 'FAKEOKK', which is no backend; did you mean 'FAKEOK'? "
                                "registered: FAKEARGS, FAKEBAD, FAKELOCAL, FAKEOK"),
        ("skip_backends()", "@pytest.mark.skip_backends() names no backend*"),
        ("skip_backends('PYTHN', reason='x')", "@pytest.mark.skip_backends names 'PYTHN', which is no backend; did you "
                                               "mean 'PYTHON'?*"),
        ("backends(['FAKEOK'])", "@pytest.mark.backends takes backend names as non-empty strings, got ['FAKEOK']"),
        ("backends('')", "@pytest.mark.backends takes backend names as non-empty strings, got ''"),
    ],
)
def test_misused_backend_markers_fail_collection_naming_the_test(fake_pytester: pytest.Pytester, mark, said):
    fake_pytester.makepyfile(f"import pytest\n\n@pytest.mark.{mark}\ndef test_marked(device):\n    pass\n")
    result = fake_pytester.runpytest("-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"test_misused_backend_markers_fail_collection_naming_the_test.py::test_marked: {said}"])
    _no_traceback(result)


def test_a_project_backend_that_is_not_installed_skips_with_the_reason(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("import pytest\n\n@pytest.mark.backends('CUDA')\ndef test_marked(device):\n    pass\n")
    result = fake_pytester.runpytest("-q", "-rs", "--backends", "FAKEOK")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*restricted to backends CUDA by @pytest.mark.backends (CUDA: not installed, no backend "
                                 "registered under that name)*"])


def test_backend_marker_names_are_case_insensitive(fake_pytester: pytest.Pytester) -> None:
    fake_pytester.makepyfile("import pytest\n\n@pytest.mark.backends('fakeok')\ndef test_marked(device):\n    pass\n")
    result = fake_pytester.runpytest("-q", "--backends", "FAKEOK,FAKELOCAL")
    result.assert_outcomes(passed=1, skipped=1)


@pytest.mark.parametrize(
    ("mark", "said"),
    [
        ("needs_dtype('float32')", "@pytest.mark.needs_dtype takes runtime DTypes (dtypes.float16), got 'float32'"),
        # needs_dtype() did nothing
        ("needs_dtype()", "@pytest.mark.needs_dtype() names no dtype; give runtime DTypes such as dtypes.float16"),
    ],
)
def test_misused_needs_dtype_errors_the_test_without_traceback(fake_pytester: pytest.Pytester, mark, said):
    fake_pytester.makepyfile(f"import pytest\n\n@pytest.mark.{mark}\ndef test_marked(device):\n    pass\n")
    result = fake_pytester.runpytest("-q", "--backends", "FAKEOK")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*::test_marked[[]FAKEOK[]]: {said}"])
    _no_traceback(result)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("float('inf')", "threshold inf must be a fraction > 0*"),  # was accepted, then broke every report (exit 2)
        ("float('nan')", "threshold nan must be a fraction > 0*"),
        ("'abc'", "threshold 'abc' is not a number or a percent string like '10%'"),
        ("0.1, 0.2", "@pytest.mark.bench_threshold takes one fraction (0.25 = 25% slower), got (0.1, 0.2)"),
    ],
)
def test_bad_bench_threshold_fails_the_test_without_traceback(fake_pytester: pytest.Pytester, value, said):
    fake_pytester.makepyfile(f"import pytest\n\n@pytest.mark.bench_threshold({value})\n"
                             "def test_b(benchmark):\n    benchmark(lambda: None)\n")
    result = fake_pytester.runpytest("-q", "--benchmark-disable")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*::test_b: *{said}"])
    _no_traceback(result)


def test_bench_threshold_takes_a_percent_string_like_the_report(fake_pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # the report reads extra_info['threshold'] = '25%', but the marker refused it
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # pytest-benchmark disables itself inside xdist workers
    fake_pytester.makepyfile("import pytest\n\n@pytest.mark.bench_threshold('25%')\n"
                             "def test_b(benchmark):\n    benchmark(lambda: None)\n")
    out = fake_pytester.path / "bench.json"
    result = fake_pytester.runpytest(f"--benchmark-json={out}", "--benchmark-min-rounds=1", "--benchmark-max-time=0.001")
    result.assert_outcomes(passed=1)
    assert json.loads(out.read_text())["benchmarks"][0]["extra_info"] == {"threshold": 0.25}


def test_backend_markers_cover_every_device_of_the_backend(fake_pytester: pytest.Pytester) -> None:
    # with --backends FAKEOK:1, backends('FAKEOK') skipped the test and skip_backends('FAKEOK') did not skip it
    fake_pytester.makepyfile("""
import pytest

@pytest.mark.backends("FAKEOK")
def test_only_ok(device):
    pass

@pytest.mark.skip_backends("FAKEOK", reason="broken there")
def test_not_ok(device):
    pass

@pytest.mark.backends("FAKEOK:2")
def test_only_ok2(device):
    pass
""")
    result = fake_pytester.runpytest("-v", "-rs", "--backends", "FAKEOK:1,FAKELOCAL")
    result.assert_outcomes(passed=2, skipped=4)
    result.stdout.fnmatch_lines(["*test_only_ok[[]FAKEOK:1[]] PASSED*", "*test_not_ok[[]FAKELOCAL[]] PASSED*",
                                 "SKIPPED*FAKEOK:1 skipped by @pytest.mark.skip_backends: broken there"],
                                consecutive=False)
