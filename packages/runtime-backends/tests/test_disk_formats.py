"""Headers of .npy and safetensors files, read through DISK views, and their bad input."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from runtime_backends.disk.formats import file_buffer, npy_tensor, safetensors_tensors
from runtime_core import Device, dtypes


@pytest.fixture(autouse=True)
def _fresh_devices():
    with Device.restoring():
        yield


def _write_safetensors(path, header: dict, data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float16, np.bool_])
def test_npy_arrays_read_through_a_view_match_np_load(tmp_path, rng, version, dtype):
    arr = (rng.standard_normal((5, 7, 3)) * 100).astype(dtype)
    path = tmp_path / "a.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)
    base = file_buffer(path)
    tensor = npy_tensor(base)
    assert tensor.shape == (5, 7, 3) and tensor.dtype == dtypes.from_numpy(np.dtype(dtype))
    np.testing.assert_array_equal(tensor.view(base).numpy().reshape(tensor.shape), np.load(path))


def test_fortran_ordered_npy_is_refused_unless_it_is_one_dimensional(tmp_path):
    np.save(tmp_path / "f.npy", np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    with pytest.raises(ValueError, match="not one C-ordered byte range"):
        npy_tensor(file_buffer(tmp_path / "f.npy"))
    np.save(tmp_path / "v.npy", np.asfortranarray(np.arange(5, dtype=np.float32).reshape(5, 1)))
    base = file_buffer(tmp_path / "v.npy")
    np.testing.assert_array_equal(npy_tensor(base).view(base).numpy(), np.arange(5, dtype=np.float32))


@pytest.mark.parametrize("arr, match", [(np.arange(4, dtype=">f4"), "byte order"),
                                        (np.zeros(3, dtype=np.complex64), "no runtime dtype"),
                                        (np.zeros(2, dtype=[("a", "<i4")]), "structured")])
def test_npy_dtypes_without_a_view_are_refused(tmp_path, arr, match):
    np.save(tmp_path / "x.npy", arr)
    with pytest.raises(ValueError, match=match):
        npy_tensor(file_buffer(tmp_path / "x.npy"))


def test_truncated_or_foreign_npy_files_are_refused(tmp_path):
    np.save(tmp_path / "t.npy", np.arange(1000, dtype=np.int32))
    raw = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-1])
    with pytest.raises(ValueError, match="run past the end of the 4127-byte file"):
        npy_tensor(file_buffer(tmp_path / "t.npy"))
    (tmp_path / "n.bin").write_bytes(b"PK\x03\x04 not numpy at all")
    with pytest.raises(ValueError, match="n.bin.: magic: expected .*a .npy file"):
        npy_tensor(file_buffer(tmp_path / "n.bin"))
    header = b"{'descr': 'no-such-type', 'fortran_order': False, 'shape': (2,), }"
    (tmp_path / "d.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 8)
    with pytest.raises(ValueError, match="is not a numpy dtype"):
        npy_tensor(file_buffer(tmp_path / "d.npy"))
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2,"
    (tmp_path / "h.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    with pytest.raises(ValueError, match="malformed npy header"):
        npy_tensor(file_buffer(tmp_path / "h.npy"))


def test_safetensors_tensors_match_the_safetensors_reader(tmp_path, rng):
    st = pytest.importorskip("safetensors.numpy",
                             reason="the safetensors package is the reference reader (nox -s tests-disk installs it)")
    tensors = {"w": rng.standard_normal((4, 9)).astype(np.float32), "b": rng.integers(-9, 9, 7).astype(np.int64),
               "h": rng.standard_normal(3).astype(np.float16), "m": np.array([True, False, True])}
    path = tmp_path / "m.safetensors"
    st.save_file(tensors, str(path), metadata={"format": "np"})
    base = file_buffer(path)
    found = safetensors_tensors(base)
    reference = st.load_file(str(path))
    assert set(found) == set(reference)
    for name, t in found.items():
        np.testing.assert_array_equal(t.view(base).numpy().reshape(t.shape), reference[name])


def test_safetensors_written_by_hand_read_back(tmp_path):
    a, b = np.arange(6, dtype=np.float32), np.arange(3, dtype=np.uint16)
    header = {"__metadata__": {"k": "v"}, "b": {"dtype": "U16", "shape": [3], "data_offsets": [24, 30]},
              "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    _write_safetensors(tmp_path / "h.st", header, a.tobytes() + b.tobytes())
    base = file_buffer(tmp_path / "h.st")
    found = safetensors_tensors(base)
    assert list(found) == ["a", "b"]
    np.testing.assert_array_equal(found["a"].view(base).numpy(), a)
    np.testing.assert_array_equal(found["b"].view(base).numpy(), b)


@pytest.mark.parametrize("header, data, match", [
    ({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}, b"\0\0", "dtype: expected one of BOOL.*'F8_E4M3'"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 8, r"expected a span of 8 bytes .*got \[0, 4\]"),
    ({"a": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"\0" * 3, "without gaps or overlap"),
    ({"a": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}, b"\0" * 4, "past the end"),
    ({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 0]}}, b"", "ints >= 0"),
    ({"a": {"dtype": "U8", "shape": [1]}}, b"\0", "must have dtype, shape and data_offsets"),
    ([1, 2], b"", "JSON object"),
])
def test_bad_safetensors_headers_are_refused(tmp_path, header, data, match):
    _write_safetensors(tmp_path / "bad.st", header, data)
    with pytest.raises(ValueError, match=match):
        safetensors_tensors(file_buffer(tmp_path / "bad.st"))


def test_a_safetensors_header_length_beyond_the_file_is_refused(tmp_path):
    (tmp_path / "len.st").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(ValueError, match="header length"):
        safetensors_tensors(file_buffer(tmp_path / "len.st"))
    (tmp_path / "json.st").write_bytes(struct.pack("<Q", 5) + b"{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        safetensors_tensors(file_buffer(tmp_path / "json.st"))


def test_missing_and_empty_files_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError):
        file_buffer(tmp_path / "nope.npy")
    (tmp_path / "empty.npy").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        file_buffer(tmp_path / "empty.npy")


@pytest.mark.parametrize("header_text, field", [
    ('{"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}', "tensor 'a' dtype: expected one of"),
    ('{"a": {"dtype": {"F": 32}, "shape": [1], "data_offsets": [0, 4]}}', "tensor 'a' dtype: expected one of"),
    ('{"a": {"dtype": "F32", "shape": ' + "[" * 100000 + "]" * 100000 + ', "data_offsets": [0, 4]}}',
     "header: expected at most 3 levels of nesting"),
    ('{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, '
     '"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}', "name 'a': expected each name once"),
    ('{"a": {"dtype": "U8", "shape": [1], "data_offsets": [false, true]}}', "tensor 'a' data_offsets: expected"),
], ids=["dtype_list", "dtype_dict", "deep_nesting", "duplicate_names", "bool_offsets"])
def test_the_issues_malformed_headers_are_value_errors_naming_file_and_field(tmp_path, header_text, field):
    raw = header_text.encode()
    (tmp_path / "x.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4)
    with pytest.raises(ValueError) as raised:
        safetensors_tensors(file_buffer(tmp_path / "x.safetensors"))
    assert str(tmp_path / "x.safetensors") in str(raised.value) and field in str(raised.value), str(raised.value)


@pytest.mark.parametrize("make, error, match", [
    (lambda p: os.mkfifo(p), ValueError, "not a regular file"),
    (lambda p: os.mkdir(p), IsADirectoryError, "is a directory"),
    (lambda p: os.symlink("/dev/zero", p), ValueError, "not a regular file"),
])
def test_file_buffer_of_what_is_not_a_regular_file_says_so(tmp_path, make, error, match):
    path = tmp_path / "odd"
    make(path)
    with pytest.raises(error, match=match) as raised:
        file_buffer(path)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("fmt", ["npy", "safetensors"])
def test_a_file_shrunk_after_its_buffer_was_made_is_refused_naming_it(tmp_path, fmt):
    arr = np.arange(1000, dtype=np.float32)
    path = tmp_path / f"x.{fmt}"
    if fmt == "npy":
        np.save(path, arr)
    else:
        _write_safetensors(path, {"x": {"dtype": "F32", "shape": [1000], "data_offsets": [0, 4000]}}, arr.tobytes())
    base = file_buffer(path)
    os.truncate(path, 300)
    reader = npy_tensor if fmt == "npy" else safetensors_tensors
    with pytest.raises(ValueError, match="300") as raised:
        reader(base)
    assert str(path) in str(raised.value)
    base.deallocate()
