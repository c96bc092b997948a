"""Helpers of the CUDA backend's unit tests: small IR kernels and loading them."""

from __future__ import annotations

from runtime_backends.cuda.device import CUDADevice
from runtime_backends.cuda.program import CUDAProgram
from runtime_core.dtype import DType, dtypes
from runtime_core.ir import Kernel, KernelBuilder


def program(dev: CUDADevice, kernel: Kernel) -> CUDAProgram:
    """``kernel`` rendered, compiled (without the compile cache) and loaded on ``dev``."""
    return dev.runtime(kernel.name, dev.compiler.compile(dev.renderer.render(kernel)))


def scale_kernel(dt: DType = dtypes.float32, name: str = "scale") -> Kernel:
    """out[i] = a[i] * k + i for i < n (n and k int32 vals), groups of 32 threads."""
    kb = KernelBuilder(name, (4,), (32,))
    a, out = kb.buffer(dt), kb.buffer(dt)
    n, k = kb.var("n"), kb.var("k")
    i = kb.global_id(0)
    value = kb.add(kb.mul(kb.load(a, i, gate=kb.lt(i, n)), kb.cast(k, dt)), kb.cast(i, dt))
    kb.store(out, i, value, gate=kb.lt(i, n))
    return kb.build()


def reverse_kernel(count: int, name: str = "reverse_in_shared") -> Kernel:
    """One group of ``count`` threads reverses ``count`` float32 through local memory (between barriers)."""
    kb = KernelBuilder(name, (1,), (min(count, 1024),))
    src, out = kb.buffer(dtypes.float32), kb.buffer(dtypes.float32)
    shared = kb.local("stage", dtypes.float32, count)
    t = kb.special("local", 0)
    step = kb.special("lsize", 0)
    with kb.range(0, count // min(count, 1024)) as r:
        j = kb.add(kb.mul(r, step), t)
        kb.store(shared, j, kb.load(src, j))
    kb.barrier()
    with kb.range(0, count // min(count, 1024)) as r:
        j = kb.add(kb.mul(r, step), t)
        kb.store(out, j, kb.load(shared, kb.sub(count - 1, j)))
    return kb.build()
