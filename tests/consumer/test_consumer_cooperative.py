"""Cooperative-sticky consumer groups: the assignor's balance, stickiness
and "never two owners" properties under Hypothesis, the incremental
cooperative protocol converging in two rebalances, and a group of kchannel
consumers on Apache Kafka where a member joins then leaves while the others
keep the partitions the rebalance does not move."""
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel import Consumer
from kchannel.consumer.assignors import (CooperativeStickyAssignor, decode_subscription,
                                         encode_subscription, member_data_from_subscription)
from kchannel.consumer.coordinator import ConsumerCoordinator
from kchannel.errors import ConfigError
from kchannel.client.metadata import TopicPartition as TP
from tests.fixtures.records import create_topic, produce, topic_name

_TOPICS = ["a", "b", "c"]


def _all(counts, topics):
    return {TP(t, p) for t in topics for p in range(counts.get(t, 0))}


def _rejoin(counts, subs, previous, generation):
    """One rebalance: members send what they own after revoking."""
    data = {m: (generation, tps) for m, tps in previous.items() if m in subs}
    return CooperativeStickyAssignor().assign(counts, subs, data)


def _check_no_double_owner(previous, out):
    seen = {}
    for m, tps in out.items():
        for tp in tps:
            assert tp not in seen, f"{tp} given to {seen[tp]} and {m}"
            seen[tp] = m
            for other, owned in previous.items():
                # Moving straight from a member still in the group to
                # another is forbidden (a member that left owns nothing).
                assert other == m or other not in out or tp not in owned


def _check_balanced(counts, subs, out):
    for a in out:
        for b in out:
            if len(out[a]) > len(out[b]) + 1:
                assert not any(tp.topic in subs[b][0] for tp in out[a]), (a, b, out)


member_names = st.lists(st.sampled_from("mnopqrstuv"), min_size=1, max_size=6, unique=True)


@settings(max_examples=150, deadline=None)
@given(counts=st.fixed_dictionaries({t: st.integers(0, 7) for t in _TOPICS}),
       before=member_names, after=member_names,
       same=st.booleans(), data=st.data())
def test_cooperative_sticky_properties(counts, before, after, same, data):
    def subs_for(members):
        if same:
            return {m: (set(_TOPICS), None) for m in members}
        return {m: (set(data.draw(st.lists(st.sampled_from(_TOPICS), min_size=1, unique=True),
                                  label=f"topics of {m}")), None) for m in members}
    # A stable group of `before`, then membership changes to `after`.
    subs = subs_for(before)
    owned = _rejoin(counts, subs, {}, 1)
    owned = _rejoin(counts, subs, owned, 2)
    subs2 = {m: subs.get(m) or subs_for([m])[m] for m in after}
    expected = set()
    for topics, _ in subs2.values():
        expected |= _all(counts, topics)
    first = _rejoin(counts, subs2, owned, 3)
    _check_no_double_owner(owned, first)
    for m, tps in first.items():
        assert all(tp.topic in subs2[m][0] for tp in tps)
    # Members keep what they owned unless it must move (then it is revoked,
    # not given away in this generation).
    if same:
        quota = -(-sum(counts.values()) // len(after)) if after else 0
        for m in after:
            kept = set(owned.get(m, ())) & set(first[m])
            assert len(kept) >= min(len(owned.get(m, ())), quota - 1)
    # The owners revoke and rejoin: the next rebalance completes the move.
    second = _rejoin(counts, subs2, first, 4)
    _check_no_double_owner(first, second)
    if same:
        for m in after:
            assert set(first[m]) <= set(second[m])    # nobody loses anything twice
        assert set().union(*map(set, second.values())) == expected
        _check_balanced(counts, subs2, second)
    else:
        # Unequal subscriptions may take more rounds (Kafka's general
        # sticky algorithm may too); each is still safe, and it settles.
        current, generation = second, 5
        while any(set(first[m]) - set(current[m]) for m in after) or \
                set().union(*map(set, current.values())) != expected:
            assert generation < 12, "the group does not settle"
            first, current = current, _rejoin(counts, subs2, current, generation)
            _check_no_double_owner(first, current)
            generation += 1
        _check_balanced(counts, subs2, current)


def test_sticky_keeps_ownership_on_join_as_kafka():
    # Kafka's CooperativeStickyAssignorTest shape: three members of six
    # partitions, a fourth joins: each old member gives up at most one
    # partition, which is revoked first and only then assigned.
    subs = {m: ({"t"}, None) for m in ("c1", "c2", "c3")}
    owned = {"c1": [TP("t", 0), TP("t", 1)], "c2": [TP("t", 2), TP("t", 3)],
             "c3": [TP("t", 4), TP("t", 5)]}
    subs["c4"] = ({"t"}, None)
    first = _rejoin({"t": 6}, subs, owned, 7)
    assert first["c4"] == []
    moving = {tp for m in ("c1", "c2", "c3") for tp in set(owned[m]) - set(first[m])}
    assert len(moving) == 1
    second = _rejoin({"t": 6}, subs, first, 8)
    assert set(second["c4"]) == moving and sorted(map(len, second.values())) == [1, 1, 2, 2]


def test_generations_decide_conflicting_claims():
    subs = {m: ({"t"}, None) for m in ("x", "y", "z")}
    # y's claim is from an older generation: only x's counts; z and x claim
    # p2 in the same generation, so neither keeps it because of the claim.
    data = {"x": (5, [TP("t", 0), TP("t", 2)]), "y": (4, [TP("t", 0), TP("t", 1)]),
            "z": (5, [TP("t", 2)])}
    out = CooperativeStickyAssignor().assign({"t": 3}, subs, data)
    assert TP("t", 0) in out["x"]
    _check_no_double_owner({"x": [TP("t", 0)]}, out)


def test_subscription_carries_owned_partitions_and_generation_as_java():
    a = CooperativeStickyAssignor()
    raw = encode_subscription(["t"], owned=[TP("t", 1)], generation_id=6,
                              user_data=a.subscription_user_data(6))
    sub = decode_subscription(raw)
    assert sub["user_data"] == b"\x00\x00\x00\x06"
    assert member_data_from_subscription(sub) == (6, [TP("t", 1)])
    # A v1 subscription (no generation field): the generation is the
    # assignor's UserData, as Java's CooperativeStickyAssignor reads it.
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as Kp
    v1 = Kp(1, ["t"], b"\x00\x00\x00\x09", [("t", [0, 2])]).encode()
    assert member_data_from_subscription(decode_subscription(v1), 1) == \
        (9, [TP("t", 0), TP("t", 2)])
    # From v2 the field decides, even at -1 (a new member): UserData is
    # then the assignor's own (librdkafka writes other bytes there).
    v3 = encode_subscription(["t"], generation_id=-1, user_data=b"\x00\x00\x00\x01xx")
    assert member_data_from_subscription(decode_subscription(v3), 3) == (-1, [])


def test_rebalance_protocol_follows_the_assignors():
    def protocol(strategy):
        c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                      "partition.assignment.strategy": strategy})
        try:
            return ConsumerCoordinator(c, c.config).rebalance_protocol
        finally:
            c.close()
    assert protocol("cooperative-sticky") == "COOPERATIVE"
    assert protocol("org.apache.kafka.clients.consumer.CooperativeStickyAssignor") == \
        "COOPERATIVE"
    # Kafka's default (range first) stays eager until range is removed.
    assert protocol("org.apache.kafka.clients.consumer.RangeAssignor,"
                    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor") == "EAGER"
    with pytest.raises(ConfigError):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                  "partition.assignment.strategy": "sticky-ish"})


