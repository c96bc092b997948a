"""Tensors in files made by other tools, found as views of a DISK buffer: numpy ``.npy`` and safetensors.

Only headers are parsed here (read through the DISK buffer itself); the data stay in the file, and each tensor is a
:meth:`Buffer.view` of its bytes, so copying it to a device reads exactly those bytes. Layouts follow the formats'
own specifications: the ``.npy`` format description in ``numpy.lib.format`` (magic ``\\x93NUMPY``, version, header
length, a Python-literal dict with ``descr``, ``fortran_order``, ``shape``) and the safetensors format (an 8-byte
little-endian header length, a JSON header mapping names to ``dtype``, ``shape`` and ``data_offsets`` counted from the
end of the header).

A view is one C-ordered byte range: layouts that are not (Fortran order with more than one dimension longer than 1,
data in the other byte order) are refused with ``ValueError`` rather than returned as silently reordered data.

A header that breaks its format raises :class:`HeaderError` (a ``ValueError``) whose message names the file, the
field and what the format expects there, whatever is wrong: a value of the wrong type anywhere (a list where a dtype
string belongs, ``true`` where an integer belongs), nesting deeper than the format has, a name or key given twice, a
field the format does not define, offsets out of order, overlapping, leaving gaps, running past the end of the file
or ending before it (the safetensors reference reader's ``MetadataIncompleteBuffer``). Sizes are checked against the
file as it is when the header is read, so a file that shrank after its buffer was made is refused too. Nothing is
read past the header before it has been checked.
"""

from __future__ import annotations

import ast
import errno
import json
import math
import os
import re
import reprlib
import stat
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from runtime_backends.disk.device import DiskDevice
from runtime_core.buffer import Buffer
from runtime_core.dtype import DType, dtypes

__all__ = ["HeaderError", "Tensor", "file_buffer", "c_contiguous_nbytes", "npy_tensor", "safetensors_tensors",
           "SAFETENSORS_DTYPES"]

SAFETENSORS_DTYPES = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16,
                      "I16": dtypes.int16, "F16": dtypes.float16, "BF16": dtypes.bfloat16, "U32": dtypes.uint32,
                      "I32": dtypes.int32, "F32": dtypes.float32, "U64": dtypes.uint64, "I64": dtypes.int64,
                      "F64": dtypes.float64}
