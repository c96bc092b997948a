"""``python -m harness bench`` with the pytest run replaced by a fake that writes synthetic pytest-benchmark JSON."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import test_report_synth as synth

from harness import bench
from harness.__main__ import main as harness_main
from harness.report import compare, machine_id
from harness.report.groups import limit_ratios
from harness.report.render_text import render_text

COPY = "test_bench_copy.py::test_copy[CPU-1MiB]"
LAUNCH = "test_bench_launch.py::test_launch[CPU]"
MACHINE = machine_id(synth.run([])["machine_info"])
NO_BASELINE = (
    f"no baseline for machine {MACHINE}: this run can become the baseline with `nox -s bench -- --save-baseline`"
)


def suite(seed: int, copy_factor: float = 1.0, **run_kw) -> dict:
    """A run of COPY (median ~1 ms times ``copy_factor``) and LAUNCH (~20 us), 60 noisy rounds each."""
    rng = np.random.default_rng(seed)
    return synth.run(
        [
            synth.benchmark(COPY, synth.rounds(rng, 1e-3 * copy_factor)),
            synth.benchmark(LAUNCH, synth.rounds(rng, 20e-6)),
        ],
        **run_kw,
    )


class FakePytest:
    """Stands in for ``subprocess.run`` of pytest: writes ``doc`` to the --benchmark-json path, returns ``status``."""

    def __init__(self, doc: dict | None, status: int = 0) -> None:
        self.doc, self.status = doc, status
        self.commands: list[list[str]] = []
        self.envs: list[dict[str, str]] = []

    def __call__(self, command: list[str], check: bool, env: dict[str, str]) -> subprocess.CompletedProcess:
        self.commands.append(command)
        self.envs.append(env)
        [target] = [arg.split("=", 1)[1] for arg in command if arg.startswith("--benchmark-json=")]
        if self.doc is not None:
            synth.write(Path(target), self.doc)
        return subprocess.CompletedProcess(command, self.status)


@pytest.fixture
def fake(monkeypatch):
    """``fake(doc, status=0)`` installs a FakePytest for the next bench runs and returns it."""
    monkeypatch.delenv(bench.BASELINE_DIR_ENV, raising=False)

    def install(doc: dict | None, status: int = 0) -> FakePytest:
        runner = FakePytest(doc, status)
        monkeypatch.setattr(bench.subprocess, "run", runner)
        return runner

    return install


def run_bench(tmp_path: Path, *args: str) -> int:
    return bench.main(["--out", str(tmp_path / "out"), "--baseline-dir", str(tmp_path / "base"), *args])


def report_json(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "report.json").read_text())


def test_without_baseline_every_benchmark_is_new_and_the_way_to_save_one_is_printed(tmp_path, fake, capsys):
    runner = fake(suite(1))

    status = run_bench(tmp_path, "--", "--backends", "CPU", "-k", "copy")

    assert status == 0
    [command] = runner.commands
    assert command[1:] == [
        "-m", "pytest", "--pyargs", "harness.benchmarks", "-p", "no:xdist", "-p", "no:cacheprovider",
        "--benchmark-only", "--benchmark-min-time=0.0005", "--benchmark-max-time=1.0", command[12], "-v",
        "--backends", "CPU", "-k", "copy",
    ]  # fmt: skip
    assert command[12].startswith(f"--benchmark-json={tmp_path / 'out' / 'runs'}/") and command[12].endswith("Z.json")
    [env] = runner.envs  # single-threaded BLAS/OpenMP for the limits, the rest of the environment kept
    assert {k: env[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")} == dict.fromkeys(
        ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"
    )
    assert env["PATH"] == os.environ["PATH"]
    out = capsys.readouterr().out
    assert NO_BASELINE in out and "NO BASELINE: 0 regressed, 0 improved, 0 unchanged, 2 new, 0 missing" in out
    report = report_json(tmp_path)
    assert report["baseline"] is None and report["failed"] is False and report["notes"] == [NO_BASELINE]
    assert [b["verdict"] for b in report["benchmarks"]] == ["new", "new"]
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert markdown.startswith("## Benchmark report: NO BASELINE, 2 new") and NO_BASELINE in markdown
    assert "| | current |" in markdown and "baseline" not in markdown.split("### New")[1]
    assert "<h1>Benchmark report: NO BASELINE, 2 new</h1>" in (tmp_path / "out" / "report.html").read_text()
    assert not (tmp_path / "base").exists()


def test_save_baseline_copies_the_run_to_the_machine_id_path(tmp_path, fake, capsys):
    fake(suite(1))

    assert run_bench(tmp_path, "--save-baseline") == 0

    saved = tmp_path / "base" / f"{MACHINE}.json"
    [run_file] = (tmp_path / "out" / "runs").glob("*.json")
    assert saved.read_bytes() == run_file.read_bytes()
    assert f"baseline: saved {saved} with this run ({run_file})" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["env", "default"])
def test_baseline_dir_comes_from_the_environment_else_dot_benchmarks(tmp_path, fake, monkeypatch, where):
    fake(suite(1))
    monkeypatch.chdir(tmp_path)
    if where == "env":
        monkeypatch.setenv(bench.BASELINE_DIR_ENV, str(tmp_path / "from-env"))

    assert bench.main(["--out", "out", "--save-baseline"]) == 0

    expected = tmp_path / ("from-env" if where == "env" else ".benchmarks/baselines") / f"{MACHINE}.json"
    assert json.loads(expected.read_text())["benchmarks"][0]["fullname"] == COPY


def test_unchanged_run_against_the_saved_baseline_passes(tmp_path, fake, capsys):
    fake(suite(1))
    run_bench(tmp_path, "--save-baseline")
    fake(suite(2, when="2025-01-03T00:00:00+00:00"))

    assert run_bench(tmp_path) == 0

    assert "PASS: 0 regressed, 0 improved, 2 unchanged" in capsys.readouterr().out
    report = report_json(tmp_path)
    assert report["baseline"]["source"] == str(tmp_path / "base" / f"{MACHINE}.json")
    assert report["history_runs"] == 1  # the first run; the current one is not its own history
    assert len(list((tmp_path / "out" / "runs").glob("*.json"))) == 2


@pytest.mark.parametrize(
    ("extra", "expected", "regressed"), [((), 1, 1), (("--no-fail",), 0, 1), (("--threshold", "40%"), 0, 0)]
)
def test_planted_25_percent_slowdown_regresses(tmp_path, fake, capsys, extra, expected, regressed):
    fake(suite(1))
    run_bench(tmp_path, "--save-baseline")
    fake(suite(2, copy_factor=1.25))

    assert run_bench(tmp_path, *extra) == expected

    status = "FAIL" if regressed else "PASS"
    assert f"{status}: {regressed} regressed, 0 improved, {2 - regressed} unchanged" in capsys.readouterr().out
    [slow] = [b for b in report_json(tmp_path)["benchmarks"] if b["fullname"] == COPY]
    assert slow["verdict"] == ("regressed" if regressed else "unchanged")
    assert slow["ratio"] == pytest.approx(1.25, abs=0.06)


def test_history_holds_only_earlier_runs_of_the_same_machine(tmp_path, fake):
    runs = tmp_path / "out" / "runs"
    runs.mkdir(parents=True)
    synth.write(runs / "20000101T000000Z.json", suite(3, when="2000-01-01T00:00:00+00:00"))
    synth.write(runs / "20000102T000000Z.json", suite(4, node="another-host"))
    fake(suite(1))

    assert run_bench(tmp_path) == 0

    assert report_json(tmp_path)["history_runs"] == 1


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (1, "some benchmarks failed"),
        (5, "no benchmark was collected"),
        (4, "pytest was called wrongly: check the pytest arguments"),
    ],
)
def test_failing_pytest_stops_with_its_status_and_keeps_the_run_out_of_history(tmp_path, fake, capsys, status, why):
    fake(suite(1), status=status)

    assert run_bench(tmp_path) == status

    err = capsys.readouterr().err
    assert f"harness bench: error: pytest exited with status {status} ({why}" in err and "no report written" in err
    assert not (tmp_path / "out" / "report.md").exists()
    assert list((tmp_path / "out" / "runs").glob("*.json")) == []
    assert len(list((tmp_path / "out" / "runs").glob("*.json.failed"))) == 1


def test_passing_pytest_without_results_is_an_error(tmp_path, fake, capsys):
    fake(None)

    assert run_bench(tmp_path) == 2

    assert "pytest passed but wrote no benchmark results" in capsys.readouterr().err


def test_unusable_baseline_exits_2_naming_it(tmp_path, fake, capsys):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / f"{MACHINE}.json").write_text("{")
    fake(suite(1))

    assert run_bench(tmp_path, "--save-baseline") == 2

    err = capsys.readouterr().err
    assert err.startswith("harness bench: error: baseline file") and f"{MACHINE}.json" in err and "is not valid JSON" in err
    assert (tmp_path / "base" / f"{MACHINE}.json").read_text() == "{"  # not replaced by a failed command


def test_module_entry_point_dispatches_bench(tmp_path, fake):
    fake(suite(1))
    assert harness_main(["bench", "--out", str(tmp_path / "out"), "--baseline-dir", str(tmp_path / "b")]) == 0
    assert (tmp_path / "out" / "report.html").exists()


def limited(limit_median: float, device_medians: dict[str, float], group: str = "copy-1MiB") -> list[dict]:
    """Entries of one group with constant per-round times: a limit entry and one device entry per name."""
    entries = [
        synth.benchmark(f"b.py::test_limit[{group}]", np.full(9, limit_median), {"limit": True, "unit": "GB/s", "value": 50.0})
    ]
    for name, median in device_medians.items():
        value = 50.0 * limit_median / median
        entries.append(synth.benchmark(name, np.full(9, median), {"limit": False, "unit": "GB/s", "value": value, "GB/s": value}))
    for entry in entries:
        entry["group"] = group
    return entries


def test_x_limit_column_is_device_median_over_limit_median(tmp_path, fake, capsys):
    doc = synth.run(
        limited(2e-3, {"b.py::test_copy[CPU]": 3.6e-3, "b.py::test_copy[PYTHON]": 5e-3})
        + [synth.benchmark("b.py::test_lonely", np.full(9, 1e-3), {"unit": "us/call", "value": 1000.0})]
    )
    fake(doc)

    assert run_bench(tmp_path) == 0

    by_name = {b["fullname"]: b for b in report_json(tmp_path)["benchmarks"]}
    assert by_name["b.py::test_copy[CPU]"]["x_limit"] == pytest.approx(1.8)
    assert by_name["b.py::test_copy[PYTHON]"]["x_limit"] == pytest.approx(2.5)
    assert by_name["b.py::test_limit[copy-1MiB]"]["x_limit"] is None and by_name["b.py::test_limit[copy-1MiB]"]["limit"]
    assert by_name["b.py::test_lonely"]["x_limit"] is None  # no group, so no limit
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| benchmark | current median | rounds | x limit | figures |" in markdown
    assert r"| b.py::test\_copy\[CPU\] | 3.6 ms | 9 | 1.80x | 27.78 GB/s |" in markdown  # GB/s key not repeated
    assert r"| b.py::test\_limit\[copy-1MiB\] | 2 ms | 9 | limit | 50 GB/s |" in markdown
    figures = [line for line in markdown.split("### Figures by group")[1].splitlines() if line.startswith("| copy")]
    assert figures == [  # the limit first, then by name; test_lonely has no group
        r"| copy-1MiB | b.py::test\_limit\[copy-1MiB\] | 50 GB/s | limit |",
        r"| copy-1MiB | b.py::test\_copy\[CPU\] | 27.78 GB/s | 1.80x |",
        r"| copy-1MiB | b.py::test\_copy\[PYTHON\] | 20 GB/s | 2.50x |",
    ]
    assert "<td class=\"num\">1.80x</td>" in (tmp_path / "out" / "report.html").read_text()
    assert re.search(r"\n    b\.py::test_copy\[CPU\] +27\.78 GB/s  1\.80x limit\n", capsys.readouterr().out)


def test_x_limit_with_a_baseline_uses_the_current_run_and_the_fastest_limit():
    base = synth.run(limited(2e-3, {"b.py::test_copy[CPU]": 4e-3}))
    current_entries = limited(2e-3, {"b.py::test_copy[CPU]": 3e-3})
    second_limit = synth.benchmark("b.py::test_limit2", np.full(9, 1.5e-3), {"limit": True})
    second_limit["group"] = "copy-1MiB"
    current = synth.run(current_entries + [second_limit])

    result = compare(current, base)

    [device] = [c for c in result.comparisons if c.fullname == "b.py::test_copy[CPU]"]
    assert device.x_limit == pytest.approx(2.0)  # 3 ms / 1.5 ms, not 4 ms (baseline) nor / 2 ms (slower limit)
    assert limit_ratios(result.current) == {"b.py::test_copy[CPU]": pytest.approx(2.0)}
    assert result.has_limits and not compare(suite(1), suite(2)).has_limits
    assert re.search(r"b\.py::test_copy\[CPU\] +33\.33 GB/s \(baseline 25 GB/s\)  2\.00x limit", render_text(result))


def test_machine_info_hook_records_the_runtime_facts(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # pytest-benchmark disables itself inside xdist workers
    pytester.makepyfile(test_tiny="def test_tiny(benchmark):\n    benchmark(sum, [1, 2])\n")

    result = pytester.runpytest("-p", "harness.bench_hooks", "-p", "no:xdist", "--benchmark-json=run.json")

    result.assert_outcomes(passed=1)
    runtime = json.loads((pytester.path / "run.json").read_text())["machine_info"]["runtime"]
    assert runtime["cpu_count"] == os.cpu_count() and runtime["python"] == platform.python_version()


def test_runtime_facts_are_shown_and_a_different_gpu_warns(tmp_path, fake):
    facts = {"gpu": "NVIDIA H200, 550.54", "cuda": "12.4", "cc": "gcc", "gcc": "gcc 12.2.0", "clang": "clang 14",
             "numpy": "2.1.0", "cpu_count": 16, "memory_bytes": 64 * 2**30}
    base, now = suite(1), suite(2)
    base["machine_info"]["runtime"] = {**facts, "gpu": "NVIDIA A100, 535.1"}
    now["machine_info"]["runtime"] = facts
    (tmp_path / "base").mkdir()
    synth.write(tmp_path / "base" / f"{MACHINE}.json", base)
    fake(now)

    assert run_bench(tmp_path) == 0

    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| runtime | GPU NVIDIA H200, 550.54 (CUDA 12.4); CC=gcc (gcc 12.2.0); numpy 2.1.0; 16 cores, 64.0 GiB |" in markdown
    assert "gpu: 'NVIDIA H200, 550.54' vs 'NVIDIA A100, 535.1'" in report_json(tmp_path)["warnings"][0]


def test_save_baseline_prints_where_it_was_saved_not_how_to_save_one(tmp_path, fake, capsys):
    fake(suite(1))

    assert run_bench(tmp_path, "--save-baseline") == 0

    out = capsys.readouterr().out
    saved = tmp_path / "base" / f"{MACHINE}.json"
    assert "can become the baseline" not in out
    assert f"NOTE: this run was saved as the baseline of machine {MACHINE}: {saved}" in out
    assert report_json(tmp_path)["notes"] == [f"this run was saved as the baseline of machine {MACHINE}: {saved}"]
    assert "can become the baseline" not in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("pytest_args", [("-k", "launch"), ("--backends", "CPU")])
def test_save_baseline_of_a_subset_is_refused_before_anything_runs(tmp_path, fake, capsys, pytest_args):
    runner = fake(suite(1))

    assert run_bench(tmp_path, "--save-baseline", "--", *pytest_args) == 2

    assert runner.commands == [] and not (tmp_path / "base").exists()
    err = capsys.readouterr().err
    assert err == (f"harness bench: error: --save-baseline with pytest arguments ({' '.join(pytest_args)}): a partial "
                   "run would replace the full baseline; pass --save-partial-baseline to do it anyway\n")


def test_save_partial_baseline_saves_a_subset(tmp_path, fake, capsys):
    runner = fake(suite(1))

    assert run_bench(tmp_path, "--save-partial-baseline", "--", "-k", "copy") == 0

    assert runner.commands[0][-2:] == ["-k", "copy"]
    saved = tmp_path / "base" / f"{MACHINE}.json"
    assert saved.exists() and f"baseline: saved {saved}" in capsys.readouterr().out


def test_only_the_newest_runs_are_kept(tmp_path, fake, capsys):
    runs = tmp_path / "out" / "runs"
    runs.mkdir(parents=True)
    old = ["20000101T000000Z.json", "20000101T000000Z-2.json", "20000102T000000Z.json", "20000103T000000Z.json"]
    for index, name in enumerate(old):
        synth.write(runs / name, suite(3, when=f"2000-01-0{index + 1}T00:00:00+00:00"))
    (runs / "notes.json").write_text("{}")  # not a run name: never deleted (and not read either, see below)
    (runs / "notes.json").rename(runs / "notes.txt")
    for name in ("20000101T000000Z.json.failed", "20000102T000000Z.json.failed"):
        (runs / name).write_text("")
    fake(suite(1))

    assert run_bench(tmp_path, "--keep-runs", "3") == 0

    kept = sorted(path.name for path in runs.iterdir())
    [new] = [name for name in kept if name.endswith("Z.json") and not name.startswith("2000")]
    assert kept == sorted(["20000102T000000Z.json", "20000103T000000Z.json", new, "notes.txt",
                           "20000101T000000Z.json.failed", "20000102T000000Z.json.failed"])
    out = capsys.readouterr().out
    assert (f"harness bench: deleted 2 old run file(s) from {runs} (keeping the newest 3, --keep-runs): "
            "20000101T000000Z.json, 20000101T000000Z-2.json\n") in out
    assert report_json(tmp_path)["history_runs"] == 2  # the kept earlier runs


def test_prune_keeps_failed_runs_to_the_same_number():
    import tempfile

    with tempfile.TemporaryDirectory() as name:
        runs = Path(name)
        for stamp in ("20000101T000000Z", "20000102T000000Z", "20000103T000000Z"):
            (runs / f"{stamp}.json.failed").write_text("")
        deleted = bench.prune_runs(runs, 1)
        assert [path.name for path in deleted] == ["20000101T000000Z.json.failed", "20000102T000000Z.json.failed"]
        assert [path.name for path in runs.iterdir()] == ["20000103T000000Z.json.failed"]
        with pytest.raises(ValueError, match="keep must be >= 1"):
            bench.prune_runs(runs, 0)


def test_the_reports_say_whether_the_limits_ran_single_threaded(tmp_path, fake):
    now, before = suite(2), suite(1)
    now["machine_info"]["thread_env"] = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    (tmp_path / "base").mkdir()
    synth.write(tmp_path / "base" / f"{MACHINE}.json", before)
    fake(now)

    assert run_bench(tmp_path) == 0

    markdown = (tmp_path / "out" / "report.md").read_text()
    facts = ("1 (OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1, MKL_NUM_THREADS=1): numpy/BLAS limits single-threaded, "
             "like the CPU backend's kernels")
    assert f"| BLAS/OpenMP threads | {facts.replace('_', chr(92) + '_')} | not recorded |" in markdown
    assert f"<tr><td>BLAS/OpenMP threads</td><td>{facts.replace(chr(39), '&#x27;')}</td>" in (
        tmp_path / "out" / "report.html"
    ).read_text()


def test_machine_info_hook_of_the_benchmarks_records_the_thread_variables(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    pytester.makeconftest("from harness.benchmarks.conftest import pytest_benchmark_update_machine_info  # noqa: F401\n")
    pytester.makepyfile(test_tiny="def test_tiny(benchmark):\n    benchmark(sum, [1, 2])\n")

    result = pytester.runpytest("-p", "no:xdist", "--benchmark-json=run.json")

    result.assert_outcomes(passed=1)
    recorded = json.loads((pytester.path / "run.json").read_text())["machine_info"]["thread_env"]
    assert recorded == {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                        "MKL_NUM_THREADS": None}
