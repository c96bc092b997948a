"""Texture objects over CUDA arrays and PTX ``tex`` (PTX ISA 9.7.10.3), checked against numpy references computed
from the CUDA C++ Programming Guide's rules: cubemap face selection ("Cubemap Textures"), nearest-point and linear
filtering with 8-bit fractional weights and the address modes ("Texture Fetching")."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from _driver_util import I32, PTR, check, from_device, launch, load

from mock_gpu import driver as cu
from mock_gpu import runtime as rt
from mock_gpu.texture import BORDER, CLAMP, WRAP, Texture, sample

KERNEL = r"""
extern "C" __global__ void fetch2d(float *out, cudaTextureObject_t tex, const float *u, const float *v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(tex, u[i], v[i]);
}
extern "C" __global__ void fetchcube(float *out, cudaTextureObject_t tex, const float *d, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = texCubemap<float>(tex, d[3 * i], d[3 * i + 1], d[3 * i + 2]);
}
"""


def _texture(data: np.ndarray, **kw) -> Texture:
    """A one-channel float texture of ``data`` (layers, height, width) or (height, width)."""
    layered = data if data.ndim == 3 else data[None]
    return Texture(layered[..., None].astype(np.float32), **kw)


def test_cube_faces_follow_the_major_axis() -> None:
    faces = np.arange(6 * 2 * 2, dtype=np.float32).reshape(6, 2, 2)
    tex = _texture(faces, cubemap=True)
    d = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], np.float32) * 3
    # a direction just off the axis toward +s and +t reads texel (1, 1) of its face: sc/ma, tc/ma > 0
    off = np.array([[0, -0.1, -0.1], [0, -0.1, 0.1], [0.1, 0, 0.1], [0.1, 0, -0.1], [0.1, -0.1, 0], [-0.1, -0.1, 0]])
    got = sample(tex, "cube", None, [d[:, 0] + off[:, 0], d[:, 1] + off[:, 1], d[:, 2] + off[:, 2]])
    np.testing.assert_array_equal(got[:, 0], faces[:, 1, 1])
    assert not got[:, 1:].any()


def test_linear_filtering_weights_and_address_modes() -> None:
    row = np.array([[10.0, 20.0, 30.0, 40.0]])
    linear = _texture(row, linear=True, address_modes=(CLAMP, CLAMP, CLAMP))
    # texel centres at 0.5, 1.5, ...: x = 1.0 is halfway between texels 0 and 1; 1.3 weights texel 1 by 0.8
    got = sample(linear, "2d", None, [np.array([1.0, 1.3, 0.0, 9.0]), np.full(4, 0.5)])[:, 0]
    np.testing.assert_allclose(got, [15.0, 10 + 10 * np.round(0.8 * 256) / 256, 10.0, 40.0])
    wrap = _texture(row, address_modes=(WRAP, WRAP, WRAP), normalized_coords=True)
    np.testing.assert_array_equal(sample(wrap, "2d", None, [np.array([1.1, -0.1]), np.array([0.5, 0.5])])[:, 0],
                                  [10.0, 40.0])
    border = _texture(row, address_modes=(BORDER, BORDER, BORDER))
    np.testing.assert_array_equal(sample(border, "2d", None, [np.array([-1.0, 2.5]), np.array([0.5, 0.5])])[:, 0],
                                  [0.0, 30.0])


@pytest.fixture
def module(ctx):
    return load(KERNEL, "fetch2d", "fetchcube")[1]


def _device(values: np.ndarray):
    ptr = check(cu.cuMemAlloc(values.nbytes))
    check(cu.cuMemcpyHtoD(ptr, values, values.nbytes))
    return ptr


def test_tex2d_of_a_driver_texture_object_matches_numpy(module, rng: np.random.Generator) -> None:
    image = rng.standard_normal((5, 7)).astype(np.float32)
    desc = cu.CUDA_ARRAY3D_DESCRIPTOR()
    desc.Format, desc.NumChannels, desc.Width, desc.Height = cu.CUarray_format.CU_AD_FORMAT_FLOAT, 1, 7, 5
    array = check(cu.cuArray3DCreate(desc))
    copy = cu.CUDA_MEMCPY3D()
    copy.srcMemoryType, copy.srcHost, copy.srcPitch = cu.CUmemorytype.CU_MEMORYTYPE_HOST, image.ctypes.data, 28
    copy.dstMemoryType, copy.dstArray = cu.CUmemorytype.CU_MEMORYTYPE_ARRAY, array
    copy.WidthInBytes, copy.Height, copy.Depth = 28, 5, 1
    check(cu.cuMemcpy3D(copy))
    res = cu.CUDA_RESOURCE_DESC()
    res.resType, res.res.array.hArray = cu.CUresourcetype.CU_RESOURCE_TYPE_ARRAY, array
    tdesc = cu.CUDA_TEXTURE_DESC()  # point filtering, clamp, unnormalized coordinates
    tex = check(cu.cuTexObjectCreate(res, tdesc, None))
    x, y = np.meshgrid(np.arange(7), np.arange(5))
    u, v = (x.ravel() + 0.5).astype(np.float32), (y.ravel() + 0.5).astype(np.float32)
    out = check(cu.cuMemAlloc(u.nbytes))
    check(launch(module[0], (1, 1, 1), (64, 1, 1), [(out, PTR), (tex, None), (_device(u), PTR), (_device(v), PTR),
                                                    (u.size, I32)]))
    np.testing.assert_array_equal(from_device(out, u.size, np.float32), image.ravel())
    check(cu.cuTexObjectDestroy(tex))
    assert cu.cuTexObjectDestroy(tex) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE,)


def test_runtime_cubemap_texture_reads_each_face(module) -> None:
    width = 4
    faces = np.arange(6 * width * width, dtype=np.float32)
    channel = check(rt.cudaCreateChannelDesc(32, 0, 0, 0, rt.cudaChannelFormatKind.cudaChannelFormatKindFloat))
    array = check(rt.cudaMalloc3DArray(channel, rt.make_cudaExtent(width, width, 6), rt.cudaArrayCubemap))
    p = rt.cudaMemcpy3DParms()
    p.srcPtr = rt.make_cudaPitchedPtr(faces, width * 4, width, width)
    p.dstArray, p.extent = array, rt.make_cudaExtent(width, width, 6)
    p.kind = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
    check(rt.cudaMemcpy3D(p))
    res = rt.cudaResourceDesc()
    res.resType, res.res.array.array = rt.cudaResourceType.cudaResourceTypeArray, array
    tdesc = rt.cudaTextureDesc()
    tdesc.normalizedCoords, tdesc.filterMode = True, rt.cudaTextureFilterMode.cudaFilterModeLinear
    tex = check(rt.cudaCreateTextureObject(res, tdesc, None))
    # the centre of texel (0, 0) of each face: s = t = 1/8, so sc/ma = tc/ma = -3/4
    s = -0.75
    d = np.array([[1, -s, -s], [-1, -s, s], [s, 1, s], [s, -1, -s], [s, -s, 1], [-s, -s, -1]], np.float32)
    out = check(cu.cuMemAlloc(6 * 4))
    check(launch(module[1], (1, 1, 1), (32, 1, 1), [(out, PTR), (tex, None), (_device(d), PTR), (6, I32)]))
    np.testing.assert_allclose(from_device(out, 6, np.float32), faces.reshape(6, -1)[:, 0], atol=1e-3)
    check(rt.cudaDestroyTextureObject(tex))
    check(rt.cudaFreeArray(array))


def test_a_fetch_from_a_destroyed_texture_fails_the_launch(module) -> None:
    out = check(cu.cuMemAlloc(4))
    u = _device(np.zeros(1, np.float32))
    check(launch(module[0], (1, 1, 1), (1, 1, 1), [(out, PTR), (0xDEAD, ctypes.c_uint64), (u, PTR), (u, PTR),
                                                   (1, I32)]))
    assert cu.cuCtxSynchronize()[0] != cu.CUresult.CUDA_SUCCESS



def _array_copy(image: np.ndarray) -> tuple:
    """A 1-channel float array shaped like ``image`` (height, width) and a CUDA_MEMCPY3D filling it from ``image``."""
    desc = cu.CUDA_ARRAY3D_DESCRIPTOR()
    desc.Format, desc.NumChannels = cu.CUarray_format.CU_AD_FORMAT_FLOAT, 1
    desc.Height, desc.Width = image.shape
    array = check(cu.cuArray3DCreate(desc))
    copy = cu.CUDA_MEMCPY3D()
    copy.srcMemoryType, copy.srcHost, copy.srcPitch = cu.CUmemorytype.CU_MEMORYTYPE_HOST, image, image.shape[1] * 4
    copy.dstMemoryType, copy.dstArray = cu.CUmemorytype.CU_MEMORYTYPE_ARRAY, array
    copy.WidthInBytes, copy.Height, copy.Depth = image.shape[1] * 4, image.shape[0], 1
    return array, copy


@pytest.mark.parametrize("field, value", [
    ("WidthInBytes", 64), ("Height", 100), ("Depth", 3), ("dstXInBytes", 16), ("dstY", 3),  # outside the array
    ("srcPitch", 8), ("srcPitch", 1 << 62),  # a pitch below the width; a span no memory has
    ("srcHost", 0),  # NULL
])
def test_a_3d_copy_outside_its_memory_is_invalid_value_and_moves_nothing(ctx, field, value) -> None:
    """cuMemcpy3D checks both sides before a byte moves (the driver's CUDA_ERROR_INVALID_VALUE), never a crash of
    the process or a numpy error."""
    image = np.arange(32, dtype=np.float32).reshape(4, 8)
    array, copy = _array_copy(image)
    setattr(copy, field, value)
    assert cu.cuMemcpy3D(copy) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE,)
    assert cu.cuMemcpy3D(None) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE,)
    check(cu.cuArrayDestroy(array))


def test_a_3d_copy_from_freed_device_memory_is_invalid_value(ctx) -> None:
    image = np.arange(32, dtype=np.float32).reshape(4, 8)
    array, copy = _array_copy(image)
    freed = check(cu.cuMemAlloc(128))
    check(cu.cuMemFree(freed))
    copy.srcMemoryType, copy.srcDevice, copy.srcPitch = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE, freed, 32
    assert cu.cuMemcpy3D(copy) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE,)
    _, good = _array_copy(image)
    good.dstArray = array
    check(cu.cuMemcpy3D(good))  # the context goes on


def test_arrays_too_large_for_the_device_or_its_limits_are_refused(ctx) -> None:
    desc = cu.CUDA_ARRAY3D_DESCRIPTOR()
    desc.Format, desc.NumChannels = cu.CUarray_format.CU_AD_FORMAT_FLOAT, 4
    desc.Width, desc.Height, desc.Depth = 1 << 40, 1 << 20, 1 << 20
    assert cu.cuArray3DCreate(desc)[0] == cu.CUresult.CUDA_ERROR_INVALID_VALUE
    desc.Width, desc.Height, desc.Depth = 1 << 16, 1 << 16, 1 << 12  # 64 TiB: within the limits, not the memory
    assert cu.cuArray3DCreate(desc)[0] == cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY


def test_arrays_count_in_the_device_memory_in_use(make_system) -> None:
    """cuMemGetInfo's free bytes shrink by an array's texels (its memory is device memory) and grow back when it is
    destroyed; an array larger than what is left is CUDA_ERROR_OUT_OF_MEMORY."""
    make_system(memory="16MiB")
    free, total = check(cu.cuMemGetInfo())
    desc = cu.CUDA_ARRAY3D_DESCRIPTOR()
    desc.Format, desc.NumChannels, desc.Width, desc.Height = cu.CUarray_format.CU_AD_FORMAT_FLOAT, 4, 256, 1024
    array = check(cu.cuArray3DCreate(desc))  # 256 x 1024 texels of 16 bytes: 4 MiB
    assert check(cu.cuMemGetInfo()) == (free - (4 << 20), total)
    desc.Height = 3 * 1024 + 1  # 12 MiB and 4 KiB: more than the 12 MiB left
    assert cu.cuArray3DCreate(desc) == (cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None)
    check(cu.cuArrayDestroy(array))
    assert check(cu.cuMemGetInfo()) == (free, total)


def test_a_null_descriptor_is_invalid_value_and_a_wrong_type_a_type_error(ctx) -> None:
    """cuda-python passes None as NULL, which the driver answers with CUDA_ERROR_INVALID_VALUE; another type is the
    TypeError of its typed argument."""
    res, tdesc = cu.CUDA_RESOURCE_DESC(), cu.CUDA_TEXTURE_DESC()
    assert cu.cuTexObjectCreate(None, tdesc, None) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE, None)
    assert cu.cuTexObjectCreate(res, None, None) == (cu.CUresult.CUDA_ERROR_INVALID_VALUE, None)
    with pytest.raises(TypeError, match="pResDesc"):
        cu.cuTexObjectCreate(0, tdesc, None)


def test_a_runtime_texture_over_a_freed_array_is_an_invalid_resource_handle(ctx) -> None:
    channel = check(rt.cudaCreateChannelDesc(32, 0, 0, 0, rt.cudaChannelFormatKind.cudaChannelFormatKindFloat))
    array = check(rt.cudaMalloc3DArray(channel, rt.make_cudaExtent(4, 4, 0), 0))
    check(rt.cudaFreeArray(array))
    res = rt.cudaResourceDesc()
    res.resType, res.res.array.array = rt.cudaResourceType.cudaResourceTypeArray, array
    bad = rt.cudaError_t.cudaErrorInvalidResourceHandle
    assert rt.cudaCreateTextureObject(res, rt.cudaTextureDesc(), None) == (bad, None)
    assert rt.cudaGetLastError() == (bad,)
    assert rt.cudaCreateTextureObject(None, rt.cudaTextureDesc(), None)[0] == rt.cudaError_t.cudaErrorInvalidValue
