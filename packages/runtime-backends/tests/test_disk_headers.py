"""Property tests over the structure of .npy and safetensors headers: well-formed headers read as their writers
laid them out; every malformed one is a ``HeaderError`` (a ``ValueError``) naming the file and the field, never any
other exception, whatever is wrong and wherever."""

from __future__ import annotations

import io
import json
import os
import struct
import tempfile
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime_backends.disk.formats import SAFETENSORS_DTYPES, HeaderError, file_buffer, npy_tensor, safetensors_tensors
from runtime_core import Device

EXAMPLES = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
ITEMSIZE = {name: dt.itemsize for name, dt in SAFETENSORS_DTYPES.items()}

json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 1 << 70) | st.floats(allow_nan=False)
                           | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=3), max_leaves=8)


@pytest.fixture
def path() -> Iterator[str]:
    """A file path, reused by every example of a test (each example rewrites it)."""
    with Device.restoring(), tempfile.TemporaryDirectory() as where:
        yield os.path.join(where, "header.bin")


def _parse(path: str, raw: bytes, reader):
    with open(path, "wb") as f:
        f.write(raw)
    base = file_buffer(path)
    try:
        return reader(base)
    finally:
        base.deallocate()


def _refused(path: str, raw: bytes, reader, *fields: str) -> HeaderError:
    """The error of reading ``raw``, which must name the file and one of ``fields``."""
    with pytest.raises(HeaderError) as raised:
        _parse(path, raw, reader)
    message = str(raised.value)
    assert repr(path) in message and any(field in message for field in fields), message
    return raised.value


# safetensors -------------------------------------------------------------------------------------------------------

@st.composite
def safetensors_headers(draw) -> tuple[dict, bytes]:
    """A well-formed header (dict) and the data it describes, tensors tiling the data in a drawn order."""
    names = draw(st.lists(st.text(min_size=1, max_size=6).filter(lambda n: n != "__metadata__"), min_size=1,
                          max_size=4, unique=True))
    header: dict = {}
    pos = 0
    for name in names:
        dtype = draw(st.sampled_from(sorted(ITEMSIZE)))
        shape = draw(st.lists(st.integers(0, 4), max_size=3))
        nbytes = int(np.prod(shape, dtype=np.int64)) * ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + nbytes]}
        pos += nbytes
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2))
    return header, (bytes(range(256)) * (pos // 256 + 1))[:pos]


def _safetensors_bytes(header_text: str, data: bytes) -> bytes:
    raw = header_text.encode()
    return struct.pack("<Q", len(raw)) + raw + data


@EXAMPLES
@given(safetensors_headers())
def test_well_formed_safetensors_headers_give_their_tensors(path, made):
    header, data = made
    found = _parse(path, _safetensors_bytes(json.dumps(header), data), safetensors_tensors)
    start = 8 + len(json.dumps(header).encode())
    expected = {n: e for n, e in header.items() if n != "__metadata__"}
    assert set(found) == set(expected)
    for name, entry in expected.items():
        t = found[name]
        assert (t.dtype, list(t.shape), t.offset, t.nbytes) == (SAFETENSORS_DTYPES[entry["dtype"]], entry["shape"],
                                                                 start + entry["data_offsets"][0],
                                                                 entry["data_offsets"][1] - entry["data_offsets"][0])


def _wrong(value: object, kind: type | tuple[type, ...]) -> st.SearchStrategy:
    return json_values.filter(lambda v: not isinstance(v, kind) or isinstance(v, bool))


@EXAMPLES
@given(safetensors_headers(), st.data())
def test_a_value_of_the_wrong_type_anywhere_names_its_field(path, made, data):
    header, payload = made
    name = data.draw(st.sampled_from([n for n in header if n != "__metadata__"]))
    field = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "entry"]))
    if field == "entry":
        header[name] = data.draw(_wrong(None, dict))
        where = f"tensor {name!r}"
    elif field == "dtype":
        header[name]["dtype"] = data.draw(json_values.filter(lambda v: not isinstance(v, str) or v not in ITEMSIZE))
        where = f"tensor {name!r} dtype"
    else:
        good = header[name][field]
        header[name][field] = data.draw(st.one_of(
            _wrong(None, list),
            st.lists(st.sampled_from([True, False, -1, 1.5, "1", None, [1]]), min_size=1, max_size=3).map(
                lambda bad: good + bad if field == "shape" else bad),
        ).filter(lambda v: v != good))
        where = f"tensor {name!r}"
    error = _refused(path, _safetensors_bytes(json.dumps(header), payload), safetensors_tensors, where,
                     "header: expected at most 3 levels of nesting")  # a list or object nested in a list
    assert "expected" in str(error)


@EXAMPLES
@given(safetensors_headers(), st.integers(3, 3000))
def test_nesting_deeper_than_the_format_is_refused(path, made, depth):
    header, payload = made
    name = next(n for n in header if n != "__metadata__")
    text = json.dumps(header).replace(f'"shape": {json.dumps(header[name]["shape"])}',
                                      '"shape": ' + "[" * depth + "]" * depth, 1)
    _refused(path, _safetensors_bytes(text, payload), safetensors_tensors, "levels of nesting")


