"""Machine identity from pytest-benchmark ``machine_info``: a stable id for baseline storage, and mismatch warnings.

pytest-benchmark fills ``machine_info`` from ``platform`` (``node``, ``machine``, ...) and py-cpuinfo (``cpu``:
``brand_raw`` in py-cpuinfo >= 6, ``brand`` before).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from harness.report.errors import ReportInputError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def machine_fields(machine_info: Mapping[str, Any]) -> dict[str, str]:
    """The fields that identify a machine: ``node`` (host name), ``cpu`` (brand string), ``machine`` (e.g. x86_64).

    A field that is absent comes back as ''.
    """
    cpu = machine_info.get("cpu")
    brand = ""
    if isinstance(cpu, Mapping):
        brand = str(cpu.get("brand_raw") or cpu.get("brand") or "")
    return {
        "node": str(machine_info.get("node") or ""),
        "cpu": brand,
        "machine": str(machine_info.get("machine") or ""),
    }


def machine_id(machine_info: Mapping[str, Any]) -> str:
    """A stable, filesystem-safe id of the machine described by pytest-benchmark ``machine_info``.

    Form: ``<node>_<machine>_<cpu>-<hash8>``; each part keeps only ``[A-Za-z0-9._-]`` (runs of other characters become
    '-') and is cut to 40 characters, and ``hash8`` is the first 8 hex digits of the SHA-256 of the untouched
    node/cpu/machine, so two machines whose names differ only in dropped characters still get different ids.
    The result is at most 140 characters and is used as ``.benchmarks/baselines/<machine_id>.json``.
    Raises ReportInputError when node, cpu brand and machine are all absent (nothing identifies the machine).
    """
    fields = machine_fields(machine_info)
    if not any(fields.values()):
        raise ReportInputError(
            "machine_info has none of node, cpu.brand_raw, machine; pass the machine_info of a pytest-benchmark file"
        )
    digest = hashlib.sha256("\0".join(fields[k] for k in ("node", "cpu", "machine")).encode()).hexdigest()[:8]
    parts = [_slug(fields[k]) for k in ("node", "machine", "cpu")]
    return "_".join(parts) + "-" + digest


def machine_mismatch(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> str | None:
    """A warning naming the machine fields (node, cpu, machine, and the GPU when both runs recorded the harness's
    ``machine_info['runtime']``) that differ between two runs, or None if none do."""
    ours, theirs = machine_fields(current), machine_fields(baseline)
    diffs = [f"{key}: {ours[key] or '?'!r} vs {theirs[key] or '?'!r}" for key in ours if ours[key] != theirs[key]]
    now, before = current.get("runtime"), baseline.get("runtime")
    if isinstance(now, Mapping) and isinstance(before, Mapping) and now.get("gpu") != before.get("gpu"):
        diffs.append(f"gpu: {now.get('gpu') or 'none'!r} vs {before.get('gpu') or 'none'!r}")
    if not diffs:
        return None
    return "current and baseline ran on different machines (" + "; ".join(diffs) + "); timings may not be comparable"


def _slug(text: str) -> str:
    slug = _UNSAFE.sub("-", text).strip("-.")[:40].strip("-.")
    return slug or "unknown"
