"""RunStore: run file names, pruning, baselines (save, load, promote) and the history of one machine."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import test_report_synth as synth

from harness.report import ReportInputError, machine_id, parse_run
from harness.report.storage import RunStore


def doc(node: str = "ci-runner-1", when: str = "2025-01-02T03:04:05+00:00") -> dict:
    return synth.run([synth.benchmark("t::x", np.full(5, 1e-3))], node=node, when=when)


@pytest.fixture
def store(tmp_path):
    made = RunStore(tmp_path / "runs", tmp_path / "base", keep=2)
    made.check()
    return made


def test_run_files_are_named_by_utc_time_and_never_reuse_a_name(store):
    first = store.new_run_path()
    first.write_text("{}")
    second = store.new_run_path()
    assert first.name.endswith("Z.json") and len(first.stem) == 16
    assert second != first and (second.stem.endswith("-2") or second.stem[:16] != first.stem)
    aside = store.set_aside(first)
    assert aside.name == first.name + ".failed" and not first.exists()


def test_prune_keeps_the_newest_runs_and_as_many_failed_ones_and_nothing_else(store):
    names = ["20250101T000000Z.json", "20250102T000000Z.json", "20250102T000000Z-2.json", "20250103T000000Z.json",
             "20250101T000000Z.json.failed", "20250102T000000Z.json.failed", "20250104T000000Z.json.failed",
             "notes.json"]
    for name in names:
        (store.runs / name).write_text("{}")
    deleted = store.prune()
    assert [p.name for p in deleted] == ["20250101T000000Z.json", "20250101T000000Z.json.failed",
                                         "20250102T000000Z.json"]
    assert sorted(p.name for p in store.runs.iterdir()) == sorted(set(names) - {p.name for p in deleted})


def test_baseline_is_saved_under_the_machine_id_and_read_back(store, tmp_path):
    run_file = synth.write(tmp_path / "run.json", doc())
    run = parse_run(doc(), "run")
    assert store.load_baseline(run) is None
    path = store.save_baseline(run_file, run)
    assert path == tmp_path / "base" / f"{machine_id(run.machine_info)}.json"
    assert path.read_bytes() == run_file.read_bytes() and oct(path.stat().st_mode & 0o777) == "0o644"
    assert store.load_baseline(run).benchmarks.keys() == {"t::x"}


def test_an_unusable_baseline_is_an_error_but_a_promotion_replaces_it(store, tmp_path):
    run_file = synth.write(tmp_path / "run.json", doc())
    run = parse_run(doc(), "run")
    store.baselines.mkdir()
    store.baseline_path(run).write_text("{ not json")
    with pytest.raises(ReportInputError, match="this is the machine's stored baseline: fix or delete it"):
        store.load_baseline(run)
    path, promoted, previous = store.promote(run_file)
    assert previous is None and promoted.source == str(run_file) and json.loads(path.read_text()) == doc()


def test_promoting_a_file_that_is_no_run_changes_nothing(store, tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"benchmarks": []}))
    with pytest.raises(ReportInputError, match="is not a pytest-benchmark file"):
        store.promote(tmp_path / "bad.json")
    assert not store.baselines.exists()


def test_promoting_one_side_of_an_a_b_run_is_refused(store, tmp_path):
    side = doc()
    side["harness"] = {"mode": "ab", "side": "B", "pairing": "p1", "planted": 1.5}
    with pytest.raises(ReportInputError, match="is one side of an A/B run"):
        store.promote(synth.write(tmp_path / "B.json", side))
    assert not store.baselines.exists()


def test_promoting_a_partial_run_needs_save_partial_baseline(store, tmp_path):
    partial = doc()
    partial["harness"] = {"mode": "stored", "selection": ["-k", "launch"]}
    run_file = synth.write(tmp_path / "partial.json", partial)
    with pytest.raises(ReportInputError, match=r"pytest arguments \(-k launch\), so it may cover only part.*partial"):
        store.promote(run_file)
    assert not store.baselines.exists()
    path, promoted, _ = store.promote(run_file, partial=True)
    assert path.read_bytes() == run_file.read_bytes() and promoted.harness["selection"] == ["-k", "launch"]


def test_promoting_a_run_that_lacks_benchmarks_of_the_baseline_needs_save_partial_baseline(store, tmp_path):
    full = synth.run([synth.benchmark("t::x", np.full(5, 1e-3)), synth.benchmark("t::y", np.full(5, 2e-3))])
    store.promote(synth.write(tmp_path / "full.json", full))
    subset = synth.write(tmp_path / "subset.json", doc())  # chosen where the file cannot tell (PYTEST_ADDOPTS)
    before = store.baseline_path(parse_run(full, "full")).read_bytes()
    with pytest.raises(ReportInputError, match=r"lacks 1 benchmark\(s\) of the baseline it would replace \(e.g. t::y\)"):
        store.promote(subset)
    assert store.baseline_path(parse_run(full, "full")).read_bytes() == before
    assert store.promote(subset, partial=True)[0].read_bytes() == subset.read_bytes()


@pytest.mark.parametrize("harness", [[], "", 0, False, None])
def test_a_run_key_that_is_no_object_is_an_input_error(store, tmp_path, harness):
    odd = doc()
    odd["harness"] = harness
    with pytest.raises(ReportInputError, match="'harness' must be an object, got"):
        store.promote(synth.write(tmp_path / "odd.json", odd))
    assert not store.baselines.exists()


def test_a_long_selection_is_cut_short_in_the_message(store, tmp_path):
    partial = doc()
    partial["harness"] = {"selection": ["-k", "x"] * 50000}
    with pytest.raises(ReportInputError) as raised:
        store.promote(synth.write(tmp_path / "long.json", partial))
    assert len(str(raised.value)) < 500 and "(-k x -k x" in str(raised.value)


def test_a_full_stored_run_promotes_and_a_selection_of_the_wrong_type_is_an_input_error(store, tmp_path):
    full = doc()
    full["harness"] = {"mode": "stored", "selection": []}
    assert store.promote(synth.write(tmp_path / "full.json", full))[0].is_file()
    full["harness"]["selection"] = "-k launch"
    with pytest.raises(ReportInputError, match="harness.selection must be a list of strings, got '-k launch'"):
        store.promote(synth.write(tmp_path / "odd.json", full))


def test_history_skips_unusable_and_foreign_files_with_a_warning_each(store):
    synth.write(store.runs / "20250101T000000Z.json", doc(when="2025-01-01T00:00:00+00:00"))
    synth.write(store.runs / "20250102T000000Z.json", doc(node="elsewhere"))
    (store.runs / "20250103T000000Z.json").write_text("")
    current = parse_run(doc(when="2025-01-04T00:00:00+00:00"), "current")
    runs, warnings = store.history(current)
    assert [run.source for run in runs] == [f"history file {str(store.runs / '20250101T000000Z.json')!r}"]
    assert len(warnings) == 2
    assert "20250102T000000Z.json" in warnings[0] and "another machine (elsewhere)" in warnings[0]
    assert "20250103T000000Z.json" in warnings[1] and "is empty" in warnings[1]


def test_a_baseline_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "base").write_text("")
    with pytest.raises(ReportInputError, match="--baseline-dir .* is not a directory"):
        RunStore(tmp_path / "runs", tmp_path / "base", keep=1).check()
    with pytest.raises(ValueError, match="keep must be >= 1"):
        RunStore(tmp_path / "runs", tmp_path / "base", keep=0)


def test_the_report_package_imports_no_benchmark_suite():
    code = ("import sys, harness.report, harness.report.cli, harness.report.storage; "
            "print(sorted(m for m in sys.modules if m.startswith('harness.benchmarks')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_accepting_drift_marks_the_baseline_and_the_drift_window_starts_there(store, tmp_path):
    from harness.report.storage import drift_since, drift_window

    runs = [parse_run(doc(when=f"2025-01-0{day}T00:00:00+00:00"), f"run{day}") for day in (1, 2, 3)]
    run_file = synth.write(tmp_path / "run2.json", doc(when="2025-01-02T00:00:00+00:00"))
    path, promoted, _ = store.promote(run_file, accept_drift=True)
    baseline = store.load_baseline(promoted)
    assert drift_since(baseline) == "2025-01-02T00:00:00+00:00"
    assert json.loads(path.read_text())["benchmarks"] == doc()["benchmarks"]  # the run itself is unchanged
    assert [run.source for run in drift_window(runs, baseline)] == ["run2", "run3"]
    # a later baseline saved without --accept-drift keeps the mark
    later = synth.write(tmp_path / "run3.json", doc(when="2025-01-03T00:00:00+00:00"))
    store.save_baseline(later, runs[2], drift_since(baseline))
    assert drift_since(store.load_baseline(runs[2])) == "2025-01-02T00:00:00+00:00"
    assert drift_window(runs, None) == runs
