"""Streams (CUDA driver API 6.18 "Stream Management").

Work runs when it is enqueued, so when a call that enqueues work returns, that work is done: streams are always
idle and cuStreamWaitEvent has nothing to wait for.
"""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUstream, CUstream_flags

from ..errors import error
from .handles import Event, Stream
from .system import api, current_ctx, resolve_stream, system

_STREAM_FLAGS = int(CUstream_flags.CU_STREAM_NON_BLOCKING)


@api(1)
def cuStreamCreate(Flags: int) -> tuple:  # noqa: N803
    """cuStreamCreate(Flags) -> (CUresult, CUstream); Flags: CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING."""
    ctx = current_ctx()
    if int(Flags) & ~_STREAM_FLAGS:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuStreamCreate Flags {int(Flags):#x} has unknown bits")
    sys_ = system()
    stream = sys_.register(Stream(sys_.new_handle(), ctx, int(Flags)))
    return (CUstream(stream.handle),)


@api(0)
def cuStreamDestroy(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamDestroy(hStream): destroy a stream from cuStreamCreate (its work is already complete)."""
    sys_ = system()
    stream = sys_.lookup(hStream, Stream, "stream")
    del sys_.objects[stream.handle]
    return ()


@api(0)
def cuStreamSynchronize(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamSynchronize(hStream): returns at once, or the context's sticky error after a kernel fault."""
    resolve_stream(hStream)
    return ()


@api(0)
def cuStreamQuery(hStream: Any) -> tuple:  # noqa: N803
    """cuStreamQuery(hStream): CUDA_SUCCESS (never CUDA_ERROR_NOT_READY: enqueued work is already done)."""
    resolve_stream(hStream)
    return ()


@api(0)
def cuStreamWaitEvent(hStream: Any, hEvent: Any, Flags: int) -> tuple:  # noqa: N803
    """cuStreamWaitEvent(hStream, hEvent, Flags): order later work after the event; recorded work is complete, so
    only the handles are checked (the event may belong to another context, as for cross-device synchronization)."""
    resolve_stream(hStream)
    system().lookup(hEvent, Event, "event")
    return ()
