"""Byte-exact request/response vectors, written out by hand from Kafka's
protocol definition (field order, int16 vs compact lengths, tagged-field
sections), checked in both directions."""
import uuid

import pytest

from kchannel.protocol import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    messages,
)


def h(text):
    """Hex with spaces and | separators for readability."""
    return bytes.fromhex(text.replace("|", " "))


def s16(text):
    """Classic string: int16 length + UTF-8."""
    b = text.encode()
    return len(b).to_bytes(2, "big") + b


def cs(text):
    """Compact string: unsigned varint (length + 1) + UTF-8 (short strings only)."""
    b = text.encode()
    assert len(b) < 127
    return bytes([len(b) + 1]) + b


ZERO_UUID = uuid.UUID(int=0)
TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def check_request(header, body, expected, decoded_body=None):
    assert encode_request(header, body) == expected
    got_header, got_body = decode_request(expected)
    assert (got_header.api_key, got_header.api_version, got_header.correlation_id,
            got_header.client_id) == (header.api_key, header.api_version,
                                      header.correlation_id, header.client_id)
    assert got_body == (body if decoded_body is None else decoded_body)


def check_response(api_key, version, corr, body, expected, decoded_body=None):
    assert encode_response(api_key, version, corr, body) == expected
    got_corr, got_body = decode_response(expected, api_key, version)
    assert got_corr == corr
    assert got_body == (body if decoded_body is None else decoded_body)


# -- ApiVersions ---------------------------------------------------------------

def test_api_versions_v3_request_from_librdkafka():
    # Header v2: key, version, correlation id, classic client id, empty tags.
    # Body: compact client software name/version, empty tags.
    expected = (h("0012 0003 00000001") + s16("rdkafka") + h("00")
                + cs("librdkafka") + cs("2.3.0") + h("00"))
    check_request(RequestHeader(18, 3, 1, "rdkafka"),
                  {"client_software_name": "librdkafka", "client_software_version": "2.3.0"},
                  expected)
    # The same bytes spelled out in full.
    assert expected == bytes.fromhex(
        "0012" "0003" "00000001" "0007" "72646b61666b61" "00"
        "0b" "6c696272646b61666b61" "06" "322e332e30" "00")


def test_api_versions_v0_request_is_header_only():
    expected = h("0012 0000 00000007") + s16("cli")
    check_request(RequestHeader(18, 0, 7, "cli"), {}, expected)


def test_api_versions_v0_response():
    body = {"error_code": 0, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 4},
        {"api_key": 17, "min_version": 0, "max_version": 1},
    ]}
    expected = h("00000001 | 0000 | 00000002 | 0012 0000 0004 | 0011 0000 0001")
    check_response(18, 0, 1, body, expected)


def test_api_versions_v3_response_uses_header_v0_and_tagged_fields():
    body = {"error_code": 0,
            "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4}],
            "throttle_time_ms": 0, "finalized_features_epoch": 3}
    # Response header v0 (no tags) even though v3 is flexible; body: compact
    # array of one entry with its own empty tag section, throttle, then one
    # tagged field (tag 1, 8 bytes: FinalizedFeaturesEpoch).
    expected = h("00000009 | 0000 | 02 0012 0000 0004 00 | 00000000 | 01 01 08 0000000000000003")
    decoded = dict(body, supported_features=[], finalized_features=[],
                   zk_migration_ready=False)
    check_response(18, 3, 9, body, expected, decoded)


# -- Metadata ----------------------------------------------------------------

def test_metadata_v0_request():
    expected = h("0003 0000 00000002") + s16("c") + h("00000001") + s16("t")
    check_request(RequestHeader(3, 0, 2, "c"), {"topics": [{"name": "t"}]}, expected)
    # v0: an empty array means "all topics".
    check_request(RequestHeader(3, 0, 2, "c"), {"topics": []},
                  h("0003 0000 00000002") + s16("c") + h("00000000"))


def test_metadata_v1_request_null_topics():
    expected = h("0003 0001 00000002") + s16("c") + h("ffffffff")
    check_request(RequestHeader(3, 1, 2, "c"), {"topics": None}, expected)


