"""Stream-ordered execution of enqueued work (CUDA driver API 3 "Stream synchronization behavior", 6.18 "Stream
Management", 6.19 "Event Management").

With ``MOCKGPU_DEFERRED=1`` (the default) work enqueued on a stream does not run when it is enqueued: it runs, in
stream order and after the work it depends on, when something waits for it (a stream, event or context
synchronize, a query, a blocking copy, an event another stream waits on, a free). So, as on a GPU, a host buffer
reused before the copy that reads it ran, or results read before the kernel that writes them ran, give wrong data.
With ``MOCKGPU_DEFERRED=0`` each work runs as soon as it is enqueued.

Implicit ordering (CUDA driver API 3): work on the legacy default stream waits for all earlier work on the
context's blocking streams, and work on a blocking stream waits for earlier work on the legacy stream; streams
created with CU_STREAM_NON_BLOCKING take part in neither.

A fault in device work poisons its context (sticky error): the context's pending work is dropped and the call that
waited for the work returns the error, as on a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from ..address_space import MemoryFault
from .handles import Context, Operation, Stream, System, Work
from .results import DriverError, error, logger
from .system import poison, raise_if_sticky, system

__all__ = ["complete", "discard", "enqueue", "synchronize_context", "synchronize_stream", "synchronize_system"]


def enqueue(stream: Stream, op: Operation, deps: Iterable[Work] = ()) -> Work:
    """Put ``op`` at the end of ``stream`` after ``deps`` (and the implicit legacy-stream ordering); returns its work.

    In immediate mode (MOCKGPU_DEFERRED=0) the work runs before this returns, raising its DriverError. On a
    capturing stream (cuStreamBeginCapture) ``op`` becomes the next node of the capture's graph instead, and the
    work returned is complete (it never runs on the stream).
    """
    if stream.capture is not None:
        capture = stream.capture
        capture.frontier = [capture.graph.add(system(), op, list(capture.frontier))]
        return Work(op, stream, (), time.perf_counter(), done=True)
    waits = tuple(w for w in (*deps, *_implicit_deps(stream)) if not w.done)
    work = Work(op, stream, waits, time.perf_counter())
    stream.pending.append(work)
    stream.last = work
    if not system().config.deferred:
        complete(work)
    return work


def _implicit_deps(stream: Stream) -> tuple[Work, ...]:
    ctx = stream.ctx
    if stream.legacy:
        return tuple(s.last for s in ctx.streams if s is not stream and s.blocking and s.pending and s.last)
    if stream.blocking and ctx.legacy is not None and ctx.legacy.pending and ctx.legacy.last is not None:
        return (ctx.legacy.last,)
    return ()


def complete(target: Work) -> None:
    """Run ``target``, the work before it on its stream and everything those depend on, in order.

    Raises the DriverError of the first failing work (its context is poisoned and its pending work dropped), or
    the context's sticky error if it was poisoned before.
    """
    stack = [target]
    while stack:
        work = stack[-1]
        if work.done:
            stack.pop()
            continue
        head = work.stream.pending[0]
        if head is not work:
            stack.append(head)
            continue
        unmet = [d for d in work.deps if not d.done]
        if unmet:
            stack.extend(unmet)
            continue
        _run(work)
        stack.pop()
    raise_if_sticky(target.stream.ctx)


def _run(work: Work) -> None:
    stream = work.stream
    work.started_at = max(work.enqueued_at, stream.free_at, *(d.finished_at for d in work.deps))
    began = time.perf_counter()
    try:
        work.op.run()
    except MemoryFault as fault:  # device memory a pending copy or memset touches was freed in the meantime
        discard(stream.ctx)
        raise poison(stream.ctx, error("CUDA_ERROR_ILLEGAL_ADDRESS", f"{work.op.describe()}: {fault}",
                                       severe=True)) from fault
    except DriverError:
        discard(stream.ctx)
        raise
    finally:
        work.finished_at = work.started_at + (time.perf_counter() - began)
        stream.free_at = work.finished_at
    stream.pending.popleft()
    work.done = True
    work.deps = ()  # done work keeps no chain of older work alive (events and streams hold their last work)


def discard(ctx: Context) -> None:
    """Drop the context's pending work (after a sticky fault, or when the context is reset): it is marked done
    without running, so work of other contexts that waits for it can proceed."""
    for stream in ctx.streams:
        while stream.pending:
            stream.pending.popleft().done = True
    _prune(ctx)


def synchronize_stream(stream: Stream) -> None:
    """Run all work enqueued on ``stream`` so far (cuStreamSynchronize); raises as :func:`complete`."""
    if stream.last is not None and not stream.last.done:
        complete(stream.last)
    raise_if_sticky(stream.ctx)


def synchronize_context(ctx: Context) -> None:
    """Run all work enqueued on the context's streams so far (cuCtxSynchronize); raises as :func:`complete`."""
    for stream in list(ctx.streams):
        synchronize_stream(stream)
    _prune(ctx)


def synchronize_system(sys_: System, current: Context | None) -> None:
    """Run every context's pending work (before memory is freed). Only ``current``'s failure is raised: another
    context's fault stays with that context, as its sticky error."""
    for ctx in [obj for obj in sys_.objects.values() if isinstance(obj, Context)]:
        try:
            synchronize_context(ctx)
        except DriverError as exc:
            if ctx is current:
                raise
            logger.warning("work pending on another context failed while memory was freed: %s", exc.report)


def _prune(ctx: Context) -> None:
    ctx.streams[:] = [s for s in ctx.streams if s.pending or not s.destroyed]
