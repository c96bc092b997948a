"""The verdict rule with practical limits: raw and limit-normalized comparisons must agree, limit entries never fail,
and no verdict when the bootstrap CI of the ratio holds 1. Runs here mark limits the pre-role way
(``extra_info['limit'] = True``) and carry no paired limit rounds, as plain ``pytest --benchmark-json`` runs do; the
paired normalization is in test_report_paired."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import test_report_synth as synth

from harness.bench_schema import short_name
from harness.report import Verdict, compare
from harness.report.render_json import render_json
from harness.report.render_md import render_markdown
from harness.report.render_text import render_text
from harness.report.stats import decide

LIMIT = "b.py::test_copy_limit_numpy_copyto[64MiB]"
DEVICE = "b.py::test_copy[CPU-64MiB-copyin]"
OTHER = "b.py::test_copy[PYTHON-64MiB-copyin]"
LAUNCH_LIMIT = "b.py::test_launch_limit_ctypes_call"
LAUNCH = "b.py::test_launch_empty[CPU]"
# fullname -> (group, true median in seconds)
ENTRIES = {LIMIT: ("copy-64MiB", 10e-3), DEVICE: ("copy-64MiB", 14e-3), OTHER: ("copy-64MiB", 30e-3),
           LAUNCH_LIMIT: ("launch", 0.3e-6), LAUNCH: ("launch", 20e-6)}
LIMITS = (LIMIT, LAUNCH_LIMIT)


def machine_run(seed: int, factors: dict[str, float] | None = None, machine: float = 1.0, **run_kw) -> dict:
    """A run of two groups, each with a limit entry, 200 rounds of 7% lognormal noise per entry; ``machine`` scales
    every true median (limits included), ``factors`` one entry's on top of that."""
    rng = np.random.default_rng(seed)
    factors = factors or {}
    entries = []
    for name, (group, median) in ENTRIES.items():
        data = synth.rounds(rng, median * machine * factors.get(name, 1.0), count=200)
        entry = synth.benchmark(name, data, {"limit": name in LIMITS})
        entry["group"] = group
        entries.append(entry)
    return synth.run(entries, **run_kw)


def by_name(result) -> dict:
    return {c.fullname: c for c in result.comparisons}


def test_machine_wide_slowdown_of_every_entry_is_no_regression():
    result = compare(machine_run(1, machine=1.5), machine_run(0))

    found = by_name(result)
    assert not result.failed and result.failing == []
    for name in (DEVICE, OTHER, LAUNCH):
        assert found[name].verdict is Verdict.UNCHANGED
        assert found[name].ratio == pytest.approx(1.5, rel=0.05)  # raw: 50% slower, significant, CI above 1
        assert found[name].ci[0] > 1.4 and found[name].p_value < 1e-20
        assert found[name].normalized_ratio == pytest.approx(1.0, abs=0.05)
        assert found[name].limit_ratio == pytest.approx(1.5, rel=0.05)
        assert found[name].note.startswith("raw regressed only: machine-wide change: the limit moved too (limit x1.")
    for name in LIMITS:  # judged and visible, but labelled and not a failure
        assert found[name].verdict is Verdict.REGRESSED and found[name].ratio == pytest.approx(1.5, rel=0.05)
        assert found[name].note == f"limit moved: the machine was x{found[name].ratio:.2f} slower (never fails the run)"
    moved = next(s for s in result.sections if s.key == "moved").comparisons
    assert moved == (found[LIMIT], found[LAUNCH_LIMIT])  # by section, then by name


def test_one_device_entry_25_percent_slower_with_the_limit_unchanged_is_regressed():
    result = compare(machine_run(1, {DEVICE: 1.25}), machine_run(0))

    found = by_name(result)
    assert not result.failed and [c for c in result.comparisons if c.verdict is Verdict.REGRESSED] == [found[DEVICE]]
    assert found[DEVICE].ratio == pytest.approx(1.25, rel=0.04)
    assert found[DEVICE].normalized_ratio == pytest.approx(1.25, rel=0.05)
    assert found[DEVICE].normalized_ci[0] > 1.1 and found[DEVICE].normalized_p_value < 1e-10
    assert found[DEVICE].note is None
    assert {found[n].verdict for n in (LIMIT, OTHER, LAUNCH, LAUNCH_LIMIT)} == {Verdict.UNCHANGED}


