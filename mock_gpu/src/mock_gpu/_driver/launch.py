"""Function attributes and kernel launches (CUDA driver API 6.22 "Execution Control").

A launch is validated (block and grid limits, shared memory, parameters) and then run to completion by the PTX
interpreter; a fault inside the kernel poisons the context (sticky error), as on a real GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from cuda.bindings.driver import CUfunction_attribute

from .. import ptx
from ..address_space import ALLOC_ALIGN, MemoryFault, PaddingAccess
from ..config import MAX_BLOCK_DIM, MAX_GRID_DIM
from .handles import Context, Function, handle_value
from .marshal import pack_params, uint_arg
from .occupancy import max_active_blocks
from .results import DriverError, error, logger
from .system import api, poison, raise_if_sticky, resolve_stream, system
from .work import enqueue

_NOMINAL_REGS = 32  # CU_FUNC_ATTRIBUTE_NUM_REGS: the interpreter has no register allocation; a typical count


@dataclass(frozen=True)
class KernelLaunch:
    """A validated launch: the function, grid/block dims, dynamic shared bytes and the packed parameter buffer."""

    function: Function
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    params: bytes
    cooperative: bool = False

    def run(self) -> None:
        run_launch(self)

    def describe(self) -> str:
        return f"kernel {self.function.kernel.name!r} grid {self.grid} block {self.block}"


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
    if any(not 1 <= g <= m for g, m in zip(grid, MAX_GRID_DIM, strict=True)):
        raise error("CUDA_ERROR_INVALID_VALUE", f"grid {grid} of kernel {k.name!r} is outside 1..{MAX_GRID_DIM}")
    threads = block[0] * block[1] * block[2]
    if any(not 1 <= b <= m for b, m in zip(block, MAX_BLOCK_DIM, strict=True)) or threads > k.max_threads:
        raise error("CUDA_ERROR_INVALID_VALUE", f"block {block} ({threads} threads) of kernel {k.name!r} exceeds the "
                    f"limits: each dim 1..{MAX_BLOCK_DIM}, at most {k.max_threads} threads per block")
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
    # a cooperative grid's workspace: the counter cooperative groups' grid.sync() counts arriving blocks in
    workspace = sys_.space.alloc(16, ctx.device.ordinal) if launch.cooperative else 0
    try:
        ptx.launch(fn.owner.module, fn.kernel, launch.grid, launch.block, launch.shared_bytes, launch.params,
                   sys_.space, ctx.device.ordinal, smid_count=ctx.device.arch.sm_count,
                   timeout=sys_.config.launch_timeout, grid_workspace=workspace)
    except MemoryFault as fault:
        code = "CUDA_ERROR_MISALIGNED_ADDRESS" if fault.kind == "misaligned" else "CUDA_ERROR_ILLEGAL_ADDRESS"
        _poison(ctx, error(code, f"memcheck: {fault}", severe=True), fault)
    except ptx.BarrierDivergence as exc:
        _poison(ctx, error("CUDA_ERROR_LAUNCH_FAILED", str(exc), severe=True), exc)
    except ptx.LaunchTimeout as exc:
        _poison(ctx, error("CUDA_ERROR_LAUNCH_TIMEOUT", str(exc), severe=True), exc)
    except ptx.DeviceAssertion as exc:
        _poison(ctx, error("CUDA_ERROR_ASSERT", str(exc), severe=True), exc)
    except ptx.ExecutionError as exc:
        _poison(ctx, error("CUDA_ERROR_LAUNCH_FAILED", str(exc), severe=True), exc)
    finally:
        if workspace:
            sys_.space.free(workspace)
        _report_padding(fn, sys_.space.take_padding_access())


def _report_padding(fn: Function, touch: PaddingAccess | None) -> None:
    """Warn, once per function, that a kernel read or wrote past a buffer's requested size inside its allocation
    granule: no fault on a GPU, but a bug MOCKGPU_EXACT_BOUNDS=1 (or compute-sanitizer) reports."""
    if touch is None or fn.padding_reported:
        return
    fn.padding_reported = True
    logger.warning("kernel %r made a %d-byte access at %#x, which ends %d bytes past the end of the %d-byte "
                   "allocation at %#x: inside its %d-byte allocation granule, so no fault (MOCKGPU_EXACT_BOUNDS=1 "
                   "makes it one)", fn.kernel.name, touch.size_accessed, touch.address,
                   touch.address + touch.size_accessed - touch.base - touch.size, touch.size, touch.base, ALLOC_ALIGN)


def _poison(ctx: Context, err: DriverError, cause: Exception) -> None:
    raise poison(ctx, err) from cause


@api(0)
def cuLaunchKernel(f: Any, gridDimX: int, gridDimY: int, gridDimZ: int,  # noqa: N803
                   blockDimX: int, blockDimY: int, blockDimZ: int, sharedMemBytes: int,  # noqa: N803
                   hStream: Any, kernelParams: Any, extra: Any) -> tuple:  # noqa: N803
    """cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
    kernelParams, extra) (CUDA driver API, Execution Control, cuLaunchKernel).

    ``kernelParams``: None, an int address of a ``void*[]``, a buffer holding one, or cuda-python's
    ``(values, types)`` tuple; ``extra``: None/0 or the address of a CU_LAUNCH_PARAM_* list (see
    :mod:`mock_gpu._driver.marshal`). The launch is validated and its parameters copied now; the kernel runs in
    stream order when something waits for it (:mod:`mock_gpu._driver.work`). Errors returned here:
    CUDA_ERROR_INVALID_VALUE for bad dims/shared memory/parameters (nothing runs), CUDA_ERROR_INVALID_HANDLE for an
    unloaded module's function. Faults inside the kernel are sticky and returned by the call that waits for it (and
    every later one): CUDA_ERROR_ILLEGAL_ADDRESS for an out-of-bounds/freed access, CUDA_ERROR_MISALIGNED_ADDRESS for
    a misaligned one, CUDA_ERROR_LAUNCH_FAILED for a divergent barrier or trap, CUDA_ERROR_ASSERT,
    CUDA_ERROR_LAUNCH_TIMEOUT; the report (kernel, block,
    thread, address, size, nearest allocation) is logged on the ``mock_gpu`` logger and appended to
    cuGetErrorString's text for that error.
    """
    stream = resolve_stream(hStream)
    launch = prepare_launch(f, (gridDimX, gridDimY, gridDimZ), (blockDimX, blockDimY, blockDimZ), sharedMemBytes,
                            kernelParams, extra)
    if launch.function.owner.ctx is not stream.ctx:
        raise error("CUDA_ERROR_INVALID_HANDLE", "the function's module was loaded in another context than the "
                    "stream's; launch on a stream of the module's context")
    enqueue(stream, launch)
    return ()


@api(0)
def cuLaunchCooperativeKernel(f: Any, gridDimX: int, gridDimY: int, gridDimZ: int,  # noqa: N803
                              blockDimX: int, blockDimY: int, blockDimZ: int, sharedMemBytes: int,  # noqa: N803
                              hStream: Any, kernelParams: Any) -> tuple:  # noqa: N803
    """cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
    hStream, kernelParams): cuLaunchKernel whose blocks may synchronize grid-wide (cooperative groups'
    ``this_grid().sync()``). The grid must be co-resident: at most the SM count times the kernel's occupancy
    (cuOccupancyMaxActiveBlocksPerMultiprocessor) blocks, else CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE. All blocks
    of the grid run together, so a grid barrier is a barrier over all of its threads."""
    stream = resolve_stream(hStream)
    launch = prepare_launch(f, (gridDimX, gridDimY, gridDimZ), (blockDimX, blockDimY, blockDimZ), sharedMemBytes,
                            kernelParams, None)
    fn = launch.function
    if fn.owner.ctx is not stream.ctx:
        raise error("CUDA_ERROR_INVALID_HANDLE", "the function's module was loaded in another context than the "
                    "stream's; launch on a stream of the module's context")
    threads = launch.block[0] * launch.block[1] * launch.block[2]
    resident = fn.owner.ctx.device.arch.sm_count * max_active_blocks(fn, threads, launch.shared_bytes)
    blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
    if blocks > resident:
        raise error("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", f"a cooperative grid of {blocks} blocks of "
                    f"{threads} threads exceeds the {resident} blocks that can be resident at once "
                    f"({fn.owner.ctx.device.arch.sm_count} SMs x cuOccupancyMaxActiveBlocksPerMultiprocessor)")
    enqueue(stream, replace(launch, cooperative=True))
    return ()



@api(1)
def cuFuncGetName(hfunc: Any) -> tuple:
    """cuFuncGetName(hfunc) -> (CUresult, bytes): the kernel's name; CUDA_ERROR_INVALID_VALUE for NULL."""
    if handle_value(hfunc) == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "hfunc is NULL")
    return (system().lookup(hfunc, Function, "function").kernel.name.encode(),)


@api(1)
def cuKernelGetName(hfunc: Any) -> tuple:
    """cuKernelGetName(hfunc) -> (CUresult, bytes): library kernels are not emulated; NULL is
    CUDA_ERROR_INVALID_VALUE as on the driver, any other handle CUDA_ERROR_INVALID_HANDLE."""
    if handle_value(hfunc) == 0:
        raise error("CUDA_ERROR_INVALID_VALUE", "hfunc is NULL")
    raise error("CUDA_ERROR_INVALID_HANDLE", "CUkernel handles (library management) are not emulated")
