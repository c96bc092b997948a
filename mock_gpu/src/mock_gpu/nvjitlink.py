"""nvJitLink as a program on the emulator sees it: ``cuda.bindings.nvjitlink`` itself, except that every cubin it
links is registered with the PTX it was made from, so that cuModuleLoadData of the cubin runs that PTX (the emulator
cannot run machine code; see :mod:`mock_gpu._driver.images`). This is the linker of cuda.core's ``Linker`` and of
numba-cuda. :func:`mock_gpu.install` puts this module in the place of ``cuda.bindings.nvjitlink``; every other name
is the real module's.

The PTX of a link: the PTX its inputs carry (PTX, fatbins with PTX, cubins registered here or by
:mod:`mock_gpu.nvrtc`); for a link-time-optimized link (``-lto``, LTO-IR inputs, as numba-cuda links), the PTX
nvJitLink generates, got from a second link of the same inputs with ``-ptx`` added (nvJitLink's option to emit PTX
instead of a cubin). A link whose PTX cannot be found still links; its cubin is not registered, and loading it is
CUDA_ERROR_INVALID_IMAGE with the reason.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

from cuda.bindings import nvjitlink as _real

from ._driver.images import binary_ptx, register_cubin
from ._driver.results import DriverError, logger

__all__ = ["add_data", "add_file", "create", "destroy", "get_linked_cubin"]


@dataclass
class _Link:
    """The options and the inputs (kind, bytes, name) of one nvJitLink handle."""

    options: list[str]
    inputs: list[tuple[int, bytes, str]] = field(default_factory=list)


_lock = threading.Lock()
_links: dict[int, _Link] = {}


def create(num_options: int, options: Any) -> int:
    """nvJitLinkCreate(num_options, options) -> handle (the real call); the link's inputs are tracked from now."""
    handle = _real.create(num_options, options)
    texts = [o.decode() if isinstance(o, bytes) else str(o) for o in list(options or ())[:num_options]]
    with _lock:
        _links[int(handle)] = _Link(texts)
    return handle


def add_data(handle: int, input_type: int, data: Any, size: int, name: Any) -> None:
    """nvJitLinkAddData(handle, input_type, data, size, name): the real call; the input (an ``int`` address or a
    buffer of ``size`` bytes) is kept for the link's PTX."""
    _real.add_data(handle, input_type, data, size, name)
    raw = ctypes.string_at(data, size) if isinstance(data, int) else bytes(memoryview(data).cast("B")[:size])
    _keep(handle, int(input_type), raw, str(name))


def add_file(handle: int, input_type: int, file_name: Any) -> None:
    """nvJitLinkAddFile(handle, input_type, file_name): the real call; the file's contents are kept likewise."""
    _real.add_file(handle, input_type, file_name)
    with open(file_name, "rb") as f:
        _keep(handle, int(input_type), f.read(), str(file_name))


def get_linked_cubin(handle: int, cubin: Any) -> None:
    """nvJitLinkGetLinkedCubin(handle, cubin): the real call, then the cubin written to ``cubin`` (a writable
    buffer) is registered with the link's PTX (see the module's docstring)."""
    _real.get_linked_cubin(handle, cubin)
    with _lock:
        link = _links.get(int(handle))
    ptx = None if link is None or isinstance(cubin, int) else _ptx_of(link)
    if ptx:
        register_cubin(bytes(memoryview(cubin).cast("B")), ptx)


def destroy(handle: int) -> None:
    """nvJitLinkDestroy(handle): the real call; the link's inputs are forgotten."""
    _real.destroy(handle)
    with _lock:
        _links.pop(int(handle), None)


def _keep(handle: int, kind: int, raw: bytes, name: str) -> None:
    with _lock:
        link = _links.get(int(handle))
        if link is not None:
            link.inputs.append((kind, raw, name))


def _ptx_of(link: _Link) -> list[str] | None:
    """The PTX a link's cubin was made from, or None (logged) when it cannot be found."""
    texts: list[str] = []
    try:
        for kind, raw, _ in link.inputs:
            if kind == _real.InputType.PTX:
                texts.append(raw.split(b"\x00", 1)[0].decode())
            elif kind in (_real.InputType.CUBIN, _real.InputType.FATBIN):
                texts.extend(binary_ptx(raw))
            else:
                return _lto_ptx(link)
    except (DriverError, UnicodeDecodeError) as exc:
        logger.warning("nvJitLink: the linked cubin carries no PTX the emulator knows: %s", exc)
        return None
    return texts


def _lto_ptx(link: _Link) -> list[str] | None:
    if "-lto" not in link.options:
        logger.warning("nvJitLink: a link of LTO-IR, objects or libraries without -lto: its cubin cannot run")
        return None
    options = [*link.options, "-ptx"]
    handle = _real.create(len(options), options)
    try:
        for kind, raw, name in link.inputs:
            _real.add_data(handle, kind, raw, len(raw), name)
        _real.complete(handle)
        text = bytearray(_real.get_linked_ptx_size(handle))
        _real.get_linked_ptx(handle, text)
    except _real.nvJitLinkError as exc:
        logger.warning("nvJitLink: the PTX of a -lto link could not be generated: %s", exc)
        return None
    finally:
        _real.destroy(handle)
    return [text.split(b"\x00", 1)[0].decode()]


def __getattr__(name: str) -> Any:
    return getattr(_real, name)


def __dir__() -> list[str]:
    return sorted(set(dir(_real)) | set(__all__))