def test_a_benchmark_without_a_limit_gets_the_raw_verdict():
    now, before = machine_run(1, machine=1.5), machine_run(0)
    for doc in (now, before):
        doc["benchmarks"] = [b for b in doc["benchmarks"] if b["fullname"] != LAUNCH_LIMIT]

    result = compare(now, before)

    launch = by_name(result)[LAUNCH]
    assert launch.verdict is Verdict.REGRESSED and launch.normalized_ratio is None and launch.note is None
    assert [c for c in result.comparisons if c.verdict is Verdict.REGRESSED and c.role == "entry"] == [launch]
    assert not result.failed


def test_the_limit_alone_slower_fails_nothing():
    result = compare(machine_run(1, {LIMIT: 1.5}), machine_run(0))

    found = by_name(result)
    assert not result.failed
    assert found[LIMIT].verdict is Verdict.REGRESSED and "limit moved" in found[LIMIT].note
    for name in (DEVICE, OTHER):  # x0.67 relative to the slower limit, but their raw time held
        assert found[name].verdict is Verdict.UNCHANGED
        assert found[name].normalized_ratio == pytest.approx(1 / 1.5, rel=0.05)
        assert found[name].note.startswith("normalized improved only: the limit moved, the benchmark did not (limit x1.")


def test_a_faster_machine_labels_the_limit_faster():
    result = compare(machine_run(1, machine=0.7), machine_run(0))

    found = by_name(result)
    assert found[LIMIT].verdict is Verdict.IMPROVED
    assert found[LIMIT].note.startswith("limit moved: the machine was x1.4")  # 1 / 0.7 = 1.43 times faster
    assert found[LIMIT].note == f"limit moved: the machine was x{1 / found[LIMIT].ratio:.2f} faster (never fails the run)"
    assert found[DEVICE].verdict is Verdict.UNCHANGED and found[DEVICE].normalized_ratio == pytest.approx(1.0, abs=0.05)


def test_ci_that_includes_one_gives_no_verdict():
    # bimodal rounds (half fast, half slow in the baseline; mostly slow now): the rank test rejects and the medians
    # differ by x1.59, but a resample of the same rounds can put the baseline median in the slow mode too
    rng = np.random.default_rng(200)
    base = np.where(rng.random(12) < 0.5, 1.0, 1.6) * rng.lognormal(0, 0.03, 12) * 1e-3
    cur = np.where(rng.random(12) < 0.85, 1.6, 1.0) * rng.lognormal(0, 0.03, 12) * 1e-3

    [c] = compare(synth.run([synth.benchmark("t::x", cur)]), synth.run([synth.benchmark("t::x", base)])).comparisons

    assert c.p_value < 0.01 and c.ratio == pytest.approx(np.median(cur) / np.median(base)) and c.ratio > 1.5
    assert c.ci[0] < 1.0 < c.ci[1]
    assert c.verdict is Verdict.UNCHANGED


@pytest.mark.parametrize(
    ("ratio", "ci", "p", "expected"),
    [
        (1.30, (0.74, 1.42), 0.001, Verdict.UNCHANGED),  # CI holds 1
        (1.30, (1.05, 1.50), 0.001, Verdict.REGRESSED),
        (1.30, (1.05, 1.50), 0.02, Verdict.UNCHANGED),  # not significant at 0.01
        (1.05, (1.01, 1.09), 0.001, Verdict.UNCHANGED),  # within the 10% threshold
        (0.80, (0.70, 0.95), 0.001, Verdict.IMPROVED),
        (0.80, (0.70, 1.01), 0.001, Verdict.UNCHANGED),
        (1.30, (float("nan"), 1.5), 0.001, Verdict.UNCHANGED),  # an undefined bound proves nothing
        (1.30, None, 0.001, Verdict.REGRESSED),  # no per-round data: no CI to ask
    ],
)
def test_decide_requires_significance_threshold_and_a_ci_beyond_one(ratio, ci, p, expected):
    assert decide(ratio, ci, p, threshold=0.10, alpha=0.01) is expected


def test_limit_missing_from_the_baseline_leaves_the_raw_comparison_and_says_so():
    baseline = machine_run(0)
    baseline["benchmarks"] = [b for b in baseline["benchmarks"] if b["fullname"] != LIMIT]

    found = by_name(compare(machine_run(1, {DEVICE: 1.25}), baseline))

    assert found[DEVICE].verdict is Verdict.REGRESSED and found[DEVICE].normalized_ratio is None
    assert f"its group's limit '{LIMIT}' is not in the baseline: raw comparison only" in found[DEVICE].note


