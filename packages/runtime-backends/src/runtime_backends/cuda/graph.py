"""CUDAGraph: a batch of kernel launches and device copies captured once as a CUDA graph and replayed (CUDA driver
API, "Graph Management": ``cuGraphCreate``, ``cuGraphAddKernelNode``, ``cuGraphAddMemcpyNode``,
``cuGraphInstantiate``, ``cuGraphLaunch``, ``cuGraphExecKernelNodeSetParams``).

The steps run in the order given (each node depends on the one before), on the device's stream. A kernel step launches
with its program's dynamic shared memory. Between replays :meth:`CUDAGraph.update` swaps a kernel step's buffers or
vals in the instantiated graph without rebuilding it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime_backends.cuda.driver import check
from runtime_backends.cuda.program import CUDAProgram, PackedArgs

__all__ = ["CUDAGraph", "KernelStep", "CopyStep"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KernelStep:
    """Launch ``program`` on device pointers ``bufs`` with int32 ``vals``: grid ``global_size`` (blocks) of
    ``local_size`` threads."""

    program: CUDAProgram
    bufs: tuple[int, ...]
    global_size: tuple[int, ...] = (1, 1, 1)
    local_size: tuple[int, ...] = (1, 1, 1)
    vals: tuple[int, ...] = ()


@dataclass(frozen=True)
class CopyStep:
    """Copy ``nbytes`` from device pointer ``src`` to device pointer ``dest`` (both on the graph's device)."""

    dest: int
    src: int
    nbytes: int


class _KernelNode:
    """A kernel node's parameters; they own the packed arguments the node's ``kernelParams`` points to."""

    def __init__(self, cu: Any, step: KernelStep, gs: tuple[int, ...], ls: tuple[int, ...]) -> None:
        self.step, self.args = step, PackedArgs(step.program.signature.kinds)
        self.args.set(step.bufs, step.vals)
        p = self.params = cu.CUDA_KERNEL_NODE_PARAMS()
        p.func = step.program.function
        p.gridDimX, p.gridDimY, p.gridDimZ = gs
        p.blockDimX, p.blockDimY, p.blockDimZ = ls
        p.sharedMemBytes = step.program.shared_bytes
        p.kernelParams = self.args.address
        self.node: Any = None


class CUDAGraph:
    """``steps`` (:class:`KernelStep` / :class:`CopyStep`) of device ``dev`` as one instantiated CUDA graph.

    Raises ``ValueError``/``TypeError`` before anything is built when a step is invalid (see
    ``CUDAProgram.validate``), is of another device or of an unknown kind, or when ``steps`` is empty; ``CUDAError``
    when the driver refuses the graph.
    """

    def __init__(self, dev: Any, steps: Sequence[KernelStep | CopyStep]) -> None:
        self.dev, self.steps = dev, list(steps)
        if not self.steps:
            raise ValueError("a CUDA graph needs at least one step")
        shapes = [self._check(i, s) for i, s in enumerate(self.steps)]
        cu = dev.activate()
        self.graph = check(cu, cu.cuGraphCreate(0), "cuGraphCreate", device=dev.device)
        self.exec: Any = None
        self.kernels: dict[int, _KernelNode] = {}
        try:
            previous: list[Any] = []
            for i, (step, shape) in enumerate(zip(self.steps, shapes)):
                node = self._add(cu, i, step, shape, previous)
                previous = [node]
            self.exec = check(cu, cu.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate", device=dev.device)
        except BaseException:
            self.close()
            raise

    def _check(self, i: int, step: Any) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        if isinstance(step, KernelStep):
            if step.program.dev is not self.dev:
                raise ValueError(f"graph step {i}: kernel {step.program.name!r} is loaded on {step.program.dev.device}, "
                                 f"the graph is for {self.dev.device}")
            return step.program.validate(step.bufs, step.vals, step.global_size, step.local_size)
        if isinstance(step, CopyStep):
            for what in ("dest", "src", "nbytes"):
                value = getattr(step, what)
                if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                    raise ValueError(f"graph step {i}: CopyStep.{what} must be a positive int, got {value!r}")
            return None
        raise TypeError(f"graph step {i} is a {type(step).__name__}, not a KernelStep or CopyStep")

    def _add(self, cu: Any, i: int, step: Any, shape: Any, deps: list[Any]) -> Any:
        if isinstance(step, KernelStep):
            kernel = _KernelNode(cu, step, *shape)
            kernel.node = check(cu, cu.cuGraphAddKernelNode(self.graph, deps, len(deps), kernel.params),
                                "cuGraphAddKernelNode", step=i, kernel=step.program.name)
            self.kernels[i] = kernel
            return kernel.node
        p = cu.CUDA_MEMCPY3D()
        device = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
        p.srcMemoryType, p.srcDevice = device, step.src
        p.dstMemoryType, p.dstDevice = device, step.dest
        p.WidthInBytes, p.Height, p.Depth = step.nbytes, 1, 1
        return check(cu, cu.cuGraphAddMemcpyNode(self.graph, deps, len(deps), p, self.dev.context),
                     "cuGraphAddMemcpyNode", step=i, nbytes=step.nbytes)

    def update(self, index: int, *, bufs: Sequence[int] | None = None, vals: Sequence[int] | None = None) -> None:
        """Replace the buffers and/or vals of kernel step ``index`` for the following replays.

        Raises ``IndexError`` when ``index`` is not a kernel step, ``ValueError``/``TypeError`` for an invalid launch
        (the graph is unchanged then).
        """
        if index not in self.kernels:
            raise IndexError(f"graph step {index} is not a kernel step; kernel steps: {sorted(self.kernels)}")
        kernel = self.kernels[index]
        old = kernel.step
        new = KernelStep(old.program, tuple(old.bufs if bufs is None else bufs), old.global_size, old.local_size,
                         tuple(old.vals if vals is None else vals))
        old.program.validate(new.bufs, new.vals, new.global_size, new.local_size)
        kernel.args.set(new.bufs, new.vals)
        cu = self.dev.activate()
        try:
            check(cu, cu.cuGraphExecKernelNodeSetParams(self.exec, kernel.node, kernel.params),
                  "cuGraphExecKernelNodeSetParams", step=index, kernel=old.program.name)
        except BaseException:
            kernel.args.set(old.bufs, old.vals)
            raise
        kernel.step = new

    def __call__(self, wait: bool = False) -> float | None:
        """Replay the graph on the device's stream; device seconds when ``wait`` (CUDA events), else ``None``."""
        cu = self.dev.activate()

        def launch() -> None:
            check(cu, cu.cuGraphLaunch(self.exec, self.dev.stream), "cuGraphLaunch", device=self.dev.device,
                  steps=len(self.steps))
        if wait:
            return self.dev.time(launch)
        launch()
        return None

    def close(self) -> None:
        """Destroy the executable graph and the graph (idempotent)."""
        if self.dev.closed:
            return
        cu = self.dev.cu
        if self.exec is not None:
            self.dev.synchronize()  # a replay may still be running
            check(cu, cu.cuGraphExecDestroy(self.exec), "cuGraphExecDestroy")
            self.exec = None
        if self.graph is not None:
            check(cu, cu.cuGraphDestroy(self.graph), "cuGraphDestroy")
            self.graph = None

    def __del__(self) -> None:
        try:
            if hasattr(self, "graph"):
                self.close()
        except Exception as e:  # never raise from a finalizer
            log.debug("destroying a CUDA graph failed: %s", e)
