"""CUDADevice: the CUDA backend's Compiled record (entry point ``runtime_backends.cuda.device:CUDADevice``).

Devices are ``CUDA`` (ordinal 0, also ``CUDA:0``), ``CUDA:1``, ... Each holds its device's primary context
(``cuDevicePrimaryCtxRetain``) and one non-blocking stream that every copy and launch of the device goes to, so work
on one device is ordered and ``synchronize`` waits for that device only. Two devices enable peer access between them
on their first transfer where the hardware allows it (``cuDeviceCanAccessPeer``, ``cuCtxEnablePeerAccess``).
``PTX=1`` selects the PTX renderer and its stamping compiler instead of CUDA C and NVRTC.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import Any

from runtime_backends.cuda.allocator import CUDAAllocator
from runtime_backends.cuda.compiler import NVRTCCompiler, PTXCompiler, ptx_isa_for_driver
from runtime_backends.cuda.driver import CUDAError, check, driver_module, init_driver, result_name
from runtime_backends.cuda.graph import CUDAGraph
from runtime_backends.cuda.limits import DeviceLimits, query_limits
from runtime_backends.cuda.program import CUDAProgram
from runtime_backends.cuda.renderer_c import CUDARenderer
from runtime_backends.cuda.renderer_ptx import PTXRenderer
from runtime_core.compiler import Compiler
from runtime_core.config import PTX
from runtime_core.device import Compiled
from runtime_core.renderer import Renderer

__all__ = ["CUDADevice"]

log = logging.getLogger(__name__)
_NAME = re.compile(r"CUDA(?::(\d+))?")
_NON_BLOCKING = 0x1  # CU_STREAM_NON_BLOCKING: no implicit synchronization with the legacy default stream
_DISABLE_TIMING = 0x2  # CU_EVENT_DISABLE_TIMING


def _ordinal(device: str) -> int:
    m = _NAME.fullmatch(device)
    if m is None:
        raise ValueError(f"CUDA device names are 'CUDA' or 'CUDA:<ordinal>' (e.g. CUDA:1), got {device!r}")
    return int(m.group(1) or 0)


class CUDADevice(Compiled):
    """One NVIDIA GPU through the CUDA driver API.

    Opening fails (``Device["CUDA"]`` then raises ``DeviceError`` with the reason) when the driver bindings or library
    are missing, no GPU is visible, or the ordinal is beyond the devices present. Compiling needs NVRTC, but a device
    opens without it and still runs given PTX.

    ``dev.runtime(name, ptx)`` loads a :class:`~runtime_backends.cuda.program.CUDAProgram`; ``dev.graph(steps)``
    builds a :class:`~runtime_backends.cuda.graph.CUDAGraph`. A device is used from one thread at a time.

    Attributes:
        cu: the driver module (``runtime_backends.cuda.driver.driver_module``).
        ordinal, limits: the device's ordinal and :class:`~runtime_backends.cuda.limits.DeviceLimits`.
        context, stream: its primary context and the stream all its work is queued on.
        closed: True after :meth:`finalize`; every use then raises ``RuntimeError``.
    """

    DEFAULT_PRIORITY = 0
    allocator: CUDAAllocator

    def __init__(self, device: str = "CUDA") -> None:
        ordinal, ptx = _ordinal(device), bool(PTX.get())
        cu = driver_module()
        count = init_driver(cu)
        if ordinal >= count:
            raise ValueError(f"{device} does not exist: the driver sees {count} device(s) "
                             f"({', '.join(['CUDA'] + [f'CUDA:{i}' for i in range(1, count)])})")
        self.cu, self.ordinal, self.closed = cu, ordinal, False
        self.handle = check(cu, cu.cuDeviceGet(ordinal), "cuDeviceGet", ordinal=ordinal)
        self.context = check(cu, cu.cuDevicePrimaryCtxRetain(self.handle), "cuDevicePrimaryCtxRetain", ordinal=ordinal)
        try:
            check(cu, cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent", device=device)
            self.limits: DeviceLimits = query_limits(cu, self.handle)
            self.stream = check(cu, cu.cuStreamCreate(_NON_BLOCKING), "cuStreamCreate", device=device)
            self._order_event = check(cu, cu.cuEventCreate(_DISABLE_TIMING), "cuEventCreate")
            self._timing = (check(cu, cu.cuEventCreate(0), "cuEventCreate"), check(cu, cu.cuEventCreate(0),
                                                                                      "cuEventCreate"))
            renderer, compiler = self._toolchain(ptx)
        except BaseException:
            cu.cuDevicePrimaryCtxRelease(self.handle)
            raise
        self._peers: dict[int, bool] = {}
        super().__init__(device, CUDAAllocator(self), renderer, compiler, functools.partial(CUDAProgram, self),
                         graph=functools.partial(CUDAGraph, self))

    def _toolchain(self, ptx: bool) -> tuple[Renderer, Compiler]:
        if ptx:
            return PTXRenderer(self.limits), PTXCompiler(self.limits.sm)
        driver = int(check(self.cu, self.cu.cuDriverGetVersion(), "cuDriverGetVersion"))
        return CUDARenderer(self.limits), NVRTCCompiler(self.limits.sm, max_ptx_isa=ptx_isa_for_driver(driver))

    @property
    def arch(self) -> str:
        """The compute capability as a target name, e.g. ``"sm_90"``."""
        return f"sm_{self.limits.sm}"

    def check_open(self) -> None:
        """Raise ``RuntimeError`` once the device was finalized (its buffers and programs are unusable then)."""
        if self.closed:
            raise RuntimeError(f"{self.device} was finalized: its buffers and programs can no longer be used; open the "
                               f"device again (runtime_core.Device) and make new ones")

    def activate(self) -> Any:
        """Make this device's context current on the calling thread; returns the driver module (``RuntimeError`` once
        the device was finalized)."""
        self.check_open()
        check(self.cu, self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent", device=self.device)
        return self.cu

    def synchronize(self) -> None:
        """Wait until the work queued on this device's stream has finished (other devices are not waited for)."""
        cu = self.activate()
        check(cu, cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize", device=self.device)

    def wait_for(self, other: CUDADevice) -> None:
        """Order the work queued on this device after the work queued on ``other`` so far (an event, no host wait)."""
        cu = self.cu
        check(cu, cu.cuEventRecord(other._order_event, other.stream), "cuEventRecord", device=other.device)
        check(cu, cu.cuStreamWaitEvent(self.stream, other._order_event, 0), "cuStreamWaitEvent", device=self.device,
              waits_for=other.device)

    def time(self, work: Callable[[], None]) -> float:
        """Seconds of device time of ``work`` (which enqueues on :attr:`stream`), from CUDA events around it; waits."""
        cu = self.cu
        start, end = self._timing
        check(cu, cu.cuEventRecord(start, self.stream), "cuEventRecord", device=self.device)
        work()
        check(cu, cu.cuEventRecord(end, self.stream), "cuEventRecord", device=self.device)
        check(cu, cu.cuEventSynchronize(end), "cuEventSynchronize", device=self.device)
        return float(check(cu, cu.cuEventElapsedTime(start, end), "cuEventElapsedTime")) * 1e-3

    def peer_access(self, other: CUDADevice) -> bool:
        """Whether copies between this device and ``other`` may go peer to peer; enables peer access both ways on the
        first call (an already enabled direction is fine). Where the driver refuses, copies are staged through host
        memory (logged once)."""
        if other.ordinal not in self._peers:
            ok = self._can_access(other) and other._can_access(self)
            if ok:
                try:
                    self._enable_peer(other)
                    other._enable_peer(self)
                except CUDAError as e:
                    log.info("peer access between %s and %s failed (%s); copies are staged through host memory",
                             self.device, other.device, e)
                    ok = False
            else:
                log.info("%s and %s cannot access each other's memory; copies are staged through host memory",
                         self.device, other.device)
            self._peers[other.ordinal] = other._peers[self.ordinal] = ok
        return self._peers[other.ordinal]

    def _can_access(self, other: CUDADevice) -> bool:
        cu = self.cu
        return bool(check(cu, cu.cuDeviceCanAccessPeer(self.handle, other.handle), "cuDeviceCanAccessPeer",
                          device=self.device, peer=other.device))

    def _enable_peer(self, other: CUDADevice) -> None:
        cu = self.activate()
        result = cu.cuCtxEnablePeerAccess(other.context, 0)
        if result_name(cu, result[0]) != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED":
            check(cu, result, "cuCtxEnablePeerAccess", device=self.device, peer=other.device)

    def finalize(self) -> None:
        """Wait for the device, free the cached and staging memory, the stream and events, and release the primary
        context. Idempotent; afterwards every use of the device raises ``RuntimeError``."""
        if self.closed:
            return
        cu = self.cu
        try:
            self.synchronize()
            self.allocator.free_cache()
            self.allocator.staging.close()
            for event in (self._order_event, *self._timing):
                check(cu, cu.cuEventDestroy(event), "cuEventDestroy")
            check(cu, cu.cuStreamDestroy(self.stream), "cuStreamDestroy", device=self.device)
        finally:
            self.closed = True
            check(cu, cu.cuDevicePrimaryCtxRelease(self.handle), "cuDevicePrimaryCtxRelease", device=self.device)
