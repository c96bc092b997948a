"""Bad input to ``python -m harness`` and ``python -m harness report``: one line on stderr, exit 2, nothing written;
odd but valid input: strict report files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import test_report_synth as synth

from harness.__main__ import main as harness_main
from harness.report.cli import main as report_main


def _good() -> dict:
    return synth.run([synth.benchmark("t::x", np.linspace(1e-3, 2e-3, 6))])


def _stats(doc: dict) -> dict:
    return doc["benchmarks"][0]["stats"]


def _run(tmp_path: Path, current: Path, *extra: str) -> int:
    baseline = synth.write(tmp_path / "baseline.json", _good())
    return report_main(["--current", str(current), "--baseline", str(baseline), "--out", str(tmp_path / "out"), *extra])


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_help_goes_to_stdout_with_status_0(capsys):
    assert harness_main(["--help"]) == 0
    assert harness_main(["-h"]) == 0
    out, err = capsys.readouterr()
    assert out.count("usage: python -m harness {bench,report}") == 2 and err == ""


@pytest.mark.parametrize(("argv", "said"), [([], "no command given"), (["nope"], "unknown command 'nope'")])
def test_missing_or_unknown_command_is_one_line_status_2(capsys, argv, said):
    assert harness_main(argv) == 2
    err = _one_error_line(capsys)
    assert err.startswith("usage: python -m harness {bench,report}") and err.rstrip().endswith(said)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--threshold", "abc"], "argument --threshold: threshold 'abc' is not a number or a percent string like '10%'"),
        (["--threshold=-5%"], "argument --threshold: threshold '-5%' must be a fraction > 0 (e.g. 0.1 or '10%')"),
        (["--alpha", "abc"], "argument --alpha: must be a probability from 1e-6 to 0.5, e.g. 0.01, got 'abc'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_argparse_errors_are_one_line(tmp_path, capsys, extra, said):
    good = synth.write(tmp_path / "good.json", _good())
    with pytest.raises(SystemExit) as exit_info:
        _run(tmp_path, good, *extra)
    assert exit_info.value.code == 2
    err = _one_error_line(capsys)
    assert err == f"python -m harness report: error: {said}; see python -m harness report --help\n"
    assert not (tmp_path / "out").exists()


def _huge_median() -> dict:
    doc = _good()
    _stats(doc).update(median=1e300, mean=1e300, max=1e300)
    del _stats(doc)["data"]
    return doc


def _with_data(values: list) -> dict:
    doc = _good()
    _stats(doc).update(data=values, rounds=len(values))
    return doc


def _with(path: list[str], value: object) -> dict:
    doc = _good()
    target = doc["benchmarks"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


BAD = [
    # the JSON parser raised ValueError / RecursionError with a traceback and exit 1
    ("5000-digit integer", json.dumps(_good()).replace('"rounds": 6', '"rounds": ' + "9" * 5000), "Exceeds the limit"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "RecursionError"),
    # str.isdigit accepts '²', int() does not: a traceback
    ("superscript version", {**_good(), "version": "\u00b2.1.0"}, "is not of the form MAJOR.MINOR.PATCH"),
    # float() of a huge JSON integer overflowed: a traceback
    ("huge integer max", _with(["stats", "max"], 10**400), "stats.max must be a finite number of seconds, got an integer"),
    ("huge integer round", _with_data([10**400] + [1e-3] * 5), "stats.data holds a non-finite or negative time"),
    ("huge integer threshold", _with(["extra_info"], {"threshold": 10**400}), "must be a fraction > 0"),
    # implausible times made the ratio overflow (RuntimeWarnings on stderr, ratio inf, CI [nan, nan]) or the plot axes
    ("1e300 s median", _huge_median(), "stats.median 1e+300 s is not a plausible time per iteration"),
    ("denormal rounds", _with_data([5e-324] * 6), "stats.data (median 5e-324 s, max 5e-324 s) is not plausible"),
    # accepted silently before
    ("name null", _with(["name"], None), "'name' must be a string and 'group' a string or null, got None"),
    ("group object", _with(["group"], {"a": 1}), "'group' a string or null, got 'x', {'a': 1}"),
    ("rounds not data length", _with(["stats", "rounds"], 3), "stats.data holds 6 round times but stats.rounds is 3"),
]


@pytest.mark.parametrize(("content", "said"), [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_unusable_current_is_one_line_status_2_and_writes_nothing(tmp_path, capsys, content, said):
    current = tmp_path / "current.json"
    current.write_text(content if isinstance(content, str) else json.dumps(content))

    assert _run(tmp_path, current) == 2

    err = _one_error_line(capsys)
    assert err.startswith("harness report: error: ") and said in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("make", ["fifo", "device", "directory"])
def test_a_current_that_is_not_a_regular_file_is_refused_before_reading(tmp_path, capsys, make):
    current = {"device": Path("/dev/zero"), "directory": tmp_path, "fifo": tmp_path / "pipe"}[make]
    if make == "fifo":
        os.mkfifo(current)  # reading it would wait for a writer forever
    assert _run(tmp_path, current) == 2
    assert "is not a regular file" in _one_error_line(capsys)


def _reject_constant(name: str) -> None:
    raise AssertionError(f"report.json holds the non-JSON constant {name}")


def test_non_finite_and_huge_extra_info_gives_strict_json_and_readable_figures(tmp_path):
    # NaN in extra_info made json.dumps(allow_nan=False) raise (traceback); a huge integer made float() overflow
    extra = {"value": float("nan"), "unit": "GB/s", "GB/s": float("inf"), "ops": 10**400}
    current = synth.write(tmp_path / "current.json", synth.run([synth.benchmark("t::x", np.linspace(1e-3, 2e-3, 6), extra)]))

    assert _run(tmp_path, current) == 0

    report = json.loads((tmp_path / "out" / "report.json").read_text(), parse_constant=_reject_constant)
    assert report["benchmarks"][0]["current"]["extra_info"] == {"value": None, "unit": "GB/s", "GB/s": None, "ops": 10**400}
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| nan GB/s; ops=inf |" in markdown


def test_ci_of_resampled_zero_medians_reads_n_a_not_nan(tmp_path):
    # many 0 s rounds (coarse timer) with a positive median: some resampled medians are 0 on both sides -> 0/0
    current = synth.write(tmp_path / "current.json", synth.run([synth.benchmark("t::x", np.array([0.0] * 4 + [1e-3] * 5))]))
    baseline = synth.write(tmp_path / "base.json", synth.run([synth.benchmark("t::x", np.array([0.0] * 5 + [1e-3] * 6))]))

    assert report_main(["--current", str(current), "--baseline", str(baseline), "--out", str(tmp_path / "out")]) == 0

    row = [line for line in (tmp_path / "out" / "report.md").read_text().splitlines() if line.startswith("| t::x")]
    assert row == ["| t::x | entry | 1 ms | 1 ms | x1.000 | n/a | 1 | 10% |  |"]
    assert json.loads((tmp_path / "out" / "report.json").read_text())["benchmarks"][0]["ci"] == [None, None]


def test_report_name_taken_by_a_directory_writes_nothing(tmp_path, capsys):
    # the rename of report.html failed after report.md was replaced: a traceback, a mixed set and stray temp files
    (tmp_path / "out" / "report.html").mkdir(parents=True)
    (tmp_path / "out" / "report.md").write_text("earlier report")
    good = synth.write(tmp_path / "good.json", _good())

    assert _run(tmp_path, good) == 2

    err = _one_error_line(capsys)
    assert err == (f"harness report: error: --out {str(tmp_path / 'out')!r} holds report.html as a directory or other "
                   "non-file; remove it or choose another --out\n")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html", "report.md"]
    assert (tmp_path / "out" / "report.md").read_text() == "earlier report"


def test_a_reader_that_goes_away_ends_the_command_with_sigpipe_status_and_no_traceback():
    """`python -m harness ... | head`: the write that finds the pipe closed ends the process with 141 (128 + SIGPIPE),
    as a shell reports for such writers, and nothing on stderr."""
    import subprocess
    import sys

    code = ("import sys, harness.__main__ as m\n"
            "def main():\n"
            "    for _ in range(100_000):\n"
            "        print('a line of the report')\n"
            "    return 0\n"
            "m.main = main\n"
            "sys.exit(m.run())\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.read(10) == b"a line of "
    proc.stdout.close()  # the reader goes away
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141 and err == b""


@pytest.mark.parametrize("value", ["0", "-1", "1", "150%", "abc", "nan"])
def test_a_min_effect_outside_zero_to_one_is_refused_naming_the_option(value, capsys):
    """0 would leave no change small enough to call unchanged; 1 (100%) or more no slowdown big enough to flag."""
    with pytest.raises(SystemExit) as exit_info:
        harness_main(["bench", "--min-effect", value])
    assert exit_info.value.code == 2
    assert f"argument --min-effect: must be a fraction in (0, 1) such as 0.03 or '3%', got '{value}'" in \
        capsys.readouterr().err
