"""``python -m harness report`` end to end: exit status, the three report files, input validation."""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import test_report_synth as synth

from harness.__main__ import main as harness_main
from harness.report.cli import main

SLOW = "bench.py::test_copy[1MiB]"
STEADY = "bench.py::test_launch"


def make_pair(tmp_path: Path, slowdown: float = 1.25, **current_kw) -> tuple[Path, Path]:
    """Baseline and current files of two benchmarks; SLOW is ``slowdown`` times slower in the current one."""
    rng = np.random.default_rng(7)
    base = synth.run(
        [
            synth.benchmark(SLOW, synth.rounds(rng, 1e-3), {"GB/s": 1.0}),
            synth.benchmark(STEADY, synth.rounds(rng, 20e-6)),
        ]
    )
    cur = synth.run(
        [
            synth.benchmark(SLOW, synth.rounds(rng, slowdown * 1e-3), {"GB/s": 1.0 / slowdown}),
            synth.benchmark(STEADY, synth.rounds(rng, 20e-6)),
        ],
        commit="fedcba9876543210",
        branch="feature",
        dirty=True,
        when="2025-01-03T00:00:00+00:00",
        **current_kw,
    )
    return synth.write(tmp_path / "current.json", cur), synth.write(tmp_path / "baseline.json", base)


def run_cli(current: Path, baseline: Path, out: Path, *extra: str) -> int:
    return main(["--current", str(current), "--baseline", str(baseline), "--out", str(out), *extra])


def test_stored_mode_reports_a_planted_slowdown_as_a_trend_writes_all_reports_and_exits_0(tmp_path, capsys):
    current, baseline = make_pair(tmp_path)

    status = run_cli(current, baseline, tmp_path / "out")

    assert status == 0  # a stored baseline informs; only an A/B run gates (docs/benchmark-gate.md)
    terminal = capsys.readouterr().out
    assert "TREND (no gate): 1 regressed, 0 drifted, 0 improved, 0 limits/peers moved, 1 unchanged, 0 new, 0 missing" in terminal
    assert re.search(r"REGRESSED +copy\[1MiB\] +x1\.2", terminal)  # the short name, as in every report
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["failed"] is False
    assert report["counts"] == {"regressed": 1, "drifted": 0, "improved": 0, "moved": 0, "unjudged": 0,
                                "unchanged": 1, "new": 0, "missing": 0}
    by_name = {b["fullname"]: b for b in report["benchmarks"]}
    assert by_name[SLOW]["verdict"] == "regressed" and by_name[STEADY]["verdict"] == "unchanged"
    assert by_name[SLOW]["ratio"] == pytest.approx(1.25, abs=0.05)
    assert by_name[SLOW]["ci"][0] < by_name[SLOW]["ratio"] < by_name[SLOW]["ci"][1]
    assert report["current"]["commit_info"]["id"] == "fedcba9876543210"
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert markdown.startswith("## Benchmark report (stored baseline): TREND: 1 of 2 entries slower than the baseline")
    assert "### Regressed (1)" in markdown and "### Unchanged (1)" in markdown
    assert "fedcba987654 on feature, dirty" in markdown and "0123456789ab on main" in markdown
    assert "GB/s=0.8 (baseline 1)" in markdown


def test_no_fail_exits_0(tmp_path):
    current, baseline = make_pair(tmp_path)
    assert run_cli(current, baseline, tmp_path / "out", "--no-fail") == 0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["counts"]["regressed"] == 1


def test_threshold_option_and_no_regression_exit_0(tmp_path, capsys):
    current, baseline = make_pair(tmp_path)
    assert run_cli(current, baseline, tmp_path / "out", "--threshold", "40%") == 0
    assert "TREND (no gate): 0 regressed" in capsys.readouterr().out


def test_markdown_table_rows_keep_their_cells_with_pipes_in_names(tmp_path):
    rng = np.random.default_rng(3)
    name = "b.py::test_x[a|b<i>]"
    doc = synth.run([synth.benchmark(name, synth.rounds(rng, 1e-3))])
    path = synth.write(tmp_path / "x.json", doc)

    run_cli(path, path, tmp_path / "out")

    [row] = [line for line in (tmp_path / "out" / "report.md").read_text().splitlines() if "test\\_x" in line]
    assert row.startswith(r"| b.py::test\_x\[a\|b\<i\>\] |")
    assert len(re.findall(r"(?<!\\)\|", row)) == 10  # 9 columns


