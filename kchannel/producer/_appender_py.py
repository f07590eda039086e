"""The producer's send fast path, pure-Python twin of ``kchannel._cappender``.

``Appender(path).send(...)`` has ``Producer.send``'s signature; ``path`` is
the producer's :class:`~kchannel.producer.producer.AppendPath`, the only
thing the fast path touches.  Every record shape is appended here: no key
or a bytes key, a bytes or null value, an explicit partition, an explicit
timestamp, headers (``str`` keys, bytes or null values), a callback, and any
combination.  A record that opens a new batch goes through the
accumulator's ``append`` from here too, and a sticky partition that is due
to move on moves on through the partitioner's ``update``.

What still takes ``path.send_slow`` (Kafka's whole ``doSend``): a topic whose
metadata is not known yet (or a partition beyond the known count), key or
value serializers, a key, value or header that is not bytes (str, bytearray:
the serializer converts or rejects them), a record too large, a closed or
failed producer.  Both paths build the same record, append it to the same
batch through the same accumulator and partitioner state, so a record's
bytes, future, offset and order do not depend on the path.

Why a fast path at all: at ~100 B records the producer's cost is the Python
work per ``send()``, not the wire (see README, Benchmarks).
"""
import time as _time

from kchannel.log import get_logger
from kchannel.producer.accumulator import (FutureRecordMetadata, ProducerBatch,
                                          RECORD_OVERHEAD_EXTRA_MAX, RecordMetadata,
                                          _varint_size)
from kchannel.client.metadata import TopicPartition
from kchannel.producer._partitioner_py import partition_for_key
from kchannel.protocol.records import RECORD_BATCH_OVERHEAD, QueuedRecord

__all__ = ["Appender", "run_callbacks", "track_batch"]

_NO_HEADERS = ()
_new_metadata = object.__new__
# The callbacks run for the accumulator's batches: its logger.
_log = get_logger("kchannel.producer.accumulator")


def track_batch(batch):
    """Put ``batch`` back on the garbage collector's lists before it can
    hold what may refer back to it (a record's callback, a future's done
    callback).  Here nothing: this twin never takes a batch off them (the
    compiled twin's batches opened without a callback are off them)."""


def run_callbacks(callbacks, topic, partition, base_offset, log_append_time, records, sizes):
    """The callbacks of a batch acknowledged as a whole (``ProducerBatch``'s
    ``callbacks``, a list by record index, None for a record without one),
    in record order, each with its
    record's ``RecordMetadata``: offset ``base_offset + index`` (-1 when
    the base offset is unknown), timestamp the log append time when there
    is one (>= 0), else the record's; what is the same for the whole batch
    is read once.  A callback that raises is logged, the next ones still
    run.  Per record only its metadata is built (a callback per record is a
    common shape: the compiled twin saves the loop's interpretation and
    builds the metadata without a Python call)."""
    new = _new_metadata
    for i, callback in enumerate(callbacks):
        if callback is None:
            continue
        md = new(RecordMetadata)
        md.topic = topic
        md.partition = partition
        md.offset = base_offset + i if base_offset >= 0 else -1
        md.timestamp = log_append_time if log_append_time >= 0 else records[i].timestamp
        md.serialized_key_size, md.serialized_value_size = sizes[i]
        try:
            callback(md, None)
        except Exception:
            _log.exception("Error executing user-provided callback on message for "
                           "topic-partition")


def _headers(headers):
    """``(headers as a tuple of (key, value) tuples, their exact encoded
    size, count included)``, or ``(None, 0)`` when a header needs the full path (a value
    that is not bytes or None, a key that is not str, not a pair).

    A tuple of tuples holding only str and bytes is untracked by the
    garbage collector at its first pass, so the headers of the records
    waiting in the accumulator do not make every collection longer.  The
    caller's tuples are shared (they are immutable); a list is copied."""
    size = 0
    n = 0
    convert = False
    try:
        for h in headers:
            n += 1
            if type(h) is not tuple:
                convert = True
            k, v = h
            if type(k) is not str:
                return None, 0
            if v is None:
                size += 1
            elif type(v) is bytes:
                size += _varint_size(len(v) << 1) + len(v)
            else:
                return None, 0
            ks = len(k) if k.isascii() else len(k.encode("utf-8"))
            size += _varint_size(ks << 1) + ks
    except (TypeError, ValueError):
        return None, 0
    size += _varint_size(n << 1)
    if convert:
        return tuple([(k, v) for k, v in headers]), size
    return (headers if type(headers) is tuple else tuple(headers)), size


