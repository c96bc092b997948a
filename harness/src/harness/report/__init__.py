"""Benchmark regression reports: compare pytest-benchmark JSON runs and decide a verdict per benchmark.

Public API (``python -m harness report`` is built on it): ``compare(current, baseline, ...) -> ComparisonResult``,
``machine_id(machine_info) -> str`` (the file name stem for ``.benchmarks/baselines/<machine_id>.json``), the verdict
and result types, the loaders, and the ``extra_info`` keys a benchmark sets: THRESHOLD_KEY (``"threshold"``: its own
regression threshold, a fraction or ``"25%"``, copied there from ``@pytest.mark.bench_threshold``) and
HIGHER_IS_BETTER_KEY (``"higher_is_better"``: noted in the report; verdicts stay on time), and LIMIT_KEY, VALUE_KEY,
UNIT_KEY (``"limit"``, ``"value"``, ``"unit"``: a group's practical-limit entry and each benchmark's natural-unit
figure; the reports add an 'x limit' column and a per-group figures section, see ``harness.report.groups``).
``compare(current, None)`` reports a run that has no baseline yet: every benchmark "new", NO_BASELINE_NOTE on top.

Policies: pytest-benchmark 4.x and 5.x files are read, any other major version is refused (exit 2); current and
baseline of different supported majors, or from different machines (node, cpu brand, machine), give a warning at the
top of every report. The verdict rule is in ``harness.report.compare`` (raw and limit-normalized comparisons must
agree; limit entries never fail the run) and ``harness.report.stats`` (significance, threshold, CI beyond 1). Exit
status: 0 pass, 1 a benchmark other than a limit entry regressed (unless ``--no-fail``), 2 unusable input.
"""

from harness.report.compare import NO_BASELINE_NOTE, BenchmarkComparison, ComparisonResult, compare
from harness.report.errors import ReportInputError
from harness.report.groups import LIMIT_KEY, UNIT_KEY, VALUE_KEY
from harness.report.load import SUPPORTED_MAJORS, BenchmarkRecord, BenchmarkRun, parse_run, read_json
from harness.report.machine import machine_id
from harness.report.stats import Verdict
from harness.report.thresholds import HIGHER_IS_BETTER_KEY, THRESHOLD_KEY, parse_threshold

__all__ = [
    "HIGHER_IS_BETTER_KEY",
    "LIMIT_KEY",
    "NO_BASELINE_NOTE",
    "SUPPORTED_MAJORS",
    "THRESHOLD_KEY",
    "UNIT_KEY",
    "VALUE_KEY",
    "BenchmarkComparison",
    "BenchmarkRecord",
    "BenchmarkRun",
    "ComparisonResult",
    "ReportInputError",
    "Verdict",
    "compare",
    "machine_id",
    "parse_run",
    "parse_threshold",
    "read_json",
]
