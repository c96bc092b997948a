"""Unmodified cuda-python programs (tests/programs, written in the style of NVIDIA's cuda-python samples) run on
the emulator with ``python -m mock_gpu run``, each in a fresh process as a user would start it; each program checks
its own results against numpy or known values and exits non-zero on a mismatch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"
pytest.importorskip("cuda.bindings.nvrtc", reason="the programs compile their kernels with NVRTC")


def run_program(path: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m mock_gpu run path args...`` in ``path``'s folder, with a clean MOCKGPU_* environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOCKGPU_")}
    return subprocess.run([sys.executable, "-m", "mock_gpu", "run", str(path), *args], cwd=path.parent, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("name", ["vector_add_drv", "stream_ordered", "zero_copy_and_managed", "vector_add_mmap",
                                  "graphs", "legacy_link"])
def test_program_runs_unmodified(name: str) -> None:
    done = run_program(PROGRAMS / f"{name}.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout


def test_a_failing_program_keeps_its_exit_status_and_traceback(tmp_path: Path) -> None:
    program = tmp_path / "fails.py"
    program.write_text("from cuda.bindings import driver\n"
                       "print(driver.cuInit(0))\n"
                       "driver.cuMemAlloc(None)\n")
    done = run_program(program)
    assert done.returncode == 1
    assert "(<CUresult.CUDA_SUCCESS: 0>,)" in done.stdout
    assert "TypeError" in done.stderr and "an integer is required" in done.stderr


def test_run_needs_a_program() -> None:
    done = subprocess.run([sys.executable, "-m", "mock_gpu", "run"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "give the program to run" in done.stderr


def test_a_test_suite_runs_with_the_legacy_names(tmp_path: Path) -> None:
    """``python -m mock_gpu run -m pytest ...``: a pytest file written against ``cuda.cuda``/``cuda.cudart``."""
    (tmp_path / "test_small.py").write_text(
        "import cuda.cuda as cuda\nimport cuda.cudart as cudart\n\n\n"
        "def test_init():\n"
        "    assert cuda.cuInit(0) == (cuda.CUresult.CUDA_SUCCESS,)\n"
        "    assert cuda.cuCtxCreate(0, 0)[0] == cuda.CUresult.CUDA_SUCCESS\n"
        "    assert cudart.cudaGetDeviceCount() == (cudart.cudaError_t.cudaSuccess, 1)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MOCKGPU_")}
    done = subprocess.run([sys.executable, "-m", "mock_gpu", "run", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_small.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def _numba_cuda_can_compile() -> bool:
    """numba-cuda and the NVVM and NVRTC it compiles with, where it looks for them (its CUDA 12 wheels' folders, a
    toolkit at CUDA_HOME), are installed."""
    try:
        from numba.cuda.cudadrv.libs import get_cudalib
    except ImportError:
        return False
    return Path(get_cudalib("nvvm")).is_file() and Path(get_cudalib("nvrtc")).is_file()


@pytest.mark.skipif(not _numba_cuda_can_compile(), reason="needs numba-cuda with NVVM and NVRTC where it looks "
                    "(pip install numba-cuda nvidia-cuda-nvcc-cu12 nvidia-cuda-nvrtc-cu12)")
def test_a_numba_cuda_kernel_runs_unmodified() -> None:
    done = run_program(PROGRAMS / "numba_vector_add.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout


def test_install_lets_numba_cuda_find_a_driver_library_only_where_it_uses_cuda_python(monkeypatch) -> None:
    """numba-cuda opens a driver library before it makes its calls through cuda.bindings.driver: install() names
    one that opens (cuda-python's own) unless the user named one or chose numba-cuda's ctypes driver path."""
    import ctypes

    import mock_gpu

    monkeypatch.delenv("NUMBA_CUDA_DRIVER", raising=False)
    monkeypatch.delenv("NUMBA_CUDA_USE_NVIDIA_BINDING", raising=False)
    mock_gpu.install()
    try:
        ctypes.CDLL(os.environ["NUMBA_CUDA_DRIVER"])
        from cuda.bindings import nvjitlink
        assert nvjitlink is mock_gpu.nvjitlink
    finally:
        mock_gpu.uninstall()
    assert "NUMBA_CUDA_DRIVER" not in os.environ
    monkeypatch.setenv("NUMBA_CUDA_USE_NVIDIA_BINDING", "0")
    mock_gpu.install()
    try:
        assert "NUMBA_CUDA_DRIVER" not in os.environ
    finally:
        mock_gpu.uninstall()
