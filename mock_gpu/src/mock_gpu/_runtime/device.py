"""Devices, versions and errors of the emulated runtime (CUDA runtime API 6.1 "Device Management", 6.3 "Error
Handling", 6.27 "Version Management"), on the driver emulator's devices and primary contexts."""

from __future__ import annotations

from typing import Any

from cuda.bindings import runtime as _real
from cuda.bindings.runtime import cudaDeviceAttr, cudaDeviceProp

from .. import driver as cu
from .state import (
    check,
    current_device,
    ensure_context,
    initialize,
    primary_context,
    runtime_api,
    select_device,
    take_last_error,
)

# cudaDeviceProp fields whose attribute is named otherwise (CUDA runtime API, cudaDeviceProp vs cudaDeviceAttr)
_PROP_ATTRIBUTE = {
    "sharedMemPerBlock": "MaxSharedMemoryPerBlock", "regsPerBlock": "MaxRegistersPerBlock", "memPitch": "MaxPitch",
    "totalConstMem": "TotalConstantMemory", "major": "ComputeCapabilityMajor", "minor": "ComputeCapabilityMinor",
    "memoryBusWidth": "GlobalMemoryBusWidth", "sharedMemPerMultiprocessor": "MaxSharedMemoryPerMultiprocessor",
    "regsPerMultiprocessor": "MaxRegistersPerMultiprocessor", "sharedMemPerBlockOptin": "MaxSharedMemoryPerBlockOptin",
    "isMultiGpuBoard": "IsMultiGpuBoard", "clockRate": "ClockRate", "memoryClockRate": "MemoryClockRate",
}
_ATTRIBUTES = {member.name.removeprefix("cudaDevAttr").lower(): int(member) for member in cudaDeviceAttr}


def _attribute(name: str) -> int | None:
    key = _PROP_ATTRIBUTE.get(name, name[:1].upper() + name[1:])
    return _ATTRIBUTES.get(key.lower())


@runtime_api(1)
def cudaGetDeviceCount() -> tuple:
    """cudaGetDeviceCount() -> (cudaError_t, int): the number of emulated devices (MOCKGPU_DEVICES)."""
    initialize()
    return (check(cu.cuDeviceGetCount()),)


@runtime_api(0)
def cudaSetDevice(device: Any) -> tuple:
    """cudaSetDevice(device): this thread's device; its primary context becomes current. cudaErrorInvalidDevice
    for an ordinal out of range."""
    select_device(int(device))
    return ()


@runtime_api(1)
def cudaGetDevice() -> tuple:
    """cudaGetDevice() -> (cudaError_t, int): the device of the current context, else the one cudaSetDevice chose."""
    return (current_device(),)


@runtime_api(0)
def cudaSetDeviceFlags(flags: Any) -> tuple:
    """cudaSetDeviceFlags(flags): the primary context flags of this thread's device (cudaDeviceMapHost...); host
    memory is always mapped on the emulator."""
    check(cu.cuDevicePrimaryCtxSetFlags(current_device(), int(flags)))
    return ()


@runtime_api(1)
def cudaGetDeviceFlags() -> tuple:
    """cudaGetDeviceFlags() -> (cudaError_t, int): the flags set by cudaSetDeviceFlags."""
    return (check(cu.cuDevicePrimaryCtxGetState(current_device()))[0],)


@runtime_api(1)
def cudaDeviceGetAttribute(attr: Any, device: Any) -> tuple:
    """cudaDeviceGetAttribute(attr, device) -> (cudaError_t, int): cuDeviceGetAttribute of the same number
    (cudaDeviceAttr values equal CUdevice_attribute values)."""
    initialize()
    return (check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute(int(attr)), int(device))),)


