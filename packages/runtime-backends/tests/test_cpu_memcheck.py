"""CPU_MEMCHECK: checked kernels refuse out-of-bounds accesses and report them after the call, naming the kernel, the
op, the buffer slot, the index, the element count and the group/thread; in-bounds kernels give unchecked results."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from runtime_backends.cpu.device import CPUDevice
from runtime_backends.cpu.launch import WINDOW
from runtime_backends.cpu.memcheck import OutOfBoundsError, memcheck_enabled
from runtime_backends.cpu.renderer import CRenderer
from runtime_core import Buffer, dtypes
from runtime_core.config import CPU_MEMCHECK
from runtime_core.ir import Kernel, KernelBuilder

GROUP = 32


@pytest.fixture
def dev(tmp_path, monkeypatch) -> CPUDevice:
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    monkeypatch.setenv(CPU_MEMCHECK.name, "1")
    return CPUDevice()


def shifted_copy(shift: int, gated: bool = False) -> Kernel:
    """out[i + shift] = x[i] (or x[i + shift] -> out[i] for negative shift), i the global id."""
    kb = KernelBuilder(f"shifted_copy_{'m' if shift < 0 else 'p'}{abs(shift)}{'_gated' if gated else ''}", (4,), (GROUP,))
    x, out = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    i = kb.global_id(0)
    if shift >= 0:
        kb.store(out, kb.add(i, shift), kb.load(x, i), gate=kb.lt(i, 4 * GROUP - shift) if gated else None)
    else:
        kb.store(out, i, kb.load(x, kb.add(i, -shift), gate=kb.lt(i, 4 * GROUP + shift) if gated else None))
    return kb.build()


def launch(dev: CPUDevice, kernel: Kernel, *bufs: Buffer) -> None:
    prg = dev.runtime(kernel.name, dev.compiler.compile_cached(dev.renderer.render(kernel)))
    prg(*[b.opaque for b in bufs], global_size=kernel.global_size, local_size=kernel.local_size)


def buffers(n: int) -> tuple[Buffer, Buffer, Buffer, Buffer]:
    """x (n elements), a base buffer with n + 16 elements of -1, and ``out``: its first n elements."""
    x = Buffer.from_numpy("CPU", np.arange(n, dtype=np.float32))
    base = Buffer.from_numpy("CPU", np.full(n + 16, -1, np.float32))
    return x, base, base.view(n, dtypes.float32, 0), base.view(n, dtypes.float32, 0)


def test_out_of_bounds_store_raises_after_the_call_and_writes_nothing_outside(dev):
    n = 4 * GROUP
    x, base, out, _ = buffers(n)
    with pytest.raises(OutOfBoundsError, match=r"kernel 'shifted_copy_p3': STORE out of bounds: buffer 1 index 128, "
                                               r"but the buffer holds 128 elements; group \(3, 0, 0\), thread "
                                               r"\(29, 0, 0\)") as info:
        launch(dev, shifted_copy(3), x, out)
    assert (info.value.slot, info.value.index, info.value.count, info.value.store) == (1, n, n, True)
    got = base.numpy()
    assert got[:3].tolist() == [-1] * 3 and got[3:n].tolist() == list(range(n - 3))  # stored up to the bad access
    assert got[n:].tolist() == [-1] * 16  # the memory behind the view is untouched


def test_out_of_bounds_load_is_reported_with_its_slot(dev):
    n = 4 * GROUP
    x, _, out, _ = buffers(n)
    with pytest.raises(OutOfBoundsError, match="LOAD out of bounds: buffer 0 index 128, but the buffer holds 128") as info:
        launch(dev, shifted_copy(-5), x, out)
    assert info.value.group == (3, 0, 0) and info.value.thread == (GROUP - 5, 0, 0)


def test_negative_index_is_out_of_bounds(dev):
    kb = KernelBuilder("store_before", (1,))
    out = kb.buffer(dtypes.int32)
    kb.store(out, kb.sub(kb.global_id(0), 1), kb.const(7, dtypes.int32))
    _, base, _, _ = buffers(8)
    with pytest.raises(OutOfBoundsError, match="buffer 0 index -1"):
        launch(dev, kb.build(), base.view(8, dtypes.int32, 16))


@pytest.mark.parametrize("shift", [3, -5])
def test_gated_accesses_that_stay_in_bounds_run_unchanged(dev, shift):
    n = 4 * GROUP
    x, _, out, _ = buffers(n)
    launch(dev, shifted_copy(shift, gated=True), x, out)
    ref = np.full(n, -1, np.float32)
    if shift > 0:
        ref[shift:] = np.arange(n - shift)
    else:
        ref[:n + shift] = np.arange(-shift, n)
        ref[n + shift:] = 0  # a false gate loads the alt value 0
    np.testing.assert_array_equal(out.numpy(), ref)


def test_checked_and_unchecked_kernels_are_different_sources_and_cache_entries(dev):
    kernel = shifted_copy(0)
    checked, unchecked = CRenderer(memcheck=True).render(kernel), CRenderer(memcheck=False).render(kernel)
    assert "RTK_FAULT" in checked and "RTK_FAULT" not in unchecked
    assert dev.renderer.render(kernel) == checked  # the device's renderer follows $CPU_MEMCHECK
    assert dev.compiler.cache_key(checked) != dev.compiler.cache_key(unchecked)


def test_checked_kernel_needs_sized_handles(dev):
    kernel = shifted_copy(0)
    prg = dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))
    x, out = np.zeros(4 * GROUP, np.float32), np.zeros(4 * GROUP, np.float32)
    with pytest.raises(ValueError, match="bounds-checked .* buffer 0 is a plain address without a size"):
        prg(x.ctypes.data, out.ctypes.data, global_size=(4,), local_size=(GROUP,))


def test_fault_in_a_pooled_launch_names_its_group(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNTIME_CACHE_DB", str(tmp_path / "cache.db"))
    monkeypatch.setenv(CPU_MEMCHECK.name, "1")
    monkeypatch.setenv("CPU_THREADS", "2")
    monkeypatch.setattr("runtime_backends.cpu.launch.POOL_MIN_S", 0.0)  # pool from the second launch on
    dev = CPUDevice()
    kb = KernelBuilder("poke", (256,), (4,))
    out = kb.buffer(dtypes.int32)
    i = kb.global_id(0)
    kb.store(out, kb.where(kb.ne(i, 777), i, 5000), i)
    kernel = kb.build()
    buf = Buffer("CPU", 1024, dtypes.int32).allocate()
    for _ in range(2):
        with pytest.raises(OutOfBoundsError, match=r"index 5000, .* 1024 elements; group \(194, 0, 0\), thread \(1, 0, 0\)"):
            launch(dev, kernel, buf)


@pytest.mark.parametrize("value, enabled", [("1", True), ("true", True), ("ON", True), ("0", False), ("", False),
                                            ("no", False)])
def test_env_values(monkeypatch, value, enabled):
    monkeypatch.setenv(CPU_MEMCHECK.name, value)
    assert memcheck_enabled() is enabled


@pytest.mark.parametrize("value", ["2", "maybe", "1.0"])
def test_non_boolean_env_is_an_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv(CPU_MEMCHECK.name, value)
    with pytest.raises(ValueError, match=rf"CPU_MEMCHECK='{value}': expected a boolean"):
        CRenderer().render(shifted_copy(0))


def test_a_launch_cut_short_by_its_fault_decides_nothing_about_the_pool(dev):
    """A faulting run returns early: it must not be taken as a short launch that keeps its shape off the pool."""
    kernel = shifted_copy(1)
    prg = dev.runtime(kernel.name, dev.compiler.compile_cached(dev.renderer.render(kernel)))
    x, _, _, out = buffers(4 * GROUP)
    bound = prg.bind(x.opaque, out.opaque, global_size=kernel.global_size, local_size=kernel.local_size)
    if not bound.undecided:
        pytest.skip("this device's pool has one thread: no pool decision to make")
    with pytest.raises(OutOfBoundsError):
        bound()
    assert bound.undecided and bound._seconds == {False: deque(maxlen=WINDOW), True: deque(maxlen=WINDOW)}
