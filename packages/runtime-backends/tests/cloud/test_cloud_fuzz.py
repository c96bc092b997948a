"""Property-based fuzzing (hypothesis) of the request-list decoder, the blob framing and the server's answers to hostile
bodies. Each test runs ``CLOUD_FUZZ_EXAMPLES`` examples (``conftest``); ``nox -s tests-cloud`` runs >= 10,000 in all.

The properties: valid input decodes back to exactly what was encoded; any other input is refused with the protocol's
own error (``ProtocolError``/``FramingError``) -- never another exception, never a partial result; the server answers
every hostile body with a 4xx and a message, and goes on serving.
"""

from __future__ import annotations

import hashlib
import http.client
import struct

import pytest
from cloud_helpers import SMALL, post, wire_body
from hypothesis import given
from hypothesis import strategies as st

from runtime_backends.cloud.server.app import CloudServer
from runtime_backends.cloud.server.limits import Limits
from runtime_backends.cloud.wire import protocol as P
from runtime_backends.cloud.wire.framing import BodyDecoder, FramingError, blob_header, decode_body
from runtime_backends.cloud.wire.literal import decode_requests

# the decoder silences the tokenizer's warnings about hostile texts; pytest records warnings its own way
pytestmark = [pytest.mark.filterwarnings("ignore::SyntaxWarning"),
              pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning")]
LIMITS = Limits()
u63 = st.integers(0, 2**63 - 1)
datahash = st.binary(min_size=32, max_size=32).map(bytes.hex)
name = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(str.isprintable)
ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6)
size3 = st.none() | st.lists(st.integers(1, 2**40), min_size=1, max_size=3)
image = st.none() | st.builds(P.Image, st.sampled_from(P.IMAGE_KINDS), st.lists(st.integers(1, 2**20), min_size=1,
                                                                                  max_size=4))
wire_spec = st.builds(P.BufferSpec, image, st.booleans(), st.booleans(), st.booleans(), st.booleans(),
                      st.none() | st.integers(1, 2**63 - 1))
request = st.one_of(
    st.builds(P.BufferAlloc, u63, st.integers(1, 2**63 - 1), wire_spec),
    st.builds(P.BufferFree, u63),
    st.builds(P.CopyIn, u63, datahash),
    st.builds(P.CopyOut, u63),
    st.builds(P.ProgramAlloc, name, datahash),
    st.builds(P.ProgramFree, name, datahash),
    st.builds(P.ProgramExec, name, datahash, st.lists(u63, max_size=6), ints, size3, size3, st.booleans()),
)
request_lists = st.lists(request, max_size=8)

