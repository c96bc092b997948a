"""Benchmark regression reports: compare pytest-benchmark JSON runs and decide a verdict per benchmark.

Public API (``python -m harness report`` and ``python -m harness bench`` are built on it): ``compare(current,
baseline, ...) -> ComparisonResult`` (A/B or stored-baseline mode, chosen by the runs; see ``harness.report.compare``),
``machine_id(machine_info) -> str`` (the file name stem of a machine's baseline), the verdict and result types, the
loaders, and ``RunStore`` (run files, pruning, baselines, history: ``harness.report.storage``). The metadata keys that
benchmarks write are in ``harness.bench_schema``. ``compare(current, None)`` reports a run that has no baseline yet:
every benchmark "new", NO_BASELINE_NOTE on top.

Policies: pytest-benchmark 4.x and 5.x files are read, any other major version is refused (exit 2); current and
baseline of different supported majors, or from different machines (node, cpu brand, machine), give a warning at the
top of every report. Exit status: 0 pass, 1 an entry regressed or drifted (unless ``--no-fail``), 2 unusable input.
"""

from harness.gate import Verdict
from harness.report.compare import NO_BASELINE_NOTE, BenchmarkComparison, ComparisonResult, compare
from harness.report.errors import ReportInputError
from harness.report.load import SUPPORTED_MAJORS, BenchmarkRecord, BenchmarkRun, parse_run, read_json
from harness.report.machine import machine_id
from harness.report.thresholds import parse_threshold

__all__ = [
    "NO_BASELINE_NOTE",
    "SUPPORTED_MAJORS",
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
