"""The shared C-family writer (``runtime_backends.cstyle``): the CPU's C against the PYTHON backend's reference
interpreter for the ops the two C dialects once spelled differently, helpers emitted only where called, and the CPU's
two loop shapes (flat global x id, group/thread nest) on launches of several rows, y/z threads and partial ranges."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from maxnum_case import assert_maxnum, maxmin_inputs, maxmin_kernel

from runtime_backends.cpu.cexpr import CPU_DIALECT
from runtime_backends.cpu.renderer import CRenderer
from runtime_backends.cstyle.values import Dialect
from runtime_core import Buffer, Device, dtypes
from runtime_core.ir import Kernel, KernelBuilder, Ops


def run(device: str, kernel: Kernel, *arrays: np.ndarray, global_size=None, local_size=None) -> list[np.ndarray]:
    dev = Device[device]
    prg = dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))
    bufs = [Buffer.from_numpy(device, a) for a in arrays]
    prg(*[b.opaque for b in bufs], global_size=global_size or kernel.global_size,
        local_size=local_size or kernel.local_size)
    return [b.numpy() for b in bufs]


@pytest.mark.parametrize("dt", dtypes.floats, ids=lambda d: d.name)
def test_float_max_min_match_the_python_reference(dt) -> None:
    a, b = maxmin_inputs(dt)
    out = np.zeros_like(a)
    kernel = maxmin_kernel(dt)
    _, _, want_max, want_min = run("PYTHON", kernel, a, b, out, out)
    _, _, got_max, got_min = run("CPU", kernel, a, b, out, out)
    assert_maxnum(got_max, want_max)
    assert_maxnum(got_min, want_min)
    assert_maxnum(want_max, np.fmax(a, b))  # the reference is maxNum (IEEE 754-2008; C fmax)


def test_helpers_are_emitted_only_where_called() -> None:
    add = KernelBuilder("add_f32", (1,), (4,))
    x, out = add.buffer(dtypes.float32), add.buffer(dtypes.float32)
    add.store(out, add.global_id(0), add.add(add.load(x, add.global_id(0)), 1.0))
    assert "rtk_" + "h2f" not in CRenderer(memcheck=False).render(add.build())
    half = KernelBuilder("sqrt_f16", (1,), (4,))
    x, out = half.buffer(dtypes.float16), half.buffer(dtypes.float16)
    half.store(out, half.global_id(0), half.alu(Ops.SQRT, half.load(x, half.global_id(0))))
    src = CRenderer(memcheck=False).render(half.build())
    # rtk_f2h rounds through rtk_fbits; rtk_h2f builds with rtk_bitsf: both come along, once each
    defined = re.findall(r"^static inline [\w ]+? (rtk_\w+)\(", src, re.M)
    assert sorted(defined) == ["rtk_bitsf", "rtk_f2h", "rtk_fbits", "rtk_h2f"]


def test_a_dialect_missing_a_helper_is_refused() -> None:
    with pytest.raises(ValueError, match=r"does not define the helpers \['rtk_fma_odd'\]"):
        Dialect("toy", "_Bool", "static", "", tuple(h for h in CPU_DIALECT.intrinsics if h[0] != "rtk_fma_odd"))


def _ids_kernel(individual: bool) -> Kernel:
    """out[(z * Y + y) * X + x] = x + 1000 * y + 10**6 * z over the global ids; ``individual`` reads the x group and
    thread ids apart (the CPU's nest of loops), else through the global x id (its flat loop)."""
    kb = KernelBuilder(f"ids_{'nest' if individual else 'flat'}")
    out = kb.buffer(dtypes.int32)
    gx, gy, gz = (kb.global_id(d) for d in range(3))
    if individual:
        gx = kb.add(kb.mul(kb.special("lsize", 0), kb.special("group", 0)), kb.add(kb.special("local", 0), 0))
    width = kb.mul(kb.special("gsize", 0), kb.special("lsize", 0))
    height = kb.mul(kb.special("gsize", 1), kb.special("lsize", 1))
    idx = kb.add(kb.mul(kb.add(kb.mul(gz, height), gy), width), gx)
    kb.store(out, idx, kb.add(kb.add(gx, kb.mul(gy, 1000)), kb.mul(gz, 10**6)))
    return kb.build()


@pytest.mark.parametrize("individual", [False, True], ids=["flat", "nest"])
@pytest.mark.parametrize("shape", [((3, 2, 2), (4, 3, 2)), ((5, 1, 1), (7, 1, 1)), ((1, 4, 3), (1, 1, 2))],
                         ids=["3d", "1d", "x1"])
def test_every_thread_runs_once_in_either_loop_shape(individual: bool, shape) -> None:
    gs, ls = shape
    X, Y, Z = (g * s for g, s in zip(gs, ls))
    z, y, x = np.meshgrid(np.arange(Z), np.arange(Y), np.arange(X), indexing="ij")
    (got,) = run("CPU", _ids_kernel(individual), np.full(X * Y * Z, -1, np.int32), global_size=gs, local_size=ls)
    np.testing.assert_array_equal(got, (x + 1000 * y + 10**6 * z).ravel())


def test_the_renderers_doc_example_runs() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "renderers.md").read_text()
    (block,) = re.findall(r"<!-- renderers_example.py: [^\n]*-->\n```python\n(.*?)```", doc, flags=re.S)
    exec(compile(block, "docs/renderers.md example", "exec"), {})  # asserts what it shows itself
