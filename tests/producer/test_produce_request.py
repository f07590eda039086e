"""The Sender builds Produce request bodies itself (one per batch sent, on
the producer's hot path): every version it may send, byte for byte what the
schema codec writes for the same request, and what the codec reads back."""
import pytest

from kchannel.protocol import messages
from kchannel.producer.sender import encode_produce_request, encode_produce_request_one

PRODUCE = messages.API[messages.PRODUCE.api_key]


def _codec_body(transactional_id, acks, timeout_ms, topics):
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": name, "partition_data": [
                {"index": index, "records": records} for index, records in partitions]}
                for name, partitions in topics.items()]}


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
@pytest.mark.parametrize("transactional_id", [None, "", "tx-é-1"])
def test_produce_body_equals_the_codec(version, transactional_id):
    # Several topics and partitions; a topic name and records lengths that
    # need more than one varint byte in the flexible versions.
    topics = {"t": [(0, b"r" * 5), (3, b"q" * 300)], "tö" * 70: [(1, b"z" * 20000)]}
    for acks in (-1, 0, 1):
        body = encode_produce_request(version, transactional_id, acks, 30000, topics)
        want = _codec_body(transactional_id, acks, 30000, topics)
        assert body == bytes(PRODUCE.request.encode(want, version))
        back = PRODUCE.request.decode(body, version)
        assert [(t["name"], [(p["index"], bytes(p["records"])) for p in t["partition_data"]])
                for t in back["topic_data"]] == list(topics.items())
        assert (back["acks"], back["timeout_ms"]) == (acks, 30000)
        if version >= 3:
            assert back["transactional_id"] == transactional_id


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
@pytest.mark.parametrize("transactional_id", [None, "tx-é-1"])
def test_one_partition_request_equals_the_codec(version, transactional_id):
    # The writer's path for one partition of one topic (a request per batch
    # to a single-partition leader); records lengths on both sides of a
    # one-byte varint.
    for topic, records in (("t", b""), ("t", b"r" * 126), ("tö" * 70, b"r" * 127),
                           ("x", b"z" * 16384)):
        want = bytes(PRODUCE.request.encode(
            _codec_body(transactional_id, -1, 30000, {topic: [(7, records)]}), version))
        assert encode_produce_request_one(version, transactional_id, -1, 30000, topic, 7,
                                          records) == want
        assert encode_produce_request(version, transactional_id, -1, 30000,
                                      {topic: [(7, records)]}) == want


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_request_frame_from_parts_equals_the_joined_body(version):
    # The Sender hands the client a body as parts (its records not copied
    # into a body first): the frame on the wire is the one the joined body
    # makes, and the codec reads the request back from it.
    from kchannel.protocol.headers import decode_request, request_encoder
    from kchannel.producer.sender import produce_request_parts, produce_request_parts_one
    encode = request_encoder(messages.PRODUCE.api_key, version, "producer-1", framed=True)
    plain = request_encoder(messages.PRODUCE.api_key, version, "producer-1")
    several = {"t": [(0, b"r" * 5), (3, b"q" * 300)], "u": [(1, b"z" * 20000)]}
    for parts in (produce_request_parts_one(version, "tx", 1, 30000, "t", 2, b"z" * 16384),
                  produce_request_parts(version, None, -1, 30000, several)):
        assert type(parts) is tuple
        body = b"".join(parts)
        for corr in (0, 7, 0x7FFFFFFF):
            frame = encode(corr, parts)
            assert frame == encode(corr, body)
            assert int.from_bytes(frame[:4], "big") == len(frame) - 4
            assert plain(corr, parts) == plain(corr, body) == frame[4:]
        header, decoded = decode_request(frame[4:])
        assert (header.correlation_id, header.api_version) == (0x7FFFFFFF, version)
        assert decoded == PRODUCE.request.decode(body, version)
