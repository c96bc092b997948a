"""The machine-readable report (``report.json``, schema_version 4).

Top level: ``schema_version``, ``mode`` ("ab" or "stored"), ``failed`` (bool: an entry regressed or drifted),
``failing`` (their fullnames), ``counts`` (section key -> int: regressed, drifted, improved, moved (limits and peers
that moved, never failing), unjudged (not judged: its work changed between the sides, or a multi-threaded A/B
benchmark whose CPUs other programs used; never failing), unchanged, new, missing; every benchmark in exactly one,
the same numbers every other output prints), ``threshold`` (stored mode; null in A/B),
``min_effect``/``alpha``/``confidence``, ``warnings`` and ``notes`` (lists of str),
``current``/``baseline`` (source, datetime, pytest_benchmark_version, commit_info, harness (the runner's run info),
machine: node/cpu/machine/machine_id/system/release/python_version/runtime; ``baseline`` is null when there is none),
``history_runs`` and ``benchmarks``: one object per benchmark with fullname, name, group, role, section, verdict,
fails, threshold, ratio, ci ([low, high] or null), p_value (null when not computable; so is any non-finite number),
test, note, higher_is_better, x_limit ({ratio, limit, paired} or null), normalized_ratio/normalized_ci/
normalized_p_value/normalized_paired and limit_ratio (stored mode's limit-normalized comparison, or null), pairs,
stop, detectable and process_ratios (A/B mode, or null; process_ratios: the median ratio of each process pair),
drift ({ratio, runs, first, last, first_at, last_at, measure} or null), and ``current``/``baseline`` summaries
(seconds) or null. Version 3 added mode, roles, sections, A/B and drift fields; the limit flag became ``role``,
``limits_moved`` became the ``moved`` section. Version 4 added the ``unjudged`` section and verdict. Version 5 added
``headline``, ``sides`` (A/B: {"A": "HEAD~1 (37a08e2053b1)", "B": ...}, else null) and per benchmark ``short_name``,
``change`` and ``interval`` (fractions: 0.05 = 5% slower), ``figure`` (each side's figure in the benchmark's unit,
from its own rounds); stored mode's verdicts are a trend view that never fails (``failed`` is A/B only).
"""

from __future__ import annotations

import json
import math
from typing import Any

from harness.bench_schema import MODE_AB
from harness.report import formatting as fmt
from harness.report.compare import BenchmarkComparison, ComparisonResult
from harness.report.groups import record_figure
from harness.report.load import BenchmarkRecord, BenchmarkRun
from harness.report.machine import machine_fields, machine_id

SCHEMA_VERSION = 5


def render_json(result: ComparisonResult, history_runs: int) -> str:
    """The report as JSON text (strict JSON: NaN and infinities become null, also inside the extra_info, commit_info
    and machine facts copied from the input files, which pytest-benchmark writes with NaN allowed)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "mode": result.mode,
        "headline": fmt.headline(result),
        "sides": {label: text for label, text in fmt.sides(result)} if result.mode == "ab" else None,
        "failed": result.failed,
        "failed_benchmarks": list(result.broken),
        "failing": [c.fullname for c in result.failing],
        "counts": result.counts(),
        "threshold": None if result.mode == MODE_AB else result.threshold,
        "min_effect": result.min_effect,
        "alpha": result.alpha,
        "confidence": result.confidence,
        "warnings": list(result.warnings),
        "notes": list(result.notes),
        "current": _run(result.current),
        "baseline": _run(result.baseline) if result.baseline is not None else None,
        "history_runs": history_runs,
        "benchmarks": [_benchmark(section.key, c) for section in result.sections for c in section.comparisons],
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
        "harness": dict(run.harness),
        "machine": machine,
    }


def _benchmark(section: str, c: BenchmarkComparison) -> dict[str, Any]:
    x, d = c.x_limit, c.drift
    return {
        "fullname": c.fullname,
        "short_name": fmt.short_name(c.fullname),
        "name": c.record.name,
        "group": c.record.group,
        "role": c.role,
        "section": section,
        "verdict": c.verdict.value,
        "fails": c.fails,
        "threshold": c.threshold,
        "ratio": _finite(c.ratio),
        "ci": _pair(c.ci),
        "p_value": _finite(c.p_value),
        "test": c.test,
        "note": c.note,
        "higher_is_better": c.higher_is_better,
        "x_limit": {"ratio": _finite(x.ratio), "limit": x.limit, "paired": x.paired} if x else None,
        "normalized_ratio": _finite(c.normalized_ratio),
        "normalized_ci": _pair(c.normalized_ci),
        "normalized_p_value": _finite(c.normalized_p_value),
        "normalized_paired": c.normalized_paired,
        "limit_ratio": _finite(c.limit_ratio),
        "pairs": c.pairs,
        "stop": c.stop,
        "detectable": _finite(c.detectable),
        "process_ratios": list(c.process_ratios) if c.process_ratios else None,
        "drift": {"ratio": d.ratio, "runs": d.runs, "first": d.first, "last": d.last, "first_at": d.first_at.isoformat(),
                  "last_at": d.last_at.isoformat(), "measure": d.measure} if d else None,
        "change": None if c.ratio is None else _finite(c.ratio - 1),
        "interval": None if c.ci is None else [_finite(c.ci[0] - 1), _finite(c.ci[1] - 1)],
        "figure": {"A" if c.pairs is not None else "baseline": _figure(c.baseline),
                   "B" if c.pairs is not None else "current": _figure(c.current)},
        "current": _record(c.current),
        "baseline": _record(c.baseline),
    }


def _figure(record: BenchmarkRecord | None) -> str | None:
    return record_figure(record) if record is not None else None


def _pair(bounds: tuple[float, float] | None) -> list[float | None] | None:
    return [_finite(bounds[0]), _finite(bounds[1])] if bounds else None


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
