"""A batch opened by the per-record path itself (``Appender._open``, both
twins), without a broker: the appender runs against a real
``RecordAccumulator`` and ``StickyPartitioner`` with a fixed clock.

* Interleaved shapes (no key, key, partition, headers, callbacks, null
  values, timestamps going back) make the same batches, every slot of every
  batch, the same futures, memory, partitioner state and wake-ups as when
  the accumulator's ``append`` opens every batch (the reference: a
  transaction's ``on_new_batch`` hook sends each new batch there), and the
  appender opened all but each partition's first batch itself.
* The sticky partition moves on as ``StickyPartitioner.update`` moves it,
  record by record, for a topic of one partition (the appender's own
  switch) and of three (update's random draw).
* ``buffer.memory``: a batch is opened only when its memory is free and no
  append waits for memory; otherwise the accumulator's append blocks up to
  max.block.ms, raises when it passes, and serves the waiters in order.
"""
import random
import threading
import time

import pytest

from kchannel.client import RequestTimeoutError
from kchannel.client.metadata import Cluster, PartitionInfo
from kchannel.producer.accumulator import (ProducerBatch, QueuedRecord, RecordAccumulator,
                                          estimate_record_size)
from kchannel.producer.partitioner import StickyPartitioner
from kchannel.producer.producer import AppendPath
from kchannel.utils import now_ms

TOPIC = "t"
BATCH = 600
TS = 1_700_000_000_000


class _Metadata:
    def __init__(self, cluster):
        self.cluster = cluster
        self.touched = 0

    def add_topic(self, topic, now):
        self.touched += 1


class _Sender:
    """Sender.wakeup's contract: wakes only when the accumulator says so."""

    def __init__(self, acc):
        self.fatal_error = None
        self.acc = acc
        self.woken = 0

    def wakeup(self):
        if self.acc.wakeup_needed:
            self.acc.wakeup_needed = False
            self.woken += 1


def _topic_cluster(partitions, leaderless=()):
    return Cluster(nodes={0: ("h", 9092, None)},
                   partitions=[PartitionInfo(TOPIC, i, -1 if i in leaderless else 0)
                               for i in range(partitions)])


def _slow(*args):
    raise AssertionError(f"the full path was taken: {args}")


class _Setup:
    def __init__(self, twin, partitions=3, buffer_memory=1 << 20, max_block_ms=1000,
                 reference=False, seed=7, clock=None, leaderless=()):
        # A fixed clock where batches are compared slot by slot; the real
        # one where max.block.ms must pass.
        self.clock = clock or (lambda: 1234)
        self.acc = acc = RecordAccumulator(BATCH, 5, 100, 1000, 120000, buffer_memory,
                                           self.clock)
        if reference:
            # Every new batch through the accumulator's append.
            acc.on_new_batch = lambda tp: None
        self.appends = 0
        append = acc.append

        def counted(*args, **kwargs):
            self.appends += 1
            return append(*args, **kwargs)
        acc.append = counted
        self.cluster = _topic_cluster(partitions, leaderless)
        self.partitioner = StickyPartitioner(BATCH, rng=random.Random(seed), lock=acc.lock)
        self.sender = _Sender(acc)
        self.metadata = _Metadata(self.cluster)
        path = AppendPath(acc, self.metadata, self.clock, self.partitioner, self.sender,
                          _slow, 1 << 20, False, max_block_ms, False)
        self.appender = twin.Appender(path)
        self.send = self.appender.send


def _shape_sends(n, callbacks):
    out = []
    for i in range(n):
        kw = dict(value=b"v" * (i * 37 % 300), timestamp_ms=TS + (i * 13 % 200) - 50)
        m = i % 6
        if m == 1:
            kw["key"] = b"k%d" % (i % 7)
        elif m == 2:
            kw["partition"] = i % 3
        elif m == 3:
            kw["headers"] = [("h", b"%d" % i), ("n\u00e9", None)]
        elif m == 4:
            kw["value"] = None
            kw["key"] = b"tomb"
        if i % 4 == 0:
            kw["callback"] = callbacks[i]
        out.append(kw)
    return out


def _batch_fields(b):
    out = {}
    # (its own slots and its base class's fields, the Sender's side's)
    for name in ProducerBatch.__slots__ + ProducerBatch.__base__.__slots__:
        v = getattr(b, name, "<unset>")
        if name == "records":
            v = [(r.timestamp, r.key, r.value, r.headers) for r in v]
        out[name] = v
    return out


def _send_all(twin, sends, reference):
    s = _Setup(twin, reference=reference)
    futures = [s.send(TOPIC, **kw) for kw in sends]
    acc = s.acc
    batches = {tp.partition: list(dq) for tp, dq in acc.batches.items()}
    where = {id(b): (part, i) for part, dq in batches.items() for i, b in enumerate(dq)}
    return dict(
        batches={part: [_batch_fields(b) for b in dq] for part, dq in sorted(batches.items())},
        futures=[(where[id(f._batch)], f._index, f._failed) for f in futures],
        used_memory=acc.used_memory,
        incomplete=sorted(where[id(b)] for b in acc.incomplete),
        sticky=s.partitioner.state,
        woken=s.sender.woken,
    ), s, batches


