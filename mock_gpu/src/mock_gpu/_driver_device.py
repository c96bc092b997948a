"""Initialization, devices, contexts, peer access and error descriptions (CUDA driver API sections
"Initialization", "Version Management", "Device Management", "Primary Context Management", "Context Management",
"Peer Context Memory Access" and "Error Handling")."""

from __future__ import annotations

from typing import Any

from ._driver_core import api, current_ctx, get_system_or_none, set_system, system
from ._driver_state import Context, Device, System, handle_value
from ._types import CUcontext, CUdevice, CUdevice_attribute, CUresult
from .config import ConfigError, load_config
from .errors import ERROR_STRINGS, error

DRIVER_VERSION = 12080  # reported by cuDriverGetVersion: CUDA 12.8 (1000 * major + 10 * minor)


@api(0)
def cuInit(Flags: int) -> tuple:  # noqa: N803  (the driver API's parameter names)
    """cuInit(Flags): initialize the driver (CUDA driver API, Initialization, cuInit). ``Flags`` must be 0.

    Reads MOCKGPU_DEVICES / MOCKGPU_ARCH / MOCKGPU_MEMORY (see :mod:`mock_gpu.config`) on the first call; later
    calls have no effect. An invalid variable gives CUDA_ERROR_INVALID_VALUE with the reason in the report.
    """
    if Flags != 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuInit Flags must be 0, got {Flags}")
    if get_system_or_none() is None:
        try:
            config = load_config()
        except ConfigError as exc:
            raise error("CUDA_ERROR_INVALID_VALUE", str(exc), severe=True) from exc
        set_system(System(config))
    return ()


@api(1)
def cuDriverGetVersion() -> tuple:
    """cuDriverGetVersion() -> (CUresult, int): the emulated driver version, 12080 (CUDA 12.8); needs no cuInit."""
    return (DRIVER_VERSION,)


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
        A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024, A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: 1024,
        A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: 1024, A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: 64,
        A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: 2**31 - 1, A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: 65535,
        A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: 65535, A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 49152,
        A.CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: 65536, A.CU_DEVICE_ATTRIBUTE_WARP_SIZE: 32,
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
    }
    return {int(k): v for k, v in values.items()}


@api(1)
def cuDeviceGetAttribute(attrib: Any, dev: Any) -> tuple:
    """cuDeviceGetAttribute(attrib, dev) -> (CUresult, int) (CUDA driver API, Device Management).

    Supported: the thread/block/grid limits, warp size, SM count, shared memory per block (+ opt-in) and per SM,
    compute capability, unified addressing, and a few descriptive values (clock, bus width, L2). Any other
    attribute is CUDA_ERROR_INVALID_VALUE with a report naming it (rather than an invented value).
    """
    table = _attributes(system().device(dev))
    if int(attrib) not in table:
        raise error("CUDA_ERROR_INVALID_VALUE", f"device attribute {attrib!r} is not emulated by mock_gpu")
    return (table[int(attrib)],)


@api(2)
def cuDeviceComputeCapability(dev: Any) -> tuple:
    """cuDeviceComputeCapability(dev) -> (CUresult, major, minor) (deprecated in CUDA; kept for old backends)."""
    arch = system().device(dev).arch
    return (arch.major, arch.minor)


@api(1)
def cuDeviceTotalMem(dev: Any) -> tuple:
    """cuDeviceTotalMem(dev) -> (CUresult, int): device memory in bytes (MOCKGPU_MEMORY)."""
    return (system().device(dev).memory,)


@api(1)
def cuDeviceCanAccessPeer(dev: Any, peerDev: Any) -> tuple:  # noqa: N803
    """cuDeviceCanAccessPeer(dev, peerDev) -> (CUresult, int): 1 between two different emulated devices, else 0."""
    sys_ = system()
    a, b = sys_.device(dev), sys_.device(peerDev)
    return (int(a is not b),)


def _new_context(sys_: System, device: Device, primary: bool) -> Context:
    return sys_.register(Context(sys_.new_handle(), device, primary))


