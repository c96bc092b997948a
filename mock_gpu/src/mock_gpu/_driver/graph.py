"""CUDA graphs: kernel and 1-D memcpy nodes, instantiation, launch, exec updates (CUDA driver API 6.24 "Graph
Management").

Nodes are added after their dependencies, so insertion order is a topological order; a launched graph runs its
nodes in that order on the launch stream. A kernel node's parameters are validated and packed when the node is
added (cuGraphAddKernelNode copies them, like the driver), so later changes to the caller's buffers do not leak in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cuda.bindings.driver import CUgraph, CUgraphExec, CUgraphNode, CUmemorytype

from ..errors import error
from .handles import Graph, GraphExec, GraphNode, KernelLaunch, handle_value
from .launch import prepare_launch, run_launch
from .memory import copy_memory
from .system import api, current_ctx, raise_if_sticky, resolve_stream, system

_HOST = int(CUmemorytype.CU_MEMORYTYPE_HOST)
_DEVICE = int(CUmemorytype.CU_MEMORYTYPE_DEVICE)
_UNIFIED = int(CUmemorytype.CU_MEMORYTYPE_UNIFIED)


@dataclass(frozen=True)
class MemcpyOp:
    """A linear copy of ``nbytes`` from ``src`` to ``dst`` (host or device addresses, resolved like cuMemcpy)."""

    dst: int
    src: int
    nbytes: int


@api(1)
def cuGraphCreate(flags: int) -> tuple:
    """cuGraphCreate(flags) -> (CUresult, CUgraph): an empty graph; ``flags`` must be 0."""
    if flags != 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuGraphCreate flags must be 0, got {flags}")
    sys_ = system()
    return (CUgraph(sys_.register(Graph(sys_.new_handle())).handle),)


def _add_node(hGraph: Any, dependencies: Any, numDependencies: int, action: Any) -> tuple:  # noqa: N803
    sys_ = system()
    graph = sys_.lookup(hGraph, Graph, "graph")
    deps = tuple(handle_value(d) for d in (dependencies or ()))
    if len(deps) != numDependencies:
        raise error("CUDA_ERROR_INVALID_VALUE", f"numDependencies={numDependencies} but {len(deps)} were given")
    members = {n.handle for n in graph.nodes}
    if any(d not in members for d in deps):
        raise error("CUDA_ERROR_INVALID_VALUE", "a dependency is not a node of this graph")
    node = sys_.register(GraphNode(sys_.new_handle(), graph, action, deps))
    graph.nodes.append(node)
    return (CUgraphNode(node.handle),)


def _kernel_launch(params: Any) -> KernelLaunch:
    if params is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "nodeParams is None")
    grid = (params.gridDimX, params.gridDimY, params.gridDimZ)
    block = (params.blockDimX, params.blockDimY, params.blockDimZ)
    return prepare_launch(params.func, grid, block, params.sharedMemBytes, params.kernelParams, params.extra or None)


@api(1)
def cuGraphAddKernelNode(hGraph: Any, dependencies: Any, numDependencies: int, nodeParams: Any) -> tuple:  # noqa: N803
    """cuGraphAddKernelNode(hGraph, dependencies, numDependencies, nodeParams) -> (CUresult, CUgraphNode).

    ``nodeParams``: a CUDA_KERNEL_NODE_PARAMS (func, grid/block dims, sharedMemBytes, kernelParams or extra);
    validated and packed now, as cuLaunchKernel would (CUDA_ERROR_INVALID_VALUE on a mismatch).
    """
    return _add_node(hGraph, dependencies, numDependencies, _kernel_launch(nodeParams))


def _memcpy_end(params: Any, side: str) -> int:
    kind = int(getattr(params, f"{side}MemoryType"))
    if kind == _HOST:
        return handle_value(getattr(params, f"{side}Host"))
    if kind in (_DEVICE, _UNIFIED):
        return handle_value(getattr(params, f"{side}Device"))
    raise error("CUDA_ERROR_NOT_SUPPORTED", f"{side}MemoryType {kind} (arrays) is not emulated in graph memcpy nodes")


@api(1)
def cuGraphAddMemcpyNode(hGraph: Any, dependencies: Any, numDependencies: int, copyParams: Any,  # noqa: N803
                         ctx: Any) -> tuple:
    """cuGraphAddMemcpyNode(hGraph, dependencies, numDependencies, copyParams, ctx) -> (CUresult, CUgraphNode).

    Only linear 1-D copies are emulated: ``copyParams`` (CUDA_MEMCPY3D) with host/device/unified memory types,
    Height and Depth of 0 or 1 and no Y/Z offsets; others are CUDA_ERROR_NOT_SUPPORTED.
    """
    if copyParams is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "copyParams is None")
    p = copyParams
    if max(p.Height, 1) != 1 or max(p.Depth, 1) != 1 or p.srcY or p.srcZ or p.dstY or p.dstZ:
        raise error("CUDA_ERROR_NOT_SUPPORTED", "only 1-D graph memcpy nodes are emulated (Height = Depth = 1)")
    op = MemcpyOp(_memcpy_end(p, "dst") + p.dstXInBytes, _memcpy_end(p, "src") + p.srcXInBytes, p.WidthInBytes)
    return _add_node(hGraph, dependencies, numDependencies, op)


@api(1)
def cuGraphInstantiate(hGraph: Any, flags: int) -> tuple:
    """cuGraphInstantiate(hGraph, flags) -> (CUresult, CUgraphExec): snapshot the graph's nodes for launching.

    Later changes to the graph do not affect the executable graph (CUDA driver API, cuGraphInstantiate).
    """
    sys_ = system()
    graph = sys_.lookup(hGraph, Graph, "graph")
    exec_ = sys_.register(GraphExec(sys_.new_handle(), {n.handle: n.launch for n in graph.nodes}))
    return (CUgraphExec(exec_.handle),)


@api(0)
def cuGraphLaunch(hGraphExec: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuGraphLaunch(hGraphExec, hStream): run every node in dependency order; errors as for cuLaunchKernel."""
    exec_ = system().lookup(hGraphExec, GraphExec, "graph exec")
    resolve_stream(hStream)
    for action in exec_.launches.values():
        if isinstance(action, MemcpyOp):
            raise_if_sticky(current_ctx())
            copy_memory(action.dst, action.src, action.nbytes)
        else:
            run_launch(action)
    return ()


