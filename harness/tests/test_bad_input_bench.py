"""Bad input to ``python -m harness bench``: refused before the benchmarks run where possible, never taken silently as
"no baseline", and an error says how to recover."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_bench_runner import MACHINE, FakePytest, suite

from harness import bench


@pytest.fixture
def runner(monkeypatch) -> FakePytest:
    """A fake pytest run that writes one good benchmark file."""
    monkeypatch.delenv(bench.BASELINE_DIR_ENV, raising=False)
    fake = FakePytest(suite(1))
    monkeypatch.setattr(bench.subprocess, "run", fake)
    return fake


def _err_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_baseline_dir_that_is_a_file_is_refused_before_the_benchmarks_run(tmp_path, runner, capsys):
    # it was taken as "no baseline" (exit 0, every benchmark new), or failed only after the run with --save-baseline
    (tmp_path / "base").write_text("not a directory")

    status = bench.main(["--out", str(tmp_path / "out"), "--baseline-dir", str(tmp_path / "base"), "--save-baseline"])

    assert status == 2 and runner.commands == []
    err = _err_line(capsys)
    assert err == (f"harness bench: error: --baseline-dir {str(tmp_path / 'base')!r} is not a directory; point it at a "
                   "directory of <machine_id>.json baselines (one that does not exist yet is created)\n")
    assert (tmp_path / "base").read_text() == "not a directory"


def test_baseline_dir_env_that_is_a_file_is_refused_naming_the_variable(tmp_path, runner, capsys, monkeypatch):
    (tmp_path / "base").write_text("")
    monkeypatch.setenv(bench.BASELINE_DIR_ENV, str(tmp_path / "base"))

    assert bench.main(["--out", str(tmp_path / "out")]) == 2

    assert runner.commands == []
    assert _err_line(capsys).startswith(f"harness bench: error: ${bench.BASELINE_DIR_ENV} {str(tmp_path / 'base')!r}")


def test_corrupt_baseline_error_says_how_to_recover_and_keeps_it(tmp_path, runner, capsys):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / f"{MACHINE}.json").write_text('{"machine_info": ')

    assert bench.main(["--out", str(tmp_path / "out"), "--baseline-dir", str(tmp_path / "base"), "--save-baseline"]) == 2

    err = _err_line(capsys)
    assert "is not valid JSON" in err and err.rstrip().endswith(
        "this is the machine's stored baseline: fix or delete it, then rerun with --save-baseline")
    assert (tmp_path / "base" / f"{MACHINE}.json").read_text() == '{"machine_info": '


def test_corrupt_earlier_run_error_says_how_to_set_it_aside(tmp_path, runner, capsys):
    runs = tmp_path / "out" / "runs"
    runs.mkdir(parents=True)
    (runs / "20000101T000000Z.json").write_text("{")  # e.g. a run killed while pytest-benchmark wrote it

    assert bench.main(["--out", str(tmp_path / "out"), "--baseline-dir", str(tmp_path / "base")]) == 2

    err = _err_line(capsys)
    assert "20000101T000000Z.json" in err and "rename it to <name>.json.failed (or delete it)" in err


class EmptyRunFile(FakePytest):
    """pytest-benchmark opens --benchmark-json when it parses the options, so a failed run leaves an empty file."""

    def __call__(self, command: list[str], check: bool, env: dict[str, str]) -> subprocess.CompletedProcess:
        [target] = [arg.split("=", 1)[1] for arg in command if arg.startswith("--benchmark-json=")]
        Path(target).touch()
        return subprocess.CompletedProcess(command, self.status)


def test_empty_run_file_of_a_failed_run_is_removed_not_called_partial_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench.subprocess, "run", EmptyRunFile(None, status=4))

    assert bench.main(["--out", str(tmp_path / "out"), "--baseline-dir", str(tmp_path / "base")]) == 4

    err = capsys.readouterr().err
    assert "pytest exited with status 4" in err and "partial results" not in err
    assert list((tmp_path / "out" / "runs").iterdir()) == []


def test_bench_option_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--threshold", "0", "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert _err_line(capsys) == ("python -m harness bench: error: argument --threshold: threshold '0' must be a fraction "
                                 "> 0 (e.g. 0.1 or '10%'); see python -m harness bench --help\n")


@pytest.mark.parametrize("value", ["0", "-3", "two", "1.5"])
def test_keep_runs_below_one_or_not_an_integer_is_refused(tmp_path, runner, capsys, value):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--out", str(tmp_path / "out"), "--keep-runs", value])

    assert exit_info.value.code == 2 and runner.commands == []
    err = _err_line(capsys)
    assert f"argument --keep-runs: must be an integer >= 1 (the new run is always kept), got {value!r}" in err
