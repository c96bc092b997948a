"""CUDA arrays and texture objects (CUDA driver API 6.13 "Memory Management": cuArrayCreate, cuArray3DCreate,
cuArrayGetDescriptor, cuArrayDestroy, cuMemcpy3D; 6.27 "Texture Object Management"). An array holds its texels in a
numpy array of shape (layers or depth, height, width, channels); a texture object binds an array to the sampler
state of its CUDA_TEXTURE_DESC, and kernels fetch from it with PTX ``tex`` (:mod:`mock_gpu.texture`)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np
from cuda.bindings.driver import (
    CUDA_MEMCPY2D,
    CUDA_RESOURCE_DESC,
    CUDA_TEXTURE_DESC,
    CUarray,
    CUarray_format,
    CUmemorytype,
    CUresourcetype,
    CUtexObject,
)

from ..address_space import MemoryFault
from ..texture import Texture
from .handles import handle_value
from .marshal import enum_field, host_range, struct_arg
from .memory import charge
from .results import error
from .system import api, current_ctx, resolve_stream, system
from .work import synchronize_context

_FORMATS = {int(f) for f in CUarray_format}
_DTYPES = {CUarray_format.CU_AD_FORMAT_UNSIGNED_INT8: np.uint8, CUarray_format.CU_AD_FORMAT_UNSIGNED_INT16: np.uint16,
           CUarray_format.CU_AD_FORMAT_UNSIGNED_INT32: np.uint32, CUarray_format.CU_AD_FORMAT_SIGNED_INT8: np.int8,
           CUarray_format.CU_AD_FORMAT_SIGNED_INT16: np.int16, CUarray_format.CU_AD_FORMAT_SIGNED_INT32: np.int32,
           CUarray_format.CU_AD_FORMAT_HALF: np.float16, CUarray_format.CU_AD_FORMAT_FLOAT: np.float32}
LAYERED, CUBEMAP = 0x01, 0x04  # CUDA_ARRAY3D_LAYERED, CUDA_ARRAY3D_CUBEMAP
_MAX_EXTENT = 1 << 17  # texels per dimension at most (above every CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE* of sm_90)


@dataclass(eq=False)
class Array:
    """A CUDA array: its descriptor, flags and texels (None for a format the emulator does not sample), and the
    ``device`` whose memory its ``nbytes`` count against."""

    handle: int
    descriptor: Any
    flags: int
    data: np.ndarray | None
    device: int
    nbytes: int


def _format(desc: Any) -> int | None:
    try:
        return int(desc.Format)
    except ValueError:  # an unset Format (0) is no CUarray_format member: cuda-python cannot even read it back
        return None


def _check(desc: Any, dims: tuple[int, ...]) -> None:
    if desc is None or _format(desc) not in _FORMATS or int(desc.NumChannels) not in (1, 2, 4) or dims[0] == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "the array descriptor needs a CUarray_format, 1, 2 or 4 channels and "
                    "a width > 0")


def _create(desc: Any, depth: int, flags: int) -> tuple:
    current_ctx()
    _check(desc, (int(desc.Width),) if desc is not None else (0,))
    if flags & CUBEMAP and (int(desc.Width) != int(desc.Height) or depth % 6):
        raise error("CUDA_ERROR_INVALID_VALUE", "a cubemap array needs Width == Height and Depth a multiple of 6")
    dtype = _DTYPES.get(CUarray_format(_format(desc)))
    shape = (max(depth, 1), max(int(desc.Height), 1), int(desc.Width), int(desc.NumChannels))
    if min(shape) < 0 or max(shape[:3]) > _MAX_EXTENT:
        raise error("CUDA_ERROR_INVALID_VALUE", f"array extent {shape[2]} x {shape[1]} x {shape[0]} is outside "
                    f"1..{_MAX_EXTENT} (CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE*)")
    nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype or np.uint32).itemsize
    device = current_ctx().device.ordinal
    charge(device, nbytes)
    try:
        data = None if dtype is None else np.zeros(shape, dtype)
    except MemoryError:
        system().space.refund(device, nbytes)
        raise error("CUDA_ERROR_OUT_OF_MEMORY", f"the host cannot hold the emulated array's {nbytes} bytes") from None
    sys_ = system()
    return (CUarray(sys_.register(Array(sys_.new_handle(), desc, flags, data, device, nbytes)).handle),)


@api(1)
def cuArrayCreate(pAllocateArray: Any) -> tuple:  # noqa: N803
    """cuArrayCreate(pAllocateArray) -> (CUresult, CUarray): a 1-D/2-D array; CUDA_ERROR_INVALID_VALUE for an
    incomplete descriptor, CUDA_ERROR_INVALID_CONTEXT without a current context."""
    return _create(pAllocateArray, 1, 0)


@api(1)
def cuArray3DCreate(pAllocateArray: Any) -> tuple:  # noqa: N803
    """cuArray3DCreate(pAllocateArray) -> (CUresult, CUarray): as cuArrayCreate for a CUDA_ARRAY3D_DESCRIPTOR
    (Depth: depth, layers, or 6 faces per cube with CUDA_ARRAY3D_CUBEMAP)."""
    if pAllocateArray is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "pAllocateArray is NULL")
    return _create(pAllocateArray, int(pAllocateArray.Depth), int(pAllocateArray.Flags))


@api(0)
def cuArrayDestroy(hArray: Any) -> tuple:  # noqa: N803
    """cuArrayDestroy(hArray): its memory no longer counts as used (cuMemGetInfo)."""
    sys_ = system()
    arr = sys_.lookup(hArray, Array, "array")
    del sys_.objects[arr.handle]
    sys_.space.refund(arr.device, arr.nbytes)
    return ()


_MAX_SPAN = 1 << 47  # bytes: no host or device buffer of this emulator is larger; a bigger span is a bad pitch


@dataclass(frozen=True)
class _Side:
    """One side of a 3-D copy: ``target`` (a flat uint8 view of an array, or an address), the byte offset of its
    first row, its row pitch and rows per slice (bytes, rows)."""

    target: Any
    first: int
    pitch: int
    rows: int

    def at(self, y: int, z: int) -> int:
        return self.first + self.pitch * (y + self.rows * z)


def _side(p: Any, what: str, width: int, height: int, depth: int, writable: bool) -> _Side:
    """One side of ``p`` (CUDA_MEMCPY3D, ``what`` = "src"/"dst"), bounds-checked for ``height`` rows of ``width``
    bytes in each of ``depth`` slices: CUDA_ERROR_INVALID_VALUE for a copy outside an array or a device allocation,
    a pitch below the width, a NULL host pointer or a host buffer too short for it."""
    kind = enum_field(p, f"{what}MemoryType")
    x, y, z = (int(getattr(p, f"{what}{f}")) for f in ("XInBytes", "Y", "Z"))
    if min(x, y, z) < 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what} position ({x}, {y}, {z}) is negative")
    if kind == CUmemorytype.CU_MEMORYTYPE_ARRAY:
        arr = system().lookup(getattr(p, f"{what}Array"), Array, f"{what}Array")
        if arr.data is None:
            raise error("CUDA_ERROR_NOT_SUPPORTED", f"copies to arrays of format {arr.descriptor.Format!r}")
        row = arr.data.shape[2] * arr.data.shape[3] * arr.data.itemsize
        if x + width > row or y + height > arr.data.shape[1] or z + depth > arr.data.shape[0]:
            raise error("CUDA_ERROR_INVALID_VALUE", f"the copy ({width} bytes x {height} rows x {depth} slices at "
                        f"({x}, {y}, {z})) does not fit {what}Array ({row} bytes x {arr.data.shape[1]} rows x "
                        f"{arr.data.shape[0]} slices)")
        return _Side(arr.data.reshape(-1).view(np.uint8), x + row * (y + arr.data.shape[1] * z), row, arr.data.shape[1])
    pitch, rows = int(getattr(p, f"{what}Pitch")), int(getattr(p, f"{what}Height"))
    if (height > 1 or depth > 1) and pitch < width:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what}Pitch {pitch} is below WidthInBytes {width}")
    if depth > 1 and rows < height:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{what}Height {rows} is below Height {height}")
    side = _Side(0, x + pitch * (y + rows * z), pitch, rows)
    span = side.at(height - 1, depth - 1) + width
    if span > _MAX_SPAN:
        raise error("CUDA_ERROR_INVALID_VALUE", f"the {what} side spans {span} bytes: a pitch or height is wrong")
    if kind == CUmemorytype.CU_MEMORYTYPE_HOST:
        address = host_range(getattr(p, f"{what}Host"), f"{what}Host", span, writable=writable)
    else:
        address = handle_value(getattr(p, f"{what}Device"))
    if address == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"the {what} pointer is NULL")
    unified_host = kind == CUmemorytype.CU_MEMORYTYPE_UNIFIED and system().space.allocation(address) is None
    if kind != CUmemorytype.CU_MEMORYTYPE_HOST and not unified_host:  # device memory: every byte mapped
        try:
            system().space.check(address, span)
        except MemoryFault as e:
            raise error("CUDA_ERROR_INVALID_VALUE", f"{what}Device: {e}") from None
    return _Side(address, side.first, pitch, rows)


def _move(dst: Any, dst_at: int, src: Any, src_at: int, n: int) -> None:
    space = system().space
    if isinstance(src, np.ndarray):
        data = src[src_at:src_at + n].tobytes()
    elif space.allocation(src + src_at) is not None:
        data = space.read(src + src_at, n)
    else:  # host memory, checked by _side
        data = ctypes.string_at(src + src_at, n)
    if isinstance(dst, np.ndarray):
        dst[dst_at:dst_at + n] = np.frombuffer(data, np.uint8)
    elif space.allocation(dst + dst_at) is not None:
        space.write(dst + dst_at, data)
    else:
        ctypes.memmove(dst + dst_at, data, n)


@api(0)
def cuMemcpy3D(pCopy: Any) -> tuple:  # noqa: N803
    """cuMemcpy3D(pCopy): a 3-D copy between host memory, device memory and arrays (CUDA_MEMCPY3D), done on return
    (the context's earlier work runs first). Both sides are checked before a byte moves: CUDA_ERROR_INVALID_VALUE for
    a NULL pCopy, a negative size, a copy past an array's or a device allocation's end, a pitch below the width, a
    NULL host pointer or a host buffer of known length too short (see ``_side``)."""
    if pCopy is None:
        raise error("CUDA_ERROR_INVALID_VALUE", "pCopy is NULL")
    return _copy(pCopy)


def _copy(p: Any) -> tuple:
    """Do the copy ``p`` (a CUDA_MEMCPY3D or what reads like one) describes, after the context's earlier work."""
    width, height, depth = int(p.WidthInBytes), max(int(p.Height), 1), max(int(p.Depth), 1)
    if width < 0 or int(p.Height) < 0 or int(p.Depth) < 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"negative extent ({width}, {int(p.Height)}, {int(p.Depth)})")
    if width == 0:
        return ()
    src = _side(p, "src", width, height, depth, writable=False)
    dst = _side(p, "dst", width, height, depth, writable=True)
    synchronize_context(current_ctx())
    for z in range(depth):
        for y in range(height):
            _move(dst.target, dst.at(y, z), src.target, src.at(y, z), width)
    return ()


