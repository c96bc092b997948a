"""The lifetime of graph memory (CUDA driver API 6.24 "Graph Management", CUDA C++ Programming Guide "Graph Memory
Nodes"): an allocation node reserves its address for as long as a graph or an executable graph holds the node; a
launch hands the memory to the program until a free node, cuMemFree or cuMemFreeAsync gives it back to the graph's
pool. Memory that no graph holds and the program does not own is released: it no longer counts as used
(cuMemGetInfo) nor as graph memory (cuDeviceGetGraphMemAttribute)."""

from __future__ import annotations

from collections.abc import Iterable

from ..address_space import AddressSpace
from .handles import Device, Graph, GraphExec, Operation, System
from .results import error
from .work import synchronize_system


class GraphAllocation:
    """The operation of an allocation node: ``size`` bytes at ``ptr`` on ``device``. The address is reserved while a
    graph holds the node; the memory is accessible from the moment a launch runs the node until a free runs.
    ``owned``: a launch was enqueued that hands the memory to the program and nothing has freed it since (the
    state cuGraphLaunch, cuMemFree and cuMemFreeAsync check when they are called); ``freeing``: a cuMemFreeAsync of
    it has not run yet (the memory is still in use until then)."""

    def __init__(self, ptr: int, size: int, device: Device, space: AddressSpace) -> None:
        self.ptr, self.size, self.device, self.space = ptr, size, device, space
        self.owned = self.freeing = False
        space.suspend(ptr)

    def run(self) -> None:
        self.space.resume(self.ptr)

    def describe(self) -> str:
        return f"graph memory allocation of {self.size} bytes at {self.ptr:#x}"


class GraphFree:
    """The operation of a free node: gives ``allocation`` back to the graph's pool; accesses fault from then on."""

    def __init__(self, allocation: GraphAllocation) -> None:
        self.allocation = allocation

    def run(self) -> None:
        self.allocation.space.suspend(self.allocation.ptr)

    def describe(self) -> str:
        return f"graph memory free of {self.allocation.ptr:#x}"


def claim_for_launch(ops: Iterable[Operation], auto_free: bool) -> None:
    """cuGraphLaunch's checks and bookkeeping for the memory nodes among ``ops``: CUDA_ERROR_INVALID_VALUE (nothing
    changed) if an allocation of an earlier launch is still unfreed and the graph was not instantiated with
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, or if a free node frees memory the program does not own;
    otherwise allocations the graph does not free itself become the program's."""
    ops = list(ops)
    allocated = [op for op in ops if isinstance(op, GraphAllocation)]
    freed = [op.allocation for op in ops if isinstance(op, GraphFree)]
    for allocation in allocated:
        if allocation.owned and not auto_free:
            raise error("CUDA_ERROR_INVALID_VALUE", f"{allocation.describe()} of an earlier launch of this graph is "
                        "still unfreed (free it, or instantiate with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)")
    for allocation in freed:
        if not allocation.owned and not any(allocation is a for a in allocated):
            raise error("CUDA_ERROR_INVALID_VALUE", f"the graph frees {allocation.describe()}, which is not allocated")
    for allocation in allocated:
        allocation.owned = True
    for allocation in freed:
        allocation.owned = False


def disown(sys_: System, ptr: int, call: str) -> GraphAllocation | None:
    """cuMemFree/cuMemFreeAsync of ``ptr``, when called: the graph allocation at ``ptr`` (None for other memory),
    which the program no longer owns; CUDA_ERROR_INVALID_VALUE if the program does not own it (never launched,
    freed in its own graph, or freed already)."""
    allocation = sys_.graph_allocations.get(ptr)
    if allocation is None:
        return None
    if not allocation.owned:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{call}({ptr:#x}): the {allocation.describe()} is not the "
                    "program's (no launch allocated it since it was last freed, or its graph frees it)")
    allocation.owned = False
    return allocation


def give_back(sys_: System, allocation: GraphAllocation, *, synchronize: bool = True) -> None:
    """A free of ``allocation`` by cuMemFree/cuMemFreeAsync reached: its memory returns to its graph's pool (and is
    released if no graph holds it any more; see :func:`release_unheld`)."""
    allocation.freeing = False
    allocation.space.suspend(allocation.ptr)
    release_unheld(sys_, synchronize=synchronize)


def release_unheld(sys_: System, *, synchronize: bool = True) -> None:
    """Release every graph allocation that no graph or executable graph holds and the program does not own; with
    ``synchronize``, after all pending work (which may still use it) ran, as freeing synchronizes."""
    if synchronize and _unheld(sys_):
        synchronize_system(sys_, None)  # pending frees may release some themselves
    for allocation in _unheld(sys_):
        del sys_.graph_allocations[allocation.ptr]
        sys_.allocations.pop(allocation.ptr, None)
        sys_.space.free(allocation.ptr)
        allocation.device.graph_memory -= allocation.size


def _unheld(sys_: System) -> list[GraphAllocation]:
    held = {id(node.op) for obj in sys_.objects.values() if isinstance(obj, Graph) for node in obj.nodes}
    held |= {id(op) for obj in sys_.objects.values() if isinstance(obj, GraphExec) for op in obj.ops.values()}
    return [a for a in sys_.graph_allocations.values() if not (a.owned or a.freeing or id(a) in held)]