class _Checker(HTMLParser):
    """Records an error for every end tag that does not close the innermost open element."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(f"unexpected </{tag}> at {self.getpos()}")


def _png_width(src: str) -> int:
    prefix = "data:image/png;base64,"
    assert src.startswith(prefix)
    png = base64.b64decode(src[len(prefix) :], validate=True)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">I", png[16:20])[0]  # IHDR width


def test_html_is_well_formed_escaped_and_has_spread_and_trend_plots(tmp_path):
    rng = np.random.default_rng(9)
    evil = "b.py::test_<script>alert(1)</script>"
    history = tmp_path / "history"
    history.mkdir()
    for day in (3, 1, 2):  # written out of order: the trend orders by datetime
        doc = synth.run([synth.benchmark(evil, synth.rounds(rng, day * 1e-3))], when=f"2025-01-0{day}T00:00:00Z")
        synth.write(history / f"run{day}.json", doc)
    base = synth.write(
        tmp_path / "b.json",
        synth.run([synth.benchmark(evil, synth.rounds(rng, 1e-3)), synth.benchmark("b.py::gone", synth.rounds(rng, 1e-3))]),
    )
    cur = synth.write(tmp_path / "c.json", synth.run([synth.benchmark(evil, synth.rounds(rng, 1e-3))]))

    assert run_cli(cur, base, tmp_path / "out", "--history", str(history)) == 0

    page = (tmp_path / "out" / "report.html").read_text()
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    assert "<script>" not in page and "b.py::test_&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert len(checker.images) == 2  # one per benchmark
    widths = sorted(_png_width(src) for src in checker.images)
    assert widths == [360, 648]  # 5 in x 72 dpi (spread only, 'gone' has no history) and 9 in (spread + trend)
    assert "3 history run(s)" in page


def test_history_orders_runs_by_datetime(tmp_path):
    from harness.report.history import load_history, median_series

    for day, name in ((3, "a"), (1, "b"), (2, "c")):
        doc = synth.run([synth.benchmark("t::x", np.full(5, day * 1e-3))], when=f"2025-01-0{day}T00:00:00")
        synth.write(tmp_path / f"{name}.json", doc)

    runs, warnings = load_history(tmp_path)
    series = median_series(runs, "t::x")

    assert [median for _, median in series] == pytest.approx([1e-3, 2e-3, 3e-3])
    assert [moment.day for moment, _ in series] == [1, 2, 3] and warnings == []


def test_different_machines_warn_at_the_top_of_every_report(tmp_path, capsys):
    current, baseline = make_pair(tmp_path, slowdown=1.0, node="laptop", cpu="Other CPU")

    run_cli(current, baseline, tmp_path / "out")

    out = tmp_path / "out"
    assert capsys.readouterr().out.startswith("WARNING: current and baseline ran on different machines")
    markdown = out.joinpath("report.md").read_text().splitlines()
    assert markdown[2].startswith("> **Warning:** current and baseline ran on different machines")
    page = out.joinpath("report.html").read_text()
    assert page.index('class="warning"') < page.index("<table>")
    assert "different machines" in json.loads(out.joinpath("report.json").read_text())["warnings"][0]


def test_without_per_round_data_the_weaker_test_is_stated(tmp_path):
    rng = np.random.default_rng(4)
    doc = synth.run([synth.benchmark("t::x", synth.rounds(rng, 1e-3), with_data=False)])
    path = synth.write(tmp_path / "x.json", doc)

    assert run_cli(path, path, tmp_path / "out") == 0

    assert "Welch t-test on summary stats (weaker)" in (tmp_path / "out" / "report.md").read_text()
    [bench] = json.loads((tmp_path / "out" / "report.json").read_text())["benchmarks"]
    assert bench["test"] == "welch-t-summary" and bench["ci"] is None


def _good() -> dict:
    return synth.run([synth.benchmark("t::x", np.linspace(1e-3, 2e-3, 6))])


def _negative_round() -> dict:
    doc = _good()
    doc["benchmarks"][0]["stats"]["data"][1] = -1e-3
    return doc


def _zero_median_rounds() -> dict:
    doc = _good()
    doc["benchmarks"][0]["stats"]["data"] = [0.0, 0.0, 0.0, 1e-3]
    return doc


def _paired_zero_round() -> dict:
    """An entry timed beside a limit (stored mode) with one round of 0 s: no ratio to the limit's round exists."""
    data = [1e-3, 0.0, 1.1e-3, 1.2e-3]
    return synth.run([synth.benchmark("t::x", np.asarray(data), {"paired_limit": {"fullname": "t::lim", "data": [
        1e-3] * 4}}), synth.benchmark("t::lim", np.full(4, 1e-3), {"role": "limit", "limit": True})])


