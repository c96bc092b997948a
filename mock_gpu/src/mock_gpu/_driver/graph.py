"""CUDA graphs and stream capture (CUDA driver API 6.24 "Graph Management", 6.18 "Stream Management" for
cuStreamBeginCapture/EndCapture).

Nodes: kernels, 1-D memcpys, 1-D/2-D memsets and empty nodes, with dependencies given when a node is added or later
(cuGraphAddDependencies). Instantiation orders the nodes topologically (insertion order among independent nodes); a
launched graph is one piece of stream work that runs its nodes in that order. Node parameters are validated and
copied when a node is added or updated, like the driver, so later changes to the caller's buffers do not leak in;
host memory of memcpy nodes is read and written when the graph runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cuda.bindings.driver import (
    CUgraph,
    CUgraphEdgeData,
    CUgraphExec,
    CUgraphInstantiate_flags,
    CUgraphInstantiateResult,
    CUgraphNode,
    CUmemorytype,
    CUstreamCaptureMode,
    CUstreamCaptureStatus,
)

from .graph_pool import claim_for_launch, release_unheld
from .handles import Capture, Graph, GraphExec, GraphNode, Operation, handle_value
from .launch import KernelLaunch, prepare_launch
from .marshal import byte_count, enum_field
from .memory import Copy, Fill, copy_op, fill_op
from .results import error
from .stream import Marker
from .system import api, resolve_stream, system
from .work import enqueue

_HOST = int(CUmemorytype.CU_MEMORYTYPE_HOST)
_DEVICE = int(CUmemorytype.CU_MEMORYTYPE_DEVICE)
_UNIFIED = int(CUmemorytype.CU_MEMORYTYPE_UNIFIED)
_CAPTURE_MODES = {int(m) for m in CUstreamCaptureMode}


class GraphRun:
    """One launch of an executable graph: its node operations, snapshotted at cuGraphLaunch, run in order."""

    def __init__(self, exec_: GraphExec) -> None:
        self.handle = exec_.handle
        self.ops = tuple(exec_.ops.values())

    def run(self) -> None:
        for op in self.ops:
            op.run()

    def describe(self) -> str:
        return f"graph {self.handle:#x} ({len(self.ops)} nodes)"


@api(1)
def cuGraphCreate(flags: int) -> tuple:
    """cuGraphCreate(flags) -> (CUresult, CUgraph): an empty graph; ``flags`` must be 0."""
    if flags != 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuGraphCreate flags must be 0, got {flags}")
    sys_ = system()
    return (CUgraph(sys_.register(Graph(sys_.new_handle())).handle),)


def _nodes(graph: Graph, handles: Sequence[Any] | None, count: int, what: str) -> list[GraphNode]:
    """The nodes of ``graph`` behind ``handles`` (``count`` of them); CUDA_ERROR_INVALID_VALUE otherwise."""
    given = list(handles or ())
    if len(given) != count:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what}: the count is {count} but {len(given)} nodes were given")
    members = {n.handle: n for n in graph.nodes}
    found = [members.get(handle_value(h)) for h in given]
    if any(n is None for n in found):
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what}: a node is not a node of this graph")
    return found  # type: ignore[return-value]


def add_node(hGraph: Any, dependencies: Any, numDependencies: Any, op: Operation) -> tuple:  # noqa: N803
    """Add a node running ``op`` after ``dependencies`` to graph ``hGraph``; returns (CUgraphNode,)."""
    sys_ = system()
    graph = sys_.lookup(hGraph, Graph, "graph")
    deps = _nodes(graph, dependencies, byte_count(numDependencies, "numDependencies"), "dependencies")
    return (CUgraphNode(graph.add(sys_, op, deps).handle),)


def _kernel_launch(params: Any) -> KernelLaunch:
    if params is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "nodeParams is None")
    grid = (params.gridDimX, params.gridDimY, params.gridDimZ)
    block = (params.blockDimX, params.blockDimY, params.blockDimZ)
    return prepare_launch(params.func, grid, block, params.sharedMemBytes, params.kernelParams, params.extra or None)


@api(1)
def cuGraphAddKernelNode(hGraph: Any, dependencies: Any, numDependencies: int, nodeParams: Any) -> tuple:  # noqa: N803
    """cuGraphAddKernelNode(hGraph, dependencies, numDependencies, nodeParams) -> (CUresult, CUgraphNode).

    ``nodeParams``: a CUDA_KERNEL_NODE_PARAMS (func, grid/block dims, sharedMemBytes of dynamic shared memory,
    kernelParams or extra); validated and packed now, as cuLaunchKernel would (CUDA_ERROR_INVALID_VALUE on a
    mismatch).
    """
    return add_node(hGraph, dependencies, numDependencies, _kernel_launch(nodeParams))


def _memcpy_end(params: Any, side: str) -> tuple[Any, bool]:
    kind = enum_field(params, f"{side}MemoryType")
    if kind == _HOST:
        return getattr(params, f"{side}Host"), False
    if kind in (_DEVICE, _UNIFIED):
        return getattr(params, f"{side}Device"), True
    raise error("CUDA_ERROR_NOT_SUPPORTED", f"{side}MemoryType {kind} (arrays) is not emulated in graph memcpy nodes")


def _memcpy(copyParams: Any) -> Copy:  # noqa: N803
    if copyParams is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "copyParams is None")
    p = copyParams
    if max(p.Height, 1) != 1 or max(p.Depth, 1) != 1 or p.srcY or p.srcZ or p.dstY or p.dstZ:
        raise error("CUDA_ERROR_NOT_SUPPORTED", "only 1-D graph memcpy nodes are emulated (Height = Depth = 1)")
    (dst, dst_dev), (src, src_dev) = _memcpy_end(p, "dst"), _memcpy_end(p, "src")
    op, _ = copy_op(handle_value(dst) + p.dstXInBytes, dst_dev, handle_value(src) + p.srcXInBytes, src_dev,
                    p.WidthInBytes, stage_pageable=False)
    return op


@api(1)
def cuGraphAddMemcpyNode(hGraph: Any, dependencies: Any, numDependencies: int, copyParams: Any,  # noqa: N803
                         ctx: Any) -> tuple:
    """cuGraphAddMemcpyNode(hGraph, dependencies, numDependencies, copyParams, ctx) -> (CUresult, CUgraphNode).

    Only linear 1-D copies are emulated: ``copyParams`` (CUDA_MEMCPY3D) with host/device/unified memory types,
    Height and Depth of 0 or 1 and no Y/Z offsets; others are CUDA_ERROR_NOT_SUPPORTED.
    """
    return add_node(hGraph, dependencies, numDependencies, _memcpy(copyParams))


def _memset(memsetParams: Any) -> Fill:  # noqa: N803
    if memsetParams is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "memsetParams is None")
    p = memsetParams
    if int(p.elementSize) not in (1, 2, 4):
        raise error("CUDA_ERROR_INVALID_VALUE", f"memset elementSize must be 1, 2 or 4, got {int(p.elementSize)}")
    rows = max(int(p.height), 1)
    if rows > 1 and int(p.pitch) < int(p.width) * int(p.elementSize):
        raise error("CUDA_ERROR_INVALID_VALUE", f"memset pitch {int(p.pitch)} is smaller than a row of "
                    f"{int(p.width)} x {int(p.elementSize)} bytes")
    return fill_op(p.dst, int(p.value), int(p.width), int(p.elementSize), rows=rows, pitch=int(p.pitch))


@api(1)
def cuGraphAddMemsetNode(hGraph: Any, dependencies: Any, numDependencies: int, memsetParams: Any,  # noqa: N803
                         ctx: Any) -> tuple:
    """cuGraphAddMemsetNode(hGraph, dependencies, numDependencies, memsetParams, ctx) -> (CUresult, CUgraphNode).

    ``memsetParams`` (CUDA_MEMSET_NODE_PARAMS): ``height`` rows of ``width`` elements of ``elementSize`` bytes (1, 2
    or 4) set to ``value``, rows ``pitch`` bytes apart, from device pointer ``dst``.
    """
    return add_node(hGraph, dependencies, numDependencies, _memset(memsetParams))


@api(1)
def cuGraphAddEmptyNode(hGraph: Any, dependencies: Any, numDependencies: int) -> tuple:  # noqa: N803
    """cuGraphAddEmptyNode(hGraph, dependencies, numDependencies) -> (CUresult, CUgraphNode): a node that only
    orders others."""
    return add_node(hGraph, dependencies, numDependencies, Marker("empty graph node"))


@api(0)
def cuGraphAddDependencies(hGraph: Any, from_: Any, to: Any, *rest: Any) -> tuple:  # noqa: N803
    """cuGraphAddDependencies(hGraph, from_, to, numDependencies) (cuda-python 12) or (hGraph, from_, to, edgeData,
    numDependencies) (cuda-python 13): node ``to[i]`` depends on ``from_[i]``. Edge data other than the default
    (None or all-zero CUgraphEdgeData) is CUDA_ERROR_NOT_SUPPORTED."""
    if len(rest) not in (1, 2):
        raise TypeError(f"cuGraphAddDependencies takes 4 or 5 arguments, got {3 + len(rest)}")
    edges = rest[0] if len(rest) == 2 else None
    if any(int(e.type) or int(e.from_port) or int(e.to_port) for e in (edges or ())):
        raise error("CUDA_ERROR_NOT_SUPPORTED", "graph edge data (ports, programmatic edges) is not emulated")
    graph = system().lookup(hGraph, Graph, "graph")
    count = byte_count(rest[-1], "numDependencies")
    sources, targets = _nodes(graph, from_, count, "from_"), _nodes(graph, to, count, "to")
    for source, target in zip(sources, targets, strict=True):
        if source is target:
            raise error("CUDA_ERROR_INVALID_VALUE", "a node cannot depend on itself")
        if source in target.deps:
            raise error("CUDA_ERROR_INVALID_VALUE", f"node {target.handle:#x} already depends on {source.handle:#x}")
        target.deps.append(source)
    return ()


def _topological(graph: Graph) -> list[GraphNode]:
    """The nodes in dependency order, insertion order among ready nodes; CUDA_ERROR_INVALID_VALUE for a cycle."""
    order: list[GraphNode] = []
    placed: set[int] = set()
    remaining = list(graph.nodes)
    while remaining:
        ready = [n for n in remaining if all(d.handle in placed for d in n.deps)]
        if not ready:
            raise error("CUDA_ERROR_INVALID_VALUE", f"the graph's dependencies form a cycle through {len(remaining)} "
                        "nodes; it cannot be instantiated")
        order.extend(ready)
        placed.update(n.handle for n in ready)
        remaining = [n for n in remaining if n.handle not in placed]
    return order


def _instantiate(hGraph: Any, flags: Any) -> GraphExec:  # noqa: N803
    sys_ = system()
    graph = sys_.lookup(hGraph, Graph, "graph")
    if int(flags) & ~0xF:
        raise error("CUDA_ERROR_INVALID_VALUE", f"graph instantiation flags {int(flags):#x} have unknown bits")
    ops = {n.handle: n.op for n in _topological(graph)}
    auto_free = bool(int(flags) & CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
    return sys_.register(GraphExec(sys_.new_handle(), ops, auto_free))


@api(1)
def cuGraphInstantiate(hGraph: Any, flags: int) -> tuple:  # noqa: N803
    """cuGraphInstantiate(hGraph, flags) -> (CUresult, CUgraphExec) (the cuda-python 12/13 form, i.e.
    cuGraphInstantiateWithFlags): snapshot the graph's nodes; later changes to the graph do not affect it. Flags
    (CUgraphInstantiate_flags) are accepted; with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH a launch frees
    what the previous launch allocated and nothing freed; upload has nothing to do in the emulator."""
    return (CUgraphExec(_instantiate(hGraph, flags).handle),)


@api(1)
def cuGraphInstantiateWithParams(hGraph: Any, instantiateParams: Any) -> tuple:  # noqa: N803
    """cuGraphInstantiateWithParams(hGraph, instantiateParams) -> (CUresult, CUgraphExec): as cuGraphInstantiate
    with ``instantiateParams.flags``; ``result_out`` is set to CUDA_GRAPH_INSTANTIATE_SUCCESS."""
    flags = 0 if instantiateParams is None else instantiateParams.flags
    exec_ = _instantiate(hGraph, flags)
    if instantiateParams is not None:
        instantiateParams.result_out = CUgraphInstantiateResult.CUDA_GRAPH_INSTANTIATE_SUCCESS
    return (CUgraphExec(exec_.handle),)


@api(0)
def cuGraphLaunch(hGraphExec: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuGraphLaunch(hGraphExec, hStream): enqueue the executable graph on ``hStream`` as it is now (later exec
    updates apply to later launches); faults as for cuLaunchKernel."""
    exec_ = system().lookup(hGraphExec, GraphExec, "graph exec")
    stream = resolve_stream(hStream)
    claim_for_launch(exec_.ops.values(), exec_.auto_free)
    enqueue(stream, GraphRun(exec_))
    return ()


