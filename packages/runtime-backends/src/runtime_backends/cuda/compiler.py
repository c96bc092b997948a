"""Compilers of the CUDA backend: NVRTC (CUDA C -> PTX) and the PTX "compiler" that only stamps the target.

NVRTC comes from ``cuda.bindings.nvrtc`` (the wheel ``nvidia-cuda-nvrtc``) and needs no GPU. It compiles for the
virtual architecture ``compute_XX`` of the device, capped at the newest one the installed NVRTC supports
(``nvrtcGetSupportedArchs``); a device older than every supported one is a :class:`CompileError` that says which NVRTC
to install. Headers (``cuda_fp16.h``...) are found through the installed NVIDIA wheels or toolkit by
``cuda.pathfinder`` and passed as ``-I`` options; our own renderer needs none. Kernels are compiled with
``--fmad=false`` (every IR op rounds on its own, no fused multiply-add) and otherwise IEEE defaults (``-prec-div``,
``-prec-sqrt``, no flush to zero).

:class:`PTXCompiler` takes PTX text and sets its ``.version`` and ``.target`` lines for the device, the version from
:data:`PTX_ISA_FOR_SM` (the first PTX ISA that knows the target; PTX ISA, "Release Notes").
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from runtime_core.compiler import CompileError, Compiler

__all__ = ["NVRTCCompiler", "PTXCompiler", "PTX_ISA_FOR_SM", "include_options", "nvrtc_module", "ptx_isa_for_driver",
           "ptx_isa_version"]

log = logging.getLogger(__name__)
NVRTC_OPTIONS = ("--fmad=false",)
PTX_ISA_FOR_SM: dict[int, tuple[int, int]] = {
    50: (4, 0), 52: (4, 1), 53: (4, 2), 60: (5, 0), 61: (5, 0), 62: (5, 0), 70: (6, 0), 72: (6, 1), 75: (6, 3),
    80: (7, 0), 86: (7, 1), 87: (7, 4), 89: (7, 8), 90: (7, 8), 100: (8, 6), 101: (8, 6), 103: (8, 8),
    110: (9, 0), 120: (8, 7), 121: (8, 8),
}
"""Compute capability (10 * major + minor) -> the first PTX ISA version whose ``.target`` accepts ``sm_XX``."""
MIN_PTX_ISA = (7, 0)
"""The PTX ISA our PTX renderer writes at least (for older targets the stamped version is raised to it)."""
_VERSION_LINE = re.compile(r"^[ \t]*\.version[ \t]+\S+[ \t]*$", re.M)
_TARGET_LINE = re.compile(r"^[ \t]*\.target[ \t]+[^\n]*$", re.M)
_INSTALL = "install it with `pip install cuda-bindings nvidia-cuda-nvrtc`"


def nvrtc_module() -> Any:
    """``cuda.bindings.nvrtc``; :class:`CompileError` naming what to install when it or its library is missing."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise CompileError(f"NVRTC is not available ({e}); {_INSTALL}") from e
    try:
        nvrtc.nvrtcVersion()
    except Exception as e:  # the bindings raise when libnvrtc.so cannot be loaded
        raise CompileError(f"the NVRTC library cannot be loaded ({type(e).__name__}: {e}); {_INSTALL}") from e
    return nvrtc


def _ok(nvrtc: Any, result: tuple, call: str) -> Any:
    err, *out = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"{call} failed: {err.name} ({text.decode() if text else 'no description'})")
    return out[0] if len(out) == 1 else out


@functools.cache
def _nvrtc_facts() -> tuple[tuple[int, int], tuple[int, ...]]:
    """(NVRTC version, supported compute capabilities), asked once per process."""
    nvrtc = nvrtc_module()
    major, minor = _ok(nvrtc, nvrtc.nvrtcVersion(), "nvrtcVersion")
    return (int(major), int(minor)), tuple(int(a) for a in _ok(nvrtc, nvrtc.nvrtcGetSupportedArchs(),
                                                               "nvrtcGetSupportedArchs"))


@functools.cache
def include_options() -> tuple[str, ...]:
    """``-I`` options for the CUDA headers found by ``cuda.pathfinder`` (installed wheels first, then the toolkit)."""
    try:
        from cuda import pathfinder
    except ImportError:
        log.info("cuda.pathfinder is not installed: NVRTC gets no CUDA header directories (only kernels that include "
                 "no CUDA headers compile)")
        return ()
    options = []
    for lib in ("cudart", "cccl"):
        try:
            path = pathfinder.find_nvidia_header_directory(lib)
        except Exception as e:  # unsupported library name or platform
            log.info("cuda.pathfinder cannot look for the %s headers: %s", lib, e)
            continue
        if path:
            options.append(f"-I{path}")
        else:
            log.info("no %s headers found (install the nvidia-cuda-runtime/nvidia-cuda-cccl wheels for them)", lib)
    return tuple(options)


def ptx_isa_for_driver(version: int) -> tuple[int, int]:
    """The newest PTX ISA a driver of ``cuDriverGetVersion`` value ``version`` (1000 * major + 10 * minor) loads.

    CUDA 11.x reads PTX ISA 7.x and CUDA 13.x 9.x (minor for minor); CUDA 12.x reads 8.x except 12.6 (8.5),
    12.8 (8.7) and 12.9 (8.8) (PTX ISA, "Release Notes").
    """
    major, minor = version // 1000, version % 1000 // 10
    if major == 12:
        return (8, {6: 5, 7: 6, 8: 7, 9: 8}.get(minor, minor))
    return (major - 4, minor) if major >= 11 else (6, 4)


