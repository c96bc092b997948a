"""Plumbing shared by the driver API modules: the process's emulated system, the result-tuple convention, the
current context and stream handles (CUDA driver API 6.8 "Context Management" for the per-thread context stack,
6.18 "Stream Management" for the NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD handles).

cuda-python's driver functions return a tuple ``(CUresult, *outputs)``; on failure the outputs are ``None``
(e.g. ``cuMemAlloc`` -> ``(CUDA_ERROR_OUT_OF_MEMORY, None)``). :func:`api` gives an implementation function that
convention: it returns its outputs as a tuple, or raises :class:`~mock_gpu._driver.results.DriverError`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from cuda.bindings.driver import CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CUresult

from .handles import Context, Stream, System
from .results import REPORTS, DriverError, error

_holder_lock = threading.Lock()
_system: System | None = None


def set_system(system: System | None) -> None:
    """Install the system created by cuInit (or drop it: :func:`mock_gpu.reset`)."""
    global _system
    with _holder_lock:
        _system = system


def get_system_or_none() -> System | None:
    return _system


def system() -> System:
    """The initialized system; CUDA_ERROR_NOT_INITIALIZED before cuInit (CUDA driver API, cuInit)."""
    sys_ = _system
    if sys_ is None:
        raise error("CUDA_ERROR_NOT_INITIALIZED", "cuInit(0) has not been called in this process")
    return sys_


def api(outputs: int) -> Callable[[Callable[..., tuple]], Callable[..., tuple]]:
    """Decorate a driver function returning ``outputs`` values so that it returns ``(CUresult, *values)``.

    Calls are serialized by the system lock (the driver API is thread-safe). A DriverError becomes its result code
    followed by ``outputs`` Nones, with its report logged and kept for :func:`mock_gpu.last_error_report`. The
    wrapper's ``outputs`` attribute tells how many values follow the CUresult.
    """

    def wrap(fn: Callable[..., tuple]) -> Callable[..., tuple]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> tuple:
            sys_ = _system
            try:
                if sys_ is None:
                    values = fn(*args, **kwargs)
                else:
                    with sys_.lock:
                        values = fn(*args, **kwargs)
            except DriverError as exc:
                REPORTS.record(exc, fn.__name__)
                return (exc.result, *([None] * outputs))
            return (CUresult.CUDA_SUCCESS, *values)

        call.outputs = outputs  # type: ignore[attr-defined]
        return call

    return wrap


def current_ctx(*, check_sticky: bool = True) -> Context:
    """This thread's current context; CUDA_ERROR_INVALID_CONTEXT if none, its sticky error if it was poisoned."""
    stack = system().ctx_stack
    if not stack:
        raise error("CUDA_ERROR_INVALID_CONTEXT", "no current context on this thread: call cuCtxSetCurrent with a "
                    "context from cuDevicePrimaryCtxRetain or cuCtxCreate first")
    ctx = stack[-1]
    if check_sticky:
        raise_if_sticky(ctx)
    return ctx


def raise_if_current_sticky() -> None:
    """The current context's sticky error, if there is a current context and it was poisoned (for calls that work
    without a context but, like every call, answer with the sticky error once the context is unusable)."""
    stack = system().ctx_stack
    if stack:
        raise_if_sticky(stack[-1])


def raise_if_sticky(ctx: Context) -> None:
    """Re-raise the error that poisoned ``ctx`` (a real GPU context stays unusable after a fault in a kernel)."""
    if ctx.sticky is not None:
        raise DriverError(ctx.sticky.result, "the context is unusable after an earlier error (sticky, as on a real "
                          f"GPU; destroy or reset it): {ctx.sticky.report}")


def poison(ctx: Context, err: DriverError) -> DriverError:
    """Make ``err`` the context's sticky error (a fault in device work, as on a GPU) and return it for raising."""
    ctx.sticky = err
    return err


def resolve_stream(handle: Any) -> Stream:
    """The stream for ``handle``: NULL and CU_STREAM_LEGACY mean the current context's legacy default stream,
    CU_STREAM_PER_THREAD this thread's default stream of it (CUDA driver API 3, "Stream synchronization behavior").

    Raises CUDA_ERROR_INVALID_HANDLE for an unknown handle and the context's sticky error if it was poisoned.
    """
    sys_ = system()
    value = 0 if handle is None else int(handle)
    if value in (0, CU_STREAM_LEGACY):
        ctx = current_ctx()
        if ctx.legacy is None:
            ctx.legacy = _default_stream(ctx, legacy=True)
        return ctx.legacy
    if value == CU_STREAM_PER_THREAD:
        ctx = current_ctx()
        thread = threading.get_ident()
        if thread not in ctx.per_thread:
            ctx.per_thread[thread] = _default_stream(ctx, legacy=False)
        return ctx.per_thread[thread]
    stream = sys_.lookup(value, Stream, "stream")
    raise_if_sticky(stream.ctx)
    return stream


def _default_stream(ctx: Context, *, legacy: bool) -> Stream:
    stream = Stream(0, ctx, 0, legacy=legacy)
    ctx.streams.append(stream)
    return stream
