"""The lifetime of graph memory (CUDA driver API 6.24 "Graph Management", CUDA C++ Programming Guide "Graph Memory
Nodes"): an allocation node reserves its address for as long as a graph or an executable graph holds the node; a
launch hands the memory to the program until a free node, cuMemFree or cuMemFreeAsync gives it back to the graph's
pool. Memory that no graph holds and the program does not own is released: it no longer counts as used
(cuMemGetInfo) nor as graph memory (cuDeviceGetGraphMemAttribute)."""

from __future__ import annotations

from .handles import Device, Graph, GraphExec, System
from .work import synchronize_system


class GraphAllocation:
    """The operation of an allocation node: ``size`` bytes at ``ptr`` on ``device``; running it hands the memory to
    the program (``outstanding``)."""

    def __init__(self, ptr: int, size: int, device: Device) -> None:
        self.ptr, self.size, self.device = ptr, size, device
        self.outstanding = False

    def run(self) -> None:
        self.outstanding = True

    def describe(self) -> str:
        return f"graph memory allocation of {self.size} bytes at {self.ptr:#x}"


class GraphFree:
    """The operation of a free node: gives ``allocation`` back to the graph's pool."""

    def __init__(self, allocation: GraphAllocation) -> None:
        self.allocation = allocation

    def run(self) -> None:
        self.allocation.outstanding = False

    def describe(self) -> str:
        return f"graph memory free of {self.allocation.ptr:#x}"


def give_back(sys_: System, ptr: int, *, synchronize: bool = True) -> bool:
    """cuMemFree/cuMemFreeAsync of ``ptr``: if it is graph memory, it returns to its graph's pool (and is released if
    no graph holds it any more; see :func:`release_unheld`); True then, False for any other pointer."""
    allocation = sys_.graph_allocations.get(ptr)
    if allocation is None:
        return False
    allocation.outstanding = False
    release_unheld(sys_, synchronize=synchronize)
    return True


def release_unheld(sys_: System, *, synchronize: bool = True) -> None:
    """Release every graph allocation that no graph or executable graph holds and the program does not own; with
    ``synchronize``, after all pending work (which may still use it) ran, as freeing synchronizes."""
    held = {id(node.op) for obj in sys_.objects.values() if isinstance(obj, Graph) for node in obj.nodes}
    held |= {id(op) for obj in sys_.objects.values() if isinstance(obj, GraphExec) for op in obj.ops.values()}
    free = [a for a in sys_.graph_allocations.values() if not a.outstanding and id(a) not in held]
    if not free:
        return
    if synchronize:
        synchronize_system(sys_, None)
    for allocation in free:
        del sys_.graph_allocations[allocation.ptr]
        sys_.allocations.pop(allocation.ptr, None)
        sys_.space.free(allocation.ptr)
        allocation.device.graph_memory -= allocation.size