class _OneSlice:
    """A CUDA_MEMCPY2D read as the CUDA_MEMCPY3D of a single slice: no Z offsets, ``Height`` rows per slice."""

    def __init__(self, copy: Any) -> None:
        self._copy = copy

    def __getattr__(self, name: str) -> Any:
        if name in ("srcZ", "dstZ"):
            return 0
        if name in ("srcHeight", "dstHeight"):
            return self._copy.Height
        if name == "Depth":
            return 1
        return getattr(self._copy, name)


def _copy_2d(pCopy: Any) -> tuple:  # noqa: N803
    return _copy(_OneSlice(struct_arg(pCopy, CUDA_MEMCPY2D, "pCopy")))


@api(0)
def cuMemcpy2D(pCopy: Any) -> tuple:  # noqa: N803
    """cuMemcpy2D(pCopy): a copy of ``pCopy.Height`` rows of ``WidthInBytes`` bytes (CUDA_MEMCPY2D) between host
    memory, device memory and arrays, each side with its own pitch; checked and done as cuMemcpy3D does."""
    return _copy_2d(pCopy)


@api(0)
def cuMemcpy2DUnaligned(pCopy: Any) -> tuple:  # noqa: N803
    """cuMemcpy2DUnaligned(pCopy): cuMemcpy2D without the pitch alignment limits (the emulator has none)."""
    return _copy_2d(pCopy)


