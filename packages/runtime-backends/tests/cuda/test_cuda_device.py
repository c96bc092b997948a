"""CUDADevice: names, what it learns from the driver, renderer choice, peer access, finalize."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_backends.cuda.compiler import NVRTCCompiler, PTXCompiler
from runtime_backends.cuda.device import CUDADevice
from runtime_backends.cuda.renderer_c import CUDARenderer
from runtime_backends.cuda.renderer_ptx import PTXRenderer
from runtime_core.buffer import Buffer
from runtime_core.device import Device, DeviceError


@pytest.mark.parametrize(("name", "canonical"), [("cuda", "CUDA"), ("CUDA:0", "CUDA"), ("cuda:1", "CUDA:1"),
                                                 ("CUDA:", "CUDA")])
def test_names_are_canonical(name: str, canonical: str) -> None:
    assert Device.canonicalize(name) == canonical


def test_two_devices_each_with_its_own_context_and_stream(open_cuda) -> None:
    a, b = open_cuda("CUDA", devices=2), open_cuda("CUDA:1")
    assert (a.ordinal, b.ordinal) == (0, 1)
    assert int(a.context) != int(b.context) and int(a.stream) != int(b.stream)
    assert a.limits.arch == (9, 0) and a.arch == "sm_90"  # MOCKGPU_ARCH default
    assert a.limits.max_block == (1024, 1024, 64) and a.limits.shared_optin > 48 * 1024
    assert "mock_gpu" in a.limits.name
    assert isinstance(a.renderer, CUDARenderer) and isinstance(a.compiler, NVRTCCompiler)


def test_an_ordinal_beyond_the_devices_present_names_them(open_cuda) -> None:
    open_cuda("CUDA", devices=2)
    with pytest.raises(DeviceError, match=r"CUDA:2 does not exist: the driver sees 2 device\(s\) \(CUDA, CUDA:1\)"):
        Device["CUDA:2"]


@pytest.mark.parametrize("name", ["CUDA:x", "CUDA:-1", "CUDA:1:2"])
def test_malformed_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="'CUDA' or 'CUDA:<ordinal>'"):
        CUDADevice(name)


def test_ptx_env_selects_the_ptx_renderer(open_cuda) -> None:
    dev = open_cuda(ptx=True)
    assert isinstance(dev.renderer, PTXRenderer) and isinstance(dev.compiler, PTXCompiler)


def test_a_bad_ptx_env_value_is_refused_before_the_driver_is_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTX", "maybe")
    with pytest.raises(ValueError, match=r"PTX='maybe': expected a boolean: 1/true/yes/on or 0/false/no/off"):
        CUDADevice("CUDA")


def test_peer_access_is_enabled_both_ways_once(open_cuda) -> None:
    a, b = open_cuda("CUDA", devices=2), open_cuda("CUDA:1")
    assert a.peer_access(b) and b.peer_access(a)
    for dev, peer in ((a, b), (b, a)):  # enabling again is what the driver refuses when it is already on
        dev.activate()
        (err,) = dev.cu.cuCtxEnablePeerAccess(peer.context, 0)
        assert err.name == "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"
    assert a.peer_access(b)  # asked again: no error


def test_a_buffer_used_after_its_device_was_finalized_raises(open_cuda) -> None:
    dev = open_cuda()
    buf = Buffer.from_numpy("CUDA", np.arange(8, dtype=np.int32))
    dev.finalize()
    dev.finalize()  # idempotent
    uses = {"copyout": buf.numpy, "copyin": lambda: buf.copyin(np.zeros(8, np.int32)), "free": buf.deallocate,
            "alloc": lambda: dev.allocator.alloc(32), "synchronize": dev.synchronize}
    for what, use in uses.items():
        with pytest.raises(RuntimeError, match="CUDA was finalized: its buffers and programs can no longer be used"):
            use()
            pytest.fail(f"{what} after finalize did not raise")