def _set_node(hGraphExec: Any, hNode: Any, kind: type, op: Operation) -> tuple:  # noqa: N803
    exec_ = system().lookup(hGraphExec, GraphExec, "graph exec")
    node = handle_value(hNode)
    if not isinstance(exec_.ops.get(node), kind):
        raise error("CUDA_ERROR_INVALID_VALUE", f"node {node:#x} is not a {kind.__name__} node of this executable graph")
    exec_.ops[node] = op
    return ()


@api(0)
def cuGraphExecKernelNodeSetParams(hGraphExec: Any, hNode: Any, nodeParams: Any) -> tuple:  # noqa: N803
    """cuGraphExecKernelNodeSetParams(hGraphExec, hNode, nodeParams): replace one kernel node's launch in the
    executable graph (validated as cuGraphAddKernelNode); CUDA_ERROR_INVALID_VALUE for a non-kernel node."""
    return _set_node(hGraphExec, hNode, KernelLaunch, _kernel_launch(nodeParams))


@api(0)
def cuGraphExecMemcpyNodeSetParams(hGraphExec: Any, hNode: Any, copyParams: Any, ctx: Any) -> tuple:  # noqa: N803
    """cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, copyParams, ctx): replace one memcpy node's copy."""
    return _set_node(hGraphExec, hNode, Copy, _memcpy(copyParams))


