"""Verdicts of harness.report.compare on synthetic runs with known answers."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import test_report_synth as synth

from harness.gate import LOOKS
from harness.report import ReportInputError, Verdict, compare, machine_id, parse_threshold

NAMES = ("bench.py::test_copy", "bench.py::test_launch", "bench.py::test_matmul")
MEDIANS = (2e-3, 15e-6, 40e-3)


def suite(seed: int, slow: dict[str, float] | None = None, sigma: float = 0.07, **run_kw) -> dict:
    """A run of the three NAMES; ``slow`` maps a name to a factor applied to its true median."""
    rng = np.random.default_rng(seed)
    slow = slow or {}
    entries = [
        synth.benchmark(n, synth.rounds(rng, m * slow.get(n, 1.0), sigma=sigma)) for n, m in zip(NAMES, MEDIANS, strict=True)
    ]
    return synth.run(entries, **run_kw)


def verdicts(result) -> dict[str, Verdict]:
    return {c.fullname: c.verdict for c in result.comparisons}


def test_planted_25_percent_slowdown_is_regressed_and_others_unchanged():
    result = compare(suite(1, {NAMES[1]: 1.25}), suite(0))

    assert verdicts(result) == {NAMES[0]: Verdict.UNCHANGED, NAMES[1]: Verdict.REGRESSED, NAMES[2]: Verdict.UNCHANGED}
    assert not result.failed  # stored mode: a trend view
    slow = next(c for c in result.comparisons if c.fullname == NAMES[1])
    assert slow.p_value < 1e-6
    assert slow.ratio == pytest.approx(np.median(slow.current.data) / np.median(slow.baseline.data))
    assert slow.ci[0] < slow.ratio < slow.ci[1]
    assert slow.ci[0] > 1.10 and slow.ci[1] < 1.45  # true ratio 1.25, noise 7% over 60 rounds


@pytest.mark.parametrize("sigma", [0.05, 0.10])
def test_twenty_unchanged_noisy_runs_raise_no_alarm(sigma):
    baseline = suite(1000, sigma=sigma)
    results = [compare(suite(seed, sigma=sigma), baseline) for seed in range(20)]

    alarms = [
        (i, c.fullname, c.ratio) for i, r in enumerate(results) for c in r.comparisons if c.verdict is not Verdict.UNCHANGED
    ]
    assert alarms == []
    assert not any(r.failed for r in results)


def test_planted_25_percent_speedup_is_improved_and_does_not_fail():
    result = compare(suite(3, {NAMES[2]: 0.75}), suite(0))

    assert verdicts(result)[NAMES[2]] is Verdict.IMPROVED
    assert not result.failed
    assert result.counts() == {"regressed": 0, "drifted": 0, "improved": 1, "moved": 0, "unjudged": 0, "unchanged": 2,
                               "new": 0, "missing": 0}


def test_missing_and_new_benchmarks_are_listed():
    rng = np.random.default_rng(5)
    baseline = synth.run(
        [
            synth.benchmark("a.py::test_old", synth.rounds(rng, 1e-3)),
            synth.benchmark("a.py::test_kept", synth.rounds(rng, 1e-3)),
        ]
    )
    current = synth.run(
        [
            synth.benchmark("a.py::test_kept", synth.rounds(rng, 1e-3)),
            synth.benchmark("a.py::test_fresh", synth.rounds(rng, 1e-3)),
        ]
    )

    result = compare(current, baseline)

    assert verdicts(result) == {
        "a.py::test_old": Verdict.MISSING,
        "a.py::test_fresh": Verdict.NEW,
        "a.py::test_kept": Verdict.UNCHANGED,
    }
    sections = {s.key: s.comparisons for s in result.sections}
    [new], [missing] = sections["new"], sections["missing"]
    assert new.baseline is None and new.ratio is None and new.p_value is None
    assert missing.current is None
    assert not result.failed


@pytest.mark.parametrize(
    ("own", "default", "expected"),
    [
        (0.40, 0.10, Verdict.UNCHANGED),  # 25% slower is within the benchmark's own 40%
        ("15%", 0.30, Verdict.REGRESSED),  # the benchmark's 15% beats the lenient default
        (None, 0.30, Verdict.UNCHANGED),  # no own threshold: the default 30% applies
    ],
)
def test_per_benchmark_threshold_from_extra_info_is_honoured(own, default, expected):
    rng = np.random.default_rng(11)
    extra = {} if own is None else {"threshold": own}
    baseline = synth.run([synth.benchmark("t.py::test_x", synth.rounds(rng, 1e-3), extra)])
    current = synth.run([synth.benchmark("t.py::test_x", synth.rounds(rng, 1.25e-3), extra)])

    [comparison] = compare(current, baseline, threshold=default).comparisons

    assert comparison.verdict is expected
    assert comparison.threshold == pytest.approx(parse_threshold(own, "t") if own is not None else default)


def test_threshold_on_baseline_side_applies_when_current_has_none():
    rng = np.random.default_rng(12)
    baseline = synth.run([synth.benchmark("t.py::test_x", synth.rounds(rng, 1e-3), {"threshold": 0.5})])
    current = synth.run([synth.benchmark("t.py::test_x", synth.rounds(rng, 1.25e-3))])

    [comparison] = compare(current, baseline).comparisons

    assert comparison.threshold == 0.5 and comparison.verdict is Verdict.UNCHANGED


def test_significance_is_required_exact_mann_whitney_p_values():
    # Completely separated samples: exact two-sided p = 2 / C(n1 + n2, n1).
    base5, slow5 = np.linspace(1.0, 1.1, 5) * 1e-3, np.linspace(2.0, 2.1, 5) * 1e-3
    result5 = compare(synth.run([synth.benchmark("t::x", slow5)]), synth.run([synth.benchmark("t::x", base5)]))
    assert result5.comparisons[0].p_value == pytest.approx(2 / math.comb(10, 5))  # 0.0079 < alpha 0.01
    assert result5.comparisons[0].verdict is Verdict.REGRESSED

    base4, slow4 = base5[:4], slow5[:4]
    result4 = compare(synth.run([synth.benchmark("t::x", slow4)]), synth.run([synth.benchmark("t::x", base4)]))
    assert result4.comparisons[0].p_value == pytest.approx(2 / math.comb(8, 4))  # 0.029 > alpha 0.01
    assert result4.comparisons[0].verdict is Verdict.UNCHANGED  # a 2x slowdown, but 4 rounds prove nothing


def test_effect_size_is_required_for_a_significant_but_small_shift():
    rng = np.random.default_rng(21)
    baseline = synth.run([synth.benchmark("t::x", synth.rounds(rng, 1e-3, count=3000, sigma=0.02))])
    current = synth.run([synth.benchmark("t::x", synth.rounds(rng, 1.03e-3, count=3000, sigma=0.02))])

    [comparison] = compare(current, baseline).comparisons

    assert comparison.p_value < 1e-10
    assert comparison.ratio == pytest.approx(1.03, abs=0.005)
    assert comparison.verdict is Verdict.UNCHANGED


def test_bootstrap_ci_is_seeded_and_matches_the_normal_approximation():
    rng = np.random.default_rng(31)
    base, cur = synth.rounds(rng, 1e-3, count=400, sigma=0.1), synth.rounds(rng, 1.2e-3, count=400, sigma=0.1)
    docs = synth.run([synth.benchmark("t::x", cur)]), synth.run([synth.benchmark("t::x", base)])

    first, second = compare(*docs).comparisons[0], compare(*docs).comparisons[0]
    other_seed = compare(*docs, seed=7).comparisons[0]

    assert first.ci == second.ci and first.ci != other_seed.ci
    # Median of n lognormal rounds: sd(log median) ~ sigma * sqrt(pi / (2 n)); the log ratio has sqrt(2) times that.
    half_width = 1.96 * 0.1 * math.sqrt(math.pi / (2 * 400)) * math.sqrt(2)
    low, high = math.log(first.ci[0] / first.ratio), math.log(first.ci[1] / first.ratio)
    assert -low == pytest.approx(half_width, rel=0.3) and high == pytest.approx(half_width, rel=0.3)


def test_summary_stats_fallback_uses_welch_and_gives_no_ci():
    rng = np.random.default_rng(41)
    base, cur = synth.rounds(rng, 1e-3, count=80), synth.rounds(rng, 1.25e-3, count=80)
    baseline = synth.run([synth.benchmark("t::x", base, with_data=False)])
    current = synth.run([synth.benchmark("t::x", cur, with_data=True)])

    [comparison] = compare(current, baseline).comparisons

    assert comparison.test == "welch-t-summary" and comparison.ci is None
    assert "Welch" in comparison.note
    assert comparison.ratio == pytest.approx(np.median(cur) / np.median(base))
    expected_p = _welch_p(cur, base)
    assert comparison.p_value == pytest.approx(expected_p, rel=1e-6)
    assert comparison.verdict is Verdict.REGRESSED


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Welch's t-test by hand (t statistic, Welch-Satterthwaite dof), two-sided."""
    from scipy.stats import t as student_t

    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return float(2 * student_t.sf(abs(t), dof))


