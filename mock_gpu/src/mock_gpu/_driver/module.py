"""Modules: loading PTX, kernels and globals by name, unloading (CUDA driver API 6.10 "Module Management").

Modules are PTX text, parsed and checked at load time by :func:`mock_gpu.ptx.load_module` (an unsupported
construct is CUDA_ERROR_INVALID_PTX before anything runs).
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from cuda.bindings.driver import CUdeviceptr, CUfunction, CUjit_option, CUmodule

from .. import ptx
from ..address_space import OutOfMemory
from ..config import SHARED_PER_BLOCK
from . import images
from .handles import Function, LoadedModule
from .marshal import MIN_HOST_ADDRESS, byte_count, host_address
from .results import DriverError, error
from .system import api, current_ctx, raise_if_sticky, system
from .work import synchronize_context

J = CUjit_option

_MAX_PTX_MAJOR = 9  # PTX ISA 9.x: CUDA 13
_MODULE_DIRECTIVES = re.compile(rb"^\s*\.(version|target|address_size)\b[^\n]*$", re.M)


def _image_bytes(image: Any) -> bytes:
    """The bytes of a cuModuleLoadData image (bytes, str, buffer, or int address of a NUL-terminated string or of a
    binary whose header gives its length). CUDA_ERROR_INVALID_VALUE for NULL; TypeError for other forms (as
    cuda-python raises)."""
    if image is None or (isinstance(image, int) and not isinstance(image, bool) and image == 0):
        raise error("CUDA_ERROR_INVALID_VALUE", "image is NULL")
    if isinstance(image, bool) or isinstance(image, float):
        raise TypeError(f"cuModuleLoadData: image must be bytes, str, a buffer or an int address, not "
                        f"{type(image).__name__}")
    if isinstance(image, str):
        return image.encode()
    if isinstance(image, int):
        if not MIN_HOST_ADDRESS <= image < 1 << 64:
            raise error("CUDA_ERROR_INVALID_VALUE", f"image address {image:#x} is not a host address")
        size = images.image_size(ctypes.string_at(image, 64))
        return ctypes.string_at(image, size) if size is not None else ctypes.string_at(image)
    address, length = host_address(image, "image")
    return ctypes.string_at(address, length) if length is not None else ctypes.string_at(address)


def merge_ptx(texts: list[str]) -> str:
    """One PTX module from several (linked inputs): the first keeps its .version/.target/.address_size lines."""
    parts = [texts[0].encode()] + [_MODULE_DIRECTIVES.sub(b"", text.encode()) for text in texts[1:]]
    return b"\n".join(parts).decode()


def _ptx_text(image: Any) -> str:
    """The PTX text of a cuModuleLoadData image: PTX text, or a binary image carrying PTX (:mod:`.images`).

    CUDA_ERROR_INVALID_IMAGE for an empty image, bytes that are not text or a binary without usable PTX.
    """
    data = _image_bytes(image)
    if images.is_binary(data):
        return merge_ptx(images.binary_ptx(data))
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
def cuModuleLoad(fname: Any) -> tuple:
    """cuModuleLoad(fname) -> (CUresult, CUmodule): load the PTX, fatbin or cubin file ``fname`` (str or bytes path)
    as cuModuleLoadData loads its contents; CUDA_ERROR_FILE_NOT_FOUND if it cannot be read."""
    path = fname.decode() if isinstance(fname, bytes | bytearray) else str(fname)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise error("CUDA_ERROR_FILE_NOT_FOUND", f"cannot read module file {path!r}: {exc}") from exc
    return _load(data)


def _log_buffers(options: list[Any], values: list[Any]) -> dict[str, tuple[int, int]]:
    """{"error"|"info": (address, capacity in bytes)} of the JIT log buffers among cuModuleLoadDataEx's options.

    A buffer is a ``bytes`` object (written in place, as cuda-python hands the driver its storage), a writable
    buffer, or an int address; its capacity is the matching ``*_LOG_BUFFER_SIZE_BYTES`` value, at most the buffer's
    length. CUDA_ERROR_INVALID_VALUE for a buffer without its size option.
    """
    given = {int(o): v for o, v in zip(options, values, strict=True)}
    out = {}
    for kind, buf_opt, size_opt in (("error", J.CU_JIT_ERROR_LOG_BUFFER, J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
                                    ("info", J.CU_JIT_INFO_LOG_BUFFER, J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)):
        if int(buf_opt) not in given or given[int(buf_opt)] is None:
            continue
        if int(size_opt) not in given:
            raise error("CUDA_ERROR_INVALID_VALUE", f"{buf_opt.name} is given without {size_opt.name}")
        buf = given[int(buf_opt)]
        if isinstance(buf, bytes):
            address, length = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value or 0, len(buf)
        else:
            address, length = host_address(buf, buf_opt.name)  # type: ignore[assignment]
        size = byte_count(given[int(size_opt)], size_opt.name)
        out[kind] = (address, size if length is None else min(size, length))
    return out


def _write_log(target: tuple[int, int] | None, text: str) -> None:
    """Write ``text`` NUL-terminated (truncated to fit) into a JIT log buffer (address, capacity)."""
    if target is None or target[1] == 0 or target[0] == 0:
        return
    data = text.encode()[: target[1] - 1] + b"\x00"
    ctypes.memmove(target[0], data, len(data))


@api(1)
def cuModuleLoadDataEx(image: Any, numOptions: int, options: Any, optionValues: Any) -> tuple:  # noqa: N803
    """cuModuleLoadDataEx(image, numOptions, options, optionValues) -> (CUresult, CUmodule): as cuModuleLoadData,
    with JIT options (CUjit_option).

    CU_JIT_ERROR_LOG_BUFFER (+ _SIZE_BYTES) receives the reason a load failed (e.g. CUDA_ERROR_INVALID_PTX: the PTX
    line, its text and what is unsupported), CU_JIT_INFO_LOG_BUFFER an empty log; both NUL-terminated. Other
    options (optimization level, targets, cache modes...) are accepted and have no effect: PTX is interpreted.
    """
    opts, vals = list(options or ()), list(optionValues or ())
    if not numOptions == len(opts) == len(vals):
        raise error("CUDA_ERROR_INVALID_VALUE",
                    f"numOptions={numOptions} but {len(opts)} options and {len(vals)} optionValues were given")
    logs = _log_buffers(opts, vals)
    try:
        loaded = _load(image)
    except DriverError as exc:
        _write_log(logs.get("error"), f"mock_gpu: {exc.report}")
        raise
    _write_log(logs.get("error"), "")
    _write_log(logs.get("info"), "")
    return loaded


@api(0)
def cuModuleUnload(hmod: Any) -> tuple:
    """cuModuleUnload(hmod): run the context's pending work, then unload the module and free its globals; its
    CUfunction handles become invalid."""
    sys_ = system()
    lm = sys_.lookup(hmod, LoadedModule, "module")
    synchronize_context(lm.ctx)  # launches of its kernels may be pending
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
                                                   max(0, SHARED_PER_BLOCK - kernel.static_shared_bytes)))
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
