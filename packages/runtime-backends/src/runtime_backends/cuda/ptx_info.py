"""What a program needs to know from PTX text before launching: a kernel's parameter list and its dynamic shared
memory, read from the ``.entry`` directive (PTX ISA, "Kernel Function Parameters") and a record our renderers emit.

The Program protocol passes buffers (device pointers) and int32 vals. A PTX parameter of a 64-bit type (``.u64``,
``.s64``, ``.b64``) takes the next buffer, one of a 32-bit integer type (``.u32``, ``.s32``, ``.b32``) the next val, in
the order they appear, so ordinary CUDA C such as ``kernel(const float* a, float* b, int n)`` compiled by NVRTC or
``nvcc -ptx`` runs as it is. Any other parameter (floats, narrow integers, structs passed by value) is refused.

A kernel rendered by this backend that uses shared memory declares it as one ``extern .shared`` array and records the
bytes it needs as ``.global .u32 rtk_shared_bytes_<kernel> = N;`` (:data:`SHARED_RECORD`), which is how a program loaded
from the PTX alone launches it with that much dynamic shared memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["EntrySignature", "PTXFormatError", "entry_signature", "entry_names", "SHARED_RECORD", "shared_record"]

SHARED_RECORD = "rtk_shared_bytes_"
_BUFFER_TYPES = frozenset({".u64", ".s64", ".b64"})
_VAL_TYPES = frozenset({".u32", ".s32", ".b32"})
_TYPES = _BUFFER_TYPES | _VAL_TYPES | frozenset({".u8", ".s8", ".b8", ".u16", ".s16", ".b16", ".f16", ".bf16", ".f32",
                                                 ".f64", ".pred"})
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$%][\w$]*)\s*(\()?")
_PARAM = re.compile(r"\.param\s+((?:\.[\w:]+\s+|\d+\s+)*)([A-Za-z_$%][\w$]*)\s*(\[[^\]]*\])?\s*$")


class PTXFormatError(ValueError):
    """PTX text without the named kernel, or with a parameter the Program protocol cannot pass."""


@dataclass(frozen=True)
class EntrySignature:
    """A kernel's parameters in order, each ``"buffer"`` or ``"val"``, and its recorded dynamic shared bytes."""

    name: str
    kinds: tuple[str, ...]
    shared_bytes: int

    @property
    def nbufs(self) -> int:
        return self.kinds.count("buffer")

    @property
    def nvals(self) -> int:
        return self.kinds.count("val")


def entry_names(ptx: str) -> list[str]:
    """Names of every ``.entry`` (kernel) in ``ptx``, in order."""
    return [m.group(1) for m in _ENTRY.finditer(_COMMENTS.sub(" ", ptx))]


def shared_record(name: str, nbytes: int) -> str:
    """The PTX line that records ``nbytes`` of dynamic shared memory for kernel ``name``."""
    return f".global .align 4 .u32 {SHARED_RECORD}{name} = {nbytes};"


def entry_signature(ptx: str, name: str) -> EntrySignature:
    """The signature of kernel ``name`` in ``ptx``.

    Raises :class:`PTXFormatError` naming the kernels present when ``name`` is not an ``.entry`` of ``ptx``, and
    naming the parameter when one is neither a 64-bit (buffer) nor a 32-bit integer (val).
    """
    text = _COMMENTS.sub(" ", ptx)
    for m in _ENTRY.finditer(text):
        if m.group(1) == name:
            kinds = _param_kinds(name, text, m.end()) if m.group(2) else ()
            record = re.search(rf"\.u32\s+{re.escape(SHARED_RECORD + name)}\s*=\s*(\d+)\s*;", text)
            return EntrySignature(name, kinds, int(record.group(1)) if record else 0)
    found = entry_names(ptx)
    raise PTXFormatError(f"kernel {name!r} is not an .entry of the PTX; it defines {found or 'no kernels'} (a C++ "
                         f"kernel's name is mangled unless it is declared extern \"C\")")


def _param_kinds(name: str, text: str, start: int) -> tuple[str, ...]:
    end = text.find(")", start)
    if end < 0:
        raise PTXFormatError(f"kernel {name!r}: the .entry parameter list is not closed with ')'")
    body = text[start:end].strip()
    if not body:
        return ()
    kinds = []
    for i, param in enumerate(p.strip() for p in body.split(",")):
        m = _PARAM.match(param)
        types = [t for t in (m.group(1).split() if m else []) if t in _TYPES]
        if m is None or len(types) != 1:
            raise PTXFormatError(f"kernel {name!r}: cannot read parameter {i} ({param!r})")
        if m.group(3) is not None or types[0] not in _BUFFER_TYPES | _VAL_TYPES:
            raise PTXFormatError(f"kernel {name!r}: parameter {i} ({param!r}) is {types[0]}"
                                 f"{' array' if m.group(3) else ''}; programs pass buffers (64-bit device pointers) "
                                 f"and int32 vals only")
        kinds.append("buffer" if types[0] in _BUFFER_TYPES else "val")
    return tuple(kinds)
