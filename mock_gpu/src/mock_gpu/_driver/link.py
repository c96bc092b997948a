"""The JIT linker (CUDA driver API 6.10 "Module Management": cuLinkCreate, cuLinkAddData, cuLinkAddFile,
cuLinkComplete, cuLinkDestroy).

PTX inputs, and the PTX carried by fatbin or NVRTC cubin inputs (:mod:`.images`), are collected in order;
cuLinkComplete hands out an image holding all of them, which cuModuleLoadData loads as one module (the first
input's .version/.target lines kept). Object files and libraries (CU_JIT_INPUT_OBJECT, _LIBRARY, LTO-IR) carry
machine code the emulator cannot run: CUDA_ERROR_INVALID_IMAGE naming the input.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from cuda.bindings.driver import CUjitInputType, CUlinkState

from . import images
from .marshal import byte_count, host_address
from .results import error
from .system import api, system


@dataclass(eq=False)
class LinkState:
    """A link in progress: the PTX texts added so far and, once complete, the image handed out."""

    handle: int
    ptx: list[str] = field(default_factory=list)
    image: Any = None  # ctypes buffer of the completed image, kept alive until cuLinkDestroy


def _input_ptx(kind: Any, data: bytes, name: str) -> list[str]:
    kind = CUjitInputType(int(kind))
    if kind == CUjitInputType.CU_JIT_INPUT_PTX:
        return [data.split(b"\x00", 1)[0].decode()]
    if kind in (CUjitInputType.CU_JIT_INPUT_CUBIN, CUjitInputType.CU_JIT_INPUT_FATBINARY):
        return images.binary_ptx(data)
    raise error("CUDA_ERROR_INVALID_IMAGE", f"link input {name!r} is {kind.name}: machine code or LTO-IR that "
                "mock_gpu cannot run; link PTX (or a fatbin carrying PTX) instead", severe=True)


@api(1)
def cuLinkCreate(numOptions: int, options: Any, optionValues: Any) -> tuple:  # noqa: N803
    """cuLinkCreate(numOptions, options, optionValues) -> (CUresult, CUlinkState); JIT options have no effect."""
    sys_ = system()
    state = sys_.register(LinkState(sys_.new_handle()))
    return (CUlinkState(state.handle),)


@api(0)
def cuLinkAddData(state: Any, typename: Any, data: Any, size: Any, name: Any, numOptions: int,  # noqa: N803
                  options: Any, optionValues: Any) -> tuple:  # noqa: N803
    """cuLinkAddData(state, type, data, size, name, numOptions, options, optionValues): add ``size`` bytes of
    ``data`` (bytes, buffer or int address) of CUjitInputType ``type``."""
    link = system().lookup(state, LinkState, "link state")
    nbytes = byte_count(size, "size")
    if isinstance(data, int):
        raw = ctypes.string_at(data, nbytes)
    else:
        address, length = host_address(data, "data")
        raw = ctypes.string_at(address, min(nbytes, length) if length is not None else nbytes)
    label = name.decode() if isinstance(name, bytes) else str(name)
    link.ptx.extend(_input_ptx(typename, raw, label))
    return ()


@api(0)
def cuLinkAddFile(state: Any, typename: Any, path: Any, numOptions: int, options: Any,  # noqa: N803
                  optionValues: Any) -> tuple:  # noqa: N803
    """cuLinkAddFile(state, type, path, numOptions, options, optionValues): add the contents of the file ``path``;
    CUDA_ERROR_FILE_NOT_FOUND if it cannot be read."""
    link = system().lookup(state, LinkState, "link state")
    where = path.decode() if isinstance(path, bytes) else str(path)
    try:
        with open(where, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise error("CUDA_ERROR_FILE_NOT_FOUND", f"cannot read link input {where!r}: {exc}") from exc
    link.ptx.extend(_input_ptx(typename, raw, where))
    return ()


@api(2)
def cuLinkComplete(state: Any) -> tuple:
    """cuLinkComplete(state) -> (CUresult, int address of the image, int size): the linked image, valid until
    cuLinkDestroy; CUDA_ERROR_INVALID_VALUE when nothing was added."""
    link = system().lookup(state, LinkState, "link state")
    if not link.ptx:
        raise error("CUDA_ERROR_INVALID_VALUE", "cuLinkComplete: no inputs were added to the link")
    image = images.link_image(link.ptx)
    link.image = ctypes.create_string_buffer(image, len(image))
    return (ctypes.addressof(link.image), len(image))


@api(0)
def cuLinkDestroy(state: Any) -> tuple:
    """cuLinkDestroy(state): free the link state and its image."""
    sys_ = system()
    link = sys_.lookup(state, LinkState, "link state")
    del sys_.objects[link.handle]
    return ()
