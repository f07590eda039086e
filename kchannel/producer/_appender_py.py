"""The producer's send fast path, pure-Python twin of ``kchannel._cappender``.

``Appender(producer).send(...)`` has ``Producer.send``'s signature.  The
common record (bytes or no key, bytes value, no headers, no explicit
partition or timestamp, a topic whose metadata is known, and room in the
partition's open batch) is appended here with the least work per record;
everything else (the first record of a batch, a sticky partition that is
due to move on, serializers, headers, size errors, a closed producer) goes
to ``producer._send_slow``, which is Kafka's full ``doSend``.  Both paths
leave the accumulator, the sticky partitioner and the batch in the same
state, so a record's future, offset and order do not depend on the path.

Why a fast path at all: at ~100 B records the producer's cost is the Python
work per ``send()``, not the wire (see README, Benchmarks).
"""
import time as _time

from kchannel.producer.accumulator import FutureRecordMetadata
from kchannel.client.metadata import TopicPartition
from kchannel.producer._partitioner_py import partition_for_key
from kchannel.protocol.records import RECORD_BATCH_OVERHEAD

__all__ = ["Appender"]

# Kafka's DefaultRecord.sizeInBytes upper bound for a record without headers
# (accumulator._RECORD_OVERHEAD_MAX).
_RECORD_OVERHEAD_MAX = 36
_NO_HEADERS = ()


class Appender:
    __slots__ = ("_producer", "_acc", "_lock", "_batches", "_batch_size", "_metadata",
                 "_sticky", "_sticky_lock", "_sticky_size", "_sender", "_slow", "_enabled",
                 "_ignore_keys", "_size_limit", "_topic", "_cluster", "_count", "_tps")

    def __init__(self, producer):
        self._producer = producer
        acc = producer.accumulator
        self._acc = acc
        self._lock = acc.lock
        self._batches = acc.batches
        self._batch_size = acc.batch_size
        self._metadata = producer.metadata
        self._sticky = producer._partitioner._state
        self._sticky_lock = producer._partitioner._lock
        self._sticky_size = producer._partitioner.sticky_batch_size
        self._sender = producer._sender
        self._slow = producer._send_slow
        # Serializers are user code: their records take the full path.
        self._enabled = (producer._key_serializer is None and
                         producer._value_serializer is None)
        self._ignore_keys = bool(producer.config["partitioner.ignore.keys"])
        self._size_limit = producer._size_limit
        self._topic = None
        self._cluster = None
        self._count = 0
        self._tps = None

    def send(self, topic, value=None, key=None, headers=None, partition=None,
             timestamp_ms=None, callback=None):
        if (not self._enabled or headers or partition is not None or
                timestamp_ms is not None or
                (value is not None and type(value) is not bytes) or
                (key is not None and type(key) is not bytes) or
                self._producer._closed or self._sender.fatal_error is not None):
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        cluster = self._metadata.cluster
        if topic != self._topic or cluster is not self._cluster:
            count = cluster.partition_count(topic)
            if not count:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            self._topic = topic
            self._cluster = cluster
            self._count = count
            self._tps = [TopicPartition(topic, p) for p in range(count)]
        ks = len(key) if key is not None else -1
        vs = len(value) if value is not None else -1
        size = _RECORD_OVERHEAD_MAX + (ks if ks > 0 else 0) + (vs if vs > 0 else 0)
        if size + RECORD_BATCH_OVERHEAD > self._size_limit:
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        sticky = None
        if key is not None and not self._ignore_keys:
            p = partition_for_key(key, self._count)
        else:
            sticky = self._sticky.get(topic)
            # The sticky partition moves on with the full path (it picks the
            # next one at random among the available partitions).
            if sticky is None or sticky[0] is None or \
                    sticky[1] + size >= self._sticky_size:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            p = sticky[0]
        with self._lock:
            if self._acc.closed:
                future = None
            else:
                dq = self._batches.get(self._tps[p])
                batch = dq[-1] if dq else None
                if batch is None or batch.closed or \
                        batch.estimated_size + size > self._batch_size:
                    future = None
                else:
                    # ProducerBatch.append, inlined.
                    records = batch.records
                    index = len(records)
                    records.append((int(_time.time() * 1000), key, value, _NO_HEADERS))
                    batch.sizes.append((ks, vs))
                    if callback is not None:
                        if batch.callbacks is None:
                            batch.callbacks = []
                        batch.callbacks.append((index, callback))
                    batch.estimated_size += size
                    full = batch.estimated_size >= self._batch_size
                    future = FutureRecordMetadata(batch, index)
        if future is None:
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        if sticky is not None:
            with self._sticky_lock:
                if sticky[0] == p:
                    sticky[1] += size
        # Wake the Sender when this record filled the batch.  Kafka's
        # append also wakes it while an older full batch is undrained
        # (dq.size() > 1); that batch's creation already woke it (full
        # path), so here that would only be a wakeup per record.
        if full:
            self._sender.wakeup()
        return future
