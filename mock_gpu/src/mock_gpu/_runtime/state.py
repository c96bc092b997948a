"""How the emulated runtime sits on the driver emulator, as the CUDA runtime sits on the driver (CUDA runtime API
6.1 "Device Management", "Interactions with the CUDA Driver API"): each thread has a current device (0 until
cudaSetDevice); the first call that needs a context initializes the driver and makes the device's primary context
current, unless a context (for example one from cuCtxCreate) is already current, which the runtime then uses.

Results follow ``cuda.bindings.runtime``: every call returns ``(cudaError_t, *outputs)`` with ``None`` outputs on
failure. A driver failure maps to the ``cudaError_t`` of the same number (the CUDA runtime numbers its errors as the
driver does since CUDA 11), and is remembered for cudaGetLastError / cudaPeekAtLastError.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from cuda.bindings.runtime import cudaError_t

from .. import driver as cu
from .._driver.results import REPORTS, DriverError

_local = threading.local()
_retained: set[int] = set()  # devices whose primary context the runtime holds (released never, as the runtime does)
_lock = threading.Lock()


class RuntimeFailure(Exception):
    """A runtime call failed with ``error`` (a cudaError_t)."""

    def __init__(self, error: cudaError_t) -> None:
        super().__init__(error.name)
        self.error = error


def runtime_error(result: Any) -> cudaError_t:
    """The cudaError_t of the same number as a driver CUresult (cudaErrorUnknown for one without a twin)."""
    try:
        return cudaError_t(int(result))
    except ValueError:
        return cudaError_t.cudaErrorUnknown


def check(result: tuple) -> Any:
    """The outputs of a driver call (one value, a tuple of several, or None), or raise :class:`RuntimeFailure`."""
    if int(result[0]) != 0:
        raise RuntimeFailure(runtime_error(result[0]))
    outputs = result[1:]
    return outputs[0] if len(outputs) == 1 else (outputs or None)


def fail(name: str) -> RuntimeFailure:
    """A :class:`RuntimeFailure` for the cudaError_t member ``name`` (e.g. ``"cudaErrorInvalidValue"``)."""
    return RuntimeFailure(getattr(cudaError_t, name))


def runtime_api(outputs: int) -> Callable[[Callable[..., tuple]], Callable[..., tuple]]:
    """Give a runtime function the ``(cudaError_t, *outputs)`` convention and record its error for
    cudaGetLastError (CUDA runtime API 6.3 "Error Handling")."""

    def wrap(fn: Callable[..., tuple]) -> Callable[..., tuple]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> tuple:
            try:
                values = fn(*args, **kwargs)
            except RuntimeFailure as exc:
                _local.last_error = exc.error
                return (exc.error, *([None] * outputs))
            except DriverError as exc:  # a driver object looked up directly (an array, a stream) was stale
                REPORTS.record(exc, fn.__name__)
                _local.last_error = runtime_error(exc.result)
                return (_local.last_error, *([None] * outputs))
            return (cudaError_t.cudaSuccess, *values)

        return call

    return wrap


def take_last_error(*, reset: bool) -> cudaError_t:
    """This thread's last runtime error (cudaSuccess if none); ``reset`` clears it (cudaGetLastError)."""
    error = getattr(_local, "last_error", cudaError_t.cudaSuccess)
    if reset:
        _local.last_error = cudaError_t.cudaSuccess
    return error


def initialize() -> None:
    """cuInit(0), once per process (the runtime's lazy initialization)."""
    check(cu.cuInit(0))


def current_device() -> int:
    """This thread's device: that of the current context if there is one, else the one cudaSetDevice chose."""
    initialize()
    ctx = check(cu.cuCtxGetCurrent())
    if int(ctx) != 0:
        return int(check(cu.cuCtxGetDevice()))
    return getattr(_local, "device", 0)


def primary_context(ordinal: int) -> Any:
    """The primary context of device ``ordinal``, retained once by the runtime."""
    initialize()
    with _lock:
        ctx = check(cu.cuDevicePrimaryCtxRetain(ordinal))
        if ordinal in _retained:
            check(cu.cuDevicePrimaryCtxRelease(ordinal))
        _retained.add(ordinal)
    return ctx


def ensure_context() -> None:
    """Make sure a context is current: the one already current, else the primary context of this thread's device."""
    initialize()
    if int(check(cu.cuCtxGetCurrent())) == 0:
        check(cu.cuCtxSetCurrent(primary_context(getattr(_local, "device", 0))))


def select_device(ordinal: int) -> None:
    """cudaSetDevice: this thread's device becomes ``ordinal`` and its primary context current."""
    initialize()
    count = check(cu.cuDeviceGetCount())
    if not 0 <= ordinal < count:
        raise fail("cudaErrorInvalidDevice")
    check(cu.cuCtxSetCurrent(primary_context(ordinal)))
    _local.device = ordinal




def reset() -> None:
    """Forget the runtime's retained primary contexts and this thread's device and error (mock_gpu.reset)."""
    with _lock:
        _retained.clear()
    _local.__dict__.clear()
