"""Producer and consumer metrics under Kafka's names (issue 25 item 6),
measured against Apache Kafka: what a producer sent and a group member
read, fetched, committed and joined shows in ``producer-metrics``,
``consumer-fetch-manager-metrics`` and ``consumer-coordinator-metrics``,
tagged ``client-id``."""
import time

import pytest

from kchannel import Consumer, Producer
from kchannel.client.metadata import TopicPartition
from tests.fixtures.records import create_topic, topic_name

pytestmark = [pytest.mark.kafka]

N = 300


def _values(client, group):
    """{metric name: value} of one group's metrics tagged with the client's
    client-id (the selector's, in the same group, have no tags)."""
    return {mn.name: value for mn, value in client.metrics().items()
            if mn.group == group and dict(mn.tags) == {"client-id": client.client_id}}


def test_producer_and_consumer_metrics(kafka_broker):
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("metrics"), partitions=2)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                   "client.id": "metrics-producer"}) as p:
        futures = [p.send(topic, value=b"v%03d" % i, partition=i % 2) for i in range(N)]
        p.flush(30)
        for f in futures:
            f.get(0)
        m = _values(p, "producer-metrics")
    # Kafka counts a batch's records at every send, a retry's too (a new
    # topic's leader may not be ready for the first ones).
    assert m["record-send-total"] == N + m["record-retry-total"]
    assert m["record-send-rate"] > 0
    assert m["record-error-total"] == 0
    # Batches of 2 partitions x (N / 2) records of 4 bytes: more than the
    # records' bytes, less than the whole.
    assert 2 * 4 < m["batch-size-avg"] <= m["batch-size-max"] < N * 4 * 4
    assert 0 < m["records-per-request-avg"] <= N
    assert m["request-latency-max"] >= m["request-latency-avg"] >= 0
    assert m["produce-throttle-time-max"] == 0
    assert m["requests-in-flight"] == 0

    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    with Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                   "auto.offset.reset": "earliest", "enable.auto.commit": False,
                   "client.id": "metrics-consumer", "heartbeat.interval.ms": 200,
                   "max.poll.records": 50}) as c:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 60
        while got < N and time.monotonic() < deadline:
            got += len(c.poll(0.5))
        assert got == N
        c.commit()
        c.poll(0.5)                 # a heartbeat is due by now
        fetch = _values(c, "consumer-fetch-manager-metrics")
        group = _values(c, "consumer-coordinator-metrics")
    assert fetch["records-consumed-total"] == N
    assert fetch["fetch-total"] >= 1
    assert fetch["fetch-latency-max"] >= fetch["fetch-latency-avg"] >= 0
    assert fetch["bytes-consumed-total"] > N * 4
    assert fetch["fetch-size-max"] >= fetch["fetch-size-avg"] > 0
    # 50 records a poll: the lag behind a partition's high watermark was
    # at most all of its records, and more than none.
    assert 0 < fetch["records-lag-max"] <= N / 2
    assert fetch["fetch-throttle-time-max"] == 0
    assert group["commit-total"] == 1 and group["commit-latency-max"] >= 0
    assert group["join-total"] == 1 and group["sync-total"] == 1
    assert group["join-time-max"] >= 0 and group["sync-time-max"] >= 0
    assert group["heartbeat-total"] >= 1
    assert group["assigned-partitions"] == len(tps)
    assert 0 <= group["last-heartbeat-seconds-ago"] < 5
