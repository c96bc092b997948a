"""Driver errors of the emulator: the exception that carries a ``CUresult`` and the record of the last report.

Every ``mock_gpu.driver`` function returns a ``CUresult`` (as ``cuda.bindings.driver`` does) instead of raising.
Internally a failing call raises :class:`DriverError`; the API wrapper turns it into the result code, logs its report
through the ``mock_gpu`` logger and keeps the report for :func:`last_error_report`, because a bare code such as
``CUDA_ERROR_ILLEGAL_ADDRESS`` does not say which kernel, thread and address failed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from cuda.bindings.driver import CUresult

logger = logging.getLogger("mock_gpu")

# The descriptions cuGetErrorString returns (CUDA driver API, "Error Handling") for the codes the emulator produces
# and for the codes the runtime API has no text for; the others are the runtime's (cudaGetErrorString).
ERROR_STRINGS: dict[str, str] = {
    "CUDA_SUCCESS": "no error",
    "CUDA_ERROR_INVALID_VALUE": "invalid argument",
    "CUDA_ERROR_OUT_OF_MEMORY": "out of memory",
    "CUDA_ERROR_NOT_INITIALIZED": "initialization error",
    "CUDA_ERROR_DEINITIALIZED": "driver shutting down",
    "CUDA_ERROR_NO_DEVICE": "no CUDA-capable device is detected",
    "CUDA_ERROR_INVALID_DEVICE": "invalid device ordinal",
    "CUDA_ERROR_INVALID_IMAGE": "device kernel image is invalid",
    "CUDA_ERROR_INVALID_CONTEXT": "invalid device context",
    "CUDA_ERROR_CONTEXT_ALREADY_CURRENT": "context already current",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "no kernel image is available for execution on the device",
    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED": "peer access is not supported between these two devices",
    "CUDA_ERROR_INVALID_PTX": "a PTX JIT compilation failed",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the provided PTX was compiled with an unsupported toolchain.",
    "CUDA_ERROR_INVALID_HANDLE": "invalid resource handle",
    "CUDA_ERROR_NOT_FOUND": "named symbol not found",
    "CUDA_ERROR_NOT_READY": "device not ready",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access was encountered",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "too many resources requested for launch",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "the launch timed out and was terminated",
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": "peer access is already enabled",
    "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED": "peer access has not been enabled",
    "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE": "cannot set while device is active in this process",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED": "context is destroyed",
    "CUDA_ERROR_ASSERT": "device-side assert triggered",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": "an illegal instruction was encountered",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "misaligned address",
    "CUDA_ERROR_LAUNCH_FAILED": "unspecified launch failure",
    "CUDA_ERROR_NOT_SUPPORTED": "operation not supported",
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": "operation not permitted when stream is capturing",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED": "operation failed due to a previous error during capture",
    "CUDA_ERROR_KEY_ROTATION": "an error happened during the key rotation sequence",
    "CUDA_ERROR_UNKNOWN": "unknown error",
}


class DriverError(Exception):
    """A driver call failed with ``result`` (a ``CUresult``); ``report`` says what, with which values, and what to do.

    ``severe`` errors (faults inside kernels, PTX rejected at load, bad configuration) are logged at ERROR level;
    the others (an unknown handle, a repeated peer enable...) at DEBUG, since callers probe with them.
    """

    def __init__(self, result: Any, report: str, *, severe: bool = False) -> None:
        super().__init__(report)
        self.result = result
        self.report = report
        self.severe = severe


def error(name: str, report: str, *, severe: bool = False) -> DriverError:
    """Build a :class:`DriverError` for the ``CUresult`` member called ``name`` (e.g. ``"CUDA_ERROR_INVALID_VALUE"``)."""
    return DriverError(getattr(CUresult, name), report, severe=severe)


class _ReportLog:
    """The report of the most recent failed driver call in this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[Any, str] | None = None

    def record(self, err: DriverError, function: str) -> None:
        text = f"{function}: {result_name(err.result)}: {err.report}"
        with self._lock:
            self._last = (err.result, text)
        logger.log(logging.ERROR if err.severe else logging.DEBUG, "%s", text)

    def last(self) -> tuple[Any, str] | None:
        with self._lock:
            return self._last

    def clear(self) -> None:
        with self._lock:
            self._last = None


REPORTS = _ReportLog()


def result_name(result: Any) -> str:
    """The enum name of a ``CUresult`` value (``"CUDA_ERROR_ILLEGAL_ADDRESS"``), or ``"CUresult(<n>)"`` if unknown."""
    try:
        return str(CUresult(int(result)).name)
    except ValueError:
        return f"CUresult({int(result)})"


def last_error_report() -> str | None:
    """The report of the most recent failed ``mock_gpu.driver`` call, or ``None`` if none failed since the last reset.

    The text starts with the driver function and the ``CUresult`` name, e.g. ``"cuStreamSynchronize:
    CUDA_ERROR_ILLEGAL_ADDRESS: memcheck: illegal global memory access (out-of-bounds) in kernel 'k', block (0, 0,
    0), thread (37, 0, 0) ..."``. A kernel fault's report is the memcheck report of the PTX interpreter. Backends
    need not call this: the same report is logged on the ``mock_gpu`` logger.
    """
    last = REPORTS.last()
    return None if last is None else last[1]


class NotEmulatedError(NotImplementedError):
    """A CUDA API function that mock_gpu does not emulate was called (raised at the call, not at the lookup, so that
    a program that only references it still imports)."""


def not_emulated(module: str, name: str) -> Any:
    """A stand-in for the real ``module.name`` function that raises :class:`NotEmulatedError` when called."""

    def call(*args: Any, **kwargs: Any) -> Any:
        raise NotEmulatedError(f"{module}.{name} is not emulated by mock_gpu (it needs a real GPU driver); see "
                               "mock_gpu/README.md for what is emulated")

    call.__name__ = call.__qualname__ = name
    return call


def pass_through(real: Any, module: str, name: str) -> Any:
    """What a mock module answers for a name it does not define: the real module's types, enums, structs and
    constants as they are; a real API function (``cu*``/``cuda*``) as a :func:`not_emulated` stand-in; otherwise
    AttributeError."""
    if name.startswith("__") or not hasattr(real, name):
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    value = getattr(real, name)
    if callable(value) and not isinstance(value, type) and name.startswith("cu"):
        return not_emulated(module, name)
    return value
