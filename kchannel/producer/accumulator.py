"""Kafka's ``RecordAccumulator`` and ``ProducerBatch``: records wait here,
per partition, until a batch is full or ``linger.ms`` has passed; the
Sender drains ready batches per leader node.

Thread-safety: ``append`` runs on application threads, everything else on
the Sender's thread; one lock guards the deques, a condition the memory
budget (``buffer.memory``).
"""
import asyncio
import collections
import concurrent.futures
import threading

from kchannel._impl import load as _load_twin
from kchannel.client import RequestTimeoutError
from kchannel.log import get_logger
# (guards a batch's done flag, done callbacks and event; the senderloop
# twin's complete_batch takes it too)
from kchannel.producer._done_lock import DONE_LOCK as _DONE_LOCK
from kchannel.protocol.records import RECORD_BATCH_OVERHEAD, QueuedRecord

_senderloop = _load_twin("kchannel.producer._senderloop_py", "kchannel.producer._csenderloop")

__all__ = ["RecordMetadata", "FutureRecordMetadata", "ProducerBatch", "RecordAccumulator",
           "QueuedRecord",
           "estimate_record_size", "record_body_size", "record_size",
           "RECORD_OVERHEAD_EXTRA_MAX"]

log = get_logger("kchannel.producer.accumulator")

# What a v2 record's length, timestamp delta and offset delta take at most
# beyond their smallest (1 byte each, counted by record_size): Kafka's
# DefaultRecord.MAX_RECORD_OVERHEAD (21) less the attributes byte, which
# record_body_size counts.  Used for the upper bound only (memory,
# max.request.size), never to fill a batch.
RECORD_OVERHEAD_EXTRA_MAX = 20


def _varint_size(zigzag):
    """Bytes of the varint of a non-negative (zigzag-encoded) value."""
    return (zigzag.bit_length() + 6) // 7 or 1


def record_body_size(key, value, headers):
    """The exact size of the part of a v2 record that does not depend on
    its place in a batch: attributes, key, value and headers (Kafka's
    ``DefaultRecord.sizeOf`` plus the attributes byte)."""
    size = 1
    size += 1 if key is None else _varint_size(len(key) << 1) + len(key)
    size += 1 if value is None else _varint_size(len(value) << 1) + len(value)
    size += _varint_size(len(headers) << 1) if headers else 1
    if headers:
        for k, v in headers:
            n = len(k.encode("utf-8"))
            size += _varint_size(n << 1) + n
            size += 1 if v is None else _varint_size(len(v) << 1) + len(v)
    return size


def record_size(body, offset_delta, timestamp_delta):
    """A v2 record's exact encoded size (Kafka's
    ``DefaultRecord.sizeInBytes``): ``body`` from record_body_size, the
    record's offset and timestamp deltas from its batch's first record."""
    # The usual one-byte deltas and two-byte lengths without a call
    # (once per batch opened by send(), twice per record on the full path).
    size = body + (1 if 0 <= offset_delta < 64 else _varint_size(offset_delta << 1)) + \
        (1 if -64 <= timestamp_delta < 64 else
         _varint_size((timestamp_delta << 1) ^ (timestamp_delta >> 63)))
    return size + (2 if 64 <= size < 8192 else _varint_size(size << 1))


def estimate_record_size(key, value, headers):
    """Upper bound of one record's encoded size, wherever it lands in a
    batch (Kafka's ``DefaultRecord.recordSizeUpperBound``)."""
    return record_body_size(key, value, headers) + RECORD_OVERHEAD_EXTRA_MAX


class RecordMetadata:
    """Where a record was written (Kafka's ``RecordMetadata``)."""

    __slots__ = ("topic", "partition", "offset", "timestamp", "serialized_key_size",
                 "serialized_value_size")

    def __init__(self, topic, partition, offset, timestamp, serialized_key_size,
                 serialized_value_size):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size

    def __repr__(self):
        return f"RecordMetadata({self.topic}-{self.partition}@{self.offset})"

    def __str__(self):
        return f"{self.topic}-{self.partition}@{self.offset}"


