"""Batches fill as Kafka's producer fills them (``MemoryRecordsBuilder.hasRoomFor``),
both appender twins, fast path and full path, against Apache Kafka (the session's
``kafka_broker``).

The rule is computed here from Kafka's ``DefaultRecord.sizeInBytes`` formula on
its own (not from the code under test): a record joins the open batch if the
batch's bytes so far (61 of header plus its records) plus the record's exact size
(zigzag varints of its offset delta, the records so far, and of its timestamp
delta from the batch's first record; key, value and header lengths; its own
length) is within batch.size, and the batch is not already full; the first
record of a batch always fits.  The producer's batch boundaries, for a mix of
100 B and 1 KiB values, keys, headers, a record larger than batch.size, batches of
hundreds of tiny records and timestamps spread over seconds (some going back), must be exactly these, and
every batch's encoded size must be its tracked size and within batch.size (a
single record larger than batch.size apart).
"""
import random

import pytest

from kchannel import Producer
from kchannel.protocol.records import encode_batch
from tests.fixtures.records import create_topic, topic_name

pytestmark = [pytest.mark.interop, pytest.mark.kafka]

TS = 1_700_000_000_000
BATCH_SIZE = 4096


def _varint_len(v):
    """ByteUtils.sizeOfVarint/sizeOfVarlong: zigzag, then 7 bits a byte."""
    v = (v << 1) ^ (v >> 63)
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def _java_record_size(offset_delta, ts_delta, key, value, headers):
    """DefaultRecord.sizeInBytes(offsetDelta, timestampDelta, key, value, headers)."""
    body = 1 + _varint_len(offset_delta) + _varint_len(ts_delta)
    body += 1 if key is None else _varint_len(len(key)) + len(key)
    body += 1 if value is None else _varint_len(len(value)) + len(value)
    body += _varint_len(len(headers))
    for k, v in headers:
        kb = k.encode("utf-8")
        body += _varint_len(len(kb)) + len(kb)
        body += 1 if v is None else _varint_len(len(v)) + len(v)
    return body + _varint_len(body)


def _java_batch_counts(sends, batch_size):
    """Records per batch by Kafka's ProducerBatch.tryAppend/hasRoomFor/isFull."""
    counts = []
    written = n = 0
    base_ts = None
    for kw in sends:
        headers = kw.get("headers") or ()
        if n:
            size = _java_record_size(n, kw["timestamp_ms"] - base_ts, kw.get("key"),
                                     kw["value"], headers)
            if written >= batch_size or written + size > batch_size:
                counts.append(n)
                n = 0
        if not n:
            base_ts = kw["timestamp_ms"]
            written = 61
            size = _java_record_size(0, 0, kw.get("key"), kw["value"], headers)
        written += size
        n += 1
    counts.append(n)
    return counts


def _sends():
    rng = random.Random(5)
    ts = TS
    out = []
    for i in range(460):
        # Mostly forward by up to 3 s, sometimes back a little.
        ts += rng.choice((0, 1, 40, 700, 3000, -90))
        kw = dict(value=bytes(rng.choice((100, 100, 1024, 1, 63, 64, 300))),
                  partition=0, timestamp_ms=ts)
        if i % 3 == 0:
            kw["key"] = b"key-%d" % i
        if i % 5 == 0:
            kw["headers"] = [("h", b"v" * (i % 70)), ("n\u00e9", None)]
        if i >= 260:
            # Tiny records: batches of more than 64 and 128 records (offset
            # deltas of 2 bytes) spanning many seconds (3-byte deltas).
            kw["value"] = bytes(i % 3)
        if i == 100:
            kw["value"] = bytes(BATCH_SIZE + 500)   # alone in its batch, as Kafka's
        out.append(kw)
    return out


@pytest.mark.parametrize("path", ["fast", "full"])
def test_batches_hold_what_kafkas_rule_gives(kafka_broker, impl, path):
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name(f"fill-{path}-{impl.kind}"), partitions=1)
    configs = {"bootstrap.servers": bootstrap, "acks": "all", "batch.size": BATCH_SIZE,
               # Only full batches leave before the flush: boundaries are then
               # the rule's alone.
               "linger.ms": 60000}
    if path == "full":
        # Identity serializers: every record takes the full path (doSend).
        configs.update(key_serializer=lambda k: k, value_serializer=lambda v: v)
    p = Producer(configs)
    slow = p.append_path.send_slow
    slow_calls = []

    def counted(*args):
        slow_calls.append(args)
        return slow(*args)
    p.append_path.send_slow = counted
    p._appender = impl.appender.Appender(p.append_path)
    with p:
        p.partitions_for(topic)
        sends = _sends()
        futures = [p._appender.send(topic, **kw) for kw in sends]
        p.flush(30)
        offsets = [f.get(30).offset for f in futures]
    # The fast path takes every record here (the one larger than batch.size
    # too: it is within max.request.size); serializers send all to doSend.
    assert len(slow_calls) == (len(sends) if path == "full" else 0)
    assert offsets == list(range(offsets[0], offsets[0] + len(sends)))
    batches = []
    for f in futures:
        if not batches or f._batch is not batches[-1]:
            batches.append(f._batch)
    assert [b.record_count for b in batches] == _java_batch_counts(sends, BATCH_SIZE)
    for b in batches:
        encoded = encode_batch(b.records)
        assert len(encoded) == b.estimated_size
        assert len(encoded) <= BATCH_SIZE or b.record_count == 1
