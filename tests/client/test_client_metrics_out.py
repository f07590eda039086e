"""Client metrics out, against Apache Kafka: librdkafka's statistics
callback (``statistics.interval.ms`` + ``stats_cb``, called from
poll()/flush() in the caller's thread) and the ``prometheus_client``
collector of :func:`kchannel.metrics.register_prometheus`, both counting
what the client really sent and consumed."""
import json
import threading
import time

import pytest

from kchannel import Consumer, Producer
from kchannel.metrics import register_prometheus
from tests.fixtures.peers import require_module
from tests.fixtures.records import create_topic, topic_name

pytestmark = [pytest.mark.kafka]
prometheus_client = require_module("prometheus_client", "prometheus-client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


def scrape(registry):
    out = {}
    for fam in text_string_to_metric_families(
            prometheus_client.generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def poll_until_emitted(client, stats, client_id, timeout=10.0):
    """Poll ``client`` until its stats_cb has been called again (a deadline,
    not a fixed sleep: on a loaded machine a sleep of one interval may not
    be enough); returns that new statistics object."""
    def count():
        return sum(1 for s in stats if s["client_id"] == client_id)
    before = count()
    deadline = time.monotonic() + timeout
    while count() == before:
        assert time.monotonic() < deadline, "stats_cb was not called within %s s" % timeout
        time.sleep(0.01)
        client.poll(0)
    return [s for s in stats if s["client_id"] == client_id][-1]


def test_stats_cb_and_prometheus_collector(kafka_broker):
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(b, topic_name("stats"), partitions=1)
    stats, threads = [], []

    def stats_cb(text):
        stats.append(json.loads(text))
        threads.append(threading.get_ident())

    registry = prometheus_client.CollectorRegistry()
    with Producer({"bootstrap.servers": b, "client.id": "stats-p", "linger.ms": 0,
                   "statistics.interval.ms": 50, "stats_cb": stats_cb}) as p:
        register_prometheus(p, registry)
        for i in range(5):
            p.send(topic, b"v%d" % i)
        p.flush(30)
        # The first statistics taken after the flush returned (their rtt:
        # the responses since flush() called stats_cb, if it did).
        s = poll_until_emitted(p, stats, "stats-p")
        assert (s["type"], s["client_id"], s["txmsgs"], s["msg_cnt"]) == \
            ("producer", "stats-p", 5, 0)
        assert s["tx"] >= 2 and s["rx"] == s["tx"] and s["tx_bytes"] > 0
        assert topic in s["topics"]
        port = str(kafka_broker.port("PLAINTEXT"))
        assert any(v["nodename"].endswith(":" + port) and v["state"] == "READY"
                   for v in s["brokers"].values())
        # Per broker: what went over the connections (the leader's took the
        # records), all answered, round trips in µs.
        leader = s["topics"][topic]["partitions"]["0"]["leader"]
        [broker] = [v for v in s["brokers"].values() if v["nodeid"] == leader]
        assert broker["state"] == "READY" and broker["connects"] == 1
        assert broker["tx"] == broker["rx"] >= 1 and broker["waitresp_cnt"] == 0
        assert broker["txbytes"] > 5 * 2 and broker["rxbytes"] > 0
        assert (broker["req_timeouts"], broker["disconnects"]) == (0, 0)
        assert sum(v["tx"] for v in s["brokers"].values()) == s["tx"]
        assert sum(v["txbytes"] for v in s["brokers"].values()) == s["tx_bytes"]
        rtt = broker["rtt"]
        assert rtt["cnt"] >= 1 and 0 <= rtt["min"] <= rtt["p50"] <= rtt["p99"] <= rtt["max"]
        assert broker["stateage"] >= 0 and "outbuf_cnt" not in broker
        # Per partition: the leader from metadata, nothing left queued.
        assert s["topics"][topic]["partitions"]["0"] == {"partition": 0, "leader": leader,
                                                         "msgq_cnt": 0}
        assert threads == [threading.get_ident()] * len(threads)
        values = scrape(registry)
        key = ("kafka_producer_producer_metrics_record_send_total", (("clientId", "stats-p"),))
        assert values[key] == 5
        # At most once per statistics.interval.ms however often poll() is
        # called, and again once it has passed: poll in a tight loop until
        # two more statistics came, timing each emitting poll() with the
        # test's own clock (how long the asserts above took, under load,
        # does not matter).
        emitted = []
        deadline = time.monotonic() + 10
        while len(emitted) < 2:
            assert time.monotonic() < deadline, "stats_cb not called again within 10 s"
            count, before = len(stats), time.monotonic()
            assert p.poll(0) == 0
            if len(stats) > count:
                assert len(stats) == count + 1
                emitted.append((before, time.monotonic()))
        # (statistics' ms clock truncates: 1 ms of slack)
        assert emitted[1][1] - emitted[0][0] >= 0.049
        assert stats[-1]["ts"] - stats[-2]["ts"] >= 50 * 1000

    # Off by default; on for the consumer from its poll().
    with Producer({"bootstrap.servers": b, "stats_cb": stats_cb}) as p:
        p.flush(5)
        time.sleep(0.06)
        p.poll(0)
        assert all(s["client_id"] != p.client_id for s in stats)
    consumed = []
    with Consumer({"bootstrap.servers": b, "group.id": topic_name("stats-g"),
                   "client.id": "stats-c", "auto.offset.reset": "earliest",
                   "statistics.interval.ms": 50, "stats_cb": stats_cb}) as c:
        c.subscribe([topic])
        deadline = time.time() + 30
        while len(consumed) < 5 and time.time() < deadline:
            consumed.extend(c.poll(0.2) or [])
        assert len(consumed) == 5
        # The first statistics taken after the last record was handed over.
        poll_until_emitted(c, stats, "stats-c")
        mine = [s for s in stats if s["client_id"] == "stats-c"]
        assert mine and mine[-1]["type"] == "consumer" and mine[-1]["rxmsgs"] == 5
        # The assigned partition: read to its end (5 records), no lag.
        part = mine[-1]["topics"][topic]["partitions"]["0"]
        assert (part["app_offset"], part["stored_offset"], part["hi_offset"],
                part["lo_offset"], part["consumer_lag_stored"]) == (5, 5, 5, 0, 0)
        assert "committed_offset" not in part and "consumer_lag" not in part
        # rtt covers the responses since the previous statistics only.
        assert all(b["rtt"]["cnt"] <= b["rx"] for b in mine[-1]["brokers"].values())
        reg = prometheus_client.CollectorRegistry()
        register_prometheus(c, reg)
        assert scrape(reg)[("kafka_consumer_consumer_fetch_manager_metrics_records_consumed_total",
                            (("clientId", "stats-c"),))] == 5
