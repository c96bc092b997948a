"""``python -m harness bench`` end to end: real workers timing a small benchmark suite written for each test.

The suites time an empty loop of N steps, whose time is linear in N, so a slower version is simply a larger N: a
known answer. Budgets are
cut short (``--budget``) so each run takes a few seconds.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import bench
from harness.gate import LOOKS, PROCESS_PAIRS

SUITE = '''
import itertools

import pytest

N = {n}
LIMIT_N = 20000


def work(n):
    for _ in itertools.repeat(None, n):
        pass
    return n


@pytest.mark.benchmark(group="loop")
def test_entry(benchmark):
    assert benchmark(work, N) == N
    benchmark.extra_info.update(unit="us/call", value=benchmark.stats.stats.median * 1e6)


@pytest.mark.benchmark(group="loop")
@pytest.mark.bench_role("limit", reference="the same loop at its base size")
def test_limit(benchmark):
    benchmark(work, LIMIT_N)


@pytest.mark.bench_role("peer", peer="the same loop, standing in for another project")
def test_peer(benchmark):
    benchmark(work, LIMIT_N)
{extra}'''

FAST = ["--budget", "0.4"]
LOOK_ENDS = [PROCESS_PAIRS * k for k in range(1, LOOKS + 1)]  # the pairs an A/B entry can end with


def write_suite(root: Path, n: int | str = 20000, extra: str = "") -> Path:
    """The suite at ``root/bench_suite/test_loop.py`` with the entry's loop of ``n`` steps (or a Python expression
    for it); returns the directory."""
    suite = root / "bench_suite"
    suite.mkdir(parents=True, exist_ok=True)
    (suite / "test_loop.py").write_text(SUITE.format(n=n, extra=textwrap.dedent(extra)), encoding="utf-8")
    return suite


def run_bench(root: Path, *args: str) -> int:
    return bench.main(["--suite", str(root / "bench_suite"), "--out", str(root / "out"), "--baseline-dir",
                       str(root / "base"), *FAST, *args])


def report(root: Path) -> dict:
    return json.loads((root / "out" / "report.json").read_text())


def verdicts(doc: dict) -> dict[str, tuple[str, str]]:
    """test name -> (section, role) of a report.json."""
    return {b["name"]: (b["section"], b["role"]) for b in doc["benchmarks"]}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(bench.BASELINE_DIR_ENV, raising=False)
    return tmp_path


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def test_first_run_has_no_baseline_and_pairs_the_entry_with_its_limit(root, capsys):
    write_suite(root)
    assert run_bench(root) == 0
    out = capsys.readouterr().out
    assert "NO BASELINE: 0 regressed, 0 drifted, 0 improved, 0 limits/peers moved, 0 unchanged, 3 new" in out
    doc = report(root)
    assert doc["counts"]["new"] == 3 and doc["mode"] == "stored"
    assert verdicts(doc) == {"test_entry": ("new", "entry"), "test_limit": ("new", "limit"), "test_peer": ("new", "peer")}
    [run_file] = (root / "out" / "runs").glob("*.json")
    entry = next(b for b in json.loads(run_file.read_text())["benchmarks"] if b["name"] == "test_entry")
    paired = entry["extra_info"]["paired_limit"]
    assert paired["fullname"].endswith("test_loop.py::test_limit")
    assert len(paired["data"]) == entry["stats"]["rounds"]  # one limit round beside every entry round
    # "x limit" is the median of the same-moment ratios of those rounds (two processes of the same loop can read far
    # from 1 on a loaded machine, so the value is checked against the rounds, not against 1)
    x = next(b for b in doc["benchmarks"] if b["name"] == "test_entry")["x_limit"]
    expected = math.exp(statistics.median(math.log(e / lim) for e, lim in zip(entry["stats"]["data"], paired["data"])))
    assert x["paired"] and x["ratio"] == pytest.approx(expected, rel=1e-9)


def test_saved_baseline_then_a_slower_entry_shows_in_the_trend_without_failing(root, capsys):
    write_suite(root)
    assert run_bench(root, "--save-baseline") == 0
    [baseline] = (root / "base").glob("*.json")
    assert "baseline: saved" in capsys.readouterr().out
    # the entry does 8 times the work; its limit and the peer are unchanged. The two runs are minutes apart on a
    # machine whose load may change between them (two processes of one loop read up to 2x apart under CI's load),
    # so the effect is far larger than that
    write_suite(root, n=160000)
    assert run_bench(root) == 0  # stored mode informs; an A/B run gates (docs/benchmark-gate.md)
    doc = report(root)
    assert verdicts(doc)["test_entry"] == ("regressed", "entry") and not doc["failed"]
    entry = next(b for b in doc["benchmarks"] if b["name"] == "test_entry")
    assert entry["normalized_paired"] and 3.0 < entry["normalized_ratio"] < 24.0
    assert baseline.exists()
    assert "TREND: 1 of 1 entries slower than the baseline" in (root / "out" / "report.md").read_text()


def _commit_suite(root: Path, **suite: str) -> None:
    write_suite(root, **suite)
    git(root, "init", "-q")
    git(root, "add", "bench_suite")
    git(root, "commit", "-qm", "suite")


def test_a_b_run_flags_the_twice_slower_working_tree_and_lists_new_and_missing(root, capsys):
    seed = '''

    def test_seed(benchmark):  # where each worker runs, the hash seed it was given
        import os, pathlib
        pathlib.Path("seed.txt").write_text(os.environ["PYTHONHASHSEED"])
        benchmark(work, 1000)

    @pytest.mark.skip(reason="not on this machine")
    def test_skipped(benchmark):
        benchmark(work, 1000)
    '''
    _commit_suite(root, extra=seed + '''

    def test_removed(benchmark):
        benchmark(work, 1000)
    ''')
    write_suite(root, n=40000, extra=seed + '''

    def test_added(benchmark):
        benchmark(work, 1000)
    ''')
    assert run_bench(root, "--against", "HEAD") == 1
    doc = report(root)
    assert doc["mode"] == "ab" and doc["failed"]
    found = verdicts(doc)
    assert found["test_entry"] == ("regressed", "entry")
    assert (found["test_added"], found["test_removed"]) == (("new", "entry"), ("missing", "entry"))
    # unchanged code is never flagged at the corrected level; under load it may stay inconclusive
    assert found["test_seed"][0] in ("unchanged", "unjudged")
    # limits and peers (the same code on both sides) are not timed without --references
    assert "test_limit" not in found and "test_peer" not in found
    entry = next(b for b in doc["benchmarks"] if b["name"] == "test_entry")
    assert 1.6 < entry["ratio"] < 2.5 and entry["pairs"] in LOOK_ENDS and entry["interval"][0] > 0.5
    # each process pair reads the change too; one pair may sit far off it (two processes of one loop differ for their
    # lives, most under load): the pair is the unit of evidence, not a guarantee
    ratios = entry["process_ratios"]
    assert len(ratios) == entry["pairs"] and sum(1.2 < r < 3.5 for r in ratios) >= entry["pairs"] - 1
    # both workers of a process pair share a hash seed, and each pair has its own
    seeds = {p.parent.parent.name[-1] + p.parent.name: p.read_text() for p in root.glob(".benchmarks/ab/run*/*/seed.txt")}
    first_look = {f"{side}{n}": str(n - 1) for side in "AB" for n in (1, 2, 3, 4)}
    assert {k: v for k, v in seeds.items() if k in first_look} == first_look
    a, b = (json.loads((root / "out" / "ab" / f"{side}.json").read_text()) for side in "AB")
    assert a["harness"]["pairing"] == b["harness"]["pairing"] and (a["harness"]["side"], b["harness"]["side"]) == ("A", "B")
    assert a["harness"]["process_pairs"] == PROCESS_PAIRS and a["harness"]["entries"] == 2 and a["harness"]["looks"] == LOOKS
    # the report names each side as the user gave it, with its commit (the ref's, not the working tree's HEAD)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert a["commit_info"]["id"] == head and a["commit_info"]["ref"] == "HEAD"
    assert b["commit_info"]["dirty"] is True and doc["sides"]["A"] == f"HEAD ({head[:12]})"
    [a_entry] = [r for r in a["benchmarks"] if r["name"] == "test_entry"]
    assert len(a_entry["options"]["pair_rounds"]) == entry["pairs"]
    assert sum(a_entry["options"]["pair_rounds"]) == a_entry["stats"]["rounds"]
    assert a_entry["options"]["threads"] == 1
    out = capsys.readouterr().out
    assert "benchmark report (A/B): FAIL: 1 of 4 entries regressed" in out  # entry, seed, added, removed
    # skipped on both sides: one line per reason, never started, not judged; the reports say what was not timed
    assert "1 benchmark(s) skipped: not on this machine" in out
    assert "2 benchmark(s) skipped: a limit or peer: the same code on both sides" in out
    assert "test_skipped" not in verdicts(doc) and "not on this machine" not in (root / "out" / "logs" / "A1.log").read_text()
    assert "1 benchmark(s) not timed: not on this machine" in doc["notes"] and "NOTE: 1 benchmark(s) not timed" not in out
    markdown = (root / "out" / "report.md").read_text()
    assert "2 benchmark(s) not timed: a limit or peer" in markdown
    assert f"**A** = HEAD ({head[:12]})" in markdown and "docs/benchmark-gate.md" in markdown
    # the runs table lists A first, as the rest of the report does, and each column holds its own side's commit
    assert "| | A (git ref) | B (working tree) |" in markdown and "| time change (+ = B slower) |" in markdown
    assert re.search(rf"\| commit \| {head[:12]}[^|]*\| [0-9a-f]{{12}}[^|]*dirty \|", markdown)
    html = (root / "out" / "report.html").read_text()
    assert html.index("A (git ref)") < html.index("B (working tree)")
    # the report command refuses, for these files, the option of the other mode instead of ignoring it
    from harness.report.cli import main as report_main

    files = ["--current", str(root / "out" / "ab" / "B.json"), "--baseline", str(root / "out" / "ab" / "A.json")]
    assert report_main([*files, "--out", str(root / "again"), "--threshold", "20%"]) == 2
    assert "--threshold is stored-baseline mode's" in capsys.readouterr().err and not (root / "again").exists()


def test_a_b_of_an_installed_suite_without_an_editable_install_is_refused(root, capsys):
    """This test's repository has no package installed editable, so both sides would import the one installed
    ``harness.benchmarks``: an A/B run would compare B with B. It is refused before any worker starts."""
    _commit_suite(root)
    assert bench.main(["--suite", "harness.benchmarks", "--out", str(root / "out"), "--against", "HEAD"]) == 2
    captured = capsys.readouterr()
    assert "A would run B's code" in captured.err and "starting" not in captured.out
    assert not (root / "out" / "logs").exists()


def test_an_entry_that_does_more_work_per_call_is_not_judged_after_one_look(root, capsys):
    """The same benchmark doing four times the work per call on B (its size_bytes say so) is not a slowdown: it is
    "not judged: work changed" on the live line and in the report, after the first look."""
    sized = """
    @pytest.mark.benchmark(group="sized")
    def test_sized(benchmark):
        benchmark(work, N)
        benchmark.extra_info.update(unit="us/call", value=benchmark.stats.stats.median * 1e6, size_bytes=N)
    """
    _commit_suite(root, extra=sized)
    write_suite(root, n=80000, extra=sized)
    assert run_bench(root, "--against", "HEAD", "-k", "sized") == 0
    assert "sized  " in (out := capsys.readouterr().out) and "not judged (work changed)" in out
    [entry] = [b for b in report(root)["benchmarks"] if b["name"] == "test_sized"]
    assert entry["verdict"] == "unjudged" and "size_bytes 20000 -> 80000" in entry["note"]
    b = json.loads((root / "out" / "ab" / "B.json").read_text())
    assert [len(r["options"]["pair_rounds"]) for r in b["benchmarks"] if r["name"] == "test_sized"] == [PROCESS_PAIRS]  # one look


def test_an_entry_twice_as_slow_in_some_process_pairs_only_is_not_judged(root):
    """A state some processes fall into (here: the hash seeds 0 and 1 of up to 20 process pairs) is not a change of the
    code: the pair values scatter, the t-test across them cannot establish a change, and after every look the entry is
    inconclusive, never regressed (after the first look already: no number of pairs up to 20 could settle a scatter
    that wide, ``gate.worth_more_pairs``)."""
    _commit_suite(root)
    write_suite(root, n="40000 if __import__('os').environ['PYTHONHASHSEED'] in ('0', '1') else 20000")
    assert run_bench(root, "--against", "HEAD", "-k", "entry") == 0
    entry = next(b for b in report(root)["benchmarks"] if b["name"] == "test_entry")
    assert entry["verdict"] == "unjudged" and entry["pairs"] in LOOK_ENDS and entry["note"].startswith("inconclusive")
    assert sorted(entry["process_ratios"])[-2:] == pytest.approx([2.0, 2.0], rel=0.3)


def test_planted_slowdown_of_the_working_tree_is_flagged_for_every_benchmark(root):
    _commit_suite(root)
    assert run_bench(root, "--against", "HEAD", "--plant-slowdown", "2", "--references") == 1
    doc = report(root)
    found = verdicts(doc)
    assert found["test_entry"] == ("regressed", "entry")
    # a limit or peer gets one look only (it never fails a run): moved, or inconclusive on a loaded machine
    assert found["test_limit"] in (("moved", "limit"), ("unjudged", "limit"))
    assert found["test_peer"] in (("moved", "peer"), ("unjudged", "peer"))
    assert doc["failing"] == [b["fullname"] for b in doc["benchmarks"] if b["name"] == "test_entry"]
    assert any("planted slowdown" in note for note in doc["notes"])
    # A spun as long as B's plant after each round, untimed: the ratio is the plant's, not twice it or none of it
    ratios = {b["name"]: b["ratio"] for b in doc["benchmarks"]}
    assert 1.7 < ratios["test_entry"] < 2.3, ratios
    # limits and peers get half the pairs and half the budget (a few rounds here): the direction, with room for load
    assert all(1.4 < ratios[n] < 2.8 for n in ("test_limit", "test_peer")), ratios


def test_selection_passes_through_and_other_pytest_options_say_where_they_go(root, capsys):
    write_suite(root)
    assert run_bench(root, "-k", "entry or limit") == 0
    assert set(verdicts(report(root))) == {"test_entry", "test_limit"}
    with pytest.raises(SystemExit) as exc:
        run_bench(root, "--lf")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --lf; pytest options other than -k, -m and --backends go after '--'" in err
    assert err.count("\n") == 1


BREAKS = '''

import os

def test_breaks(benchmark):  # the first worker to create MARKER raises in its 50th timed call
    first = True
    try:
        os.close(os.open({marker!r}, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        first = False
    calls = itertools.count()

    def call():
        if first and next(calls) == 50:
            raise RuntimeError("broke in a timed round")
        return work(1000)
    benchmark(call)
'''


def test_a_working_tree_benchmark_failing_in_one_worker_mid_rounds_fails_the_run_and_the_rest_is_judged(root, capsys):
    write_suite(root, extra=BREAKS.format(marker=str(root)))  # the ref's never breaks: its marker exists
    git(root, "init", "-q")
    git(root, "add", "bench_suite")
    git(root, "commit", "-qm", "suite")
    write_suite(root, extra=BREAKS.format(marker=str(root / "first-worker")))
    assert run_bench(root, "--against", "HEAD", "--references") == 1
    err = capsys.readouterr().err
    assert "1 benchmark(s) failed" in err and "broke in a timed round" in err
    doc = report(root)
    assert set(verdicts(doc)) == {"test_entry", "test_limit", "test_peer"}  # the failure stopped nothing else
    assert not any("failed on A" in w for w in doc["warnings"])  # it failed on B, and the report says so:
    assert doc["failed"] is True and [n.split("::")[-1] for n in doc["failed_benchmarks"]] == ["test_breaks"]


DIES = '''

import os
import signal
import time


def test_dies(benchmark):  # on B only: {how}
    def call():
        if os.environ.get("HARNESS_TEST_SIDE") == "B":
            {action}
        return work(1000)
    benchmark(call)


def test_after(benchmark):
    benchmark(work, 1000)
'''


@pytest.mark.parametrize("how, action, extra", [
    ("a crash", "os.kill(os.getpid(), signal.SIGSEGV)", ()),
    ("a hang", "time.sleep(3600)", ("--worker-timeout", "20")),
])
def test_a_benchmark_that_kills_or_hangs_its_worker_fails_by_name_and_the_run_goes_on(root, capsys, monkeypatch, how,
                                                                                       action, extra):
    write_suite(root, extra=DIES.format(how=how, action=action))
    git(root, "init", "-q")
    git(root, "add", "bench_suite")
    git(root, "commit", "-qm", "suite")
    (root / "bench_suite" / "conftest.py").write_text("import os\nos.environ['HARNESS_TEST_SIDE'] = 'B'\n")
    assert run_bench(root, "--against", "HEAD", "-k", "dies or after", *extra) == 1
    printed = "".join(capsys.readouterr())
    expected = "killed by SIGSEGV" if how == "a crash" else "did not answer within 20 s"
    assert "  dies  FAILED on B: the B1 (working tree) benchmark worker" in printed and expected in printed
    doc = report(root)
    assert [n.split("::")[-1] for n in doc["failed_benchmarks"]] == ["test_dies"]
    assert set(verdicts(doc)) == {"test_after"}  # the next benchmark ran, on a fresh set of workers
    assert not _workers_of(os.getpid())  # every worker of the set it killed is gone


def test_a_benchmark_that_fails_on_a_only_and_reads_its_stats_is_a_warning(root, capsys):
    # B's outcome is unknown when A fails first; B then runs it once, with one timed round, so a benchmark that reads
    # its own stats after the call finds them
    write_suite(root, extra='''

    import os

    def test_reads_stats(benchmark):
        def call():
            if os.environ.get("HARNESS_TEST_SIDE") != "B":
                raise RuntimeError("broken on A")
            return work(1000)
        benchmark(call)
        benchmark.extra_info["median_us"] = benchmark.stats.stats.median * 1e6
    ''')
    git(root, "init", "-q")
    git(root, "add", "bench_suite")
    git(root, "commit", "-qm", "suite")
    (root / "bench_suite" / "conftest.py").write_text("import os\nos.environ['HARNESS_TEST_SIDE'] = 'B'\n")
    assert run_bench(root, "--against", "HEAD", "-k", "reads_stats or test_entry") == 0  # the entry: a report to write
    printed = "".join(capsys.readouterr())
    assert "reads_stats  FAILED on A" in printed and "FAILED on B" not in printed


def test_a_benchmark_that_crashes_on_both_sides_fails_the_run(root, capsys):
    # A's worker goes first in the rounds of even-numbered benchmarks and dies there, before B's worker has made its
    # timed call: B is then run once on its own, so the crash is not excused as "failed on A only"
    write_suite(root, extra=DIES.format(how="a crash on both sides", action="os.kill(os.getpid(), signal.SIGSEGV)"))
    git(root, "init", "-q")
    git(root, "add", "bench_suite")
    git(root, "commit", "-qm", "suite")
    (root / "bench_suite" / "conftest.py").write_text("import os\nos.environ['HARNESS_TEST_SIDE'] = 'B'\n")
    git(root, "add", "bench_suite")
    git(root, "commit", "-qm", "both sides")
    assert run_bench(root, "--against", "HEAD", "-k", "dies") == 1
    printed = "".join(capsys.readouterr())
    assert "dies  FAILED on A" in printed and "dies  FAILED on B" in printed and "killed by SIGSEGV" in printed
    assert not _workers_of(os.getpid())


@pytest.mark.parametrize("count", ["0", "1", "17", "two"])
def test_a_process_pair_count_out_of_range_is_refused(root, capsys, count):
    with pytest.raises(SystemExit) as exc:
        run_bench(root, "--against", "HEAD", "--process-pairs", count)
    assert exc.value.code == 2
    assert "must be an integer from 2 to 16 (pairs of worker processes per look)" in capsys.readouterr().err


def test_process_pairs_outside_a_b_mode_is_refused_before_anything_runs(root, capsys):
    write_suite(root)
    (root / "out").mkdir()
    (root / "out" / "report.md").write_text("an earlier run's report")
    assert run_bench(root, "--process-pairs", "2") == 2
    assert "--process-pairs: A/B mode's (--against REF), not stored-baseline mode's" in capsys.readouterr().err
    assert not (root / "out" / "runs").exists()
    # a refused command loses nothing: the earlier run's report stays
    assert (root / "out" / "report.md").read_text() == "an earlier run's report"


def test_a_planted_slowdown_below_the_minimum_effect_is_refused(root, capsys):
    _commit_suite(root)
    assert run_bench(root, "--against", "HEAD", "--plant-slowdown", "1.01") == 2
    assert "--plant-slowdown 1.01 is below the minimum effect (3%): no entry could be flagged" in capsys.readouterr().err


def test_an_a_b_run_of_limits_and_peers_only_judges_no_entry_and_is_refused(root, capsys):
    """Limits and peers never fail a run: a run of them alone (two process pairs each, the least a t-test takes)
    passes nothing off as a verdict on our code."""
    _commit_suite(root)
    assert run_bench(root, "--against", "HEAD", "--references", "--process-pairs", "2", "-k", "limit or peer") == 2
    printed = "".join(capsys.readouterr())
    assert "no entry (our code) was timed on both sides" in printed and "(2 process pairs, limit)" in printed


def test_save_baseline_of_a_selection_is_refused_before_anything_runs(root, capsys):
    write_suite(root)
    assert run_bench(root, "--save-baseline", "-k", "entry") == 2
    assert "a partial run would replace the full baseline" in capsys.readouterr().err
    assert not (root / "out" / "runs").exists()


def test_promote_makes_a_saved_run_the_baseline_without_running(root, capsys):
    write_suite(root)
    assert run_bench(root) == 0
    [run_file] = (root / "out" / "runs").glob("*.json")
    capsys.readouterr()
    assert bench.main(["--promote", str(run_file), "--baseline-dir", str(root / "base")]) == 0
    [baseline] = (root / "base").glob("*.json")
    assert baseline.read_bytes() == run_file.read_bytes()
    assert f"baseline: saved {baseline} with {run_file}" in capsys.readouterr().out
    (root / "broken.json").write_text("{")
    assert bench.main(["--promote", str(root / "broken.json"), "--baseline-dir", str(root / "base")]) == 2
    assert baseline.read_bytes() == run_file.read_bytes()  # nothing replaced


def test_promote_of_a_selected_run_needs_save_partial_baseline(root, capsys):
    write_suite(root)
    assert run_bench(root, "-k", "entry") == 0
    [run_file] = (root / "out" / "runs").glob("*.json")
    assert f"--promote {run_file} --save-partial-baseline`" in capsys.readouterr().out
    promote = ["--promote", str(run_file), "--baseline-dir", str(root / "base")]
    assert bench.main(promote) == 2
    assert "ran with pytest arguments (-k entry)" in capsys.readouterr().err and not (root / "base").exists()
    assert bench.main([*promote, "--save-partial-baseline"]) == 0
    [baseline] = (root / "base").glob("*.json")
    assert baseline.read_bytes() == run_file.read_bytes()


@pytest.mark.parametrize("extra", [["--alpha", "0.05"], ["--min-effect", "5%"], ["--looks", "2", "--references"]])
def test_a_b_options_in_stored_mode_are_refused_not_ignored(root, capsys, extra):
    write_suite(root)
    assert run_bench(root, *extra) == 2
    err = capsys.readouterr().err
    assert f"{extra[0]}" in err and "A/B mode's (--against REF), not stored-baseline mode's" in err
    assert "--references" in err or "--references" not in extra


@pytest.mark.parametrize("extra", [["--threshold", "0.1"], ["--keep-runs", "5"]])
def test_stored_mode_options_in_a_b_mode_are_refused_not_ignored(root, capsys, extra):
    write_suite(root)
    assert run_bench(root, "--against", "HEAD", *extra) == 2  # even at its default value: it was given
    err = capsys.readouterr().err
    assert f"{extra[0]} is stored-baseline mode's: " in err
    assert not (root / "out" / "report.md").exists()


@pytest.mark.parametrize("inside", ["logs", "ab/shared", "runs"])
def test_a_file_where_the_run_keeps_a_directory_is_refused_before_anything_runs(root, capsys, inside):
    write_suite(root)
    (root / "out" / inside).parent.mkdir(parents=True, exist_ok=True)
    (root / "out" / inside).write_text("mine")
    assert run_bench(root, *(["--against", "HEAD"] if inside.startswith("ab") else [])) == 2
    assert f"{root / 'out' / inside} is a file, where the run keeps its {inside}/ directory" in capsys.readouterr().err
    assert (root / "out" / inside).read_text() == "mine"


def test_an_empty_out_is_refused_rather_than_the_working_directory(root, capsys):
    write_suite(root)
    assert bench.main(["--suite", str(root / "bench_suite"), "--out", "", "--baseline-dir", str(root / "base")]) == 2
    assert "--out needs a directory" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "shown"), [("\u00b2", "'\u00b2'"), ("\u0661", "'\u0661'"),  # superscript, Arabic-Indic 1
                                             ("9" * 5000, "'99999999999999999999... (5000 characters)'")])
def test_looks_not_in_ascii_digits_or_huge_gets_the_options_own_short_message(root, capsys, value, shown):
    with pytest.raises(SystemExit) as exc:
        run_bench(root, "--against", "HEAD", "--looks", value)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"must be an integer from 1 to 6 (sets of process pairs), got {shown}" in err
    assert len(err) < 1000


@pytest.mark.parametrize(("extra", "why"), [
    (["-k", "entry"], "it takes no pytest arguments or --save-baseline (got -k entry)"),
    (["--save-baseline"], "(got --save-baseline)"),
    (["--alpha", "0.05", "--budget", "3"], "--promote runs nothing: it takes no --alpha, --budget"),
    (["--min-effect", "5%"], "--promote runs nothing: it takes no --min-effect"),
    (["--threshold", "20%", "--keep-runs", "3"], "--promote runs nothing: it takes no --threshold, --keep-runs"),
])
def test_promote_takes_no_selection_or_save_baseline(root, capsys, extra, why):
    (root / "run.json").write_text("{}")
    assert bench.main(["--promote", str(root / "run.json"), *extra, "--baseline-dir", str(root / "base")]) == 2
    assert why in capsys.readouterr().err and not (root / "base").exists()


def test_promote_of_an_empty_path_is_refused_before_anything_runs(root, capsys):
    write_suite(root)
    assert bench.main(["--promote", "", "--out", str(root / "out"), "--baseline-dir", str(root / "base")]) == 2
    assert "--promote needs the path of a saved run" in capsys.readouterr().err
    assert not (root / "out" / "runs").exists()


def test_corrupt_or_foreign_history_is_skipped_with_a_warning(root, capsys):
    write_suite(root)
    assert run_bench(root) == 0
    runs = root / "out" / "runs"
    [first] = runs.glob("*.json")
    (runs / "20000101T000000Z.json").write_text("not json")
    foreign = json.loads(first.read_text())
    foreign["machine_info"]["node"] = "another-host"
    (runs / "20000101T000001Z.json").write_text(json.dumps(foreign))
    assert run_bench(root) == 0
    doc = report(root)
    assert doc["history_runs"] == 1
    assert any("20000101T000000Z.json" in w and "unusable" in w for w in doc["warnings"])
    assert any("20000101T000001Z.json" in w and "another machine" in w for w in doc["warnings"])
    assert len(list(runs.glob("*.json"))) == 4  # the finished run was kept, nothing deleted


def test_a_failing_benchmark_fails_the_run_and_stays_out_of_the_history(root, capsys):
    write_suite(root, extra='''

    def test_broken(benchmark):
        benchmark(work, 10)
        assert False, "the kernel gave a wrong answer"
    ''')
    assert run_bench(root) == 1
    err = capsys.readouterr().err
    assert "1 benchmark(s) failed" in err and "the kernel gave a wrong answer" in err
    assert list((root / "out" / "runs").glob("*.json")) == []
    assert len(list((root / "out" / "runs").glob("*.json.failed"))) == 1


def test_ctrl_c_stops_with_one_line_and_leaves_no_worker(root):
    write_suite(root, extra='''

    import random
    import time

    def test_slow(benchmark):  # never precise: it runs until the 600 s budget, unless interrupted
        benchmark(lambda: time.sleep(random.uniform(0.01, 0.3)))
    ''')
    command = [sys.executable, "-m", "harness", "bench", "--suite", str(root / "bench_suite"), "--out",
               str(root / "out"), "--budget", "600", "-k", "slow"]
    # SIGINT at its default, whatever this pytest inherited (a job started in the background by a non-interactive
    # shell ignores it, and Python then never raises KeyboardInterrupt)
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    workers: set[int] = set()  # every worker seen: on a loaded machine the two may not be up at the same poll
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(workers) < 2:
        workers |= set(_workers_of(process.pid))
        time.sleep(0.2)
    time.sleep(3.0)  # into the timed rounds of test_slow, most likely
    workers |= set(_workers_of(process.pid))
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert len(workers) == 2
    assert process.returncode == 130
    assert err.strip().splitlines() == [
        "harness bench: interrupted (Ctrl-C): the benchmark workers were stopped; nothing of this run was saved"]
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)
    assert not (root / "out" / "runs").exists() or not list((root / "out" / "runs").iterdir())


def _workers_of(pid: int) -> list[int]:
    """The live benchmark workers (``worker.py``) whose parent is ``pid``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"worker.py" in command:
            found.append(int(proc.name))
    return found