class _Member:
    """One kchannel consumer on its own thread, publishing its assignment
    and the listener's calls after each poll."""

    def __init__(self, name, bootstrap, group, topic, seen, lock):
        self.name, self.seen, self.lock = name, seen, lock
        self.revoked, self.assigned = [], []
        self.snapshot = set()
        self.stop = threading.Event()
        self.error = None
        self.config = {"bootstrap.servers": bootstrap, "group.id": group,
                       "auto.offset.reset": "earliest", "client.id": name,
                       "max.poll.records": 5, "heartbeat.interval.ms": 200,
                       "session.timeout.ms": 10000,
                       "partition.assignment.strategy": "cooperative-sticky"}
        self.topic = topic
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def on_partitions_revoked(self, tps):
        self.revoked.append(set(tps))

    def on_partitions_assigned(self, tps):
        self.assigned.append(set(tps))

    def _run(self):
        try:
            c = Consumer(self.config)
            c.subscribe([self.topic], listener=self)
            while not self.stop.is_set():
                records = c.poll(0.1)
                with self.lock:
                    for r in records:
                        self.seen.setdefault((r.partition, r.offset), []).append(self.name)
                    self.snapshot = set(c.assignment())
                time.sleep(0.005 * len(records))    # slow enough to rebalance mid-stream
            c.close()
        except Exception as exc:  # surfaced by the test thread
            self.error = exc

    def close(self):
        self.stop.set()
        self.thread.join(60)
        assert self.error is None, self.error


def _wait_locked(cond, what, lock, limit=60):
    end = time.time() + limit
    while time.time() < end:
        with lock:
            if cond():
                return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.interop
@pytest.mark.slow
def test_cooperative_group_on_apache_kafka(kafka_broker):
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("coop"), partitions=6)
    n = 1200
    produce(bootstrap, topic, [(b"k%d" % i, b"%d" % i, [], None) for i in range(n)])
    everything = {TP(topic, p) for p in range(6)}
    seen, lock = {}, threading.Lock()
    group = f"g-{topic}"
    c0 = _Member("c0", bootstrap, group, topic, seen, lock)
    c1 = _Member("c1", bootstrap, group, topic, seen, lock)
    members = [c0, c1]
    try:
        _wait_locked(lambda: c0.snapshot | c1.snapshot == everything and
                     len(c0.snapshot) == len(c1.snapshot) == 3, "two members of 3 partitions", lock)
        before = {m.name: set(m.snapshot) for m in members}
        revoked_before = {m.name: len(m.revoked) for m in members}
        c2 = _Member("c2", bootstrap, group, topic, seen, lock)
        members.append(c2)
        _wait_locked(lambda: len(c2.snapshot) == 2 and len(c0.snapshot) == len(c1.snapshot) == 2,
                     "the third member's two partitions", lock)
        assert not c0.snapshot & c1.snapshot and not c2.snapshot & (c0.snapshot | c1.snapshot)
        with lock:
            for m in (c0, c1):
                # Exactly the partition that moved was revoked; the other two
                # stayed owned (never revoked) through both rebalances.
                revoked = set().union(*m.revoked[revoked_before[m.name]:])
                assert revoked == before[m.name] - m.snapshot and len(revoked) == 1
                assert m.snapshot < before[m.name]
            assert c2.snapshot == (before["c0"] | before["c1"]) - c0.snapshot - c1.snapshot
            middle = {m.name: set(m.snapshot) for m in (c0, c1)}
            counts = {m.name: len(m.revoked) for m in (c0, c1)}
        members.remove(c2)
        c2.close()                      # commits its positions, then LeaveGroup
        _wait_locked(lambda: c0.snapshot | c1.snapshot == everything, "the leaver's partitions",
                     lock)
        with lock:
            for m in (c0, c1):
                # Nothing revoked from those who stay: they only gain.
                assert len(m.revoked) == counts[m.name]
                assert middle[m.name] < m.snapshot
        _wait_locked(lambda: len(seen) == n, "every record", lock, limit=90)
        with lock:
            # Partitions that never moved were read once, from start to end.
            kept = (middle["c0"] | middle["c1"])
            assert all(len(v) == 1 for (p, _), v in seen.items() if TP(topic, p) in kept)
    finally:
        for m in members:
            m.close()


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("leader", ["kchannel", "librdkafka"])
def test_cooperative_group_with_confluent_kafka(kafka_broker, leader):
    """A kchannel member and a librdkafka member (cooperative-sticky) share
    the partitions, whichever joined first (and so assigns); when
    librdkafka's member leaves, the kchannel member gains its partitions
    without revoking any of its own."""
    from confluent_kafka import Consumer as ConfluentConsumer
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("coopmix"), partitions=6)
    n = 1200
    produce(bootstrap, topic, [(b"k%d" % i, b"%d" % i, [], None) for i in range(n)])
    everything = {TP(topic, p) for p in range(6)}
    seen, lock = {}, threading.Lock()
    group = f"g-{topic}"
    theirs = {"snapshot": set(), "error": None}
    stop = threading.Event()

    def confluent_member():
        try:
            cc = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                    "auto.offset.reset": "earliest",
                                    "partition.assignment.strategy": "cooperative-sticky",
                                    "heartbeat.interval.ms": 200,
                                    "session.timeout.ms": 10000})
            cc.subscribe([topic])
            while not stop.is_set():
                msg = cc.poll(0.1)
                with lock:
                    if msg is not None and msg.error() is None:
                        seen.setdefault((msg.partition(), msg.offset()), []).append("rd")
                    theirs["snapshot"] = {TP(t.topic, t.partition) for t in cc.assignment()}
                if msg is not None:
                    time.sleep(0.001)
            cc.close()
        except Exception as exc:  # surfaced by the test thread
            theirs["error"] = exc

    rd = threading.Thread(target=confluent_member, daemon=True)
    ours = None
    try:
        if leader == "librdkafka":
            rd.start()
            _wait_locked(lambda: theirs["snapshot"] == everything, "librdkafka's six partitions",
                         lock)
        ours = _Member("k0", bootstrap, group, topic, seen, lock)
        if leader == "kchannel":
            _wait_locked(lambda: ours.snapshot == everything, "kchannel's six partitions", lock)
            rd.start()
        _wait_locked(lambda: len(theirs["snapshot"]) == 3 and len(ours.snapshot) == 3,
                     "three partitions each", lock)
        with lock:
            assert not theirs["snapshot"] & ours.snapshot
            middle, revocations = set(ours.snapshot), len(ours.revoked)
            if leader == "kchannel":
                # kchannel revoked exactly the three that moved, kept the rest.
                assert ours.revoked[-1] == everything - middle
            else:
                assert not ours.revoked
        stop.set()
        rd.join(60)
        assert theirs["error"] is None, theirs["error"]
        _wait_locked(lambda: ours.snapshot == everything, "the leaver's partitions", lock)
        assert len(ours.revoked) == revocations
        _wait_locked(lambda: len(seen) == n, "every record", lock, limit=90)
        if leader == "kchannel":
            assert all(len(v) == 1 for (p, _), v in seen.items() if TP(topic, p) in middle)
        assert any("rd" in v for v in seen.values())
    finally:
        stop.set()
        if ours is not None:
            ours.close()
