"""Reading and validating pytest-benchmark JSON (``pytest --benchmark-json FILE`` or ``--benchmark-autosave``).

The format is the one pytest-benchmark 4.x and 5.x write (``pytest_benchmark/session.py`` and ``stats.py``): a top-level
object with ``machine_info``, ``commit_info``, ``benchmarks`` (list), ``datetime`` (ISO 8601) and ``version``; each
benchmark has ``name``, ``fullname``, ``group``, ``params``, ``extra_info`` and ``stats`` with summary statistics in
seconds and, when pytest-benchmark included it, ``stats.data``: the per-round times in seconds (one entry per round,
each the round's time divided by its iterations).

Version policy: files whose ``version`` has a major number in SUPPORTED_MAJORS are read; any other major version is
refused (ReportInputError), because the field layout is only known for those. Current and baseline from two different
supported majors are compared with a warning (see ``compare``).
"""

from __future__ import annotations

import json
import re
import reprlib
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from harness.bench_schema import PAIRED_LIMIT_KEY, RUN_KEY, finite_float, work_change
from harness.report.errors import ReportInputError

SUPPORTED_MAJORS = (4, 5)
MAX_RUN_FILE_BYTES = 256 << 20  # a whole-suite A/B run file with every round is under 1 MiB
# Plausible seconds per iteration. Outside them a file is corrupt or hand-made: no call takes less than a picosecond
# (a few CPU cycles take ~1 ns) and no benchmark round more than 1e6 s (11.6 days). The bounds also keep every ratio of
# medians, its bootstrap CI and the plot axes finite (a median of 5e-324 s made the ratio overflow to inf).
MIN_SECONDS = 1e-12
MAX_SECONDS = 1e6
_PLAUSIBLE = f"per iteration (medians >= {MIN_SECONDS:g} s, every time <= {MAX_SECONDS:g} s); is the file corrupt?"
_TOP_LEVEL = ("machine_info", "commit_info", "benchmarks", "datetime", "version")
_REQUIRED_STATS = ("median", "mean", "stddev", "min", "max", "rounds")


@dataclass(frozen=True)
class BenchmarkRecord:
    """One benchmark of one run. Times are seconds per iteration; ``data`` holds per-round times (or None).

    ``paired_limit``/``paired_limit_data``: the limit this entry was timed beside and that limit's round times, one
    per round of ``data`` and taken right next to it (``extra_info[PAIRED_LIMIT_KEY]``), or None.
    """

    fullname: str
    name: str
    group: str | None
    params: Mapping[str, Any]
    extra_info: Mapping[str, Any]
    median: float
    mean: float
    stddev: float
    min: float
    max: float
    rounds: int
    iqr: float | None
    q1: float | None
    q3: float | None
    data: np.ndarray | None = field(default=None, compare=False, repr=False)
    paired_limit: str | None = None
    paired_limit_data: np.ndarray | None = field(default=None, compare=False, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)

    def work_change(self, before: BenchmarkRecord) -> str | None:
        """How this record's work differs from ``before``'s (``harness.bench_schema.work_change`` of their
        ``extra_info``), e.g. ``'elements 4194304 -> 1048576'``; None when it does not."""
        return work_change(before.extra_info, self.extra_info)


@dataclass(frozen=True)
class BenchmarkRun:
    """One pytest-benchmark file: metadata plus benchmarks keyed by ``fullname`` (in file order); ``harness``: the
    paired runner's RUN_KEY object (mode, A/B side and pairing id; ``harness.bench_schema``), {} for other files."""

    source: str
    machine_info: Mapping[str, Any]
    commit_info: Mapping[str, Any]
    datetime: datetime
    version: str
    benchmarks: Mapping[str, BenchmarkRecord]
    harness: Mapping[str, Any] = field(default_factory=dict)

    @property
    def major_version(self) -> int:
        """The pytest-benchmark major version that wrote the file."""
        return _major(self.version, self.source)