@api(0)
def cuGraphExecKernelNodeSetParams(hGraphExec: Any, hNode: Any, nodeParams: Any) -> tuple:  # noqa: N803
    """cuGraphExecKernelNodeSetParams(hGraphExec, hNode, nodeParams): replace one kernel node's launch in the
    executable graph (same validation as cuGraphAddKernelNode); CUDA_ERROR_INVALID_VALUE for a non-kernel node."""
    sys_ = system()
    exec_ = sys_.lookup(hGraphExec, GraphExec, "graph exec")
    node = handle_value(hNode)
    if not isinstance(exec_.launches.get(node), KernelLaunch):
        raise error("CUDA_ERROR_INVALID_VALUE", f"node {node:#x} is not a kernel node of this executable graph")
    exec_.launches[node] = _kernel_launch(nodeParams)
    return ()


@api(0)
def cuGraphExecDestroy(hGraphExec: Any) -> tuple:  # noqa: N803
    """cuGraphExecDestroy(hGraphExec): destroy an executable graph."""
    sys_ = system()
    del sys_.objects[sys_.lookup(hGraphExec, GraphExec, "graph exec").handle]
    return ()


@api(0)
def cuGraphDestroy(hGraph: Any) -> tuple:  # noqa: N803
    """cuGraphDestroy(hGraph): destroy a graph and its nodes (executable graphs made from it stay valid)."""
    sys_ = system()
    graph = sys_.lookup(hGraph, Graph, "graph")
    for node in graph.nodes:
        del sys_.objects[node.handle]
    del sys_.objects[graph.handle]
    return ()
