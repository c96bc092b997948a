"""NVIDIA's cuda-python samples (cuda_bindings/examples of github.com/NVIDIA/cuda-python, not shipped here: they are
NVIDIA's) run unmodified on the emulator when ``MOCKGPU_CUDA_PYTHON_EXAMPLES`` names a checkout's examples folder,
and its ``tests/test_cuda.py`` when ``MOCKGPU_CUDA_PYTHON_TESTS`` names the checkout's cuda_bindings/tests folder.

Each ``*_test.py`` / sample program is started as a user would (``python -m mock_gpu run prog.py`` from the
examples folder, so its ``common`` helpers import) with ``CUDA_HOME`` pointing at a CUDA toolkit's headers. A sample
that skips itself with ``pytest.skip`` (simpleP2P on one device) is reported as skipped with its reason, as NVIDIA's
own runner reports it; docs/mock-gpu.md lists what each sample does on the emulator.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_programs import run_program

ROOT = os.environ.get("MOCKGPU_CUDA_PYTHON_EXAMPLES")
TESTS = os.environ.get("MOCKGPU_CUDA_PYTHON_TESTS")


def _samples() -> list[Path]:
    if not ROOT:
        return []
    found = [p for p in Path(ROOT).rglob("*.py") if p.parent.name != "common" and not p.name.startswith("_")
             and p.name not in ("conftest.py", "numba_emm_plugin.py", "nvidia_smi.py")]
    return sorted(found)


@pytest.mark.skipif(not ROOT, reason="set MOCKGPU_CUDA_PYTHON_EXAMPLES to cuda-python's cuda_bindings/examples "
                                     "folder to run NVIDIA's samples")
@pytest.mark.parametrize("sample", _samples(), ids=lambda p: p.stem)
def test_sample_runs_unmodified(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "CUDA_HOME" not in os.environ and Path("/usr/local/cuda/include").is_dir():
        monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("PYTHONPATH", str(Path(ROOT)))  # type: ignore[arg-type]
    done = run_program(sample, timeout=1800)
    skipped = [line for line in done.stderr.splitlines() if line.startswith("Skipped: ")]
    if done.returncode != 0 and skipped:
        pytest.skip(f"{sample.stem} skips itself: {skipped[-1][len('Skipped: '):]}")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


@pytest.mark.skipif(not TESTS, reason="set MOCKGPU_CUDA_PYTHON_TESTS to cuda-python's cuda_bindings/tests folder")
def test_cuda_python_test_cuda_passes_on_the_emulator() -> None:
    """``python -m mock_gpu run -m pytest test_cuda.py`` from that folder (its conftest imports as it expects)."""
    folder = Path(TESTS)  # type: ignore[arg-type]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOCKGPU_")}
    done = subprocess.run([sys.executable, "-m", "mock_gpu", "run", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_cuda.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=1800,
                          check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
