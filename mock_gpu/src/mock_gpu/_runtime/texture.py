"""Arrays and texture objects of the emulated runtime (CUDA runtime API 6.9 "Memory Management": cudaMalloc3DArray,
cudaFreeArray, cudaMemcpy3D; 6.24 "Texture Object Management") on the driver's arrays and texture objects."""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUarray_format as F
from cuda.bindings.runtime import cudaArray_t, cudaChannelFormatKind, cudaTextureObject_t

from .. import driver as cu
from .._driver.array import Array, make_texture, register_texture
from .._driver.results import logger
from .._driver.system import system
from .state import check, ensure_context, fail, runtime_api

_KIND = cudaChannelFormatKind
_FORMATS = {(_KIND.cudaChannelFormatKindFloat, 32): F.CU_AD_FORMAT_FLOAT,
            (_KIND.cudaChannelFormatKindFloat, 16): F.CU_AD_FORMAT_HALF,
            (_KIND.cudaChannelFormatKindSigned, 8): F.CU_AD_FORMAT_SIGNED_INT8,
            (_KIND.cudaChannelFormatKindSigned, 16): F.CU_AD_FORMAT_SIGNED_INT16,
            (_KIND.cudaChannelFormatKindSigned, 32): F.CU_AD_FORMAT_SIGNED_INT32,
            (_KIND.cudaChannelFormatKindUnsigned, 8): F.CU_AD_FORMAT_UNSIGNED_INT8,
            (_KIND.cudaChannelFormatKindUnsigned, 16): F.CU_AD_FORMAT_UNSIGNED_INT16,
            (_KIND.cudaChannelFormatKindUnsigned, 32): F.CU_AD_FORMAT_UNSIGNED_INT32}


def _fail(name: str, reason: str) -> None:
    logger.error("%s: %s", name, reason)
    raise fail(name)


@runtime_api(1)
def cudaMalloc3DArray(desc: Any, extent: Any, flags: Any = 0) -> tuple:
    """cudaMalloc3DArray(desc, extent, flags=0) -> (cudaError_t, cudaArray_t): an array of ``extent`` elements
    (depth 0: 1-D/2-D) of the cudaChannelFormatDesc's channels; cudaArrayCubemap needs depth 6 per cube."""
    ensure_context()
    bits = [int(desc.x), int(desc.y), int(desc.z), int(desc.w)]
    fmt = _FORMATS.get((desc.f, bits[0]))
    if fmt is None or bits[0] == 0 or any(b not in (0, bits[0]) for b in bits):
        _fail("cudaErrorInvalidChannelDescriptor", f"channel format {desc.f!r} with {bits} bits is not emulated")
    d = cu.CUDA_ARRAY3D_DESCRIPTOR()
    d.Format, d.NumChannels = fmt, sum(1 for b in bits if b)
    d.Width, d.Height, d.Depth, d.Flags = int(extent.width), int(extent.height), int(extent.depth), int(flags)
    return (cudaArray_t(int(check(cu.cuArray3DCreate(d)))),)


@runtime_api(0)
def cudaFreeArray(array: Any) -> tuple:
    """cudaFreeArray(array); freeing NULL does nothing."""
    if int(array or 0):
        check(cu.cuArrayDestroy(cu.CUarray(int(array))))
    return ()


def _side(p: Any, c: Any, prefix: str, kind: str) -> int:
    """Fill ``c``'s ``prefix`` side from cudaMemcpy3DParms' ``kind`` side; returns the element size (1 for memory)."""
    array, pos, ptr = getattr(p, f"{kind}Array"), getattr(p, f"{kind}Pos"), getattr(p, f"{kind}Ptr")
    if int(array or 0):
        arr = system().lookup(array, Array, f"{kind}Array")
        elem = 1 if arr.data is None else arr.data.shape[3] * arr.data.itemsize
        setattr(c, f"{prefix}MemoryType", cu.CUmemorytype.CU_MEMORYTYPE_ARRAY)
        setattr(c, f"{prefix}Array", cu.CUarray(int(array)))
        setattr(c, f"{prefix}XInBytes", int(pos.x) * elem)
    else:
        elem = 1
        setattr(c, f"{prefix}MemoryType", cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED)
        setattr(c, f"{prefix}Device", int(ptr.ptr))
        setattr(c, f"{prefix}Pitch", int(ptr.pitch))
        setattr(c, f"{prefix}Height", int(ptr.ysize))
        setattr(c, f"{prefix}XInBytes", int(pos.x))
    setattr(c, f"{prefix}Y", int(pos.y))
    setattr(c, f"{prefix}Z", int(pos.z))
    return elem


@runtime_api(0)
def cudaMemcpy3D(p: Any) -> tuple:
    """cudaMemcpy3D(p): a cudaMemcpy3DParms copy between arrays and pitched memory, done on return; extent.width is
    in elements when an array takes part, else in bytes."""
    if p is None:
        _fail("cudaErrorInvalidValue", "p is NULL")
    ensure_context()
    c = cu.CUDA_MEMCPY3D()
    elem = max(_side(p, c, "src", "src"), _side(p, c, "dst", "dst"))
    c.WidthInBytes = int(p.extent.width) * elem
    c.Height, c.Depth = int(p.extent.height), int(p.extent.depth)
    check(cu.cuMemcpy3D(c))
    return ()


@runtime_api(1)
def cudaCreateTextureObject(pResDesc: Any, pTexDesc: Any, pResViewDesc: Any) -> tuple:  # noqa: N803
    """cudaCreateTextureObject(pResDesc, pTexDesc, pResViewDesc) -> (cudaError_t, cudaTextureObject_t): a texture
    over an array (cudaResourceTypeArray); other resources and resource views are cudaErrorNotSupported."""
    ensure_context()
    if pResDesc is None or pTexDesc is None:
        _fail("cudaErrorInvalidValue", "pResDesc and pTexDesc must not be NULL")
    if int(pResDesc.resType) != 0 or pResViewDesc is not None:
        _fail("cudaErrorNotSupported", "only array resources without a resource view are emulated")
    arr = system().lookup(pResDesc.res.array.array, Array, "pResDesc.res.array.array")
    t = pTexDesc
    texture = make_texture(arr, list(t.addressMode), int(t.filterMode) == 1, bool(t.normalizedCoords),
                           int(t.readMode) == 1)
    return (cudaTextureObject_t(register_texture(texture)),)


@runtime_api(0)
def cudaDestroyTextureObject(texObject: Any) -> tuple:  # noqa: N803
    """cudaDestroyTextureObject(texObject)."""
    check(cu.cuTexObjectDestroy(cu.CUtexObject(int(texObject))))
    return ()