@api(0)
def cuMemcpy2DAsync(pCopy: Any, hStream: Any) -> tuple:  # noqa: N803
    """cuMemcpy2DAsync(pCopy, hStream): cuMemcpy2D in the order of ``hStream``; the emulator runs the context's
    earlier work and does the copy before returning (a copy that completed early is one the stream order allows)."""
    resolve_stream(hStream)
    return _copy_2d(pCopy)


def make_texture(arr: Array, address_modes: Any, linear: bool, normalized: bool, read_normalized: bool) -> Texture:
    """The sampler view of ``arr`` (shared by cuTexObjectCreate and cudaCreateTextureObject)."""
    if arr.data is None:
        raise error("CUDA_ERROR_NOT_SUPPORTED", f"textures of format {arr.descriptor.Format!r} are not emulated")
    three_d = int(getattr(arr.descriptor, "Depth", 0) or 0) > 0 and not arr.flags & (LAYERED | CUBEMAP)
    return Texture(arr.data, tuple(int(m) for m in address_modes[:3]), linear, normalized, read_normalized,  # type: ignore[arg-type]
                   bool(arr.flags & CUBEMAP), three_d)


def register_texture(texture: Texture) -> int:
    """A new texture object handle for ``texture``, reachable by kernels."""
    handle = system().new_handle()
    system().space.textures.objects[handle] = texture
    return handle


