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

from ._driver.array import (  # noqa: F401
    cuArray3DCreate,
    cuArrayCreate,
    cuArrayDestroy,
    cuMemcpy2D,
    cuMemcpy2DAsync,
    cuMemcpy2DUnaligned,
    cuMemcpy3D,
    cuTexObjectCreate,
    cuTexObjectDestroy,
)
from ._driver.context import (  # noqa: F401
    cuCtxCreate,
    cuCtxDestroy,
    cuCtxDisablePeerAccess,
    cuCtxEnablePeerAccess,
    cuCtxGetCurrent,
    cuCtxGetDevice,
    cuCtxGetFlags,
    cuCtxPopCurrent,
    cuCtxPushCurrent,
    cuCtxSetCurrent,
    cuCtxSynchronize,
    cuDeviceCanAccessPeer,
    cuDevicePrimaryCtxGetState,
    cuDevicePrimaryCtxRelease,
    cuDevicePrimaryCtxReset,
    cuDevicePrimaryCtxRetain,
    cuDevicePrimaryCtxSetFlags,
)
from ._driver.coredump import (  # noqa: F401
    cuCoredumpGetAttributeGlobal,
    cuCoredumpSetAttributeGlobal,
)
from ._driver.device import (  # noqa: F401
    cuDeviceComputeCapability,
    cuDeviceGet,
    cuDeviceGetAttribute,
    cuDeviceGetCount,
    cuDeviceGetName,
    cuDeviceGetPCIBusId,
    cuDeviceGetUuid,
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
    cuGraphClone,
    cuGraphCreate,
    cuGraphDestroy,
    cuGraphExecDestroy,
    cuGraphExecKernelNodeSetParams,
    cuGraphExecMemcpyNodeSetParams,
    cuGraphExecMemsetNodeSetParams,
    cuGraphGetEdges,
    cuGraphGetNodes,
    cuGraphGetRootNodes,
    cuGraphInstantiate,
    cuGraphInstantiateWithParams,
    cuGraphLaunch,
    cuStreamBeginCapture,
    cuStreamEndCapture,
    cuStreamIsCapturing,
)
from ._driver.graph_memory import (  # noqa: F401
    cuDeviceGetGraphMemAttribute,
    cuDeviceGraphMemTrim,
    cuGraphAddMemAllocNode,
    cuGraphAddMemFreeNode,
)
from ._driver.init import (  # noqa: F401
    cuDriverGetVersion,
    cuGetErrorName,
    cuGetErrorString,
    cuInit,
)
from ._driver.launch import (  # noqa: F401
    cuFuncGetAttribute,
    cuFuncGetName,
    cuFuncSetAttribute,
    cuKernelGetName,
    cuLaunchCooperativeKernel,
    cuLaunchKernel,
)
from ._driver.link import (  # noqa: F401
    cuLinkAddData,
    cuLinkAddFile,
    cuLinkComplete,
    cuLinkCreate,
    cuLinkDestroy,
)
from ._driver.mapped import (  # noqa: F401
    cuMemAdvise,
    cuMemAllocManaged,
    cuMemGetAddressRange,
    cuMemHostGetDevicePointer,
    cuMemHostRegister,
    cuMemHostUnregister,
    cuMemPrefetchAsync,
    cuMemRangeGetAttribute,
    cuMemRangeGetAttributes,
    cuPointerGetAttribute,
    cuPointerGetAttributes,
    cuPointerSetAttribute,
)
from ._driver.memory import (  # noqa: F401
    cuMemAlloc,
    cuMemAllocHost,
    cuMemAllocPitch,
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
    cuMemsetD2D8,
    cuMemsetD2D8Async,
    cuMemsetD2D16,
    cuMemsetD2D16Async,
    cuMemsetD2D32,
    cuMemsetD2D32Async,
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
    cuModuleLoad,
    cuModuleLoadData,
    cuModuleLoadDataEx,
    cuModuleUnload,
)
from ._driver.occupancy import cuOccupancyMaxActiveBlocksPerMultiprocessor  # noqa: F401
from ._driver.profiler import (  # noqa: F401
    cuProfilerStart,
    cuProfilerStop,
)
from ._driver.results import pass_through
from ._driver.stream import (  # noqa: F401
    cuLaunchHostFunc,
    cuStreamCreate,
    cuStreamDestroy,
    cuStreamQuery,
    cuStreamSynchronize,
    cuStreamWaitEvent,
)
from ._driver.vmm import (  # noqa: F401
    cuDeviceGetDefaultMemPool,
    cuDeviceGetMemPool,
    cuMemAddressFree,
    cuMemAddressReserve,
    cuMemAllocAsync,
    cuMemAllocFromPoolAsync,
    cuMemCreate,
    cuMemFreeAsync,
    cuMemGetAllocationGranularity,
    cuMemMap,
    cuMemPoolCreate,
    cuMemPoolDestroy,
    cuMemPoolGetAttribute,
    cuMemPoolSetAttribute,
    cuMemRelease,
    cuMemSetAccess,
    cuMemUnmap,
)

