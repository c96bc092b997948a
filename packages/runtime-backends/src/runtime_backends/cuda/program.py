"""CUDAProgram: a kernel of PTX text loaded on one device, launched on its stream (CUDA driver API, "Module
Management" and "Execution Control").

Loading is ``cuModuleLoadDataEx`` with the JIT error log (so invalid PTX fails with CUDA_ERROR_INVALID_PTX and the
log), then ``cuModuleGetFunction``. A launch validates everything before the driver sees it: the number of buffers and
vals, the handles (device pointers; pinned host memory is refused), the block against the device's and the
function's limits and the grid against the device's. ``global_size`` is the grid in blocks and ``local_size`` the block
in threads. Parameters travel as ``kernelParams``: an array of pointers into one argument struct that every launch
rewrites in place.
"""

from __future__ import annotations

import ctypes
import logging
import math
from collections.abc import Sequence
from typing import Any

from runtime_backends.cuda.allocator import HostPointer
from runtime_backends.cuda.driver import check, is_success, make_error
from runtime_backends.cuda.limits import DEFAULT_SHARED_BYTES
from runtime_backends.cuda.ptx_info import EntrySignature, entry_signature
from runtime_core.program import check_launch

__all__ = ["CUDAProgram", "PackedArgs", "load_module"]

log = logging.getLogger(__name__)
JIT_LOG_BYTES = 1 << 16
_BINARY_MAGIC = (b"\x7fELF", (0xBA55ED50).to_bytes(4, "little"), (0x466243B1).to_bytes(4, "little"))


class PackedArgs:
    """One kernel's parameters in C layout (``kinds``: ``"buffer"`` -> 64-bit pointer, ``"val"`` -> int32) and the
    ``void*`` array ``kernelParams`` points to. :attr:`address` stays valid while this object lives."""

    def __init__(self, kinds: Sequence[str]) -> None:
        fields = [(f"p{i}", ctypes.c_uint64 if k == "buffer" else ctypes.c_int32) for i, k in enumerate(kinds)]
        self.struct = type("KernelArgs", (ctypes.Structure,), {"_fields_": fields})()
        self.names = [f for f, _ in fields]
        self.buffer_fields = [f for f, k in zip(self.names, kinds) if k == "buffer"]
        self.val_fields = [f for f, k in zip(self.names, kinds) if k == "val"]
        base = ctypes.addressof(self.struct)
        offsets = [getattr(type(self.struct), f).offset for f in self.names]
        self.pointers = (ctypes.c_void_p * max(1, len(fields)))(*[base + o for o in offsets])

    @property
    def address(self) -> int:
        return ctypes.addressof(self.pointers)

    def set(self, bufs: Sequence[int], vals: Sequence[int]) -> None:
        for f, b in zip(self.buffer_fields, bufs):
            setattr(self.struct, f, b)
        for f, v in zip(self.val_fields, vals):
            setattr(self.struct, f, v)


