"""Devices: count, ordinals, names, attributes, memory size (CUDA driver API 6.5 "Device Management")."""

from __future__ import annotations

import ctypes
from typing import Any

from cuda.bindings.driver import CUdevice, CUdevice_attribute, CUuuid

from ..config import MAX_BLOCK_DIM, MAX_GRID_DIM, MAX_THREADS_PER_BLOCK, SHARED_PER_BLOCK, WARP_SIZE
from .handles import Device
from .results import error
from .system import api, system


@api(1)
def cuDeviceGetCount() -> tuple:
    """cuDeviceGetCount() -> (CUresult, int): number of emulated devices (MOCKGPU_DEVICES)."""
    return (len(system().devices),)


@api(1)
def cuDeviceGet(ordinal: int) -> tuple:
    """cuDeviceGet(ordinal) -> (CUresult, CUdevice); CUDA_ERROR_INVALID_DEVICE for an ordinal out of range."""
    return (CUdevice(system().device(ordinal).ordinal),)


@api(1)
def cuDeviceGetName(length: int, dev: Any) -> tuple:
    """cuDeviceGetName(length, dev) -> (CUresult, bytes): the name, NUL-terminated, in a buffer of ``length`` bytes.

    As in cuda-python the returned bytes are ``length`` long (name, NUL, then the buffer's initial spaces); a name
    longer than ``length - 1`` is truncated (CUDA driver API, cuDeviceGetName).
    """
    device = system().device(dev)
    if length <= 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuDeviceGetName length must be positive, got {length}")
    name = f"{device.arch.name} (mock_gpu)".encode()[: length - 1] + b"\x00"
    return (name + b" " * (length - len(name)),)


def _attributes(device: Device) -> dict[int, int]:
    a = device.arch
    A = CUdevice_attribute
    values = {
        A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: MAX_THREADS_PER_BLOCK,
        A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: MAX_BLOCK_DIM[0], A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: MAX_BLOCK_DIM[1],
        A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: MAX_BLOCK_DIM[2], A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: MAX_GRID_DIM[0],
        A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: MAX_GRID_DIM[1], A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: MAX_GRID_DIM[2],
        A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: SHARED_PER_BLOCK,
        A.CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: 65536, A.CU_DEVICE_ATTRIBUTE_WARP_SIZE: WARP_SIZE,
        A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: 65536, A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE: 1_500_000,
        A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: a.sm_count, A.CU_DEVICE_ATTRIBUTE_INTEGRATED: 0,
        A.CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: 1, A.CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: 1,
        A.CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: device.ordinal + 1, A.CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: 0,
        A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: 1_500_000, A.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: 5120,
        A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: 50 << 20,
        A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: a.threads_per_sm,
        A.CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: 1, A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: a.major,
        A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: a.minor,
        A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: a.smem_per_sm,
        A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: 65536, A.CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: 0,
        A.CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: 0, A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: a.smem_optin,
        A.CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: 32,
        A.CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: 1, A.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: 1,
        A.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: 1, A.CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: 1,
        A.CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: 1, A.CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: 1,
        A.CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: 2, A.CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: 1,
        A.CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: 1, A.CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: 1,
        A.CU_DEVICE_ATTRIBUTE_MAX_PITCH: (1 << 31) - 1, A.CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: 512,
        A.CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: 32, A.CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: 512,
        A.CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: 1024,
        A.CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: 1, A.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: 1,
    }
    # every other attribute (texture limits, surfaces, clusters, IPC, NUMA, ECC...) describes what the
    # emulator does not do: 0 (CUDA driver API, cuDeviceGetAttribute: 0 means "not supported")
    table = dict.fromkeys((int(member) for member in A), 0)
    table.update({int(k): v for k, v in values.items()})
    table.pop(int(A.CU_DEVICE_ATTRIBUTE_MAX), None)
    return table


@api(1)
def cuDeviceGetAttribute(attrib: Any, dev: Any) -> tuple:
    """cuDeviceGetAttribute(attrib, dev) -> (CUresult, int) (CUDA driver API, Device Management).

    Every attribute answers: the thread/block/grid limits, warp size, SM count, shared memory per block (+ opt-in)
    and per SM, compute capability, unified addressing, managed memory, memory pools, virtual memory management and
    a few descriptive values (clock, bus width, L2), cooperative launch; 0 for what the emulator does not support
    (texture limits, clusters, IPC...). A value outside CUdevice_attribute is CUDA_ERROR_INVALID_VALUE.
    """
    table = _attributes(system().device(dev))
    if int(attrib) not in table:
        raise error("CUDA_ERROR_INVALID_VALUE", f"device attribute {attrib!r} is not emulated by mock_gpu")
    return (table[int(attrib)],)


@api(1)
def cuDeviceGetUuid(dev: Any) -> tuple:
    """cuDeviceGetUuid(dev) -> (CUresult, CUuuid): a fixed 16-byte id per device ordinal."""
    device = system().device(dev)
    if device.uuid is None:
        device.uuid = ctypes.create_string_buffer(b"mock_gpu-dev" + device.ordinal.to_bytes(4, "little"), 16)
    return (CUuuid(ctypes.addressof(device.uuid)),)


@api(1)
def cuDeviceGetPCIBusId(length: Any, dev: Any) -> tuple:
    """cuDeviceGetPCIBusId(length, dev) -> (CUresult, bytes): ``0000:XX:00.0`` with the attribute's bus id."""
    device = system().device(dev)
    text = f"0000:{device.ordinal + 1:02x}:00.0".encode()[: int(length) - 1]
    return (text + b"\x00" * (int(length) - len(text)),)


@api(2)
def cuDeviceComputeCapability(dev: Any) -> tuple:
    """cuDeviceComputeCapability(dev) -> (CUresult, major, minor) (deprecated in CUDA; kept for old backends)."""
    arch = system().device(dev).arch
    return (arch.major, arch.minor)


@api(1)
def cuDeviceTotalMem(dev: Any) -> tuple:
    """cuDeviceTotalMem(dev) -> (CUresult, int): device memory in bytes (MOCKGPU_MEMORY)."""
    return (system().device(dev).memory,)