def read_json(path: str | Path, role: str) -> dict[str, Any]:
    """Read the JSON object in ``path``; ``role`` ('current', 'baseline', 'history') names it in messages.

    Raises ReportInputError when the file is missing, not a regular file (a device such as /dev/zero, a FIFO, a
    directory), larger than MAX_RUN_FILE_BYTES, unreadable, empty, not JSON (including integers of more digits than
    Python converts and nesting deeper than its parser goes), or not a JSON object.
    """
    where = f"{role} file {str(path)!r}"
    try:
        _check_regular(Path(path), where)
        with open(path, "rb") as f:
            raw = f.read(MAX_RUN_FILE_BYTES + 1)  # bounded: /proc files say size 0, and a file may grow meanwhile
        if len(raw) > MAX_RUN_FILE_BYTES:
            raise ReportInputError(f"{where} holds more than {MAX_RUN_FILE_BYTES:,} bytes, more than any run file "
                                   "this harness reads")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise ReportInputError(f"{where} does not exist; pass a file written by 'pytest --benchmark-json'") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{where} cannot be read: {exc}") from None
    if not text.strip():
        raise ReportInputError(f"{where} is empty; the benchmark run that should have written it probably failed")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        position = f"line {exc.lineno} column {exc.colno}"
        raise ReportInputError(f"{where} is not valid JSON ({exc.msg} at {position})") from None
    except (ValueError, RecursionError) as exc:  # an integer of > 4300 digits; nesting deeper than the parser's stack
        raise ReportInputError(f"{where} is not a usable JSON document ({type(exc).__name__}: {exc})") from None
    if not isinstance(doc, dict):
        raise ReportInputError(f"{where} holds a JSON {type(doc).__name__}, not a pytest-benchmark object")
    return doc


