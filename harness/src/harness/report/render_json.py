"""The machine-readable report (``report.json``, schema_version 2).

Top level: ``schema_version``, ``failed`` (bool: a benchmark other than a limit entry regressed), ``limits_moved``
(fullnames of the limit entries judged regressed or improved, which never fail the run),
``threshold``/``alpha``/``confidence``, ``warnings`` and ``notes`` (lists of str), ``counts`` (verdict -> int),
``current``/``baseline`` (source, datetime, pytest_benchmark_version, commit_info, machine:
node/cpu/machine/machine_id/system/release/python_version/runtime; ``baseline`` is null when there is none),
``history_runs`` and ``benchmarks``: one object per benchmark with fullname, name, group, verdict, threshold, ratio,
ci ([low, high] or null), p_value (null when not computable; so is any non-finite number), test, note,
higher_is_better, limit (bool: a practical-limit entry), x_limit (median / its group's limit median in the current
run, or null), normalized_ratio/normalized_ci/normalized_p_value (the limit-normalized comparison, or null),
limit_ratio (current / baseline median of the group's limit, or null), fails (bool: this benchmark fails the run) and
``current``/``baseline`` summaries (seconds) or null. Version 2 added limits_moved, the normalized fields, limit_ratio
and fails, and ``failed`` no longer counts limit entries.
"""

from __future__ import annotations

import json
import math
from typing import Any

from harness.report.compare import BenchmarkComparison, ComparisonResult
from harness.report.load import BenchmarkRecord, BenchmarkRun
from harness.report.machine import machine_fields, machine_id
from harness.report.stats import Verdict

SCHEMA_VERSION = 2


def render_json(result: ComparisonResult, history_runs: int) -> str:
    """The report as JSON text (strict JSON: NaN and infinities become null, also inside the extra_info, commit_info
    and machine facts copied from the input files, which pytest-benchmark writes with NaN allowed)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "failed": result.failed,
        "limits_moved": [c.fullname for c in result.limit_moves],
        "threshold": result.threshold,
        "alpha": result.alpha,
        "confidence": result.confidence,
        "warnings": list(result.warnings),
        "notes": list(result.notes),
        "counts": {verdict.value: count for verdict, count in result.counts().items()},
        "current": _run(result.current),
        "baseline": _run(result.baseline) if result.baseline is not None else None,
        "history_runs": history_runs,
        "benchmarks": [_benchmark(c) for c in result.comparisons],
    }
    return json.dumps(_strict(doc), indent=2, allow_nan=False) + "\n"


def _run(run: BenchmarkRun) -> dict[str, Any]:
    info = run.machine_info
    machine: dict[str, Any] = dict(machine_fields(info))
    machine.update(
        machine_id=machine_id(info) if any(machine.values()) else None,
        system=info.get("system"),
        release=info.get("release"),
        python_version=info.get("python_version"),
        runtime=info.get("runtime"),
    )
    return {
        "source": run.source,
        "datetime": run.datetime.isoformat(),
        "pytest_benchmark_version": run.version,
        "commit_info": dict(run.commit_info),
        "machine": machine,
    }


def _benchmark(c: BenchmarkComparison) -> dict[str, Any]:
    return {
        "fullname": c.fullname,
        "name": c.record.name,
        "group": c.record.group,
        "verdict": c.verdict.value,
        "threshold": c.threshold,
        "ratio": _finite(c.ratio),
        "ci": [_finite(c.ci[0]), _finite(c.ci[1])] if c.ci else None,
        "p_value": _finite(c.p_value),
        "test": c.test,
        "note": c.note,
        "higher_is_better": c.higher_is_better,
        "limit": c.is_limit,
        "x_limit": _finite(c.x_limit),
        "normalized_ratio": _finite(c.normalized_ratio),
        "normalized_ci": [_finite(c.normalized_ci[0]), _finite(c.normalized_ci[1])] if c.normalized_ci else None,
        "normalized_p_value": _finite(c.normalized_p_value),
        "limit_ratio": _finite(c.limit_ratio),
        "fails": c.verdict is Verdict.REGRESSED and not c.is_limit,
        "current": _record(c.current),
        "baseline": _record(c.baseline),
    }


def _strict(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth of dicts and lists, replaced by None."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def _finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: those (an untestable p-value, a degenerate bootstrap bound) become null."""
    return value if value is not None and math.isfinite(value) else None


def _record(record: BenchmarkRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "median": record.median,
        "mean": record.mean,
        "stddev": record.stddev,
        "min": record.min,
        "max": record.max,
        "iqr": record.iqr,
        "rounds": record.rounds,
        "per_round_data": record.data is not None,
        "extra_info": dict(record.extra_info),
    }
