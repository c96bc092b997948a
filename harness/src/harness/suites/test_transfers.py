"""Copies between buffers of the selected devices: every ordered pair (the same device, two devices of one backend such
as CUDA and CUDA:1, two backends such as CPU and CUDA), views at byte offsets, buffers larger than any staging memory,
and copies that must wait for a kernel still running on the source device.

``--backends CUDA,CUDA:1,CPU`` runs every pair of those three; a pair with an unavailable device is skipped with the
reason.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.runner import load_program
from harness.selection import get_selection
from runtime_core.buffer import Buffer
from runtime_core.device import Device, DeviceError
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel, KernelBuilder

LARGE = (40 << 20) + 4093  # bytes: beyond the CUDA backend's 32 MiB staging pool, and not a multiple of anything
FILL_N = 4096  # elements the ordering kernel writes


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "pair" not in metafunc.fixturenames:
        return
    sel = get_selection(metafunc.config)
    params = []
    for src, dst in itertools.product(sel.params, repeat=2):
        why = next((f"{d} unavailable: {sel.reason(d)}" for d in (src, dst) if sel.reason(d) is not None), None)
        params.append(pytest.param((src, dst), id=f"{src}->{dst}", marks=[pytest.mark.skip(reason=why)] if why else []))
    if not params:
        params = [pytest.param(None, id="no-backend", marks=[pytest.mark.skip(reason="no backend available")])]
    metafunc.parametrize("pair", params)


@pytest.mark.parametrize("nbytes", [1, 4096 + 3, (1 << 20) + 5])
def test_copy_between_devices(pair: tuple[str, str], nbytes: int, rng: np.random.Generator) -> None:
    src_dev, dst_dev = pair
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    src = Buffer.from_numpy(src_dev, data)
    dst = Buffer.from_numpy(dst_dev, np.zeros(nbytes, dtype=np.uint8))
    try:
        dst.copy_from(src)
        np.testing.assert_array_equal(dst.numpy(), data)
        np.testing.assert_array_equal(src.numpy(), data)  # the source is unchanged
    finally:
        src.deallocate()
        dst.deallocate()


def test_copy_between_views(pair: tuple[str, str], rng: np.random.Generator) -> None:
    src_dev, dst_dev = pair
    for name in pair:
        if not Device[name].allocator.capabilities.views:
            pytest.skip(f"{name} does not support buffer views at an offset")
    data = rng.standard_normal(1024).astype(np.float32)
    src = Buffer.from_numpy(src_dev, data)
    dst = Buffer.from_numpy(dst_dev, np.full(1024, -7, dtype=np.float32))
    try:
        dst.view(100, dtypes.float32, offset=128 * 4).copy_from(src.view(100, dtypes.float32, offset=16 * 4))
        expected = np.full(1024, -7, dtype=np.float32)
        expected[128:228] = data[16:116]
        np.testing.assert_array_equal(dst.numpy(), expected)  # only the view's bytes changed
    finally:
        src.deallocate()
        dst.deallocate()


def test_copy_large_buffer(pair: tuple[str, str], rng: np.random.Generator) -> None:
    src_dev, dst_dev = pair
    data = np.frombuffer(rng.bytes(LARGE), dtype=np.uint8)
    src = Buffer.from_numpy(src_dev, data)
    dst = Buffer(dst_dev, LARGE, dtypes.uint8).allocate()
    try:
        dst.copy_from(src)
        out = dst.numpy()
        if not np.array_equal(out, data):
            bad = np.flatnonzero(out != data)
            pytest.fail(f"{src_dev}->{dst_dev}: {bad.size} of {LARGE} bytes differ, first at byte {bad[0]}")
    finally:
        src.deallocate()
        dst.deallocate()


def _fill_kernel() -> Kernel:
    """out[i] = 3 * i + 1 (int32) for i < FILL_N, in groups of 64."""
    kb = KernelBuilder("transfer_fill", (FILL_N // 64,), (64,))
    out = kb.buffer(dtypes.int32)
    i = kb.global_id(0)
    kb.store(out, i, kb.add(kb.mul(i, 3), 1))
    return kb.build()


def test_copy_waits_for_the_kernel_that_writes_the_source(pair: tuple[str, str]) -> None:
    src_dev, dst_dev = pair
    dev = Device[src_dev]
    if dev.renderer is None:
        pytest.skip(f"{src_dev} runs no kernels")
    kernel = _fill_kernel()
    program = load_program(src_dev, kernel)
    src = Buffer.from_numpy(src_dev, np.zeros(FILL_N, dtype=np.int32))
    dst = Buffer.from_numpy(dst_dev, np.zeros(FILL_N, dtype=np.int32))
    try:
        program(src.opaque, global_size=kernel.global_size, local_size=kernel.local_size)  # not waited for
        dst.copy_from(src)
        np.testing.assert_array_equal(dst.numpy(), 3 * np.arange(FILL_N, dtype=np.int32) + 1)
    finally:
        src.deallocate()
        dst.deallocate()


def test_source_may_be_overwritten_once_copyin_returns(pair: tuple[str, str]) -> None:
    """Several copyins in flight, each source array overwritten at once: every buffer holds what it was given."""
    _, dst_dev = pair
    host = np.empty(3000, dtype=np.int64)
    bufs = [Buffer(dst_dev, 3000, dtypes.int64).allocate() for _ in range(6)]
    try:
        for k, buf in enumerate(bufs):
            host[:] = np.arange(3000) * (k + 1)
            buf.copyin(host)
            host[:] = -1
        for k, buf in enumerate(bufs):
            np.testing.assert_array_equal(buf.numpy(), np.arange(3000) * (k + 1), err_msg=f"buffer {k}")
    finally:
        for buf in bufs:
            buf.deallocate()


def test_copy_size_mismatch_is_refused_and_leaves_both(pair: tuple[str, str]) -> None:
    src_dev, dst_dev = pair
    src = Buffer.from_numpy(src_dev, np.arange(16, dtype=np.int32))
    dst = Buffer.from_numpy(dst_dev, np.full(15, 5, dtype=np.int32))
    try:
        with pytest.raises(ValueError, match=r"destination holds 60 bytes, source 64 bytes"):
            dst.copy_from(src)
        np.testing.assert_array_equal(dst.numpy(), np.full(15, 5, dtype=np.int32))
        np.testing.assert_array_equal(src.numpy(), np.arange(16, dtype=np.int32))
    finally:
        src.deallocate()
        dst.deallocate()


def test_copy_to_a_device_that_does_not_exist(pair: tuple[str, str]) -> None:
    src_dev, _ = pair
    backend = src_dev.partition(":")[0]
    missing = f"{backend}:63"
    if Device.probe(missing)[0]:
        pytest.skip(f"{missing} exists here")
    with pytest.raises(DeviceError, match=rf"{missing}"):
        Buffer(missing, 4, dtypes.uint8).allocate()