def test_single_round_cannot_be_tested_and_says_so():
    baseline = synth.run([synth.benchmark("t::x", np.array([1e-3]), with_data=False)])
    current = synth.run([synth.benchmark("t::x", np.array([3e-3]), with_data=False)])

    [comparison] = compare(current, baseline).comparisons

    assert math.isnan(comparison.p_value) and comparison.verdict is Verdict.UNCHANGED
    assert "too few rounds" in comparison.note


def test_higher_is_better_is_noted_but_verdict_stays_on_time():
    rng = np.random.default_rng(51)
    extra = {"higher_is_better": True, "GB/s": 10.0}
    baseline = synth.run([synth.benchmark("t::bw", synth.rounds(rng, 1e-3), extra)])
    current = synth.run([synth.benchmark("t::bw", synth.rounds(rng, 1.3e-3), extra)])

    [comparison] = compare(current, baseline).comparisons

    assert comparison.higher_is_better and comparison.verdict is Verdict.REGRESSED


def test_different_machines_and_versions_give_warnings():
    result = compare(suite(1, node="laptop", cpu="Other CPU", version="4.0.0"), suite(0))

    assert len(result.warnings) == 2
    assert "different machines" in result.warnings[0]
    assert "'laptop' vs 'ci-runner-1'" in result.warnings[0] and "'Other CPU' vs 'Test CPU 3000'" in result.warnings[0]
    assert "4.0.0" in result.warnings[1]
    assert compare(suite(1), suite(0)).warnings == ()


