"""CUDA arrays as bookkeeping (CUDA driver API 6.13 "Memory Management": cuArrayCreate, cuArray3DCreate,
cuArrayGetDescriptor, cuArrayDestroy): descriptors are validated and arrays get handles, but the emulator has no
texture units: copies to arrays and texture fetches from them are not emulated (tex is rejected at PTX load)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cuda.bindings.driver import CUarray, CUarray_format

from .results import error
from .system import api, current_ctx, system

_FORMATS = {int(f) for f in CUarray_format}


@dataclass(eq=False)
class Array:
    """A CUDA array: its descriptor."""

    handle: int
    descriptor: Any


def _format(desc: Any) -> int | None:
    try:
        return int(desc.Format)
    except ValueError:  # an unset Format (0) is no CUarray_format member: cuda-python cannot even read it back
        return None


def _check(desc: Any, dims: tuple[int, ...]) -> None:
    if desc is None or _format(desc) not in _FORMATS or int(desc.NumChannels) not in (1, 2, 4) or dims[0] == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "the array descriptor needs a CUarray_format, 1, 2 or 4 channels and "
                    "a width > 0")


@api(1)
def cuArrayCreate(pAllocateArray: Any) -> tuple:  # noqa: N803
    """cuArrayCreate(pAllocateArray) -> (CUresult, CUarray): a 1-D/2-D array; CUDA_ERROR_INVALID_VALUE for an
    incomplete descriptor, CUDA_ERROR_INVALID_CONTEXT without a current context."""
    current_ctx()
    _check(pAllocateArray, (int(pAllocateArray.Width),) if pAllocateArray is not None else (0,))
    sys_ = system()
    return (CUarray(sys_.register(Array(sys_.new_handle(), pAllocateArray)).handle),)


@api(1)
def cuArray3DCreate(pAllocateArray: Any) -> tuple:  # noqa: N803
    """cuArray3DCreate(pAllocateArray) -> (CUresult, CUarray): as cuArrayCreate for a CUDA_ARRAY3D_DESCRIPTOR."""
    current_ctx()
    _check(pAllocateArray, (int(pAllocateArray.Width),) if pAllocateArray is not None else (0,))
    sys_ = system()
    return (CUarray(sys_.register(Array(sys_.new_handle(), pAllocateArray)).handle),)


@api(0)
def cuArrayDestroy(hArray: Any) -> tuple:  # noqa: N803
    """cuArrayDestroy(hArray)."""
    sys_ = system()
    del sys_.objects[sys_.lookup(hArray, Array, "array").handle]
    return ()
