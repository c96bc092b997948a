"""The request types of the CLOUD wire protocol, as the reference system (tinygrad 0.10.2, ``ops_cloud``) names them.

A ``POST /batch`` body ends with the request list written as the ``repr`` of a Python list of these dataclasses, e.g.::

    [BufferAlloc(buffer_num=1, size=64, options=BufferSpec(image=None, uncached=False, cpu_access=False, host=False,
     nolru=False, external_ptr=None)), CopyIn(buffer_num=1, datahash='9f86d0...'), CopyOut(buffer_num=1)]

so class names, field names and field order are part of the protocol. ``datahash`` is the lowercase hex SHA-256 of a
blob of the same body (``framing``); buffer numbers are chosen by the client and live in its session. Every type
checks its fields on construction (the server's decoder builds them from untrusted text) and raises
:class:`ProtocolError` naming the field; lists are normalized to tuples.

``BufferSpec`` here is the wire record, which has the reference's ``image`` field in first place; it converts to and
from :class:`runtime_core.BufferSpec`, which has no images (no backend of this project has image memory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from runtime_core.buffer_spec import BufferSpec as CoreBufferSpec

__all__ = ["ProtocolError", "Image", "BufferSpec", "BufferAlloc", "BufferFree", "CopyIn", "CopyOut", "ProgramAlloc",
           "ProgramFree", "ProgramExec", "Request", "REQUEST_TYPES", "IMAGE_KINDS", "SIGNATURE_HEADER",
           "RENDERER_HEADER", "WireBounds", "encode_requests"]

MAX_NAME_CHARS = 256
MAX_ARGS = 4096
"""Buffers or vals of one ProgramExec (far above any backend's launch limit: the device refuses more)."""
INT64_MAX = 2**63 - 1
IMAGE_KINDS = ("imagef", "imageh")
SIGNATURE_HEADER = "cloud-program-signature"
"""Answer header of a batch whose last ProgramAlloc loaded a program that tells its argument counts, as
``buffers=N, vals=M``. An addition to the reference protocol: clients that do not know it ignore it."""
RENDERER_HEADER = "cloud-renderer"
"""Header of this project's ``GET /renderer`` answer with its own description of the renderer (the body names the
reference's counterpart, which the reference's client accepts). An addition to the reference protocol: a server
without it is the reference's, whose devices use the reference's calling conventions."""
_HEX64 = re.compile(r"[0-9a-f]{64}")


class WireBounds(Protocol):
    """The bounds a reader of bodies and request lists checks (the server's ``Limits`` has them)."""

    @property
    def max_body_bytes(self) -> int: ...

    @property
    def max_blobs(self) -> int: ...

    @property
    def max_literal_bytes(self) -> int: ...

    @property
    def max_requests(self) -> int: ...

    @property
    def max_depth(self) -> int: ...


class ProtocolError(ValueError):
    """A request that breaks the protocol (wrong type, bad field, unknown name); the server answers ``400``."""


def _int(value: Any, what: str, lo: int, hi: int = INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{what} must be an int, got {value!r}")
    if not lo <= value <= hi:
        raise ProtocolError(f"{what} must be in [{lo}, {hi}], got {value}")
    return value


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ProtocolError(f"{what} must be True or False, got {value!r}")
    return value


def _ints(value: Any, what: str, lo: int, hi: int, max_len: int) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)):
        raise ProtocolError(f"{what} must be a tuple of ints, got {value!r}")
    if len(value) > max_len:
        raise ProtocolError(f"{what} has {len(value)} entries, at most {max_len} are allowed")
    return tuple(_int(v, f"{what}[{i}]", lo, hi) for i, v in enumerate(value))