def test_opened_batches_equal_the_accumulators(impl):
    twin = impl.appender
    called = []
    callbacks = [(lambda i: lambda md, exc: called.append(i))(i) for i in range(600)]
    sends = _shape_sends(600, callbacks)
    got, s, batches = _send_all(twin, sends, reference=False)
    want, ref, _ = _send_all(twin, sends, reference=True)
    assert got == want
    n_batches = sum(len(dq) for dq in batches.values())
    assert n_batches > 20
    # The reference opened every batch in the accumulator; the appender
    # only each partition's first (its deque did not exist yet).
    assert ref.appends == n_batches
    assert s.appends == len(batches)
    # Completing the batches runs each callback once, in send order per
    # partition.
    for dq in batches.values():
        for b in dq:
            b.complete(100, -1)
    assert sorted(called) == [i for i in range(600) if i % 4 == 0]


@pytest.mark.parametrize("partitions, leaderless", [(1, ()), (3, ()), (4, (1, 2)),
                                                    (2, (0, 1))])
def test_the_sticky_partition_moves_on_as_update_moves_it(impl, partitions, leaderless):
    """Partitions without a leader are not drawn (all are when none has
    one), as the partitioner's _choose draws."""
    s = _Setup(impl.appender, partitions=partitions, seed=11, leaderless=leaderless)
    model = StickyPartitioner(BATCH, rng=random.Random(11))
    cluster = _topic_cluster(partitions, leaderless)
    seen = set()
    for i in range(400):
        value = b"s" * (i * 53 % 250)
        future = s.send(TOPIC, value, timestamp_ms=TS)
        p = model.partition(TOPIC, cluster)
        assert future._batch.tp.partition == p, i
        seen.add(p)
        model.update(TOPIC, p, estimate_record_size(None, value, None), cluster)
        assert s.partitioner.state == model.state, i
    led = set(range(partitions)) - set(leaderless)
    assert seen == (led or set(range(partitions)))


def test_a_batch_is_opened_only_with_its_memory_free(impl):
    s = _Setup(impl.appender, buffer_memory=2 * BATCH, max_block_ms=100, clock=now_ms)
    value = b"x" * 400                  # one record a batch
    s.send(TOPIC, value, partition=0)
    s.send(TOPIC, value, partition=0)
    assert s.acc.used_memory == 2 * BATCH
    assert s.appends == 1               # the second batch opened by the appender
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError):
        s.send(TOPIC, value, partition=0)
    assert time.monotonic() - started >= 0.09
    (dq,) = s.acc.batches.values()
    assert [len(b.records) for b in dq] == [1, 1]
    assert s.acc.used_memory == 2 * BATCH
    assert not dq[-1].closed


def test_a_send_short_of_memory_blocks_until_it_is_freed(impl):
    s = _Setup(impl.appender, buffer_memory=2 * BATCH, max_block_ms=10000,
               clock=now_ms)
    value = b"x" * 400
    s.send(TOPIC, value, partition=0)
    s.send(TOPIC, value, partition=0)
    (dq,) = s.acc.batches.values()
    first = dq[0]

    order = []

    def free():
        # What the Sender does once the first batch is acknowledged.
        time.sleep(0.2)
        order.append("freed")
        with s.acc.lock:
            dq.popleft()
        s.acc.deallocate(first)
    t = threading.Thread(target=free)
    t.start()
    future = s.send(TOPIC, value, partition=0, timestamp_ms=TS)
    # (the order of the two threads' steps, not the time the send took: a
    # loaded machine may run the main thread only after the freeing one)
    order.append("sent")
    t.join()
    assert order == ["freed", "sent"]
    assert future._batch is dq[-1] and future._index == 0
    assert [len(b.records) for b in dq] == [1, 1]
    assert s.acc.used_memory == 2 * BATCH


def test_a_waiting_append_is_not_overtaken(impl):
    s = _Setup(impl.appender, buffer_memory=3 * BATCH, max_block_ms=300, clock=now_ms)
    value = b"x" * 400
    s.send(TOPIC, value, partition=0)
    s.send(TOPIC, value, partition=0)
    assert s.acc.used_memory == 2 * BATCH
    # An append that needs 2 batches' worth waits for it (1 is free).
    big = QueuedRecord(TS, None, b"y" * (BATCH + 200), ())
    outcome = []

    def wait_for_memory():
        from kchannel.client.metadata import TopicPartition
        try:
            # (waits until the accumulator is closed below: a bound no
            # loaded machine's pause before that reaches)
            s.acc.append(TopicPartition(TOPIC, 1), big, BATCH + 203, None, -1,
                         BATCH + 200, 120_000)
            outcome.append("appended")
        except Exception as exc:       # (closed below)
            outcome.append(type(exc).__name__)
    t = threading.Thread(target=wait_for_memory)
    t.start()
    deadline = time.monotonic() + 30
    while s.acc.waiters == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.acc.waiters == 1
    # A batch's memory is free, but the waiter came first: the new batch
    # waits behind it (and times out here), taking nothing.
    with pytest.raises(RequestTimeoutError):
        s.send(TOPIC, value, partition=0)
    assert s.acc.used_memory == 2 * BATCH
    assert [len(b.records) for b in next(iter(s.acc.batches.values()))] == [1, 1]
    s.acc.close()
    t.join(5)
    assert outcome == ["RuntimeError"]