__all__ = [
    "CUDA_GRAPH_INSTANTIATE_PARAMS", "CUDA_KERNEL_NODE_PARAMS", "CUDA_MEMCPY3D", "CUDA_MEMSET_NODE_PARAMS",
    "CU_LAUNCH_PARAM_BUFFER_POINTER", "CU_LAUNCH_PARAM_BUFFER_SIZE", "CU_LAUNCH_PARAM_END",
    "CU_MEMHOSTALLOC_DEVICEMAP", "CU_MEMHOSTALLOC_PORTABLE", "CU_MEMHOSTALLOC_WRITECOMBINED", "CU_STREAM_LEGACY",
    "CU_STREAM_PER_THREAD", "CUcontext", "CUctxCreateParams", "CUdevice", "CUdevice_attribute", "CUdeviceptr",
    "CUevent", "CUevent_flags", "CUfunction", "CUfunction_attribute", "CUgraph", "CUgraphEdgeData", "CUgraphExec",
    "CUgraphInstantiate_flags", "CUgraphNode", "CUjit_option", "CUmemorytype", "CUmodule", "CUresult", "CUstream",
    "CUstreamCaptureMode", "CUstreamCaptureStatus", "CUstream_flags", "cuArray3DCreate", "cuArrayCreate", "cuMemcpy3D",
    "cuDeviceGetGraphMemAttribute", "cuDeviceGraphMemTrim", "cuLaunchCooperativeKernel",
    "cuOccupancyMaxActiveBlocksPerMultiprocessor", "cuGraphAddMemAllocNode", "cuGraphAddMemFreeNode",
    "cuTexObjectCreate", "cuTexObjectDestroy",
    "cuArrayDestroy", "cuCoredumpGetAttributeGlobal", "cuCoredumpSetAttributeGlobal", "cuCtxCreate", "cuCtxDestroy",
    "cuCtxDisablePeerAccess", "cuCtxEnablePeerAccess", "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetFlags",
    "cuCtxPopCurrent", "cuCtxPushCurrent", "cuCtxSetCurrent", "cuCtxSynchronize", "cuDeviceCanAccessPeer",
    "cuDeviceComputeCapability", "cuDeviceGet", "cuDeviceGetAttribute", "cuDeviceGetCount",
    "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool", "cuDeviceGetName", "cuDeviceGetPCIBusId", "cuDeviceGetUuid",
    "cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxSetFlags", "cuDeviceTotalMem", "cuDriverGetVersion", "cuEventCreate", "cuEventDestroy",
    "cuEventElapsedTime", "cuEventQuery", "cuEventRecord", "cuEventSynchronize", "cuFuncGetAttribute",
    "cuFuncGetName", "cuFuncSetAttribute", "cuGetErrorName", "cuGetErrorString", "cuGraphAddDependencies",
    "cuGraphAddEmptyNode", "cuGraphAddKernelNode", "cuGraphAddMemcpyNode", "cuGraphAddMemsetNode", "cuGraphClone",
    "cuGraphCreate", "cuGraphDestroy", "cuGraphExecDestroy", "cuGraphExecKernelNodeSetParams",
    "cuGraphExecMemcpyNodeSetParams", "cuGraphExecMemsetNodeSetParams", "cuGraphGetEdges", "cuGraphGetNodes",
    "cuGraphGetRootNodes", "cuGraphInstantiate", "cuGraphInstantiateWithParams", "cuGraphLaunch", "cuInit",
    "cuKernelGetName", "cuLaunchKernel", "cuLinkAddData", "cuLinkAddFile", "cuLinkComplete", "cuLinkCreate",
    "cuLinkDestroy", "cuMemAddressFree", "cuMemAddressReserve", "cuMemAdvise", "cuMemAlloc", "cuMemAllocAsync",
    "cuMemAllocFromPoolAsync", "cuMemAllocHost", "cuMemAllocManaged", "cuMemCreate", "cuMemFree", "cuMemFreeAsync",
    "cuMemFreeHost", "cuMemGetAllocationGranularity", "cuMemGetInfo", "cuMemHostAlloc", "cuMemHostGetDevicePointer",
    "cuMemHostRegister", "cuMemHostUnregister", "cuMemMap", "cuMemPoolCreate", "cuMemPoolDestroy",
    "cuMemPoolGetAttribute", "cuMemPoolSetAttribute", "cuMemPrefetchAsync", "cuMemRangeGetAttribute",
    "cuMemRangeGetAttributes", "cuMemRelease", "cuMemSetAccess", "cuMemUnmap", "cuMemcpy", "cuMemcpyAsync",
    "cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuMemcpyDtoH", "cuMemcpyDtoHAsync", "cuMemcpyHtoD", "cuMemcpyHtoDAsync",
    "cuMemcpyPeer", "cuMemcpyPeerAsync", "cuMemsetD16", "cuMemsetD16Async", "cuMemsetD32", "cuMemsetD32Async",
    "cuMemsetD8", "cuMemsetD8Async", "cuModuleGetFunction", "cuModuleGetGlobal", "cuModuleLoad", "cuModuleLoadData",
    "cuModuleLoadDataEx", "cuModuleUnload", "cuPointerGetAttribute", "cuPointerGetAttributes",
    "cuPointerSetAttribute", "cuProfilerStart", "cuProfilerStop", "cuStreamBeginCapture", "cuStreamCreate",
    "cuStreamDestroy", "cuStreamEndCapture", "cuStreamIsCapturing", "cuStreamQuery", "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuMemcpy2D", "cuMemcpy2DAsync", "cuMemcpy2DUnaligned", "cuMemAllocPitch", "cuMemsetD2D8", "cuMemsetD2D16",
    "cuMemsetD2D32", "cuMemsetD2D8Async", "cuMemsetD2D16Async", "cuMemsetD2D32Async", "cuMemGetAddressRange", "cuLaunchHostFunc",
]


def __getattr__(name: str) -> Any:
    """cuda-python's other enums, structs, types and constants (``CUjit_option``, ``cuuint32_t``...) as they are; a
    driver function the emulator does not implement is a stand-in raising NotEmulatedError when called."""
    return pass_through(_real, "mock_gpu.driver", name)


def __dir__() -> list[str]:
    """The emulated functions and every non-function name of the real module: probing for an API by name (``name in
    dir(driver)``) finds what the emulator implements."""
    return sorted(set(__all__) | {n for n in dir(_real) if not n.startswith(("_", "cu")) or
                                  isinstance(getattr(_real, n), type)})
