"""The CUDA C and PTX renderers beyond the harness library: PTX that real hardware's assembler accepts, float64
transcendental subroutines over their whole range, constants rounded once, kernel names."""

from __future__ import annotations

import os
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from _cuda_util import program
from maxnum_case import assert_maxnum, maxmin_inputs, maxmin_kernel

from harness.kernels import all_cases, large_index_case
from runtime_backends.cstyle.constants import float_bits
from runtime_backends.cuda.compiler import PTXCompiler
from runtime_backends.cuda.limits import DeviceLimits
from runtime_backends.cuda.renderer_c import CUDARenderer
from runtime_backends.cuda.renderer_ptx import PTXRenderer
from runtime_core.buffer import Buffer
from runtime_core.device import Device
from runtime_core.dtype import dtypes
from runtime_core.ir import KernelBuilder, Ops


def _ptxas() -> str | None:
    found = shutil.which("ptxas")
    home = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
    return found or (home if os.path.exists(home) else None)


def test_every_library_kernel_assembles_with_ptxas(tmp_path) -> None:
    """The emulator accepts what it can run; ptxas (CUDA toolkit) says whether a GPU's driver would accept it."""
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("ptxas (CUDA toolkit) is not installed")
    renderer, stamp = PTXRenderer(DeviceLimits(arch=(9, 0), shared_optin=227 * 1024)), PTXCompiler(90)
    kernels = {c.kernel.name: c.kernel for c in all_cases()} | {large_index_case().kernel.name: large_index_case().kernel}
    failures = []
    for name, kernel in kernels.items():
        path = tmp_path / f"{name}.ptx"
        path.write_bytes(stamp.compile(renderer.render(kernel)))
        done = subprocess.run([ptxas, "-arch=sm_90", str(path), "-o", os.devnull], capture_output=True, text=True,
                              timeout=300)
        if done.returncode:
            failures.append(f"{name}: {done.stderr.strip()[:400]}")
    assert not failures, "\n".join(failures)