class FutureRecordMetadata:
    """The result of ``Producer.send``: a future of :class:`RecordMetadata`
    with the ``concurrent.futures.Future`` methods (``result``,
    ``exception``, ``done``, ``add_done_callback``) and ``get(timeout)``
    (the Java and kafka-python name).

    Light by design (one per record): it points at its batch, which holds
    the one event every record of the batch waits on, and builds its
    RecordMetadata when asked.

    Awaitable (``await future`` in a coroutine gives the RecordMetadata or
    raises the error): ``kchannel.aio.AIOProducer.send`` returns these, and
    a sync producer's can be awaited too.  The asyncio future that wakes the
    awaiting task is made only when a record is awaited before it is done;
    cancelling the await leaves the record to be sent."""

    __slots__ = ("_batch", "_index", "_failed")

    def __init__(self, batch=None, index=0, failed=None):
        self._batch = batch
        self._index = index
        self._failed = failed

    def done(self):
        return self._failed is not None or self._batch.done_flag

    def cancelled(self):
        return False

    def running(self):
        return not self.done()

    def cancel(self):
        return False

    def _wait(self, timeout):
        if self._failed is not None or self._batch.done_flag:
            return
        if not self._batch.wait(timeout):
            raise concurrent.futures.TimeoutError(
                f"The record was not acknowledged within {timeout} s")

    def exception(self, timeout=None):
        self._wait(timeout)
        if self._failed is not None:
            return self._failed
        batch = self._batch
        if batch.split_results is not None:
            return batch.split_results[self._index][2]
        return batch.exception

    def result(self, timeout=None):
        self._wait(timeout)
        if self._failed is not None:
            raise self._failed
        batch = self._batch
        if batch.exception is not None:
            raise batch.exception
        if batch.split_results is not None:
            exc = batch.split_results[self._index][2]
            if exc is not None:
                raise exc
        return batch.metadata(self._index)

    get = result

    def __await__(self):
        batch = self._batch
        if batch is not None and batch.done_flag and batch.exception is None and \
                batch.split_results is None:
            # Acknowledged already, the usual case by the time an
            # application awaits a record: its metadata (ProducerBatch.
            # metadata's common case inline), with none of result()'s checks
            # for the other cases.  (No closure here: a function's cells
            # are made on every call, whichever path it takes.)
            i = self._index
            topic, partition = batch.tp
            ts = batch.log_append_time
            ks, vs = batch.sizes[i]
            return RecordMetadata(topic, partition, batch.base_offset + i if batch.base_offset >= 0
                                  else -1, ts if ts >= 0 else batch.records[i].timestamp, ks, vs)
        if self._failed is None and not batch.done_flag:
            yield from _await_done(self)
        return self.result()

    def add_done_callback(self, fn):
        """``fn(future)`` once the record is acknowledged or failed (on the
        producer's network thread, or at once if it already is)."""
        if self._failed is None:
            batch = self._batch
            with _DONE_LOCK:
                if not batch.done_flag:
                    if batch.done_callbacks is None:
                        batch.done_callbacks = []
                    batch.done_callbacks.append((fn, self))
                    # (fn may hold what refers back to the batch: see
                    # track_batch)
                    (_track_batch or _load_track_batch())(batch)
                    return
        try:
            fn(self)
        except Exception:
            log.exception("Error in a done callback of a record future")