def test_a_send_waits_for_the_lock_another_thread_holds(impl):
    """The appender skips the lock only when no thread holds it (the
    compiled twin reads the lock's state in C): while another thread holds
    it, a record joining a batch waits for it."""
    s = _Setup(impl.appender, clock=now_ms)
    s.send(TOPIC, b"a", partition=0)
    s.send(TOPIC, b"b", partition=0)
    (dq,) = s.acc.batches.values()
    held, release = threading.Event(), threading.Event()
    seen = []

    def hold():
        with s.acc.lock:
            held.set()
            release.wait(60)    # (set below: a bound, not a duration)
            seen.append(len(dq[-1].records))

    def send():
        s.send(TOPIC, b"c", partition=0)
        seen.append("sent")
    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(30)
    u = threading.Thread(target=send)
    u.start()
    u.join(0.3)
    assert seen == []
    release.set()
    t.join(30)
    u.join(30)
    assert seen == [2, "sent"]
    assert len(dq[-1].records) == 3


class _SlotSender(_Sender):
    """``fatal_error`` a __slots__ slot (the pure SenderLoop's kind), not in
    an instance dict: the compiled twin reads it through the member
    descriptor's C getter."""
    __slots__ = ("fatal_error", "acc", "woken")


class _PropertySender(_Sender):
    """``fatal_error`` a property: Python code, read by getattr per record."""

    def __init__(self, acc):
        self._fatal = None
        self.reads = 0
        super().__init__(acc)

    @property
    def fatal_error(self):
        self.reads += 1
        return self._fatal

    @fatal_error.setter
    def fatal_error(self, value):
        self._fatal = value


@pytest.mark.parametrize("sender", [_Sender, _SlotSender, _PropertySender])
def test_the_senders_fatal_error_is_read_per_record_whatever_its_kind(impl, sender):
    """The Sender's ``fatal_error`` is seen by the very next send whether it
    is an instance attribute, a slot or a property (the compiled twin
    reads a slot or a compiled class's field through its descriptor's C
    getter instead of a getattr, a property by getattr): set, the record
    goes to the full path; cleared, back to the fast one."""
    s = _Setup(impl.appender, partitions=1)
    s.sender = sender(s.acc)
    path = AppendPath(s.acc, s.metadata, s.clock, s.partitioner, s.sender, _slow, 1 << 20,
                      False, 1000, False)
    s.appender = impl.appender.Appender(path)
    send = s.appender.send
    futures = [send(TOPIC, b"v%d" % i) for i in range(3)]
    s.sender.fatal_error = RuntimeError("fenced")
    with pytest.raises(AssertionError, match="the full path was taken"):
        send(TOPIC, b"refused")
    s.sender.fatal_error = None
    futures.append(send(TOPIC, b"again"))
    assert [f._index for f in futures] == [0, 1, 2, 3]
    if sender is _PropertySender:
        assert s.sender.reads == 5


@pytest.mark.parametrize("attach", ["callback", "done_callback"])
def test_a_cycle_through_an_opened_batchs_callback_is_freed(impl, attach):
    """A batch the appender opened with no callback (the compiled twin
    takes it off the garbage collector's lists: it then holds nothing that
    refers back to it) gets a record's callback, or a done callback, that
    holds the record's future (which holds the batch): once nothing else
    holds them, the collector frees that cycle, as it frees one through a
    batch opened with its callback."""
    import gc
    import weakref

    class Marker:
        pass
    s = _Setup(impl.appender, partitions=1)
    first = s.send(TOPIC, b"v" * 250)       # (the accumulator's append opens it)
    s.send(TOPIC, b"v" * 250)
    opener = s.send(TOPIC, b"v" * 250)      # no room: opened by the appender
    assert opener._batch is not first._batch and opener._index == 0
    marker = Marker()
    held = []                 # (a default, not a cell: del empties no cell)

    def fn(*_args, marker=marker, held=held):
        return held

    if attach == "callback":
        held.append(s.send(TOPIC, b"v", callback=fn))
        assert held[0]._batch is opener._batch
    else:
        held.append(opener)
        opener.add_done_callback(fn)
    gone = weakref.ref(marker)
    del s, first, opener, marker, fn, held
    gc.collect()
    assert gone() is None
