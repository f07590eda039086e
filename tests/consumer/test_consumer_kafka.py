"""kchannel.Consumer against Apache Kafka: SASL_SSL SCRAM, list offsets
(beginning/end/for times), read_committed skipping an aborted transaction
written by confluent-kafka's transactional producer, commits, and the
position past a batch that compaction shortened."""
import time

import pytest

from kchannel import Consumer
from kchannel.client.metadata import TopicPartition
from tests.fixtures.records import (consume_kchannel, create_topic, expected_rows,
                                    produce, produce_confluent, sample, topic_name)

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_consume_over_sasl_ssl_scram(kafka_broker, mechanism):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("scram"))
    records = sample(25)
    mds = produce_confluent(plain, topic, records, "zstd")
    configs = kafka_broker.client_configs("SASL_SSL", mechanism=mechanism)
    bootstrap = configs.pop("bootstrap.servers")
    assert consume_kchannel(bootstrap, topic, 3, len(records), **configs) == \
        expected_rows(records, mds)


def test_position_past_a_batch_compaction_shortened(kafka_broker):
    # Kafka's log cleaner removes k2@1 (k2@2 supersedes it) from the batch
    # k1@0 k2@1 and keeps the batch's last offset 1 (message format v2).
    # With one batch a fetch (the smallest fetch sizes), the consumer must
    # move to that batch's next offset 2 after reading k1@0, as Kafka's
    # consumer does; at 1 it would fetch the same batch again, and nothing
    # in it, for good.
    plain = kafka_broker.bootstrap("PLAINTEXT")
    # (Segments roll on the records' timestamps, 10 s apart, not on waiting.)
    topic = create_topic(plain, topic_name("compacted"), partitions=1, configs={
        "cleanup.policy": "compact", "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"})
    t = 1_700_000_000_000
    # (One batch: flush() sends it as soon as both are in; the linger only
    # keeps the first from leaving alone.)
    produce(plain, topic, [(b"k1", b"a", [], t), (b"k2", b"b", [], t)], **{"linger.ms": 5000})
    produce(plain, topic, [(b"k2", b"c", [], t + 10_000)])
    produce(plain, topic, [(b"k3", b"d", [], t + 20_000)])   # (rolls: k2@2 cleanable)
    tp = TopicPartition(topic, 0)
    deadline = time.monotonic() + 60
    with Consumer({"bootstrap.servers": plain, "max.partition.fetch.bytes": 1,
                   "fetch.max.bytes": 1, "fetch.max.wait.ms": 10}) as c:
        c.assign([tp])
        while True:
            c.seek(tp, 0)
            seen = []
            until = time.monotonic() + 10
            while (not seen or seen[-1][0] != 3) and time.monotonic() < until:
                for r in c.poll(0.1):
                    seen.append((r.offset, r.key, c.position(tp)))
            if [s[0] for s in seen] != [0, 1, 2, 3]:
                break       # compacted (or stuck)
            assert time.monotonic() < deadline, "the log cleaner did not compact the topic"
            time.sleep(0.2)
    # Each poll took one batch: k1@0, then past the shortened batch.
    assert seen == [(0, b"k1", 2), (2, b"k2", 3), (3, b"k3", 4)]


def test_list_offsets(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("offsets"), partitions=1)
    base = 1_700_000_000_000
    produce(plain, topic, [(None, b"%d" % i, [], base + i * 10) for i in range(10)],
            **{"batch.size": 100})
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": plain}) as c:
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        found = c.offsets_for_times({tp: base + 35})[tp]
        assert (found.offset, found.timestamp) == (4, base + 40)
        assert c.offsets_for_times({tp: base + 10 ** 6}) == {tp: None}


def test_read_committed_skips_aborted_transactions(kafka_broker):
    from confluent_kafka import Producer as ConfluentProducer
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("txn"), partitions=1)
    p = ConfluentProducer({"bootstrap.servers": plain, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for label, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=b"%s%d" % (label.encode(), i))
        p.flush(30)   # written to the log before the abort, not purged from the queue
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    p.flush(30)
    committed = [r[3] for r in consume_kchannel(plain, topic, 1, 6,
                                                **{"isolation.level": "read_committed"})]
    assert committed == [b"a0", b"a1", b"a2", b"c0", b"c1", b"c2"]
    # read_uncommitted sees the aborted records too, never the markers
    everything = [r[3] for r in consume_kchannel(plain, topic, 1, 9)]
    assert everything == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2", b"c0", b"c1", b"c2"]


def test_commit_and_committed_on_kafka(kafka_broker):
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import TopicPartition as CTP
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("commit"), partitions=2)
    produce(plain, topic, [(b"k%d" % i, b"v", [], None) for i in range(20)])
    group = f"g-{topic}"
    with Consumer({"bootstrap.servers": plain, "group.id": group,
                   "auto.offset.reset": "earliest", "enable.auto.commit": False}) as c:
        c.assign([(topic, 0), (topic, 1)])
        n = 0
        deadline = time.time() + 30
        while n < 20 and time.time() < deadline:
            n += len(c.poll(0.5))
        positions = {p: c.position((topic, p)) for p in (0, 1)}
        c.commit()
    cc = ConfluentConsumer({"bootstrap.servers": plain, "group.id": group})
    try:
        got = cc.committed([CTP(topic, 0), CTP(topic, 1)], timeout=30)
    finally:
        cc.close()
    assert {t.partition: t.offset for t in got} == positions
    assert sum(positions.values()) == 20
    # a new kchannel consumer of the group starts from the committed offsets
    with Consumer({"bootstrap.servers": plain, "group.id": group}) as c2:
        c2.assign([(topic, 0), (topic, 1)])
        assert {p: c2.position((topic, p)) for p in (0, 1)} == positions


def test_one_poll_over_many_small_batches(kafka_broker):
    # batch.size 100: a batch a record or two, as Kafka's default 16 KiB
    # batches hold 1 KiB records; one poll gathers dozens of them.  Its
    # records reach the application tracked by the garbage collector
    # (the compiled reader builds them untracked until the poll is done),
    # also where a deserializer remade them; a seek into the middle of a
    # batch drops the records before it.
    import gc
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("small-batches"), partitions=1)
    base = 1_700_000_000_000
    records = [(None, b"v%d" % i, [("h", b"%d" % i)] if i % 2 else [], base + i)
               for i in range(60)]
    produce(plain, topic, records, **{"batch.size": 100})
    tp = TopicPartition(topic, 0)
    for deserializer in ("ByteArrayDeserializer", "StringDeserializer"):
        cfg = {"bootstrap.servers": plain,
               "value.deserializer": "org.apache.kafka.common.serialization." + deserializer}
        with Consumer(cfg) as c:
            c.assign([tp])
            c.seek(tp, 7)
            got = []
            deadline = time.time() + 30
            while len(got) < 53 and time.time() < deadline:
                got += c.poll(1.0)
            assert c.position(tp) == 60
        want = [(i, b"v%d" % i, [("h", b"%d" % i)] if i % 2 else [], base + i)
                for i in range(7, 60)]
        if deserializer == "StringDeserializer":
            want = [(o, v.decode(), h, ts) for o, v, h, ts in want]
        assert [(r.offset, r.value, r.headers, r.timestamp) for r in got] == want
        assert all(gc.is_tracked(r) and gc.is_tracked(r.headers) for r in got)
