"""NVRTC compiler (targets, cache key, driver-capped PTX version) and the PTX stamping compiler. Needs no device."""

from __future__ import annotations

import re

import pytest

from runtime_backends.cuda.compiler import PTX_ISA_FOR_SM, NVRTCCompiler, PTXCompiler, include_options, ptx_isa_for_driver
from runtime_core.compiler import CompileError

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-bindings, nvidia-cuda-nvrtc) is not installed")
KERNEL = 'extern "C" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }'


def _supported() -> list[int]:
    return [int(a) for a in nvrtc.nvrtcGetSupportedArchs()[1]]


def test_the_target_is_the_device_capped_at_what_nvrtc_supports() -> None:
    archs = _supported()
    assert NVRTCCompiler(archs[0]).target == archs[0]
    between = next((a + 1 for a, b in zip(archs, archs[1:]) if b > a + 1), None)
    if between is not None:  # a device NVRTC does not know exactly: the newest architecture below it
        assert NVRTCCompiler(between).target == between - 1
    assert NVRTCCompiler(archs[-1] + 50).target == archs[-1]


def test_a_device_older_than_every_supported_target_is_a_clear_error() -> None:
    oldest = _supported()[0]
    with pytest.raises(CompileError, match=rf"cannot compile for sm_{oldest - 1}: it targets sm_{oldest}"):
        NVRTCCompiler(oldest - 1).compile(KERNEL)


def test_the_cache_key_holds_version_target_and_options() -> None:
    sm = _supported()[-1]
    compiler = NVRTCCompiler(sm)
    _, major, minor = nvrtc.nvrtcVersion()
    identity = compiler.identity()
    assert f"nvrtc {major}.{minor}" in identity and f"compute_{sm}" in identity and "--fmad=false" in identity
    keys = {NVRTCCompiler(s).cache_key(KERNEL) for s in _supported()[-2:]}
    keys.add(NVRTCCompiler(sm, options=("--fmad=true",)).cache_key(KERNEL))
    keys.add(NVRTCCompiler(sm, max_ptx_isa=(8, 0)).cache_key(KERNEL))
    assert len(keys) == 4


def test_ptx_newer_than_the_driver_loads_gets_the_drivers_version() -> None:
    sm = 80 if 80 in _supported() else _supported()[0]
    ptx = NVRTCCompiler(sm, max_ptx_isa=(7, 0)).compile(KERNEL).decode()
    assert re.search(r"^\.version 7\.0$", ptx, re.M)
    assert NVRTCCompiler(sm, max_ptx_isa=(99, 0)).compile(KERNEL) == NVRTCCompiler(sm).compile(KERNEL)  # no change


@pytest.mark.parametrize(("driver", "isa"), [(11080, (7, 8)), (12000, (8, 0)), (12040, (8, 4)), (12060, (8, 5)),
                                             (12080, (8, 7)), (12090, (8, 8)), (13000, (9, 0)), (13050, (9, 5))])
def test_ptx_isa_of_a_driver_version(driver: int, isa: tuple[int, int]) -> None:
    assert ptx_isa_for_driver(driver) == isa


def test_ptx_compiler_stamps_version_and_target_from_the_table() -> None:
    src = "// kernel\n.version VERSION\n.target TARGET\n.address_size 64\n"
    out = PTXCompiler(90).compile(src).decode()
    assert ".version 7.8\n.target sm_90\n" in out and out.startswith("// kernel")
    assert ".version 7.0\n.target sm_75" in PTXCompiler(75).compile(src).decode()  # at least the renderer's ISA
    assert PTX_ISA_FOR_SM[120] == (8, 7)
    assert ".version 8.7\n.target sm_120" in PTXCompiler(120).compile(src).decode()


def test_ptx_compiler_refuses_an_unknown_target_and_unstampable_text() -> None:
    with pytest.raises(CompileError, match="no PTX ISA version is known for sm_95"):
        PTXCompiler(95).compile(".version 1.0\n.target sm_95\n")
    with pytest.raises(CompileError, match=r"exactly one \.target line to stamp; it has 0"):
        PTXCompiler(90).compile(".version 7.0\n.address_size 64\n")


def test_cuda_headers_are_found_through_the_installed_packages() -> None:
    if not include_options():
        pytest.skip("no CUDA headers are installed (wheels nvidia-cuda-runtime/nvidia-cuda-cccl, or a toolkit)")
    src = '#include <cuda_fp16.h>\nextern "C" __global__ void h(__half* p) { p[0] = __float2half(1.5f); }'
    ptx = NVRTCCompiler(_supported()[-1]).compile(src).decode()
    assert ".entry h(" in ptx
