"""Kafka's built-in partitioning (``BuiltInPartitioner``): a key goes to
``toPositive(murmur2(key)) % partitions`` (the compiled or pure twin, same
partition as the Java client), a record without key to the topic's sticky
partition, which changes once ``batch.size`` bytes were sent to it (KIP-480
and KIP-794 without the adaptive weighting by broker queue sizes).
"""
import random
import threading

from kchannel._impl import load as _load

_twin = _load("kchannel.producer._partitioner_py", "kchannel._cpartitioner")
murmur2 = _twin.murmur2
partition_for_key = _twin.partition_for_key

__all__ = ["murmur2", "partition_for_key", "StickyPartitioner"]


class StickyPartitioner:
    """Per topic: the current sticky partition and the bytes produced to it.

    ``state`` (topic -> ``[partition, bytes produced]``) and ``lock`` are
    public for the producer's per-record path (``Appender``): it reads the
    sticky partition and adds a record's size under ``lock`` without a call,
    and moves on as ``update``/``_choose`` do (``random.choice`` among the
    topic's available partitions but the current one, none drawn when only
    one is available), calling ``partition`` only to start.  A topic's
    list, once made, is changed in place, never replaced (the compiled
    appender keeps it)."""

    def __init__(self, batch_size, rng=None, lock=None):
        self.sticky_batch_size = max(1, batch_size)
        self.state = {}           # topic -> [partition, bytes produced]
        # The producer passes its accumulator's lock: the per-record path
        # then counts a record's bytes under the lock it appends under,
        # one lock per record instead of two.
        self.lock = lock if lock is not None else threading.Lock()
        # Public for the per-record path: a topic's partition moves on with
        # random.choice among the others (see _choose), drawn from this.
        self.random = self._random = rng or random.Random()

    def partition(self, topic, cluster):
        with self.lock:
            state = self.state.get(topic)
            if state is None:
                state = self.state[topic] = [self._choose(topic, cluster, None), 0]
            elif state[0] is None:
                state[0] = self._choose(topic, cluster, None)
            return state[0]

    def _choose(self, topic, cluster, previous):
        available = [p.partition for p in cluster.available_partitions_for_topic(topic)]
        if not available:
            count = cluster.partition_count(topic) or 1
            available = list(range(count))
        if len(available) == 1:
            # No choice to make (a topic of one partition moves on to the
            # same one at every batch): no random draw.
            return available[0]
        if previous is not None:
            available = [p for p in available if p != previous] or available
        return self._random.choice(available)

    def update(self, topic, partition, appended_bytes, cluster):
        """Count ``appended_bytes`` for ``partition``; move on once a batch's
        worth was produced to it."""
        with self.lock:
            state = self.state.get(topic)
            if state is None or state[0] != partition:
                return
            state[1] += appended_bytes
            if state[1] >= self.sticky_batch_size:
                state[0] = self._choose(topic, cluster, partition)
                state[1] = 0