@api(0)
def cuGraphExecMemsetNodeSetParams(hGraphExec: Any, hNode: Any, memsetParams: Any, ctx: Any) -> tuple:  # noqa: N803
    """cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, memsetParams, ctx): replace one memset node's fill."""
    return _set_node(hGraphExec, hNode, Fill, _memset(memsetParams))


@api(0)
def cuGraphExecDestroy(hGraphExec: Any) -> tuple:  # noqa: N803
    """cuGraphExecDestroy(hGraphExec): destroy an executable graph (launches already enqueued still run); graph
    memory nothing holds any more is released."""
    sys_ = system()
    del sys_.objects[sys_.lookup(hGraphExec, GraphExec, "graph exec").handle]
    release_unheld(sys_)
    return ()


@api(0)
def cuGraphDestroy(hGraph: Any) -> tuple:  # noqa: N803
    """cuGraphDestroy(hGraph): destroy a graph and its nodes (executable graphs made from it stay valid); graph
    memory nothing holds any more is released."""
    sys_ = system()
    graph = sys_.lookup(hGraph, Graph, "graph")
    for node in graph.nodes:
        del sys_.objects[node.handle]
    del sys_.objects[graph.handle]
    release_unheld(sys_)
    return ()


@api(0)
def cuStreamBeginCapture(hStream: Any, mode: Any) -> tuple:  # noqa: N803
    """cuStreamBeginCapture(hStream, mode): later kernels, copies and memsets enqueued on ``hStream`` become nodes
    of a new graph (in a chain) instead of running. The legacy default stream cannot capture
    (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); the capture mode is accepted, not enforced."""
    stream = resolve_stream(hStream)
    if int(mode) not in _CAPTURE_MODES:
        raise error("CUDA_ERROR_INVALID_VALUE", f"unknown capture mode {mode!r}")
    if stream.legacy:
        raise error("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "the legacy default stream cannot be captured; capture "
                    "a stream from cuStreamCreate")
    if stream.capture is not None:
        raise error("CUDA_ERROR_ILLEGAL_STATE", "the stream is already capturing")
    sys_ = system()
    stream.capture = Capture(sys_.register(Graph(sys_.new_handle())))
    return ()


