"""The documentation's code runs: README's example, and docs/adding-a-backend.md's toy backend (registers, runs its
example, passes the harness suites)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtime_core import Device

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-backend.md"


def _blocks(doc: Path = GUIDE) -> dict[str, str]:
    """The code blocks of ``doc`` that are marked ``<!-- NAME: ... -->``, by NAME."""
    return dict(re.findall(r"<!-- (\S+?): [^\n]*-->\n```python\n(.*?)```", doc.read_text(), flags=re.S))


def test_the_readme_example_runs():
    exec(compile(_blocks(ROOT / "README.md")["readme_example.py"], "README example", "exec"), {})


def test_the_guide_has_the_toy_backend_and_its_example():
    blocks = _blocks()
    assert "class ToyDevice(Compiled)" in blocks["toy_backend.py"] and "Device.register" in blocks["toy_example.py"]


def test_the_guide_example_runs():
    module, example = _blocks()["toy_backend.py"], _blocks()["toy_example.py"]
    namespace: dict = {}
    with Device.restoring():
        exec(compile(module, "toy_backend", "exec"), namespace)
        exec(compile(example, "guide example", "exec"), namespace)  # asserts the kernel's result itself
        assert Device["TOY"].allocator.dev is Device["TOY"]
    assert "TOY" not in Device.backends()




def test_the_toy_backend_passes_the_harness_suites(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(toy_backend=_blocks()["toy_backend.py"])
    pytester.makeconftest(_blocks()["conftest.py"])
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider -p no:hypothesispytest\n")
    result = pytester.runpytest_subprocess("--pyargs", "harness.suites", "--backends", "TOY", "--strict-backends",
                                           "-q", "-p", "no:randomly", "-m", "not bigmem")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) > 400 and not outcomes.get("failed")
    result.stdout.no_fnmatch_line("*TOY does not support*")  # every dtype and local memory ran