def _destroy_context(sys_: System, ctx: Context) -> None:
    """Free everything the context owns and drop it from every handle table and from this thread's stack."""
    for lm in list(ctx.modules):
        lm.module.unbind()
        lm.loaded = False
        for fn in lm.functions.values():
            sys_.objects.pop(fn.handle, None)
        sys_.objects.pop(lm.handle, None)
    for ptr in [p for p, owner in sys_.allocations.items() if owner is ctx]:
        sys_.space.free(ptr)
        del sys_.allocations[ptr]
    for handle, obj in list(sys_.objects.items()):
        if getattr(obj, "ctx", None) is ctx:
            del sys_.objects[handle]
    sys_.objects.pop(ctx.handle, None)
    sys_.ctx_stack[:] = [c for c in sys_.ctx_stack if c is not ctx]


@api(1)
def cuDevicePrimaryCtxRetain(dev: Any) -> tuple:
    """cuDevicePrimaryCtxRetain(dev) -> (CUresult, CUcontext): the device's primary context, created on first use.

    Each retain must be matched by cuDevicePrimaryCtxRelease (CUDA driver API, Primary Context Management).
    """
    sys_ = system()
    device = sys_.device(dev)
    if device.primary is None:
        device.primary = _new_context(sys_, device, primary=True)
    device.primary_refs += 1
    return (CUcontext(device.primary.handle),)


@api(0)
def cuDevicePrimaryCtxRelease(dev: Any) -> tuple:
    """cuDevicePrimaryCtxRelease(dev): drop one retain; at zero the primary context and its resources are destroyed.

    CUDA_ERROR_INVALID_CONTEXT if the primary context is not retained.
    """
    sys_ = system()
    device = sys_.device(dev)
    if device.primary is None or device.primary_refs == 0:
        raise error("CUDA_ERROR_INVALID_CONTEXT", f"the primary context of device {device.ordinal} is not retained")
    device.primary_refs -= 1
    if device.primary_refs == 0:
        _destroy_context(sys_, device.primary)
        device.primary = None
    return ()


@api(0)
def cuDevicePrimaryCtxReset(dev: Any) -> tuple:
    """cuDevicePrimaryCtxReset(dev): destroy the primary context's allocations, modules, streams and events and
    clear its sticky error; the retain count is kept, so the same handle stays valid (a fresh context behind it)."""
    sys_ = system()
    device = sys_.device(dev)
    if device.primary is not None:
        old = device.primary
        stack = list(sys_.ctx_stack)
        _destroy_context(sys_, old)
        fresh = sys_.register(Context(old.handle, device, primary=True))
        device.primary = fresh
        sys_.ctx_stack[:] = [fresh if c is old else c for c in stack]
    return ()


@api(1)
def cuCtxCreate(ctxCreateParams: Any, flags: int, dev: Any) -> tuple:  # noqa: N803
    """cuCtxCreate(ctxCreateParams, flags, dev) -> (CUresult, CUcontext): a new context, pushed as current.

    Signature of cuda-python 13 (``ctxCreateParams`` may be None; execution-affinity / CIG parameters are not
    emulated: non-empty ones are CUDA_ERROR_NOT_SUPPORTED). ``flags`` (scheduling hints) are accepted and ignored.
    """
    sys_ = system()
    device = sys_.device(dev)
    if ctxCreateParams is not None and ctxCreateParams.numExecAffinityParams:
        raise error("CUDA_ERROR_NOT_SUPPORTED", "execution affinity parameters are not emulated by mock_gpu")
    ctx = _new_context(sys_, device, primary=False)
    sys_.ctx_stack.append(ctx)
    return (CUcontext(ctx.handle),)


@api(0)
def cuCtxDestroy(ctx: Any) -> tuple:
    """cuCtxDestroy(ctx): destroy a context made by cuCtxCreate with all its memory, modules, streams and events.

    A primary context must be released with cuDevicePrimaryCtxRelease instead: CUDA_ERROR_INVALID_CONTEXT.
    """
    sys_ = system()
    context = sys_.lookup(ctx, Context, "context")
    if context.primary:
        raise error("CUDA_ERROR_INVALID_CONTEXT", "cuCtxDestroy on a primary context; use cuDevicePrimaryCtxRelease")
    _destroy_context(sys_, context)
    return ()


