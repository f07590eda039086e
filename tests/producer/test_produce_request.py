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
    as_parts = request_encoder(messages.PRODUCE.api_key, version, "producer-1", framed=True,
                               parts=True)
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
            # as the network client encodes it: the frame as parts, the
            # record batches among them as they are (not copied)
            pieces = as_parts(corr, parts)
            assert type(pieces) is tuple and b"".join(pieces) == frame
            assert any(p is batch for p in pieces for batch in parts if len(batch) >= 16384)
        header, decoded = decode_request(frame[4:])
        assert (header.correlation_id, header.api_version) == (0x7FFFFFFF, version)
        assert decoded == PRODUCE.request.decode(body, version)


def _responses():
    """ProduceResponse bodies: the producer's usual one (one topic, one
    partition, no errors), and shapes the Sender's decoder must hand to the
    codec's (several partitions or topics, record errors, an error message,
    a current leader, node endpoints, a long or non-ASCII topic name)."""
    def part(index=0, code=0, base=12345, append=-1, start=0, record_errors=(),
             message=None, leader=None):
        p = {"index": index, "error_code": code, "base_offset": base,
             "log_append_time_ms": append, "log_start_offset": start,
             "record_errors": [{"batch_index": i, "batch_index_error_message": m}
                               for i, m in record_errors],
             "error_message": message}
        if leader is not None:
            p["current_leader"] = {"leader_id": leader[0], "leader_epoch": leader[1]}
        return p

    def body(topics, throttle=0, endpoints=()):
        return {"responses": [{"name": n, "partition_responses": ps} for n, ps in topics],
                "throttle_time_ms": throttle,
                "node_endpoints": [{"node_id": 1, "host": h, "port": 9092, "rack": None}
                                   for h in endpoints]}
    yield body([("t", [part()])])
    yield body([("bench-topic-x" * 3, [part(index=7, base=2 ** 40, append=1_700_000_000_000,
                                            start=99)])], throttle=250)
    yield body([("tö", [part(code=6, base=-1, start=-1)])])
    yield body([("x" * 200, [part()])])                 # a two-byte compact length
    yield body([("t", [part(), part(index=1)])])
    yield body([("t", [part()]), ("u", [part()])])
    yield body([("t", [part(code=87, record_errors=[(3, "bad"), (4, None)])])])
    yield body([("t", [part(code=87, message="invalid record")])])
    yield body([("t", [part(code=6, leader=(2, 5))])], endpoints=["broker-2"])
    yield body([])


def _same_information(result, want, version):
    """A ProduceResult carries exactly what the codec's dict ``want`` has:
    one topic, one partition, each field equal, the rest empty."""
    assert list(want) == (["responses", "throttle_time_ms", "node_endpoints"] if version >= 10
                          else ["responses", "throttle_time_ms"])
    assert result.version == version
    assert result.throttle_time_ms == want["throttle_time_ms"]
    assert want.get("node_endpoints", []) == []
    [topic] = want["responses"]
    assert list(topic) == ["name", "partition_responses"]
    assert result.name == topic["name"]
    [p] = topic["partition_responses"]
    fields = ["index", "error_code", "base_offset", "log_append_time_ms"]
    if version >= 5:
        fields.append("log_start_offset")
    for field in fields:
        assert getattr(result, field) == p[field], field
    # the codec's other partition fields: empty in a ProduceResult
    rest = {k: v for k, v in p.items() if k not in fields}
    assert rest == ({"record_errors": [], "error_message": None, "current_leader": None}
                    if version >= 10 else {"record_errors": [], "error_message": None}
                    if version >= 8 else {})
    assert result.as_body() == want


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_produce_response_decoder_equals_the_codec(impl, version):
    # The Sender reads its responses with its own decoder: the usual shape
    # directly, as a ProduceResult with exactly the codec's information
    # (error codes and throttle times included), any other through the
    # codec's, whose dict it returns; the same twice (the topic name it
    # keeps), from bytes and from the read-only memoryview a receive is.
    from kchannel.protocol.headers import response_decoder, response_encoder
    generic = response_decoder(messages.PRODUCE.api_key, version)
    decode = impl.senderloop.produce_response_decoder(version, generic)
    assert isinstance(decode, impl.senderloop.ProduceResponseDecoder)
    ProduceResult = impl.senderloop.ProduceResult
    encode = response_encoder(messages.PRODUCE.api_key, version)
    fast = []
    for body in _responses():
        frame = encode(7, body)
        want = generic(frame)
        for payload in (frame, memoryview(frame).toreadonly(), frame):
            got = decode(payload)
            if type(got) is ProduceResult:
                _same_information(got, want, version)
            else:
                assert type(got) is dict and got == want
        if type(decode(frame)) is ProduceResult:
            fast.append(body)
        # a frame cut short or with a byte more is the codec's to refuse
        for bad in (frame[:-1], frame + b"\x00"):
            try:
                expected = generic(bad)
            except Exception as exc:
                with pytest.raises(type(exc)):
                    decode(bad)
            else:
                got = decode(bad)
                if type(got) is ProduceResult:
                    _same_information(got, expected, version)
                else:
                    assert got == expected
    # The usual shapes took the direct path: no errors, a throttle time and
    # large offsets, an error code (and before v9, a two-byte topic name
    # length; before v8, error codes whose message the version lacks).
    assert len(fast) >= (3 if version >= 9 else 4)
    assert {b["throttle_time_ms"] for b in fast} >= {0, 250}
    codes = {p["error_code"] for b in fast for t in b["responses"] for p in t["partition_responses"]}
    assert codes >= {0, 6}