def _await_done(future):
    """Suspends the awaiting task until ``future`` (a FutureRecordMetadata)
    is done: the asyncio future that wakes it is made only here."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def wake(_future):
        # On the loop's thread (kchannel.aio) wake the task at once; from a
        # sync producer's network thread through the loop.
        if asyncio._get_running_loop() is loop:
            _wake(waiter)
        else:
            loop.call_soon_threadsafe(_wake, waiter)
    future.add_done_callback(wake)
    yield from waiter.__await__()


def _wake(waiter):
    if not waiter.done():       # (cancelled by its task)
        waiter.set_result(None)


class ProducerBatch(_senderloop.BatchState):
    """Records for one partition sent together (Kafka's ``ProducerBatch``)."""

    # (its base class holds the fields only the Sender's side uses per
    # request: encoded, producer_id, producer_epoch, base_sequence,
    # attempts, event, done_callbacks, parent, retry; C fields when
    # compiled, see BatchState)
    __slots__ = ("tp", "created_ms", "records", "callbacks", "sizes", "estimated_size",
                 "allocated", "last_attempt_ms", "drained_ms", "done_flag", "closed",
                 "base_offset", "log_append_time", "exception", "split_results",
                 "split_pending")

    def __init__(self, tp, now, allocated):
        self.tp = tp
        self.created_ms = now
        self.records = []
        # The records' callbacks by index, None for a record sent without
        # one, up to the last record sent with one (shorter than records
        # when the last ones have none); None while no record has one.  A
        # list, not a dict {index: callback} (an insertion with its hash,
        # its int key and the table's growth: ~250 instructions a record
        # against ~30 for an append), nor a list of pairs (a new object
        # per record for the garbage collector to track while it waits).
        self.callbacks = None
        self.sizes = []           # (key size, value size) per record
        self.estimated_size = RECORD_BATCH_OVERHEAD
        self.allocated = allocated
        self.attempts = 0
        self.last_attempt_ms = now
        self.drained_ms = now
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.encoded = None
        self.done_flag = False
        self.closed = False
        self.retry = False
        self.event = None         # made by the first wait() (see _DONE_LOCK)
        self.base_offset = -1
        self.log_append_time = -1
        self.exception = None
        self.done_callbacks = None
        # A batch split after MESSAGE_TOO_LARGE (see split): its records'
        # futures still point here; each part is a batch whose ``parent``
        # is (this batch, index of its first record), and this one
        # completes once every part has, with a result per record
        # ``split_results[i] = (offset, log append time, exception)``.
        self.parent = None
        self.split_results = None
        self.split_pending = 0

    @property
    def record_count(self):
        return len(self.records)

    def room_for(self, record, body, batch_size):
        """The exact size the QueuedRecord ``record`` (``body`` from
        record_body_size) takes appended to this batch, offset delta the
        records so far and timestamp delta from the first record's, if the
        bytes written so far plus it are within ``batch_size`` (Kafka's
        ``hasRoomFor``; a batch's first record always fits); -1 if it has
        no room or is closed.  (The appenders' fast paths inline it.)"""
        if self.closed:
            return -1
        records = self.records
        if not records:
            return record_size(body, 0, 0)
        size = record_size(body, len(records), record.timestamp - records[0].timestamp)
        return size if self.estimated_size + size <= batch_size else -1

    def append(self, record, size, callback, key_size, value_size):
        index = len(self.records)
        self.records.append(record)
        self.sizes.append((key_size, value_size))
        if callback is not None:
            callbacks = self.callbacks
            if callbacks is None:
                callbacks = self.callbacks = []
                # (a callback may hold what refers back to the batch: see
                # track_batch)
                (_track_batch or _load_track_batch())(self)
            if len(callbacks) < index:
                callbacks.extend([None] * (index - len(callbacks)))
            callbacks.append(callback)
        self.estimated_size += size
        return FutureRecordMetadata(self, index)

    def is_full(self, batch_size):
        return self.closed or self.estimated_size >= batch_size

    def has_sequence(self):
        return self.base_sequence >= 0

    def wait(self, timeout=None):
        """Block until the batch is complete; False if ``timeout`` (s)
        passed first."""
        with _DONE_LOCK:
            if self.done_flag:
                return True
            event = self.event
            if event is None:
                event = self.event = threading.Event()
        return event.wait(timeout)

    def metadata(self, i):
        topic, partition = self.tp
        if self.split_results is not None:
            offset, append_time, _exc = self.split_results[i]
            ts = append_time if append_time >= 0 else self.records[i].timestamp
            ks, vs = self.sizes[i]
            return RecordMetadata(topic, partition, offset, ts, ks, vs)
        ts = self.log_append_time if self.log_append_time >= 0 else self.records[i].timestamp
        offset = self.base_offset + i if self.base_offset >= 0 else -1
        ks, vs = self.sizes[i]
        return RecordMetadata(topic, partition, offset, ts, ks, vs)

    def complete(self, base_offset, log_append_time, exc=None):
        """Complete every record's future, then the callbacks in order;
        returns False if the batch was already done."""
        if self.done_flag:
            return False
        self.base_offset = -1 if base_offset is None else base_offset
        self.log_append_time = -1 if log_append_time is None else log_append_time
        self.exception = exc
        with _DONE_LOCK:
            self.done_flag = True
            done_callbacks, self.done_callbacks = self.done_callbacks, None
            event = self.event
        if event is not None:
            event.set()
        if self.callbacks:
            self._run_callbacks(exc)
        for fn, future in done_callbacks or ():
            try:
                fn(future)
            except Exception:
                log.exception("Error in a done callback of a record future")
        if self.parent is not None:
            self.parent[0]._part_done(self, self.parent[1])
        return True

    def split(self, batch_size, estimate):
        """Kafka's ``ProducerBatch.split``: this batch's records in batches
        of at most ``batch_size`` (exact sizes, ``estimate`` giving a
        record's record_body_size; one record at least each), in
        order, with consecutive sequences from this batch's."""
        parts = []
        part = None
        for i, record in enumerate(self.records):
            body = estimate(record.key, record.value, record.headers)
            size = part.room_for(record, body, batch_size) if part is not None else -1
            if size < 0:
                if part is not None:
                    part.closed = True
                part = ProducerBatch(self.tp, self.created_ms, 0)
                part.parent = (self, i)
                parts.append(part)
                size = record_size(body, 0, 0)
            part.records.append(record)
            part.sizes.append(self.sizes[i])
            part.estimated_size += size
        part.closed = True
        if self.has_sequence():
            seq = self.base_sequence
            for part in parts:
                part.producer_id = self.producer_id
                part.producer_epoch = self.producer_epoch
                part.base_sequence = seq
                seq = (seq + part.record_count) & 0x7FFFFFFF
        self.split_results = [(-1, -1, None)] * len(self.records)
        self.split_pending = len(parts)
        return parts

    def _part_done(self, part, start):
        results = self.split_results
        if part.split_results is not None:     # split again
            results[start:start + len(part.records)] = part.split_results
        else:
            base = part.base_offset
            exc = part.exception
            for j in range(len(part.records)):
                results[start + j] = (base + j if base >= 0 else -1, part.log_append_time, exc)
        self.split_pending -= 1
        if self.split_pending == 0:
            failed = [r[2] for r in results if r[2] is not None]
            # One exception for the batch when every record failed; per
            # record (split_results) otherwise.
            self.complete(-1, -1, failed[0] if len(failed) == len(results) else None)

    def _run_callbacks(self, exc):
        """Each record's callback, in record order (an acknowledged batch:
        the appender twin's ``run_callbacks``, compiled when built)."""
        if exc is not None:
            for callback in self.callbacks:
                if callback is not None:
                    _call(callback, None, exc)
            return
        if self.split_results is not None:
            for i, callback in enumerate(self.callbacks):
                if callback is None:
                    continue
                record_exc = self.split_results[i][2]
                if record_exc is not None:
                    _call(callback, None, record_exc)
                else:
                    _call(callback, self.metadata(i), None)
            return
        topic, partition = self.tp
        run = _run_callbacks or _load_run_callbacks()
        run(self.callbacks, topic, partition, self.base_offset, self.log_append_time,
            self.records, self.sizes)

    def __repr__(self):
        return (f"ProducerBatch(topicPartition={self.tp.topic}-{self.tp.partition}, "
                f"recordCount={len(self.records)})")


# The appender twin's run_callbacks (the per-record loop of a batch's
# callbacks), loaded at the first batch with callbacks: the twin imports
# this module, so it cannot be loaded while this one loads.
_run_callbacks = None


def _load_run_callbacks():
    global _run_callbacks
    _run_callbacks = _load_twin("kchannel.producer._appender_py",
                                "kchannel._cappender").run_callbacks
    return _run_callbacks


# The appender twin's track_batch: the compiled appender opens a batch with
# no callback off the garbage collector's lists (it holds nothing that can
# refer back to it, and every collection while it waited traversed it);
# whatever attaches a callback or a done callback to a batch puts it back
# first, so a cycle through one (a callback holding its record's future) is
# still collected.  Loaded at first use, as run_callbacks.
_track_batch = None


def _load_track_batch():
    global _track_batch
    _track_batch = _load_twin("kchannel.producer._appender_py",
                              "kchannel._cappender").track_batch
    return _track_batch


# An append short of buffer.memory waits in line (see _allocate) and re-checks
# every _WAIT_SLICE_MS besides being woken.
_WAIT_SLICE_MS = 50


def _call(callback, md, exc):
    try:
        callback(md, exc)
    except Exception:
        log.exception("Error executing user-provided callback on message for topic-partition")


def _insert_in_sequence_order(dq, batch):
    """Kafka's ``insertInSequenceOrder``: a batch that has a sequence goes
    before the first waiting batch with a higher one (or without one); a
    batch without a sequence goes to the head."""
    if not batch.has_sequence():
        dq.appendleft(batch)
        return
    i = 0
    while i < len(dq) and dq[i].has_sequence() and dq[i].base_sequence < batch.base_sequence:
        i += 1
    dq.insert(i, batch)


class RecordAccumulator(_senderloop.AccumulatorState):
    # (its base class holds the state the Sender reads per request: C
    # fields when compiled; see AccumulatorState)
    def __init__(self, batch_size, linger_ms, retry_backoff_ms, retry_backoff_max_ms,
                 delivery_timeout_ms, buffer_memory, time):
        # (the instance dict, read by accumulator_deallocate per request)
        self._instance_dict = self.__dict__
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_ms, retry_backoff_max_ms)
        self.delivery_timeout_ms = delivery_timeout_ms
        self.buffer_memory = buffer_memory
        self.time = time
        self.lock = threading.Lock()
        # (the Sender's side calls them per pass and per request)
        self._lock_acquire = self.lock.acquire
        self._lock_release = self.lock.release
        self.memory = threading.Condition(self.lock)
        self.batches = {}                  # tp -> deque of ProducerBatch
        self.incomplete = set()
        self.used_memory = 0
        self.waiters = 0
        self.muted = set()
        self.flushes_in_progress = 0
        self.closed = False
        self._drain_index = 0
        # Appends short of memory, first come first served: [size, Condition]
        self._memory_waiters = collections.deque()
        self._wake_slack = buffer_memory // 8     # see _signal_first_waiter
        # Whether the Sender may be asleep without having seen the latest
        # appends: set by each ready() scan (under the lock), cleared by the
        # Sender when its poll returns (see Sender.wakeup).
        self.wakeup_needed = True
        # Whether the last ready() scan saw a partition's oldest batch past
        # delivery.timeout.ms: the Sender then collects the expired batches
        # (expired_batches), instead of a second scan under the lock each
        # pass.
        self.expiry_due = False
        # The ready scan's and the drain's (partition, deque, leader) list
        # and what it was made from (see _senderloop.leader_scan)
        self._scan = []
        self._scan_leaders = None
        self._scan_size = -1
        # Called with the partition (under the lock) before a batch is
        # opened for it: a transactional producer's maybeAddPartition, once
        # per batch instead of once per record (every record of a
        # transaction opens or joins a batch opened inside it).  It may
        # raise to refuse the record.
        self.on_new_batch = None

    # -- application side ---------------------------------------------------------
    def append(self, tp, record, body, callback, key_size, value_size, max_block_ms,
               abort_on_new_batch=False):
        """Add one record (``body``: its record_body_size); returns
        ``(future, batch_full, new_batch)``.  Blocks up to ``max_block_ms``
        for buffer memory.

        Batches fill as Kafka's do: a record joins the last batch if the
        batch's exact size plus the record's exact size (its offset and
        timestamp deltas in that batch) is within batch.size.  Memory is
        taken per batch, max(batch.size, the record's upper bound), as
        Kafka's BufferPool does."""
        with self.lock:
            if self.closed:
                raise RuntimeError("Cannot send after the producer is closed.")
            dq = self.batches.get(tp)
            if dq is None:
                dq = self.batches[tp] = collections.deque()
            last = dq[-1] if dq else None
            size = last.room_for(record, body, self.batch_size) if last is not None else -1
            if size >= 0:
                future = last.append(record, size, callback, key_size, value_size)
                return future, len(dq) > 1 or last.is_full(self.batch_size), False
            if abort_on_new_batch:
                return None, False, True
            if self.on_new_batch is not None:
                self.on_new_batch(tp)
            allocation = max(self.batch_size,
                             body + RECORD_OVERHEAD_EXTRA_MAX + RECORD_BATCH_OVERHEAD)
            if not self._memory_waiters and \
                    self.used_memory + allocation <= self.buffer_memory:
                # _allocate's no-wait case, inline: the lock was held
                # throughout, so the deque and ``closed`` are as read above
                # (no re-check: two calls and a room_for per batch opened).
                self.used_memory += allocation
            else:
                self._allocate(allocation, max_block_ms)
                if self.closed:
                    self.used_memory -= allocation
                    raise RuntimeError("Cannot send after the producer is closed.")
                # Re-read the deque: another thread may have appended while
                # this one waited.
                last = dq[-1] if dq else None
                size = last.room_for(record, body, self.batch_size) \
                    if last is not None else -1
                if size >= 0:
                    self.used_memory -= allocation
                    self._signal_first_waiter()
                    future = last.append(record, size, callback, key_size, value_size)
                    return future, len(dq) > 1 or last.is_full(self.batch_size), False
            if last is not None:
                last.closed = True
            batch = ProducerBatch(tp, self.time(), allocation)
            future = batch.append(record, record_size(body, 0, 0), callback, key_size,
                                  value_size)
            dq.append(batch)
            self.incomplete.add(batch)
            return future, len(dq) > 1 or batch.is_full(self.batch_size), True

    def _allocate(self, size, max_block_ms):
        """Take ``size`` bytes of buffer.memory, waiting up to
        ``max_block_ms`` for them (Kafka's ``BufferPool.allocate``): appends
        that must wait are served in arrival order, and only the first in
        line is woken, once enough memory for it is free (no wake-up per
        completed batch for a waiter that still would not fit)."""
        if not self._memory_waiters and self.used_memory + size <= self.buffer_memory:
            self.used_memory += size
            return
        deadline = self.time() + max_block_ms
        entry = [size, threading.Condition(self.lock)]
        waiters = self._memory_waiters
        waiters.append(entry)
        self.waiters += 1
        try:
            # A record larger than all of buffer.memory is refused before
            # it gets here; used_memory == 0 lets an allocation through
            # however large (as before: nothing to wait for).
            while waiters[0] is not entry or (
                    self.used_memory + size > self.buffer_memory and self.used_memory > 0):
                left = deadline - self.time()
                if left <= 0:
                    raise RequestTimeoutError(
                        f"Failed to allocate memory within the configured max blocking time "
                        f"{max_block_ms} ms.")
                entry[1].wait(min(left, _WAIT_SLICE_MS) / 1000.0)
                if self.closed:
                    break
            self.used_memory += size
        finally:
            self.waiters -= 1
            waiters.remove(entry)
            # The next in line may fit in what is left (Kafka signals it too).
            self._signal_first_waiter()

    def _signal_first_waiter(self):
        """Wake the first waiting append once its memory and a slack of
        buffer.memory / 8 are free (call with the lock held).

        The slack: an application that outruns the network waits here for
        every batch; woken as soon as one batch's memory is free, it would
        append one batch and wait again, a thread switch (and GIL hand-over)
        per batch on both threads.  With the slack it appends several
        batches per wake-up.  The memory waited for is still being freed by
        batches in flight or queued (they complete or expire); if that
        stalls, the waiter's own re-check every _WAIT_SLICE_MS takes what
        fits."""
        if self._memory_waiters:
            size, cond = self._memory_waiters[0]
            if self.used_memory + size + self._wake_slack <= self.buffer_memory or \
                    self.used_memory <= 0:
                cond.notify()

    # deallocate(batch): the batch's memory back (the network thread's, per
    # batch completed: the senderloop twin's, compiled when built)
    deallocate = _senderloop.accumulator_deallocate

    # -- sender side ------------------------------------------------------------
    def retry_backoff(self, attempts):
        if attempts <= 0:
            return 0
        return min(self.retry_backoff_ms * (2 ** (attempts - 1)), self.retry_backoff_max_ms)

    # ready() and drain(), the network thread's per-pass scan of every
    # partition: the senderloop twin's (compiled when built).
    ready = _senderloop.accumulator_ready
    drain = _senderloop.accumulator_drain
    # complete(batch) and deallocate(batch) in one call, the usual batch
    # completed inline (the twin's accumulator_complete_batch)
    complete_batch = _senderloop.accumulator_complete_batch

    def reenqueue(self, batch, now):
        """Put a batch to retry back at the head of its partition, in
        sequence order (Kafka's ``reenqueue``/``insertInSequenceOrder``)."""
        batch.attempts += 1
        batch.last_attempt_ms = now
        batch.retry = True
        with self.lock:
            _insert_in_sequence_order(
                self.batches.setdefault(batch.tp, collections.deque()), batch)

    def split_and_reenqueue(self, batch, now):
        """Kafka's ``splitAndReenqueue``: a batch rejected as too large goes
        back as smaller batches at the head of its partition, in
        sequence order, as if never tried; returns how many.  The big batch
        is released (its records complete through the parts)."""
        # Java splits by batch.size alone, which splits a batch no larger
        # than batch.size into the same batch again (batch.size above the
        # topic's max.message.bytes): at most half the rejected batch each
        # time, so a split always gets smaller, down to single records.
        parts = batch.split(min(self.batch_size, batch.estimated_size // 2),
                            record_body_size)
        with self.lock:
            dq = self.batches.setdefault(batch.tp, collections.deque())
            for part in reversed(parts):
                self.incomplete.add(part)
                _insert_in_sequence_order(dq, part)
        self.deallocate(batch)
        return len(parts)

    def restart_sequences(self, tp, producer_id, epoch):
        """KIP-360's epoch bump for a partition with nothing in flight: its
        waiting batches that had sequences (retries) get the new epoch and
        sequences from 0, in order; returns the next sequence."""
        seq = 0
        with self.lock:
            for b in self.batches.get(tp) or ():
                if not b.has_sequence():
                    break
                b.producer_id = producer_id
                b.producer_epoch = epoch
                b.base_sequence = seq
                b.encoded = None
                seq = (seq + b.record_count) & 0x7FFFFFFF
        return seq

    def expired_batches(self, now):
        """Batches still waiting that have passed ``delivery.timeout.ms``
        (``expiry_due`` says whether the last ready() scan saw one)."""
        out = []
        with self.lock:
            for tp, dq in self.batches.items():
                while dq and now - dq[0].created_ms >= self.delivery_timeout_ms:
                    out.append(dq.popleft())
        return out

    def has_undrained(self):
        with self.lock:
            return any(dq for dq in self.batches.values())

    def has_incomplete(self):
        with self.lock:
            return bool(self.incomplete)

    def incomplete_batches(self):
        with self.lock:
            return list(self.incomplete)

    def begin_flush(self):
        with self.lock:
            self.flushes_in_progress += 1

    def end_flush(self):
        with self.lock:
            self.flushes_in_progress -= 1

    def close(self):
        with self.lock:
            self.closed = True
            self.memory.notify_all()
            for _, cond in self._memory_waiters:
                cond.notify()

    def abort_undrained(self, exc):
        """Fail every batch still in a deque (forced close)."""
        with self.lock:
            batches = [b for dq in self.batches.values() for b in dq]
            for dq in self.batches.values():
                dq.clear()
        for b in batches:
            b.complete(None, None, exc)
            self.deallocate(b)
