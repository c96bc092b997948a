"""PNG plots for the HTML report, drawn with matplotlib's Agg canvas (no display, no pyplot global state)."""

from __future__ import annotations

import io
from datetime import datetime

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.report.compare import BenchmarkComparison
from harness.report.formatting import time_unit
from harness.report.load import BenchmarkRecord

# Enough points to show the spread; more only slows drawing.
_MAX_STRIP_POINTS = 400
_DPI = 72


def benchmark_figure(comparison: BenchmarkComparison, trend: list[tuple[datetime, float]], current_at: datetime,
                     labels: tuple[str, str] = ("baseline", "current")) -> bytes:
    """PNG bytes: the spread of per-round times (box + strip; a box from summary stats without per-round data) of
    baseline and current, and, when ``trend`` (datetime, median seconds) is non-empty, the median over those runs with
    the baseline median as a dashed line and the current median as a star at ``current_at`` (the current run's time).
    ``labels`` name the two sides (A/B mode: "A", "B").
    """
    reference = comparison.record.median
    scale, unit = time_unit(reference)
    figure = Figure(figsize=(9.0 if trend else 5.0, 3.2), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2 if trend else 1, squeeze=False)[0]
    _spread(axes[0], comparison, scale, unit, labels)
    if trend:
        _trend(axes[1], comparison, trend, current_at, scale, unit)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _spread(ax, comparison: BenchmarkComparison, scale: float, unit: str, labels: tuple[str, str]) -> None:
    sides = [(label, rec) for label, rec in zip(labels, (comparison.baseline, comparison.current)) if rec]
    stats = [_box_stats(label, record, scale) for label, record in sides]
    ax.bxp(stats, showfliers=False, widths=0.5)
    rng = np.random.default_rng(0)
    for position, (_, record) in enumerate(sides, start=1):
        if record.data is None:
            continue
        points = record.data if record.data.size <= _MAX_STRIP_POINTS else rng.choice(record.data, _MAX_STRIP_POINTS)
        jitter = rng.uniform(-0.15, 0.15, points.size)
        ax.scatter(position + jitter, points / scale, s=6, alpha=0.35, color="tab:blue" if position == 1 else "tab:red")
    ax.set_ylabel(f"time per round ({unit})")
    ax.set_title("per-round spread", fontsize=10)


def _box_stats(label: str, record: BenchmarkRecord, scale: float) -> dict:
    if record.data is not None:
        q1, median, q3 = np.percentile(record.data, [25, 50, 75])
        low, high = float(record.data.min()), float(record.data.max())
    else:
        median, low, high = record.median, record.min, record.max
        q1 = record.q1 if record.q1 is not None else max(low, record.mean - record.stddev)
        q3 = record.q3 if record.q3 is not None else min(high, record.mean + record.stddev)
    return {
        "label": label if record.data is not None else f"{label}\n(summary)",
        "med": median / scale,
        "q1": q1 / scale,
        "q3": q3 / scale,
        "whislo": low / scale,
        "whishi": high / scale,
    }


def _trend(
    ax,
    comparison: BenchmarkComparison,
    trend: list[tuple[datetime, float]],
    current_at: datetime,
    scale: float,
    unit: str,
) -> None:
    moments = [moment for moment, _ in trend]
    ax.plot(moments, [median / scale for _, median in trend], marker="o", markersize=3, label="history")
    if comparison.baseline:
        ax.axhline(comparison.baseline.median / scale, linestyle="--", color="tab:blue", label="baseline")
    if comparison.current:
        ax.plot(
            [current_at],
            [comparison.current.median / scale],
            marker="*",
            markersize=12,
            color="tab:red",
            linestyle="none",
            label="current",
        )
    ax.set_ylabel(f"median ({unit})")
    ax.set_title("median over history", fontsize=10)
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)


def changes_figure(names: list[str], changes: list[float], intervals: list[tuple[float, float]],
                   min_effect: float) -> bytes:
    """PNG bytes: one row per benchmark (``names``, top to bottom), its change of B against A in percent as a dot
    with its interval as a bar, the minimum effect as dashed lines either side of 0; 8.5 inches wide at 96 dpi, so
    it fits a 1280 px window."""
    height = 0.8 + 0.22 * len(names)
    figure = Figure(figsize=(8.5, height), dpi=96, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    rows = np.arange(len(names))[::-1]
    values = np.array(changes) * 100
    low = values - np.array([lo for lo, _ in intervals]) * 100
    high = np.array([hi for _, hi in intervals]) * 100 - values
    ax.errorbar(values, rows, xerr=[np.clip(low, 0, None), np.clip(high, 0, None)], fmt="o", markersize=3,
                color="tab:blue", ecolor="tab:gray", capsize=2)
    for x in (-min_effect * 100, min_effect * 100):
        ax.axvline(x, linestyle="--", color="tab:red", linewidth=0.8)
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(rows, names, fontsize=7)
    ax.set_xlabel("change of B against A (%): right = B slower")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
