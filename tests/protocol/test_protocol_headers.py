"""Request/response headers, header-version rules, and the ApiVersions
fallback for a request version the server does not know."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel.errors import InvalidRequestError, UnsupportedVersionError
from kchannel.framing import encode_frame
from kchannel.protocol import (
    RequestHeader,
    api_versions_fallback,
    api_versions_fallback_body,
    choose_api_versions_version,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    is_unsupported_api_versions_request,
    is_valid_api_versions_request,
    messages,
    parse_request_header,
    request_header_version,
    response_header_version,
)
from kchannel.protocol.api_keys import API_NAMES, REQUEST_FLEXIBLE_FROM
from kchannel.protocol.headers import decode_response_header, encode_request_header


@pytest.mark.parametrize("api_key,version,expected", [
    (18, 0, 1), (18, 2, 1), (18, 3, 2), (18, 4, 2), (18, 99, 2),
    (3, 8, 1), (3, 9, 2), (3, 13, 2),
    (17, 0, 1), (17, 1, 1),
    (36, 1, 1), (36, 2, 2),
    (7, 0, 0), (7, 1, 1), (7, 3, 2),      # ControlledShutdown v0: header v0
    (0, 9, 2), (0, 8, 1),                 # Produce
    (60, 0, 2),                           # DescribeCluster: flexible from v0
    (999, 5, 1), (-1, 0, 1),              # unknown keys: non-flexible v1
])
def test_request_header_version(api_key, version, expected):
    assert request_header_version(api_key, version) == expected


@pytest.mark.parametrize("api_key,version,expected", [
    (18, 0, 0), (18, 3, 0), (18, 4, 0), (18, 50, 0),   # ApiVersions: always v0
    (3, 8, 0), (3, 9, 1), (17, 1, 0), (36, 1, 0), (36, 2, 1), (60, 0, 1),
    (50, 0, 1), (999, 3, 0),
])
def test_response_header_version(api_key, version, expected):
    assert response_header_version(api_key, version) == expected


def test_parse_request_header_v1():
    payload = bytes.fromhex("0011 0001 0000002a 0003 616263") + b"body"
    header, off = parse_request_header(payload)
    assert header == RequestHeader(17, 1, 42, "abc")
    assert header.header_version == 1
    assert payload[off:] == b"body"


def test_parse_request_header_v2_skips_tagged_fields():
    payload = bytes.fromhex("0024 0002 00000001 0000 02 00 01 ff 05 00") + b"B"
    header, off = parse_request_header(payload)
    assert header == RequestHeader(36, 2, 1, "")
    assert header.header_version == 2
    assert payload[off:] == b"B"


def test_parse_request_header_null_client_id():
    header, off = parse_request_header(bytes.fromhex("0003 0001 00000001 ffff"))
    assert header.client_id is None and off == 10
    assert encode_request_header(header) == bytes.fromhex("0003 0001 00000001 ffff")


def test_parse_request_header_v0_controlled_shutdown():
    payload = bytes.fromhex("0007 0000 00000005 00000001")
    header, off = parse_request_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id) == (7, 0, 5)
    assert header.header_version == 0 and off == 8
    assert encode_request_header(header) == payload[:8]


@pytest.mark.parametrize("api_key", [-5, 99, 1000, 32767])
def test_parse_request_header_unknown_api_key(api_key):
    # Unknown key: assume header v1, so the server can refuse it from the header.
    payload = (api_key.to_bytes(2, "big", signed=True)
               + bytes.fromhex("0007 00000009 0001 63") + b"\x00")
    header, off = parse_request_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (api_key, 7, 9, "c")
    assert off == 11
    with pytest.raises(InvalidRequestError):
        decode_request(payload)


@pytest.mark.parametrize("payload", [
    b"", b"\x00", bytes(7), bytes(9),                 # truncated fixed part
    bytes.fromhex("0011 0001 00000001 0005 6162"),     # client id truncated
    bytes.fromhex("0011 0001 00000001 fffe"),           # client id length -2
    bytes.fromhex("0024 0002 00000001 0000"),           # v2 header without tags
    bytes.fromhex("0024 0002 00000001 0000 01 00 05 00"),   # tag size beyond end
    bytes.fromhex("0024 0002 00000001 0000 ff ff ff ff ff 00"),  # 6-byte varint
])
def test_parse_request_header_rejects_junk(payload):
    with pytest.raises(InvalidRequestError):
        parse_request_header(payload)


def test_client_id_is_classic_string_even_in_v2_header():
    payload = encode_request(RequestHeader(18, 3, 1, "abc"),
                             {"client_software_name": "n", "client_software_version": "v"})
    assert payload[8:13] == b"\x00\x03abc"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=40))
def test_parse_request_header_any_bytes_fail_closed(data):
    try:
        header, off = parse_request_header(data)
    except InvalidRequestError:
        return
    assert 8 <= off <= len(data)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(sorted(messages.API)), version=st.integers(-1, 20),
       rest=st.binary(max_size=40))
def test_decode_request_any_body_fails_closed(key, version, rest):
    payload = key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + rest
    try:
        header, body = decode_request(payload)
    except (InvalidRequestError, UnsupportedVersionError):
        return
    assert isinstance(body, dict)


@settings(max_examples=100, deadline=None)
@given(key=st.sampled_from(sorted(API_NAMES)), version=st.integers(0, 30),
       corr=st.integers(-2**31, 2**31 - 1),
       client_id=st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",)),
                                     max_size=20))
def test_header_round_trip_any_api(key, version, corr, client_id):
    header = RequestHeader(key, version, corr, client_id)
    payload = encode_request_header(header) + b"rest"
    parsed, off = parse_request_header(payload)
    expected_client_id = "" if (key, version) == (7, 0) else client_id
    assert parsed == RequestHeader(key, version, corr, expected_client_id)
    assert payload[off:] == b"rest"
    flex = REQUEST_FLEXIBLE_FROM[key]
    assert parsed.header_version == (0 if (key, version) == (7, 0)
                                     else 2 if flex is not None and version >= flex else 1)


def test_decode_request_unsupported():
    # An API Kafka defines but kchannel does not implement.
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(encode_request(RequestHeader(67, 0, 1, "c"), b""))
    assert info.value.header == RequestHeader(67, 0, 1, "c")
    with pytest.raises(InvalidRequestError) as info:
        decode_request(encode_request(RequestHeader(17, 1, 8, "c"), b"\x00\x05PL"))
    assert info.value.header.correlation_id == 8
    with pytest.raises(UnsupportedVersionError):
        decode_request(encode_request(RequestHeader(17, 2, 1, "c"), b"\x00\x01x"))


def test_encode_request_accepts_raw_body():
    payload = encode_request(RequestHeader(17, 1, 1, "c"), b"\x00\x05PLAIN")
    assert decode_request(payload)[1] == {"mechanism": "PLAIN"}


def test_response_round_trip_and_header_bytes():
    body = {"error_code": 0, "error_message": None, "auth_bytes": b"x",
            "session_lifetime_ms": 5}
    p2 = encode_response(36, 2, 77, body)
    assert p2[:5] == bytes.fromhex("0000004d 00")
    assert decode_response(p2, 36, 2) == (77, body)
    p1 = encode_response(36, 1, 77, body)
    assert p1[:4] == bytes.fromhex("0000004d") and p1[4:6] == b"\x00\x00"
    assert decode_response(p1, 36, 1) == (77, body)
    assert decode_response_header(p2, 36, 2) == (77, 5)
    with pytest.raises(InvalidRequestError):
        decode_response(b"\x00\x00", 36, 2)
    with pytest.raises(InvalidRequestError):
        decode_response(p2[:-1], 36, 2)


# -- ApiVersions fallback ------------------------------------------------------

def test_fallback_bytes_exact():
    # Response header v0 (correlation id), v0 body: error 35, one entry:
    # ApiVersions 0..our max.
    top = messages.API_VERSIONS.max_version
    expected = (bytes.fromhex("00000007 0023 00000001 0012 0000")
                + top.to_bytes(2, "big"))
    assert api_versions_fallback(7) == expected
    assert api_versions_fallback(RequestHeader(18, 9, 7, "x")) == expected
    assert api_versions_fallback_body() == {
        "error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": top}]}


def test_server_answers_unknown_version_from_header_alone():
    # A future ApiVersions v9 whose body our schema cannot parse.
    payload = (bytes.fromhex("0012 0009 00000021 0003 636c69 00")
               + b"\xff\xff\xff\xff\xff\xff garbage")
    header, _off = parse_request_header(payload)
    assert header.header_version == 2
    assert is_unsupported_api_versions_request(header)
    with pytest.raises(UnsupportedVersionError):
        decode_request(payload)
    response = api_versions_fallback(header)
    # The client parses it at the version it sent, falls back to v0.
    corr, body = decode_response(response, 18, 4)
    assert corr == 0x21
    assert body["error_code"] == 35
    assert choose_api_versions_version(body) == messages.API_VERSIONS.max_version


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_client_parses_v0_fallback_at_any_version(version):
    corr, body = decode_response(api_versions_fallback(3), 18, version)
    assert corr == 3 and body["error_code"] == 35
    assert body["api_keys"][0]["api_key"] == 18


def test_supported_api_versions_request_not_a_fallback():
    for v in range(messages.API_VERSIONS.min_version, messages.API_VERSIONS.max_version + 1):
        assert not is_unsupported_api_versions_request(RequestHeader(18, v, 1, "c"))
    assert is_unsupported_api_versions_request(RequestHeader(18, -1, 1, "c"))
    assert not is_unsupported_api_versions_request(RequestHeader(3, 99, 1, "c"))
    assert is_unsupported_api_versions_request(RequestHeader(18, 3, 1, "c"), max_version=2)


def test_choose_api_versions_version():
    assert choose_api_versions_version(
        {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}) == 2
    assert choose_api_versions_version(
        {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 99}]}) == \
        messages.API_VERSIONS.max_version
    assert choose_api_versions_version({"api_keys": []}) == 0


@pytest.mark.parametrize("name,ver,valid", [
    ("apache-kafka-java", "3.7.0", True), ("librdkafka", "2.3.0", True),
    ("a", "1", True), ("", "1", False), ("bad name", "1", False), ("-x", "1", False),
    ("x-", "1", False), ("kafka-python", "2.0.2-dev", True), ("x", "1.0_rc", False),
])
def test_api_versions_request_validity(name, ver, valid):
    body = {"client_software_name": name, "client_software_version": ver}
    assert is_valid_api_versions_request(body, 3) is valid
    assert is_valid_api_versions_request(body, 2) is True


@pytest.mark.parametrize("api_key,version", [(7, 0), (17, 1), (18, 3), (36, 2), (3, 12), (999, 1)])
def test_fast_header_path_matches_header_schemas(api_key, version):
    header = RequestHeader(api_key, version, 12345, "client-1")
    hv = request_header_version(api_key, version)
    schema_body = {"request_api_key": api_key, "request_api_version": version,
                   "correlation_id": 12345, "client_id": "client-1"}
    assert messages.REQUEST_HEADER.encode(schema_body, hv) == encode_request_header(header)
    decoded = messages.REQUEST_HEADER.decode(encode_request_header(header), hv)
    assert decoded["correlation_id"] == 12345
    for rv in (0, 1):
        expected = encode_response(17, 1, 99, b"") if rv == 0 else encode_response(36, 2, 99, b"")
        assert messages.RESPONSE_HEADER.encode({"correlation_id": 99}, rv) == expected


def test_flexible_table_matches_request_and_response_schemas():
    """One flexible-version table serves request and response headers: it
    must agree with both message schemas of every API kchannel encodes."""
    from kchannel.protocol import messages
    from kchannel.protocol.api_keys import REQUEST_FLEXIBLE_FROM, RESPONSE_FLEXIBLE_FROM
    for key, api in messages.API.items():
        expected = REQUEST_FLEXIBLE_FROM.get(key)
        for spec, table in ((api.request, REQUEST_FLEXIBLE_FROM),
                            (api.response, RESPONSE_FLEXIBLE_FROM)):
            first = next((v for v in range(api.min_version, api.max_version + 1)
                          if spec.is_flexible(v)), None)
            if first is not None:
                assert table.get(key) == first == expected, (api.name, spec)


# -- the per-API-version codecs of the request path (client and server) ----
_EVERY_VERSION = [(key, v) for key, api in sorted(messages.API.items())
                  for v in range(api.min_version, api.max_version + 1)]


@pytest.mark.parametrize("api_key,version", _EVERY_VERSION)
def test_request_encoder_matches_encode_request(api_key, version):
    from kchannel.protocol.headers import request_encoder
    api = messages.API[api_key]
    body = api.request.default_body(version)
    for client_id in ("client-1", "", None, "é" * 40):
        enc = request_encoder(api_key, version, client_id)
        for corr in (0, 1, 0x12345678, 0x7FFFFFFF):
            expected = encode_request(RequestHeader(api_key, version, corr, client_id), body)
            assert enc(corr, body) == expected
        assert enc(7, b"raw-body") == encode_request(
            RequestHeader(api_key, version, 7, client_id), b"raw-body")
        framed = request_encoder(api_key, version, client_id, framed=True)
        assert framed(3, body) == encode_frame(
            encode_request(RequestHeader(api_key, version, 3, client_id), body))


@pytest.mark.parametrize("api_key,version", _EVERY_VERSION)
def test_response_codecs_match_encode_and_decode_response(api_key, version):
    from kchannel.protocol.headers import response_decoder, response_encoder
    api = messages.API[api_key]
    body = api.response.default_body(version)
    enc = response_encoder(api_key, version)
    dec = response_decoder(api_key, version)
    for corr in (0, 5, -1, 0x7FFFFFFF, -0x80000000):
        payload = encode_response(api_key, version, corr, body)
        assert enc(corr, body) == payload
        assert response_encoder(api_key, version, framed=True)(corr, body) == \
            encode_frame(payload)
        assert dec(payload) == decode_response(payload, api_key, version)[1]


def test_response_decoder_reads_a_non_empty_tagged_section_and_fails_closed():
    from kchannel.protocol.headers import response_decoder
    # Metadata v12 responses use header v1: a header with a tagged field
    # (tag 0, 2 bytes) before the body must still decode.
    body = messages.API[3].response.default_body(12)
    plain = encode_response(3, 12, 9, body)
    tagged = plain[:4] + b"\x01\x00\x02ab" + plain[5:]
    dec = response_decoder(3, 12)
    assert dec(tagged) == dec(plain) == decode_response(plain, 3, 12)[1]
    for junk in (b"", b"\x00\x00", plain[:4], plain[:6]):
        with pytest.raises(InvalidRequestError):
            dec(junk)
    with pytest.raises(UnsupportedVersionError):
        response_decoder(9999, 0)


def test_request_encoder_refuses_what_encode_request_refuses():
    from kchannel.protocol.headers import request_encoder
    with pytest.raises(UnsupportedVersionError):
        request_encoder(9999, 0, "c")
    enc = request_encoder(3, 1, "c")
    with pytest.raises(ValueError):
        enc(1, ["not", "a", "dict"])
    with pytest.raises(ValueError):
        enc(1, {"topics": "not a list"})
