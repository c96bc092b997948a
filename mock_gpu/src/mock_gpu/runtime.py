"""The emulated CUDA runtime: the names, argument forms and ``(cudaError_t, *outputs)`` results of
``cuda.bindings.runtime``, built on :mod:`mock_gpu.driver` as the real runtime is built on the driver (primary
contexts, the legacy default stream). Implementation in :mod:`mock_gpu._runtime`. The enums, structs and handle
types are cuda-python's own; a runtime function the emulator does not implement is a stand-in raising
:class:`mock_gpu.NotEmulatedError` when called; the pure helpers (error strings, channel descriptors, ``make_*``)
are the real ones.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import runtime as _real

from ._driver.results import pass_through
from ._runtime.device import (
    cudaDeviceCanAccessPeer,
    cudaDeviceDisablePeerAccess,
    cudaDeviceEnablePeerAccess,
    cudaDeviceGetAttribute,
    cudaDeviceReset,
    cudaDeviceSynchronize,
    cudaDriverGetVersion,
    cudaGetDevice,
    cudaGetDeviceCount,
    cudaGetDeviceFlags,
    cudaGetDeviceProperties,
    cudaGetErrorName,
    cudaGetErrorString,
    cudaGetLastError,
    cudaMemGetInfo,
    cudaOccupancyMaxActiveBlocksPerMultiprocessor,
    cudaPeekAtLastError,
    cudaRuntimeGetVersion,
    cudaSetDevice,
    cudaSetDeviceFlags,
)
from ._runtime.graph import (
    cudaGraphAddKernelNode,
    cudaGraphAddMemcpyNode,
    cudaGraphAddMemsetNode,
    cudaGraphClone,
    cudaGraphCreate,
    cudaGraphDestroy,
    cudaGraphExecDestroy,
    cudaGraphGetNodes,
    cudaGraphInstantiate,
    cudaGraphLaunch,
    cudaStreamBeginCapture,
    cudaStreamEndCapture,
    cudaStreamIsCapturing,
)
from ._runtime.memory import (
    cudaDeviceGetDefaultMemPool,
    cudaFree,
    cudaFreeAsync,
    cudaFreeHost,
    cudaHostAlloc,
    cudaHostGetDevicePointer,
    cudaHostRegister,
    cudaHostUnregister,
    cudaMalloc,
    cudaMallocAsync,
    cudaMallocHost,
    cudaMallocManaged,
    cudaMallocPitch,
    cudaMemcpy,
    cudaMemcpy2D,
    cudaMemcpy2DAsync,
    cudaMemcpyAsync,
    cudaMemcpyPeer,
    cudaMemPoolGetAttribute,
    cudaMemPoolSetAttribute,
    cudaMemset,
    cudaMemset2D,
    cudaMemset2DAsync,
    cudaMemsetAsync,
)
from ._runtime.stream import (
    cudaEventCreate,
    cudaEventCreateWithFlags,
    cudaEventDestroy,
    cudaEventElapsedTime,
    cudaEventQuery,
    cudaEventRecord,
    cudaEventSynchronize,
    cudaLaunchHostFunc,
    cudaStreamCreate,
    cudaStreamCreateWithFlags,
    cudaStreamCreateWithPriority,
    cudaStreamDestroy,
    cudaStreamQuery,
    cudaStreamSynchronize,
    cudaStreamWaitEvent,
)
from ._runtime.texture import (  # noqa: F401
    cudaCreateTextureObject,
    cudaDestroyTextureObject,
    cudaFreeArray,
    cudaMalloc3DArray,
    cudaMemcpy3D,
)

__all__ = [
    "cudaDeviceCanAccessPeer", "cudaDeviceDisablePeerAccess", "cudaDeviceEnablePeerAccess", "cudaDeviceGetAttribute",
    "cudaDeviceGetDefaultMemPool", "cudaDeviceReset", "cudaDeviceSynchronize", "cudaDriverGetVersion",
    "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventDestroy", "cudaEventElapsedTime", "cudaEventQuery",
    "cudaEventRecord", "cudaEventSynchronize", "cudaFree", "cudaFreeAsync", "cudaFreeHost", "cudaGetDevice",
    "cudaGetDeviceCount", "cudaGetDeviceFlags", "cudaGetDeviceProperties", "cudaGetErrorName", "cudaGetErrorString",
    "cudaGetLastError", "cudaGraphAddKernelNode", "cudaGraphAddMemcpyNode", "cudaGraphAddMemsetNode",
    "cudaGraphClone", "cudaGraphCreate", "cudaGraphDestroy", "cudaGraphExecDestroy", "cudaGraphGetNodes",
    "cudaGraphInstantiate", "cudaGraphLaunch", "cudaHostAlloc", "cudaHostGetDevicePointer", "cudaHostRegister",
    "cudaHostUnregister", "cudaMalloc", "cudaMallocAsync", "cudaMallocHost", "cudaMallocManaged", "cudaMemGetInfo",
    "cudaMemPoolGetAttribute", "cudaMemPoolSetAttribute", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyPeer",
    "cudaMemset", "cudaMemsetAsync", "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaPeekAtLastError",
    "cudaRuntimeGetVersion", "cudaSetDevice", "cudaSetDeviceFlags", "cudaStreamBeginCapture", "cudaStreamCreate",
    "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority", "cudaStreamDestroy", "cudaStreamEndCapture",
    "cudaStreamIsCapturing", "cudaStreamQuery", "cudaCreateTextureObject", "cudaDestroyTextureObject",
    "cudaFreeArray", "cudaMalloc3DArray", "cudaMemcpy3D", "cudaStreamSynchronize", "cudaStreamWaitEvent",
    "cudaMallocPitch", "cudaMemcpy2D", "cudaMemcpy2DAsync", "cudaMemset2D", "cudaMemset2DAsync", "cudaLaunchHostFunc",
]

# runtime functions that compute their result without a driver: the real ones serve
_PURE = {"cudaCreateChannelDesc"}


def __getattr__(name: str) -> Any:
    """cuda-python's runtime enums, structs, handle types, constants and ``make_*`` helpers as they are; a runtime
    function not emulated is a stand-in raising NotEmulatedError when called."""
    if name in _PURE:
        return getattr(_real, name)
    return pass_through(_real, "mock_gpu.runtime", name)


def __dir__() -> list[str]:
    """The emulated functions and every non-function name of the real module (see mock_gpu.driver.__dir__)."""
    return sorted(set(__all__) | _PURE | {n for n in dir(_real) if not n.startswith(("_", "cuda")) or
                                          isinstance(getattr(_real, n), type)})