def _check_regular(path: Path, where: str) -> None:
    """Refuse what is not a regular file of at most MAX_RUN_FILE_BYTES: reading /dev/zero or a FIFO never ends."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise ReportInputError(f"{where} is not a regular file; pass a file written by 'pytest --benchmark-json'")
    if info.st_size > MAX_RUN_FILE_BYTES:
        raise ReportInputError(f"{where} holds {info.st_size:,} bytes, more than any run file this harness reads "
                               f"({MAX_RUN_FILE_BYTES:,})")


def parse_run(doc: Mapping[str, Any], source: str) -> BenchmarkRun:
    """Validate a decoded pytest-benchmark document and turn it into a BenchmarkRun.

    ``source`` names the document in messages (a path or 'current'/'baseline').
    Raises ReportInputError when it is not a pytest-benchmark document, comes from an unsupported major version, has no
    benchmarks, repeats a fullname, or a benchmark lacks a required field, has a name or group that is not a string,
    holds non-positive, non-finite or implausible times (see MIN_SECONDS, MAX_SECONDS), or per-round data whose length
    is not its round count.
    """
    if not isinstance(doc, Mapping):
        raise ReportInputError(f"{source}: expected a pytest-benchmark JSON object, got {type(doc).__name__}")
    absent = [key for key in _TOP_LEVEL if key not in doc]
    if absent:
        raise ReportInputError(
            f"{source} is not a pytest-benchmark file (missing {', '.join(absent)}); write it with 'pytest --benchmark-json FILE'"
        )
    version = str(doc["version"])
    if _major(version, source) not in SUPPORTED_MAJORS:
        supported = ", ".join(f"{m}.x" for m in SUPPORTED_MAJORS)
        raise ReportInputError(
            f"{source} was written by pytest-benchmark {version}; this report reads {supported} only: rerun the "
            "benchmarks with a supported pytest-benchmark"
        )
    for key in ("machine_info", "commit_info"):
        if not isinstance(doc[key], Mapping):
            raise ReportInputError(f"{source}: '{key}' must be an object, got {type(doc[key]).__name__}")
    if not isinstance(doc["benchmarks"], list):
        raise ReportInputError(f"{source}: 'benchmarks' must be a list, got {type(doc['benchmarks']).__name__}")
    if not doc["benchmarks"]:
        raise ReportInputError(f"{source} contains no benchmarks; did the benchmark run select or run any test?")
    benchmarks: dict[str, BenchmarkRecord] = {}
    for index, entry in enumerate(doc["benchmarks"]):
        record = _parse_benchmark(entry, f"{source}: benchmarks[{index}]")
        if record.fullname in benchmarks:
            raise ReportInputError(f"{source}: benchmark {record.fullname!r} appears twice; fullnames must be unique")
        benchmarks[record.fullname] = record
    harness = doc.get(RUN_KEY, {})
    if not isinstance(harness, Mapping):  # an empty list or string too: the writer always gives an object
        raise ReportInputError(f"{source}: '{RUN_KEY}' must be an object, got {type(harness).__name__}")
    _check_harness(harness, source)
    return BenchmarkRun(
        source=source,
        machine_info=doc["machine_info"],
        commit_info=doc["commit_info"],
        datetime=_parse_datetime(doc["datetime"], source),
        version=version,
        benchmarks=benchmarks,
        harness=harness,
    )


def _check_harness(harness: Mapping[str, Any], source: str) -> None:
    """Raise ReportInputError for RUN_KEY fields of the wrong type (``harness.bench_schema``): a string ``pairing``
    and ``mode``, a list of strings ``warnings`` and ``selection``, a number ``planted``."""
    for key in ("pairing", "mode"):
        if harness.get(key) is not None and not isinstance(harness[key], str):
            raise ReportInputError(f"{source}: {RUN_KEY}.{key} must be a string, got {harness[key]!r}")
    for key in ("warnings", "selection"):
        value = harness.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ReportInputError(f"{source}: {RUN_KEY}.{key} must be a list of strings, got {reprlib.repr(value)}")
    planted = harness.get("planted")
    if planted is not None and finite_float(planted) is None:
        raise ReportInputError(f"{source}: {RUN_KEY}.planted must be a number (the --plant-slowdown factor), got "
                               f"{planted!r}")


def _major(version: str, source: str) -> int:
    head = version.split(".", 1)[0]
    if not re.fullmatch(r"[0-9]+", head):  # str.isdigit also takes '²' and other digits int() refuses
        raise ReportInputError(f"{source}: pytest-benchmark version {version!r} is not of the form MAJOR.MINOR.PATCH")
    return int(head)


def _parse_datetime(value: object, source: str) -> datetime:
    """ISO 8601; a trailing 'Z' is UTC, and a time without zone (older pytest-benchmark) is taken as UTC."""
    if not isinstance(value, str):
        raise ReportInputError(f"{source}: 'datetime' must be an ISO 8601 string, got {value!r}")
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ReportInputError(f"{source}: 'datetime' {value!r} is not ISO 8601") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _parse_benchmark(raw: object, where: str) -> BenchmarkRecord:
    entry, fullname, stats, rounds = _check_entry(raw, where)
    where = f"{where} ({fullname})"
    extra_info = entry.get("extra_info") or {}
    params = entry.get("params") or {}
    if not isinstance(extra_info, Mapping) or not isinstance(params, Mapping):
        raise ReportInputError(f"{where}: 'extra_info' and 'params' must be objects")
    name, group = entry["name"], entry.get("group")
    if not isinstance(name, str) or not (group is None or isinstance(group, str)):
        raise ReportInputError(f"{where}: 'name' must be a string and 'group' a string or null, got {name!r}, {group!r}")
    data = _parse_data(stats.get("data"), where)
    if data is not None and data.size != rounds:
        raise ReportInputError(f"{where}: stats.data holds {data.size} round times but stats.rounds is {rounds}")
    paired_limit, paired_data = _parse_paired_limit(extra_info.get(PAIRED_LIMIT_KEY), rounds, where)
    if paired_data is not None and data is not None and not np.all(data > 0):
        raise ReportInputError(f"{where}: stats.data holds a round of 0 s; its ratio to the paired limit's round "
                               f"is undefined")
    return BenchmarkRecord(
        fullname=fullname,
        name=name,
        group=group,
        params=params,
        extra_info=extra_info,
        median=_time(stats, "median", where, positive=True),
        mean=_time(stats, "mean", where, positive=True),
        stddev=_time(stats, "stddev", where, positive=False),
        min=_time(stats, "min", where, positive=False),
        max=_time(stats, "max", where, positive=True),
        rounds=rounds,
        iqr=_optional_time(stats, "iqr", where),
        q1=_optional_time(stats, "q1", where),
        q3=_optional_time(stats, "q3", where),
        data=data,
        paired_limit=paired_limit,
        paired_limit_data=paired_data,
        options=entry["options"] if isinstance(entry.get("options"), Mapping) else {},
    )


def _check_entry(entry: object, where: str) -> tuple[Mapping[str, Any], str, Mapping[str, Any], int]:
    """(entry, fullname, stats, rounds) of one ``benchmarks`` entry; ReportInputError when its skeleton is not
    pytest-benchmark's."""
    if not isinstance(entry, Mapping):
        raise ReportInputError(f"{where} must be an object, got {type(entry).__name__}")
    for key in ("name", "fullname", "stats"):
        if key not in entry:
            raise ReportInputError(f"{where} has no '{key}'; the file is not a complete pytest-benchmark result")
    fullname = entry["fullname"]
    if not isinstance(fullname, str) or not fullname:
        raise ReportInputError(f"{where}: 'fullname' must be a non-empty string, got {fullname!r}")
    where = f"{where} ({fullname})"
    stats = entry["stats"]
    if not isinstance(stats, Mapping):
        raise ReportInputError(f"{where}: 'stats' must be an object")
    missing = [key for key in _REQUIRED_STATS if key not in stats]
    if missing:
        raise ReportInputError(f"{where}: stats lack {', '.join(missing)}")
    rounds = stats["rounds"]
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ReportInputError(f"{where}: stats.rounds must be an integer >= 1, got {rounds!r}")
    return entry, fullname, stats, rounds


