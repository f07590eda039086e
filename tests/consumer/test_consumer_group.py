"""Consumer groups (classic protocol): the assignors against the
assignments Kafka's RangeAssignorTest/RoundRobinAssignorTest expect, the
embedded consumer protocol against kafka-python's encoder, and a group of
three kchannel consumers on real brokers: one leaves, its partitions move,
every record is consumed, and the committed offsets are what
confluent-kafka's ``committed()`` reads."""
import threading
import time

import pytest

from kchannel import Consumer
from kchannel.consumer.assignors import (RangeAssignor, RoundRobinAssignor, decode_assignment,
                                         decode_subscription, encode_assignment,
                                         encode_subscription)
from kchannel.client.metadata import TopicPartition as TP
from tests.fixtures.records import create_topic, produce, topic_name


def _subs(**members):
    return {m: (set(topics), None) for m, topics in members.items()}


def test_range_assignor_as_kafka():
    # RangeAssignorTest#testTwoConsumersTwoTopicsSixPartitions
    out = RangeAssignor().assign({"t1": 3, "t2": 3}, _subs(c1=["t1", "t2"], c2=["t1", "t2"]))
    assert out == {"c1": [TP("t1", 0), TP("t1", 1), TP("t2", 0), TP("t2", 1)],
                   "c2": [TP("t1", 2), TP("t2", 2)]}
    # testOnlyAssignsPartitionsFromSubscribedTopics / one consumer, no topics
    assert RangeAssignor().assign({"t": 3, "other": 3}, _subs(c=["t"])) == \
        {"c": [TP("t", 0), TP("t", 1), TP("t", 2)]}
    assert RangeAssignor().assign({}, _subs(c=[])) == {"c": []}


def test_round_robin_assignor_as_kafka():
    # RoundRobinAssignorTest#testTwoConsumersTwoTopicsSixPartitions
    out = RoundRobinAssignor().assign({"t1": 3, "t2": 3},
                                      _subs(c1=["t1", "t2"], c2=["t1", "t2"]))
    assert out == {"c1": [TP("t1", 0), TP("t1", 2), TP("t2", 1)],
                   "c2": [TP("t1", 1), TP("t2", 0), TP("t2", 2)]}
    # testMultipleConsumersMixedTopics
    out = RoundRobinAssignor().assign({"t1": 3, "t2": 2},
                                      _subs(c1=["t1"], c2=["t1", "t2"], c3=["t1"]))
    assert out == {"c1": [TP("t1", 0)], "c2": [TP("t1", 1), TP("t2", 0), TP("t2", 1)],
                   "c3": [TP("t1", 2)]}


def test_static_members_sort_before_dynamic_ones():
    subs = {"b": ({"t"}, None), "a": ({"t"}, None), "z": ({"t"}, "instance-1")}
    out = RangeAssignor().assign({"t": 3}, subs)
    assert out == {"z": [TP("t", 0)], "a": [TP("t", 1)], "b": [TP("t", 2)]}


def test_consumer_protocol_round_trip_and_kafka_python():
    raw = encode_subscription(["b", "a"], owned=[TP("a", 1)], generation_id=4, rack_id="r1")
    assert raw[:2] == b"\x00\x03"
    sub = decode_subscription(raw)
    assert (sub["topics"], sub["generation_id"], sub["rack_id"]) == (["a", "b"], 4, "r1")
    assert decode_assignment(encode_assignment([TP("t", 2), TP("t", 0)])) == \
        [TP("t", 0), TP("t", 2)]
    assert decode_assignment(b"") == []
    # kafka-python 3 builds these from Kafka's schemas too
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
    assert decode_subscription(KpSubscription(0, ["x", "y"], b"").encode())["topics"] == \
        ["x", "y"]
    assert decode_assignment(KpAssignment(0, [("t", [0, 3])], b"").encode()) == \
        [TP("t", 0), TP("t", 3)]
    theirs = KpSubscription.decode(raw)
    assert (theirs.version, theirs.topics, theirs.generation_id, theirs.rack_id) == \
        (3, ["a", "b"], 4, "r1")
    assert KpAssignment.decode(encode_assignment([TP("t", 1)])).partitions() == [("t", 1)]


def _run_group(bootstrap, topic, n_records, partitions):
    group = f"g-{topic}"
    seen = {}
    lock = threading.Lock()
    final = {}
    leaver_done = threading.Event()
    errors = []

    def member(name, leave_after):
        try:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                          "auto.offset.reset": "earliest", "client.id": name,
                          "max.poll.records": 10, "heartbeat.interval.ms": 300,
                          "session.timeout.ms": 10000,
                          "partition.assignment.strategy":
                              "org.apache.kafka.clients.consumer.RangeAssignor"})
            c.subscribe([topic])
            taken = 0
            deadline = time.time() + 120
            while time.time() < deadline:
                records = c.poll(0.2)
                with lock:
                    for r in records:
                        seen.setdefault((r.partition, r.offset), []).append(name)
                    done = len(seen) >= n_records
                taken += len(records)
                time.sleep(0.01 * len(records))
                if leave_after is not None and taken >= leave_after:
                    final[name] = set(c.assignment())
                    c.close()          # commits its positions, then LeaveGroup
                    leaver_done.set()
                    return
                # (poll returns within its timeout, as Kafka's, also in the
                # middle of a rebalance: stop once this member has its
                # partitions again, eager rebalancing having revoked them)
                if done and leaver_done.is_set() and c.assignment():
                    break
            final[name] = set(c.assignment())
            c.close()
        except Exception as exc:  # surfaced by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=member, args=(f"c{i}", 30 if i == 2 else None))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    return group, seen, final


def _check_group(bootstrap, topic, partitions, n_records, group, seen, final):
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import TopicPartition as CTP
    assert len(seen) == n_records
    # every member got partitions, the leaver's moved to the two that stayed
    assert final["c2"] and final["c0"] and final["c1"]
    assert final["c0"] | final["c1"] == {TP(topic, p) for p in range(partitions)}
    cc = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = cc.committed([CTP(topic, p) for p in range(partitions)], timeout=30)
        ends = {p: cc.get_watermark_offsets(CTP(topic, p), timeout=30)[1]
                for p in range(partitions)}
    finally:
        cc.close()
    assert {t.partition: t.offset for t in committed} == ends
    assert sum(ends.values()) == n_records


@pytest.mark.interop
@pytest.mark.slow
def test_group_of_three_on_apache_kafka(kafka_broker):
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("group"), partitions=6)
    produce(bootstrap, topic, [(b"k%d" % i, b"%d" % i, [], None) for i in range(600)])
    group, seen, final = _run_group(bootstrap, topic, 600, 6)
    _check_group(bootstrap, topic, 6, 600, group, seen, final)


@pytest.mark.interop
@pytest.mark.slow
def test_group_of_three_on_tansu(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("group"), partitions=6)
    produce(tansu.bootstrap, topic, [(b"k%d" % i, b"%d" % i, [], None) for i in range(300)])
    group, seen, final = _run_group(tansu.bootstrap, topic, 300, 6)
    assert len(seen) == 300
    assert final["c0"] | final["c1"] == {TP(topic, p) for p in range(6)}


def test_subscribe_needs_group_id_and_excludes_assign(tansu):
    from kchannel.errors import KafkaError, KChannelError
    with Consumer({"bootstrap.servers": tansu.bootstrap}) as c:
        with pytest.raises(KafkaError, match="group.id"):
            c.subscribe(["t"])
    with Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": "g-x"}) as c:
        c.assign([("t", 0)])
        with pytest.raises(KChannelError, match="mutually exclusive"):
            c.subscribe(["t"])
