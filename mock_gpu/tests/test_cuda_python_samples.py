"""NVIDIA's cuda-python samples (cuda_bindings/examples of github.com/NVIDIA/cuda-python, not shipped here: they are
NVIDIA's) run unmodified on the emulator when ``MOCKGPU_CUDA_PYTHON_EXAMPLES`` names a checkout's examples folder.

Each ``*_test.py`` / sample program is started as a user would (``python -m mock_gpu run prog.py`` from the
examples folder, so its ``common`` helpers import) with ``CUDA_HOME`` pointing at a CUDA toolkit's headers. The
two samples that need hardware the emulator is not (texture fetches of cubemap arrays, grid-wide synchronization of
a cooperative launch) are expected to fail or waive; see mock_gpu/README.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_programs import run_program

ROOT = os.environ.get("MOCKGPU_CUDA_PYTHON_EXAMPLES")
pytestmark = pytest.mark.skipif(not ROOT, reason="set MOCKGPU_CUDA_PYTHON_EXAMPLES to cuda-python's "
                                                 "cuda_bindings/examples folder to run NVIDIA's samples")


def _samples() -> list[Path]:
    if not ROOT:
        return []
    found = [p for p in Path(ROOT).rglob("*.py") if p.parent.name != "common" and not p.name.startswith("_")
             and p.name not in ("conftest.py", "numba_emm_plugin.py", "nvidia_smi.py")]
    return sorted(found)


@pytest.mark.parametrize("sample", _samples(), ids=lambda p: p.stem)
def test_sample_runs_unmodified(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "CUDA_HOME" not in os.environ and Path("/usr/local/cuda/include").is_dir():
        monkeypatch.setenv("CUDA_HOME", "/usr/local/cuda")
    monkeypatch.setenv("PYTHONPATH", str(Path(ROOT)))  # type: ignore[arg-type]
    done = run_program(sample, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
