"""The objects behind the driver's opaque handles (CUDA driver API 6.1 "Data types used by CUDA driver":
``CUdevice``, ``CUcontext``, ``CUstream``, ``CUevent``, ``CUmodule``, ``CUfunction``, ``CUgraph``...).

One :class:`System` is created by ``cuInit`` from the environment (see :mod:`mock_gpu.config`) and holds every
object of the emulated machine. Handles given to the caller are cuda-python handle objects whose integer value
keys :attr:`System.objects`; a handle that was destroyed, or one of the wrong kind, is ``CUDA_ERROR_INVALID_HANDLE``.
"""

from __future__ import annotations

import bisect
import itertools
import mmap
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from cuda.bindings.driver import CUstream_flags

from ..address_space import AddressSpace
from ..config import ArchInfo, MockConfig
from .results import DriverError, error

T = TypeVar("T")
# Handle values look like host addresses of driver objects; they start high so that a stray small integer
# (a device ordinal, a flag) is never mistaken for a live handle.
_HANDLE_BASE = 0x5_0000_0000
_HANDLE_STEP = 0x40
_NON_BLOCKING = int(CUstream_flags.CU_STREAM_NON_BLOCKING)


@dataclass(eq=False)
class Device:
    """One emulated GPU: its ordinal, architecture limits, and its primary context with the retain count."""

    ordinal: int
    arch: ArchInfo
    memory: int
    primary: Context | None = None
    primary_refs: int = 0
    primary_flags: int = 0
    uuid: Any = None  # ctypes buffer behind the CUuuid that cuDeviceGetUuid hands out
    graph_memory: int = 0  # bytes of graph allocation nodes (cuDeviceGetGraphMemAttribute) and their high mark
    graph_memory_high: int = 0


@dataclass(eq=False)
class Context:
    """A CUDA context. ``sticky`` is the error that poisoned it (a kernel fault): every later call on it returns it.

    ``streams`` lists every stream of the context that may hold pending work: the legacy default stream, the
    per-thread default streams, the created ones, and destroyed ones until their work has run.
    """

    handle: int
    device: Device
    primary: bool
    sticky: DriverError | None = None
    modules: set[LoadedModule] = field(default_factory=set)
    peers: set[int] = field(default_factory=set)  # device ordinals with peer access enabled from this context
    streams: list[Stream] = field(default_factory=list)
    legacy: Stream | None = None  # the NULL / CU_STREAM_LEGACY stream, created on first use
    per_thread: dict[int, Stream] = field(default_factory=dict)  # CU_STREAM_PER_THREAD, by thread id


class Operation(Protocol):
    """Work a stream executes: a kernel launch, a copy, a memset, a graph, or a marker (event record, wait)."""

    def run(self) -> None:
        """Execute it; raises DriverError (after poisoning the context if the fault is sticky)."""

    def describe(self) -> str:
        """A short description for reports, e.g. ``"kernel 'k' grid (1, 1, 1)"``."""


@dataclass(eq=False)
class Work:
    """One operation enqueued on a stream, with the earlier work it must wait for besides its stream's order.

    Times are seconds on the emulated device timeline (``time.perf_counter()`` scale): work starts when it was
    enqueued, its stream is free and its dependencies have finished, and lasts as long as its execution took.
    """

    op: Operation
    stream: Stream
    deps: tuple[Work, ...]
    enqueued_at: float
    done: bool = False
    started_at: float = 0.0
    finished_at: float = 0.0


@dataclass(eq=False)
class Stream:
    """A stream: its pending work in order (CUDA driver API 3, "Stream synchronization behavior").

    ``flags`` CU_STREAM_NON_BLOCKING makes it independent of the legacy default stream; ``legacy`` marks the legacy
    default stream itself. ``last`` is the most recently enqueued work; ``free_at`` when its latest work finished.
    """

    handle: int
    ctx: Context
    flags: int
    legacy: bool = False
    pending: deque[Work] = field(default_factory=deque)
    last: Work | None = None
    free_at: float = 0.0
    destroyed: bool = False
    capture: Capture | None = None

    @property
    def blocking(self) -> bool:
        """Whether the stream synchronizes with the legacy default stream (created without NON_BLOCKING)."""
        return not self.flags & _NON_BLOCKING


