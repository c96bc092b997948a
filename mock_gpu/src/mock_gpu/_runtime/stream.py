"""Streams and events of the emulated runtime (CUDA runtime API 6.4 "Stream Management", 6.5 "Event Management"):
the driver emulator's, with the runtime's handle types (``cudaStream_t``, ``cudaEvent_t``). Stream 0 is the legacy
default stream; runtime flag values equal the driver's (cudaStreamNonBlocking, cudaEventBlockingSync...)."""

from __future__ import annotations

from typing import Any

from cuda.bindings.runtime import cudaEvent_t, cudaStream_t

from .. import driver as cu
from .state import check, ensure_context, runtime_api


def _stream(stream: Any) -> Any:
    return cu.CUstream(0 if stream is None else int(stream))


def _event(event: Any) -> Any:
    return cu.CUevent(int(event))


@runtime_api(1)
def cudaStreamCreate() -> tuple:
    """cudaStreamCreate() -> (cudaError_t, cudaStream_t): a blocking stream."""
    ensure_context()
    return (cudaStream_t(int(check(cu.cuStreamCreate(0)))),)


@runtime_api(1)
def cudaStreamCreateWithFlags(flags: Any) -> tuple:
    """cudaStreamCreateWithFlags(flags) -> (cudaError_t, cudaStream_t) (cudaStreamNonBlocking)."""
    ensure_context()
    return (cudaStream_t(int(check(cu.cuStreamCreate(int(flags))))),)


@runtime_api(1)
def cudaStreamCreateWithPriority(flags: Any, priority: Any) -> tuple:
    """cudaStreamCreateWithPriority(flags, priority) -> (cudaError_t, cudaStream_t); priorities have no effect."""
    ensure_context()
    return (cudaStream_t(int(check(cu.cuStreamCreate(int(flags))))),)


@runtime_api(0)
def cudaStreamDestroy(stream: Any) -> tuple:
    """cudaStreamDestroy(stream)."""
    ensure_context()
    check(cu.cuStreamDestroy(_stream(stream)))
    return ()


@runtime_api(0)
def cudaStreamSynchronize(stream: Any) -> tuple:
    """cudaStreamSynchronize(stream): run and wait for the stream's work."""
    ensure_context()
    check(cu.cuStreamSynchronize(_stream(stream)))
    return ()


@runtime_api(0)
def cudaStreamQuery(stream: Any) -> tuple:
    """cudaStreamQuery(stream): cudaSuccess when its work is done, cudaErrorNotReady before."""
    ensure_context()
    check(cu.cuStreamQuery(_stream(stream)))
    return ()


@runtime_api(0)
def cudaStreamWaitEvent(stream: Any, event: Any, flags: Any = 0) -> tuple:
    """cudaStreamWaitEvent(stream, event, flags): later work of ``stream`` waits for the event."""
    ensure_context()
    check(cu.cuStreamWaitEvent(_stream(stream), _event(event), int(flags)))
    return ()


@runtime_api(0)
def cudaLaunchHostFunc(stream: Any, fn: Any, userData: Any) -> tuple:  # noqa: N803
    """cudaLaunchHostFunc(stream, fn, userData): call the host function ``fn`` (a cudaHostFn_t: the address of a C
    function taking ``void *``) with ``userData`` in the order of ``stream`` (cuLaunchHostFunc)."""
    ensure_context()
    check(cu.cuLaunchHostFunc(_stream(stream), cu.CUhostFn(0 if fn is None else int(fn)), userData))
    return ()


@runtime_api(1)
def cudaEventCreate() -> tuple:
    """cudaEventCreate() -> (cudaError_t, cudaEvent_t)."""
    ensure_context()
    return (cudaEvent_t(int(check(cu.cuEventCreate(0)))),)


@runtime_api(1)
def cudaEventCreateWithFlags(flags: Any) -> tuple:
    """cudaEventCreateWithFlags(flags) -> (cudaError_t, cudaEvent_t) (cudaEventBlockingSync, DisableTiming...)."""
    ensure_context()
    return (cudaEvent_t(int(check(cu.cuEventCreate(int(flags))))),)


@runtime_api(0)
def cudaEventRecord(event: Any, stream: Any = 0) -> tuple:
    """cudaEventRecord(event, stream)."""
    ensure_context()
    check(cu.cuEventRecord(_event(event), _stream(stream)))
    return ()


@runtime_api(0)
def cudaEventSynchronize(event: Any) -> tuple:
    """cudaEventSynchronize(event)."""
    ensure_context()
    check(cu.cuEventSynchronize(_event(event)))
    return ()


@runtime_api(0)
def cudaEventQuery(event: Any) -> tuple:
    """cudaEventQuery(event): cudaSuccess once the work before the record ran, cudaErrorNotReady before."""
    ensure_context()
    check(cu.cuEventQuery(_event(event)))
    return ()


@runtime_api(1)
def cudaEventElapsedTime(start: Any, end: Any) -> tuple:
    """cudaEventElapsedTime(start, end) -> (cudaError_t, float milliseconds on the emulated device timeline)."""
    ensure_context()
    return (check(cu.cuEventElapsedTime(_event(start), _event(end))),)


@runtime_api(0)
def cudaEventDestroy(event: Any) -> tuple:
    """cudaEventDestroy(event)."""
    ensure_context()
    check(cu.cuEventDestroy(_event(event)))
    return ()
