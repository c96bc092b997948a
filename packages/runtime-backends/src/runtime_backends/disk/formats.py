"""Tensors in files made by other tools, found as views of a DISK buffer: numpy ``.npy`` and safetensors.

Only headers are parsed here (read through the DISK buffer itself); the data stay in the file, and each tensor is a
:meth:`Buffer.view` of its bytes, so copying it to a device reads exactly those bytes. Layouts follow the formats'
own specifications: the ``.npy`` format description in ``numpy.lib.format`` (magic ``\\x93NUMPY``, version, header
length, a Python-literal dict with ``descr``, ``fortran_order``, ``shape``) and the safetensors format (an 8-byte
little-endian header length, a JSON header mapping names to ``dtype``, ``shape`` and ``data_offsets`` counted from the
end of the header).

A view is one C-ordered byte range: layouts that are not (Fortran order with more than one dimension longer than 1,
data in the other byte order) are refused with ``ValueError`` rather than returned as silently reordered data.
"""

from __future__ import annotations

import ast
import json
import math
import os
import struct
from dataclasses import dataclass

import numpy as np

from runtime_core.buffer import Buffer
from runtime_core.dtype import DType, dtypes

__all__ = ["Tensor", "file_buffer", "c_contiguous_nbytes", "npy_tensor", "safetensors_tensors", "SAFETENSORS_DTYPES"]

SAFETENSORS_DTYPES = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16,
                      "I16": dtypes.int16, "F16": dtypes.float16, "BF16": dtypes.bfloat16, "U32": dtypes.uint32,
                      "I32": dtypes.int32, "F32": dtypes.float32, "U64": dtypes.uint64, "I64": dtypes.int64,
                      "F64": dtypes.float64}
_SAFETENSORS_HEADER_MAX = 100 << 20  # the format's own bound on the JSON header
_NPY_MAGIC = b"\x93NUMPY"


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
    """An allocated ``uint8`` buffer on ``DISK:<path>`` covering the whole file (read use: ``FileNotFoundError`` when
    it is missing, ``ValueError`` when it is empty). Deallocate it when done: the file stays open and mapped until
    then."""
    path = os.fspath(path)
    size = os.stat(path).st_size
    if size == 0:
        raise ValueError(f"{path!r} is empty: nothing to read")
    return Buffer(f"DISK:{path}", size, dtypes.uint8).allocate()


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


def _read(base: Buffer, offset: int, nbytes: int, what: str) -> bytes:
    if offset + nbytes > base.nbytes:
        raise ValueError(f"{what}: needs bytes [{offset}, {offset + nbytes}) but the file has {base.nbytes}")
    return bytes(base.view(nbytes, dtypes.uint8, offset).numpy())


def npy_tensor(base: Buffer, name: str = "array") -> Tensor:
    """The array of a ``.npy`` file (format versions 1-3) in ``base`` (a ``uint8`` buffer over the whole file).

    Raises ``ValueError`` for a file that is not ``.npy``, a malformed header, a dtype without a runtime equivalent
    (object, structured, complex), big-endian data, a Fortran-ordered array that is not one C-ordered range, or data
    running past the end of the file.
    """
    magic = _read(base, 0, 8, "npy magic")
    if magic[:6] != _NPY_MAGIC or magic[6] not in (1, 2, 3):
        raise ValueError(f"not a .npy file (magic {magic[:8]!r}); numpy writes them with numpy.save")
    len_size = 2 if magic[6] == 1 else 4
    (hlen,) = struct.unpack("<H" if len_size == 2 else "<I", _read(base, 8, len_size, "npy header length"))
    start = 8 + len_size
    text = _read(base, start, hlen, "npy header").decode("latin1" if magic[6] < 3 else "utf8")
    header = _npy_header(text)
    try:
        npdt = np.dtype(header["descr"])
    except TypeError as e:
        raise ValueError(f"npy descr {header['descr']!r} is not a numpy dtype: {e}") from None
    if npdt.byteorder not in "=|":
        raise ValueError(f"npy data are not in this machine's byte order ({npdt.str}): byte-swap them with numpy first")
    dtype = dtypes.from_numpy(npdt)
    shape = tuple(header["shape"])
    if header["fortran_order"]:
        strides = tuple(math.prod(shape[:i]) * dtype.itemsize for i in range(len(shape)))
        c_contiguous_nbytes(shape, strides, dtype.itemsize)
    tensor = Tensor(name, dtype, shape, start + hlen)
    if tensor.offset + tensor.nbytes > base.nbytes:
        raise ValueError(f"npy array of {tensor.nbytes} bytes at offset {tensor.offset} runs past the end of the "
                         f"{base.nbytes}-byte file (truncated?)")
    return tensor