@api(1)
def cuTexObjectCreate(pResDesc: Any, pTexDesc: Any, pResViewDesc: Any) -> tuple:  # noqa: N803
    """cuTexObjectCreate(pResDesc, pTexDesc, pResViewDesc) -> (CUresult, CUtexObject): a texture object over an
    array resource (CU_RESOURCE_TYPE_ARRAY); other resource types and resource views are CUDA_ERROR_NOT_SUPPORTED."""
    current_ctx()
    struct_arg(pResDesc, CUDA_RESOURCE_DESC, "pResDesc")
    struct_arg(pTexDesc, CUDA_TEXTURE_DESC, "pTexDesc")
    if int(pResDesc.resType) != CUresourcetype.CU_RESOURCE_TYPE_ARRAY or pResViewDesc is not None:
        raise error("CUDA_ERROR_NOT_SUPPORTED", "only array resources without a resource view are emulated")
    arr = system().lookup(pResDesc.res.array.hArray, Array, "pResDesc.res.array.hArray")
    flags = int(pTexDesc.flags)
    texture = make_texture(arr, pTexDesc.addressMode, int(pTexDesc.filterMode) == 1, bool(flags & 0x02),
                           not flags & 0x01)
    return (CUtexObject(register_texture(texture)),)


@api(0)
def cuTexObjectDestroy(texObject: Any) -> tuple:  # noqa: N803
    """cuTexObjectDestroy(texObject); CUDA_ERROR_INVALID_VALUE for a handle that is no live texture object."""
    if system().space.textures.objects.pop(handle_value(texObject), None) is None:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{handle_value(texObject):#x} is not a live texture object")
    return ()
