"""Graphs and stream capture of the emulated runtime (CUDA runtime API 6.30 "Graph Management", 6.4 for
cudaStreamBeginCapture/EndCapture): the driver emulator's graphs with the runtime's handle types and parameter
structs (cudaMemcpy3DParms, cudaMemsetParams, cudaKernelNodeParams) turned into the driver's."""

from __future__ import annotations

from typing import Any

from cuda.bindings.runtime import cudaGraph_t, cudaGraphExec_t, cudaGraphNode_t, cudaMemcpyKind, cudaStreamCaptureStatus

from .. import driver as cu
from .state import check, ensure_context, fail, runtime_api

_M = cu.CUmemorytype
_K = cudaMemcpyKind
_ENDS = {  # kind -> (source memory type, destination memory type)
    int(_K.cudaMemcpyHostToHost): (_M.CU_MEMORYTYPE_HOST, _M.CU_MEMORYTYPE_HOST),
    int(_K.cudaMemcpyHostToDevice): (_M.CU_MEMORYTYPE_HOST, _M.CU_MEMORYTYPE_DEVICE),
    int(_K.cudaMemcpyDeviceToHost): (_M.CU_MEMORYTYPE_DEVICE, _M.CU_MEMORYTYPE_HOST),
    int(_K.cudaMemcpyDeviceToDevice): (_M.CU_MEMORYTYPE_DEVICE, _M.CU_MEMORYTYPE_DEVICE),
    int(_K.cudaMemcpyDefault): (_M.CU_MEMORYTYPE_UNIFIED, _M.CU_MEMORYTYPE_UNIFIED),
}


def _nodes(dependencies: Any) -> list[Any]:
    return [cu.CUgraphNode(int(node)) for node in (dependencies or ())]


def _memcpy3d(p: Any) -> Any:
    """The driver's CUDA_MEMCPY3D for a linear cudaMemcpy3DParms (no arrays; extent.width in bytes)."""
    if int(p.srcArray) or int(p.dstArray):
        raise fail("cudaErrorNotSupported")
    src_type, dst_type = _ENDS[int(p.kind)]
    c = cu.CUDA_MEMCPY3D()
    c.srcMemoryType, c.dstMemoryType = src_type, dst_type
    c.srcXInBytes, c.dstXInBytes = p.srcPos.x, p.dstPos.x
    c.srcY, c.srcZ, c.dstY, c.dstZ = p.srcPos.y, p.srcPos.z, p.dstPos.y, p.dstPos.z
    if src_type == _M.CU_MEMORYTYPE_HOST:
        c.srcHost = p.srcPtr.ptr
    else:
        c.srcDevice = p.srcPtr.ptr
    if dst_type == _M.CU_MEMORYTYPE_HOST:
        c.dstHost = p.dstPtr.ptr
    else:
        c.dstDevice = p.dstPtr.ptr
    c.srcPitch, c.dstPitch = p.srcPtr.pitch, p.dstPtr.pitch
    c.WidthInBytes, c.Height, c.Depth = p.extent.width, p.extent.height, p.extent.depth
    return c


@runtime_api(1)
def cudaGraphCreate(flags: Any) -> tuple:
    """cudaGraphCreate(flags) -> (cudaError_t, cudaGraph_t)."""
    ensure_context()
    return (cudaGraph_t(int(check(cu.cuGraphCreate(int(flags))))),)


@runtime_api(1)
def cudaGraphAddMemcpyNode(graph: Any, pDependencies: Any, numDependencies: Any, pCopyParams: Any) -> tuple:  # noqa: N803
    """cudaGraphAddMemcpyNode(graph, pDependencies, numDependencies, pCopyParams) -> (cudaError_t, cudaGraphNode_t):
    a linear copy (cudaMemcpy3DParms without arrays, height and depth 1)."""
    ensure_context()
    ctx = check(cu.cuCtxGetCurrent())
    node = check(cu.cuGraphAddMemcpyNode(cu.CUgraph(int(graph)), _nodes(pDependencies), numDependencies,
                                         _memcpy3d(pCopyParams), ctx))
    return (cudaGraphNode_t(int(node)),)


@runtime_api(1)
def cudaGraphAddMemsetNode(graph: Any, pDependencies: Any, numDependencies: Any, pMemsetParams: Any) -> tuple:  # noqa: N803
    """cudaGraphAddMemsetNode(graph, pDependencies, numDependencies, pMemsetParams) -> (cudaError_t,
    cudaGraphNode_t) (cudaMemsetParams has the fields of the driver's CUDA_MEMSET_NODE_PARAMS)."""
    ensure_context()
    ctx = check(cu.cuCtxGetCurrent())
    node = check(cu.cuGraphAddMemsetNode(cu.CUgraph(int(graph)), _nodes(pDependencies), numDependencies,
                                         pMemsetParams, ctx))
    return (cudaGraphNode_t(int(node)),)


