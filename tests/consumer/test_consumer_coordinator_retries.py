"""Retriable coordinator errors on a fresh Apache Kafka (issue 22).

A group's first use on a new broker creates ``__consumer_offsets``; with
Kafka's default 50 partitions its group coordinators are still loading
when FindCoordinator already names one, and OffsetFetch answers
NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS for a moment.  The consumer
retries them as Kafka's ConsumerCoordinator does (rediscovery, retry
back-off, within the call's timeout): ``committed``, ``poll`` and
``commit`` succeed.  The session broker cannot show it (its
``__consumer_offsets`` exists, with one partition), so this module starts a
broker of its own.
"""
import time

import pytest

from kchannel import Consumer
from kchannel.client.metadata import TopicPartition
from kchannel.protocol import messages
from tests.fixtures.kafka import require_kafka, start_kafka_broker
from tests.fixtures.records import create_topic, produce, topic_name

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def fresh_broker(tmp_path_factory, pki):
    require_kafka()
    pytest.importorskip("confluent_kafka")
    broker = start_kafka_broker(tmp_path_factory.mktemp("kafka-fresh"), pki,
                                overrides={"offsets.topic.num.partitions": "50"})
    try:
        yield broker
    finally:
        broker.stop()
        broker.oauth.close()


def test_first_group_use_on_a_fresh_broker(fresh_broker):
    bootstrap = fresh_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("fresh"), partitions=2)
    produce(bootstrap, topic, [(None, b"%d" % i, [], None) for i in range(20)])
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fresh-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    answers = []
    send = c._client.send

    def hook(node, api_key, body, callback, **kw):
        # The coordinator's answers, to show which retriable errors came.
        def seen(resp, callback=callback):
            if resp.exception is None and api_key == messages.OFFSET_FETCH.api_key:
                groups = resp.body.get("groups") or [resp.body]
                answers.append(groups[0]["error_code"])
            return callback(resp)
        return send(node, api_key, body, seen, **kw)
    c._client.send = hook
    try:
        # The group's first use: __consumer_offsets is created by this lookup.
        started = time.monotonic()
        assert c.committed(tps, timeout=60) == {tp: None for tp in tps}
        first = time.monotonic() - started
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(0.5)
        assert sorted(r.value for r in got) == sorted(b"%d" % i for i in range(20))
        c.commit()
        committed = c.committed(tps)
        assert {tp: om.offset for tp, om in committed.items()} == {
            tp: c.position(tp) for tp in tps}
        assert sum(om.offset for om in committed.values()) == 20
    finally:
        c.close()
    print(f"first committed() {first:.2f} s; OffsetFetch answers {answers}")


def test_admin_retries_a_fresh_brokers_coordinator_errors(fresh_broker):
    """Kafka's Admin retries retriable errors within default.api.timeout.ms:
    the first transaction-coordinator lookup on a fresh broker (which
    creates ``__transaction_state``, 50 partitions) answers
    COORDINATOR_NOT_AVAILABLE for a moment; the call goes on to the
    coordinator's own answer for an unknown transactional id."""
    from kchannel.client.admin import Admin
    from kchannel.errors import KafkaError
    from kchannel.protocol.errors import Errors

    with Admin({"bootstrap.servers": fresh_broker.bootstrap("PLAINTEXT")}) as admin:
        with pytest.raises(KafkaError) as err:
            admin.describe_transactions(["fresh-transactional-id"])
    assert err.value.error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND
