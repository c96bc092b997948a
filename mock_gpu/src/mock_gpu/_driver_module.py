"""Modules, functions and kernel launches (CUDA driver API, "Module Management" and "Execution Control").

Modules are PTX text, parsed and checked at load time by :func:`mock_gpu.ptx.load_module` (an unsupported
construct is CUDA_ERROR_INVALID_PTX before anything runs). A launch is validated (block and grid limits, shared
memory, parameters) and then run to completion by the PTX interpreter; a fault inside the kernel poisons the
context (sticky error), as on a real GPU.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from . import ptx
from ._driver_core import api, current_ctx, raise_if_sticky, resolve_stream, system
from ._driver_params import MIN_HOST_ADDRESS, host_address, pack_params, uint_arg
from ._driver_state import Function, KernelLaunch, LoadedModule
from ._types import CUdeviceptr, CUfunction, CUfunction_attribute, CUmodule
from .errors import DriverError, error
from .memory import MemoryFault, OutOfMemory

_DEFAULT_SMEM = 48 * 1024  # bytes of shared memory per block without opt-in (CUDA C++ Programming Guide, table 21)
_NOMINAL_REGS = 32  # CU_FUNC_ATTRIBUTE_NUM_REGS: the interpreter has no register allocation; a typical count
_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = (2**31 - 1, 65535, 65535)
_ELF_MAGIC = b"\x7fELF"
_MAX_PTX_MAJOR = 9  # PTX ISA 9.x: CUDA 13
_FATBIN_MAGIC = (0xBA55ED50).to_bytes(4, "little")


def _ptx_text(image: Any) -> str:
    """The PTX text of a cuModuleLoadData image (bytes, str, buffer, or int address of a NUL-terminated string).

    CUDA_ERROR_INVALID_VALUE for a NULL image, CUDA_ERROR_INVALID_IMAGE for an empty one, a cubin/fatbin or bytes
    that are not text; TypeError for an argument that is none of these forms (as cuda-python raises).
    """
    if image is None or (isinstance(image, int) and not isinstance(image, bool) and image == 0):
        raise error("CUDA_ERROR_INVALID_VALUE", "image is NULL")
    if isinstance(image, bool) or isinstance(image, float):
        raise TypeError(f"cuModuleLoadData: image must be bytes, str, a buffer or an int address, not "
                        f"{type(image).__name__}")
    if isinstance(image, str):
        data = image.encode()
    elif isinstance(image, int):
        if not MIN_HOST_ADDRESS <= image < 1 << 64:
            raise error("CUDA_ERROR_INVALID_VALUE", f"image address {image:#x} is not a host address")
        data = ctypes.string_at(image)
    else:
        address, length = host_address(image, "image")
        data = ctypes.string_at(address, length) if length is not None else ctypes.string_at(address)
    if data.startswith((_ELF_MAGIC, _FATBIN_MAGIC)):
        raise error("CUDA_ERROR_INVALID_IMAGE", "the image is a cubin/fatbin; mock_gpu executes PTX only: load the "
                    "PTX text (nvrtcGetPTX) instead of compiled machine code (nvrtcGetCUBIN)", severe=True)
    text = data.split(b"\x00", 1)[0]
    if not text.strip():
        raise error("CUDA_ERROR_INVALID_IMAGE", "the image is empty (no PTX text before the first NUL byte)",
                    severe=True)
    try:
        return text.decode()
    except UnicodeDecodeError as exc:
        raise error("CUDA_ERROR_INVALID_IMAGE", f"the image is neither PTX text nor a known binary: {exc}",
                    severe=True) from exc


def _check_target(module: Any, arch: Any) -> None:
    """The PTX ISA version and .target must be loadable on ``arch`` (a config.ArchInfo), as the driver's JIT demands:
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION for a .version newer than PTX ISA 9.x, CUDA_ERROR_INVALID_PTX for a .target
    newer than the device (or an arch-specific sm_XXa of another architecture)."""
    if module.version[0] > _MAX_PTX_MAJOR:
        raise error("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", f"PTX .version {module.version[0]}.{module.version[1]} is "
                    f"newer than this driver supports (PTX ISA {_MAX_PTX_MAJOR}.x); compile with an older toolkit",
                    severe=True)
    device = arch.major * 10 + arch.minor
    for target in module.target:
        m = re.fullmatch(r"(?:sm|compute)_(\d+)([af]?)", target)
        if m is None:
            continue  # texmode_* / debug options
        sm = int(m.group(1))
        if sm > device or (m.group(2) == "a" and sm != device):
            raise error("CUDA_ERROR_INVALID_PTX", f"the PTX targets {target} but the device is sm_{device} "
                        "(MOCKGPU_ARCH); compile for the device's compute capability or lower", severe=True)


def _load(image: Any) -> tuple:
    ctx = current_ctx()
    text = _ptx_text(image)
    try:
        module = ptx.load_module(text)
    except ptx.PTXError as exc:
        raise error("CUDA_ERROR_INVALID_PTX", f"PTX line {exc.line}: {exc.message}: {exc.text!r}", severe=True) from exc
    _check_target(module, ctx.device.arch)
    sys_ = system()
    try:
        module.bind(sys_.space, ctx.device.ordinal)
    except OutOfMemory as exc:
        raise error("CUDA_ERROR_OUT_OF_MEMORY", f"no device memory for the module's globals: {exc}") from exc
    lm = sys_.register(LoadedModule(sys_.new_handle(), ctx, module))
    ctx.modules.add(lm)
    return (CUmodule(lm.handle),)


@api(1)
def cuModuleLoadData(image: Any) -> tuple:
    """cuModuleLoadData(image) -> (CUresult, CUmodule): load a PTX module into the current context.

    ``image``: PTX as bytes/str/buffer or the int address of a NUL-terminated string. CUDA_ERROR_INVALID_PTX with
    the PTX line, its text and the reason in the report for PTX the interpreter rejects; CUDA_ERROR_INVALID_IMAGE
    for cubin/fatbin images (CUDA driver API, cuModuleLoadData).
    """
    return _load(image)


@api(1)
def cuModuleLoadDataEx(image: Any, numOptions: int, options: Any, optionValues: Any) -> tuple:  # noqa: N803
    """cuModuleLoadDataEx(image, numOptions, options, optionValues) -> (CUresult, CUmodule): as cuModuleLoadData.

    JIT options (CUjit_option: log buffers, optimization level...) are checked for consistent counts and otherwise
    have no effect: there is no JIT compiler, PTX is interpreted.
    """
    n_opts, n_vals = len(options or ()), len(optionValues or ())
    if not numOptions == n_opts == n_vals:
        raise error("CUDA_ERROR_INVALID_VALUE",
                    f"numOptions={numOptions} but {n_opts} options and {n_vals} optionValues were given")
    return _load(image)


@api(0)
def cuModuleUnload(hmod: Any) -> tuple:
    """cuModuleUnload(hmod): unload a module, free its globals; its CUfunction handles become invalid."""
    sys_ = system()
    lm = sys_.lookup(hmod, LoadedModule, "module")
    raise_if_sticky(lm.ctx)
    lm.module.unbind()
    lm.loaded = False
    lm.ctx.modules.discard(lm)
    for fn in lm.functions.values():
        del sys_.objects[fn.handle]
    del sys_.objects[lm.handle]
    return ()


def _name(name: Any) -> str:
    return name.decode() if isinstance(name, bytes | bytearray) else str(name)


@api(1)
def cuModuleGetFunction(hmod: Any, name: Any) -> tuple:
    """cuModuleGetFunction(hmod, name) -> (CUresult, CUfunction); CUDA_ERROR_NOT_FOUND for an unknown ``.entry``."""
    sys_ = system()
    lm = sys_.lookup(hmod, LoadedModule, "module")
    raise_if_sticky(lm.ctx)
    key = _name(name)
    if key not in lm.module.kernels:
        raise error("CUDA_ERROR_NOT_FOUND", f"no kernel {key!r} in the module; it has {sorted(lm.module.kernels)}")
    if key not in lm.functions:
        kernel = lm.module.kernels[key]
        lm.functions[key] = sys_.register(Function(sys_.new_handle(), lm, kernel,
                                                   max(0, _DEFAULT_SMEM - kernel.static_shared_bytes)))
    return (CUfunction(lm.functions[key].handle),)


@api(2)
def cuModuleGetGlobal(hmod: Any, name: Any) -> tuple:
    """cuModuleGetGlobal(hmod, name) -> (CUresult, CUdeviceptr, int): address and size in bytes of a module
    ``.global``/``.const`` variable; CUDA_ERROR_NOT_FOUND for an unknown name."""
    lm = system().lookup(hmod, LoadedModule, "module")
    raise_if_sticky(lm.ctx)
    key = _name(name)
    try:
        ptr, size = lm.module.global_address(key)
    except KeyError:
        raise error("CUDA_ERROR_NOT_FOUND", f"no global {key!r} in the module") from None
    return (CUdeviceptr(ptr), size)


def lookup_function(hfunc: Any) -> Function:
    """The live function behind ``hfunc``; CUDA_ERROR_INVALID_HANDLE once its module is unloaded (the real driver
    leaves such a launch undefined; the emulator reports it)."""
    fn = system().lookup(hfunc, Function, "function")
    raise_if_sticky(fn.owner.ctx)
    return fn


@api(1)
def cuFuncGetAttribute(attrib: Any, hfunc: Any) -> tuple:
    """cuFuncGetAttribute(attrib, hfunc) -> (CUresult, int) (CUDA driver API, cuFuncGetAttribute).

    MAX_THREADS_PER_BLOCK (1024 or ``.maxntid``), SHARED_SIZE_BYTES (static), LOCAL_SIZE_BYTES, CONST_SIZE_BYTES (0),
    NUM_REGS (a nominal 32: there is no register allocation), PTX_VERSION/BINARY_VERSION (the device's
    capability, 10 * major + minor), MAX_DYNAMIC_SHARED_SIZE_BYTES, PREFERRED_SHARED_MEMORY_CARVEOUT; others are
    CUDA_ERROR_INVALID_VALUE.
    """
    fn = lookup_function(hfunc)
    F, k, arch = CUfunction_attribute, fn.kernel, fn.owner.ctx.device.arch
    table = {F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: k.max_threads,
             F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: k.static_shared_bytes,
             F.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: 0, F.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: k.local_bytes,
             F.CU_FUNC_ATTRIBUTE_NUM_REGS: _NOMINAL_REGS,
             F.CU_FUNC_ATTRIBUTE_PTX_VERSION: 10 * arch.major + arch.minor,
             F.CU_FUNC_ATTRIBUTE_BINARY_VERSION: 10 * arch.major + arch.minor,
             F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: fn.max_dynamic_smem,
             F.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: fn.carveout}
    values = {int(a): v for a, v in table.items()}
    if int(attrib) not in values:
        raise error("CUDA_ERROR_INVALID_VALUE", f"function attribute {attrib!r} is not emulated by mock_gpu")
    return (values[int(attrib)],)


@api(0)
def cuFuncSetAttribute(hfunc: Any, attrib: Any, value: int) -> tuple:
    """cuFuncSetAttribute(hfunc, attrib, value): MAX_DYNAMIC_SHARED_SIZE_BYTES (0 .. opt-in limit minus static
    shared) or PREFERRED_SHARED_MEMORY_CARVEOUT (-1 .. 100); other attributes or values: CUDA_ERROR_INVALID_VALUE."""
    fn = lookup_function(hfunc)
    F = CUfunction_attribute
    if int(attrib) == int(F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES):
        limit = fn.owner.ctx.device.arch.smem_optin - fn.kernel.static_shared_bytes
        if not 0 <= value <= limit:
            raise error("CUDA_ERROR_INVALID_VALUE", f"MAX_DYNAMIC_SHARED_SIZE_BYTES={value} is outside 0..{limit} "
                        f"(opt-in limit {fn.owner.ctx.device.arch.smem_optin} minus "
                        f"{fn.kernel.static_shared_bytes} static bytes)")
        fn.max_dynamic_smem = value
    elif int(attrib) == int(F.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT):
        if not -1 <= value <= 100:
            raise error("CUDA_ERROR_INVALID_VALUE", f"PREFERRED_SHARED_MEMORY_CARVEOUT={value} is outside -1..100")
        fn.carveout = value
    else:
        raise error("CUDA_ERROR_INVALID_VALUE", f"setting function attribute {attrib!r} is not emulated by mock_gpu")
    return ()


def prepare_launch(hfunc: Any, grid: tuple[int, int, int], block: tuple[int, int, int], shared_bytes: int,
                   kernel_params: Any, extra: Any) -> KernelLaunch:
    """Validate a launch and pack its parameters (nothing runs); CUDA_ERROR_INVALID_VALUE for bad dims, too much
    shared memory or wrong parameters, CUDA_ERROR_INVALID_HANDLE for a function of an unloaded module."""
    fn = lookup_function(hfunc)
    k = fn.kernel
    grid = (uint_arg(grid[0], "gridDimX"), uint_arg(grid[1], "gridDimY"), uint_arg(grid[2], "gridDimZ"))
    block = (uint_arg(block[0], "blockDimX"), uint_arg(block[1], "blockDimY"), uint_arg(block[2], "blockDimZ"))
    shared_bytes = uint_arg(shared_bytes, "sharedMemBytes")
    if any(not 1 <= g <= m for g, m in zip(grid, _MAX_GRID, strict=True)):
        raise error("CUDA_ERROR_INVALID_VALUE", f"grid {grid} of kernel {k.name!r} is outside 1..{_MAX_GRID}")
    threads = block[0] * block[1] * block[2]
    if any(not 1 <= b <= m for b, m in zip(block, _MAX_BLOCK, strict=True)) or threads > k.max_threads:
        raise error("CUDA_ERROR_INVALID_VALUE", f"block {block} ({threads} threads) of kernel {k.name!r} exceeds the "
                    f"limits: each dim 1..{_MAX_BLOCK}, at most {k.max_threads} threads per block")
    if not 0 <= shared_bytes <= fn.max_dynamic_smem:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{shared_bytes} bytes of dynamic shared memory for kernel {k.name!r} "
                    f"exceed its limit of {fn.max_dynamic_smem} (raise it with cuFuncSetAttribute("
                    "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))")
    return KernelLaunch(fn, grid, block, shared_bytes, pack_params(k, kernel_params, extra))


def run_launch(launch: KernelLaunch) -> None:
    """Run a validated launch on the PTX interpreter; a fault poisons the context and raises its DriverError."""
    fn = launch.function
    ctx = fn.owner.ctx
    raise_if_sticky(ctx)
    if not fn.owner.loaded:
        raise error("CUDA_ERROR_INVALID_HANDLE", f"the module of kernel {fn.kernel.name!r} was unloaded")
    sys_ = system()
    try:
        ptx.launch(fn.owner.module, fn.kernel, launch.grid, launch.block, launch.shared_bytes, launch.params,
                   sys_.space, ctx.device.ordinal, smid_count=ctx.device.arch.sm_count,
                   timeout=sys_.config.launch_timeout)
    except MemoryFault as fault:
        _poison(ctx, error("CUDA_ERROR_ILLEGAL_ADDRESS", f"memcheck: {fault}", severe=True), fault)
    except ptx.BarrierDivergence as exc:
        _poison(ctx, error("CUDA_ERROR_LAUNCH_FAILED", str(exc), severe=True), exc)
    except ptx.LaunchTimeout as exc:
        _poison(ctx, error("CUDA_ERROR_LAUNCH_TIMEOUT", str(exc), severe=True), exc)
    except ptx.DeviceAssertion as exc:
        _poison(ctx, error("CUDA_ERROR_ASSERT", str(exc), severe=True), exc)
    except ptx.ExecutionError as exc:
        _poison(ctx, error("CUDA_ERROR_LAUNCH_FAILED", str(exc), severe=True), exc)


def _poison(ctx: Any, err: DriverError, cause: Exception) -> None:
    ctx.sticky = err
    raise err from cause


@api(0)
def cuLaunchKernel(f: Any, gridDimX: int, gridDimY: int, gridDimZ: int,  # noqa: N803
                   blockDimX: int, blockDimY: int, blockDimZ: int, sharedMemBytes: int,  # noqa: N803
                   hStream: Any, kernelParams: Any, extra: Any) -> tuple:  # noqa: N803
    """cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
    kernelParams, extra) (CUDA driver API, Execution Control, cuLaunchKernel).

    ``kernelParams``: None, an int address of a ``void*[]``, a buffer holding one, or cuda-python's
    ``(values, types)`` tuple; ``extra``: None/0 or the address of a CU_LAUNCH_PARAM_* list (see
    :mod:`mock_gpu._driver_params`). The kernel runs before the call returns. Errors: CUDA_ERROR_INVALID_VALUE for
    bad dims/shared memory/parameters (nothing runs), CUDA_ERROR_INVALID_HANDLE for an unloaded module's function,
    CUDA_ERROR_ILLEGAL_ADDRESS for an out-of-bounds/freed/misaligned access in the kernel and
    CUDA_ERROR_LAUNCH_FAILED for a divergent barrier or trap; the last two are sticky and their report (kernel,
    block, thread, address, size, nearest allocation) is in :func:`mock_gpu.last_error_report`.
    """
    stream = resolve_stream(hStream)
    launch = prepare_launch(f, (gridDimX, gridDimY, gridDimZ), (blockDimX, blockDimY, blockDimZ), sharedMemBytes,
                            kernelParams, extra)
    if launch.function.owner.ctx is not stream.ctx:
        raise error("CUDA_ERROR_INVALID_HANDLE", "the function's module was loaded in another context than the "
                    "stream's; launch on a stream of the module's context")
    run_launch(launch)
    return ()

