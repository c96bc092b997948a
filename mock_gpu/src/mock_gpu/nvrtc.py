"""NVRTC as a program on the emulator sees it: ``cuda.bindings.nvrtc`` itself, except that every cubin it hands out
is registered with its program's PTX, so that cuModuleLoadData of that cubin runs the PTX (the emulator cannot run
machine code; see :mod:`mock_gpu._driver.images`). :func:`mock_gpu.install` puts this module in the place of
``cuda.bindings.nvrtc`` and ``cuda.nvrtc``; every other name is the real module's.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import nvrtc as _real

from ._driver.images import register_cubin

__all__ = ["nvrtcGetCUBIN"]


def nvrtcGetCUBIN(prog: Any, cubin: Any) -> tuple:
    """nvrtcGetCUBIN(prog, cubin) -> (nvrtcResult,): the real call, then the cubin is registered with the PTX of
    ``prog`` (nvrtcGetPTX, which NVRTC keeps for a program compiled to a real ``sm_XX``)."""
    result = _real.nvrtcGetCUBIN(prog, cubin)
    if result[0] == _real.nvrtcResult.NVRTC_SUCCESS:
        err, size = _real.nvrtcGetPTXSize(prog)
        if err == _real.nvrtcResult.NVRTC_SUCCESS:
            ptx = b" " * size
            if _real.nvrtcGetPTX(prog, ptx)[0] == _real.nvrtcResult.NVRTC_SUCCESS:
                register_cubin(bytes(memoryview(cubin).cast("B")), [ptx.split(b"\x00", 1)[0].decode()])
    return result


def __getattr__(name: str) -> Any:
    return getattr(_real, name)


def __dir__() -> list[str]:
    return sorted(set(dir(_real)) | set(__all__))
