"""Driver access: which module is chosen, how a failed call reads, and what happens without a driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import mock_gpu
from runtime_backends.cuda.device import CUDADevice
from runtime_backends.cuda.driver import CUDAError, CUDAOutOfMemoryError, check, driver_module


def test_mockgpu_selects_the_emulator_and_nothing_else_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOCKGPU", "1")
    assert driver_module() is mock_gpu.driver
    monkeypatch.setenv("MOCKGPU", "0")
    real = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    assert driver_module() is real


def test_a_failed_call_names_the_error_the_call_its_arguments_and_advice(cuda: CUDADevice) -> None:
    cu = cuda.cu
    with pytest.raises(CUDAError, match=r"cuMemFree\(dptr=0xdead0000\) failed: CUDA_ERROR_INVALID_VALUE "
                                        r"\(invalid argument.*\); an argument is outside") as info:
        check(cu, cu.cuMemFree(0xDEAD0000), "cuMemFree", dptr=0xDEAD0000)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE" and info.value.call == "cuMemFree"
    assert check(cu, cu.cuDeviceGetCount(), "cuDeviceGetCount") == 1  # one output: returned as itself


def test_out_of_memory_is_a_memory_error(open_cuda) -> None:
    dev = open_cuda(memory="1MiB")
    with pytest.raises(CUDAOutOfMemoryError, match=r"cuMemAlloc\(bytesize=0x200000, device='CUDA'\) failed: "
                                                   r"CUDA_ERROR_OUT_OF_MEMORY") as info:
        dev.allocator.alloc(2 << 20)
    assert isinstance(info.value, MemoryError)


def _probe_in_subprocess(code: str, env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


_PROBE = """
import json, sys
{prelude}
import runtime_backends.cuda.device  # importing the backend never touches the driver
from runtime_core import Device
ok, why = Device.probe("CUDA")
print(json.dumps({{"ok": ok, "why": why}}))
"""


def test_without_bindings_the_device_is_unavailable_with_the_reason() -> None:
    env = {**os.environ, "MOCKGPU": "0"}
    result = _probe_in_subprocess(_PROBE.format(prelude="sys.modules['cuda'] = None  # no cuda-bindings"), env)
    assert not result["ok"]
    assert "pip install cuda-bindings" in result["why"] and "MOCKGPU=1" in result["why"]


def test_without_a_driver_library_the_device_is_unavailable_with_the_reason() -> None:
    pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
    result = _probe_in_subprocess(_PROBE.format(prelude=""), {**os.environ, "MOCKGPU": "0"})
    if result["ok"]:
        pytest.skip("this machine has a working NVIDIA driver")
    assert "CUDA" in result["why"] or "driver" in result["why"]
    assert "MOCKGPU=1" in result["why"] or "nvidia-smi" in result["why"]
