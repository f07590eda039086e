"""Every supported message at every version: hypothesis-generated bodies
round-trip, every truncation fails closed, arbitrary bytes fail closed."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import InvalidRequestError, UnsupportedVersionError
from kchannel.protocol import messages
from kchannel.protocol.api_keys import API_NAMES, API_VALID_VERSIONS, ApiKey
from kchannel.protocol.schema import Field, MessageSpec, snake_case
from tests.fixtures.strategies import SPEC_VERSION_IDS as IDS
from tests.fixtures.strategies import SPEC_VERSIONS as CASES
from tests.fixtures.strategies import body_strategy, examples


def _body_strategy(spec, version):
    return body_strategy(spec.fields, version)


_SETTINGS = settings(max_examples=examples(25), deadline=None,
                     suppress_health_check=[HealthCheck.too_slow,
                                            HealthCheck.data_too_large])


def test_every_supported_api_listed():
    expected = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
                25, 26, 28, 29, 30, 31, 32, 33, 36, 37, 38, 39, 40, 41, 42, 44, 47, 48, 50, 51,
                60,
                68, 69,   # the consumer's KIP-848 group protocol
                # read and answered by the gateway's ACL checks
                34, 35, 43, 45, 46, 49, 55, 57, 61, 64, 65, 66}
    assert set(messages.API) == expected
    # kchannel writes only magic v2 record batches: Produce from v3, Fetch from v4.
    oldest = {0: 3, 1: 4}
    for key, api in messages.API.items():
        assert api.api_key == key
        assert api.name == API_NAMES[key]
        lo, hi = API_VALID_VERSIONS[key]
        assert (api.min_version, api.max_version) == (oldest.get(key, lo), hi)
        assert (api.request.min_version, api.request.max_version) == (lo, hi)
        assert api.request.api_key == api.response.api_key == key
    assert messages.API_VERSIONS.max_version >= 3
    assert messages.METADATA.max_version >= 12
    sasl_auth = messages.SASL_AUTHENTICATE
    assert (sasl_auth.min_version, sasl_auth.max_version) == (0, 2)
    assert (messages.SASL_HANDSHAKE.min_version, messages.SASL_HANDSHAKE.max_version) == (0, 1)


def test_api_key_names():
    assert ApiKey.API_VERSIONS == 18 and ApiKey.API_VERSIONS.api_name == "ApiVersions"
    assert ApiKey.SASL_HANDSHAKE == 17 and ApiKey.SASL_AUTHENTICATE == 36
    assert ApiKey.METADATA == 3 and ApiKey.PRODUCE == 0
    assert ApiKey.CREATE_DELEGATION_TOKEN == 38 and ApiKey.DESCRIBE_DELEGATION_TOKEN == 41
    assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS == 50
    assert ApiKey.ALTER_USER_SCRAM_CREDENTIALS == 51
    assert ApiKey.DESCRIBE_CLUSTER == 60
    assert ApiKey(7).name == "CONTROLLED_SHUTDOWN"
    # Every key from 0 up to the highest is a Kafka API (no gaps).
    assert sorted(int(k) for k in ApiKey) == list(range(len(ApiKey)))
    assert len(ApiKey) == len(API_NAMES)


def test_snake_case_keys():
    assert snake_case("ErrorCode") == "error_code"
    assert snake_case("ApiKeys") == "api_keys"
    assert snake_case("AuthBytes") == "auth_bytes"
    assert snake_case("SessionLifetimeMs") == "session_lifetime_ms"
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("TopicId") == "topic_id"


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@_SETTINGS
@given(data=st.data())
def test_round_trip(spec, version, data):
    body = data.draw(_body_strategy(spec, version))
    encoded = spec.encode(body, version)
    decoded = spec.decode(encoded, version)
    assert decoded == body
    assert spec.encode(decoded, version) == encoded
    # decode_from reports the end of the body, also at an offset.
    got, end = spec.decode_from(b"xyz" + encoded + b"trailing", 3, version)
    assert got == body and end == 3 + len(encoded)
    # Every truncation fails closed.  (try/except rather than pytest.raises,
    # whose set-up per cut was a tenth of this test's CPU; any other
    # exception still escapes and fails the test.)
    for cut in range(len(encoded)):
        try:
            spec.decode(encoded[:cut], version)
        except InvalidRequestError:
            continue
        pytest.fail(f"a body truncated to {cut} of {len(encoded)} bytes was decoded")


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
def test_defaults_encode_and_decode(spec, version):
    encoded = spec.encode({}, version)
    decoded = spec.decode(encoded, version)
    assert decoded == spec.default_body(version)
    assert set(decoded) == {f.key for f in spec.fields if version in f.versions}


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@settings(max_examples=examples(40), deadline=None)
@given(data=st.binary(max_size=80))
def test_any_bytes_fail_closed(spec, version, data):
    try:
        body = spec.decode(data, version)
    except InvalidRequestError:
        return
    assert isinstance(body, dict)


@pytest.mark.parametrize("spec,version", CASES, ids=IDS)
@settings(max_examples=examples(15), deadline=None)
@given(data=st.data())
def test_mutated_encodings_fail_closed(spec, version, data):
    body = data.draw(_body_strategy(spec, version))
    encoded = bytearray(spec.encode(body, version))
    if not encoded:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(encoded) - 1))
        encoded[i] = data.draw(st.integers(0, 255))
    try:
        spec.decode(bytes(encoded), version)
    except InvalidRequestError:
        pass


def test_fields_absent_from_a_version_are_ignored_on_encode():
    spec = messages.SASL_AUTHENTICATE.response
    body = {"error_code": 0, "error_message": None, "auth_bytes": b"x",
            "session_lifetime_ms": 1000}
    assert spec.decode(spec.encode(body, 0), 0) == {
        "error_code": 0, "error_message": None, "auth_bytes": b"x"}


def test_missing_fields_take_schema_defaults():
    spec = messages.METADATA.response
    got = spec.decode(spec.encode({}, 12), 12)
    assert got["controller_id"] == -1
    assert got["cluster_id"] is None
    assert got["brokers"] == [] and got["topics"] == []
    spec = messages.DESCRIBE_CLUSTER.request
    assert spec.decode(spec.encode({}, 1), 1)["endpoint_type"] == 1


def test_tagged_field_at_default_is_not_written():
    spec = messages.API_VERSIONS.response
    plain = spec.encode({"error_code": 0, "api_keys": []}, 3)
    same = spec.encode({"error_code": 0, "api_keys": [], "finalized_features_epoch": -1,
                        "zk_migration_ready": False, "supported_features": []}, 3)
    assert plain == same
    assert plain.endswith(b"\x00")  # empty tag section


@pytest.mark.parametrize("body,version", [
    ({"auth_bytes": None}, 0),
    ({"auth_bytes": 5}, 0),
    ([], 0),
    ({"auth_bytes": None}, 2),
    ({"auth_bytes": "text"}, 0),
])
def test_invalid_values_raise_value_error(body, version):
    with pytest.raises(ValueError):
        messages.SASL_AUTHENTICATE.request.encode(body, version)


@pytest.mark.parametrize("topics", [5, "t", [5], [{"name": 5}]])
def test_invalid_nested_values_raise_value_error(topics):
    with pytest.raises(ValueError):
        messages.METADATA.request.encode({"topics": topics}, 9)


def test_null_in_non_nullable_field_rejected_on_decode():
    spec = messages.SASL_HANDSHAKE.request
    with pytest.raises(InvalidRequestError, match="Mechanism"):
        spec.decode(b"\xff\xff", 1)
    with pytest.raises(InvalidRequestError):
        messages.SASL_HANDSHAKE.response.decode(b"\x00\x00\xff\xff\xff\xff", 1)


def test_unsupported_versions_raise():
    spec = messages.SASL_HANDSHAKE.request
    with pytest.raises(UnsupportedVersionError):
        spec.encode({"mechanism": "PLAIN"}, 2)
    with pytest.raises(UnsupportedVersionError):
        spec.decode(b"\x00\x05PLAIN", -1)


def test_tagged_field_size_mismatch_rejected():
    spec = messages.API_VERSIONS.response
    # Tag 1 (FinalizedFeaturesEpoch, int64) declared as 9 bytes.
    data = bytes.fromhex("0000 01 00000000 01 01 09 000000000000000300")
    with pytest.raises(InvalidRequestError):
        spec.decode(data, 3)
    # Declared as 7 bytes: the int64 would read past its field.
    data = bytes.fromhex("0000 01 00000000 01 01 07 00000000000003 00")
    with pytest.raises(InvalidRequestError):
        spec.decode(data, 3)


def test_huge_array_count_rejected_without_allocating():
    spec = messages.METADATA.request
    with pytest.raises(InvalidRequestError):
        spec.decode(b"\x7f\xff\xff\xff" + b"\x00" * 16, 1)
    with pytest.raises(InvalidRequestError):
        spec.decode(b"\xff\xff\xff\xff\x07" + b"\x00" * 16, 9)


def test_custom_schema_nested_struct_and_float():
    spec = MessageSpec("TestRequest", "0-1", "1+", fields=[
        Field("Ratio", "float64", "0+"),
        Field("Inner", "InnerStruct", "0+", fields=[
            Field("A", "int32", "0+"),
            Field("B", "string", "1+", nullable_versions="1+", default=None),
        ]),
        Field("Maybe", "OtherStruct", "1+", nullable_versions="1+", default=None, fields=[
            Field("C", "int8", "1+"),
        ]),
        Field("Extra", "uint16", "1+", tag=4, default=9),
    ])
    for version in (0, 1):
        body = {"ratio": 0.25, "inner": {"a": 5}}
        if version == 1:
            body["inner"]["b"] = None
            body["maybe"] = {"c": 3}
            body["extra"] = 9
        assert spec.decode(spec.encode(body, version), version) == body
    assert spec.encode({"ratio": 1.0, "inner": {"a": 1}}, 0) == (
        bytes.fromhex("3ff0000000000000") + b"\x00\x00\x00\x01")
    encoded = spec.encode({"ratio": 0, "inner": {"a": 1, "b": "x"}, "extra": 2}, 1)
    assert encoded == (b"\x00" * 8 + b"\x00\x00\x00\x01\x02x\x00" + b"\xff"
                       + b"\x01\x04\x02\x00\x02")
