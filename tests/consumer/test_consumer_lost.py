"""A group member fenced by the coordinator (its session expired because it
did not poll) loses its partitions, against Apache Kafka: Kafka's consumer
calls ``onPartitionsLost`` (which defaults to ``onPartitionsRevoked``) and
does not commit, since another member may own those partitions already.
The member then rejoins and is assigned again; what the other member
committed meanwhile is not overwritten by the fenced one."""
import threading
import time

import pytest

from kchannel import Consumer
from kchannel.client.metadata import TopicPartition as TP
from tests.fixtures.records import create_topic, produce, topic_name

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.kafka]

SESSION_MS = 6000          # the broker's group.min.session.timeout.ms


class _Events:
    """Listener recording every callback, in order."""

    def __init__(self, with_lost):
        self.calls = []
        if with_lost:
            self.on_partitions_lost = lambda tps: self.calls.append(("lost", set(tps)))

    def on_partitions_revoked(self, tps):
        self.calls.append(("revoked", set(tps)))

    def on_partitions_assigned(self, tps):
        self.calls.append(("assigned", set(tps)))


def _consume_until(c, cond, what, limit=60):
    end = time.time() + limit
    while time.time() < end:
        c.poll(0.2)
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("assignor,with_lost", [
    ("range", True), ("range", False), ("cooperative-sticky", True)])
def test_fenced_member_loses_partitions_without_committing(kafka_broker, assignor,
                                                            with_lost, caplog):
    caplog.set_level("INFO", logger="kchannel")
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("lost"), partitions=2)
    produce(bootstrap, topic, [(b"k%d" % i, b"%d" % i, [], None) for i in range(40)])
    everything = {TP(topic, 0), TP(topic, 1)}
    group = f"g-{topic}"
    cfg = {"bootstrap.servers": bootstrap, "group.id": group,
           "auto.offset.reset": "earliest",
           # Auto-commit on, but never due by time during the test: the only
           # automatic commit left is the one before a rebalance, which the
           # lost path must skip.
           "enable.auto.commit": True, "auto.commit.interval.ms": 600_000, "session.timeout.ms": SESSION_MS,
           "heartbeat.interval.ms": 500, "partition.assignment.strategy": assignor}
    events = _Events(with_lost)
    a = Consumer(cfg)
    try:
        a.subscribe([topic], listener=events)
        _consume_until(a, lambda: set(a.assignment()) == everything, "the first assignment")
        # Read everything so that a commit by the fenced member would be visible.
        ends = a.end_offsets(sorted(everything))
        assert sum(ends.values()) == 40
        _consume_until(a, lambda: all(a.position(tp) == ends[tp] for tp in everything),
                       "all records read")
        a.commit()
        assert events.calls == [("assigned", everything)]

        # A stops polling: heartbeats stop and the coordinator expires the session.
        # Meanwhile B joins, gets everything and commits offsets of its own.
        b = Consumer(dict(cfg, **{"enable.auto.commit": False}))
        try:
            b.subscribe([topic])
            _consume_until(b, lambda: set(b.assignment()) == everything,
                           "the other member to own every partition", limit=SESSION_MS / 1000 + 60)
            b.commit({tp: min(5, ends[tp]) for tp in everything})
            # B keeps polling (and so heartbeating) while A comes back.
            stop = threading.Event()

            def keep_b():
                while not stop.is_set():
                    b.poll(0.1)
            t = threading.Thread(target=keep_b, daemon=True)
            t.start()
            try:
                # A polls again: its heartbeat is refused (UNKNOWN_MEMBER_ID),
                # its partitions are lost, then it rejoins.
                _consume_until(a, lambda: len(events.calls) >= 3, "A to be lost and reassigned")
                committed_after_a = a.committed(sorted(everything))
            finally:
                stop.set()
                t.join(30)
        finally:
            b.close()
        kind = "lost" if with_lost else "revoked"
        assert events.calls[1] == (kind, everything)
        assert events.calls[2][0] == "assigned"
        # Not "revoked" as well when the listener handles "lost".
        assert [c[0] for c in events.calls].count("revoked") == (0 if with_lost else 1)
        # The fenced member did not try to commit its stale positions (the
        # broker would refuse them: a failed commit would be logged) ...
        assert not [r for r in caplog.records if "commit" in r.getMessage().lower()]
        assert any("Lost previously assigned partitions" in r.getMessage()
                   for r in caplog.records)
        # ... and B's offsets (5) are what the group has, not the end offsets.
        assert {tp: o.offset for tp, o in committed_after_a.items()} == \
            {tp: min(5, ends[tp]) for tp in everything}
    finally:
        a.close()
