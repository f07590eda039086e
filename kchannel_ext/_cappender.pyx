# cython: language_level=3, boundscheck=False, wraparound=True, cdivision=True
"""The producer's send fast path, compiled twin of
``kchannel.producer._appender_py`` (same class, same behaviour; read that
module's docstring for what takes the fast path and why).

What the compiled twin saves per record: attribute lookups (C fields),
the wall-clock read (``clock_gettime`` instead of ``time.time()``), the
murmur2 call (``kchannel._cpartitioner``'s C function) and the lock's
context-manager protocol (bound ``acquire``/``release`` called directly).
The accumulator's lock is still taken: the Sender drains batches under it
on its own thread, and a garbage collection triggered by an allocation here
can run arbitrary finalizers, so the GIL alone is not relied upon.
"""
from cpython.list cimport PyList_GET_SIZE
from libc.stdint cimport int64_t
from posix.time cimport clock_gettime, timespec, CLOCK_REALTIME

from kchannel._cpartitioner import partition_for_key as _partition_for_key
from kchannel.client.metadata import TopicPartition
from kchannel.producer.accumulator import FutureRecordMetadata
from kchannel.protocol.records import RECORD_BATCH_OVERHEAD

__all__ = ["Appender"]

_new_future = object.__new__

cdef Py_ssize_t _RECORD_OVERHEAD_MAX = 36
cdef tuple _NO_HEADERS = ()


cdef inline int64_t _now_ms() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef class Appender:
    cdef object _producer, _acc, _acquire, _release, _sticky_acquire, _sticky_release
    cdef dict _batches, _sticky
    cdef Py_ssize_t _batch_size, _sticky_size, _size_limit, _count
    cdef object _metadata, _sender, _slow, _cluster
    cdef bint _enabled, _ignore_keys
    cdef object _topic
    cdef list _tps

    def __init__(self, producer):
        self._producer = producer
        acc = producer.accumulator
        self._acc = acc
        self._acquire = acc.lock.acquire
        self._release = acc.lock.release
        self._batches = acc.batches
        self._batch_size = acc.batch_size
        self._metadata = producer.metadata
        self._sticky = producer._partitioner._state
        self._sticky_acquire = producer._partitioner._lock.acquire
        self._sticky_release = producer._partitioner._lock.release
        self._sticky_size = producer._partitioner.sticky_batch_size
        self._sender = producer._sender
        self._slow = producer._send_slow
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
        cdef Py_ssize_t ks, vs, size, p, index
        cdef list sticky = None
        cdef list records
        cdef bint full = False
        if (not self._enabled or headers or partition is not None or
                timestamp_ms is not None or
                (value is not None and type(value) is not bytes) or
                (key is not None and type(key) is not bytes) or
                self._producer._closed or self._sender.fatal_error is not None):
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        cluster = self._metadata.cluster
        if cluster is not self._cluster or topic != self._topic:
            count = cluster.partition_count(topic)
            if not count:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            self._topic = topic
            self._cluster = cluster
            self._count = count
            self._tps = [TopicPartition(topic, i) for i in range(count)]
        ks = len(<bytes>key) if key is not None else -1
        vs = len(<bytes>value) if value is not None else -1
        size = _RECORD_OVERHEAD_MAX + (ks if ks > 0 else 0) + (vs if vs > 0 else 0)
        if size + RECORD_BATCH_OVERHEAD > self._size_limit:
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        if key is not None and not self._ignore_keys:
            p = _partition_for_key(key, self._count)
        else:
            sticky = self._sticky.get(topic)
            if sticky is None or sticky[0] is None or \
                    <Py_ssize_t>sticky[1] + size >= self._sticky_size:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            p = sticky[0]
        future = None
        self._acquire()
        try:
            if not self._acc.closed:
                dq = self._batches.get(self._tps[p])
                batch = dq[-1] if dq else None
                if batch is not None and not batch.closed and \
                        <Py_ssize_t>batch.estimated_size + size <= self._batch_size:
                    records = batch.records
                    index = PyList_GET_SIZE(records)
                    records.append((_now_ms(), key, value, _NO_HEADERS))
                    batch.sizes.append((ks, vs))
                    if callback is not None:
                        if batch.callbacks is None:
                            batch.callbacks = []
                        batch.callbacks.append((index, callback))
                    batch.estimated_size += size
                    full = <Py_ssize_t>batch.estimated_size >= self._batch_size
                    future = _new_future(FutureRecordMetadata)
                    future._batch = batch
                    future._index = index
                    future._failed = None
        finally:
            self._release()
        if future is None:
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        if sticky is not None:
            self._sticky_acquire()
            try:
                if sticky[0] == p:
                    sticky[1] += size
            finally:
                self._sticky_release()
        # Wake the Sender when this record filled the batch.  Kafka's
        # append also wakes it while an older full batch is undrained
        # (dq.size() > 1); that batch's creation already woke it (full
        # path), so here that would only be a wakeup per record.
        if full:
            self._sender.wakeup()
        return future
