"""Streams (CUDA driver API 6.18 "Stream Management").

A stream's work runs in order when something waits for it (:mod:`mock_gpu._driver.work`): cuStreamSynchronize runs
it all; cuStreamQuery runs it too but reports CUDA_ERROR_NOT_READY, as a GPU still busy with it would;
cuStreamWaitEvent makes later work of the stream wait for the work recorded in the event (any context).
"""

from __future__ import annotations

import ctypes
from typing import Any

from cuda.bindings.driver import CUstream, CUstream_flags

from .handles import Capture, Event, Stream, handle_value
from .marshal import host_address
from .results import error
from .system import api, current_ctx, resolve_stream, system
from .work import enqueue, synchronize_stream

_STREAM_FLAGS = int(CUstream_flags.CU_STREAM_NON_BLOCKING)


class Marker:
    """Stream work that does nothing itself: an event record, or a wait for another stream's work."""

    def __init__(self, what: str) -> None:
        self.what = what

    def run(self) -> None:
        pass

    def describe(self) -> str:
        return self.what


@api(1)
def cuStreamCreate(Flags: int) -> tuple:  # noqa: N803
    """cuStreamCreate(Flags) -> (CUresult, CUstream); Flags: CU_STREAM_DEFAULT (synchronizes with the legacy default
    stream) or CU_STREAM_NON_BLOCKING (does not)."""
    ctx = current_ctx()
    if int(Flags) & ~_STREAM_FLAGS:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuStreamCreate Flags {int(Flags):#x} has unknown bits")
    sys_ = system()
    stream = sys_.register(Stream(sys_.new_handle(), ctx, int(Flags)))
    ctx.streams.append(stream)
    return (CUstream(stream.handle),)


@api(0)
def cuStreamDestroy(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamDestroy(hStream): destroy a stream from cuStreamCreate; work still pending in it runs later, as the
    driver releases the stream only once its work is done."""
    sys_ = system()
    stream = sys_.lookup(hStream, Stream, "stream")
    if stream.capture is not None:
        raise error("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "the stream is capturing; end the capture first")
    del sys_.objects[stream.handle]
    stream.destroyed = True
    if not stream.pending:
        stream.ctx.streams.remove(stream)
    return ()


@api(0)
def cuStreamSynchronize(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamSynchronize(hStream): run the stream's pending work; its error (sticky) if the work faulted."""
    stream = resolve_stream(hStream)
    _not_capturing(stream, "cuStreamSynchronize")
    synchronize_stream(stream)
    return ()


@api(0)
def cuStreamQuery(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamQuery(hStream): CUDA_SUCCESS if the stream has no pending work. Otherwise the work runs now and the
    result is CUDA_ERROR_NOT_READY (it was not finished when asked), or the work's error if it faulted."""
    stream = resolve_stream(hStream)
    _not_capturing(stream, "cuStreamQuery")
    if stream.pending:
        synchronize_stream(stream)
        raise error("CUDA_ERROR_NOT_READY", "the stream had pending work (it has run now)")
    return ()


@api(0)
def cuStreamWaitEvent(hStream: Any, hEvent: Any, Flags: int) -> tuple:  # noqa: N803
    """cuStreamWaitEvent(hStream, hEvent, Flags): later work on ``hStream`` waits for the work the event's latest
    cuEventRecord captured (the event may belong to another context, e.g. another device). An event never recorded
    is complete: nothing is waited for (CUDA driver API, cuStreamWaitEvent)."""
    stream = resolve_stream(hStream)
    event = system().lookup(hEvent, Event, "event")
    if int(Flags) != 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuStreamWaitEvent Flags must be 0, got {int(Flags)}")
    if event.captured is not None and event.captured[0].invalid is None and _join(stream, *event.captured):
        return ()
    _not_capturing(stream, "cuStreamWaitEvent")
    if event.record is not None and not event.record.done:
        enqueue(stream, Marker(f"wait for event {event.handle:#x}"), deps=(event.record,))
    return ()


def _join(stream: Stream, root: Capture, nodes: list[Any]) -> bool:
    """Cross-stream capture: waiting on an event recorded during a capture makes ``stream``'s next work depend on the
    captured nodes, and pulls a stream that is not capturing into the capture (CUDA programming guide, "Cross-stream
    dependencies and events"). False when ``stream`` takes part in another capture."""
    if stream.capture is None:
        stream.capture = Capture(root.graph, list(nodes), origin=root)
        root.members.append(stream)
        return True
    if stream.capture.root is not root:
        return False
    stream.capture.frontier += [n for n in nodes if n not in stream.capture.frontier]
    return True


def _not_capturing(stream: Stream, call: str) -> None:
    """Calls that need the stream's work cannot run during a capture: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the
    capture is invalidated (cuStreamEndCapture then fails), as on the driver."""
    if stream.capture is not None:
        stream.capture.invalidate(f"{call} was called on the stream during the capture")
        raise error("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", f"{call} on a capturing stream; end the capture first")


_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # CUhostFn: void (*)(void *userData)


class HostCall:
    """cuLaunchHostFunc's work: call the C function at ``address`` with ``user_data`` when the stream reaches it."""

    def __init__(self, address: int, user_data: int) -> None:
        self.address, self.user_data = address, user_data

    def run(self) -> None:
        _HOST_FN(self.address)(self.user_data or None)

    def describe(self) -> str:
        return f"host function {self.address:#x}({self.user_data:#x})"


@api(0)
def cuLaunchHostFunc(hStream: Any, fn: Any, userData: Any) -> tuple:  # noqa: N803
    """cuLaunchHostFunc(hStream, fn, userData): call the host function ``fn`` (a CUhostFn: the address of a C
    function taking ``void *``, e.g. from ctypes.CFUNCTYPE) with ``userData`` (None, an address or a buffer) once
    the stream's earlier work ran; later work waits for it. CUDA_ERROR_INVALID_VALUE for a NULL ``fn``."""
    stream = resolve_stream(hStream)
    address = handle_value(fn)
    if address == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "fn is NULL")
    enqueue(stream, HostCall(address, host_address(userData, "userData")[0]))
    return ()
