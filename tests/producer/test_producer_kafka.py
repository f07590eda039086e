"""kchannel.Producer against Apache Kafka itself (the session's
``kafka_broker``): over SASL_SSL with SCRAM, the idempotent producer with its
connections cut mid-flight (no duplicate, no gap), and the broker's own
record-size limit failing the future with the broker's error."""
import socket
import threading
import time

import pytest

from kchannel import Consumer, Producer
from kchannel.client import KafkaClient
from kchannel.errors import KafkaError
from kchannel.client.metadata import TopicPartition
from kchannel.tokens.admin import DelegationTokenAdmin
from tests.fixtures.kafka_tokens import created, expired, token_configs
from tests.fixtures.records import (CODECS, consume_confluent, create_topic, expected_rows,
                                    produce, sample, topic_name)

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_produce_over_sasl_ssl_scram(kafka_broker, mechanism):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("scram"))
    configs = kafka_broker.client_configs("SASL_SSL", mechanism=mechanism)
    records = sample(20)
    mds = produce(configs.pop("bootstrap.servers"), topic, records,
                  **{"compression.type": "lz4"}, **configs)
    assert consume_confluent(plain, topic, 3, len(records)) == expected_rows(records, mds)


def test_produce_and_consume_with_a_delegation_token(kafka_broker):
    """A token Kafka issued (SCRAM tokenauth=true) produces and consumes as
    its owner, as a PySpark executor would."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("token"), partitions=1)
    with KafkaClient(kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")) as admin_client:
        admin_client.connect()
        admin = DelegationTokenAdmin(admin_client)
        token = created(admin, max_lifetime_ms=3600_000)
        try:
            configs = token_configs(kafka_broker, token, "SASL_SSL", "SCRAM-SHA-256")
            bootstrap = configs.pop("bootstrap.servers")
            records = sample(10)
            mds = produce(bootstrap, topic, records, **configs)
            assert [md.offset for md in mds] == list(range(10))
            with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                           **configs}) as c:
                c.assign([TopicPartition(topic, 0)])
                got = []
                deadline = time.time() + 30
                while len(got) < 10 and time.time() < deadline:
                    got.extend(c.poll(0.5))
            assert [(r.key, r.value) for r in got] == [(k, v) for k, v, _, _ in records]
        finally:
            expired(admin, token)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_on_apache_kafka(kafka_broker, codec):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name(codec))
    records = sample(30)
    mds = produce(plain, topic, records, **{"compression.type": codec})
    assert consume_confluent(plain, topic, 3, len(records)) == expected_rows(records, mds)


def _cut_connections(producer):
    """Shut down the producer's sockets under it, as a network failure
    would; the selector sees the connection end."""
    selector = producer._client.client.selector
    cut = 0
    for channel in list(selector._channels.values()):
        try:
            channel.transport.socket.shutdown(socket.SHUT_RDWR)
            cut += 1
        except OSError:
            pass
    return cut


def test_idempotent_producer_survives_cut_connections(kafka_broker, caplog):
    caplog.set_level("WARNING", logger="kchannel.producer.sender")
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("idem"), partitions=1)
    n = 3000
    p = Producer({"bootstrap.servers": plain, "linger.ms": 0, "batch.size": 200,
                  "enable.idempotence": True, "retry.backoff.ms": 20,
                  "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 50})
    cuts = []
    stop = threading.Event()

    def cutter():
        while not stop.is_set() and len(cuts) < 8:
            time.sleep(0.05)
            if p._sender.in_flight and any(p._sender.in_flight.values()):
                cuts.append(_cut_connections(p))

    t = threading.Thread(target=cutter)
    t.start()
    futures = []
    try:
        # At least n records, and on until connections were cut at least 3
        # times: a fast Sender can otherwise finish n records between two
        # of the cutter's looks.
        deadline = time.monotonic() + 60
        while len(futures) < n or (sum(cuts) < 3 and time.monotonic() < deadline):
            futures.extend(p.send(topic, value=b"%d" % i)
                           for i in range(len(futures), len(futures) + 500))
            p.flush(120)
    finally:
        stop.set()
        t.join()
        p.close()
    assert sum(cuts) >= 3, cuts
    n = len(futures)
    # batches in flight at a cut were really retried
    assert any("retrying" in r.getMessage() for r in caplog.records)
    offsets = [f.get(0).offset for f in futures]
    assert offsets == list(range(n))
    rows = consume_confluent(plain, topic, 1, n)
    assert [r[3] for r in rows] == [b"%d" % i for i in range(n)]
    assert [r[1] for r in rows] == list(range(n))


def test_broker_record_size_limit_fails_with_the_brokers_error(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("toolarge"), partitions=1)
    with Producer({"bootstrap.servers": plain, "max.request.size": 4 * 1024 * 1024}) as p:
        # Kafka's default message.max.bytes is 1048588
        fut = p.send(topic, value=b"x" * (2 * 1024 * 1024))
        with pytest.raises(KafkaError) as info:
            fut.get(60)
        small = p.send(topic, value=b"ok")
        p.flush(60)
    assert info.value.error_code == 10
    assert info.value.name == "MESSAGE_TOO_LARGE"
    assert small.get().offset == 0
