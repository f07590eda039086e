"""The consumer group protocol of KIP-848 (``group.protocol=consumer``)
against Apache Kafka: kchannel members and a Java member (Kafka's
ConsoleConsumer with ``group.protocol=consumer``) share a topic's
partitions, each owned by one member and each record read once; a member
that leaves gives its partitions to the others; the listener callbacks fire;
the offsets committed are those Kafka's kafka-consumer-groups shows; a member
whose application stops polling for ``max.poll.interval.ms`` loses its
partitions and joins again.  (The coordinator kill is in
test_consumer_liveness.py, on the 3-broker cluster.)"""
import time

import pytest

from kchannel import Admin, Consumer, Producer
from kchannel.consumer.membership import MemberState
from kchannel.errors import ConfigError, KafkaError
from kchannel.protocol.errors import Errors
from tests.fixtures.java import ConsoleConsumerMember
from tests.fixtures.records import create_topic, topic_name

pytestmark = [pytest.mark.kafka]

PARTITIONS = 6
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


class Listener:
    def __init__(self):
        self.calls = []

    def on_partitions_assigned(self, tps):
        self.calls.append(("assigned", sorted(tps)))

    def on_partitions_revoked(self, tps):
        self.calls.append(("revoked", sorted(tps)))

    def on_partitions_lost(self, tps):
        self.calls.append(("lost", sorted(tps)))


def member(bootstrap, group, **extra):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "auto.commit.interval.ms": 500, **extra})


def produce_round(bootstrap, topic, label, per_partition):
    values = []
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for part in range(PARTITIONS):
            for i in range(per_partition):
                v = f"{label}-{part}-{i}"
                p.send(topic, v.encode(), partition=part)
                values.append(v)
        p.flush(30)
    return values


def poll_group_until(consumers, done, timeout, got=None):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out: " + ", ".join(
            f"{c._group.state} {sorted(c.assignment())}" for c in consumers)
        for c in consumers:
            for r in c.poll(0.05):
                if got is not None:
                    got[c].append((r.partition, r.value.decode()))


def test_classic_keys_refused_under_the_consumer_protocol():
    # Kafka's ConsumerConfig: the keys of the other protocol, when set.
    base = {"bootstrap.servers": "127.0.0.1:9", "group.id": "g"}
    with pytest.raises(ConfigError, match=r"^partition.assignment.strategy, session.timeout.ms "
                                          r"cannot be set when group.protocol=CONSUMER$"):
        Consumer({**base, "group.protocol": "consumer", "session.timeout.ms": 30000,
                  "partition.assignment.strategy": "range"})
    with pytest.raises(ConfigError, match="heartbeat.interval.ms cannot be set when "
                                          "group.protocol=CONSUMER"):
        Consumer({**base, "group.protocol": "consumer", "heartbeat.interval.ms": 1000})
    with pytest.raises(ConfigError, match="group.remote.assignor cannot be set when "
                                          "group.protocol=CLASSIC"):
        Consumer({**base, "group.remote.assignor": "uniform"})
    Consumer({**base, "group.protocol": "consumer", "group.remote.assignor": "range"}).close()
    # group.protocol is case-insensitive, as Kafka's.
    with Consumer({**base, "group.protocol": "CONSUMER"}) as c:
        assert c.config["group.protocol"] == "consumer"


@pytest.mark.interop
@pytest.mark.slow
def test_kchannel_and_java_members_share_partitions(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("k848"), partitions=PARTITIONS)
    group = f"g-{topic}"
    listener = Listener()
    a = member(plain, group)
    b = member(plain, group, **{"group.remote.assignor": "uniform"})
    java = None
    try:
        a.subscribe([topic], listener=listener)
        b.subscribe([topic])
        poll_group_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 3, 30)
        assert a.assignment().isdisjoint(b.assignment())
        java = ConsoleConsumerMember(plain, topic, group, ["group.protocol=consumer"])
        # The uniform assignor gives each of the three members two partitions.
        poll_group_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2 and all(
            c._group.state is MemberState.STABLE for c in (a, b)), 60)
        assert a.assignment().isdisjoint(b.assignment())
        assert a._group.member_epoch > 1 and len(a._group.member_id) == 22
        # Admin describes the group with ConsumerGroupDescribe (API 69).
        with Admin({"bootstrap.servers": plain}) as admin:
            descs = []
            poll_group_until([a, b], lambda: descs.append(admin.describe_consumer_groups(
                [group])[group]) or descs[-1].state == "Stable", 15)
        desc = descs[-1]
        assert desc.partition_assignor == "uniform"
        assigned = {m.consumer_id: set(m.assignment) for m in desc.members}
        assert len(assigned) == 3 and sum(len(v) for v in assigned.values()) == PARTITIONS
        assert assigned[a._group.member_id] == a.assignment()
        assert assigned[b._group.member_id] == b.assignment()
        # Every record of the topic is read once, by the member owning its partition.
        sent = produce_round(plain, topic, "one", 10)
        got = {a: [], b: []}
        poll_group_until([a, b], lambda: len(got[a]) + len(got[b]) + len(java.records) >= len(sent),
                         30, got)
        time.sleep(0.5)      # (a duplicate would come now)
        for c in (a, b):
            got[c].extend((r.partition, r.value.decode()) for r in c.poll(0.2))
            assert {p for p, _ in got[c]} == {tp.partition for tp in c.assignment()}
        java_parts = {p for p, _ in java.records}
        assert len(java_parts) == 2 and java_parts.isdisjoint(
            {tp.partition for tp in a.assignment() | b.assignment()})
        read = [v for _, v in got[a] + got[b] + java.records]
        assert sorted(read) == sorted(sent)
        # b leaves: a and the Java member take its partitions.
        b.close()
        poll_group_until([a], lambda: len(a.assignment()) == 3 and
                         a._group.state is MemberState.STABLE, 60)
        # (Counted before the records go out: the Java member may print
        # some of them before the producer has closed.)
        seen = len(java.records)
        more = produce_round(plain, topic, "two", 5)
        got = {a: []}
        try:
            poll_group_until([a], lambda: len(got[a]) + len(java.records) - seen >= len(more), 60,
                             got)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; Java member printed {java.records[seen:]}; its "
                                 f"log ends: {java.stderr()[-3000:]}") from None
        assert sorted([v for _, v in got[a]] + [v for _, v in java.records[seen:]]) == \
            sorted(more)
        assert {p for p, _ in java.records[seen:]}.isdisjoint(
            {tp.partition for tp in a.assignment()})
        # The listener: assigned first, revoked when the Java member came,
        # assigned b's partitions; what it was given minus what it gave
        # back is what it owns.
        kinds = [k for k, _ in listener.calls]
        assert kinds[0] == "assigned" and "revoked" in kinds and "lost" not in kinds
        owned = set()
        for kind, tps in listener.calls:
            owned = owned | set(tps) if kind == "assigned" else owned - set(tps)
        assert owned == a.assignment()
        assert java.stop() in (0, 130, 143)
        java = None
        a.close()
        assert listener.calls[-1] == ("revoked", sorted(owned))
    finally:
        if java is not None:
            java.stop()
        a.close()
        b.close()
    # Kafka's kafka-consumer-groups sees every partition committed at its end.
    r = kafka_broker.run_java(GROUP_COMMAND, "--bootstrap-server", plain, "--describe",
                              "--group", group, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith(group + " ")]
    offsets = {int(row[2]): (row[3], row[4]) for row in rows if row[1] == topic}
    assert offsets == {p: ("15", "15") for p in range(PARTITIONS)}, r.stdout


