"""CUDAProgram: launches and their validation, device time, dynamic shared memory, foreign PTX, load and run faults."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from _cuda_util import program, reverse_kernel, scale_kernel

from runtime_backends.cuda.compiler import NVRTCCompiler, PTXCompiler
from runtime_backends.cuda.driver import CUDAError
from runtime_backends.cuda.ptx_info import PTXFormatError
from runtime_backends.cuda.renderer_ptx import PTXRenderer
from runtime_core.buffer import Buffer
from runtime_core.compiler import CompileError
from runtime_core.device import Device
from runtime_core.dtype import dtypes
from runtime_core.ir import KernelBuilder

FOREIGN_CUDA_C = r"""
extern "C" __global__ void saxpy_like(const float* x, float* y, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * k + y[i];
}
"""


def _pair(n: int = 128) -> tuple[Buffer, Buffer]:
    return Buffer.from_numpy("CUDA", np.arange(n, dtype=np.float32)), Buffer.from_numpy("CUDA", np.full(n, 7, np.float32))


@pytest.mark.parametrize("ptx", [False, True], ids=["cuda-c", "ptx"])
def test_launch_returns_device_seconds_when_waiting(open_cuda, ptx: bool) -> None:
    dev = open_cuda(ptx=ptx)
    a, out = _pair()
    prg = program(dev, scale_kernel())
    assert prg(a.opaque, out.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(100, 3)) is None
    seconds = prg(a.opaque, out.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(100, 3), wait=True)
    assert isinstance(seconds, float) and 0 < seconds < 60
    expected = np.full(128, 7, np.float32)
    expected[:100] = np.arange(100) * 3 + np.arange(100)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize(("local", "match"), [((1025, 1, 1), r"at most \(1024, 1024, 64\) per dimension and 1024 "),
                                              ((1, 1, 65), r"block \(local_size\) \(1, 1, 65\) exceeds"),
                                              ((32, 32, 2), r"1024 threads per block")])
def test_a_block_beyond_the_device_is_refused_before_launch(cuda, local: tuple, match: str) -> None:
    a, out = _pair()
    prg = program(cuda, scale_kernel())
    with pytest.raises(ValueError, match=match):
        prg(a.opaque, out.opaque, global_size=(1, 1, 1), local_size=local, vals=(128, 2))
    np.testing.assert_array_equal(out.numpy(), np.full(128, 7, np.float32))


def test_a_grid_beyond_the_device_is_refused_before_launch(cuda) -> None:
    a, out = _pair()
    with pytest.raises(ValueError, match=r"grid \(global_size, in blocks\) \(1, 65536, 1\) exceeds CUDA's limit"):
        program(cuda, scale_kernel())(a.opaque, out.opaque, global_size=(1, 65536, 1), vals=(128, 2))


@pytest.mark.parametrize(("bufs", "vals", "error", "match"), [
    (1, (128, 2), ValueError, "takes 2 buffers, got 1"), (2, (128,), ValueError, "takes 2 int vals, got 1"),
    (2, (2**31, 2), ValueError, "vals must be int32"), (2, (128, 2.5), ValueError, "vals must be int32")])
def test_wrong_buffers_or_vals_are_refused_before_launch(cuda, bufs: int, vals: tuple, error: type,
                                                         match: str) -> None:
    a, out = _pair()
    with pytest.raises(error, match=match):
        program(cuda, scale_kernel())(*[a.opaque, out.opaque][:bufs], global_size=(4, 1, 1), local_size=(32, 1, 1),
                                      vals=vals)
    np.testing.assert_array_equal(out.numpy(), np.full(128, 7, np.float32))


def test_a_handle_that_is_not_a_device_pointer_is_refused(cuda) -> None:
    a, _ = _pair()
    with pytest.raises(TypeError, match=r"buffer 1 is 'nope'; kernels take device buffers"):
        program(cuda, scale_kernel())(a.opaque, "nope", vals=(1, 1))


@pytest.mark.parametrize("ptx", [False, True], ids=["cuda-c", "ptx"])
def test_more_than_48_kib_of_dynamic_shared_memory(open_cuda, ptx: bool, rng: np.random.Generator) -> None:
    dev = open_cuda(ptx=ptx)
    count = 24 * 1024  # 96 KiB of float32: beyond the 48 KiB a block gets without opting in
    kernel = reverse_kernel(count)
    prg = program(dev, kernel)
    assert prg.shared_bytes == count * 4
    data = rng.standard_normal(count).astype(np.float32)
    src, out = Buffer.from_numpy("CUDA", data), Buffer("CUDA", count, dtypes.float32).allocate()
    prg(src.opaque, out.opaque, global_size=kernel.global_size, local_size=kernel.local_size)
    np.testing.assert_array_equal(out.numpy(), data[::-1])


def test_shared_memory_beyond_the_opt_in_limit_is_refused(cuda) -> None:
    lib = cuda.compiler.compile(cuda.renderer.render(scale_kernel()))
    with pytest.raises(ValueError, match=r"needs 300000 bytes of dynamic shared memory .* CUDA allows 232448"):
        cuda.runtime("scale", lib, shared_bytes=300_000)


def test_foreign_ptx_from_nvrtc_runs(cuda) -> None:
    prg = cuda.runtime("saxpy_like", NVRTCCompiler(cuda.limits.sm).compile(FOREIGN_CUDA_C))
    x, y = _pair()
    prg(x.opaque, y.opaque, global_size=(2, 1, 1), local_size=(64, 1, 1), vals=(100, 2))
    expected = np.full(128, 7, np.float32)
    expected[:100] += 2 * np.arange(100)
    np.testing.assert_array_equal(y.numpy(), expected)


def _nvcc() -> str | None:
    for candidate in (shutil.which("nvcc"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def test_foreign_ptx_from_nvcc_runs(cuda, tmp_path) -> None:
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("nvcc (CUDA toolkit) is not installed")
    src = tmp_path / "k.cu"
    src.write_text(FOREIGN_CUDA_C)
    done = subprocess.run([nvcc, "-ptx", "-arch=compute_90", str(src), "-o", str(tmp_path / "k.ptx")],
                          capture_output=True, text=True, timeout=300)
    if done.returncode:
        pytest.skip(f"nvcc cannot compile here: {done.stderr[-500:]}")
    prg = cuda.runtime("saxpy_like", (tmp_path / "k.ptx").read_bytes())
    x, y = _pair()
    prg(x.opaque, y.opaque, global_size=(1, 1, 1), local_size=(128, 1, 1), vals=(128, -1))
    np.testing.assert_array_equal(y.numpy(), 7 - np.arange(128, dtype=np.float32))


def test_foreign_ptx_with_a_parameter_the_protocol_cannot_pass(cuda) -> None:
    src = 'extern "C" __global__ void scale_by(float* y, float f) { y[threadIdx.x] *= f; }'
    lib = NVRTCCompiler(cuda.limits.sm).compile(src)
    with pytest.raises(PTXFormatError, match=r"parameter 1 .* is \.f32; programs pass buffers"):
        cuda.runtime("scale_by", lib)


def test_a_mangled_name_lists_the_kernels(cuda) -> None:
    lib = NVRTCCompiler(cuda.limits.sm).compile("__global__ void plain(int* p) { p[0] = 1; }")
    with pytest.raises(PTXFormatError, match=r"'plain' is not an \.entry of the PTX; it defines \['_Z5plainPi'\].*"
                                             r"extern \"C\""):
        cuda.runtime("plain", lib)


def test_invalid_ptx_is_cuda_error_invalid_ptx_with_the_jit_log(cuda) -> None:
    ptx = cuda.compiler.compile(cuda.renderer.render(scale_kernel())).decode()
    broken = ptx.replace("ld.global.f32", "ld.global.frobnicate.f32", 1)
    with pytest.raises(CUDAError, match=r"CUDA_ERROR_INVALID_PTX[\s\S]*--- JIT log ---[\s\S]*frobnicate") as info:
        cuda.runtime("scale", broken)
    assert info.value.name == "CUDA_ERROR_INVALID_PTX"


def test_a_cubin_is_refused_with_the_reason(cuda) -> None:
    with pytest.raises(ValueError, match="lib is a cubin/fatbin; CUDA programs load PTX text"):
        cuda.runtime("k", b"\x7fELF\x02\x01\x01" + bytes(64))


def test_a_kernel_fault_surfaces_the_report_through_the_backends_error(cuda, caplog) -> None:
    kb = KernelBuilder("overrun", (1,), (64,))
    out = kb.buffer(dtypes.int32)
    i = kb.global_id(0)
    kb.store(out, kb.add(i, 1000), i)  # far beyond the 64 elements allocated
    prg = program(cuda, kb.build())
    buf = Buffer("CUDA", 64, dtypes.int32).allocate()
    caplog.set_level(logging.ERROR, logger="mock_gpu")
    prg(buf.opaque, global_size=(1, 1, 1), local_size=(64, 1, 1))
    # the driver's own description in the message (as on a GPU); the emulator's report (kernel, thread) in its log
    with pytest.raises(CUDAError, match=r"CUDA_ERROR_ILLEGAL_ADDRESS \(an illegal memory access was encountered\)") \
            as info:
        cuda.synchronize()
    assert info.value.call == "cuStreamSynchronize"
    assert any("overrun" in r.getMessage() and "thread" in r.getMessage() for r in caplog.records)


def test_after_a_fault_finalize_and_reopen_gives_a_working_device(cuda) -> None:
    kb = KernelBuilder("overrun", (1,), (64,))
    out = kb.buffer(dtypes.int32)
    kb.store(out, kb.add(kb.global_id(0), 1 << 20), kb.global_id(0))
    program(cuda, kb.build())(Buffer("CUDA", 64, dtypes.int32).allocate().opaque, global_size=(1,), local_size=(64,))
    with pytest.raises(CUDAError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        cuda.synchronize()
    with pytest.raises(CUDAError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):  # sticky: the context stays unusable
        Buffer("CUDA", 4, dtypes.float32).allocate()
    with pytest.raises(CUDAError):  # finalize waits for the stream: the fault is reported again, and it closes anyway
        cuda.finalize()
    assert cuda.closed
    fresh = Device["CUDA"]  # the registry opens a new device instead of handing out the finalized one
    assert fresh is not cuda and not fresh.closed
    a, b = _pair()
    program(fresh, scale_kernel())(a.opaque, b.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(2, 5))
    expected = np.full(128, 7, np.float32)
    expected[:2] = np.arange(2) * 5 + np.arange(2)  # out[i] = a[i] * k + i for i < n, n=2, k=5
    np.testing.assert_array_equal(b.numpy(), expected)


def test_without_nvrtc_compiling_fails_clearly_and_given_ptx_still_runs(open_cuda, monkeypatch) -> None:
    bindings = pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed")
    dev = open_cuda()
    lib = PTXCompiler(dev.limits.sm).compile(PTXRenderer(dev.limits).render(scale_kernel()))  # needs no NVRTC
    monkeypatch.delattr(bindings, "nvrtc", raising=False)  # as if the nvidia-cuda-nvrtc wheel were missing
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    with pytest.raises(CompileError, match=r"NVRTC is not available .*pip install cuda-bindings nvidia-cuda-nvrtc"):
        dev.compiler.compile(dev.renderer.render(scale_kernel()))
    a, out = _pair()
    dev.runtime("scale", lib)(a.opaque, out.opaque, global_size=(4, 1, 1), local_size=(32, 1, 1), vals=(2, 5))
    np.testing.assert_array_equal(out.numpy()[:3], [0, 6, 7])


def test_a_compile_error_carries_nvrtcs_log(cuda) -> None:
    with pytest.raises(CompileError, match=r"NVRTC failed to compile[\s\S]*--- compiler output ---[\s\S]*error") as info:
        cuda.compiler.compile('extern "C" __global__ void k(int* p) { p[0] = undefined_name; }')
    assert "undefined_name" in info.value.stderr and "undefined_name" in info.value.source