@runtime_api(1)
def cudaGetDeviceProperties(device: Any) -> tuple:
    """cudaGetDeviceProperties(device) -> (cudaError_t, cudaDeviceProp): every field from the device's attributes,
    name, memory size and the thread/grid limits."""
    initialize()
    ordinal = int(device)
    dev = check(cu.cuDeviceGet(ordinal))
    prop = cudaDeviceProp()
    for field in dir(prop):
        attribute = _attribute(field) if not field.startswith("_") else None
        if attribute is not None and isinstance(getattr(prop, field), int):
            setattr(prop, field, check(cu.cuDeviceGetAttribute(cu.CUdevice_attribute(attribute), dev)))
    name = check(cu.cuDeviceGetName(256, dev)).split(b"\x00", 1)[0]
    prop.name = name + b"\x00" * (256 - len(name))
    prop.totalGlobalMem = check(cu.cuDeviceTotalMem(dev))
    A = cu.CUdevice_attribute
    prop.maxThreadsDim = [check(cu.cuDeviceGetAttribute(getattr(A, f"CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_{d}"), dev))
                          for d in "XYZ"]
    prop.maxGridSize = [check(cu.cuDeviceGetAttribute(getattr(A, f"CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_{d}"), dev))
                        for d in "XYZ"]
    return (prop,)


@runtime_api(0)
def cudaDeviceSynchronize() -> tuple:
    """cudaDeviceSynchronize(): wait for all work of the current context (its sticky error, if any)."""
    ensure_context()
    check(cu.cuCtxSynchronize())
    return ()


@runtime_api(0)
def cudaDeviceReset() -> tuple:
    """cudaDeviceReset(): destroy the primary context's resources and clear its error (cuDevicePrimaryCtxReset)."""
    check(cu.cuDevicePrimaryCtxReset(current_device()))
    return ()


@runtime_api(1)
def cudaDeviceCanAccessPeer(device: Any, peerDevice: Any) -> tuple:  # noqa: N803
    """cudaDeviceCanAccessPeer(device, peerDevice) -> (cudaError_t, int)."""
    initialize()
    return (check(cu.cuDeviceCanAccessPeer(int(device), int(peerDevice))),)


@runtime_api(0)
def cudaDeviceEnablePeerAccess(peerDevice: Any, flags: Any) -> tuple:  # noqa: N803
    """cudaDeviceEnablePeerAccess(peerDevice, flags): the current context may access ``peerDevice``'s memory."""
    ensure_context()
    check(cu.cuCtxEnablePeerAccess(primary_context(int(peerDevice)), int(flags)))
    return ()


@runtime_api(0)
def cudaDeviceDisablePeerAccess(peerDevice: Any) -> tuple:  # noqa: N803
    """cudaDeviceDisablePeerAccess(peerDevice)."""
    ensure_context()
    check(cu.cuCtxDisablePeerAccess(primary_context(int(peerDevice))))
    return ()


@runtime_api(1)
def cudaDriverGetVersion() -> tuple:
    """cudaDriverGetVersion() -> (cudaError_t, int): the emulated driver's version (cuDriverGetVersion)."""
    return (check(cu.cuDriverGetVersion()),)


def cudaRuntimeGetVersion() -> tuple:
    """cudaRuntimeGetVersion() -> (cudaError_t, int): the version of the cuda-python runtime bindings."""
    return _real.cudaRuntimeGetVersion()


def cudaGetErrorName(error: Any) -> tuple:
    """cudaGetErrorName(error) -> (cudaError_t, bytes): the runtime's own name (needs no driver)."""
    return _real.cudaGetErrorName(error)


def cudaGetErrorString(error: Any) -> tuple:
    """cudaGetErrorString(error) -> (cudaError_t, bytes): the runtime's own description (needs no driver)."""
    return _real.cudaGetErrorString(error)


def cudaGetLastError() -> tuple:
    """cudaGetLastError() -> (cudaError_t,): this thread's last runtime error, which is then reset."""
    return (take_last_error(reset=True),)


def cudaPeekAtLastError() -> tuple:
    """cudaPeekAtLastError() -> (cudaError_t,): this thread's last runtime error, kept."""
    return (take_last_error(reset=False),)


@runtime_api(2)
def cudaMemGetInfo() -> tuple:
    """cudaMemGetInfo() -> (cudaError_t, free, total) of the current device."""
    ensure_context()
    return check(cu.cuMemGetInfo())


@runtime_api(1)
def cudaOccupancyMaxActiveBlocksPerMultiprocessor(func: Any, blockSize: Any, dynamicSMemSize: Any) -> tuple:  # noqa: N803
    """cudaOccupancyMaxActiveBlocksPerMultiprocessor(func, blockSize, dynamicSMemSize) -> (cudaError_t, int): the
    driver's answer (cuOccupancyMaxActiveBlocksPerMultiprocessor) for ``func``, a CUfunction."""
    ensure_context()
    return (check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, blockSize, dynamicSMemSize)),)