@pytest.mark.parametrize(("text", "fraction"), [("25%", 0.25), (" 7.5 % ", 0.075), ("0.25", 0.25), (0.1, 0.1), (2, 2.0)])
def test_parse_threshold_accepts_fractions_and_percents(text, fraction):
    assert parse_threshold(text, "x") == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["abc", "%", "-5%", 0, -0.1, True, None, float("nan"), [0.1]])
def test_parse_threshold_refuses_bad_values(text):
    with pytest.raises(ReportInputError, match="threshold"):
        parse_threshold(text, "x")


def test_bad_per_benchmark_threshold_is_an_input_error():
    rng = np.random.default_rng(2)
    doc = synth.run([synth.benchmark("t::x", synth.rounds(rng, 1e-3), {"threshold": "fast"})])
    with pytest.raises(ReportInputError, match="t::x.*'fast'"):
        compare(doc, doc)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"alpha": 0.0}, "--alpha"),
        ({"alpha": 1.5}, "--alpha"),
        ({"threshold": -1}, "--threshold"),
        ({"n_resamples": 10}, "n_res"),
    ],
)
def test_bad_options_are_input_errors(kwargs, fragment):
    with pytest.raises(ReportInputError, match=fragment):
        compare(suite(0), suite(0), **kwargs)


def test_machine_id_is_stable_safe_and_distinguishes_machines():
    info = {"node": "ci/runner 1", "machine": "x86_64", "cpu": {"brand_raw": "AMD EPYC 7B13 64-Core Processor"}}

    ident = machine_id(info)

    assert ident == machine_id(dict(info))
    assert re.fullmatch(r"[A-Za-z0-9._-]+", ident)
    assert ident.startswith("ci-runner-1_x86_64_AMD-EPYC-7B13-64-Core-Processor-")
    assert machine_id({**info, "node": "ci runner 1"}) != ident  # same slug, different machine
    assert machine_id({**info, "cpu": {"brand": "AMD EPYC 7B13 64-Core Processor"}}) == ident  # py-cpuinfo < 6 key
    assert machine_id({"node": "x" * 500, "machine": "y", "cpu": {}}).count("x") == 40
    with pytest.raises(ReportInputError, match="machine_info"):
        machine_id({"python_version": "3.11"})


