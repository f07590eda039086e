"""Request/response headers in the wire twins (``parse_request_header``,
``encode_request_header``, ``encode_response_header``,
``decode_response_header``): the compiled and the pure twin give the same
result, or raise the same exception with the same message, for any bytes;
what one encodes, both parse back."""
from hypothesis import HealthCheck, given, settings, strategies as st

from kchannel.errors import InvalidRequestError
from kchannel.protocol.api_keys import REQUEST_FLEXIBLE_FROM

# ``impl_pair`` only selects modules: nothing in it needs resetting between
# examples, hence the suppressed function-scoped-fixture check.
_FIXTURE_OK = [HealthCheck.function_scoped_fixture]
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
HEADER = st.tuples(st.integers(-0x8000, 0x7FFF), st.integers(-0x8000, 0x7FFF),
                   st.integers(-0x80000000, 0x7FFFFFFF), st.none() | _TEXT)


def outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
        return type(exc), str(exc)


_PREFIXES = st.sampled_from([b"\x00\x12\x00\x03", b"\x00\x00\x00\x09", b"\x00\x07\x00\x00",
                             b"\x00\x03\x00\x0c"])


@settings(suppress_health_check=_FIXTURE_OK, max_examples=400, deadline=None)
@given(st.binary(max_size=40) | st.builds(lambda k, rest: k + rest, _PREFIXES,
                                          st.binary(max_size=40)),
       st.sampled_from([bytes, bytearray, memoryview]))
def test_any_bytes_parse_alike_or_fail_alike(impl_pair, data, kind):
    pure, compiled = impl_pair
    a = outcome(pure.wire.parse_request_header, kind(data), REQUEST_FLEXIBLE_FROM)
    b = outcome(compiled.wire.parse_request_header, kind(data), REQUEST_FLEXIBLE_FROM)
    assert a == b
    if isinstance(a, tuple) and a and a[0] is not InvalidRequestError:
        assert len(a) == 6 and a[5] <= len(data)
    for hv in (0, 1):
        assert outcome(pure.wire.decode_response_header, kind(data), hv) == \
            outcome(compiled.wire.decode_response_header, kind(data), hv)


@settings(suppress_health_check=_FIXTURE_OK, max_examples=300, deadline=None)
@given(HEADER, st.sampled_from([1, 2]), st.binary(max_size=8))
def test_encoded_request_headers_parse_back(impl_pair, header, hv, body):
    api_key, api_version, correlation_id, client_id = header
    # The header version the parser expects for this key/version decides.
    flexible = {api_key: api_version} if hv == 2 else {}
    pure, compiled = impl_pair
    encoded = {m.wire.encode_request_header(api_key, api_version, correlation_id, client_id, hv)
               for m in (pure, compiled)}
    assert len(encoded) == 1
    raw = encoded.pop()
    if api_key == 7 and api_version == 0:
        return   # ControlledShutdown v0 is header v0, covered below
    for m in (pure, compiled):
        assert m.wire.parse_request_header(raw + body, flexible) == \
            (api_key, api_version, correlation_id, client_id, hv, len(raw))


def test_header_v0_and_response_headers(impl_pair):
    for m in impl_pair:
        raw = m.wire.encode_request_header(7, 0, 42, "ignored", 0)
        assert raw == b"\x00\x07\x00\x00\x00\x00\x00\x2a"
        assert m.wire.parse_request_header(raw, {}) == (7, 0, 42, "", 0, 8)
        assert m.wire.encode_response_header(-1, 0) == b"\xff\xff\xff\xff"
        assert m.wire.encode_response_header(5, 1) == b"\x00\x00\x00\x05\x00"
        assert m.wire.decode_response_header(b"\x00\x00\x00\x05\x00body", 1) == (5, 5)
        # A non-empty tagged-field section is skipped.
        assert m.wire.decode_response_header(b"\x00\x00\x00\x05\x01\x03\x01zbody", 1) == (5, 8)


def test_unrepresentable_values_are_value_errors(impl_pair):
    for m in impl_pair:
        for args in [(0x8000, 0, 0, None, 1), (0, 0, 2 ** 31, None, 1), (0, 0, 0, "x" * 40000, 1)]:
            try:
                m.wire.encode_request_header(*args)
            except ValueError:
                continue
            raise AssertionError(f"{m.wire.__name__} encoded {args!r}")
