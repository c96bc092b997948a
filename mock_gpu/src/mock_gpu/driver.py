"""The emulated CUDA driver module: the names and call/return conventions of ``cuda.bindings.driver``.

Each ``cu*`` function returns a tuple whose first item is a ``CUresult`` (cuda-python's own enum) followed by the
call's outputs, ``None`` in their place on failure, e.g. ``err, dptr = cuMemAlloc(1024)``. A backend selects this
module instead of ``cuda.bindings.driver`` (for ``MOCKGPU=1``) and otherwise runs unchanged. The enums, handle
types, structs and constants are cuda-python's own (``mock_gpu.driver.CUresult is cuda.bindings.driver.CUresult``):
the common ones are imported here by name, any other one is looked up in ``cuda.bindings.driver`` on first use. The
implementation lives in the private package ``mock_gpu._driver``, one module per section of the CUDA driver API.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as _real
from cuda.bindings.driver import (  # noqa: F401
    CU_LAUNCH_PARAM_BUFFER_POINTER,
    CU_LAUNCH_PARAM_BUFFER_SIZE,
    CU_LAUNCH_PARAM_END,
    CU_MEMHOSTALLOC_DEVICEMAP,
    CU_MEMHOSTALLOC_PORTABLE,
    CU_MEMHOSTALLOC_WRITECOMBINED,
    CU_STREAM_LEGACY,
    CU_STREAM_PER_THREAD,
    CUDA_GRAPH_INSTANTIATE_PARAMS,
    CUDA_KERNEL_NODE_PARAMS,
    CUDA_MEMCPY3D,
    CUDA_MEMSET_NODE_PARAMS,
    CUcontext,
    CUctxCreateParams,
    CUdevice,
    CUdevice_attribute,
    CUdeviceptr,
    CUevent,
    CUevent_flags,
    CUfunction,
    CUfunction_attribute,
    CUgraph,
    CUgraphEdgeData,
    CUgraphExec,
    CUgraphInstantiate_flags,
    CUgraphNode,
    CUjit_option,
    CUmemorytype,
    CUmodule,
    CUresult,
    CUstream,
    CUstream_flags,
    CUstreamCaptureMode,
    CUstreamCaptureStatus,
)

from ._driver.context import (  # noqa: F401
    cuCtxCreate,
    cuCtxDestroy,
    cuCtxDisablePeerAccess,
    cuCtxEnablePeerAccess,
    cuCtxGetCurrent,
    cuCtxGetDevice,
    cuCtxSetCurrent,
    cuCtxSynchronize,
    cuDeviceCanAccessPeer,
    cuDevicePrimaryCtxRelease,
    cuDevicePrimaryCtxReset,
    cuDevicePrimaryCtxRetain,
)
from ._driver.device import (  # noqa: F401
    cuDeviceComputeCapability,
    cuDeviceGet,
    cuDeviceGetAttribute,
    cuDeviceGetCount,
    cuDeviceGetName,
    cuDeviceTotalMem,
)
from ._driver.event import (  # noqa: F401
    cuEventCreate,
    cuEventDestroy,
    cuEventElapsedTime,
    cuEventQuery,
    cuEventRecord,
    cuEventSynchronize,
)
from ._driver.graph import (  # noqa: F401
    cuGraphAddDependencies,
    cuGraphAddEmptyNode,
    cuGraphAddKernelNode,
    cuGraphAddMemcpyNode,
    cuGraphAddMemsetNode,
    cuGraphCreate,
    cuGraphDestroy,
    cuGraphExecDestroy,
    cuGraphExecKernelNodeSetParams,
    cuGraphExecMemcpyNodeSetParams,
    cuGraphExecMemsetNodeSetParams,
    cuGraphInstantiate,
    cuGraphInstantiateWithParams,
    cuGraphLaunch,
    cuStreamBeginCapture,
    cuStreamEndCapture,
    cuStreamIsCapturing,
)
from ._driver.init import (  # noqa: F401
    cuDriverGetVersion,
    cuGetErrorName,
    cuGetErrorString,
    cuInit,
)
from ._driver.launch import (  # noqa: F401
    cuFuncGetAttribute,
    cuFuncSetAttribute,
    cuLaunchKernel,
)
from ._driver.memory import (  # noqa: F401
    cuMemAlloc,
    cuMemAllocHost,
    cuMemcpy,
    cuMemcpyAsync,
    cuMemcpyDtoD,
    cuMemcpyDtoDAsync,
    cuMemcpyDtoH,
    cuMemcpyDtoHAsync,
    cuMemcpyHtoD,
    cuMemcpyHtoDAsync,
    cuMemcpyPeer,
    cuMemcpyPeerAsync,
    cuMemFree,
    cuMemFreeHost,
    cuMemGetInfo,
    cuMemHostAlloc,
    cuMemsetD8,
    cuMemsetD8Async,
    cuMemsetD16,
    cuMemsetD16Async,
    cuMemsetD32,
    cuMemsetD32Async,
)
from ._driver.module import (  # noqa: F401
    cuModuleGetFunction,
    cuModuleGetGlobal,
    cuModuleLoadData,
    cuModuleLoadDataEx,
    cuModuleUnload,
)
from ._driver.stream import (  # noqa: F401
    cuStreamCreate,
    cuStreamDestroy,
    cuStreamQuery,
    cuStreamSynchronize,
    cuStreamWaitEvent,
)

__all__ = [
    "CUDA_GRAPH_INSTANTIATE_PARAMS", "CUDA_KERNEL_NODE_PARAMS", "CUDA_MEMCPY3D", "CUDA_MEMSET_NODE_PARAMS",
    "CU_LAUNCH_PARAM_BUFFER_POINTER", "CU_LAUNCH_PARAM_BUFFER_SIZE", "CU_LAUNCH_PARAM_END",
    "CU_MEMHOSTALLOC_DEVICEMAP", "CU_MEMHOSTALLOC_PORTABLE", "CU_MEMHOSTALLOC_WRITECOMBINED", "CU_STREAM_LEGACY",
    "CU_STREAM_PER_THREAD", "CUcontext", "CUctxCreateParams", "CUdevice", "CUdevice_attribute", "CUdeviceptr",
    "CUevent", "CUevent_flags", "CUfunction", "CUfunction_attribute", "CUgraph", "CUgraphEdgeData", "CUgraphExec",
    "CUgraphInstantiate_flags", "CUgraphNode", "CUjit_option", "CUmemorytype", "CUmodule", "CUresult", "CUstream",
    "CUstreamCaptureMode", "CUstreamCaptureStatus", "CUstream_flags", "cuCtxCreate", "cuCtxDestroy",
    "cuCtxDisablePeerAccess", "cuCtxEnablePeerAccess", "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxSetCurrent",
    "cuCtxSynchronize", "cuDeviceCanAccessPeer", "cuDeviceComputeCapability", "cuDeviceGet", "cuDeviceGetAttribute",
    "cuDeviceGetCount", "cuDeviceGetName", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
    "cuDevicePrimaryCtxRetain", "cuDeviceTotalMem", "cuDriverGetVersion", "cuEventCreate", "cuEventDestroy",
    "cuEventElapsedTime", "cuEventQuery", "cuEventRecord", "cuEventSynchronize", "cuFuncGetAttribute",
    "cuFuncSetAttribute", "cuGetErrorName", "cuGetErrorString", "cuGraphAddDependencies", "cuGraphAddEmptyNode",
    "cuGraphAddKernelNode", "cuGraphAddMemcpyNode", "cuGraphAddMemsetNode", "cuGraphCreate", "cuGraphDestroy",
    "cuGraphExecDestroy", "cuGraphExecKernelNodeSetParams", "cuGraphExecMemcpyNodeSetParams",
    "cuGraphExecMemsetNodeSetParams", "cuGraphInstantiate", "cuGraphInstantiateWithParams", "cuGraphLaunch", "cuInit",
    "cuLaunchKernel", "cuMemAlloc", "cuMemAllocHost", "cuMemFree", "cuMemFreeHost", "cuMemGetInfo", "cuMemHostAlloc",
    "cuMemcpy", "cuMemcpyAsync", "cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuMemcpyDtoH", "cuMemcpyDtoHAsync",
    "cuMemcpyHtoD", "cuMemcpyHtoDAsync", "cuMemcpyPeer", "cuMemcpyPeerAsync", "cuMemsetD16", "cuMemsetD16Async",
    "cuMemsetD32", "cuMemsetD32Async", "cuMemsetD8", "cuMemsetD8Async", "cuModuleGetFunction", "cuModuleGetGlobal",
    "cuModuleLoadData", "cuModuleLoadDataEx", "cuModuleUnload", "cuStreamBeginCapture", "cuStreamCreate",
    "cuStreamDestroy", "cuStreamEndCapture", "cuStreamIsCapturing", "cuStreamQuery", "cuStreamSynchronize",
    "cuStreamWaitEvent",
]


def __getattr__(name: str) -> Any:
    """cuda-python's other enums, structs and constants (``CUjit_option``, ``CUDA_MEMSET_NODE_PARAMS``...); a driver
    function the emulator does not implement is an AttributeError naming it, never the real (GPU-needing) one."""
    if not name.startswith("cu") and not name.startswith("_") and hasattr(_real, name):
        return getattr(_real, name)
    raise AttributeError(f"module 'mock_gpu.driver' has no attribute {name!r}" +
                         (" (this driver function is not emulated by mock_gpu)" if hasattr(_real, name) else ""))
