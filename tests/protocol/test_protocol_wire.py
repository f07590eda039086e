"""Wire primitives: both twins through the ``impl`` fixture, byte-exact
vectors, hostile lengths, and pure-vs-compiled differential tests."""
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import InvalidRequestError


# -- byte-exact vectors --------------------------------------------------------

UVARINT_VECTORS = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f"),
]

# zigzag: 0->0, -1->1, 1->2, -2->3 ...
VARINT_VECTORS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (2147483647, b"\xfe\xff\xff\xff\x0f"),
    (-2147483648, b"\xff\xff\xff\xff\x0f"),
]

VARLONG_VECTORS = VARINT_VECTORS + [
    (9223372036854775807, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    (-9223372036854775808, b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
]


@pytest.mark.parametrize("value,encoded", UVARINT_VECTORS)
def test_unsigned_varint_vectors(impl, value, encoded):
    w = impl.wire
    assert w.encode_unsigned_varint(value) == encoded
    assert w.size_of_unsigned_varint(value) == len(encoded)
    writer = w.Writer()
    writer.write_unsigned_varint(value)
    assert writer.getvalue() == encoded
    r = w.Reader(encoded)
    assert r.read_unsigned_varint() == value
    assert r.remaining() == 0


@pytest.mark.parametrize("value,encoded", VARINT_VECTORS)
def test_varint_vectors(impl, value, encoded):
    w = impl.wire
    assert w.encode_varint(value) == encoded
    assert w.Reader(encoded).read_varint() == value


@pytest.mark.parametrize("value,encoded", VARLONG_VECTORS)
def test_varlong_vectors(impl, value, encoded):
    w = impl.wire
    assert w.encode_varlong(value) == encoded
    assert w.Reader(encoded).read_varlong() == value


def test_fixed_width_vectors(impl):
    w = impl.wire.Writer()
    w.write_int8(-1)
    w.write_int16(0x1234)
    w.write_int32(-2)
    w.write_int64(0x0102030405060708)
    w.write_uint16(0xFFFF)
    w.write_uint32(0xFFFFFFFE)
    w.write_boolean(True)
    w.write_boolean(False)
    w.write_float64(1.5)
    u = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    w.write_uuid(u)
    expected = (b"\xff" + b"\x12\x34" + b"\xff\xff\xff\xfe"
                + b"\x01\x02\x03\x04\x05\x06\x07\x08" + b"\xff\xff"
                + b"\xff\xff\xff\xfe" + b"\x01\x00" + b"\x3f\xf8" + b"\x00" * 6
                + bytes.fromhex("00112233445566778899aabbccddeeff"))
    assert w.getvalue() == expected
    assert len(w) == len(expected)
    r = impl.wire.Reader(expected)
    assert r.read_int8() == -1
    assert r.read_int16() == 0x1234
    assert r.read_int32() == -2
    assert r.read_int64() == 0x0102030405060708
    assert r.read_uint16() == 0xFFFF
    assert r.read_uint32() == 0xFFFFFFFE
    assert r.read_boolean() is True
    assert r.read_boolean() is False
    assert r.read_float64() == 1.5
    assert r.read_uuid() == u
    assert r.remaining() == 0


@pytest.mark.parametrize("raw", [bytes(16), b"\xff" * 16, bytes(range(16)),
                                 bytes.fromhex("00112233445566778899aabbccddeeff")])
def test_read_uuid_is_what_uuid_builds(impl, raw):
    # read_uuid builds the UUID without its constructor: it must be the same
    # object in every respect.
    u = impl.wire.Reader(b"\x00" + raw, 1).read_uuid()
    expected = uuid.UUID(bytes=raw)
    assert type(u) is uuid.UUID
    assert u == expected and u.int == expected.int and u.bytes == raw
    assert u.is_safe is expected.is_safe
    assert hash(u) == hash(expected) and str(u) == str(expected)
    assert repr(u) == repr(expected) and u.version == expected.version


def test_boolean_any_nonzero_is_true(impl):
    # Kafka reads a boolean as byte != 0.
    assert impl.wire.Reader(b"\x02").read_boolean() is True


def test_string_vectors(impl):
    w = impl.wire.Writer()
    w.write_string("abc")
    w.write_nullable_string(None)
    w.write_compact_string("h\u00e9")
    w.write_compact_nullable_string(None)
    w.write_compact_string("")
    assert w.getvalue() == (b"\x00\x03abc" + b"\xff\xff" + b"\x04h\xc3\xa9" + b"\x00" + b"\x01")
    r = impl.wire.Reader(w.getvalue())
    assert r.read_string() == "abc"
    assert r.read_nullable_string() is None
    assert r.read_compact_string() == "h\u00e9"
    assert r.read_compact_nullable_string() is None
    assert r.read_compact_string() == ""


def test_bytes_vectors(impl):
    w = impl.wire.Writer()
    w.write_bytes(b"\x00\x01")
    w.write_nullable_bytes(None)
    w.write_compact_bytes(b"xyz")
    w.write_compact_nullable_bytes(None)
    w.write_bytes(bytearray(b"q"))
    assert w.getvalue() == (b"\x00\x00\x00\x02\x00\x01" + b"\xff\xff\xff\xff"
                            + b"\x04xyz" + b"\x00" + b"\x00\x00\x00\x01q")
    r = impl.wire.Reader(w.getvalue())
    assert r.read_bytes() == b"\x00\x01"
    assert r.read_nullable_bytes() is None
    assert r.read_compact_bytes() == b"xyz"
    assert r.read_compact_nullable_bytes() is None
    assert r.read_bytes() == b"q"


def test_array_lengths_and_tagged_fields(impl):
    w = impl.wire.Writer()
    w.write_array_length(2)
    w.write_array_length(-1)
    w.write_compact_array_length(3)
    w.write_compact_array_length(-1)
    # Written in ascending tag order whatever the input order.
    w.write_tagged_fields([(5, b"\x01\x02"), (1, b"")])
    data = w.getvalue() + b"\x00" * 6
    assert data[:17] == (b"\x00\x00\x00\x02" + b"\xff\xff\xff\xff" + b"\x04" + b"\x00"
                         + b"\x02" + b"\x01\x00" + b"\x05\x02\x01\x02")
    r = impl.wire.Reader(data)
    assert r.read_array_length() == 2
    assert r.read_array_length() == -1
    assert r.read_compact_array_length() == 3
    assert r.read_compact_array_length() == -1
    assert r.read_tagged_fields() == [(1, b""), (5, b"\x01\x02")]


def test_utf8_decoding_replaces_like_java(impl):
    # Java's new String(bytes, UTF_8) replaces malformed input; so do we.
    assert impl.wire.Reader(b"\x00\x02a\xff").read_string() == "a\ufffd"


def test_reader_offset_and_end(impl):
    r = impl.wire.Reader(b"\x00\x01\x00\x02\x00\x03", 2, 4)
    assert r.pos == 2 and r.end == 4
    assert r.read_int16() == 2
    with pytest.raises(InvalidRequestError):
        r.read_int8()
    with pytest.raises(InvalidRequestError):
        impl.wire.Reader(b"\x00", 2)
    assert impl.wire.Reader(memoryview(b"\x00\x07")).read_int16() == 7


# -- failures: truncation, hostile lengths ------------------------------------

READ_METHODS = [
    "read_int8", "read_int16", "read_int32", "read_int64", "read_uint16",
    "read_uint32", "read_boolean", "read_float64", "read_uuid",
    "read_unsigned_varint", "read_varint", "read_varlong", "read_string",
    "read_nullable_string", "read_compact_string", "read_compact_nullable_string",
    "read_bytes", "read_nullable_bytes", "read_compact_bytes",
    "read_compact_nullable_bytes", "read_array_length", "read_compact_array_length",
    "read_tagged_fields", "read_tag_header",
]


@pytest.mark.parametrize("method", READ_METHODS)
def test_every_reader_fails_closed_on_empty_input(impl, method):
    with pytest.raises(InvalidRequestError):
        getattr(impl.wire.Reader(b""), method)()


HOSTILE = [
    ("read_bytes", b"\x7f\xff\xff\xff"),               # 2**31-1 bytes announced
    ("read_nullable_bytes", b"\x7f\xff\xff\xff"),
    ("read_compact_bytes", b"\xff\xff\xff\xff\x07"),   # 2**31 announced
    ("read_compact_nullable_bytes", b"\xff\xff\xff\xff\x0f"),
    ("read_string", b"\x7f\xff"),
    ("read_nullable_string", b"\x7f\xff"),
    ("read_compact_string", b"\xff\xff\x01"),          # length above 32767
    ("read_compact_nullable_string", b"\x80\x80\x02"),
    ("read_array_length", b"\x7f\xff\xff\xff"),
    ("read_compact_array_length", b"\xff\xff\xff\xff\x0f"),
    ("read_tagged_fields", b"\xff\xff\xff\xff\x0f"),
    ("read_tag_header", b"\x00\xff\xff\xff\xff\x0f"),
    ("read_string", b"\xff\xfe"),                       # -2
    ("read_nullable_string", b"\xff\xfe"),
    ("read_bytes", b"\xff\xff\xff\xfe"),
    ("read_nullable_bytes", b"\x80\x00\x00\x00"),
    ("read_array_length", b"\xff\xff\xff\xfe"),
    ("read_string", b"\xff\xff"),                       # null where not allowed
    ("read_bytes", b"\xff\xff\xff\xff"),
    ("read_compact_string", b"\x00"),
    ("read_compact_bytes", b"\x00"),
]


@pytest.mark.parametrize("method,data", HOSTILE)
def test_hostile_lengths_rejected(impl, method, data):
    r = impl.wire.Reader(data + b"\x00" * 8)
    with pytest.raises(InvalidRequestError):
        getattr(r, method)()


@pytest.mark.parametrize("n", [-1, 3, 2**31, 2**64, 2**80])
def test_raw_and_skip_fail_closed_for_any_length(impl, n):
    r = impl.wire.Reader(b"ab")
    with pytest.raises(InvalidRequestError):
        r.read_raw(n)
    with pytest.raises(InvalidRequestError):
        r.skip(n)
    assert r.pos == 0 and r.read_raw(2) == b"ab"


def test_array_length_checked_against_element_size(impl):
    # 3 elements of at least 4 bytes do not fit in 8 remaining bytes.
    r = impl.wire.Reader(b"\x00\x00\x00\x03" + b"\x00" * 8)
    with pytest.raises(InvalidRequestError):
        r.read_array_length(4)
    assert impl.wire.Reader(b"\x00\x00\x00\x02" + b"\x00" * 8).read_array_length(4) == 2


@pytest.mark.parametrize("data", [
    b"\x80\x80\x80\x80\x80\x01",   # six bytes
    b"\xff\xff\xff\xff\x10",       # five bytes but 33 bits
    b"\xff\xff\xff\xff\xff\x00",
])
def test_unsigned_varint_longer_than_five_bytes_invalid(impl, data):
    with pytest.raises(InvalidRequestError):
        impl.wire.Reader(data).read_unsigned_varint()
    with pytest.raises(InvalidRequestError):
        impl.wire.Reader(data).read_varint()


@pytest.mark.parametrize("data", [
    b"\x80" * 10 + b"\x01",        # eleven bytes
    b"\xff" * 9 + b"\x02",         # 65 bits
])
def test_varlong_too_long_invalid(impl, data):
    with pytest.raises(InvalidRequestError):
        impl.wire.Reader(data).read_varlong()


@pytest.mark.parametrize("method,value", [
    ("write_int8", 128), ("write_int8", -129), ("write_int16", 0x8000),
    ("write_int32", 2**31), ("write_int64", 2**63), ("write_uint16", -1),
    ("write_uint32", 2**32), ("write_unsigned_varint", -1),
    ("write_unsigned_varint", 2**32), ("write_varint", 2**31), ("write_varlong", 2**63),
    ("write_int32", 1.5), ("write_int16", "1"), ("write_string", None),
    ("write_compact_string", None), ("write_string", "x" * 32768),
    ("write_compact_string", "x" * 32768), ("write_string", b"bytes"),
    ("write_bytes", None), ("write_compact_bytes", None), ("write_bytes", "str"),
    ("write_uuid", b"short"), ("write_compact_array_length", -2),
    ("write_float64", "x"),
])
def test_unrepresentable_values_raise_value_error(impl, method, value):
    with pytest.raises(ValueError):
        getattr(impl.wire.Writer(), method)(value)


def test_index_integers_accepted(impl):
    from kchannel.protocol.errors import Errors
    w = impl.wire.Writer()
    w.write_int16(Errors.UNSUPPORTED_VERSION)
    w.write_int8(True)
    assert w.getvalue() == b"\x00\x23\x01"


def test_max_length_string_round_trips(impl):
    s = "x" * 32767
    w = impl.wire.Writer()
    w.write_string(s)
    w.write_compact_string(s)
    r = impl.wire.Reader(w.getvalue())
    assert r.read_string() == s
    assert r.read_compact_string() == s


# -- hypothesis: round trips and fail-closed ----------------------------------
# (``impl``/``impl_pair`` only select modules: nothing in them needs resetting
# between examples, hence the suppressed function-scoped-fixture check.)
_FIXTURE_OK = [HealthCheck.function_scoped_fixture]

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)

_VALUES = {
    "int8": st.integers(-2**7, 2**7 - 1),
    "int16": st.integers(-2**15, 2**15 - 1),
    "int32": st.integers(-2**31, 2**31 - 1),
    "int64": st.integers(-2**63, 2**63 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "unsigned_varint": st.integers(0, 2**32 - 1),
    "varint": st.integers(-2**31, 2**31 - 1),
    "varlong": st.integers(-2**63, 2**63 - 1),
    "boolean": st.booleans(),
    "float64": st.floats(allow_nan=False),
    "uuid": st.uuids(),
    "string": _TEXT,
    "nullable_string": st.none() | _TEXT,
    "compact_string": _TEXT,
    "compact_nullable_string": st.none() | _TEXT,
    "bytes": st.binary(max_size=40),
    "nullable_bytes": st.none() | st.binary(max_size=40),
    "compact_bytes": st.binary(max_size=40),
    "compact_nullable_bytes": st.none() | st.binary(max_size=40),
}

_OPS = st.lists(st.sampled_from(sorted(_VALUES)).flatmap(
    lambda kind: st.tuples(st.just(kind), _VALUES[kind])), max_size=12)


@settings(suppress_health_check=_FIXTURE_OK, max_examples=150, deadline=None)
@given(ops=_OPS)
def test_round_trip_any_sequence(impl, ops):
    w = impl.wire.Writer()
    for kind, value in ops:
        getattr(w, "write_" + kind)(value)
    data = w.getvalue()
    r = impl.wire.Reader(data)
    for kind, value in ops:
        assert getattr(r, "read_" + kind)() == value
    assert r.remaining() == 0
    # Any strict prefix fails closed on the last item at the latest.
    if data:
        r = impl.wire.Reader(data[:-1])
        with pytest.raises(InvalidRequestError):
            for kind, _value in ops:
                getattr(r, "read_" + kind)()


@settings(suppress_health_check=_FIXTURE_OK, max_examples=300, deadline=None)
@given(data=st.binary(max_size=64), methods=st.lists(st.sampled_from(READ_METHODS), max_size=8))
def test_any_bytes_fail_closed(impl, data, methods):
    r = impl.wire.Reader(data)
    for m in methods:
        try:
            getattr(r, m)()
        except InvalidRequestError:
            return
        assert 0 <= r.pos <= r.end == len(data)


# -- differential: pure vs compiled -------------------------------------------

def _wire_outcome(fn):
    try:
        return ("ok", fn())
    except InvalidRequestError as e:
        return ("InvalidRequestError", str(e))
    except ValueError as e:
        return ("ValueError", None)


@settings(suppress_health_check=_FIXTURE_OK, max_examples=300, deadline=None)
@given(data=st.binary(max_size=48), methods=st.lists(st.sampled_from(READ_METHODS), max_size=6))
def test_differential_readers(impl_pair, data, methods):
    pure, compiled = impl_pair
    rp = pure.wire.Reader(data)
    rc = compiled.wire.Reader(data)
    for m in methods:
        op = _wire_outcome(getattr(rp, m))
        oc = _wire_outcome(getattr(rc, m))
        assert op == oc, m
        assert rp.pos == rc.pos
        if op[0] != "ok":
            break


@settings(suppress_health_check=_FIXTURE_OK, max_examples=200, deadline=None)
@given(ops=_OPS, junk=st.sampled_from([
    ("write_int8", 300), ("write_uint32", -5), ("write_string", 7),
    ("write_compact_bytes", "s"), ("write_varint", 2**40), ("write_int64", 1.0)]))
def test_differential_writers(impl_pair, ops, junk):
    pure, compiled = impl_pair
    wp, wc = pure.wire.Writer(), compiled.wire.Writer()
    for kind, value in ops:
        getattr(wp, "write_" + kind)(value)
        getattr(wc, "write_" + kind)(value)
    assert wp.getvalue() == wc.getvalue()
    assert _wire_outcome(lambda: getattr(wp, junk[0])(junk[1]))[0] == "ValueError"
    assert _wire_outcome(lambda: getattr(wc, junk[0])(junk[1]))[0] == "ValueError"


@settings(suppress_health_check=_FIXTURE_OK, max_examples=200, deadline=None)
@given(v=st.integers(-2**64, 2**64))
def test_differential_varint_functions(impl_pair, v):
    pure, compiled = impl_pair
    for name in ("encode_unsigned_varint", "encode_varint", "encode_varlong",
                 "size_of_unsigned_varint"):
        assert _wire_outcome(lambda: getattr(pure.wire, name)(v)) == \
            _wire_outcome(lambda: getattr(compiled.wire, name)(v)), name


def test_compiled_reader_refuses_out_of_range_cursor(impl):
    # The compiled reader's memory safety rests on 0 <= pos <= end <= len.
    r = impl.wire.Reader(b"\x00\x01")
    if impl.compiled:
        with pytest.raises(ValueError):
            r.end = 3
        with pytest.raises(ValueError):
            r.pos = 5
    r.end = 1
    assert r.read_int8() == 0
    with pytest.raises(InvalidRequestError):
        r.read_int8()


def test_struct_reference_for_fixed_width(impl):
    # Cross-check fixed-width readers against the standard library.
    data = bytes(range(1, 17))
    r = impl.wire.Reader(data)
    assert r.read_int64() == struct.unpack(">q", data[:8])[0]
    assert r.read_float64() == struct.unpack(">d", data[8:])[0]


def test_reader_reads_received_frames_in_place(impl):
    """Received frames are read-only memoryviews: a Reader over one reads
    the same values as over bytes; the compiled twin reads it in place
    (no copy: its ``buf`` is the frame itself, and a records field is a view
    of the frame's own memory)."""
    w = impl.wire
    wr = w.Writer()
    wr.write_int32(7)
    wr.write_string("kafka")
    wr.write_nullable_bytes(b"records!")
    data = wr.getvalue()
    frame = memoryview(bytearray(b"\x00" * 3 + data)).toreadonly()[3:]
    for buf in (data, frame):
        r = w.Reader(buf)
        assert (r.read_int32(), r.read_string(), bytes(r.read_nullable_records())) == (
            7, "kafka", b"records!")
        assert r.remaining() == 0
    if impl.kind == "compiled":
        r = w.Reader(frame)
        assert r.buf is frame
        r.read_int32()
        r.read_string()
        view = r.read_nullable_records()
        # A view of the frame's memory, not of a copy of it.
        assert view.obj is frame.obj
        with pytest.raises(InvalidRequestError):
            w.Reader(frame, 99)


# -- frame_message (the framing of request_encoder / response_encoder) ---------

@pytest.mark.parametrize("prefix,corr,tail,data", [
    (b"", 0, b"", b""),
    (b"", 7, b"\x00", b"body"),
    (b"", -1, b"", b"x" * 300),
    (b"", -0x80000000, b"\x00", b"\x01\x02"),
    (b"\x00\x03\x00\x01", 0x7FFFFFFF, b"\x00\x02id", b"\x00\x00\x00\x00"),
    (b"\x00\x12\x00\x03", 5, b"\x00\x02id\x00", bytes(range(256)) * 70),
])
def test_frame_message_is_size_prefix_corr_and_parts(impl, prefix, corr, tail, data):
    payload = prefix + struct.pack(">i", corr) + tail + data
    assert impl.wire.frame_message(prefix, corr, tail, data) == (
        struct.pack(">i", len(payload)) + payload)


def test_request_and_response_encoders_frame_as_before():
    """The framed encoders (whose framing is frame_message) give the bytes
    of the unframed encoding behind its size, as encode_request /
    encode_response do; for a correlation id outside int32 too."""
    from kchannel.protocol.headers import (RequestHeader, encode_request, encode_response,
                                           request_encoder, response_encoder)
    body = {"topics": [{"name": "t"}]}
    req = request_encoder(3, 1, "client-1", framed=True)
    for corr in (0, 1, 0x7FFFFFFF):
        whole = encode_request(RequestHeader(3, 1, corr, "client-1"), body)
        assert req(corr, body) == struct.pack(">i", len(whole)) + whole
    resp_body = {"brokers": [{"node_id": 1, "host": "h", "port": 9092}],
                 "controller_id": 1, "topics": []}
    for version in (1, 9):      # header v0 and v1 (flexible)
        resp = response_encoder(3, version, framed=True)
        for corr in (0, -1, -0x80000000, 0x7FFFFFFF):
            whole = encode_response(3, version, corr, resp_body)
            assert resp(corr, resp_body) == struct.pack(">i", len(whole)) + whole