def load_module(dev: Any, ptx: str) -> Any:
    """Load PTX text into ``dev``'s context; the ``CUmodule``. ``CUDAError`` with the JIT error log on failure."""
    cu = dev.activate()
    opt = cu.CUjit_option
    log_buf = bytearray(JIT_LOG_BYTES)
    options = [opt.CU_JIT_ERROR_LOG_BUFFER, opt.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
    err, module = cu.cuModuleLoadDataEx(ptx.encode() + b"\0", len(options), options, [log_buf, JIT_LOG_BYTES])
    if is_success(err):
        return module
    jit_log = bytes(log_buf).split(b"\0", 1)[0].decode(errors="replace").strip()
    error = make_error(cu, err, "cuModuleLoadDataEx", device=dev.device, ptx_bytes=len(ptx))
    if jit_log:
        error.args = (f"{error.args[0]}\n--- JIT log ---\n{jit_log}",)
    raise error


class CUDAProgram:
    """Kernel ``name`` of the PTX ``lib`` (bytes or str) on ``dev``; follows the ``runtime_core.program.Program``
    protocol and returns device seconds (CUDA events) when ``wait``.

    Args:
        dev: the ``CUDADevice``.
        name: the ``.entry`` to run.
        lib: PTX text, from this backend's compilers, NVRTC or ``nvcc -ptx``.
        shared_bytes: dynamic shared memory per block; default the amount the PTX records (see
            :mod:`runtime_backends.cuda.ptx_info`), else 0.

    A program packs its launch arguments in place: use it from one thread at a time.

    Raises:
        ValueError: ``lib`` is not PTX text (a cubin or fatbin), ``name`` is not a kernel of it or has a parameter
            the protocol cannot pass (:class:`~runtime_backends.cuda.ptx_info.PTXFormatError`), or ``shared_bytes``
            exceeds the device's opt-in limit.
        CUDAError: the driver refused the module (CUDA_ERROR_INVALID_PTX with the JIT log) or the function.
    """

    @property
    def arg_counts(self) -> tuple[int, int]:
        """``(buffers, vals)`` of the kernel's PTX entry signature."""
        return self.signature.nbufs, self.signature.nvals

    def __init__(self, dev: Any, name: str, lib: bytes | str, *, shared_bytes: int | None = None) -> None:
        self.dev, self.name = dev, name
        text = _ptx_text(lib, name)
        self.signature: EntrySignature = entry_signature(text, name)
        self.shared_bytes = self.signature.shared_bytes if shared_bytes is None else shared_bytes
        if isinstance(self.shared_bytes, bool) or not isinstance(self.shared_bytes, int) or self.shared_bytes < 0:
            raise ValueError(f"kernel {name!r}: shared_bytes must be an int >= 0, got {self.shared_bytes!r}")
        cu = dev.cu
        self.module = load_module(dev, text)
        try:
            self.function = check(cu, cu.cuModuleGetFunction(self.module, name.encode()), "cuModuleGetFunction",
                                  name=name)
            self.max_threads = self._attribute("MAX_THREADS_PER_BLOCK")
            self._reserve_shared(self._attribute("SHARED_SIZE_BYTES"))
        except BaseException:
            cu.cuModuleUnload(self.module)
            raise
        self.args = PackedArgs(self.signature.kinds)

    def _attribute(self, name: str) -> int:
        cu = self.dev.cu
        attr = getattr(cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
        return int(check(cu, cu.cuFuncGetAttribute(attr, self.function), "cuFuncGetAttribute", attrib=name,
                         kernel=self.name))

    def _reserve_shared(self, static_bytes: int) -> None:
        """Opt in to more than 48 KiB of dynamic shared memory (``cuFuncSetAttribute``) when the kernel needs it."""
        limit = self.dev.limits.shared_optin - static_bytes
        if self.shared_bytes > limit:
            raise ValueError(f"kernel {self.name!r} needs {self.shared_bytes} bytes of dynamic shared memory (plus "
                             f"{static_bytes} static); {self.dev.device} allows {self.dev.limits.shared_optin} per block")
        if self.shared_bytes > DEFAULT_SHARED_BYTES - static_bytes:
            cu = self.dev.cu
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(cu, cu.cuFuncSetAttribute(self.function, attr, self.shared_bytes), "cuFuncSetAttribute",
                  kernel=self.name, max_dynamic_shared_bytes=self.shared_bytes)

    def validate(self, bufs: Sequence[Any], vals: Sequence[int], global_size: Sequence[int],
                 local_size: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Check a launch without running it; (grid, block) padded to 3 dims.

        Raises ``ValueError`` for wrong counts, sizes or vals and a block or grid beyond the device's limits (naming
        the limit), ``TypeError`` for a buffer that is not a device pointer (e.g. pinned host memory).
        """
        gs, ls = check_launch(self.name, bufs, vals, self.signature.nbufs, self.signature.nvals, global_size,
                              local_size)
        for i, b in enumerate(bufs):
            if isinstance(b, HostPointer) or isinstance(b, bool) or not isinstance(b, int):
                what = "pinned host memory (BufferSpec(host=True))" if isinstance(b, HostPointer) else repr(b)
                raise TypeError(f"kernel {self.name!r}: buffer {i} is {what}; kernels take device buffers (the "
                                f"opaque of a CUDA Buffer)")
        lim = self.dev.limits
        if any(s > m for s, m in zip(ls, lim.max_block)) or math.prod(ls) > min(self.max_threads,
                                                                                   lim.max_threads_per_block):
            raise ValueError(f"kernel {self.name!r}: block (local_size) {ls} exceeds {self.dev.device}'s limits: at "
                             f"most {lim.max_block} per dimension and {min(self.max_threads, lim.max_threads_per_block)} "
                             f"threads per block for this kernel")
        if any(s > m for s, m in zip(gs, lim.max_grid)):
            raise ValueError(f"kernel {self.name!r}: grid (global_size, in blocks) {gs} exceeds {self.dev.device}'s "
                             f"limit of {lim.max_grid} blocks per dimension")
        return gs, ls

    def __call__(self, *bufs: int, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 vals: Sequence[int] = (), wait: bool = False) -> float | None:
        gs, ls = self.validate(bufs, vals, global_size, local_size)
        self.args.set(bufs, vals)
        dev = self.dev
        cu = dev.activate()

        def launch() -> None:
            check(cu, cu.cuLaunchKernel(self.function, *gs, *ls, self.shared_bytes, dev.stream, self.args.address, 0),
                  "cuLaunchKernel", kernel=self.name, grid=gs, block=ls, shared_bytes=self.shared_bytes,
                  device=dev.device)
        if wait:
            return dev.time(launch)
        launch()
        return None

    def __del__(self) -> None:
        module, dev = getattr(self, "module", None), getattr(self, "dev", None)
        if module is None or dev is None or dev.closed:
            return
        try:
            dev.activate()
            dev.cu.cuModuleUnload(module)
        except Exception as e:  # never raise from a finalizer (interpreter shutdown, a context lost to a fault)
            log.debug("unloading the module of %r failed: %s", self.name, e)


def _ptx_text(lib: bytes | str, name: str) -> str:
    if isinstance(lib, str):
        return lib
    if not isinstance(lib, (bytes, bytearray, memoryview)):
        raise TypeError(f"kernel {name!r}: lib must be PTX text (bytes or str), got {type(lib).__name__}")
    data = bytes(lib)
    if data.startswith(_BINARY_MAGIC):
        raise ValueError(f"kernel {name!r}: lib is a cubin/fatbin; CUDA programs load PTX text (nvcc -ptx, "
                         f"nvrtcGetPTX), whose .entry tells how to pass the buffers and vals")
    try:
        return data.split(b"\0", 1)[0].decode()
    except UnicodeDecodeError as e:
        raise ValueError(f"kernel {name!r}: lib is not PTX text ({e})") from None