# pieces of request-list syntax, legal and not, to assemble hostile texts from
TOKENS = ["[", "]", "(", ")", ",", "=", "-", "*", "**", ".", ":", "'", '"', " ", "0", "1", "-1", "9" * 30, "1.5", "1e9",
          "None", "True", "False", "b'x'", "'s'", "lambda", "x", "os", "__import__", "dtypes", "imagef", "eval",
          "for", "in", "{", "}", "+", "~", "not", "if", "else", "\\", "\n", "#", "\x00", "é", "buffer_num",
          *[t.__name__ for t in P.REQUEST_TYPES], "BufferSpec"]


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply (position, delete count, insertion) edits to ``text``."""
    for pos, delete, insert in edits:
        pos %= len(text) + 1
        text = text[:pos] + insert + text[pos + delete:]
    return text


edits = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.sampled_from(TOKENS)), min_size=1,
                 max_size=6)


@given(request_lists)
def test_valid_request_lists_decode_to_what_was_encoded(requests: list) -> None:
    assert decode_requests(P.encode_requests(requests), LIMITS) == requests


@given(request_lists, edits)
def test_mutated_request_lists_decode_or_are_refused_cleanly(requests: list, changes: list) -> None:
    text = _mutate(P.encode_requests(requests).decode(), changes)
    try:
        decoded = decode_requests(text.encode(), LIMITS)
    except P.ProtocolError:
        return
    assert all(isinstance(r, P.REQUEST_TYPES) for r in decoded)


@given(st.lists(st.sampled_from(TOKENS), max_size=60), st.integers(0, 300), st.sampled_from(["(", "[", "CopyOut("]))
def test_token_soup_and_deep_nesting_are_refused_cleanly(tokens: list, depth: int, opener: str) -> None:
    closer = ")" if opener != "[" else "]"
    text = "[" + opener * depth + "".join(tokens) + closer * depth + "]"
    try:
        decoded = decode_requests(text.encode("utf-8", "surrogatepass"), LIMITS)
    except P.ProtocolError:
        return
    assert depth <= LIMITS.max_depth and all(isinstance(r, P.REQUEST_TYPES) for r in decoded)


def _body(datas: list[bytes], requests: list) -> bytes:
    listing = P.encode_requests(requests)
    return b"".join(blob_header(d)[1] + d for d in datas) + blob_header(listing)[1] + listing


blobs = st.lists(st.binary(max_size=300), max_size=5)
cuts = st.lists(st.integers(0, 4000), max_size=8)


@given(blobs, request_lists, cuts)
def test_valid_bodies_decode_in_any_chunking(datas: list, requests: list, cut_points: list) -> None:
    body = _body(datas, requests)
    decoder = BodyDecoder(LIMITS, len(body))
    bounds = sorted({0, len(body), *(c % (len(body) + 1) for c in cut_points)})
    for a, b in zip(bounds, bounds[1:]):
        decoder.feed(body[a:b])
    decoded = decoder.finish()
    assert decode_requests(decoded.requests, LIMITS) == requests
    assert all(bytes(decoded.blobs[hashlib.sha256(d).hexdigest()]) == d for d in datas)


@given(blobs, request_lists, st.integers(0, 10_000), st.sampled_from(["truncate", "flip", "length", "append"]),
       st.integers(0, 2**64 - 1), st.binary(min_size=1, max_size=50))
def test_damaged_bodies_are_refused_or_verified(datas: list, requests: list, where: int, damage: str, length: int,
                                                extra: bytes) -> None:
    body = bytearray(_body(datas, requests))
    pos = where % len(body)
    if damage == "truncate":
        body = body[:pos]
    elif damage == "flip":
        body[pos] ^= 0x55
    elif damage == "length":  # overwrite the first blob's declared length (huge, or just wrong)
        body[32:40] = struct.pack("<Q", length)
    else:
        body += extra
    try:
        decoded = decode_body(bytes(body), LIMITS)
    except FramingError:
        return
    for digest, data in decoded.blobs.items():  # whatever was accepted verified against its digest
        assert hashlib.sha256(data).hexdigest() == digest


hostile_bodies = st.one_of(
    st.binary(max_size=600),
    st.builds(lambda reqs, changes: wire_body(_mutate(P.encode_requests(reqs).decode(), changes)), request_lists,
              edits),
    st.builds(lambda reqs, d: wire_body(P.encode_requests(reqs).decode(), *d), request_lists, blobs),
)


@given(hostile_bodies, st.sampled_from(["exact", "oversized"]))
def test_server_answers_hostile_bodies_with_4xx_and_keeps_serving(server: CloudServer, body: bytes,
                                                                  declared: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        if declared == "oversized":  # a declared length beyond the limit is refused before any of the body is read
            conn.putrequest("POST", "/batch")
            conn.putheader("Cookie", "session=fuzz")
            conn.putheader("Content-Length", str(SMALL.max_body_bytes + 1 + len(body)))
            conn.endheaders()
            r = conn.getresponse()
            assert r.status == 413 and b"exceeds the server's limit" in r.read()
            return
        reply = post(conn, body, session="fuzz")
        if reply.status != 200:  # 507: the session's byte bound, which valid allocations reach
            assert (400 <= reply.status < 500 or reply.status == 507) and reply.body, (reply.status, reply.body)
    finally:
        conn.close()
    check = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    check.request("GET", "/renderer")
    assert check.getresponse().status == 200
    check.close()
