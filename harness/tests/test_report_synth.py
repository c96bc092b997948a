"""Synthetic pytest-benchmark documents with known answers, shared by the test_report_* modules (holds no tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def rounds(rng: np.random.Generator, median: float, count: int = 60, sigma: float = 0.07) -> np.ndarray:
    """``count`` per-round times (seconds) with lognormal noise of relative spread ``sigma`` around ``median``."""
    return median * rng.lognormal(0.0, sigma, count)


def benchmark(fullname: str, data: np.ndarray, extra_info: dict | None = None, with_data: bool = True) -> dict:
    """One pytest-benchmark 5.x benchmark entry whose summary stats are computed from ``data`` (seconds)."""
    q1, median, q3 = np.percentile(data, [25, 50, 75])
    stats: dict[str, Any] = {
        "min": float(data.min()),
        "max": float(data.max()),
        "mean": float(data.mean()),
        "stddev": float(data.std(ddof=1)) if data.size > 1 else 0.0,  # as pytest-benchmark reports one round
        "rounds": int(data.size),
        "median": float(median),
        "iqr": float(q3 - q1),
        "q1": float(q1),
        "q3": float(q3),
        "iqr_outliers": 0,
        "stddev_outliers": 0,
        "outliers": "0;0",
        "ld15iqr": float(data.min()),
        "hd15iqr": float(data.max()),
        "ops": float(1.0 / data.mean()),
        "total": float(data.sum()),
        "iterations": 1,
    }
    if with_data:
        stats["data"] = [float(x) for x in data]
    name = fullname.split("::")[-1]
    return {
        "group": None,
        "name": name,
        "fullname": fullname,
        "params": None,
        "param": None,
        "extra_info": extra_info or {},
        "options": {"disable_gc": False, "timer": "perf_counter", "min_rounds": 5, "warmup": False},
        "stats": stats,
    }


def run(
    benchmarks: list[dict],
    *,
    node: str = "ci-runner-1",
    cpu: str = "Test CPU 3000",
    machine: str = "x86_64",
    commit: str = "0123456789abcdef0123456789abcdef01234567",
    branch: str = "main",
    dirty: bool = False,
    when: str = "2025-01-02T03:04:05.000000+00:00",
    version: str = "5.2.3",
) -> dict:
    """A whole pytest-benchmark document around ``benchmarks``."""
    return {
        "machine_info": {
            "node": node,
            "processor": "",
            "machine": machine,
            "python_implementation": "CPython",
            "python_version": "3.11.7",
            "release": "6.1.0",
            "system": "Linux",
            "cpu": {"brand_raw": cpu, "arch": "X86_64", "count": 2},
        },
        "commit_info": {
            "id": commit,
            "time": None,
            "author_time": None,
            "dirty": dirty,
            "project": "p",
            "branch": branch,
        },
        "benchmarks": benchmarks,
        "datetime": when,
        "version": version,
    }


def write(path: Path, doc: Any) -> Path:
    """Write ``doc`` as JSON to ``path`` and return the path."""
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path
