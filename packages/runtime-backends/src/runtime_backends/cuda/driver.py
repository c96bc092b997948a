"""Access to the CUDA driver API: the one function that picks the driver module, and the one helper that checks
what a driver call returned.

The driver module follows the conventions of NVIDIA's ``cuda.bindings.driver`` (cuda-python): every ``cu*`` function
returns a tuple ``(CUresult, *outputs)``. :func:`driver_module` returns that module, or the emulator ``mock_gpu.driver``
(same names and conventions) when ``MOCKGPU=1``; no other line of the backend knows which one it got.
:func:`check` turns a failed result into a :class:`CUDAError` that names the driver's error, the call, its key
arguments and what to do.
"""

from __future__ import annotations

from typing import Any

from runtime_core.config import MOCKGPU

__all__ = ["CUDAError", "CUDAOutOfMemoryError", "DriverUnavailableError", "check", "driver_module",
           "init_driver", "is_not_ready", "is_success", "make_error", "result_name"]

_NOT_READY = 600  # CUDA_ERROR_NOT_READY: a query whose work is still pending, not a failure


class DriverUnavailableError(RuntimeError):
    """No usable CUDA driver: the bindings are not installed or the driver library cannot be loaded."""


class CUDAError(RuntimeError):
    """A CUDA driver call failed.

    Attributes:
        result: the ``CUresult`` the call returned.
        name: its enum name, e.g. ``"CUDA_ERROR_ILLEGAL_ADDRESS"``.
        call: the driver function, e.g. ``"cuLaunchKernel"``.
    """

    def __init__(self, message: str, *, result: Any, name: str, call: str) -> None:
        super().__init__(message)
        self.result, self.name, self.call = result, name, call


class CUDAOutOfMemoryError(CUDAError, MemoryError):
    """CUDA_ERROR_OUT_OF_MEMORY; a ``MemoryError``, so an ``LRUAllocator`` empties its cache and retries."""


def driver_module() -> Any:
    """The CUDA driver API module: ``mock_gpu.driver`` when ``$MOCKGPU`` is true, else ``cuda.bindings.driver``.

    Raises :class:`DriverUnavailableError` naming what to install when the chosen module cannot be imported, and
    ``runtime_core.config.ConfigError`` when ``$MOCKGPU`` is not a boolean (never a silent choice of driver).
    """
    if MOCKGPU.get():
        try:
            # mypy, run from the repository root, takes the mock_gpu/ project folder for a namespace package
            from mock_gpu import driver as mock  # type: ignore[attr-defined]
        except ImportError as e:
            raise DriverUnavailableError(f"{MOCKGPU.name}=1 selects the emulated GPU, but mock_gpu cannot be imported "
                                         f"({e}); install it with `pip install -e mock_gpu`") from e
        return mock
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise DriverUnavailableError(f"the CUDA driver bindings are not installed ({e}); run `pip install "
                                     f"cuda-bindings`, or set {MOCKGPU.name}=1 to use the emulated GPU") from e
    return driver


def init_driver(cu: Any) -> int:
    """``cuInit(0)`` then ``cuDeviceGetCount``; the number of visible devices.

    Raises :class:`DriverUnavailableError` when the driver library cannot be loaded (the bindings raise their own
    exception then, not a CUresult) or no device is visible, :class:`CUDAError` for other failures.
    """
    try:
        result = cu.cuInit(0)
    except Exception as e:  # cuda-bindings raises when libcuda.so cannot be found
        raise DriverUnavailableError(f"the NVIDIA driver library cannot be loaded ({type(e).__name__}: {e}); install "
                                     f"the NVIDIA driver on a machine with a GPU, or set {MOCKGPU.name}=1 to use the "
                                     f"emulated GPU") from e
    if result_name(cu, result[0]) == "CUDA_ERROR_NO_DEVICE":
        raise DriverUnavailableError("cuInit: no CUDA-capable device is visible; check `nvidia-smi` and "
                                     "$CUDA_VISIBLE_DEVICES")
    check(cu, result, "cuInit", hint="check that the NVIDIA driver is loaded (`nvidia-smi`)")
    count = int(check(cu, cu.cuDeviceGetCount(), "cuDeviceGetCount"))
    if count == 0:
        raise DriverUnavailableError("the driver reports 0 CUDA devices; check `nvidia-smi` and $CUDA_VISIBLE_DEVICES")
    return count