@api(1)
def cuStreamEndCapture(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamEndCapture(hStream) -> (CUresult, CUgraph): the captured graph. CUDA_ERROR_ILLEGAL_STATE if the
    stream is not capturing, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED if an unsupported call broke the capture."""
    stream = resolve_stream(hStream)
    capture = stream.capture
    if capture is None or capture.origin is not None:
        raise error("CUDA_ERROR_ILLEGAL_STATE", "the stream did not begin a capture (call cuStreamBeginCapture first)")
    stream.capture = None
    for member in capture.members:
        member.capture = None
    if capture.invalid is not None:
        sys_ = system()
        for node in capture.graph.nodes:
            del sys_.objects[node.handle]
        del sys_.objects[capture.graph.handle]
        raise error("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", f"the capture was invalidated: {capture.invalid}")
    return (CUgraph(capture.graph.handle),)


@api(1)
def cuStreamIsCapturing(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamIsCapturing(hStream) -> (CUresult, CUstreamCaptureStatus)."""
    capture = resolve_stream(hStream).capture
    if capture is None:
        return (CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE,)
    if capture.invalid is not None:
        return (CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_INVALIDATED,)
    return (CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE,)


@api(2)
def cuGraphGetNodes(hGraph: Any, numNodes: Any = 0) -> tuple:  # noqa: N803
    """cuGraphGetNodes(hGraph, numNodes=0) -> (CUresult, [CUgraphNode], int): with ``numNodes`` 0 only the count,
    else up to ``numNodes`` nodes in creation order and how many were returned (CUDA driver API, cuGraphGetNodes)."""
    graph = system().lookup(hGraph, Graph, "graph")
    wanted = byte_count(numNodes, "numNodes")
    if wanted == 0:
        return ([], len(graph.nodes))
    nodes = [CUgraphNode(node.handle) for node in graph.nodes[:wanted]]
    return (nodes, len(nodes))


@api(2)
def cuGraphGetRootNodes(hGraph: Any, numRootNodes: Any = 0) -> tuple:  # noqa: N803
    """cuGraphGetRootNodes(hGraph, numRootNodes=0) -> (CUresult, [CUgraphNode], int): the nodes without
    dependencies, as cuGraphGetNodes returns nodes."""
    graph = system().lookup(hGraph, Graph, "graph")
    roots = [node for node in graph.nodes if not node.deps]
    wanted = byte_count(numRootNodes, "numRootNodes")
    if wanted == 0:
        return ([], len(roots))
    chosen = [CUgraphNode(node.handle) for node in roots[:wanted]]
    return (chosen, len(chosen))


@api(4)
def cuGraphGetEdges(hGraph: Any, numEdges: Any = 0) -> tuple:  # noqa: N803
    """cuGraphGetEdges(hGraph, numEdges=0) -> (CUresult, [from], [to], [CUgraphEdgeData], int): the dependency
    edges (from -> to), each with default edge data."""
    graph = system().lookup(hGraph, Graph, "graph")
    edges = [(dep, node) for node in graph.nodes for dep in node.deps]
    wanted = byte_count(numEdges, "numEdges")
    if wanted == 0:
        return ([], [], [], len(edges))
    chosen = edges[:wanted]
    return ([CUgraphNode(a.handle) for a, _ in chosen], [CUgraphNode(b.handle) for _, b in chosen],
            [CUgraphEdgeData() for _ in chosen], len(chosen))


@api(1)
def cuGraphClone(originalGraph: Any) -> tuple:  # noqa: N803
    """cuGraphClone(originalGraph) -> (CUresult, CUgraph): a copy with the same node operations and dependencies."""
    sys_ = system()
    original = sys_.lookup(originalGraph, Graph, "graph")
    clone = sys_.register(Graph(sys_.new_handle()))
    copies: dict[int, GraphNode] = {}
    for node in original.nodes:
        copies[node.handle] = clone.add(sys_, node.op, [copies[d.handle] for d in node.deps])
    return (CUgraph(clone.handle),)