def _npy_header(text: str) -> dict:
    try:
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"malformed npy header {text.strip()!r}: {e}") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"npy header must be a dict of descr, fortran_order and shape, got {text.strip()!r}")
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ValueError(f"npy header shape must be a tuple of ints >= 0, got {shape!r}")
    if not isinstance(header["descr"], str):
        raise ValueError(f"npy descr {header['descr']!r} is not a plain dtype (structured arrays are not supported)")
    return header


def safetensors_tensors(base: Buffer) -> dict[str, Tensor]:
    """The tensors of a safetensors file in ``base`` (a ``uint8`` buffer over the whole file), by name, in file order.

    Raises ``ValueError`` for a header length beyond the file or the format's 100 MB bound, a header that is not a JSON
    object of tensor entries, an unknown dtype, a shape that does not match the byte range, or offsets that overlap,
    leave gaps or run past the end of the file.
    """
    (hlen,) = struct.unpack("<Q", _read(base, 0, 8, "safetensors header length"))
    if hlen > _SAFETENSORS_HEADER_MAX or 8 + hlen > base.nbytes:
        raise ValueError(f"safetensors header length {hlen} is beyond the {base.nbytes}-byte file or the format's "
                         f"{_SAFETENSORS_HEADER_MAX}-byte bound: not a safetensors file?")
    try:
        header = json.loads(_read(base, 8, hlen, "safetensors header"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"safetensors header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("safetensors header must be a JSON object of tensor entries")
    data_start = 8 + hlen
    tensors = [_safetensors_entry(name, entry, data_start) for name, entry in header.items() if name != "__metadata__"]
    tensors.sort(key=lambda t: t.offset)
    pos = data_start
    for t in tensors:
        if t.offset != pos:
            raise ValueError(f"safetensors tensor {t.name!r} starts at data byte {t.offset - data_start}, expected "
                             f"{pos - data_start}: the tensors must tile the data without gaps or overlap")
        pos += t.nbytes
    if pos > base.nbytes:
        raise ValueError(f"safetensors data run to byte {pos}, past the end of the {base.nbytes}-byte file")
    return {t.name: t for t in tensors}


def _safetensors_entry(name: str, entry: object, data_start: int) -> Tensor:
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise ValueError(f"safetensors entry {name!r} must have dtype, shape and data_offsets, got {entry!r}")
    if entry["dtype"] not in SAFETENSORS_DTYPES:
        raise ValueError(f"safetensors tensor {name!r} has dtype {entry['dtype']!r}; supported: "
                         f"{', '.join(SAFETENSORS_DTYPES)}")
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ValueError(f"safetensors tensor {name!r}: shape must be a list of ints >= 0, got {shape!r}")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise ValueError(f"safetensors tensor {name!r}: data_offsets must be [begin, end] with 0 <= begin <= end, got "
                         f"{offsets!r}")
    tensor = Tensor(name, SAFETENSORS_DTYPES[entry["dtype"]], tuple(shape), data_start + offsets[0])
    if offsets[1] - offsets[0] != tensor.nbytes:
        raise ValueError(f"safetensors tensor {name!r}: shape {tuple(shape)} of {entry['dtype']} is {tensor.nbytes} "
                         f"bytes, but data_offsets {offsets} span {offsets[1] - offsets[0]}")
    return tensor