def _time(stats: Mapping[str, Any], key: str, where: str, *, positive: bool) -> float:
    value = stats[key]
    number = finite_float(value)
    if number is None:
        shown = f"an integer of {len(str(value))} digits" if isinstance(value, int) else repr(value)
        raise ReportInputError(f"{where}: stats.{key} must be a finite number of seconds, got {shown}")
    if number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise ReportInputError(f"{where}: stats.{key} must be {bound} seconds, got {value!r}")
    if number > MAX_SECONDS or (positive and number < MIN_SECONDS):
        raise ReportInputError(f"{where}: stats.{key} {value!r} s is not a plausible time {_PLAUSIBLE}")
    return number


def _optional_time(stats: Mapping[str, Any], key: str, where: str) -> float | None:
    return _time(stats, key, where, positive=False) if stats.get(key) is not None else None


def _parse_data(data: object, where: str) -> np.ndarray | None:
    if data is None:
        return None
    if not isinstance(data, list) or not data:
        raise ReportInputError(f"{where}: stats.data must be a non-empty list of per-round seconds")
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in data):
        raise ReportInputError(f"{where}: stats.data must hold only numbers (seconds per round)")
    floats = [finite_float(x) for x in data]
    if any(x is None or x < 0 for x in floats):
        raise ReportInputError(f"{where}: stats.data holds a non-finite or negative time")
    values = np.asarray(floats, dtype=np.float64)
    if np.median(values) == 0:
        raise ReportInputError(f"{where}: the median of stats.data is 0 s; a ratio to it is undefined (timer too coarse?)")
    median, top = float(np.median(values)), float(values.max())
    if top > MAX_SECONDS or median < MIN_SECONDS:
        raise ReportInputError(f"{where}: stats.data (median {median!r} s, max {top!r} s) is not plausible {_PLAUSIBLE}")
    return values


def _parse_paired_limit(value: object, rounds: int, where: str) -> tuple[str | None, np.ndarray | None]:
    """(limit fullname, its round times) of ``extra_info[PAIRED_LIMIT_KEY]``, or (None, None) when absent."""
    if value is None:
        return None, None
    key = f"extra_info.{PAIRED_LIMIT_KEY}"
    if not isinstance(value, Mapping) or not isinstance(value.get("fullname"), str) or "data" not in value:
        raise ReportInputError(f"{where}: {key} must be an object with 'fullname' (a string) and 'data'")
    data = _parse_data(value["data"], f"{where}: {key}")
    if data is None or data.size != rounds:
        size = 0 if data is None else data.size
        raise ReportInputError(f"{where}: {key}.data holds {size} round times but stats.rounds is {rounds}")
    if not np.all(data > 0):
        raise ReportInputError(f"{where}: {key}.data holds a round of 0 s; its ratio to the entry is undefined")
    return value["fullname"], data
