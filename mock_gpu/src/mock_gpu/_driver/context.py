"""Contexts: primary contexts, created contexts, the current context, peer access (CUDA driver API
6.7 "Primary Context Management", 6.8 "Context Management", 6.31 "Peer Context Memory Access")."""

from __future__ import annotations

from typing import Any

from cuda.bindings.driver import CUcontext, CUdevice

from .handles import Context, Device, System, handle_value
from .results import DriverError, error
from .system import api, current_ctx, system
from .work import discard, synchronize_context


def _new_context(sys_: System, device: Device, primary: bool) -> Context:
    return sys_.register(Context(sys_.new_handle(), device, primary))


def _destroy_context(sys_: System, ctx: Context, *, run_pending: bool) -> None:
    """Free everything the context owns and drop it from every handle table and from this thread's stack.

    ``run_pending``: let its pending work run first (destroy, release), else drop it (reset); a fault in that work
    only dies with the context.
    """
    if run_pending:
        try:
            synchronize_context(ctx)
        except DriverError:
            pass  # the context and its sticky error go away together
    discard(ctx)
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
        _destroy_context(sys_, device.primary, run_pending=True)
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
        _destroy_context(sys_, old, run_pending=False)
        fresh = sys_.register(Context(old.handle, device, primary=True))
        device.primary = fresh
        sys_.ctx_stack[:] = [fresh if c is old else c for c in stack]
    return ()


@api(1)
def cuCtxCreate(ctxCreateParams: Any, flags: Any, dev: Any = None) -> tuple:  # noqa: N803
    """cuCtxCreate(ctxCreateParams, flags, dev) -> (CUresult, CUcontext): a new context, pushed as current.

    The signature of cuda-python 13 (``ctxCreateParams`` may be None; execution-affinity / CIG parameters are not
    emulated: non-empty ones are CUDA_ERROR_NOT_SUPPORTED), or cuda-python 12's ``(flags, dev)``. ``flags``
    (scheduling hints) are accepted and ignored.
    """
    if dev is None:  # cuda-python 12: cuCtxCreate(flags, dev)
        ctxCreateParams, dev = None, flags  # noqa: N806
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
    _destroy_context(sys_, context, run_pending=True)
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


@api(0)
def cuCtxPushCurrent(ctx: Any) -> tuple:
    """cuCtxPushCurrent(ctx): push ``ctx`` onto this thread's context stack (it becomes current)."""
    sys_ = system()
    obj = sys_.objects.get(handle_value(ctx))
    if not isinstance(obj, Context):
        raise error("CUDA_ERROR_INVALID_CONTEXT", f"context {handle_value(ctx):#x} is destroyed or was never created")
    sys_.ctx_stack.append(obj)
    return ()


@api(1)
def cuCtxPopCurrent() -> tuple:
    """cuCtxPopCurrent() -> (CUresult, CUcontext): pop the current context off this thread's stack and return it;
    CUDA_ERROR_INVALID_CONTEXT if the stack is empty."""
    stack = system().ctx_stack
    if not stack:
        raise error("CUDA_ERROR_INVALID_CONTEXT", "cuCtxPopCurrent: no context is current on this thread")
    return (CUcontext(stack.pop().handle),)


@api(0)
def cuDevicePrimaryCtxSetFlags(dev: Any, flags: Any) -> tuple:
    """cuDevicePrimaryCtxSetFlags(dev, flags): record the primary context's flags (scheduling, CU_CTX_MAP_HOST...);
    they have no effect on the emulator (host memory is always mapped)."""
    system().device(dev).primary_flags = int(flags)
    return ()


@api(2)
def cuDevicePrimaryCtxGetState(dev: Any) -> tuple:
    """cuDevicePrimaryCtxGetState(dev) -> (CUresult, flags, active): the recorded flags and whether the primary
    context is retained."""
    device = system().device(dev)
    return (device.primary_flags, int(device.primary is not None and device.primary_refs > 0))


@api(1)
def cuCtxGetFlags() -> tuple:
    """cuCtxGetFlags() -> (CUresult, int): the current context's flags (the primary context's recorded flags)."""
    ctx = current_ctx(check_sticky=False)
    return (ctx.device.primary_flags if ctx.primary else 0,)


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
    """cuCtxSynchronize(): run the current context's pending work on all its streams; the sticky error if that work
    (or earlier work) faulted, e.g. CUDA_ERROR_ILLEGAL_ADDRESS after a faulting kernel, like the real driver."""
    synchronize_context(current_ctx())
    return ()


@api(1)
def cuDeviceCanAccessPeer(dev: Any, peerDev: Any) -> tuple:  # noqa: N803
    """cuDeviceCanAccessPeer(dev, peerDev) -> (CUresult, int): 1 between two different emulated devices, else 0."""
    sys_ = system()
    a, b = sys_.device(dev), sys_.device(peerDev)
    return (int(a is not b),)


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
