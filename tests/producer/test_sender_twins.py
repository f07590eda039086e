"""The Sender's per-request path (the ``senderloop`` twin: ready scan,
drain, Produce request, response handling, batch completion) is the same
in both twins: against Apache Kafka, a Sender built on the pure twin and
one built on the compiled twin send byte-identical Produce requests for the
same records, complete the same futures with the same offsets, and record
the same producer metrics.  (``impl_pair``: deselected when the compiled
twins are not under test; the whole producer suite runs with each twin.)"""
import uuid

import pytest

from kchannel import Producer
from kchannel.protocol import messages
from kchannel.protocol.records.batch import read_records
from kchannel.producer import producer as producer_module
from kchannel.producer.accumulator import RecordAccumulator
from kchannel.producer.sender import Sender
from tests.fixtures.records import create_topic, topic_name

PRODUCE = messages.API[messages.PRODUCE.api_key]
METRICS = ("record-send-total", "batch-size-max", "record-error-total", "record-retry-total")


def _sender_on(twin):
    """``Sender`` with the per-request base class of ``twin``'s module."""
    body = {k: v for k, v in vars(Sender).items() if k not in ("__dict__", "__weakref__")}
    return type("Sender", (twin.SenderLoop,), body)


def _produce_on_twin(monkeypatch, twin, bootstrap, topic, configs, rounds):
    """Produce ``rounds`` (lists of send() arguments, flushed after each)
    with the Sender on ``twin``; returns (Produce request bodies as the
    broker decodes them, record metadata, metrics)."""
    monkeypatch.setattr(producer_module, "Sender", _sender_on(twin.senderloop))
    monkeypatch.setattr(RecordAccumulator, "ready", twin.senderloop.accumulator_ready)
    monkeypatch.setattr(RecordAccumulator, "drain", twin.senderloop.accumulator_drain)
    p = Producer({"bootstrap.servers": bootstrap, "client.id": f"twin-{twin.kind}",
                  "linger.ms": 60000, **configs})
    requests = []
    try:
        # A first record per partition, not compared: a topic just created
        # may answer NOT_LEADER_OR_FOLLOWER once (then a retry), which would
        # make the requests differ.
        warm = [p.send(topic, b"w", partition=i, timestamp_ms=1) for i in range(3)]
        p.flush(30)
        for f in warm:
            f.get(10)
        before = _metrics(p)
        # (the Sender sends its Produce requests through the network
        # client's send, positionally)
        client = p._sender.client.client
        send = client.send

        def recording_send(node, api_key, body, version=None, *args, **kw):
            if api_key == messages.PRODUCE.api_key:
                requests.append((version, b"".join(body)))
            return send(node, api_key, body, version, *args, **kw)
        client.send = recording_send
        mds = []
        for records in rounds:
            futures = [p.send(topic, **r) for r in records]
            p.flush(30)
            mds.append([(m.partition, m.offset, m.timestamp) for m in
                        (f.get(10) for f in futures)])
        # (what the compared rounds recorded: the first records may have
        # been retried)
        metrics = {name: value - before[name] if name.endswith("-total") else value
                   for name, value in _metrics(p).items()}
    finally:
        p.close(10)
    return requests, mds, metrics


def _metrics(p):
    return {mn.name: value for mn, value in p.metrics().items()
            if mn.group == "producer-metrics" and mn.name in METRICS}


def _decoded(requests, records_as_sent):
    """The requests as Kafka reads them (each checked to be what the schema
    codec writes), partitions in index order: a request's partition order
    rotates with the drain count, which follows the timing of the network
    thread's passes.  ``records_as_sent``: each batch's bytes as they are,
    else its records decoded (the producer ids and CRCs of two producers
    differ)."""
    out = []
    for version, raw in requests:
        body = PRODUCE.request.decode(raw, version)
        assert bytes(PRODUCE.request.encode(body, version)) == raw
        out.append((version, body["transactional_id"], body["acks"], body["timeout_ms"], [
            (t["name"], sorted((p["index"], bytes(p["records"]) if records_as_sent
                                else read_records(bytes(p["records"])))
                               for p in t["partition_data"]))
            for t in body["topic_data"]]))
    return out


def _rounds(n):
    # Three partitions of one leader, every record shape; all queued before
    # the flush (linger.ms 60 s), so each flush drains them in one request.
    ts = 1_700_000_000_000
    return [[{"value": b"v%05d" % (r * 1000 + i) * (1 + i % 7), "partition": i % 3,
              "key": None if i % 4 == 0 else b"k%d" % i,
              "headers": [("h", b"%d" % i)] if i % 5 == 0 else None,
              "timestamp_ms": ts + r * 1000 + i}
             for i in range(n)] for r in range(3)]


@pytest.mark.parametrize("configs", [
    {"acks": "1", "enable.idempotence": "false"},
    {"acks": "all", "enable.idempotence": "true", "compression.type": "lz4"},
], ids=["acks1", "idempotent-lz4"])
def test_both_twins_send_the_same_requests(kafka_broker, monkeypatch, impl_pair, configs):
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    pure, compiled = impl_pair
    results, topics = [], []
    first = topic_name("twins")
    for twin in (pure, compiled):
        # (names of the same length: the requests differ by the name only;
        # two topic_name() calls may straddle 9 -> 10 in its counter)
        name = first if not topics else first[:-8] + uuid.uuid4().hex[:8]
        topics.append(create_topic(bootstrap, name, partitions=3))
        results.append(_produce_on_twin(monkeypatch, twin, bootstrap, topics[-1], configs,
                                        _rounds(60)))
    (req_p, mds_p, met_p), (req_c, mds_c, met_c) = results
    req_c = [(v, raw.replace(topics[1].encode(), topics[0].encode())) for v, raw in req_c]
    # One request per flush, three partitions in each.
    assert len(req_p) == 3
    assert all(len(request[4][0][1]) == 3 for request in _decoded(req_p, True))
    # Without idempotence byte for byte; with it the producer ids differ
    # (and the CRCs with them): the same records, sequences, fields.
    as_sent = configs["enable.idempotence"] == "false"
    assert _decoded(req_p, as_sent) == _decoded(req_c, as_sent)
    assert mds_p == mds_c
    # Offsets per partition are consecutive from 1 (after the first
    # record) across the rounds.
    for md in (mds_p,):
        by_partition = {}
        for partition, offset, _ in (m for r in md for m in r):
            by_partition.setdefault(partition, []).append(offset)
        assert all(offsets == list(range(1, len(offsets) + 1)) for offsets in by_partition.values())
    assert met_p == met_c
    assert met_p["record-send-total"] == 180
    assert met_p["record-error-total"] == met_p["record-retry-total"] == 0


def test_a_sender_on_either_twin_reads_the_usual_response_of_its_own_decoder(
        kafka_broker, monkeypatch, impl_pair):
    # A request for one partition is answered in the usual shape, which the
    # Sender's decoder returns as its twin's ProduceResult: a Sender on the
    # pure twin beside the compiled one must register the pure decoder (it
    # registered the module's, the compiled twin's, whose ProduceResult the
    # pure _handle_produce_response read as a dict: the flush timed out).
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    for twin in impl_pair:
        topic = create_topic(bootstrap, topic_name("twin-decoder"), partitions=3)
        _, mds, metrics = _produce_on_twin(
            monkeypatch, twin, bootstrap, topic, {"acks": "1"},
            [[{"value": b"one partition %d" % i, "partition": 0} for i in range(5)]])
        assert [m[:2] for m in mds[0]] == [(0, i) for i in range(1, 6)]
        assert metrics["record-error-total"] == 0
