"""Shared helpers for the PTX interpreter tests: a device, buffers, kernel launch, NVRTC compilation."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from mock_gpu import ptx
from mock_gpu.address_space import AddressSpace

try:
    from cuda.bindings import nvrtc
except ImportError:  # pragma: no cover - depends on the environment
    nvrtc = None

needs_nvrtc = pytest.mark.skipif(nvrtc is None, reason="cuda.bindings.nvrtc is not importable")

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def compile_cuda(src: str, arch: str = "compute_90") -> str:
    """CUDA C -> PTX text with NVRTC (raises RuntimeError with the log on failure)."""
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], [])
    (res,) = nvrtc.nvrtcCompileProgram(prog, 2, [f"--gpu-architecture={arch}".encode(), b"-default-device"])
    if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, n = nvrtc.nvrtcGetProgramLogSize(prog)
        log = bytearray(n)  # NVRTC writes into it: never an (interned) bytes object
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.decode())
    _, n = nvrtc.nvrtcGetPTXSize(prog)
    buf = bytearray(n)  # NVRTC writes into it: never an (interned) bytes object
    nvrtc.nvrtcGetPTX(prog, buf)
    return buf.decode().rstrip("\x00")


class Device:
    """One AddressSpace (``exact_bounds`` as AddressSpace's) with a bound module; buffers as numpy round trips."""

    def __init__(self, ptx_text: str, *, exact_bounds: bool = False) -> None:
        self.space = AddressSpace({0: 1 << 32}, exact_bounds=exact_bounds)
        self.module = ptx.load_module(ptx_text)
        self.module.bind(self.space, 0)

    def buf(self, array: np.ndarray) -> int:
        ptr = self.space.alloc(max(1, array.nbytes))
        self.space.write(ptr, array.tobytes())
        return ptr

    def get(self, ptr: int, count: int, dtype) -> np.ndarray:
        return np.frombuffer(self.space.read(ptr, count * np.dtype(dtype).itemsize), dtype=dtype).copy()

    def run(self, name: str, grid, block, *args, shared: int = 0) -> None:
        kernel = self.module.kernels[name]
        parts = bytearray(kernel.param_bytes)
        for (off, size), a in zip(kernel.params, args, strict=True):
            if isinstance(a, float):
                parts[off:off + size] = struct.pack("<f" if size == 4 else "<d", a)
            elif isinstance(a, bytes):
                parts[off:off + size] = a
            else:
                parts[off:off + size] = int(a).to_bytes(size, "little", signed=int(a) < 0)
        ptx.launch(self.module, kernel, grid, block, shared, bytes(parts), self.space, 0)