def test_metadata_v0_response():
    body = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092}],
        "topics": [{"error_code": 0, "name": "t", "partitions": [
            {"error_code": 0, "partition_index": 0, "leader_id": 1,
             "replica_nodes": [1], "isr_nodes": [1]}]}],
    }
    expected = (h("00000005 | 00000001 | 00000001") + s16("h") + h("00002384")
                + h("00000001 | 0000") + s16("t")
                + h("00000001 | 0000 00000000 00000001 | 00000001 00000001 | 00000001 00000001"))
    check_response(3, 0, 5, body, expected)


def test_metadata_v1_response():
    body = {
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "controller_id": 1,
        "topics": [{"error_code": 3, "name": "t", "is_internal": False, "partitions": []}],
    }
    expected = (h("00000005 | 00000001 | 00000001") + s16("h") + h("00002384 ffff")
                + h("00000001")                       # controller id
                + h("00000001 | 0003") + s16("t") + h("00 | 00000000"))
    check_response(3, 1, 5, body, expected)


def test_metadata_v9_request_first_flexible():
    # Header v2; compact array of topics, each with its tag section; three
    # booleans; the message's tag section.
    expected = (h("0003 0009 00000003") + s16("c") + h("00")
                + h("02") + cs("t") + h("00") + h("01 00 00") + h("00"))
    body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    check_request(RequestHeader(3, 9, 3, "c"), body, expected)


def test_metadata_v9_response():
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [],
        "cluster_authorized_operations": -2147483648,
    }
    # Response header v1: correlation id + empty tag section.
    expected = (h("00000003 00 | 00000000 | 02 00000001") + cs("h") + h("00002384 00 00")
                + cs("c") + h("00000001 | 01 | 80000000 | 00"))
    check_response(3, 9, 3, body, expected)


def test_metadata_v12_request():
    expected = (h("0003 000c 00000004") + s16("c") + h("00")
                + h("02") + TOPIC_ID.bytes + cs("t") + h("00")
                + h("01 00") + h("00"))
    body = {"topics": [{"topic_id": TOPIC_ID, "name": "t"}],
            "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    check_request(RequestHeader(3, 12, 4, "c"), body, expected)
    # v12 topic names are nullable (lookup by id): compact null is 0x00.
    body_by_id = {"topics": [{"topic_id": TOPIC_ID, "name": None}],
                  "allow_auto_topic_creation": False,
                  "include_topic_authorized_operations": True}
    expected = (h("0003 000c 00000004") + s16("c") + h("00")
                + h("02") + TOPIC_ID.bytes + h("00 00") + h("00 01") + h("00"))
    check_request(RequestHeader(3, 12, 4, "c"), body_by_id, expected)


def test_metadata_v12_response():
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 2, "host": "h", "port": 9093, "rack": "r"}],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [{"error_code": 0, "name": "t", "topic_id": TOPIC_ID, "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 2,
                                    "leader_epoch": 7, "replica_nodes": [2], "isr_nodes": [2],
                                    "offline_replicas": []}],
                    "topic_authorized_operations": -2147483648}],
    }
    expected = (h("00000004 00 | 00000000")
                + h("02 00000002") + cs("h") + h("00002385") + cs("r") + h("00")
                + h("00 | ffffffff")                      # null cluster id, controller -1
                + h("02 0000") + cs("t") + TOPIC_ID.bytes + h("00")
                + h("02 0000 00000000 00000002 00000007 | 02 00000002 | 02 00000002 | 01 | 00")
                + h("80000000 00")                        # topic auth ops + topic tags
                + h("00"))                                # message tags
    check_response(3, 12, 4, body, expected)


# -- SASL ----------------------------------------------------------------------

def test_sasl_handshake_v1():
    expected = h("0011 0001 00000002") + s16("rdkafka") + s16("PLAIN")
    check_request(RequestHeader(17, 1, 2, "rdkafka"), {"mechanism": "PLAIN"}, expected)
    body = {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}
    expected = h("00000002 | 0000 | 00000002") + s16("PLAIN") + s16("SCRAM-SHA-256")
    check_response(17, 1, 2, body, expected)