@EXAMPLES
@given(safetensors_headers(), st.dictionaries(st.text('[]{}"\\u', max_size=12), st.text('[]{}"\\/n', max_size=40),
                                              min_size=1, max_size=3))
def test_brackets_quotes_and_backslashes_inside_strings_are_not_nesting(path, made, metadata):
    header, payload = made
    header["__metadata__"] = metadata
    found = _parse(path, _safetensors_bytes(json.dumps(header), payload), safetensors_tensors)
    assert set(found) == set(header) - {"__metadata__"}


@EXAMPLES
@given(safetensors_headers(), st.booleans())
def test_a_name_given_twice_is_refused(path, made, inside_an_entry):
    header, payload = made
    name = next(n for n in header if n != "__metadata__")
    entry = json.dumps(header[name])
    if inside_an_entry:
        doubled = entry[:-1] + f', "dtype": {json.dumps(header[name]["dtype"])}}}'
        text = json.dumps(header).replace(entry, doubled, 1)
        field = "name 'dtype'"
    else:
        text = json.dumps(header)[:-1] + f", {json.dumps(name)}: {entry}}}"
        field = f"name {name!r}"
    _refused(path, _safetensors_bytes(text, payload), safetensors_tensors, field)


@EXAMPLES
@given(safetensors_headers(), st.data())
def test_offsets_out_of_order_overlapping_or_past_the_end_are_refused(path, made, data):
    header, payload = made
    entries = [n for n in header if n != "__metadata__"]
    name = data.draw(st.sampled_from(entries))
    begin, end = header[name]["data_offsets"]
    total = header[entries[-1]]["data_offsets"][1]
    change = data.draw(st.sampled_from(["reversed", "shifted", "past_end"]))
    if change == "reversed" and begin < end:
        header[name]["data_offsets"] = [end, begin]
    elif change == "past_end" and total > 0:
        payload = payload[:total - 1]  # the data end one byte early
    else:  # shifted: a gap before it, or an overlap with the one after it (an empty one: past the last one)
        by = data.draw(st.integers(1, 64)) + (0 if begin < end else total)
        header[name]["data_offsets"] = [begin + by, end + by]
    _refused(path, _safetensors_bytes(json.dumps(header), payload), safetensors_tensors, "data_offsets")


@EXAMPLES
@given(safetensors_headers(), st.integers(1, 300))
def test_bytes_after_the_last_tensor_are_refused(path, made, extra):
    header, payload = made
    error = _refused(path, _safetensors_bytes(json.dumps(header), payload + b"\xab" * extra), safetensors_tensors,
                     "data: expected tensors covering all")
    assert f"{extra} bytes after the last tensor" in str(error)


@EXAMPLES
@given(safetensors_headers(), st.data())
def test_a_field_the_format_does_not_define_is_refused(path, made, data):
    header, payload = made
    name = data.draw(st.sampled_from([n for n in header if n != "__metadata__"]))
    key = data.draw(st.text(max_size=12).filter(lambda k: k not in ("dtype", "shape", "data_offsets")))
    header[name][key] = data.draw(st.none() | st.booleans() | st.integers() | st.text(max_size=4))
    _refused(path, _safetensors_bytes(json.dumps(header), payload), safetensors_tensors, f"tensor {name!r}: expected "
                                                                                         f"an object of exactly")


@EXAMPLES
@given(safetensors_headers(), st.sampled_from(["utf-16", "utf-16-be", "utf-32", "utf-8-sig"]))
def test_a_header_in_another_encoding_than_utf8_is_refused(path, made, encoding):
    header, payload = made
    raw = json.dumps(header).encode(encoding)
    _refused(path, struct.pack("<Q", len(raw)) + raw + payload, safetensors_tensors, "valid UTF-8 JSON")


@EXAMPLES
@given(safetensors_headers(), st.data())
def test_whatever_is_read_the_safetensors_reference_reads_the_same(path, made, data):
    """Mutated headers: every one this reader accepts, the reference reader (the ``safetensors`` package) accepts too,
    with the same names, shapes and byte ranges: nothing malformed is accepted silently."""
    reference = pytest.importorskip("safetensors",
                             reason="the safetensors package is the reference reader (nox -s tests-disk installs it)")
    header, payload = made
    name = data.draw(st.sampled_from([n for n in header if n != "__metadata__"]))
    field = data.draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
    if data.draw(st.booleans()):
        header[name][field] = data.draw(json_values)
    if data.draw(st.booleans()):
        payload = payload[:data.draw(st.integers(0, len(payload)))] + data.draw(st.binary(max_size=8))
    try:
        found = _parse(path, _safetensors_bytes(json.dumps(header), payload), safetensors_tensors)
    except HeaderError:
        return
    start = 8 + len(json.dumps(header).encode())
    with reference.safe_open(path, "numpy") as f:
        assert set(f.keys()) == set(found)
        for key, t in found.items():
            assert tuple(f.get_slice(key).get_shape()) == t.shape
            assert header[key]["data_offsets"] == [t.offset - start, t.offset - start + t.nbytes]