def _without_median() -> dict:
    doc = _good()
    del doc["benchmarks"][0]["stats"]["median"]
    return doc


BAD_INPUTS: list[tuple[str, object, str]] = [
    ("missing", None, "does not exist"),
    ("empty", "", "is empty"),
    ("malformed", '{"benchmarks": [', "is not valid JSON"),
    ("array", "[1, 2]", "holds a JSON list"),
    ("foreign", {"results": []}, "is not a pytest-benchmark file (missing machine_info"),
    ("old major", {**_good(), "version": "3.4.1"}, "pytest-benchmark 3.4.1; this report reads 4.x, 5.x only"),
    ("no benchmarks", {**_good(), "benchmarks": []}, "contains no benchmarks"),
    ("no median", _without_median(), "(t::x): stats lack median"),
    ("bad threshold", synth.run([synth.benchmark("t::x", np.ones(6), {"threshold": "lots"})]), "threshold 'lots'"),
    ("twice", {**_good(), "benchmarks": _good()["benchmarks"] * 2}, "'t::x' appears twice"),
    ("zero median data", _zero_median_rounds(), "the median of stats.data is 0 s"),
    ("negative data", _negative_round(), "stats.data holds a non-finite or negative time"),
    ("paired zero round", _paired_zero_round(), "(t::x): stats.data holds a round of 0 s"),
]