def test_sasl_handshake_v1_unsupported_mechanism_response():
    body = {"error_code": 33, "mechanisms": ["SCRAM-SHA-512"]}
    expected = h("0000000a 0021 00000001") + s16("SCRAM-SHA-512")
    check_response(17, 1, 10, body, expected)


def test_sasl_authenticate_v2_compact_bytes():
    token = b"\x00alice\x00alice-secret"
    expected = (h("0024 0002 00000003") + s16("rdkafka") + h("00")
                + bytes([len(token) + 1]) + token + h("00"))
    check_request(RequestHeader(36, 2, 3, "rdkafka"), {"auth_bytes": token}, expected)
    body = {"error_code": 0, "error_message": None, "auth_bytes": b"",
            "session_lifetime_ms": 3600000}
    expected = h("00000003 00 | 0000 | 00 | 01 | 000000000036ee80 | 00")
    check_response(36, 2, 3, body, expected)


def test_sasl_authenticate_v0_and_v1():
    expected = h("0024 0000 00000004") + s16("x") + h("00000002 6869")
    check_request(RequestHeader(36, 0, 4, "x"), {"auth_bytes": b"hi"}, expected)
    body = {"error_code": 58, "error_message": "Authentication failed", "auth_bytes": b""}
    expected = (h("00000004 | 003a") + s16("Authentication failed") + h("00000000"))
    check_response(36, 0, 4, body, expected)
    body1 = dict(body, session_lifetime_ms=0)
    check_response(36, 1, 4, body1, expected + h("0000000000000000"))


# -- delegation tokens, SCRAM admin, FindCoordinator, DescribeCluster -----------

def test_create_delegation_token_v3_request():
    body = {"owner_principal_type": "User", "owner_principal_name": None,
            "renewers": [{"principal_type": "User", "principal_name": "bob"}],
            "max_lifetime_ms": -1}
    expected = (h("0026 0003 00000001") + s16("c") + h("00")
                + cs("User") + h("00") + h("02") + cs("User") + cs("bob") + h("00")
                + h("ffffffffffffffff 00"))
    check_request(RequestHeader(38, 3, 1, "c"), body, expected)


def test_describe_delegation_token_v0_null_owners():
    check_request(RequestHeader(41, 0, 1, "c"), {"owners": None},
                  h("0029 0000 00000001") + s16("c") + h("ffffffff"))


def test_alter_user_scram_credentials_v0():
    body = {"deletions": [], "upsertions": [
        {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"s",
         "salted_password": b"p"}]}
    expected = (h("0033 0000 00000001") + s16("c") + h("00")
                + h("01") + h("02") + cs("alice") + h("01 00001000 02 73 02 70 00") + h("00"))
    check_request(RequestHeader(51, 0, 1, "c"), body, expected)


def test_find_coordinator_v0_and_v4():
    check_request(RequestHeader(10, 0, 1, "c"), {"key": "g"},
                  h("000a 0000 00000001") + s16("c") + s16("g"))
    check_request(RequestHeader(10, 4, 1, "c"), {"key_type": 0, "coordinator_keys": ["g"]},
                  h("000a 0004 00000001") + s16("c") + h("00") + h("00 02") + cs("g") + h("00"))


def test_describe_cluster_v0_request():
    check_request(RequestHeader(60, 0, 1, "c"), {"include_cluster_authorized_operations": True},
                  h("003c 0000 00000001") + s16("c") + h("00") + h("01 00"))


def test_unknown_tagged_fields_survive_round_trip():
    spec = messages.SASL_AUTHENTICATE.request
    raw = h("03 6869 | 01 | 07 02 abcd")  # auth bytes "hi" + unknown tag 7
    body = spec.decode(raw, 2)
    assert body == {"auth_bytes": b"hi", "_unknown_tagged_fields": [(7, b"\xab\xcd")]}
    assert spec.encode(body, 2) == raw


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_header_and_body_sizes(version):
    # SaslAuthenticate v2 is flexible: header v2 adds one byte of tags.
    payload = encode_request(RequestHeader(36, version, 0, ""), {"auth_bytes": b""})
    header_len = 10 + (1 if version >= 2 else 0)
    body_len = 2 if version >= 2 else 4  # compact empty bytes + tags, or int32 0
    assert len(payload) == header_len + body_len