THREADED = '''
import os


@pytest.mark.bench_threads(2)
def test_two_threads(benchmark):
    benchmark(work, LIMIT_N)
    benchmark.extra_info["cpus"] = sorted(os.sched_getaffinity(0))


def test_one_thread(benchmark):
    benchmark(work, LIMIT_N)
    benchmark.extra_info["cpus"] = sorted(os.sched_getaffinity(0))


@pytest.mark.bench_threads(2, backends=["CPU"])
def test_device_threads(benchmark, device):
    benchmark(work, LIMIT_N)
    benchmark.extra_info["cpus"] = sorted(os.sched_getaffinity(0))
'''


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs CPU affinity and two CPUs")
def test_workers_get_as_many_cpus_as_the_benchmark_runs_threads(root):
    write_suite(root, extra=THREADED)
    assert run_bench(root, "-k", "thread") == 0
    [run_file] = (root / "out" / "runs").glob("*.json")
    cpus = {b["name"]: b["extra_info"]["cpus"] for b in json.loads(run_file.read_text())["benchmarks"]}
    allowed = os.sched_getaffinity(0)
    assert len(cpus["test_two_threads"]) == 2 and set(cpus["test_two_threads"]) <= allowed
    assert len(cpus["test_one_thread"]) == 1 and set(cpus["test_one_thread"]) <= allowed
    assert len(cpus["test_device_threads[CPU]"]) == 2 and len(cpus["test_device_threads[PYTHON]"]) == 1


