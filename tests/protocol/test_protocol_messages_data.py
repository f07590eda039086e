"""Produce, Fetch and the group/offset/topic APIs: byte vectors assembled by
hand from Kafka's schemas, and requests framed by kafka-python decoded here
with the records inside them."""
import uuid

import pytest

from kchannel.protocol import decode_request, messages
from kchannel.protocol import records as R

PRODUCE = messages.PRODUCE.request
FETCH = messages.FETCH


def test_supported_ranges():
    # magic v2 only: Produce from v3, Fetch from v4 (as the issue asks)
    assert (messages.PRODUCE.min_version, messages.PRODUCE.max_version) == (3, 12)
    assert (messages.FETCH.min_version, messages.FETCH.max_version) == (4, 17)
    for api in (messages.LIST_OFFSETS, messages.INIT_PRODUCER_ID, messages.JOIN_GROUP,
                messages.SYNC_GROUP, messages.HEARTBEAT, messages.LEAVE_GROUP,
                messages.OFFSET_COMMIT, messages.OFFSET_FETCH, messages.CREATE_TOPICS,
                messages.DELETE_TOPICS, messages.FIND_COORDINATOR):
        assert api.min_version == 0


PRODUCE_BODY = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                "topic_data": [{"name": "t", "partition_data": [
                    {"index": 0, "records": b"abc"}]}]}


def test_produce_v3_bytes():
    assert PRODUCE.encode(PRODUCE_BODY, 3) == bytes.fromhex(
        "ffff" "ffff" "00007530" "00000001" "000174" "00000001" "00000000" "00000003616263")
    assert PRODUCE.decode(PRODUCE.encode(PRODUCE_BODY, 3), 3) == PRODUCE_BODY


def test_produce_v9_flexible_bytes():
    assert PRODUCE.encode(PRODUCE_BODY, 9) == bytes.fromhex(
        "00" "ffff" "00007530" "02" "0274" "02" "00000000" "04616263" "00" "00" "00")


def test_produce_response_v8_record_errors():
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 87, "base_offset": -1, "log_append_time_ms": -1,
         "log_start_offset": 0, "record_errors": [
             {"batch_index": 2, "batch_index_error_message": "bad"}],
         "error_message": "INVALID_RECORD"}]}], "throttle_time_ms": 0}
    raw = messages.PRODUCE.response.encode(body, 8)
    assert raw == bytes.fromhex(
        "00000001" "000174" "00000001" "00000001" "0057" "ffffffffffffffff"
        "ffffffffffffffff" "0000000000000000" "00000001" "00000002" "0003626164"
        "000e" + b"INVALID_RECORD".hex() + "00000000")
    assert messages.PRODUCE.response.decode(raw, 8) == body


def test_fetch_v13_uses_topic_ids():
    tid = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": tid, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 5,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1048576}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    raw = FETCH.request.encode(body, 13)
    # replica id, max wait, min bytes, max bytes, isolation, session id/epoch,
    # topics (compact 1): the 16 uuid bytes, no name
    assert raw.startswith(bytes.fromhex(
        "ffffffff" "000001f4" "00000001" "03200000" "00" "00000000" "ffffffff" "02")
        + tid.bytes + bytes.fromhex("02" "00000000" "ffffffff" "0000000000000005"))
    decoded = FETCH.request.decode(raw, 13)
    assert decoded["topics"][0]["topic_id"] == tid
    assert "topic" not in decoded["topics"][0]
    # v12 names the topic instead
    assert "topic" in FETCH.request.decode(FETCH.request.encode(
        {**body, "topics": [{"topic": "t", "partitions": body["topics"][0]["partitions"]}]},
        12), 12)["topics"][0]


def test_fetch_response_records_are_bytes():
    batch = R.encode_batch([(1, b"k", b"v", [("h", b"1")])], base_offset=3)
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": 0, "error_code": 0, "high_watermark": 4,
             "last_stable_offset": 4, "log_start_offset": 0,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": batch}]}]}
    for version in (4, 11, 12):
        raw = FETCH.response.encode(body, version)
        part = FETCH.response.decode(raw, version)["responses"][0]["partitions"][0]
        assert R.read_records(part["records"]) == [(3, 1, b"k", b"v", [("h", b"1")])]


def test_kafka_python_produce_request_decodes_with_its_records():
    kp = pytest.importorskip("kafka.protocol.producer")
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False,
                                        producer_id=77, producer_epoch=1, base_sequence=9,
                                        batch_size=10 ** 6)
    for i in range(3):
        builder.append(i, 1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"x")])
    batch = bytes(builder.build())
    Req = kp.ProduceRequest[9]
    req = Req(transactional_id=None, acks=1, timeout_ms=1500, topic_data=[
        Req.TopicProduceData(name="topic", partition_data=[
            Req.TopicProduceData.PartitionProduceData(index=2, records=batch)])])
    req.with_header(correlation_id=11, client_id="kp")
    header, body = decode_request(req.encode(header=True))
    assert (header.api_key, header.api_version) == (0, 9)
    part = body["topic_data"][0]["partition_data"][0]
    assert part["index"] == 2
    (b,) = R.iter_batches(part["records"])
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (77, 1, 9)
    assert R.read_records(part["records"]) == [
        (i, 1000 + i, b"k%d" % i, b"v%d" % i, [("h", b"x")]) for i in range(3)]


def test_group_messages_bytes():
    hb = messages.HEARTBEAT.request
    assert hb.encode({"group_id": "g", "generation_id": 3, "member_id": "m",
                      "group_instance_id": None}, 3) == bytes.fromhex(
        "000167" "00000003" "00016d" "ffff")
    commit = messages.OFFSET_COMMIT.request
    body = {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m",
            "group_instance_id": None, "retention_time_ms": -1, "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": 0, "committed_offset": 42,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    raw = commit.encode(body, 8)
    assert raw == bytes.fromhex(
        "0267" "00000001" "026d" "00" "02" "0274" "02" "00000000" "000000000000002a"
        "ffffffff" "01" "00" "00" "00")
    assert commit.decode(raw, 8) == {k: v for k, v in body.items() if k != "retention_time_ms"}