@pytest.mark.parametrize(
    ("current", "failed", "summary"),
    [
        (machine_run(2, machine=1.5), False, "0 regressed, 0 drifted, 0 improved, 2 limits/peers moved, 3 unchanged"),
        (machine_run(2, {DEVICE: 1.25}), True, "1 regressed, 0 drifted, 0 improved, 0 limits/peers moved, 4 unchanged"),
        (machine_run(2, {LIMIT: 1.5}), False, "0 regressed, 0 drifted, 0 improved, 1 limits/peers moved, 4 unchanged"),
    ],
    ids=["machine-1.5x", "device-1.25x", "limit-1.5x"],
)
def test_only_entries_are_flagged_nothing_fails_and_every_output_counts_alike(current, failed, summary):
    result = compare(current, machine_run(1))

    assert not result.failed  # stored mode is a trend view
    text, markdown, report = render_text(result), render_markdown(result, 0), json.loads(render_json(result, 0))
    assert f"TREND (no gate): {summary}" in text
    assert report["schema_version"] == 5 and report["failed"] is False
    # one computation behind every count: the JSON counts, the Markdown headings and the summary table agree
    for key, count in report["counts"].items():
        title = next(s.title for s in result.sections if s.key == key)
        assert (f"### {title} ({count})" in markdown) is (count > 0)
        assert sum(b["section"] == key for b in report["benchmarks"]) == count
    assert "ratio vs limit [CI]" in markdown and "must pass this both raw and normalized by the limit" in markdown
    moved = [b for b in report["benchmarks"] if b["section"] == "moved"]
    assert all(b["role"] == "limit" and not b["fails"] for b in moved)
    if not failed:
        line = (re.escape(f"  LIMIT     {short_name(LIMIT)}  x1.")
                + r"[45]\d\d CI \[.*: limit moved: the machine was x1\.[45]\d slower")
        assert re.search(line, text)
    else:
        [device] = [b for b in report["benchmarks"] if b["fullname"] == DEVICE]
        assert device["verdict"] == "regressed" and device["normalized_ratio"] == pytest.approx(1.25, rel=0.05)
        assert device["limit_ratio"] == pytest.approx(1.0, abs=0.05)
        assert device["x_limit"] == {"ratio": pytest.approx(1.4 * 1.25, rel=0.05), "limit": LIMIT, "paired": False}


def test_a_disagreement_from_an_inconclusive_comparison_says_so():
    # raw 30% slower over 200 rounds, the limit 15% slower, and its rounds so spread (sigma 1.5) that the normalized
    # CI is wide: the machine was slower too, by how much is not clear
    now, before = machine_run(1, {DEVICE: 1.3}), machine_run(0)
    rng = np.random.default_rng(9)
    for doc, scale in ((now, 1.15), (before, 1.0)):
        [limit] = [b for b in doc["benchmarks"] if b["fullname"] == LIMIT]
        limit["stats"]["data"] = [float(x) for x in synth.rounds(rng, 10e-3 * scale, count=12, sigma=1.5)]
        limit["stats"]["rounds"] = 12
        limit["stats"]["median"] *= scale

    device = by_name(compare(now, before))[DEVICE]

    assert device.verdict is Verdict.UNCHANGED and device.ratio == pytest.approx(1.3, rel=0.05)
    assert device.normalized_ci[0] < 1.0 < device.normalized_ci[1]
    assert device.note.startswith("raw regressed only: the normalized comparison is not conclusive (p=")


def test_a_raw_change_stands_when_the_limit_did_not_move_and_only_its_noise_leaves_the_normalized_one_open():
    # the data-level planting: the entry's rounds x1.3, its (noisy) limit's rounds the very same in both runs
    now, before = machine_run(1, {DEVICE: 1.3}), machine_run(0)
    limit_rounds = [float(x) for x in synth.rounds(np.random.default_rng(9), 10e-3, count=12, sigma=1.5)]
    for doc in (now, before):
        [limit] = [b for b in doc["benchmarks"] if b["fullname"] == LIMIT]
        limit["stats"]["data"], limit["stats"]["rounds"] = list(limit_rounds), 12

    device = by_name(compare(now, before))[DEVICE]

    assert device.normalized_ci[0] < 1.0 < device.normalized_ci[1] and device.limit_ratio == pytest.approx(1.0, abs=0.01)
    assert device.verdict is Verdict.REGRESSED and not device.fails
    assert "not conclusive but goes the same way and the limit did not move" in device.note
