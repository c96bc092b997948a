"""The enum, handle and struct types of the emulated driver module.

When ``cuda.bindings`` (cuda-python) is importable its own types are used, so code that compares results with
``cuda.bindings.driver.CUresult`` or builds ``CUDA_KERNEL_NODE_PARAMS`` works unchanged against the emulator.
Otherwise small stand-ins with the same names, values and conversions (``int(handle)``, ``getPtr()``) are defined
here. The values are those of the CUDA driver API header ``cuda.h`` (``CUresult``, ``CUdevice_attribute``,
``CUfunction_attribute``, ``CU_LAUNCH_PARAM_*``).
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

try:
    from cuda.bindings import driver as _real
except ImportError:  # cuda-python is an optional dependency of mock-gpu
    _real = None


class _Handle:
    """Stand-in for a cuda-python handle or ``CUdeviceptr``: an integer stored in C memory.

    ``getPtr()`` returns the address of that storage, as cuda-python's objects do, so the ``(values, types)`` form
    of ``kernelParams`` can pass the handle by reference.
    """

    def __init__(self, value: Any = 0) -> None:
        self._storage = ctypes.c_uint64(int(value) if value is not None else 0)

    def __int__(self) -> int:
        return int(self._storage.value)

    def getPtr(self) -> int:  # noqa: N802  (cuda-python's spelling)
        return ctypes.addressof(self._storage)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {int(self):#x}>"


class _FallbackResult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_DEINITIALIZED = 4
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_DEVICE = 101
    CUDA_ERROR_INVALID_IMAGE = 200
    CUDA_ERROR_INVALID_CONTEXT = 201
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209
    CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_NOT_FOUND = 500
    CUDA_ERROR_NOT_READY = 600
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
    CUDA_ERROR_LAUNCH_TIMEOUT = 702
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705
    CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709
    CUDA_ERROR_ASSERT = 710
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715
    CUDA_ERROR_MISALIGNED_ADDRESS = 716
    CUDA_ERROR_LAUNCH_FAILED = 719
    CUDA_ERROR_NOT_SUPPORTED = 801
    CUDA_ERROR_UNKNOWN = 999


class _FallbackDeviceAttribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8
    CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19
    CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82
    CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83
    CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
    CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106


class _FallbackFunctionAttribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_FUNC_ATTRIBUTE_PTX_VERSION = 5
    CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6
    CU_FUNC_ATTRIBUTE_CACHE_MODE_CA = 7
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
    CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9


class _FallbackEventFlags(enum.IntEnum):
    CU_EVENT_DEFAULT = 0
    CU_EVENT_BLOCKING_SYNC = 1
    CU_EVENT_DISABLE_TIMING = 2
    CU_EVENT_INTERPROCESS = 4


class _FallbackStreamFlags(enum.IntEnum):
    CU_STREAM_DEFAULT = 0
    CU_STREAM_NON_BLOCKING = 1


class _FallbackMemoryType(enum.IntEnum):
    CU_MEMORYTYPE_HOST = 1
    CU_MEMORYTYPE_DEVICE = 2
    CU_MEMORYTYPE_ARRAY = 3
    CU_MEMORYTYPE_UNIFIED = 4


class _FallbackMemcpy3D:
    """Stand-in for cuda-python's ``CUDA_MEMCPY3D`` (the fields cuGraphAddMemcpyNode reads for linear copies)."""

    def __init__(self) -> None:
        self.srcXInBytes = self.srcY = self.srcZ = self.dstXInBytes = self.dstY = self.dstZ = 0
        self.srcMemoryType: Any = 0
        self.dstMemoryType: Any = 0
        self.srcHost: Any = 0
        self.dstHost: Any = 0
        self.srcDevice: Any = 0
        self.dstDevice: Any = 0
        self.WidthInBytes = self.Height = self.Depth = 0


class _FallbackKernelNodeParams:
    """Stand-in for cuda-python's ``CUDA_KERNEL_NODE_PARAMS`` (the fields cuGraphAddKernelNode reads)."""

    def __init__(self) -> None:
        self.func: Any = None
        self.gridDimX = self.gridDimY = self.gridDimZ = 0
        self.blockDimX = self.blockDimY = self.blockDimZ = 0
        self.sharedMemBytes = 0
        self.kernelParams: Any = None
        self.extra: Any = 0


class _FallbackCtxCreateParams:
    """Stand-in for ``CUctxCreateParams`` (execution affinity / CIG parameters; the emulator accepts none)."""

    def __init__(self) -> None:
        self.numExecAffinityParams = 0


def _handle_type(name: str) -> type:
    if _real is not None:
        return getattr(_real, name)
    return type(name, (_Handle,), {"__doc__": f"Stand-in for cuda-python's ``{name}`` handle type."})


HAVE_BINDINGS = _real is not None
CUresult: Any = _real.CUresult if _real is not None else _FallbackResult
CUdevice_attribute: Any = _real.CUdevice_attribute if _real is not None else _FallbackDeviceAttribute
CUfunction_attribute: Any = _real.CUfunction_attribute if _real is not None else _FallbackFunctionAttribute
CUevent_flags: Any = _real.CUevent_flags if _real is not None else _FallbackEventFlags
CUstream_flags: Any = _real.CUstream_flags if _real is not None else _FallbackStreamFlags
CUDA_KERNEL_NODE_PARAMS: Any = _real.CUDA_KERNEL_NODE_PARAMS if _real is not None else _FallbackKernelNodeParams
CUmemorytype: Any = _real.CUmemorytype if _real is not None else _FallbackMemoryType
CUDA_MEMCPY3D: Any = _real.CUDA_MEMCPY3D if _real is not None else _FallbackMemcpy3D
CUctxCreateParams: Any = _real.CUctxCreateParams if _real is not None else _FallbackCtxCreateParams
CUdevice: Any = _handle_type("CUdevice")
CUdeviceptr: Any = _handle_type("CUdeviceptr")
CUcontext: Any = _handle_type("CUcontext")
CUstream: Any = _handle_type("CUstream")
CUevent: Any = _handle_type("CUevent")
CUmodule: Any = _handle_type("CUmodule")
CUfunction: Any = _handle_type("CUfunction")
CUgraph: Any = _handle_type("CUgraph")
CUgraphExec: Any = _handle_type("CUgraphExec")
CUgraphNode: Any = _handle_type("CUgraphNode")

# cuda.h: #define CU_LAUNCH_PARAM_END ((void*)0x00), _BUFFER_POINTER ((void*)0x01), _BUFFER_SIZE ((void*)0x02)
CU_LAUNCH_PARAM_END = 0
CU_LAUNCH_PARAM_BUFFER_POINTER = 1
CU_LAUNCH_PARAM_BUFFER_SIZE = 2
# cuda.h: the special stream handles CU_STREAM_LEGACY ((CUstream)0x1) and CU_STREAM_PER_THREAD ((CUstream)0x2)
CU_STREAM_LEGACY = 1
CU_STREAM_PER_THREAD = 2
CU_MEMHOSTALLOC_PORTABLE = 0x01
CU_MEMHOSTALLOC_DEVICEMAP = 0x02
CU_MEMHOSTALLOC_WRITECOMBINED = 0x04