@pytest.mark.parametrize(("content", "message"), [case[1:] for case in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_unusable_current_exits_2_with_one_line(tmp_path, capsys, content, message):
    current = tmp_path / "current.json"
    if content is not None:
        current.write_text(content if isinstance(content, str) else json.dumps(content))
    baseline = synth.write(tmp_path / "baseline.json", _good())

    status = run_cli(current, baseline, tmp_path / "out")

    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("harness report: error: ") and message in err
    assert not (tmp_path / "out").exists()


def test_unusable_history_file_is_skipped_with_a_warning_naming_it(tmp_path, capsys):
    history = tmp_path / "hist"
    history.mkdir()
    (history / "broken.json").write_text("{")
    good = synth.write(tmp_path / "good.json", _good())

    assert run_cli(good, good, tmp_path / "out", "--history", str(history)) == 0
    err = capsys.readouterr().err
    assert "harness report: warning: skipped an unusable history file" in err and "broken.json" in err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["history_runs"] == 0 and any("broken.json" in w for w in report["warnings"])
    assert run_cli(good, good, tmp_path / "out", "--history", str(tmp_path / "nowhere")) == 2


def test_module_entry_point_dispatches_and_exits_2_without_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "report",
            "--current",
            str(tmp_path / "none.json"),
            "--baseline",
            str(tmp_path / "none.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": ""},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("does not exist; pass a file written by 'pytest --benchmark-json'")
    assert "Traceback" not in proc.stderr
    assert harness_main(["nonsense"]) == 2


def test_a_ctrl_c_while_a_command_imports_is_one_line_and_status_130(monkeypatch, capsys):
    def interrupted(name: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("harness.__main__.importlib.import_module", interrupted)
    assert harness_main(["bench", "--against", "HEAD"]) == 130
    err = capsys.readouterr().err
    assert err == "python -m harness bench: interrupted (Ctrl-C) while starting; nothing was run\n"


def test_the_method_links_the_gate_doc_relative_to_where_the_report_is(tmp_path, monkeypatch):
    """Without a GitHub or GitLab origin, the link in report.md and report.html resolves from the report's own folder
    to docs/benchmark-gate.md."""
    from harness.report import cli

    monkeypatch.setattr(cli, "_origin", lambda root: "https://example.org/team/runtime.git")
    for out in (Path("reports"), Path("reports/ab/deep"), tmp_path):
        href = cli.gate_doc_href(out)
        assert (out.resolve() / href).resolve() == (Path(__file__).resolve().parents[2] / "docs/benchmark-gate.md")


def test_min_effect_on_stored_mode_files_is_refused_not_recorded(tmp_path, capsys):
    current, baseline = make_pair(tmp_path)
    assert run_cli(current, baseline, tmp_path / "out", "--min-effect", "50%") == 2
    assert "--min-effect is A/B mode's" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("remote", ["ssh://git@github.com:22/o/r.git", "https://github.com:443/o/r"])
def test_a_port_in_the_remote_is_not_taken_for_the_owner(tmp_path, monkeypatch, remote):
    from harness.report import cli

    monkeypatch.setattr(cli, "_origin", lambda root: remote)
    assert cli.gate_doc_href(tmp_path) == "https://github.com/o/r/blob/HEAD/docs/benchmark-gate.md"


@pytest.mark.parametrize("remote", ["https://github.com/o/my repo.git", "https://github.com/o/r.git?ref=x",
                                    "https://github.com/o", "https://github.com/o/r/tree/main", "git@github.com:o/../r"])
def test_a_remote_that_names_no_repository_plainly_gets_the_relative_link(tmp_path, monkeypatch, remote):
    from harness.report import cli

    monkeypatch.setattr(cli, "_origin", lambda root: remote)
    assert not cli.gate_doc_href(tmp_path).startswith("http")


@pytest.mark.parametrize(("remote", "url"), [
    ("git@github.com:acme/runtime.git", "https://github.com/acme/runtime/blob/HEAD/docs/benchmark-gate.md"),
    ("https://ci-token@github.com/acme/runtime", "https://github.com/acme/runtime/blob/HEAD/docs/benchmark-gate.md"),
    ("ssh://git@gitlab.com/acme/gpu/runtime.git",
     "https://gitlab.com/acme/gpu/runtime/-/blob/HEAD/docs/benchmark-gate.md"),
])
def test_with_a_github_or_gitlab_origin_the_gate_doc_link_works_in_a_pull_request_comment(tmp_path, monkeypatch,
                                                                                           remote, url):
    from harness.report import cli

    monkeypatch.setattr(cli, "_origin", lambda root: remote)
    assert cli.gate_doc_href(tmp_path) == url


def test_a_benchmark_that_failed_on_the_working_tree_fails_the_report(tmp_path):
    """An A/B run whose B side failed a benchmark: every report says FAIL and names it, even when nothing timed
    regressed (the failed benchmark has no rounds to compare)."""
    from harness.report import parse_run
    from harness.report.cli import write_report

    current, baseline = make_pair(tmp_path, slowdown=1.0)
    cur, base = (parse_run(json.loads(p.read_text()), str(p)) for p in (current, baseline))
    result, _ = write_report(cur, base, [], out=tmp_path / "out", broken=["bench.py::test_gone"])
    assert result.failed
    md = (tmp_path / "out" / "report.md").read_text()
    assert "FAIL: 1 benchmark(s) failed on B" in md and "bench.py::test\\_gone" in md  # Markdown-escaped
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["failed"] is True and data["failed_benchmarks"] == ["bench.py::test_gone"]


def test_a_skip_reason_becomes_one_plain_line_and_stays_text_in_markdown():
    """A reason quoted in a note (what was not timed) is one line without pytest's prefix or terminal escapes, cut
    with "...", and Markdown shows it as text (an HTML comment in it hid the notes after it); a note's own `code`
    stays code."""
    from harness.paired.session import not_timed, one_line
    from harness.report.render_md import escape_prose

    assert one_line("Skipped: needs CUDA 12\n  see docs\n") == "needs CUDA 12 see docs"
    assert one_line("\x1b[31mred\x1b[0m") == "[31mred [0m" and one_line("x" * 300).endswith("...")
    assert len(one_line("x" * 300)) == 200
    assert not_timed({"a": "Skipped: driver <!-- missing", "b": "driver <!-- missing"}) == [
        "2 benchmark(s) not timed: driver <!-- missing"]
    assert escape_prose("not timed: driver <!-- x | y `--promote <run>`") == \
        "not timed: driver \\<!-- x \\| y `--promote <run>`"