@EXAMPLES
@given(json_values | st.binary(max_size=40).map(lambda b: b.decode("latin1")))
def test_any_other_header_is_read_or_refused_naming_the_file(path, value):
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        _parse(path, _safetensors_bytes(text, b"\0" * 64), safetensors_tensors)
    except HeaderError as e:
        assert repr(path) in str(e)


# .npy --------------------------------------------------------------------------------------------------------------

def _npy_bytes(header_text: str, data: bytes, version: int = 1) -> bytes:
    raw = header_text.encode("latin1" if version < 3 else "utf8")
    length = struct.pack("<H" if version == 1 else "<I", len(raw))
    return b"\x93NUMPY" + bytes([version, 0]) + length + raw + data


npy_dtypes = st.sampled_from(["<f4", "<i8", "|u1", "<f2", "|b1", "<u4", "<f8"])


@EXAMPLES
@given(npy_dtypes, st.lists(st.integers(0, 5), max_size=3).map(tuple), st.sampled_from([1, 2, 3]))
def test_well_formed_npy_headers_give_what_np_load_reads(path, descr, shape, version):
    arr = np.arange(int(np.prod(shape)), dtype=np.int64).astype(descr).reshape(shape)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, version=(version, 0))
    t = _parse(path, buf.getvalue(), npy_tensor)
    assert (t.shape, t.nbytes, t.offset + t.nbytes) == (shape, arr.nbytes, len(buf.getvalue()))


@EXAMPLES
@given(st.data())
def test_an_npy_field_of_the_wrong_type_names_it(path, data):
    header = {"descr": "<f4", "fortran_order": False, "shape": (2, 3)}
    field = data.draw(st.sampled_from(sorted(header)))
    literals = st.none() | st.booleans() | st.integers(-3, 9) | st.text(max_size=4) | st.lists(st.integers(0, 3))
    if field == "shape":
        header["shape"] = data.draw(st.one_of(literals, st.lists(st.sampled_from([True, -1, 1.5, "2", None, (1,)]),
                                                                 min_size=1, max_size=3).map(tuple)))
    elif field == "fortran_order":
        header["fortran_order"] = data.draw(literals.filter(lambda v: not isinstance(v, bool)))
    else:
        header["descr"] = data.draw(literals.filter(lambda v: not isinstance(v, str)) | st.sampled_from(
            ["nope", "<c8", ">f4", "|O", "", "f4,i4"]))
    _refused(path, _npy_bytes(repr(header), b"\0" * 24, version=3), npy_tensor, field)


@EXAMPLES
@given(st.integers(2, 3000), st.sampled_from("([{"))
def test_npy_headers_nested_deeply_are_refused(path, depth, bracket):
    closing = {"(": ")", "[": "]", "{": "}"}[bracket]
    text = "{'descr': '<f4', 'fortran_order': False, 'shape': " + bracket * depth + "1" + closing * depth + "}"
    _refused(path, _npy_bytes(text, b"\0" * 16, version=2), npy_tensor, "npy file")


@EXAMPLES
@given(st.binary(min_size=0, max_size=64), st.sampled_from([1, 2, 3]))
def test_any_npy_header_np_load_refuses_is_refused_too(path, raw_header, version):
    raw = _npy_bytes(raw_header.decode("latin1"), b"\0" * 32, version) if version < 3 else (
        b"\x93NUMPY\x03\x00" + struct.pack("<I", len(raw_header)) + raw_header + b"\0" * 32)
    try:
        np.load(io.BytesIO(raw), allow_pickle=False)
        numpy_refused = False
    except Exception:  # noqa: BLE001 - the reference's refusal, whatever its type
        numpy_refused = True
    try:
        _parse(path, raw, npy_tensor)
    except HeaderError as e:
        assert repr(path) in str(e)
    else:
        assert not numpy_refused, "np.load refuses this file but npy_tensor read it"


@EXAMPLES
@given(st.permutations(["descr", "fortran_order", "shape"]), st.data())
def test_an_npy_key_given_twice_is_refused(path, keys, data):
    values = {"descr": "'<f4'", "fortran_order": "False", "shape": "(2,)"}
    twice = data.draw(st.sampled_from(keys))
    items = [f"'{k}': {values[k]}" for k in keys]
    items.insert(data.draw(st.integers(0, len(items))), f"'{twice}': {values[twice]}")
    _refused(path, _npy_bytes("{" + ", ".join(items) + "}", b"\0" * 8), npy_tensor, f"key {twice!r}")


@EXAMPLES
@given(st.lists(st.integers(2, 5), min_size=2, max_size=4).map(tuple), npy_dtypes)
def test_a_fortran_ordered_npy_array_is_refused_naming_the_file(path, shape, descr):
    arr = np.asfortranarray(np.zeros(shape, dtype=descr))
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr)
    _refused(path, buf.getvalue(), npy_tensor, "fortran_order: expected False")