def test_order_statistic_bootstrap_matches_direct_resampling_above_the_limit():
    from harness.report.stats import DIRECT_RESAMPLE_LIMIT, bootstrap_medians

    rng = np.random.default_rng(61)
    values = rng.lognormal(0.0, 0.1, DIRECT_RESAMPLE_LIMIT + 1)
    direct = np.median(rng.choice(values, size=(1500, values.size)), axis=1)

    exact = bootstrap_medians(values, 20000, np.random.default_rng(62))

    spread = direct.std()
    assert exact.std() == pytest.approx(spread, rel=0.1)
    for q in (2.5, 50, 97.5):
        assert abs(np.percentile(exact, q) - np.percentile(direct, q)) < 0.3 * spread


def test_a_benchmark_whose_amount_per_call_changed_is_not_judged_though_it_takes_50x_longer():
    """A 4 KiB copy that came to copy 64 page offsets per call (the same size_bytes) does different work: its time per
    call is not a change of speed."""
    rng = np.random.default_rng(11)
    old = synth.benchmark("c.py::test_copy", synth.rounds(rng, 1e-6),
                          {"size_bytes": 4096, "unit": "GB/s", "per_call": {"GB/s": 4096 / 1e9}})
    new = synth.benchmark("c.py::test_copy", synth.rounds(rng, 50e-6),
                          {"size_bytes": 4096, "unit": "GB/s", "per_call": {"GB/s": 64 * 4096 / 1e9}})
    [comparison] = compare(synth.run([new]), synth.run([old])).comparisons
    assert comparison.verdict is Verdict.UNJUDGED
    assert "per_call" in comparison.note and "0.000262144" in comparison.note


def _ab_pair(looks: object) -> tuple[dict, dict]:
    """The A and B files of an A/B run of one entry on 8 process pairs of 10 rounds, B 10% slower, recording
    ``looks``."""
    rng = np.random.default_rng(8)
    docs = []
    for side, factor in (("A", 1.0), ("B", 1.1)):
        record = synth.benchmark("t.py::test_x", factor * synth.rounds(rng, 1e-3, count=80, sigma=0.01))
        record["options"]["pair_rounds"] = [10] * 8
        doc = synth.run([record])
        doc["harness"] = {"mode": "ab", "side": side, "pairing": "p1", "ref": "HEAD", "entries": 1,
                          "process_pairs": 4, "looks": looks}
        docs.append(doc)
    return docs[0], docs[1]


def test_an_ab_file_counts_entries_that_skipped_while_running_and_refuses_fewer_than_it_holds():
    """The runner's ``entries`` include those that skipped once started (absent from the files): such a count is the
    run's family, used without a warning; a count below the entries the files hold is not, and the report says so."""
    for entries, level, warned in ((3, 0.01 / (3 * 2), False), (0, 0.01 / 2, True)):
        a, b = _ab_pair(2)
        for doc in (a, b):
            doc["harness"]["entries"] = entries
        result = compare(b, a)
        assert f"at level {level:.1g} " in (result.comparisons[0].note or "")
        assert any("records no usable entries" in w for w in result.warnings) is warned


def test_an_ab_file_without_usable_looks_is_judged_with_the_default_and_the_report_says_so():
    """The corrected level divides alpha by the looks the runner recorded; a file whose ``looks`` is missing or out of
    range is judged with LOOKS, and the report warns that its levels may differ from the run's."""
    a, b = _ab_pair(2)
    recorded = compare(b, a)
    assert recorded.comparisons[0].verdict is Verdict.REGRESSED and not recorded.warnings
    assert f"at level {0.01 / 2:.1g} " in (recorded.comparisons[0].note or "")
    for bad in (None, 0, 99, "3", True):
        a, b = _ab_pair(bad)
        result = compare(b, a)
        assert f"at level {0.01 / LOOKS:.1g} " in (result.comparisons[0].note or "")
        assert any("records no usable looks" in w and f"judged with {LOOKS}" in w for w in result.warnings)