@dataclass(eq=False)
class Capture:
    """One stream's part in a capture (cuStreamBeginCapture, or a stream that joined it by waiting on an event
    recorded in it): the graph being built, the nodes this stream's next work depends on, and the capture's origin
    (None for the stream that began it, which lists the streams that joined and holds the invalidation reason)."""

    graph: Graph
    frontier: list[GraphNode] = field(default_factory=list)
    origin: Capture | None = None
    members: list[Stream] = field(default_factory=list)
    reason: str | None = None  # why the capture was invalidated (kept on the origin)

    @property
    def root(self) -> Capture:
        return self.origin or self

    @property
    def invalid(self) -> str | None:
        return self.root.reason

    def invalidate(self, reason: str) -> None:
        self.root.reason = reason


@dataclass(eq=False)
class Event:
    """An event; ``record`` is the work cuEventRecord enqueued most recently (None: never recorded).

    The event is complete when that work has run; its timestamp is the work's start on the device timeline.
    """

    handle: int
    ctx: Context
    flags: int
    record: Work | None = None
    captured: tuple[Capture, list[GraphNode]] | None = None  # recorded during a capture: its frontier then


@dataclass(eq=False)
class LoadedModule:
    """A module loaded into a context: the interpreter's module plus the functions handed out for it."""

    handle: int
    ctx: Context
    module: Any  # mock_gpu.ptx.Module
    functions: dict[str, Function] = field(default_factory=dict)
    loaded: bool = True


@dataclass(eq=False)
class Function:
    """A kernel of a loaded module; ``max_dynamic_smem`` is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES."""

    handle: int
    owner: LoadedModule
    kernel: Any  # mock_gpu.ptx.Kernel
    max_dynamic_smem: int
    carveout: int = -1
    padding_reported: bool = False  # whether a launch touching an allocation's padding was logged


@dataclass(eq=False)
class GraphNode:
    """A node of a graph: its operation (kernel launch, copy, memset or empty) and the nodes it depends on."""

    handle: int
    graph: Graph
    op: Operation
    deps: list[GraphNode] = field(default_factory=list)


@dataclass(eq=False)
class Graph:
    """A graph under construction: its nodes in insertion order."""

    handle: int
    nodes: list[GraphNode] = field(default_factory=list)

    def add(self, sys_: System, op: Operation, deps: list[GraphNode]) -> GraphNode:
        """Append a node running ``op`` after ``deps`` (cuGraphAdd*Node, stream capture)."""
        node = sys_.register(GraphNode(sys_.new_handle(), self, op, deps))
        self.nodes.append(node)
        return node


@dataclass(eq=False)
class GraphExec:
    """An instantiated graph: node handle -> operation, in a topological order of the graph's dependencies."""

    handle: int
    ops: dict[int, Operation]
    auto_free: bool = False  # CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH


@dataclass(eq=False)
class HostAllocation:
    """Page-locked host memory (cuMemHostAlloc): an anonymous mapping and its address."""

    address: int
    size: int
    mapping: mmap.mmap
    view: Any  # the ctypes array that pins the mapping's address