class NVRTCCompiler(Compiler):
    """CUDA C -> PTX with NVRTC for a device of compute capability ``sm`` (10 * major + minor).

    Nothing is loaded at construction, so a device without NVRTC still opens (and runs given PTX); :meth:`compile`
    and :meth:`identity` raise :class:`CompileError` then. The cache key holds the NVRTC version, the target and the
    options.

    ``max_ptx_isa`` is the newest PTX ISA the driver loads (:func:`ptx_isa_for_driver`). A newer NVRTC stamps its own,
    newer ISA version on the PTX even when the kernel uses nothing new; that ``.version`` line is lowered to the
    driver's (logged), and a kernel that does need newer instructions fails at load with the driver's JIT log.
    """

    def __init__(self, sm: int, cachekey: str | None = "cuda_nvrtc_ptx", options: tuple[str, ...] = NVRTC_OPTIONS,
                 max_ptx_isa: tuple[int, int] | None = None):
        super().__init__(cachekey)
        self.sm, self.options, self.max_ptx_isa = sm, tuple(options), max_ptx_isa

    @property
    def target(self) -> int:
        """The compute capability compiled for: the device's, or the newest supported one below it.

        Raises :class:`CompileError` when NVRTC supports nothing at or below the device.
        """
        (major, minor), archs = _nvrtc_facts()
        usable = [a for a in archs if a <= self.sm]
        if not usable:
            raise CompileError(f"NVRTC {major}.{minor} cannot compile for sm_{self.sm}: it targets "
                               f"{', '.join(f'sm_{a}' for a in archs)}; install an NVRTC that supports this GPU "
                               f"(e.g. `pip install 'nvidia-cuda-nvrtc-cu12'` for older GPUs)")
        return max(usable)

    def all_options(self) -> list[str]:
        return [f"--gpu-architecture=compute_{self.target}", *self.options, *include_options()]

    def identity(self) -> str:
        (major, minor), _ = _nvrtc_facts()
        return f"nvrtc {major}.{minor} | {' '.join(self.all_options())} | max PTX ISA {self.max_ptx_isa}"

    def compile(self, src: str) -> bytes:
        """PTX text (bytes, no trailing NUL) of CUDA C ``src``.

        Raises :class:`CompileError` with NVRTC's log as ``stderr`` when the source does not compile, or when NVRTC
        is missing or cannot target the device.
        """
        nvrtc = nvrtc_module()
        options = [o.encode() for o in self.all_options()]
        prog = _ok(nvrtc, nvrtc.nvrtcCreateProgram(src.encode(), b"kernel.cu", 0, [], []), "nvrtcCreateProgram")
        try:
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
            # NVRTC writes into the buffers it is given: they must be mutable (a 1-byte bytes object is a shared
            # interpreter constant)
            size = _ok(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            buf = bytearray(size)
            _ok(nvrtc, nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
            program_log = bytes(buf).rstrip(b"\0").decode(errors="replace")
            if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise CompileError(f"NVRTC failed to compile {src.count(chr(10)) + 1} lines of CUDA C for "
                                   f"compute_{self.target} ({err.name})", stderr=program_log, source=src)
            size = _ok(nvrtc, nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            ptx = bytearray(size)
            _ok(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
            return self._fit_version(bytes(ptx).rstrip(b"\0").decode()).encode()
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    def _fit_version(self, ptx: str) -> str:
        m = _VERSION_LINE.search(ptx)
        if self.max_ptx_isa is None or m is None:
            return ptx
        version = tuple(int(x) for x in m.group(0).split()[1].split("."))
        if version <= self.max_ptx_isa:
            return ptx
        log.info("NVRTC wrote PTX ISA %s; lowering the .version line to %d.%d, the newest this driver loads",
                 ".".join(map(str, version)), *self.max_ptx_isa)
        return _VERSION_LINE.sub(f".version {self.max_ptx_isa[0]}.{self.max_ptx_isa[1]}", ptx, count=1)


def ptx_isa_version(sm: int) -> tuple[int, int]:
    """The PTX ISA version stamped for ``sm``: the first that knows the target, at least :data:`MIN_PTX_ISA`.

    Raises :class:`CompileError` for a compute capability missing from :data:`PTX_ISA_FOR_SM`.
    """
    if sm not in PTX_ISA_FOR_SM:
        known = ", ".join(f"sm_{s}" for s in sorted(PTX_ISA_FOR_SM))
        raise CompileError(f"no PTX ISA version is known for sm_{sm} (known: {known}); use the CUDA C renderer "
                           f"(unset PTX)")
    return max(PTX_ISA_FOR_SM[sm], MIN_PTX_ISA)


class PTXCompiler(Compiler):
    """"Compiles" PTX by setting its ``.version`` and ``.target`` lines for ``sm`` (see :func:`ptx_isa_version`).

    Not cached: stamping costs less than a cache lookup.
    """

    def __init__(self, sm: int) -> None:
        super().__init__(cachekey=None)
        self.sm = sm

    def identity(self) -> str:
        major, minor = ptx_isa_version(self.sm)
        return f"ptx stamp | .version {major}.{minor} | .target sm_{self.sm}"

    def compile(self, src: str) -> bytes:
        """``src`` with its ``.version`` and ``.target`` lines replaced; :class:`CompileError` if it lacks either."""
        major, minor = ptx_isa_version(self.sm)
        for what, pattern in ((".version", _VERSION_LINE), (".target", _TARGET_LINE)):
            if len(pattern.findall(src)) != 1:
                raise CompileError(f"PTX source must have exactly one {what} line to stamp; it has "
                                   f"{len(pattern.findall(src))}", source=src)
        out = _VERSION_LINE.sub(f".version {major}.{minor}", src)
        return _TARGET_LINE.sub(f".target sm_{self.sm}", out).encode()