def test_member_past_max_poll_interval_loses_its_partitions_and_rejoins(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("k848-stale"), partitions=2)
    listener = Listener()
    c = member(plain, f"g-{topic}", **{"max.poll.interval.ms": 1000})
    try:
        c.subscribe([topic], listener=listener)
        poll_group_until([c], lambda: len(c.assignment()) == 2 and
                         c._group.state is MemberState.STABLE, 30)
        epoch = c._group.member_epoch
        time.sleep(1.2)
        # This poll leaves (the partitions lost), then joins again.
        c.poll(0)
        assert listener.calls[1:] == [("lost", sorted(listener.calls[0][1]))]
        poll_group_until([c], lambda: c._group.state is MemberState.STABLE and
                         len(c.assignment()) == 2, 30)
        assert c._group.member_epoch > epoch
        tps = sorted(c.assignment())
        assert listener.calls == [("assigned", tps), ("lost", tps), ("assigned", tps)]
    finally:
        c.close()


def test_fenced_member_rejoins_and_static_member_keeps_its_partitions(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("k848-fence"), partitions=4)
    group = f"g-{topic}"
    listener = Listener()
    a = member(plain, group, **{"group.instance.id": "a"})
    b = member(plain, group)
    try:
        a.subscribe([topic])
        b.subscribe([topic], listener=listener)
        poll_group_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2 and all(
            c._group.state is MemberState.STABLE for c in (a, b)), 30)
        mine, theirs = sorted(a.assignment()), sorted(b.assignment())
        del listener.calls[:]
        # A heartbeat with an epoch the coordinator never gave is fenced
        # (FENCED_MEMBER_EPOCH): the partitions are lost and the member
        # rejoins with epoch 0 (and gets partitions again).
        b._group.member_epoch += 10
        b._group.need_join = True     # (heartbeat now)
        poll_group_until([a, b], lambda: listener.calls, 10)
        assert listener.calls[0] == ("lost", theirs)
        poll_group_until([a, b], lambda: b._group.state is MemberState.STABLE and
                         len(b.assignment()) == 2 and len(a.assignment()) == 2, 30)
        assert [k for k, _ in listener.calls] == ["lost", "assigned"]
        assert b._group.member_epoch > 0
        # A static member leaves with epoch -2: its partitions wait for its
        # return (b does not get them) and it gets them back.
        mine = sorted(a.assignment())
        a.close()
        for _ in range(10):
            b.poll(0.1)
        assert len(b.assignment()) == 2
        a = member(plain, group, **{"group.instance.id": "a"})
        a.subscribe([topic])
        poll_group_until([a, b], lambda: a._group.state is MemberState.STABLE and
                         sorted(a.assignment()) == mine, 30)
        assert len(b.assignment()) == 2
    finally:
        a.close()
        b.close()


def test_unknown_remote_assignor_fails_the_member(kafka_broker):
    # UNSUPPORTED_ASSIGNOR is fatal, as in Kafka's heartbeat manager: poll raises it.
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("k848-assignor"), partitions=1)
    c = member(plain, f"g-{topic}", **{"group.remote.assignor": "no-such-assignor"})
    try:
        c.subscribe([topic])
        with pytest.raises(KafkaError) as info:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                c.poll(0.1)
        assert info.value.error_code == Errors.UNSUPPORTED_ASSIGNOR
        assert c._group.state is MemberState.FATAL and not c.assignment()
    finally:
        c.close()
