"""Run IR kernels on a device and check them against their numpy references.

The path is the one every backend user takes (``runtime_core`` docs): ``renderer.render`` -> ``compiler.compile_cached``
-> ``runtime(name, lib)`` -> launch on the buffers' opaque handles. Loaded programs are memoized per process by
(device, rendered source), so cases that share a kernel compile and load it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.assertions import assert_close
from harness.kernels.case import KernelCase
from harness.kernels.large_index import BASE, COUNT, GROUP, LargeIndexCase
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import dtypes
from runtime_core.ir import Kernel

__all__ = ["load_program", "run_kernel", "check_case", "check_large_index", "unsupported_reason"]

_programs: dict[tuple[str, str], Any] = {}


def load_program(device: str, kernel: Kernel) -> Any:
    """The loaded program of ``kernel`` on ``device`` (rendered, compiled through the compile cache, loaded).

    Raises ``ValueError`` when the renderer cannot express the kernel, ``CompileError`` when compiling fails.
    """
    dev = Device[device]
    if dev.renderer is None or dev.compiler is None or dev.runtime is None:
        raise ValueError(f"{device} cannot run kernels: it has no renderer, compiler or runtime")
    src = dev.renderer.render(kernel)
    if (prg := _programs.get((dev.device, src))) is None:
        prg = _programs[(dev.device, src)] = dev.runtime(kernel.name, dev.compiler.compile_cached(src))
    return prg


def run_kernel(device: str, kernel: Kernel, arrays: Sequence[np.ndarray], vals: Sequence[int] = (),
               global_size: Sequence[int] | None = None, local_size: Sequence[int] | None = None,
               read: Sequence[int] | None = None) -> dict[int, np.ndarray]:
    """Launch ``kernel`` once on ``device`` with buffers initialized from ``arrays`` (one per slot, slot order).

    Returns slot -> contents after the launch for the slots in ``read`` (default: every slot the kernel stores to).
    Raises ``TypeError`` if an array is not a numpy array, ``ValueError`` if ``arrays`` does not match the kernel's
    buffers in number or dtype or ``read`` names a slot the kernel does not have.
    """
    if len(arrays) != len(kernel.buffers):
        raise ValueError(f"kernel {kernel.name!r} has {len(kernel.buffers)} buffers, got {len(arrays)} arrays")
    if bad := sorted({type(a).__name__ for a in arrays if not isinstance(a, np.ndarray)}):
        raise TypeError(f"kernel {kernel.name!r}: arrays must be numpy arrays (one per buffer slot), got {', '.join(bad)}")
    if read is not None and (missing := sorted(set(read) - set(range(len(kernel.buffers))))):
        raise ValueError(f"kernel {kernel.name!r} has buffer slots 0..{len(kernel.buffers) - 1}; read names {missing}")
    bufs = []
    try:
        for u, a in zip(kernel.buffers, arrays):
            if a.dtype != u.dtype.np:
                raise ValueError(f"kernel {kernel.name!r}: slot {u.arg} holds {u.dtype.name}, got an array of {a.dtype}")
            bufs.append(Buffer.from_numpy(device, a))
        prg = load_program(device, kernel)
        prg(*[b.opaque for b in bufs], global_size=tuple(global_size or kernel.global_size),
            local_size=tuple(local_size or kernel.local_size), vals=tuple(vals))
        slots = sorted(kernel.written_buffers()) if read is None else list(read)
        return {s: bufs[s].numpy() for s in slots}
    finally:
        for b in bufs:
            b.deallocate()


def unsupported_reason(device: str, case: KernelCase) -> str | None:
    """Why ``device`` cannot run ``case`` by its declared capabilities (local memory, dtypes), or ``None``."""
    renderer = Device[device].renderer
    if renderer is None:
        return f"{device} has no renderer, so it runs no kernels"
    if case.needs_local and not (renderer.has_local and renderer.has_shared):
        return f"{device} lacks local memory/thread ids (has_local={renderer.has_local}, has_shared={renderer.has_shared})"
    used = {u.dtype for u in case.kernel.ops if u.dtype is not None}
    if missing := sorted(d.name for d in used if d not in renderer.dtypes):
        return f"{device} does not support dtype(s) {', '.join(missing)}"
    return None


def check_case(device: str, case: KernelCase, rng: np.random.Generator) -> None:
    """Run ``case`` on ``device`` and ``assert_close`` every slot its reference gives (``AssertionError`` naming the
    case, the slot and its dtype)."""
    arrays = case.inputs(rng)
    expected = case.reference([a.copy() for a in arrays])
    gs, ls = case.launch
    actual = run_kernel(device, case.kernel, arrays, case.vals, gs, ls, read=sorted(expected))
    for slot, exp in expected.items():
        dt = case.kernel.buffers[slot].dtype
        tol = {"rtol": case.rtol, "atol": case.atol} if dt.is_float else {}
        assert_close(actual[slot], exp, dt, what=f"case {case.name!r} slot {slot} ({dt.name})", **tol)


def check_large_index(device: str, case: LargeIndexCase, rng: np.random.Generator) -> None:
    """Run the large-index ``case`` on ``device`` and compare the window [BASE - COUNT, BASE + COUNT) of the big buffer
    and the ``out`` slot with the reference.

    Raises ``AssertionError`` on a mismatch, ``NotImplementedError`` if the device has no buffer views.
    """
    big = Buffer(device, case.nbytes, dtypes.uint8).allocate()
    out = Buffer(device, COUNT, dtypes.uint8).allocate()
    try:
        window = big.view(2 * COUNT, dtypes.uint8, BASE - COUNT)
        before = rng.integers(0, 256, size=2 * COUNT, dtype=np.uint8)
        window.copyin(before)
        load_program(device, case.kernel)(big.opaque, out.opaque, global_size=(COUNT // GROUP, 1, 1),
                                          local_size=(GROUP, 1, 1))
        expected = before.copy()
        expected[COUNT:] = (before[COUNT:].astype(np.int64) + 1) % 256
        assert_close(window.numpy(), expected, dtypes.uint8, what=f"window [2**31 - {COUNT}, 2**31 + {COUNT})")
        assert_close(out.numpy(), before[COUNT:], dtypes.uint8, what="values loaded above 2**31")
    finally:
        out.deallocate()
        big.deallocate()