def _same_items(headers, cached):
    """Whether the list or tuple ``headers`` holds exactly the objects of
    ``cached`` (identity: the items are tuples of str and bytes, immutable,
    so the same objects are the same headers)."""
    if headers is cached:
        return True
    if len(headers) != len(cached):
        return False
    for a, b in zip(headers, cached):
        if a is not b:
            return False
    return True


class Appender:
    __slots__ = ("_acc", "_lock", "_batches", "_batch_size", "_metadata", "_time",
                 "_partitioner", "_sticky", "_sticky_lock", "_sticky_shared", "_sticky_size",
                 "_sender", "_slow",
                 "_enabled", "_ignore_keys", "_size_limit", "_max_block_ms", "_topic",
                 "_cluster", "_count", "_tps", "_dqs", "_sizes", "_headers", "_headers_size",
                 "_avail", "_choice", "_touched_topic", "_touched_ms")

    def __init__(self, path):
        acc = path.accumulator
        self._acc = acc
        self._lock = acc.lock
        self._batches = acc.batches
        self._batch_size = acc.batch_size
        self._metadata = path.metadata
        self._time = path.time
        partitioner = path.partitioner
        self._partitioner = partitioner
        self._sticky = partitioner.state
        self._sticky_lock = partitioner.lock
        # The producer's partitioner shares the accumulator's lock (see
        # AppendPath): the sticky count then goes with the append.
        self._sticky_shared = partitioner.lock is acc.lock
        self._sticky_size = partitioner.sticky_batch_size
        self._sender = path.sender
        self._slow = path.send_slow
        # Serializers are user code: their records take the full path.
        self._enabled = not path.serializers
        self._ignore_keys = path.ignore_keys
        self._size_limit = path.size_limit
        self._max_block_ms = path.max_block_ms
        self._topic = None
        self._cluster = None
        self._count = 0
        self._tps = None
        self._dqs = None
        self._sizes = (-2, -2)
        # The headers tuple made last and its size: an application that
        # sends the same headers again (a constant list, or the same
        # header tuples in a new list) shares that tuple, with no walk,
        # no sizing and no new tuple per record.  Only tuples of the
        # caller's own (immutable) header tuples are kept.
        self._headers = None
        self._headers_size = 0
        # The partitions the sticky partitioner draws among for the topic
        # (per cluster, which is immutable) and its draw (see send); None:
        # its update() moves on.
        self._avail = None
        rng = getattr(partitioner, "random", None)
        self._choice = rng.choice if rng is not None else None
        # The topic and time (ms) add_topic was last called with.
        self._touched_topic = None
        self._touched_ms = 0

    def _open(self, dq, last, tp, record, body, callback, sizes, allocation):
        """A new batch for ``record`` at the end of ``dq`` (after ``last``,
        its last batch, which has no room), opened as the accumulator's
        append opens it when buffer.memory has room and no one waits for
        it: the memory taken, ``last`` closed, the batch made with the
        record in it, queued and counted incomplete.  None, with nothing
        changed, in every other case (closed, memory short or waited for,
        a transaction's ``on_new_batch``): the caller then goes through the
        accumulator's append (blocking, max.block.ms, errors).  Call with
        the accumulator's lock held.

        Why here: a record that opens a batch (one in ~15 at 1 KiB and
        Kafka's batch.size) cost ~45 k instructions more than one that joins
        a batch, mostly the interpreted calls of the append path (append,
        room_for, record_size, ProducerBatch.append, the future's
        __init__) around the batch's making."""
        acc = self._acc
        if acc.closed or acc.on_new_batch is not None or acc.waiters or \
                acc.used_memory + allocation > acc.buffer_memory:
            return None
        acc.used_memory += allocation
        if last is not None:
            last.closed = True
        batch = ProducerBatch(tp, self._time(), allocation)
        # The record's exact size as a batch's first (offset and timestamp
        # deltas 0: a byte each), accumulator.record_size(body, 0, 0).
        rs = body + 2
        rs += 1 if rs < 64 else 2 if rs < 8192 else _varint_size(rs << 1)
        batch.records.append(record)
        batch.sizes.append(sizes)
        if callback is not None:
            batch.callbacks = [callback]
        batch.estimated_size += rs
        dq.append(batch)
        acc.incomplete.add(batch)
        return batch

    def send(self, topic, value=None, key=None, headers=None, partition=None,
             timestamp_ms=None, callback=None):
        if (not self._enabled or
                (value is not None and type(value) is not bytes) or
                (key is not None and type(key) is not bytes) or
                (timestamp_ms is not None and type(timestamp_ms) is not int) or
                self._acc.closed or self._sender.fatal_error is not None):
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
            self._dqs = [None] * count
            self._avail = _available(cluster, topic, count) \
                if self._choice is not None else None
        ks = len(key) if key is not None else -1
        vs = len(value) if value is not None else -1
        # The record's exact size but for its offset and timestamp deltas and
        # its length (accumulator.record_body_size): attributes, key, value
        # (a null's length -1 and lengths below 64 take one byte), headers.
        body = 1 + (ks + (1 if ks < 64 else _varint_size(ks << 1)) if ks > 0 else 1) + \
            (vs + (1 if vs < 64 else 2 if vs < 8192 else _varint_size(vs << 1))
             if vs > 0 else 1)
        if headers:
            # A list or tuple only: the full path must still see every
            # header if this one bails out (a generator would be spent).
            if type(headers) is not list and type(headers) is not tuple:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            if self._headers is not None and _same_items(headers, self._headers):
                hs = self._headers
                hsize = self._headers_size
            else:
                hs, hsize = _headers(headers)
                if hs is None:
                    return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                      callback)
                if all(a is b for a, b in zip(hs, headers)):
                    self._headers = hs
                    self._headers_size = hsize
            body += hsize
        else:
            hs = _NO_HEADERS
            body += 1
        # The upper bound: the size limits and the sticky partitioner's count.
        size = body + RECORD_OVERHEAD_EXTRA_MAX
        if size + RECORD_BATCH_OVERHEAD > self._size_limit:
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        sticky = None
        if partition is not None:
            if type(partition) is not int or not 0 <= partition < self._count:
                # The full path waits for a larger partition count or raises.
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            p = partition
        elif key is not None and not self._ignore_keys:
            p = partition_for_key(key, self._count)
        else:
            sticky = self._sticky.get(topic)
            if sticky is None or sticky[0] is None:
                p = self._partitioner.partition(topic, cluster)
                sticky = self._sticky[topic]
            else:
                p = sticky[0]
        if timestamp_ms is None:
            timestamp_ms = int(_time.time() * 1000)
        record = QueuedRecord(timestamp_ms, key, value, hs)
        full = False
        opened = None
        with self._lock:
            if self._acc.closed:
                future = None
            else:
                # A partition's deque stays the same object once made
                # (AppendPath): kept per partition, no dict lookup (and
                # TopicPartition hash) per record.
                dq = self._dqs[p]
                if dq is None:
                    dq = self._dqs[p] = self._batches.get(self._tps[p])
                batch = dq[-1] if dq else None
                future = None
                room = False
                if batch is not None and not batch.closed:
                    # ProducerBatch.room_for, inlined: the record's exact
                    # size at its offset delta (the records so far) and
                    # timestamp delta.
                    records = batch.records
                    index = len(records)
                    td = timestamp_ms - records[0].timestamp if index else 0
                    rs = body + (1 if index < 64 else 2 if index < 8192 else
                                 _varint_size(index << 1)) + \
                        (1 if -64 <= td < 64 else 2 if -8192 <= td < 8192 else
                         _varint_size((td << 1) ^ (td >> 63)))
                    rs += 1 if rs < 64 else 2 if rs < 8192 else _varint_size(rs << 1)
                    room = batch.estimated_size + rs <= self._batch_size
                if room:
                    # ProducerBatch.append, inlined.
                    records.append(record)
                    # Records of one shape share their (key, value) sizes
                    # tuple (immutable).
                    sizes = self._sizes
                    if sizes[0] != ks or sizes[1] != vs:
                        sizes = self._sizes = (ks, vs)
                    batch.sizes.append(sizes)
                    if callback is not None:
                        # (see ProducerBatch.callbacks: None up to index)
                        callbacks = batch.callbacks
                        if callbacks is None:
                            callbacks = batch.callbacks = []
                        if len(callbacks) < index:
                            callbacks.extend([None] * (index - len(callbacks)))
                        callbacks.append(callback)
                    batch.estimated_size += rs
                    full = batch.estimated_size >= self._batch_size
                    future = FutureRecordMetadata(batch, index)
                    if sticky is not None and self._sticky_shared and sticky[0] == p and \
                            sticky[1] + size < self._sticky_size:
                        sticky[1] += size
                        sticky = None
                elif dq is not None and (batch is None or type(batch) is ProducerBatch):
                    # A new batch, opened here when the accumulator's append
                    # would open it without waiting (see _open).
                    sizes = self._sizes
                    if sizes[0] != ks or sizes[1] != vs:
                        sizes = self._sizes = (ks, vs)
                    opened = self._open(dq, batch, self._tps[p], record, body, callback,
                                        sizes, max(self._batch_size,
                                                   size + RECORD_BATCH_OVERHEAD))
                    if opened is not None:
                        future = FutureRecordMetadata(opened, 0)
                        full = True
                        if sticky is not None and self._sticky_shared and \
                                sticky[0] == p and sticky[1] + size < self._sticky_size:
                            sticky[1] += size
                            sticky = None
        if future is None:
            # A new batch: the accumulator's own append (memory budget,
            # max.block.ms), when _open could not open it.  It is also where
            # the topic is kept in the metadata (Kafka's doSend touches it on
            # every send; see below for the batches opened here).
            if self._acc.closed:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            self._metadata.add_topic(topic, self._time())
            self._touched_topic = None
            future, full, new_batch = self._acc.append(
                self._tps[p], record, body, callback, ks, vs, self._max_block_ms)
            full = full or new_batch
        elif opened is not None:
            # Keeps the topic in the metadata for the batches opened here:
            # at most once a second per topic (well within
            # metadata.max.idle.ms), not a call per batch.
            now = int(_time.time() * 1000)
            if topic != self._touched_topic or now - self._touched_ms >= 1000:
                self._metadata.add_topic(topic, self._time())
                self._touched_topic = topic
                self._touched_ms = now
        if sticky is not None:
            with self._sticky_lock:
                if sticky[0] == p:
                    if sticky[1] + size < self._sticky_size:
                        sticky[1] += size
                        sticky = None
                    elif self._avail is not None:
                        # A batch's worth went to this partition: move on
                        # as the partitioner's update and _choose do (one
                        # available partition: no draw; else random.choice
                        # among the others), without their calls and the
                        # available list made per batch.
                        avail = self._avail
                        if len(avail) == 1:
                            sticky[0] = avail[0]
                        else:
                            sticky[0] = self._choice([q for q in avail if q != p] or avail)
                        sticky[1] = 0
                        sticky = None
            if sticky is not None:
                # A batch's worth went to this partition: move on (random
                # choice among the available partitions).
                self._partitioner.update(topic, p, size, cluster)
        # Wake the Sender when this record filled the batch or opened one.
        # Kafka's append also wakes it while an older full batch is undrained
        # (dq.size() > 1); that batch's creation already woke it, so here
        # that would only be a wakeup per record.
        # Sender.wakeup wakes the network thread only when the accumulator's
        # wakeup_needed is set; most batches are opened or filled while it
        # is awake (the call would be for nothing).
        if full and self._acc.wakeup_needed:
            self._sender.wakeup()
        return future


def _available(cluster, topic, count):
    """The partitions the sticky partitioner's _choose draws among for
    ``topic`` in ``cluster``: its available ones, all when none is."""
    return [x.partition for x in cluster.available_partitions_for_topic(topic)] or \
        list(range(count))