_SAFETENSORS_HEADER_MAX = 100_000_000  # the reference reader's bound on the JSON header (HeaderTooLarge)
_SAFETENSORS_DEPTH = 3  # header object > tensor entry > shape or data_offsets list
_SAFETENSORS_FIELDS = {"dtype", "shape", "data_offsets"}
_NPY_MAGIC = b"\x93NUMPY"
_NPY_HEADER_MAX = 10000  # numpy.load's own bound (max_header_size) for headers it parses with literal_eval
_NPY_KEYS = {"descr", "fortran_order", "shape"}
_JSON_STRING = re.compile(rb'"[^"]*"')  # a string once its escaped backslashes and quotes are gone
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = np.zeros(256, np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1
_DEPTH_PIECE = 1 << 20  # brackets summed at a time: bounded memory for a header of 100 MB of brackets
_REPR = reprlib.Repr()  # how much of a bad value an error quotes
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple = 3, 6, 6, 6


class HeaderError(ValueError):
    """A malformed ``.npy`` or safetensors header: the message names the file, the field and what was expected."""

    def __init__(self, where: str, field: str, expected: str, got: object) -> None:
        super().__init__(f"{where}: {field}: expected {expected}, got {_shown(got)}")


def _shown(value: object) -> str:
    """A bounded repr of ``value``: a bad value may be most of a 100 MB header."""
    if isinstance(value, bytes):  # reprlib bounds bytes only after a repr of all of them
        more = f"... ({len(value)} bytes)" if len(value) > _REPR.maxother else ""
        return repr(value[:_REPR.maxother]) + more
    return _REPR.repr(value)


@dataclass(frozen=True)
class Tensor:
    """A tensor stored in a file: ``shape`` elements of ``dtype`` (C order) at byte ``offset`` of the file."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def view(self, base: Buffer) -> Buffer:
        """The tensor as a view of ``base`` (a buffer over the whole file, starting at its byte 0).

        ``ValueError`` for a tensor without elements (buffers have a positive size) or one that does not fit ``base``.
        """
        if self.nbytes == 0:
            raise ValueError(f"tensor {self.name!r} has shape {self.shape}: no elements, so no buffer view")
        return base.view(math.prod(self.shape), self.dtype, self.offset)


def file_buffer(path: str | os.PathLike[str]) -> Buffer:
    """An allocated ``uint8`` buffer on ``DISK:<path>`` covering the whole file. Deallocate it when done: the file stays
    open and mapped until then.

    Raises ``FileNotFoundError`` when it is missing, ``IsADirectoryError`` for a directory, ``ValueError`` naming the
    path for anything else that is not a regular file (a FIFO, a device such as ``/dev/zero``, a socket) and for an
    empty file (pseudo-files of ``/proc`` and ``/sys`` report 0 bytes too).
    """
    path = os.fspath(path)
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"{path!r} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path!r} is not a regular file (a FIFO, device or socket): DISK reads regular files")
    if st.st_size == 0:
        raise ValueError(f"{path!r} is empty (0 bytes): nothing to read")
    return Buffer(f"DISK:{path}", st.st_size, dtypes.uint8).allocate()


def c_contiguous_nbytes(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Bytes of a ``shape``/``strides`` (bytes) layout when it is one C-ordered byte range, as a buffer view must be.

    Raises ``ValueError`` for a strided (gaps), permuted (e.g. Fortran-ordered) or negative-stride layout, naming the
    strides C order would have.
    """
    if len(shape) != len(strides) or any(d < 0 for d in shape):
        raise ValueError(f"bad layout: shape {shape} with strides {strides}")
    expected, step = [], itemsize
    for dim in reversed(shape):
        expected.append(step)
        step *= dim
    expected.reverse()
    if any(d > 1 and s != e for d, s, e in zip(shape, strides, expected)):
        raise ValueError(f"a layout of shape {shape} with strides {strides} is not one C-ordered byte range "
                         f"(C order has strides {tuple(expected)}): a DISK view cannot express it; read the whole "
                         f"range and rearrange it on the host (numpy) instead")
    return math.prod(shape) * itemsize


def _size_now(base: Buffer) -> int:
    """The bytes of the file that ``base`` covers now: the file may have shrunk since the buffer was made."""
    dev = base.dev
    return min(base.nbytes, dev.file.size()) if isinstance(dev, DiskDevice) else base.nbytes


def _read(base: Buffer, size: int, offset: int, nbytes: int, where: str, field: str) -> bytes:
    if offset + nbytes > size:
        raise HeaderError(where, field, f"bytes [{offset}, {offset + nbytes}) inside the file",
                          f"a file of {size} bytes (truncated?)")
    return bytes(base.view(nbytes, dtypes.uint8, offset).numpy()) if nbytes else b""


def _file(base: Buffer, kind: str) -> str:
    return f"{kind} file {base.device.partition(':')[2]!r}"


def _is_int(value: object, least: int = 0) -> bool:
    """``value`` is an int >= ``least`` and not a bool (``True`` is an int to Python, never a count to a format)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def npy_tensor(base: Buffer, name: str = "array") -> Tensor:
    """The array of a ``.npy`` file (format versions 1.0, 2.0 and 3.0, as ``numpy.lib.format`` writes them) in
    ``base`` (a ``uint8`` buffer over the whole file).

    Raises :class:`HeaderError` (a ``ValueError``) for a file that is not ``.npy``, a malformed header (see the module
    docstring), a dtype without a runtime equivalent (object, structured, complex), big-endian data, a Fortran-ordered
    array that is not one C-ordered range, or data running past the end of the file.
    """
    where, size = _file(base, "npy"), _size_now(base)
    magic = _read(base, size, 0, 8, where, "magic")
    if magic[:6] != _NPY_MAGIC or magic[6] not in (1, 2, 3) or magic[7] != 0:
        raise HeaderError(where, "magic", "b'\\x93NUMPY' and format version 1.0, 2.0 or 3.0 (a .npy file: "
                                          "numpy.save writes them)", magic)
    len_size = 2 if magic[6] == 1 else 4
    (hlen,) = struct.unpack("<H" if len_size == 2 else "<I", _read(base, size, 8, len_size, where, "header length"))
    if hlen > _NPY_HEADER_MAX:
        raise HeaderError(where, "header length", f"at most {_NPY_HEADER_MAX} bytes (numpy.load's bound)", hlen)
    start = 8 + len_size
    raw = _read(base, size, start, hlen, where, "header")
    try:
        text = raw.decode("latin1" if magic[6] < 3 else "utf8")
    except UnicodeDecodeError as e:
        raise HeaderError(where, "header", f"UTF-8 text (format 3.0): {e}", raw) from None
    header = _npy_header(where, text)
    dtype = _npy_dtype(where, header["descr"])
    shape = header["shape"]
    if header["fortran_order"]:
        strides = tuple(math.prod(shape[:i]) * dtype.itemsize for i in range(len(shape)))
        try:
            c_contiguous_nbytes(shape, strides, dtype.itemsize)
        except ValueError as e:
            raise HeaderError(where, "fortran_order", f"False for an array of shape {shape} (Fortran order: {e})",
                              True) from None
    tensor = Tensor(name, dtype, shape, start + hlen)
    if tensor.offset + tensor.nbytes > size:
        raise HeaderError(where, "shape", f"an array that fits the file: {tensor.nbytes} bytes of data at offset "
                                          f"{tensor.offset} run past the end of the {size}-byte file "
                                          f"(truncated?)", shape)
    return tensor


def _npy_header(where: str, text: str) -> dict:
    try:
        tree = ast.parse(text.lstrip(" \t"), mode="eval")
        _npy_unique_keys(where, tree.body)
        header = ast.literal_eval(tree)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError) as e:
        if isinstance(e, HeaderError):
            raise
        raise HeaderError(where, "header", f"a Python literal dict (malformed npy header: {e})", text.strip()) from None
    if not isinstance(header, dict) or set(header) != _NPY_KEYS:
        raise HeaderError(where, "header", "a dict of exactly descr, fortran_order and shape", text.strip())
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(_is_int(d) for d in shape):
        raise HeaderError(where, "shape", "a tuple of ints >= 0", shape)
    if not isinstance(header["fortran_order"], bool):
        raise HeaderError(where, "fortran_order", "True or False", header["fortran_order"])
    return header


def _npy_unique_keys(where: str, node: ast.expr) -> None:
    """Refuse a dict display giving a key twice (a literal dict keeps the last one silently)."""
    if not isinstance(node, ast.Dict):
        return
    seen: set[object] = set()
    for key in node.keys:
        value = key.value if isinstance(key, ast.Constant) else None
        if value in seen:
            raise HeaderError(where, f"key {value!r}", "each key once in the header dict", "it twice")
        seen.add(value)


def _npy_dtype(where: str, descr: object) -> DType:
    if not isinstance(descr, str):
        raise HeaderError(where, "descr", "a plain dtype string such as '<f4' (structured arrays are not supported)",
                          descr)
    try:
        npdt = np.dtype(descr)
    except (TypeError, ValueError, SyntaxError) as e:
        raise HeaderError(where, "descr", f"a numpy dtype string such as '<f4' ({descr!r} is not a numpy dtype: "
                                          f"{e})", descr) from None
    if npdt.byteorder not in "=|":
        raise HeaderError(where, "descr", "data in this machine's byte order (byte-swap them with numpy first)", descr)
    try:
        return dtypes.from_numpy(npdt)
    except ValueError as e:
        raise HeaderError(where, "descr", f"a dtype with a runtime equivalent ({e})", descr) from None


def safetensors_tensors(base: Buffer) -> dict[str, Tensor]:
    """The tensors of a safetensors file in ``base`` (a ``uint8`` buffer over the whole file), by name, in file order.

    Raises :class:`HeaderError` (a ``ValueError``) for a header length beyond the file or the reference reader's
    100,000,000-byte bound, a header that is not UTF-8 JSON (a byte-order mark or UTF-16 included), not an object of
    tensor entries nested as the format nests them, a name given twice, a field an entry does not have in the format,
    an unknown dtype, a shape that does not match the byte range, ``__metadata__`` that is not an object of strings, or
    offsets that overlap, leave gaps, run past the end of the file or leave bytes after the last tensor.
    """
    where, size = _file(base, "safetensors"), _size_now(base)
    (hlen,) = struct.unpack("<Q", _read(base, size, 0, 8, where, "header length"))
    if hlen > _SAFETENSORS_HEADER_MAX or 8 + hlen > size:
        raise HeaderError(where, "header length", f"at most the {max(size - 8, 0)} bytes after it and the format's "
                                                  f"{_SAFETENSORS_HEADER_MAX}-byte bound (not a safetensors file?)", hlen)
    header = _safetensors_json(where, _read(base, size, 8, hlen, where, "header"))
    data_start = 8 + hlen
    _check_metadata(where, header.get("__metadata__", {}))
    tensors = [_safetensors_entry(where, name, entry, data_start) for name, entry in header.items()
               if name != "__metadata__"]
    tensors.sort(key=lambda t: (t.offset, t.nbytes))
    pos = data_start
    for t in tensors:
        if t.offset != pos:
            raise HeaderError(where, f"tensor {t.name!r} data_offsets", f"a start at data byte {pos - data_start}: "
                                                                        f"the tensors tile the data in order, without "
                                                                        f"gaps or overlap", t.offset - data_start)
        pos += t.nbytes
    if pos > size:
        last = tensors[-1]
        raise HeaderError(where, f"tensor {last.name!r} data_offsets", f"an end within the {size - data_start} "
                                                                       f"data bytes of the {size}-byte file (past "
                                                                       f"the end: truncated?)", pos - data_start)
    if pos < size:
        raise HeaderError(where, "data", f"tensors covering all {size - data_start} data bytes of the file (the "
                                         f"last offset is the end of the file)", f"{size - pos} bytes after the last "
                                                                                f"tensor")
    return {t.name: t for t in tensors}


def _safetensors_json(where: str, raw: bytes) -> dict:
    depth = _json_depth(raw)
    if depth > _SAFETENSORS_DEPTH:
        raise HeaderError(where, "header", f"at most {_SAFETENSORS_DEPTH} levels of nesting (header object, tensor "
                                           f"entry, shape or data_offsets list)", f"{depth} levels")

    def unique(pairs: Iterable[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in pairs:
            if key in out:
                raise HeaderError(where, f"name {key!r}", "each name once in its object", "it twice")
            out[key] = value
        return out
    try:  # decoded here: json.loads of bytes would also take UTF-16, UTF-32 and a byte-order mark
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=unique)
    except HeaderError:
        raise
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise HeaderError(where, "header", f"valid UTF-8 JSON (the header is not valid JSON: {e})", raw) from None
    if not isinstance(header, dict):
        raise HeaderError(where, "header", "a JSON object of tensor entries", header)
    return header


def _json_depth(raw: bytes) -> int:
    """The deepest nesting of objects and arrays in JSON text ``raw`` (brackets inside strings do not count)."""
    # bytes.replace and a regex without repeated groups: linear time and a few copies of memory for any header (a
    # regex matching escapes inside strings kept state per escape: gigabytes for 100 MB of them)
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")  # left to right: each backslash pair, then \"
    brackets = _JSON_STRING.sub(b"", unescaped).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for at in range(0, len(brackets), _DEPTH_PIECE):
        piece = np.frombuffer(brackets, np.uint8, min(_DEPTH_PIECE, len(brackets) - at), at)
        levels = depth + np.cumsum(_BRACKET_STEP[piece], dtype=np.int64)
        depth, deepest = int(levels[-1]), max(deepest, int(levels.max()))
    return deepest


def _check_metadata(where: str, metadata: object) -> None:
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise HeaderError(where, "__metadata__", "an object of string values", metadata)


def _safetensors_entry(where: str, name: str, entry: object, data_start: int) -> Tensor:
    field = f"tensor {name!r}"
    if not isinstance(entry, dict):
        raise HeaderError(where, field, "an object with dtype, shape and data_offsets", entry)
    missing, unknown = sorted(_SAFETENSORS_FIELDS - set(entry)), sorted(set(entry) - _SAFETENSORS_FIELDS)
    if missing:
        raise HeaderError(where, field, f"an object with dtype, shape and data_offsets (must have dtype, shape and "
                                        f"data_offsets; missing {', '.join(missing)})", entry)
    if unknown:  # a field this reader does not know could change what the bytes mean
        raise HeaderError(where, field, f"an object of exactly dtype, shape and data_offsets (unknown: "
                                        f"{', '.join(map(repr, unknown))})", entry)
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
        raise HeaderError(where, f"{field} dtype", f"one of {', '.join(SAFETENSORS_DTYPES)}", dtype)
    if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
        raise HeaderError(where, f"{field} shape", "a list of ints >= 0", shape)
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets)
            or offsets[0] > offsets[1]):
        raise HeaderError(where, f"{field} data_offsets", "[begin, end]: two ints with 0 <= begin <= end", offsets)
    tensor = Tensor(name, SAFETENSORS_DTYPES[dtype], tuple(shape), data_start + offsets[0])
    if offsets[1] - offsets[0] != tensor.nbytes:
        raise HeaderError(where, f"{field} data_offsets", f"a span of {tensor.nbytes} bytes (shape {tuple(shape)} of "
                                                          f"{dtype})", offsets)
    return tensor