def result_name(cu: Any, result: Any) -> str:
    """The enum name of a ``CUresult`` (``"CUDA_ERROR_INVALID_VALUE"``), from the value itself or the driver."""
    name = getattr(result, "name", None)
    if isinstance(name, str):
        return name
    err, text = cu.cuGetErrorName(result)
    return text.decode() if int(err) == 0 and text else f"CUresult({int(result)})"


def is_success(result: Any) -> bool:
    """Whether a ``CUresult`` is CUDA_SUCCESS (``False`` for CUDA_ERROR_NOT_READY and every error)."""
    return int(result) == 0


def is_not_ready(result: Any) -> bool:
    """Whether a ``CUresult`` is CUDA_ERROR_NOT_READY (cuEventQuery/cuStreamQuery: work still pending)."""
    return int(result) == _NOT_READY


_ADVICE = {
    "CUDA_ERROR_OUT_OF_MEMORY": "free buffers you no longer need or allocate less",
    "CUDA_ERROR_INVALID_VALUE": "an argument is outside what the driver accepts; check the sizes and pointers given",
    "CUDA_ERROR_INVALID_HANDLE": "a handle is stale (its context, module or stream was destroyed); reopen the device",
    "CUDA_ERROR_INVALID_CONTEXT": "the device was finalized or its context released; open the device again",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "a kernel accessed memory outside its buffers; the device's context is now unusable "
                                  "(the driver's report, if any, is in the log); fix the kernel's indexing, then "
                                  "finalize() the device and open it again (Device[name]: a fresh primary context "
                                  "once nothing else holds it) or start a fresh process",
    "CUDA_ERROR_LAUNCH_FAILED": "the kernel faulted (trap, divergent barrier...); the context is now unusable",
    "CUDA_ERROR_INVALID_PTX": "the PTX does not assemble for this device; see the JIT log",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "the PTX ISA version is newer than this driver supports; update the driver "
                                          "or compile with an older toolkit",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the image has no code for this GPU's architecture; compile for its compute "
                                    "capability",
    "CUDA_ERROR_NOT_FOUND": "the named symbol is not in the module; check the kernel name (extern \"C\" avoids C++ "
                            "name mangling)",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the launch needs more registers or shared memory than a block may use; "
                                          "launch smaller blocks",
}


def check(cu: Any, result: tuple, call: str, *, hint: str = "", **args: Any) -> Any:
    """The outputs of a driver call's ``result`` tuple, or raise :class:`CUDAError`.

    ``result`` is what a ``cu*`` function returned: ``(CUresult, *outputs)``. On success this returns the single
    output, a tuple of several, or ``None`` without outputs. On failure the message names the error (``cuGetErrorName``)
    and its description (``cuGetErrorString``), the ``call`` with ``args`` (key arguments, ``name=value``) and what to
    do (``hint``, else advice for that error). CUDA_ERROR_OUT_OF_MEMORY raises :class:`CUDAOutOfMemoryError`.
    """
    err = result[0]
    if is_success(err):
        outputs = result[1:]
        return outputs[0] if len(outputs) == 1 else (outputs or None)
    raise make_error(cu, err, call, hint=hint, **args)


def make_error(cu: Any, err: Any, call: str, *, hint: str = "", **args: Any) -> CUDAError:
    """The :class:`CUDAError` for ``call`` failing with ``err`` (see :func:`check` for the message)."""
    name = result_name(cu, err)
    status, text = cu.cuGetErrorString(err)
    description = text.decode() if is_success(status) and text else "no description"
    shown = ", ".join(f"{k}={_fmt(v)}" for k, v in args.items())
    advice = hint or _ADVICE.get(name, "")
    message = f"{call}({shown}) failed: {name} ({description})" + (f"; {advice}" if advice else "")
    cls = CUDAOutOfMemoryError if name == "CUDA_ERROR_OUT_OF_MEMORY" else CUDAError
    return cls(message, result=err, name=name, call=call)


def _fmt(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0xFFFF:
        return hex(value)
    return repr(value) if isinstance(value, str) else str(value)
