"""Run files of the paired runner: pytest-benchmark JSON (the format of ``pytest --benchmark-json``), so the reports,
``pytest-benchmark compare`` and any other reader of that format take them as they are.

Each benchmark's ``stats.data`` holds its rounds in the order they were taken (seconds per call), which is what pairs
them: round i of a benchmark in the A file and round i in the B file of the same A/B run form pair i. What the runner
adds is under ``options`` (how it measured) and the run-level RUN_KEY object (``harness.bench_schema``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from harness.bench_schema import RUN_KEY
from harness.paired.engine import Rounds
from harness.paired.session import Collected, Finished

__all__ = ["CpuUse", "benchmark_record", "run_document", "summary_stats"]


def summary_stats(per_call: Sequence[float], iterations: int) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` object of rounds ``per_call`` (seconds per call, in order), ``iterations`` calls
    each: min, max, mean, stddev, rounds, median, iqr, q1, q3, iqr_outliers, stddev_outliers, outliers, ld15iqr,
    hd15iqr, ops, total, data, iterations. Raises ValueError for no rounds."""
    data = np.asarray(per_call, dtype=np.float64)
    if data.size == 0:
        raise ValueError("a benchmark record needs at least one round")
    q1, median, q3 = (float(x) for x in np.percentile(data, [25, 50, 75]))
    iqr = q3 - q1
    mean = float(data.mean())
    stddev = float(data.std(ddof=1)) if data.size > 1 else 0.0
    inside = data[(data >= q1 - 1.5 * iqr) & (data <= q3 + 1.5 * iqr)]
    iqr_outliers = int(data.size - inside.size)
    stddev_outliers = int(np.count_nonzero((data < mean - stddev) | (data > mean + stddev)))
    return {
        "min": float(data.min()), "max": float(data.max()), "mean": mean, "stddev": stddev, "rounds": int(data.size),
        "median": median, "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers, "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": float(inside.min()), "hd15iqr": float(inside.max()), "ops": 1.0 / mean,
        "total": float(data.sum() * iterations), "data": [float(x) for x in data], "iterations": int(iterations),
    }


@dataclass(frozen=True)
class CpuUse:
    """The CPUs of a benchmark's rounds: ``threads`` it runs at once, and ``others``: how many CPUs' worth of time
    other programs took on the CPUs it was timed on (``CpuChooser.others_cpus``; None where unknown)."""

    threads: int
    others: float | None


def benchmark_record(nodeid: str, finished: Finished, per_call: Sequence[float], iterations: int, rounds: Rounds,
                     extra_info: Mapping[str, Any] | None = None, clock: str = "perf_counter",
                     pair_rounds: Sequence[int] | None = None, cpus: CpuUse | None = None) -> dict[str, Any]:
    """One entry of a run file's ``benchmarks`` list: what the test recorded (``finished``) plus the rounds this side
    took (``per_call``, seconds per call), timed with ``clock``; ``extra_info`` adds to the test's own (e.g. the paired
    limit rounds). A/B: ``pair_rounds`` (options) gives the rounds of each process pair, whose rounds ``per_call``
    holds one pair after another (``harness.gate.split_pairs``). ``cpus`` adds the options ``threads`` and
    ``others_cpus``."""
    options: dict[str, Any] = {"timer": clock, "runner": "harness.paired", "stop": rounds.stop,
                               "measure_seconds": round(rounds.seconds, 3)}
    if pair_rounds is not None:
        options["pair_rounds"] = [int(n) for n in pair_rounds]
    if cpus is not None:
        options["threads"] = cpus.threads
        if cpus.others is not None:
            options["others_cpus"] = round(cpus.others, 3)
    return {
        "group": finished.group,
        "name": finished.name,
        "fullname": nodeid,
        "params": finished.params,
        "param": finished.param,
        "extra_info": {**finished.extra_info, **(extra_info or {})},
        "options": options,
        "stats": summary_stats(per_call, iterations),
    }


def run_document(collected: Collected, records: list[dict[str, Any]], harness_info: Mapping[str, Any]) -> dict[str, Any]:
    """A whole run file: the worker's machine and commit info, ``records``, the time now (UTC) and pytest-benchmark's
    version, plus RUN_KEY = ``harness_info``."""
    return {
        "machine_info": collected.machine_info,
        "commit_info": collected.commit_info,
        "benchmarks": records,
        "datetime": datetime.now(timezone.utc).isoformat(),
        "version": collected.version,
        RUN_KEY: dict(harness_info),
    }