class System:
    """The emulated machine created by cuInit: devices, the device address space and every live driver object."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.devices = [Device(i, config.arch, config.memory) for i in range(config.devices)]
        self.space = AddressSpace({d.ordinal: config.memory for d in self.devices}, exact_bounds=config.exact_bounds)
        self.objects: dict[int, Any] = {}
        self.allocations: dict[int, Context] = {}  # device allocation base -> the context that made it
        self.pending_frees: set[int] = set()  # allocations a cuMemFreeAsync will free when its stream reaches it
        self.graph_allocations: dict[int, Any] = {}  # base -> graph_pool.GraphAllocation of an allocation node
        self.host_allocations: dict[int, HostAllocation] = {}
        self.managed: set[int] = set()  # host_allocations made by cuMemAllocManaged
        self.registered: dict[int, int] = {}  # cuMemHostRegister base -> size
        self.mappings: dict[int, Any] = {}  # cuMemMap base -> vmm.Mapping
        self.default_pools: dict[int, Any] = {}  # device ordinal -> its default vmm.Pool
        self.advice: dict[int, dict] = {}  # managed base -> cuMemAdvise record
        self.sync_memops: dict[int, bool] = {}  # allocation base -> CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
        self.coredump: dict[int, Any] = {}  # CUcoredumpSettings -> value
        self._host_bases: list[int] = []  # sorted bases of host_allocations
        self.lock = threading.RLock()
        self._ids = itertools.count(_HANDLE_BASE, _HANDLE_STEP)
        self._local = threading.local()

    def add_host_allocation(self, alloc: HostAllocation) -> None:
        self.host_allocations[alloc.address] = alloc
        bisect.insort(self._host_bases, alloc.address)

    def pop_host_allocation(self, address: int) -> HostAllocation | None:
        """Forget the page-locked allocation based at ``address`` (None if there is none)."""
        alloc = self.host_allocations.pop(address, None)
        if alloc is not None:
            self._host_bases.remove(address)
        return alloc

    def is_pinned(self, address: int, nbytes: int) -> bool:
        """Whether host bytes ``[address, address + nbytes)`` lie in one page-locked allocation (cuMemHostAlloc)."""
        i = bisect.bisect_right(self._host_bases, address) - 1
        if i < 0:
            return False
        alloc = self.host_allocations[self._host_bases[i]]
        return address + nbytes <= alloc.address + alloc.size

    def new_handle(self) -> int:
        return next(self._ids)

    def register(self, obj: T) -> T:
        self.objects[obj.handle] = obj  # type: ignore[attr-defined]
        return obj

    def lookup(self, handle: Any, kind: type[T], what: str) -> T:
        """The live object of type ``kind`` behind ``handle``; CUDA_ERROR_INVALID_HANDLE if there is none."""
        value = handle_value(handle)
        obj = self.objects.get(value)
        if not isinstance(obj, kind):
            raise error("CUDA_ERROR_INVALID_HANDLE", f"{what} {value:#x} is not a live {kind.__name__.lower()} handle "
                        "(destroyed, never created, or a handle of another kind)")
        return obj

    def device(self, dev: Any) -> Device:
        """The device of ordinal ``dev`` (an int or CUdevice); CUDA_ERROR_INVALID_DEVICE if out of range."""
        ordinal = handle_value(dev)
        if not 0 <= ordinal < len(self.devices):
            raise error("CUDA_ERROR_INVALID_DEVICE",
                        f"device ordinal {ordinal} is out of range: {len(self.devices)} device(s) (MOCKGPU_DEVICES)")
        return self.devices[ordinal]

    @property
    def ctx_stack(self) -> list[Context]:
        """This thread's context stack; the last entry is the current context (the driver keeps one per thread)."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack


def handle_value(handle: Any) -> int:
    """The integer value of a handle, device pointer or ordinal: None -> 0, int, or anything with ``__int__``.

    A float is truncated, as cuda-python's handle types convert it (``CUdeviceptr(2.0)`` is 2; the samples pass
    ``int(dptr) + size / n``). Raises TypeError (as cuda-python does for a wrong argument type) for anything else.
    """
    if handle is None:
        return 0
    if isinstance(handle, int):
        return handle
    if hasattr(handle, "__int__") and not isinstance(handle, str | bytes):
        return int(handle)
    raise TypeError(f"expected a handle, int or None, got {type(handle).__name__}: {handle!r}")