@api(0)
def cuCtxSetCurrent(ctx: Any) -> tuple:
    """cuCtxSetCurrent(ctx): make ``ctx`` this thread's current context (replacing the top of the stack);
    NULL/None unbinds. CUDA_ERROR_INVALID_CONTEXT for a destroyed or unknown context."""
    sys_ = system()
    stack = sys_.ctx_stack
    if handle_value(ctx) == 0:
        if stack:
            stack.pop()
        return ()
    obj = sys_.objects.get(handle_value(ctx))
    if not isinstance(obj, Context):
        raise error("CUDA_ERROR_INVALID_CONTEXT", f"context {handle_value(ctx):#x} is destroyed or was never created")
    if stack:
        stack[-1] = obj
    else:
        stack.append(obj)
    return ()


@api(1)
def cuCtxGetCurrent() -> tuple:
    """cuCtxGetCurrent() -> (CUresult, CUcontext): this thread's current context, CUcontext(0) if none."""
    stack = system().ctx_stack
    return (CUcontext(stack[-1].handle if stack else 0),)


@api(1)
def cuCtxGetDevice() -> tuple:
    """cuCtxGetDevice() -> (CUresult, CUdevice): the device of the current context."""
    return (CUdevice(current_ctx(check_sticky=False).device.ordinal),)


@api(0)
def cuCtxSynchronize() -> tuple:
    """cuCtxSynchronize(): wait for the current context's work. Work runs at enqueue, so this only reports the
    context's sticky error (e.g. CUDA_ERROR_ILLEGAL_ADDRESS after a faulting kernel), like the real driver."""
    current_ctx()
    return ()


@api(0)
def cuCtxEnablePeerAccess(peerContext: Any, Flags: int) -> tuple:  # noqa: N803
    """cuCtxEnablePeerAccess(peerContext, Flags): let the current context access ``peerContext``'s device memory.

    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED on a repeat, CUDA_ERROR_INVALID_DEVICE for a context of the same
    device, CUDA_ERROR_INVALID_VALUE for non-zero Flags (CUDA driver API, Peer Context Memory Access).
    """
    ctx = current_ctx()
    peer = system().lookup(peerContext, Context, "peer context")
    if Flags != 0:
        raise error("CUDA_ERROR_INVALID_VALUE", f"cuCtxEnablePeerAccess Flags must be 0, got {Flags}")
    if peer.device is ctx.device:
        raise error("CUDA_ERROR_INVALID_DEVICE", "peer access to a context of the same device")
    if peer.device.ordinal in ctx.peers:
        raise error("CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
                    f"peer access from device {ctx.device.ordinal} to device {peer.device.ordinal} is already enabled")
    ctx.peers.add(peer.device.ordinal)
    return ()


@api(0)
def cuCtxDisablePeerAccess(peerContext: Any) -> tuple:  # noqa: N803
    """cuCtxDisablePeerAccess(peerContext): undo cuCtxEnablePeerAccess; CUDA_ERROR_PEER_ACCESS_NOT_ENABLED if off."""
    ctx = current_ctx()
    peer = system().lookup(peerContext, Context, "peer context")
    if peer.device.ordinal not in ctx.peers:
        raise error("CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", f"peer access to device {peer.device.ordinal} is not enabled")
    ctx.peers.discard(peer.device.ordinal)
    return ()


def _result_member(error_code: Any) -> Any:
    try:
        return CUresult(int(error_code))
    except ValueError:
        raise error("CUDA_ERROR_INVALID_VALUE", f"{error_code!r} is not a CUresult value") from None


@api(1)
def cuGetErrorName(error: Any) -> tuple:
    """cuGetErrorName(error) -> (CUresult, bytes): the enum name, e.g. b"CUDA_ERROR_ILLEGAL_ADDRESS"."""
    return (_result_member(error).name.encode(),)


@api(1)
def cuGetErrorString(error: Any) -> tuple:
    """cuGetErrorString(error) -> (CUresult, bytes): the driver's description, e.g. b"invalid argument"."""
    member = _result_member(error)
    return (ERROR_STRINGS.get(member.name, member.name.removeprefix("CUDA_ERROR_").replace("_", " ").lower()).encode(),)
