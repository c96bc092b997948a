"""Initialization, version and error descriptions (CUDA driver API 6.2 "Error Handling", 6.3 "Initialization",
6.4 "Version Management")."""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUresult
from cuda.bindings.runtime import cudaError_t, cudaGetErrorString

from ..config import ConfigError, load_config
from .handles import System
from .results import ERROR_STRINGS, error, logger
from .system import api, get_system_or_none, set_system

DRIVER_VERSION = 12080  # reported by cuDriverGetVersion: CUDA 12.8 (1000 * major + 10 * minor)


@api(0)
def cuInit(Flags: int) -> tuple:  # noqa: N803  (the driver API's parameter names)
    """cuInit(Flags): initialize the driver (CUDA driver API, Initialization, cuInit). ``Flags`` must be 0.

    Reads MOCKGPU_DEVICES / MOCKGPU_ARCH / MOCKGPU_MEMORY (see :mod:`mock_gpu.config`) on the first call; later
    calls have no effect. An invalid variable gives CUDA_ERROR_INVALID_VALUE with the reason in the report.
    """
    if Flags != 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuInit Flags must be 0, got {Flags}")
    if get_system_or_none() is None:
        try:
            config = load_config()
        except ConfigError as exc:
            raise error("CUDA_ERROR_INVALID_VALUE", str(exc), severe=True) from exc
        set_system(System(config))
    return ()


@api(1)
def cuDriverGetVersion() -> tuple:
    """cuDriverGetVersion() -> (CUresult, int): the emulated driver version, 12080 (CUDA 12.8); needs no cuInit."""
    return (DRIVER_VERSION,)


def _result_member(error_code: Any) -> Any:
    try:
        return CUresult(int(error_code))
    except ValueError:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{error_code!r} is not a CUresult value") from None


@api(1)
def cuGetErrorName(error: Any) -> tuple:
    """cuGetErrorName(error) -> (CUresult, bytes): the enum name, e.g. b"CUDA_ERROR_ILLEGAL_ADDRESS"."""
    return (_result_member(error).name.encode(),)


@api(1)
def cuGetErrorString(error: Any) -> tuple:
    """cuGetErrorString(error) -> (CUresult, bytes): the driver's description, e.g. b"invalid argument".

    The texts are the driver's own (CUDA driver API 6.2 "Error Handling"): the table ``ERROR_STRINGS``, else the
    runtime's text for the same code (cudaError_t numbers equal CUresult numbers since CUDA 11, and cuda-python's
    runtime carries the strings without a driver). The emulator's report of a failure is not part of it: it is on
    the ``mock_gpu`` logger and :func:`mock_gpu.last_error_report`.
    """
    member = _result_member(error)
    text = ERROR_STRINGS.get(member.name)
    if text is None:
        try:
            status, runtime_text = cudaGetErrorString(cudaError_t(int(member)))
        except ValueError:
            status, runtime_text = None, None
        text = runtime_text.decode() if status == cudaError_t.cudaSuccess else _documented(member)
    return (text.encode(),)


def _documented(member: Any) -> str:
    """The first sentence of the header's description of a CUresult that neither the table nor the runtime has a
    text for (a code newer than both); logged, since the driver's own wording is unknown."""
    words = " ".join((member.__doc__ or "").split())
    text = words.split(". ")[0].rstrip(".") or "unknown error"
    logger.debug("cuGetErrorString(%s): no driver text is known; using its documented description", member.name)
    return text[0].lower() + text[1:]