def _launch_size(value: Any, what: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    size = _ints(value, what, 1, INT64_MAX, 3)
    if not size:
        raise ProtocolError(f"{what} must have 1 to 3 entries, got ()")
    return size


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise ProtocolError(f"name must be a printable str of 1 to {MAX_NAME_CHARS} characters, got {value!r:.80}")
    return value


def _datahash(value: Any) -> str:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ProtocolError(f"datahash must be 64 lowercase hex digits (a SHA-256), got {value!r:.80}")
    return value


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # normalizing a frozen dataclass's field in __post_init__


@dataclass(frozen=True, repr=False)
class Image:
    """The reference's image dtype on the wire, written ``dtypes.imagef((h, w, 4))`` (or ``dtypes.imageh``): only
    decoded so that such a request gets a precise answer; no backend here allocates image memory."""

    kind: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.kind not in IMAGE_KINDS:
            raise ProtocolError(f"image kind must be one of {IMAGE_KINDS}, got {self.kind!r}")
        _set(self, "shape", _ints(self.shape, "image shape", 1, INT64_MAX, 4))

    def __repr__(self) -> str:
        return f"dtypes.{self.kind}({self.shape!r})"


@dataclass(frozen=True)
class BufferSpec:
    """Allocation options on the wire: the reference's ``BufferSpec`` fields, in its order."""

    image: Image | None = None
    uncached: bool = False
    cpu_access: bool = False
    host: bool = False
    nolru: bool = False
    external_ptr: int | None = None

    def __post_init__(self) -> None:
        if self.image is not None and not isinstance(self.image, Image):
            raise ProtocolError(f"BufferSpec.image must be None or dtypes.imagef(...)/imageh(...), got {self.image!r}")
        for name in ("uncached", "cpu_access", "host", "nolru"):
            _bool(getattr(self, name), f"BufferSpec.{name}")
        if self.external_ptr is not None:
            _int(self.external_ptr, "BufferSpec.external_ptr", 1)

    @classmethod
    def from_core(cls, spec: CoreBufferSpec) -> BufferSpec:
        """The wire form of a runtime ``BufferSpec`` (``image=None``)."""
        return cls(None, spec.uncached, spec.cpu_access, spec.host, spec.nolru, spec.external_ptr)

    def to_core(self) -> CoreBufferSpec:
        """The runtime ``BufferSpec`` of this record. ``ProtocolError`` when it asks for an image or wraps an
        ``external_ptr`` (an address in the client's process means nothing on the server)."""
        if self.image is not None:
            raise ProtocolError(f"image buffers ({self.image!r}) are not supported: no backend of this server has "
                                f"image memory; allocate a plain buffer (image=None)")
        if self.external_ptr is not None:
            raise ProtocolError("BufferSpec.external_ptr names memory in the client's process, which a CLOUD server "
                                "cannot reach; allocate the buffer on the server and copy the data in")
        return CoreBufferSpec(self.uncached, self.cpu_access, self.host, self.nolru, None)


@dataclass(frozen=True)
class BufferAlloc:
    """Allocate ``size`` bytes as buffer ``buffer_num`` of the session."""

    buffer_num: int
    size: int
    options: BufferSpec

    def __post_init__(self) -> None:
        _int(self.buffer_num, "BufferAlloc.buffer_num", 0)
        _int(self.size, "BufferAlloc.size", 1)
        if not isinstance(self.options, BufferSpec):
            raise ProtocolError(f"BufferAlloc.options must be a BufferSpec(...), got {self.options!r:.80}")


@dataclass(frozen=True)
class BufferFree:
    """Free buffer ``buffer_num``."""

    buffer_num: int

    def __post_init__(self) -> None:
        _int(self.buffer_num, "BufferFree.buffer_num", 0)


@dataclass(frozen=True)
class CopyIn:
    """Copy the blob ``datahash`` into the start of buffer ``buffer_num`` (at most the buffer's size)."""

    buffer_num: int
    datahash: str

    def __post_init__(self) -> None:
        _int(self.buffer_num, "CopyIn.buffer_num", 0)
        _datahash(self.datahash)


@dataclass(frozen=True)
class CopyOut:
    """Answer the whole contents of buffer ``buffer_num`` (the response body, if it is the batch's last output)."""

    buffer_num: int

    def __post_init__(self) -> None:
        _int(self.buffer_num, "CopyOut.buffer_num", 0)


@dataclass(frozen=True)
class ProgramAlloc:
    """Compile the source in blob ``datahash`` (UTF-8) and load its kernel ``name``."""

    name: str
    datahash: str

    def __post_init__(self) -> None:
        _name(self.name)
        _datahash(self.datahash)


@dataclass(frozen=True)
class ProgramFree:
    """Unload the program ``(name, datahash)``."""

    name: str
    datahash: str

    def __post_init__(self) -> None:
        _name(self.name)
        _datahash(self.datahash)


@dataclass(frozen=True)
class ProgramExec:
    """Launch program ``(name, datahash)`` on buffers ``bufs`` (buffer numbers, slot order) with int ``vals``;
    ``None`` sizes mean the device's default. With ``wait`` the launch's device seconds are the response body."""

    name: str
    datahash: str
    bufs: tuple[int, ...]
    vals: tuple[int, ...]
    global_size: tuple[int, ...] | None
    local_size: tuple[int, ...] | None
    wait: bool

    def __post_init__(self) -> None:
        _name(self.name)
        _datahash(self.datahash)
        _set(self, "bufs", _ints(self.bufs, "ProgramExec.bufs", 0, INT64_MAX, MAX_ARGS))
        _set(self, "vals", _ints(self.vals, "ProgramExec.vals", -INT64_MAX - 1, INT64_MAX, MAX_ARGS))
        _set(self, "global_size", _launch_size(self.global_size, "ProgramExec.global_size"))
        _set(self, "local_size", _launch_size(self.local_size, "ProgramExec.local_size"))
        _bool(self.wait, "ProgramExec.wait")


Request = BufferAlloc | BufferFree | CopyIn | CopyOut | ProgramAlloc | ProgramFree | ProgramExec
REQUEST_TYPES: tuple[type, ...] = (BufferAlloc, BufferFree, CopyIn, CopyOut, ProgramAlloc, ProgramFree, ProgramExec)


def encode_requests(requests: list[Request]) -> bytes:
    """The request-list blob: ``repr`` of the list, UTF-8 (what the reference's server reads back)."""
    return repr(requests).encode()