def _unary_kernel(op: Ops, n: int):
    kb = KernelBuilder(f"f64_{op.name.lower()}", (n // 64,), (64,))
    x, out = kb.buffer(dtypes.float64), kb.buffer(dtypes.float64)
    i = kb.global_id(0)
    kb.store(out, i, kb.alu(op, kb.load(x, i)))
    return kb.build()


def _wide_inputs(op: Ops, rng: np.random.Generator) -> np.ndarray:
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 2.0, 0.5, 5e-324, 2.2250738585072014e-308]
    if op is Ops.EXP2:
        body = [rng.uniform(-1080, 1030, 200), rng.uniform(-1, 1, 100), [1023.99, -1074.0, -1060.5, 1024.0, -1075.5]]
    elif op is Ops.LOG2:
        body = [np.exp(rng.uniform(-740, 709, 200)), rng.uniform(0.7, 1.4, 100), [1 + 2**-40, 1 - 2**-40, -3.0]]
    else:
        body = [rng.uniform(-1e6, 1e6, 100), rng.uniform(-10, 10, 150), [np.pi, -np.pi / 2, 1e-300, 3 * np.pi / 4]]
    x = np.concatenate([specials, *body])
    return np.resize(x, -(-x.size // 64) * 64)


@pytest.mark.parametrize("op", [Ops.EXP2, Ops.LOG2, Ops.SIN], ids=["exp2", "log2", "sin"])
def test_ptx_float64_transcendentals_are_accurate_everywhere(open_cuda, op: Ops, rng: np.random.Generator) -> None:
    dev = open_cuda(ptx=True)
    x = _wide_inputs(op, rng)
    kernel = _unary_kernel(op, x.size)
    src, out = Buffer.from_numpy("CUDA", x), Buffer("CUDA", x.size, dtypes.float64).allocate()
    program(dev, kernel)(src.opaque, out.opaque, global_size=kernel.global_size, local_size=kernel.local_size)
    got = out.numpy()
    with np.errstate(all="ignore"):
        expected = {Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin}[op](x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    np.testing.assert_allclose(got[finite], expected[finite], rtol=4e-15, atol=1e-300)


def test_16_bit_constants_round_once() -> None:
    # 1 + 2**-8 + 2**-30: rounding to float32 first gives exactly the bfloat16 halfway point 1 + 2**-8, which then
    # rounds to even (1.0); rounded once it is above halfway: 1 + 2**-7
    assert float_bits(1 + 2**-8 + 2**-30, dtypes.bfloat16) == int(np.array(1 + 2**-7, ml_dtypes.bfloat16).view(np.uint16))
    assert float_bits(1 + 2**-11 + 2**-40, dtypes.float16) == int(np.float16(1 + 2**-10).view(np.uint16))
    assert float_bits(1e10, dtypes.float16) == 0x7C00  # overflow: infinity


@pytest.mark.parametrize("renderer", [CUDARenderer(), PTXRenderer()], ids=["cuda-c", "ptx"])
@pytest.mark.parametrize("name", ["class", "__reserved", "_Upper", "rtk_helper"])
def test_kernel_names_that_cannot_be_symbols_are_refused(renderer, name: str) -> None:
    kb = KernelBuilder(name)
    kb.store(kb.buffer(dtypes.int32), 0, 1)
    with pytest.raises(ValueError, match=rf"kernel name '{name}' becomes the kernel's symbol"):
        renderer.render(kb.build())


@pytest.mark.parametrize("renderer", [CUDARenderer(), PTXRenderer()], ids=["cuda-c", "ptx"])
def test_local_memory_beyond_the_device_is_refused(renderer) -> None:
    kb = KernelBuilder("too_much_shared", (1,), (32,))
    out = kb.buffer(dtypes.float32)
    big = kb.local("big", dtypes.float32, renderer.shared_max // 4 + 1)
    kb.store(big, 0, 1.0)
    kb.barrier()
    kb.store(out, 0, kb.load(big, 0))
    with pytest.raises(ValueError, match=r"needs \d+ bytes of local memory, the device has 49152"):
        renderer.render(kb.build())


# a * b + c whose exact value lies so close to a rounding boundary of the 16-bit type that rounding to float32 first
# (or through a float32 fmaf) lands on the wrong side
_FMA_HARD = {dtypes.float16: [(3.0, -3.12890625, 2.0**-24), (3.4375, -3.4375, -(2.0**-24)), (-3.625, 3.71875, 2.0**-24)],
             dtypes.bfloat16: [(3.0, -3.03125, 3.096647560596466e-08), (3.0, -3.40625, 8.381903171539307e-09),
                               (-2.625, -1.3125, 6.05359673500061e-09)]}


def _rounded_once(a: float, b: float, c: float, dt) -> int:
    """Bits of the ``dt`` nearest to the exact a*b+c (ties to even), by exact rational comparison."""
    from fractions import Fraction
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    guess = int(np.array(float(exact), np.float64).astype(dt.np).view(np.uint16))
    candidates = [guess - 1, guess, guess + 1]
    return min(candidates, key=lambda bits: (abs(Fraction(float(np.uint16(bits).view(dt.np))) - exact), bits % 2))


@pytest.mark.parametrize("ptx", [False, True], ids=["cuda-c", "ptx"])
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_16_bit_fma_rounds_once(open_cuda, ptx: bool, dt) -> None:
    dev = open_cuda(ptx=ptx)
    kb = KernelBuilder(f"fma_{dt.name}", (1,), (len(_FMA_HARD[dt]),))
    a, b, c, out = (kb.buffer(dt) for _ in range(4))
    i = kb.global_id(0)
    kb.store(out, i, kb.fma(kb.load(a, i), kb.load(b, i), kb.load(c, i)))
    kernel = kb.build()
    columns = [np.array(col, np.float64).astype(dt.np) for col in zip(*_FMA_HARD[dt])]
    bufs = [Buffer.from_numpy("CUDA", col) for col in columns] + [Buffer("CUDA", 3, dt).allocate()]
    program(dev, kernel)(*[x.opaque for x in bufs], global_size=(1, 1, 1), local_size=(3, 1, 1))
    expected = [_rounded_once(*(float(col[k]) for col in columns), dt) for k in range(3)]
    assert bufs[3].numpy().view(np.uint16).tolist() == expected


@pytest.mark.parametrize("ptx", [False, True], ids=["cuda-c", "ptx"])
@pytest.mark.parametrize("dt", dtypes.floats, ids=lambda d: d.name)
def test_float_max_min_match_the_python_reference(open_cuda, ptx: bool, dt) -> None:
    dev, kernel = open_cuda(ptx=ptx), maxmin_kernel(dt)
    a, b = maxmin_inputs(dt)
    python = Device["PYTHON"]
    reference = python.runtime(kernel.name, python.compiler.compile(python.renderer.render(kernel)))
    want = [Buffer.from_numpy("PYTHON", x) for x in (a, b, a, a)]
    reference(*[x.opaque for x in want], global_size=kernel.global_size, local_size=kernel.local_size)
    got = [Buffer.from_numpy("CUDA", x) for x in (a, b, a, a)]
    program(dev, kernel)(*[x.opaque for x in got], global_size=kernel.global_size, local_size=kernel.local_size)
    for k in (2, 3):
        assert_maxnum(got[k].numpy(), want[k].numpy())
