"""Module images: which PTX a cuModuleLoadData / cuLinkAddData image carries (CUDA driver API 6.10 "Module
Management": an image is PTX text, a cubin or a fatbin).

The emulator executes PTX. A fatbin (magic ``0xBA55ED50``, the container nvcc and nvFatbin write) carries
uncompressed PTX entries next to its cubins; the newest of them is used. A cubin is machine code: its PTX is known
only when the cubin came from NVRTC or nvJitLink in this process through ``mock_gpu.nvrtc`` or ``mock_gpu.nvjitlink``
(which install themselves in place of ``cuda.bindings.nvrtc`` and ``cuda.bindings.nvjitlink``), which register every
cubin they hand out with the PTX it was made from; an image made by
:func:`link_image` (cuLinkComplete) carries its PTX inputs. Any other binary is CUDA_ERROR_INVALID_IMAGE naming why.
"""

from __future__ import annotations

import hashlib
import struct
import threading

from .results import error

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = 0xBA55ED50
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, payload size
_ENTRY_HEADER = struct.Struct("<HHIQ")  # kind, version, header size, payload size (padded); flags at 0x28
_ENTRY_PTX = 1
_ENTRY_COMPRESSED = 0x2000
_LINKED_MAGIC = b"MOCKGPU-LINKED-PTX\x00"

_lock = threading.Lock()
_cubin_ptx: dict[bytes, list[str]] = {}


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def register_cubin(cubin: bytes, ptx_texts: list[str]) -> None:
    """Remember that ``cubin`` (machine code from NVRTC or nvJitLink) was made from the PTX modules ``ptx_texts``."""
    with _lock:
        _cubin_ptx[_digest(cubin)] = list(ptx_texts)


def image_size(head: bytes) -> int | None:
    """The length in bytes of an ELF, fatbin or linked image from its first 64 bytes, or None for text."""
    if head.startswith(ELF_MAGIC) and len(head) >= 64:
        shoff, = struct.unpack_from("<Q", head, 0x28)
        phoff, = struct.unpack_from("<Q", head, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 0x36)
        return max(shoff + shentsize * shnum, phoff + phentsize * phnum, 64)
    if len(head) >= _FATBIN_HEADER.size and struct.unpack_from("<I", head)[0] == FATBIN_MAGIC:
        _, _, header_size, payload = _FATBIN_HEADER.unpack_from(head)
        return header_size + payload
    if head.startswith(_LINKED_MAGIC):
        return len(_LINKED_MAGIC) + 8 + struct.unpack_from("<Q", head, len(_LINKED_MAGIC))[0]
    return None


def is_binary(data: bytes) -> bool:
    """Whether ``data`` starts like a cubin, a fatbin or a linked image rather than PTX text."""
    return data.startswith(ELF_MAGIC) or image_size(data[:64]) is not None


def binary_ptx(data: bytes) -> list[str]:
    """The PTX texts a binary image carries (one for a cubin or fatbin, several for a linked image).

    CUDA_ERROR_INVALID_IMAGE when the image carries none the emulator can use: a cubin that did not come from NVRTC
    in this process, a fatbin with only cubins or compressed PTX.
    """
    if data.startswith(_LINKED_MAGIC):
        body = data[len(_LINKED_MAGIC) + 8:]
        return [part.decode() for part in body.split(b"\x00") if part.strip()]
    if data.startswith(ELF_MAGIC):
        with _lock:
            ptx = _cubin_ptx.get(_digest(data))
        if ptx is None:
            raise error("CUDA_ERROR_INVALID_IMAGE", "the image is a cubin (machine code) whose PTX is unknown: "
                        "mock_gpu executes PTX; load PTX (nvrtcGetPTX, nvcc -ptx), a fatbin that embeds PTX, or a "
                        "cubin from NVRTC or nvJitLink made in this process after mock_gpu.install()", severe=True)
        return ptx
    return [_fatbin_ptx(data)]


def _fatbin_ptx(data: bytes) -> str:
    _, _, header_size, payload = _FATBIN_HEADER.unpack_from(data)
    offset, end, found = header_size, min(len(data), header_size + payload), []
    while offset + _ENTRY_HEADER.size <= end:
        kind, _, entry_header, size = _ENTRY_HEADER.unpack_from(data, offset)
        flags, = struct.unpack_from("<Q", data, offset + 0x28) if offset + 0x30 <= end else (0,)
        if kind == _ENTRY_PTX and not flags & _ENTRY_COMPRESSED:
            body = data[offset + entry_header: offset + entry_header + size]
            found.append(body.split(b"\x00", 1)[0].decode(errors="replace"))
        if entry_header == 0:
            break
        offset += entry_header + size
    if not found:
        raise error("CUDA_ERROR_INVALID_IMAGE", "the fatbin carries no uncompressed PTX (only cubins, or PTX "
                    "compressed by nvcc); mock_gpu executes PTX: build with -Xfatbin -compress=false and a "
                    "compute_XX target", severe=True)
    return found[-1]


def link_image(ptx_texts: list[str]) -> bytes:
    """The image cuLinkComplete hands out for linked PTX inputs: a header, the byte length, the NUL-separated texts."""
    body = b"\x00".join(text.encode() for text in ptx_texts) + b"\x00"
    return _LINKED_MAGIC + struct.pack("<Q", len(body)) + body
