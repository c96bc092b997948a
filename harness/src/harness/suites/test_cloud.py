"""CLOUD devices (``--backends CLOUD:CPU,CLOUD:PYTHON``): transfers to and from local devices, large copies, and
launches that are queued without waiting, which must run in order with the copies around them.

The other suites (buffers, kernels) run on CLOUD devices as on any other; these cover what only a remote device has.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.selection import get_selection
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import KernelBuilder

pytestmark = pytest.mark.backends("CLOUD")

MiB = 1 << 20


def _remote_kind(device: str) -> str:
    renderer = Device[device].renderer
    if renderer is None or not renderer.device:
        pytest.skip(f"{device} names no remote device kind")
    return renderer.device


@pytest.mark.parametrize("dt", [dtypes.uint8, dtypes.int32, dtypes.float16, dtypes.float64],
                         ids=lambda d: d.name)
def test_transfer_to_and_from_the_local_device(device: str, dt: DType, rng: np.random.Generator) -> None:
    local = _remote_kind(device)
    data = rng.integers(0, 100, 257).astype(dt.np)
    here = Buffer.from_numpy(local, data)
    there = Buffer(device, 257, dt).allocate()
    back = Buffer(local, 257, dt).allocate()
    try:
        there.copy_from(here)
        back.copy_from(there)
        np.testing.assert_array_equal(back.numpy(), data)
        np.testing.assert_array_equal(there.numpy(), data)
    finally:
        for b in (here, there, back):
            b.deallocate()


def test_large_copy_round_trip_is_exact(device: str, rng: np.random.Generator) -> None:
    data = np.frombuffer(rng.bytes(8 * MiB + 3), dtype=np.uint8)  # above the client's eager copy-in size
    buf = Buffer.from_numpy(device, data)
    try:
        out = np.empty_like(data)
        buf.copyout(out)
        np.testing.assert_array_equal(out, data)
    finally:
        buf.deallocate()


def test_queued_launches_run_in_order_with_the_copies(device: str, rng: np.random.Generator) -> None:
    kb = KernelBuilder("add_in_place", (64,))
    a, n = kb.buffer(dtypes.int32), kb.var("n")
    i = kb.global_id(0)
    kb.store(a, i, kb.add(kb.load(a, i), n))
    kernel = kb.build()
    dev = Device[device]
    prg = dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))
    start = rng.integers(-1000, 1000, 64).astype(np.int32)
    buf = Buffer.from_numpy(device, start)
    try:
        for k in range(1, 6):  # queued, not sent: each reads what the one before wrote
            prg(buf.opaque, global_size=(64, 1, 1), vals=(k,))
        buf.copyin(start * 2)  # ... and the copy-in comes after them
        prg(buf.opaque, global_size=(64, 1, 1), vals=(-1,))
        np.testing.assert_array_equal(buf.numpy(), start * 2 - 1)
    finally:
        buf.deallocate()


def test_two_cloud_devices_transfer_through_the_host(device: str, rng: np.random.Generator,
                                                    request: pytest.FixtureRequest) -> None:
    others = [d for d in get_selection(request.config).used if d.startswith("CLOUD") and d != device]
    if not others:
        pytest.skip("needs a second CLOUD device in --backends (e.g. CLOUD:CPU,CLOUD:PYTHON)")
    data = rng.standard_normal(100).astype(np.float32)
    src = Buffer.from_numpy(device, data)
    dst = Buffer(others[0], 100, dtypes.float32).allocate()
    try:
        dst.copy_from(src)
        np.testing.assert_array_equal(dst.numpy(), data)
    finally:
        src.deallocate()
        dst.deallocate()
