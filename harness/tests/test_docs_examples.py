"""The documentation's code runs: README's example, and docs/adding-a-backend.md's toy backend (registers, runs its
example, passes the harness suites)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import bench
from runtime_core import Device

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-backend.md"


def _blocks(doc: Path = GUIDE) -> dict[str, str]:
    """The code blocks of ``doc`` that are marked ``<!-- NAME: ... -->``, by NAME."""
    return dict(re.findall(r"<!-- (\S+?): [^\n]*-->\n```python\n(.*?)```", doc.read_text(), flags=re.S))


README = ROOT / "README.md"


def _on_devices(devices: list[str]) -> str:
    """README's kernel example with its ``DEVICES = [...]`` line set to ``devices`` (refused if the line is gone)."""
    text, count = re.subn(r"^DEVICES = \[.*$", f"DEVICES = {devices!r}", _blocks(README)["readme_example.py"], flags=re.M)
    if count != 1:
        raise ValueError("README's kernel example no longer has one `DEVICES = [...]` line")
    return text


@pytest.mark.parametrize("name", ["CPU", "PYTHON", "CLOUD:CPU"])
def test_the_readme_kernel_example_runs_on(name):
    """README's kernel, scalar arguments and reshaped result on a backend of this process (its own asserts)."""
    exec(compile(_on_devices([name]), "README example", "exec"), {})


def test_the_readme_kernel_example_runs_on_cuda_under_the_mock(tmp_path):
    """The same example on CUDA with MOCKGPU=1, in a fresh process (the driver is chosen when CUDA first opens)."""
    script = tmp_path / "example.py"
    script.write_text(_on_devices(["CUDA"]), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MOCKGPU": "1", "MOCKGPU_DEVICES": "1", "PTX": "0"})
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_readme_disk_example_runs(tmp_path):
    exec(compile(_blocks(README)["readme_disk.py"], "README DISK example", "exec"), {})


def test_the_readme_commands_name_real_sessions_and_options():
    """Every `nox -s NAME -- ARGS` line of README names a session of noxfile.py, and the bench arguments parse."""
    sessions = set(re.findall(r'@nox\.session\((?:[^)]*?name="([\w-]+)"|[^)]*)\)\s*def (\w+)', (ROOT / "noxfile.py").read_text()))
    names = {named or function.replace("_", "-") for named, function in sessions}
    commands = re.findall(r"^nox -s ([\w-]+)(?: -- ([^#\n]*))?", README.read_text(), flags=re.M)
    assert commands
    for session, args in commands:
        assert session in names, session
        if session == "bench" and args.strip():
            parsed, unknown = bench.build_parser().parse_known_args(args.split())
            assert not unknown, args


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
