"""Fixtures of the CUDA backend's unit tests: devices of a fresh emulated GPU system (``MOCKGPU=1``), so the tests run
on any machine and the emulator checks every device access and the stream order of every copy."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from runtime_backends.cuda.device import CUDADevice
from runtime_core.device import Device

mock_gpu = pytest.importorskip("mock_gpu", reason="the CUDA unit tests run on the emulated GPU (pip install -e mock_gpu)")
OpenDevice = Callable[..., CUDADevice]
_MOCK_VARS = ("DEVICES", "ARCH", "MEMORY", "DEFERRED", "LAUNCH_TIMEOUT")


@pytest.fixture
def open_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenDevice]:
    """``open_cuda(name="CUDA", *, devices=1, ptx=False, **mock_env)``: ``Device[name]`` on a fresh emulated system.

    The first call resets the emulator with ``MOCKGPU_DEVICES=devices`` and ``MOCKGPU_<KEY>=value`` for each
    ``mock_env`` item. Devices open inside ``Device.restoring()``, so they are finalized and the registry is as before
    when the test ends.
    """
    if any(n.startswith("CUDA") for n in Device.opened()):
        pytest.skip("this process has CUDA devices open through the registry (harness suites); the CUDA unit tests "
                    "reset the emulator, so run them in their own pytest process")
    started = False

    def open_(name: str = "CUDA", *, devices: int = 1, ptx: bool = False, **mock_env: str) -> CUDADevice:
        nonlocal started
        monkeypatch.setenv("MOCKGPU", "1")
        monkeypatch.setenv("PTX", "1" if ptx else "0")
        if not started:
            for key in _MOCK_VARS:
                monkeypatch.delenv(f"MOCKGPU_{key}", raising=False)
            monkeypatch.setenv("MOCKGPU_DEVICES", str(devices))
            for key, value in mock_env.items():
                monkeypatch.setenv(f"MOCKGPU_{key.upper()}", value)
            mock_gpu.reset()
            started = True
        dev = Device[name]
        assert isinstance(dev, CUDADevice)
        return dev

    with Device.restoring():
        yield open_
    mock_gpu.reset()


@pytest.fixture
def cuda(open_cuda: OpenDevice) -> CUDADevice:
    """Device ``CUDA`` of one emulated GPU, CUDA C renderer."""
    return open_cuda()
