"""Events (CUDA driver API 6.19 "Event Management").

Work runs when it is enqueued, so an event records ``time.perf_counter()`` at cuEventRecord, which is the moment
the stream reaches it. Elapsed times between events therefore measure the emulated work between them, in
milliseconds as cuEventElapsedTime specifies.
"""

from __future__ import annotations

import time
from typing import Any

from cuda.bindings.driver import CUevent, CUevent_flags

from ..errors import error
from .handles import Event
from .system import api, current_ctx, resolve_stream, system

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
    """cuEventRecord(hEvent, hStream): the stream reaches the event now; its timestamp is taken.

    CUDA_ERROR_INVALID_HANDLE when the event and the stream belong to different contexts (CUDA driver API,
    cuEventRecord).
    """
    event = system().lookup(hEvent, Event, "event")
    stream = resolve_stream(hStream)
    if stream.ctx is not event.ctx:
        raise error("CUDA_ERROR_INVALID_HANDLE", "the event was created in another context than the stream's; record "
                    "it on a stream of its own context")
    event.timestamp = time.perf_counter()
    return ()


@api(0)
def cuEventSynchronize(hEvent: Any) -> tuple:  # noqa: N803
    """cuEventSynchronize(hEvent): returns at once (the recorded work is complete) or the sticky error."""
    event = system().lookup(hEvent, Event, "event")
    if event.ctx.sticky is not None:
        raise error(event.ctx.sticky.result.name, f"unusable context: {event.ctx.sticky.report}")
    return ()


@api(0)
def cuEventQuery(hEvent: Any) -> tuple:  # noqa: N803
    """cuEventQuery(hEvent): CUDA_SUCCESS (recorded work is complete; an unrecorded event also reports success)."""
    system().lookup(hEvent, Event, "event")
    return ()


@api(1)
def cuEventElapsedTime(hStart: Any, hEnd: Any) -> tuple:  # noqa: N803
    """cuEventElapsedTime(hStart, hEnd) -> (CUresult, float): milliseconds between two recorded events.

    CUDA_ERROR_INVALID_HANDLE if either was not recorded or was created with CU_EVENT_DISABLE_TIMING (CUDA driver
    API, cuEventElapsedTime).
    """
    sys_ = system()
    start, end = sys_.lookup(hStart, Event, "start event"), sys_.lookup(hEnd, Event, "end event")
    stamps: list[float] = []
    for ev, name in ((start, "start"), (end, "end")):
        if ev.flags & int(CUevent_flags.CU_EVENT_DISABLE_TIMING):
            raise error("CUDA_ERROR_INVALID_HANDLE", f"the {name} event was created with CU_EVENT_DISABLE_TIMING")
        if ev.timestamp is None:
            raise error("CUDA_ERROR_INVALID_HANDLE", f"the {name} event has not been recorded")
        stamps.append(ev.timestamp)
    return (float((stamps[1] - stamps[0]) * 1e3),)


@api(0)
def cuEventDestroy(hEvent: Any) -> tuple:  # noqa: N803
    """cuEventDestroy(hEvent): destroy an event."""
    sys_ = system()
    event = sys_.lookup(hEvent, Event, "event")
    del sys_.objects[event.handle]
    return ()
