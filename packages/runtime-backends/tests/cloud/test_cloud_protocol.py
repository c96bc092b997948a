"""The wire protocol: request names and field order, the repr of a request list, blob framing, the safe decoder, and
the renderer description -- each against the protocol's description, written out here."""

from __future__ import annotations

import hashlib
import struct
import tracemalloc
from dataclasses import fields

import pytest
from cloud_helpers import spec

from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.wire import protocol as P
from runtime_backends.cloud.wire.framing import BodyBuilder, BodyDecoder, FramingError, blob_header, decode_body
from runtime_backends.cloud.wire.literal import LiteralError, decode_requests
from runtime_backends.cloud.wire.renderers import RendererRefused, describe_renderer, resolve_renderer
from runtime_backends.python.device import PythonRenderer
from runtime_core.buffer_spec import BufferSpec as CoreBufferSpec

LIMITS = Limits()
H = "ab" * 32  # a well-formed datahash

FIELDS = {
    "BufferAlloc": ["buffer_num", "size", "options"],
    "BufferFree": ["buffer_num"],
    "CopyIn": ["buffer_num", "datahash"],
    "CopyOut": ["buffer_num"],
    "ProgramAlloc": ["name", "datahash"],
    "ProgramFree": ["name", "datahash"],
    "ProgramExec": ["name", "datahash", "bufs", "vals", "global_size", "local_size", "wait"],
    "BufferSpec": ["image", "uncached", "cpu_access", "host", "nolru", "external_ptr"],
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_type_names_and_field_order_are_the_protocols(name: str) -> None:
    assert [f.name for f in fields(getattr(P, name))] == FIELDS[name]


def test_request_list_repr_is_the_wire_text() -> None:
    requests = [P.BufferAlloc(3, 64, P.BufferSpec()), P.CopyIn(3, H), P.CopyOut(3), P.BufferFree(3),
                P.ProgramAlloc("E_4", H), P.ProgramExec("E_4", H, (3,), (-2, 7), (4, 1, 1), None, True),
                P.ProgramFree("E_4", H)]
    expected = (f"[BufferAlloc(buffer_num=3, size=64, options={spec()}), CopyIn(buffer_num=3, datahash='{H}'), "
                f"CopyOut(buffer_num=3), BufferFree(buffer_num=3), ProgramAlloc(name='E_4', datahash='{H}'), "
                f"ProgramExec(name='E_4', datahash='{H}', bufs=(3,), vals=(-2, 7), global_size=(4, 1, 1), "
                f"local_size=None, wait=True), ProgramFree(name='E_4', datahash='{H}')]")
    assert P.encode_requests(requests) == expected.encode()
    assert decode_requests(expected.encode(), LIMITS) == requests


def test_image_spec_is_written_as_the_reference_dtype_call() -> None:
    wire = P.BufferSpec(image=P.Image("imagef", (8, 4, 4)))
    assert repr(wire) == "BufferSpec(image=dtypes.imagef((8, 4, 4)), uncached=False, cpu_access=False, host=False, " \
                         "nolru=False, external_ptr=None)"
    (decoded,) = decode_requests(f"[BufferAlloc(1, 512, {wire!r})]".encode(), LIMITS)
    assert decoded.options.image == P.Image("imagef", (8, 4, 4))
    with pytest.raises(P.ProtocolError, match="image buffers .* not supported"):
        decoded.options.to_core()


def test_spec_maps_to_the_runtime_spec_and_back() -> None:
    core = CoreBufferSpec(uncached=True, host=True, nolru=True)
    wire = P.BufferSpec.from_core(core)
    assert (wire.image, wire.uncached, wire.cpu_access, wire.host, wire.nolru) == (None, True, False, True, True)
    assert wire.to_core() == core
    with pytest.raises(P.ProtocolError, match="external_ptr names memory in the client"):
        P.BufferSpec(external_ptr=4096).to_core()


def test_positional_keyword_and_default_arguments_decode_alike() -> None:
    texts = ["[BufferAlloc(1, 8, BufferSpec())]", "[BufferAlloc(buffer_num=1, size=8, options=BufferSpec())]",
             "[BufferAlloc(1, size=8, options=BufferSpec(None, False, False, False, False, None))]",
             f"[BufferAlloc(1, 8, {spec()})]"]
    decoded = [decode_requests(t.encode(), LIMITS) for t in texts]
    assert all(d == [P.BufferAlloc(1, 8, P.BufferSpec())] for d in decoded)


def test_lists_become_tuples_and_negative_vals_decode() -> None:
    (r,) = decode_requests(f"[ProgramExec('k', '{H}', [1, 2], [-5], [8], [2, 2], False)]".encode(), LIMITS)
    assert (r.bufs, r.vals, r.global_size, r.local_size) == ((1, 2), (-5,), (8,), (2, 2))


def test_frame_is_digest_then_little_endian_length_then_bytes() -> None:
    data = b"hello cloud"
    datahash, header = blob_header(data)
    assert header == hashlib.sha256(data).digest() + struct.pack("<Q", len(data))
    assert datahash == hashlib.sha256(data).hexdigest()
    assert len(header) == 40 and header[32:] == bytes([11, 0, 0, 0, 0, 0, 0, 0])


def test_builder_sends_a_blob_once_and_the_request_list_last() -> None:
    builder = BodyBuilder()
    first, again = builder.add(b"x" * 10), builder.add(b"x" * 10)
    assert first == again and len(builder) == 1
    listing = P.encode_requests([P.CopyIn(1, first)])
    body = b"".join(builder.pieces(listing))
    assert body == blob_header(b"x" * 10)[1] + b"x" * 10 + blob_header(listing)[1] + listing
    decoded = decode_body(body, LIMITS)
    assert bytes(decoded.requests) == listing and bytes(decoded.blobs[first]) == b"x" * 10


@pytest.mark.parametrize("cut, match", [(1, "ends inside a blob header: 1 of 40"), (39, "ends inside a blob header"),
                                        (40, "declares 10 bytes, but the body has at most 0 more"),
                                        (45, "declares 10 bytes, but the body has at most 5 more")])
def test_truncated_body_names_what_is_missing(cut: int, match: str) -> None:
    body = blob_header(b"0123456789")[1] + b"0123456789"
    with pytest.raises(FramingError, match=match):
        decode_body(body[:cut], LIMITS)


def test_body_of_unknown_length_cut_inside_a_blob() -> None:
    decoder = BodyDecoder(LIMITS, None)  # chunked transfer: the length is known only at the end
    decoder.feed(blob_header(b"0123456789")[1] + b"01234")
    with pytest.raises(FramingError, match="ends inside blob 0: 5 of its 10 bytes"):
        decoder.finish()


def test_bad_digest_and_huge_length_are_refused() -> None:
    header = bytearray(blob_header(b"abcd")[1])
    header[0] ^= 1
    with pytest.raises(FramingError, match="hashes to"):
        decode_body(bytes(header) + b"abcd", LIMITS)
    huge = hashlib.sha256(b"").digest() + struct.pack("<Q", 2**63)
    with pytest.raises(FramingError, match="declares 9223372036854775808 bytes"):
        decode_body(huge + b"abc", LIMITS)
    with pytest.raises(FramingError, match="no blob"):
        decode_body(b"", LIMITS)


@pytest.mark.parametrize("text, match", [
    ("__import__('os').system('true')", "must be a list literal"),
    ("[__import__('os')]", "call of '__import__' is not allowed"),
    ("[os.system('x')]", "call of a Attribute expression"),
    ("[CopyOut(buffer_num=1).__class__]", "Attribute is not allowed"),
    ("[dtypes.float32((1,))]", "not allowed"),
    ("[BufferAlloc(1, 8, BufferSpec(image=x.imagef((1,))))]", "not allowed"),
    ("[CopyOut(1 + 1)]", "BinOp is not allowed"),
    ("[CopyOut(-True)]", "unary minus on an int"),
    ("[CopyOut(~1)]", "unary minus on an int"),
    ("[CopyOut(1.5)]", "type float is not allowed"),
    ("[CopyOut(b'1')]", "type bytes is not allowed"),
    ("[CopyOut(*[1])]", r"\*args and \*\*kwargs"),
    ("[CopyOut(**{'buffer_num': 1})]", r"\*args and \*\*kwargs"),
    ("[CopyOut(x) for x in range(3)]", "ListComp"),
    ("[(lambda: 1)()]", "call of a Lambda expression"),
    ("[CopyOut(buffer_num=1, extra=2)]", "unexpected keyword argument 'extra'"),
    ("[CopyOut()]", "missing 1 required positional argument"),
    ("[CopyOut('1')]", "must be an int"),
    ("[CopyOut(-1)]", r"must be in \[0, "),
    ("[CopyIn(1, 'not-hex')]", "64 lowercase hex digits"),
    ("[BufferSpec()]", "expected one of BufferAlloc"),
    ("(CopyOut(1),)", "must be a list literal"),
    ("[CopyOut(1)", "not a Python literal"),
    ("[ProgramExec('k', '" + H + "', (), (), (), None, False)]", "1 to 3 entries"),
    ("[ProgramExec('k', '" + H + "', (), (), (0,), None, False)]", "global_size"),
    ("[ProgramExec('k', '" + H + "', (), (), None, None, 1)]", "True or False"),
])
def test_hostile_or_malformed_literals_are_refused(text: str, match: str) -> None:
    with pytest.raises(P.ProtocolError, match=match):
        decode_requests(text.encode(), LIMITS)


def test_bounds_on_length_depth_and_count() -> None:
    small = Limits(max_literal_bytes=100, max_depth=5, max_requests=2)
    with pytest.raises(LiteralError, match="is 101 bytes, the limit is 100"):
        decode_requests(b" " * 101, small)
    with pytest.raises(LiteralError, match="deeper than 5 levels"):
        decode_requests(b"[CopyOut(((((1,),),),))]", small)
    with pytest.raises(LiteralError, match="more than 2 requests, the limit is 2"):
        decode_requests(b"[CopyOut(1), CopyOut(2), CopyOut(3)]", small)
    assert decode_requests(b"[CopyOut(1), CopyOut(2), ]", small) == [P.CopyOut(1), P.CopyOut(2)]  # at the limit
    with pytest.raises(LiteralError, match="not a Python literal"):
        decode_requests(b"[" * 400 + b"]" * 400, LIMITS)  # past the parser's own nesting limit
    with pytest.raises(LiteralError, match="more than 10 requests"):
        decode_requests(b"[" + b"0," * 2000 + b"]", Limits(max_requests=10))


@pytest.mark.parametrize("text, match", [
    (b"[" + b"1," * 4_000_000 + b"]", "more than 65536 requests"),  # once parsed whole: 3.8 GB, 23 s
    (b"['" + b"a" * 8_000_000 + b"']", "request 0 is 8000002 bytes"),  # once 1.2 GB in the string scanner
    (b"[CopyOut(" + b"1+" * 4_000_000 + b"1)]", "request 0 is 8000010 bytes"),
    (b"[CopyOut(" + b"(" * 9000 + b")" * 9000 + b")]", "request 0 has 9001 separators"),
    (b"[CopyOut(1)] + [CopyOut(2)]", "text follows it at byte 12"),
    (b"[CopyOut(1)", "not a closed list"),
    (b"[CopyOut(1]", r"unbalanced '\]'"),
])
def test_hostile_lists_are_refused_in_bounded_memory(text: bytes, match: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(LiteralError, match=match):
            decode_requests(text, LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(text) + (16 << 20)  # the text's copy and slices, not an AST per byte


def test_a_long_list_decodes_in_groups_exactly() -> None:
    names = ["k'], (\"x\", [", 'q"),', "plain"]  # brackets, commas and quotes inside strings do not split
    requests = [P.CopyIn(i, H) if i % 2 else P.ProgramExec(names[i % 3], H, (i,), (-i,), (4, 1), None, True)
                for i in range(5000)]  # ~1 MiB: many parse groups
    text = P.encode_requests(requests).replace(b"), ", b"),\n  ")  # pretty-printed, one request a line
    assert decode_requests(text, LIMITS) == requests


def test_request_index_is_named_in_errors() -> None:
    with pytest.raises(P.ProtocolError, match="request 1: CopyOut.buffer_num must be an int"):
        decode_requests(b"[CopyOut(1), CopyOut(None)]", LIMITS)


def test_renderer_is_described_as_module_class_args() -> None:
    assert describe_renderer(PythonRenderer()) == ["runtime_backends.python.device", "PythonRenderer", []]
    assert describe_renderer(None) is None
    assert isinstance(resolve_renderer(["runtime_backends.python.device", "PythonRenderer", []]), PythonRenderer)


@pytest.mark.parametrize("description, match", [
    (["tinygrad.renderer.cstyle", "ClangRenderer", []], "not one of this project's backends"),
    (["os", "system", []], "not one of this project's backends"),
    (["runtime_backends.cloud.client.device", "CloudDevice", []], "not one of this project's backends"),
    (["runtime_backends.python.device", "PythonDevice", []], "is not a Renderer"),
    (["runtime_backends.python.device", "Renderer", []], "is not a Renderer defined in"),  # imported there, not ours
    (["runtime_backends.nosuch.renderer", "R", []], "cannot be imported"),
    (["runtime_backends.python.device", "PythonRenderer", [{"a": 1}]], "JSON scalars"),
    (["runtime_backends.python.device", "PythonRenderer", [1]], "failed"),
    (["runtime_backends.python.device", "PythonRenderer"], r"\[module, class, args\]"),
])
def test_foreign_or_malformed_renderers_are_refused(description: list, match: str) -> None:
    with pytest.raises(RendererRefused, match=match):
        resolve_renderer(description)
