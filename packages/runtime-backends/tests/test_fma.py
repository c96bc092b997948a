"""The IR's FMA op on CPU (clang, gcc) and PYTHON: ``a * b + c`` rounded once, bit for bit against exact rational
arithmetic, on inputs where a separate multiply and add would round differently, on specials and on random values."""

from __future__ import annotations

import math
import shutil

import ml_dtypes
import numpy as np
import pytest
from float_refs import fma_reference

from runtime_backends.cpu.compiler import ClangCompiler
from runtime_backends.cpu.program import CPUProgram
from runtime_backends.cpu.renderer import CRenderer
from runtime_backends.python.alu import alu
from runtime_core import Buffer, Device, dtypes
from runtime_core.dtype import DType
from runtime_core.ir import IRError, Kernel, KernelBuilder, Ops

FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]
N = 512


def fma_kernel(dt: DType) -> Kernel:
    kb = KernelBuilder(f"fma_{dt.name}", (N // 64,), (64,))
    a, b, c, out = (kb.buffer(dt) for _ in range(4))
    i = kb.global_id(0)
    kb.store(out, i, kb.fma(kb.load(a, i), kb.load(b, i), kb.load(c, i)))
    return kb.build()


def hard_cases(dt: DType) -> list[tuple[float, float, float]]:
    """Inputs whose fused result differs from the unfused one, signed zeros, specials, tiny results."""
    eps = 2.0 ** -{dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23, dtypes.float64: 52}[dt]
    tiny = {dtypes.float16: 2.0**-12, dtypes.bfloat16: 2.0**-70, dtypes.float32: 2.0**-70, dtypes.float64: 2.0**-540}[dt]
    big = float(ml_dtypes.finfo(dt.np).max) if dt is dtypes.bfloat16 else float(np.finfo(dt.np).max)
    inf, nan = math.inf, math.nan
    return [(1 + eps, 1 - eps, -1.0), (1 + eps, 1 + eps, -(1 + 2 * eps)), (3.0, 1 / 3, -1.0), (0.1, 10.0, -1.0),
            (0.0, 5.0, -0.0), (-0.0, 5.0, -0.0), (-0.0, 5.0, 0.0), (2.0, -3.0, 6.0), (tiny, tiny, 0.0),
            (tiny, -tiny, tiny * tiny * 3), (big, 2.0, -big), (big, 0.5, big), (inf, 0.0, 1.0), (inf, 1.0, -inf),
            (nan, 1.0, 1.0), (1.0, 1.0, inf), (-inf, -inf, 5.0), (big, big, -inf)]


def inputs(dt: DType, rng: np.random.Generator) -> list[np.ndarray]:
    a, b = rng.uniform(-4, 4, N), rng.uniform(-4, 4, N)
    a, b = a.astype(dt.np).astype(np.float64), b.astype(dt.np).astype(np.float64)
    c = -(a * b) * (1 + rng.uniform(-2.0**-6, 2.0**-6, N))  # near-cancellation: the product's low bits matter
    arrays = [a.astype(dt.np), b.astype(dt.np), c.astype(dt.np)]
    with np.errstate(over="ignore"):
        for k, case in enumerate(hard_cases(dt)):
            for arr, v in zip(arrays, case):
                arr[k] = v
    return arrays


def expected(dt: DType, arrays: list[np.ndarray]) -> np.ndarray:
    a, b, c = (x.astype(np.float64) for x in arrays)
    with np.errstate(over="ignore"):
        return np.array([fma_reference(float(x), float(y), float(z), dt) for x, y, z in zip(a, b, c)]).astype(dt.np)


def assert_bits_equal(actual: np.ndarray, want: np.ndarray, dt: DType) -> None:
    a64, w64 = actual.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(w64)
    same = both_nan | ((a64 == w64) & (np.signbit(a64) == np.signbit(w64)))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, f"{dt.name}: {bad.size} results differ, first at {bad[0]}: got {a64[bad[0]]!r}, " \
                          f"want {w64[bad[0]]!r}"


@pytest.fixture(params=["clang", "gcc", "PYTHON"])
def run_fma(request):
    """``run(kernel, [a, b, c])`` -> the output array, on CPU with one compiler or on PYTHON."""
    if request.param == "PYTHON":
        def run(kernel: Kernel, arrays: list[np.ndarray]) -> np.ndarray:
            dev = Device["PYTHON"]
            prg = dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))
            bufs = [Buffer.from_numpy("PYTHON", x) for x in (*arrays, np.zeros_like(arrays[0]))]
            prg(*[b.opaque for b in bufs], global_size=kernel.global_size, local_size=kernel.local_size)
            return bufs[3].numpy()
        return run
    if shutil.which(request.param) is None:
        pytest.skip(f"{request.param} is not installed")
    cc = ClangCompiler(None, cc=request.param)

    def run_cpu(kernel: Kernel, arrays: list[np.ndarray]) -> np.ndarray:
        prg = CPUProgram(None, kernel.name, cc.compile(CRenderer(memcheck=False).render(kernel)))
        out = np.zeros_like(arrays[0])
        prg(*[x.ctypes.data for x in (*arrays, out)], global_size=kernel.global_size, local_size=kernel.local_size)
        return out
    return run_cpu


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_fma_rounds_once(run_fma, dt: DType) -> None:
    arrays = inputs(dt, np.random.default_rng(7))
    want = expected(dt, arrays)
    assert_bits_equal(run_fma(fma_kernel(dt), arrays), want, dt)
    with np.errstate(all="ignore"):
        unfused = ((arrays[0] * arrays[1]).astype(dt.np).astype(np.float64) + arrays[2]).astype(dt.np)
    assert np.count_nonzero(unfused[:N - 32] != want[:N - 32]) > 3  # the inputs do tell fused from unfused


def test_python_float64_fma_over_the_whole_exponent_range() -> None:
    """The PYTHON backend emulates float64 FMA (no numpy fma): products near under/overflow, subnormal addends and
    cancellations, against exact rational arithmetic."""
    rng = np.random.default_rng(11)
    n = 3000
    a = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-600, 600, n) * rng.choice([-1, 1], n)
    b = rng.uniform(1, 2, n) * 2.0 ** rng.integers(-600, 600, n)
    with np.errstate(all="ignore"):
        near = -(a * b) * (1 + rng.uniform(-2.0**-40, 2.0**-40, n))
        c = np.where(rng.random(n) < 0.5, near, rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-1074, 1000, n))
    got = alu(Ops.FMA, dtypes.float64, a, b, c)
    want = np.array([fma_reference(float(x), float(y), float(z), dtypes.float64) for x, y, z in zip(a, b, c)])
    assert_bits_equal(got, want, dtypes.float64)


@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.bool])
def test_fma_is_float_only(dt: DType) -> None:
    kb = KernelBuilder("fma_int")
    x = kb.const(True if dt is dtypes.bool else 1, dt)
    kb.fma(x, x, x)
    with pytest.raises(IRError, match="applies to floats only"):
        kb.build()
