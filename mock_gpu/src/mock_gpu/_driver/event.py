"""Events (CUDA driver API 6.19 "Event Management").

cuEventRecord enqueues a marker on the stream; the event is complete when the stream's work up to the marker has
run (:mod:`mock_gpu._driver.work`). Its timestamp is the marker's start on the emulated device timeline, so
cuEventElapsedTime (milliseconds) measures the emulated work between two records, plus the time the stream was idle.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUevent, CUevent_flags

from .handles import Event
from .results import error
from .stream import Marker
from .system import api, current_ctx, raise_if_sticky, resolve_stream, system
from .work import complete, enqueue

_EVENT_FLAGS = (int(CUevent_flags.CU_EVENT_BLOCKING_SYNC) | int(CUevent_flags.CU_EVENT_DISABLE_TIMING)
                | int(CUevent_flags.CU_EVENT_INTERPROCESS))


@api(1)
def cuEventCreate(Flags: int) -> tuple:  # noqa: N803
    """cuEventCreate(Flags) -> (CUresult, CUevent); Flags: CU_EVENT_DEFAULT / BLOCKING_SYNC / DISABLE_TIMING."""
    ctx = current_ctx()
    if int(Flags) & ~_EVENT_FLAGS:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuEventCreate Flags {int(Flags):#x} has unknown bits")
    sys_ = system()
    event = sys_.register(Event(sys_.new_handle(), ctx, int(Flags)))
    return (CUevent(event.handle),)


@api(0)
def cuEventRecord(hEvent: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuEventRecord(hEvent, hStream): capture the work enqueued on the stream so far; the event completes when it
    has run. Re-recording replaces the earlier capture. CUDA_ERROR_INVALID_HANDLE when the event and the stream
    belong to different contexts (CUDA driver API, cuEventRecord)."""
    event = system().lookup(hEvent, Event, "event")
    stream = resolve_stream(hStream)
    if stream.ctx is not event.ctx:
        raise error("CUDA_ERROR_INVALID_HANDLE", "the event was created in another context than the stream's; record "
                    "it on a stream of its own context")
    if stream.capture is not None:  # the event stands for the captured work so far (a fork or join point)
        event.captured = (stream.capture.root, list(stream.capture.frontier))
        return ()
    event.captured = None
    event.record = enqueue(stream, Marker(f"record of event {event.handle:#x}"))
    return ()


@api(0)
def cuEventSynchronize(hEvent: Any) -> tuple:  # noqa: N803
    """cuEventSynchronize(hEvent): run the work the event captured; its error (sticky) if that work faulted. An
    event never recorded returns at once."""
    event = system().lookup(hEvent, Event, "event")
    raise_if_sticky(event.ctx)
    if event.record is not None:
        complete(event.record)
    return ()


@api(0)
def cuEventQuery(hEvent: Any) -> tuple:  # noqa: N803
    """cuEventQuery(hEvent): CUDA_SUCCESS if the captured work has run (or the event was never recorded).
    Otherwise the work runs now and the result is CUDA_ERROR_NOT_READY (it was not done when asked), or its error."""
    event = system().lookup(hEvent, Event, "event")
    raise_if_sticky(event.ctx)
    if event.record is not None and not event.record.done:
        complete(event.record)
        raise error("CUDA_ERROR_NOT_READY", "the event's work was pending (it has run now)")
    return ()


@api(1)
def cuEventElapsedTime(hStart: Any, hEnd: Any) -> tuple:  # noqa: N803
    """cuEventElapsedTime(hStart, hEnd) -> (CUresult, float): milliseconds between two completed events.

    CUDA_ERROR_INVALID_HANDLE if either was not recorded or was created with CU_EVENT_DISABLE_TIMING,
    CUDA_ERROR_NOT_READY if either has not completed (CUDA driver API, cuEventElapsedTime).
    """
    sys_ = system()
    start, end = sys_.lookup(hStart, Event, "start event"), sys_.lookup(hEnd, Event, "end event")
    for ev, name in ((start, "start"), (end, "end")):
        if ev.flags & int(CUevent_flags.CU_EVENT_DISABLE_TIMING):
            raise error("CUDA_ERROR_INVALID_HANDLE", f"the {name} event was created with CU_EVENT_DISABLE_TIMING")
        if ev.record is None:
            raise error("CUDA_ERROR_INVALID_HANDLE", f"the {name} event has not been recorded")
    stamps = []
    for ev, name in ((start, "start"), (end, "end")):
        if not ev.record.done:  # type: ignore[union-attr]
            raise error("CUDA_ERROR_NOT_READY", f"the {name} event has not completed; synchronize it first")
        stamps.append(ev.record.started_at)  # type: ignore[union-attr]
    return (float((stamps[1] - stamps[0]) * 1e3),)


@api(0)
def cuEventDestroy(hEvent: Any) -> tuple:  # noqa: N803
    """cuEventDestroy(hEvent): destroy an event (work it captured still runs)."""
    sys_ = system()
    event = sys_.lookup(hEvent, Event, "event")
    del sys_.objects[event.handle]
    return ()
