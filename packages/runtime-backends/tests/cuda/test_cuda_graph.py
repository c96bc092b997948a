"""CUDAGraph: launches and device copies captured once, replayed with new buffers and vals."""

from __future__ import annotations

import numpy as np
import pytest
from _cuda_util import program, reverse_kernel, scale_kernel

from runtime_backends.cuda.graph import CopyStep, KernelStep
from runtime_core.buffer import Buffer
from runtime_core.dtype import dtypes

LAUNCH = {"global_size": (4, 1, 1), "local_size": (32, 1, 1)}


def _expected(a: np.ndarray, n: int, k: int, before: np.ndarray) -> np.ndarray:
    out = before.copy()
    out[:n] = a[:n] * k + np.arange(n)
    return out


@pytest.mark.parametrize("ptx", [False, True], ids=["cuda-c", "ptx"])
def test_replay_with_updated_buffers_and_vals(open_cuda, ptx: bool) -> None:
    dev = open_cuda(ptx=ptx)
    prg = program(dev, scale_kernel())
    a = Buffer.from_numpy("CUDA", np.arange(128, dtype=np.float32))
    mid, last, other = (Buffer.from_numpy("CUDA", np.zeros(128, np.float32)) for _ in range(3))
    graph = dev.graph([KernelStep(prg, (a.opaque, mid.opaque), vals=(128, 2), **LAUNCH),
                       CopyStep(last.opaque, mid.opaque, 128 * 4),
                       KernelStep(prg, (last.opaque, mid.opaque), vals=(64, 3), **LAUNCH)])
    assert graph() is None
    first = _expected(np.arange(128, dtype=np.float32), 128, 2, np.zeros(128, np.float32))
    np.testing.assert_array_equal(last.numpy(), first)
    np.testing.assert_array_equal(mid.numpy(), _expected(first, 64, 3, first))

    graph.update(0, vals=(100, -1))
    graph.update(2, bufs=(last.opaque, other.opaque))
    seconds = graph(wait=True)
    assert isinstance(seconds, float) and seconds > 0
    second = _expected(np.arange(128, dtype=np.float32), 100, -1, first)
    np.testing.assert_array_equal(last.numpy(), second)
    np.testing.assert_array_equal(other.numpy(), _expected(second, 64, 3, np.zeros(128, np.float32)))


def test_dynamic_shared_memory_is_honoured(cuda, rng: np.random.Generator) -> None:
    kernel = reverse_kernel(16 * 1024)  # 64 KiB of shared memory, beyond the default 48 KiB
    prg = program(cuda, kernel)
    data = rng.standard_normal(16 * 1024).astype(np.float32)
    src, out = Buffer.from_numpy("CUDA", data), Buffer("CUDA", 16 * 1024, dtypes.float32).allocate()
    graph = cuda.graph([KernelStep(prg, (src.opaque, out.opaque), kernel.global_size, kernel.local_size)])
    graph()
    np.testing.assert_array_equal(out.numpy(), data[::-1])


def test_invalid_steps_are_refused_before_anything_is_built(open_cuda) -> None:
    a, b = open_cuda("CUDA", devices=2), open_cuda("CUDA:1")
    prg, other = program(a, scale_kernel()), program(b, scale_kernel())
    x = Buffer.from_numpy("CUDA", np.zeros(128, np.float32))
    with pytest.raises(ValueError, match="takes 2 buffers, got 1"):
        a.graph([KernelStep(prg, (x.opaque,), vals=(1, 1), **LAUNCH)])
    with pytest.raises(ValueError, match="'scale' is loaded on CUDA:1, the graph is for CUDA"):
        a.graph([KernelStep(other, (x.opaque, x.opaque), vals=(1, 1), **LAUNCH)])
    with pytest.raises(ValueError, match="CopyStep.nbytes must be a positive int, got 0"):
        a.graph([CopyStep(x.opaque, x.opaque, 0)])
    with pytest.raises(TypeError, match="graph step 0 is a str"):
        a.graph(["launch"])
    with pytest.raises(ValueError, match="at least one step"):
        a.graph([])


def test_an_invalid_update_leaves_the_graph_as_it_was(cuda) -> None:
    prg = program(cuda, scale_kernel())
    a = Buffer.from_numpy("CUDA", np.arange(128, dtype=np.float32))
    out = Buffer.from_numpy("CUDA", np.zeros(128, np.float32))
    graph = cuda.graph([KernelStep(prg, (a.opaque, out.opaque), vals=(128, 2), **LAUNCH),
                        CopyStep(out.opaque, a.opaque, 4)])
    with pytest.raises(ValueError, match="vals must be int32"):
        graph.update(0, vals=(128, 2**40))
    with pytest.raises(IndexError, match="graph step 1 is not a kernel step"):
        graph.update(1, vals=(1, 1))
    graph()
    expected = _expected(np.arange(128, dtype=np.float32), 128, 2, np.zeros(128, np.float32))
    expected[0] = 0.0  # the copy step: a[0]
    np.testing.assert_array_equal(out.numpy(), expected)