def test_a_benchmark_module_that_does_not_import_fails_the_run(root, capsys):
    suite = write_suite(root)
    (suite / "test_broken_import.py").write_text("import no_such_module_here\n\n\ndef test_x(benchmark):\n"
                                                 "    benchmark(len, [])\n", encoding="utf-8")
    assert run_bench(root) == 1
    err = capsys.readouterr().err
    assert "could not collect 1 module(s), so nothing was run" in err
    assert "test_broken_import.py" in err and "No module named 'no_such_module_here'" in err
    assert not (root / "out" / "runs").exists() or not list((root / "out" / "runs").glob("*.json"))


def test_a_misspelled_backend_is_refused_before_anything_runs(root, capsys):
    write_suite(root)
    assert run_bench(root, "--backends", "CPUU") == 2
    assert "--backends names 'CPUU', which is no backend; did you mean 'CPU'?" in capsys.readouterr().err
    assert not (root / "out").exists()


def test_a_run_that_times_no_entry_saves_nothing(root, capsys):
    write_suite(root)
    assert run_bench(root, "-k", "limit or peer") == 2
    assert "no entry (our code) was timed, only 2 limit(s)/peer(s)" in capsys.readouterr().err
    assert not list((root / "out" / "runs").glob("*.json"))


def test_an_ab_selection_that_matches_nothing_says_which(root, capsys):
    _commit_suite(root)
    assert run_bench(root, "--against", "HEAD", "-k", "no_such_benchmark") == 2
    err = capsys.readouterr().err
    assert "the selection '-k no_such_benchmark' holds no benchmark both sides have" in err
    assert not (root / "out" / "report.md").exists()


def test_an_unknown_ref_says_so(root, capsys):
    write_suite(root)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "suite")
    assert run_bench(root, "--against", "no-such-ref") == 2
    assert "unknown git ref 'no-such-ref': not a branch, tag or commit" in capsys.readouterr().err


@pytest.mark.parametrize("flag, expression, why", [
    ("-k", "entry and (", "pytest cannot parse 'entry and ('"),
    ("-m", "entry and (", "pytest cannot parse 'entry and ('"),
    ("-k", "limit or entry(n=1)", "pytest -k takes names, not call parameters"),
    ("-k", "entry and limit(n=1)", "pytest -k takes names, not call parameters"),
])
def test_a_selection_pytest_would_refuse_is_a_usage_error_before_anything_runs(root, capsys, flag, expression, why):
    write_suite(root)
    with pytest.raises(SystemExit) as exc:
        run_bench(root, flag, expression)
    assert exc.value.code == 2 and why in capsys.readouterr().err
    assert not (root / "out").exists()
