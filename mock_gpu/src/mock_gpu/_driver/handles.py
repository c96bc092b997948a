"""The objects behind the driver's opaque handles (CUDA driver API 6.1 "Data types used by CUDA driver":
``CUdevice``, ``CUcontext``, ``CUstream``, ``CUevent``, ``CUmodule``, ``CUfunction``, ``CUgraph``...).

One :class:`System` is created by ``cuInit`` from the environment (see :mod:`mock_gpu.config`) and holds every
object of the emulated machine. Handles given to the caller are cuda-python handle objects whose integer value
keys :attr:`System.objects`; a handle that was destroyed, or one of the wrong kind, is ``CUDA_ERROR_INVALID_HANDLE``.
"""

from __future__ import annotations

import itertools
import mmap
import threading
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import ArchInfo, MockConfig
from ..errors import DriverError, error
from ..memory import AddressSpace

T = TypeVar("T")
# Handle values look like host addresses of driver objects; they start high so that a stray small integer
# (a device ordinal, a flag) is never mistaken for a live handle.
_HANDLE_BASE = 0x5_0000_0000
_HANDLE_STEP = 0x40


@dataclass(eq=False)
class Device:
    """One emulated GPU: its ordinal, architecture limits, and its primary context with the retain count."""

    ordinal: int
    arch: ArchInfo
    memory: int
    primary: Context | None = None
    primary_refs: int = 0


@dataclass(eq=False)
class Context:
    """A CUDA context. ``sticky`` is the error that poisoned it (a kernel fault): every later call on it returns it."""

    handle: int
    device: Device
    primary: bool
    sticky: DriverError | None = None
    modules: set[LoadedModule] = field(default_factory=set)
    peers: set[int] = field(default_factory=set)  # device ordinals with peer access enabled from this context
    default_stream: Stream | None = None


@dataclass(eq=False)
class Stream:
    """A stream. Work runs when it is enqueued, so a stream never has pending work (cuStreamQuery: CUDA_SUCCESS)."""

    handle: int
    ctx: Context
    flags: int


@dataclass(eq=False)
class Event:
    """An event; ``timestamp`` (``time.perf_counter()`` seconds) is set when the stream reaches cuEventRecord."""

    handle: int
    ctx: Context
    flags: int
    timestamp: float | None = None


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


@dataclass(frozen=True)
class KernelLaunch:
    """A validated launch: the function, grid/block dims, dynamic shared bytes and the packed parameter buffer."""

    function: Function
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    params: bytes


@dataclass(eq=False)
class GraphNode:
    """A node of a graph: a KernelLaunch or a memcpy; ``deps`` are the handles of the nodes it depends on."""

    handle: int
    graph: Graph
    launch: Any
    deps: tuple[int, ...]


@dataclass(eq=False)
class Graph:
    """A graph under construction: its nodes in insertion order (which is a topological order)."""

    handle: int
    nodes: list[GraphNode] = field(default_factory=list)


@dataclass(eq=False)
class GraphExec:
    """An instantiated graph: a snapshot of node actions keyed by node handle, in execution order."""

    handle: int
    launches: dict[int, Any]


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
        self.space = AddressSpace({d.ordinal: config.memory for d in self.devices})
        self.objects: dict[int, Any] = {}
        self.allocations: dict[int, Context] = {}  # device allocation base -> the context that made it
        self.host_allocations: dict[int, HostAllocation] = {}
        self.lock = threading.RLock()
        self._ids = itertools.count(_HANDLE_BASE, _HANDLE_STEP)
        self._local = threading.local()

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

    Raises TypeError (as cuda-python does for a wrong argument type) for anything else.
    """
    if handle is None:
        return 0
    if isinstance(handle, int):
        return handle
    if hasattr(handle, "__int__") and not isinstance(handle, float):
        return int(handle)
    raise TypeError(f"expected a handle, int or None, got {type(handle).__name__}: {handle!r}")