@runtime_api(1)
def cudaGraphAddKernelNode(graph: Any, pDependencies: Any, numDependencies: Any, pNodeParams: Any) -> tuple:  # noqa: N803
    """cudaGraphAddKernelNode(graph, pDependencies, numDependencies, pNodeParams) -> (cudaError_t, cudaGraphNode_t);
    ``pNodeParams.func`` is a driver CUfunction (cuModuleGetFunction) or its address."""
    ensure_context()
    p = pNodeParams
    params = cu.CUDA_KERNEL_NODE_PARAMS()
    params.func = cu.CUfunction(int(p.func))
    params.gridDimX, params.gridDimY, params.gridDimZ = p.gridDim.x, p.gridDim.y, p.gridDim.z
    params.blockDimX, params.blockDimY, params.blockDimZ = p.blockDim.x, p.blockDim.y, p.blockDim.z
    params.sharedMemBytes = p.sharedMemBytes
    params.kernelParams = p.kernelParams
    node = check(cu.cuGraphAddKernelNode(cu.CUgraph(int(graph)), _nodes(pDependencies), numDependencies, params))
    return (cudaGraphNode_t(int(node)),)


@runtime_api(2)
def cudaGraphGetNodes(graph: Any, numNodes: Any = 0) -> tuple:  # noqa: N803
    """cudaGraphGetNodes(graph, numNodes=0) -> (cudaError_t, [cudaGraphNode_t], int)."""
    nodes, count = check(cu.cuGraphGetNodes(cu.CUgraph(int(graph)), numNodes))
    return ([cudaGraphNode_t(int(n)) for n in nodes], count)


@runtime_api(1)
def cudaGraphInstantiate(graph: Any, flags: Any = 0) -> tuple:
    """cudaGraphInstantiate(graph, flags) -> (cudaError_t, cudaGraphExec_t)."""
    return (cudaGraphExec_t(int(check(cu.cuGraphInstantiate(cu.CUgraph(int(graph)), int(flags))))),)


@runtime_api(1)
def cudaGraphClone(originalGraph: Any) -> tuple:  # noqa: N803
    """cudaGraphClone(originalGraph) -> (cudaError_t, cudaGraph_t)."""
    return (cudaGraph_t(int(check(cu.cuGraphClone(cu.CUgraph(int(originalGraph)))))),)


@runtime_api(0)
def cudaGraphLaunch(graphExec: Any, stream: Any) -> tuple:  # noqa: N803
    """cudaGraphLaunch(graphExec, stream)."""
    ensure_context()
    check(cu.cuGraphLaunch(cu.CUgraphExec(int(graphExec)), cu.CUstream(int(stream or 0))))
    return ()


@runtime_api(0)
def cudaGraphExecDestroy(graphExec: Any) -> tuple:  # noqa: N803
    """cudaGraphExecDestroy(graphExec)."""
    check(cu.cuGraphExecDestroy(cu.CUgraphExec(int(graphExec))))
    return ()


@runtime_api(0)
def cudaGraphDestroy(graph: Any) -> tuple:
    """cudaGraphDestroy(graph)."""
    check(cu.cuGraphDestroy(cu.CUgraph(int(graph))))
    return ()


@runtime_api(0)
def cudaStreamBeginCapture(stream: Any, mode: Any) -> tuple:
    """cudaStreamBeginCapture(stream, mode)."""
    ensure_context()
    check(cu.cuStreamBeginCapture(cu.CUstream(int(stream or 0)), cu.CUstreamCaptureMode(int(mode))))
    return ()


@runtime_api(1)
def cudaStreamEndCapture(stream: Any) -> tuple:
    """cudaStreamEndCapture(stream) -> (cudaError_t, cudaGraph_t)."""
    ensure_context()
    return (cudaGraph_t(int(check(cu.cuStreamEndCapture(cu.CUstream(int(stream or 0)))))),)


@runtime_api(1)
def cudaStreamIsCapturing(stream: Any) -> tuple:
    """cudaStreamIsCapturing(stream) -> (cudaError_t, cudaStreamCaptureStatus)."""
    ensure_context()
    status = check(cu.cuStreamIsCapturing(cu.CUstream(int(stream or 0))))
    return (cudaStreamCaptureStatus(int(status)),)
