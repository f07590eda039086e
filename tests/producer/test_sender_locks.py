"""The Sender side's lock sections (``accumulator_ready``,
``accumulator_drain``, ``accumulator_deallocate`` under the accumulator's
lock, ``accumulator_complete_batch``'s done flag under the done lock): the
compiled twin takes a free lock and releases it in C (CPython 3.11's lock
object, see ``_csenderloop.pxd``) instead of calling acquire() and
release().  Either way a lock is free again after each section (its
``locked()`` and its own acquire() agree), and a lock another thread holds
is waited for, as acquire() does."""
import threading

import pytest

from kchannel.client.metadata import Cluster, PartitionInfo, TopicPartition
from kchannel.producer._done_lock import DONE_LOCK
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator

TP = TopicPartition("t", 0)


def _accumulator_on(senderloop):
    """RecordAccumulator on ``senderloop``'s AccumulatorState (the twin
    under test, whichever the accumulator module picked)."""
    if issubclass(RecordAccumulator, senderloop.AccumulatorState):
        return RecordAccumulator
    body = {k: v for k, v in vars(RecordAccumulator).items()
            if k not in ("__dict__", "__weakref__", "__slots__")}
    return type("RecordAccumulator", (senderloop.AccumulatorState,), body)


def _setup(impl):
    acc = _accumulator_on(impl.senderloop)(1024, 0, 100, 1000, 120000, 1 << 20, lambda: 0)
    assert isinstance(acc, impl.senderloop.AccumulatorState)
    cluster = Cluster(nodes={1: ("localhost", 9092, None)}, partitions=[PartitionInfo("t", 0, 1)])
    acc.append(TP, QueuedRecord(0, None, b"v", ()), 3, None, -1, 1, 0)
    return acc, cluster


def _free(lock):
    # (locked() reads the flag, acquire(False) the lock itself: both free)
    assert not lock.locked()
    assert lock.acquire(False)
    lock.release()


def test_every_section_leaves_its_lock_free(impl):
    sl = impl.senderloop
    acc, cluster = _setup(impl)
    ready, _, _ = sl.accumulator_ready(acc, cluster, 10)
    assert ready == {1}
    _free(acc.lock)
    drained = sl.accumulator_drain(acc, cluster, ready, 1 << 20, 10, None)
    _free(acc.lock)
    (batch,) = drained[1]
    sl.accumulator_complete_batch(acc, batch, 7, None)
    _free(acc.lock)
    _free(DONE_LOCK)
    assert batch.done_flag is True and batch.base_offset == 7
    assert batch.log_append_time == -1 and batch.exception is None
    # (the compiled twin writes these slots at their offsets: what is read
    # back through the class's descriptors is the same)
    assert batch.done_callbacks is None and batch.encoded is None
    assert acc.used_memory == 0 and not acc.incomplete
    # (and again: the C path and the methods see the same lock state)
    acc.append(TP, QueuedRecord(0, None, b"w", ()), 3, None, -1, 1, 0)
    assert sl.accumulator_ready(acc, cluster, 10)[0] == {1}
    _free(acc.lock)


def _blocks_until_released(lock, call):
    """``call()`` in a thread while ``lock`` is held here: it must still be
    waiting after a while, and finish once the lock is released."""
    done = threading.Event()
    errors = []

    def run():
        try:
            call()
        except BaseException as exc:     # (reported below)
            errors.append(exc)
        done.set()

    lock.acquire()
    t = threading.Thread(target=run, daemon=True)
    try:
        t.start()
        assert not done.wait(0.3), "ran while another thread held the lock"
    finally:
        lock.release()
    t.join(30)
    assert done.is_set() and not errors, errors
    _free(lock)


@pytest.mark.parametrize("section", ["ready", "drain", "deallocate"])
def test_a_held_accumulator_lock_is_waited_for(impl, section):
    sl = impl.senderloop
    acc, cluster = _setup(impl)
    if section == "ready":
        call = lambda: sl.accumulator_ready(acc, cluster, 10)  # noqa: E731
    elif section == "drain":
        call = lambda: sl.accumulator_drain(acc, cluster, {1}, 1 << 20, 10, None)  # noqa: E731
    else:
        batch = acc.batches[TP][0]
        call = lambda: sl.accumulator_deallocate(acc, batch)  # noqa: E731
    _blocks_until_released(acc.lock, call)


def test_a_held_done_lock_is_waited_for(impl):
    sl = impl.senderloop
    acc, cluster = _setup(impl)
    (batch,) = sl.accumulator_drain(acc, cluster, {1}, 1 << 20, 10, None)[1]
    _blocks_until_released(DONE_LOCK, lambda: sl.accumulator_complete_batch(acc, batch, 3, None))
    assert batch.done_flag and batch.base_offset == 3


def test_a_muted_partition_is_neither_ready_nor_drained(impl):
    # (the scans skip the lookup in an empty muted set: a non-empty one is
    # still searched)
    sl = impl.senderloop
    acc, cluster = _setup(impl)
    acc.muted.add(TopicPartition("t", 0))
    assert sl.accumulator_ready(acc, cluster, 10)[0] == set()
    assert sl.accumulator_drain(acc, cluster, {1}, 1 << 20, 10, None) == {}
    acc.muted.clear()
    assert sl.accumulator_ready(acc, cluster, 10)[0] == {1}
    assert list(sl.accumulator_drain(acc, cluster, {1}, 1 << 20, 10, None)) == [1]


def test_completing_batches_keeps_their_results(impl):
    # Batches completed one after another (the first resolves the slots'
    # offsets in the compiled twin), with and without a log append time, and
    # a batch whose future waits (a done callback runs).
    sl = impl.senderloop
    acc, cluster = _setup(impl)
    seen = []
    for i in range(3):
        if i:
            acc.append(TP, QueuedRecord(0, None, b"v", ()), 3, None, -1, 1, 0)
        (batch,) = sl.accumulator_drain(acc, cluster, {1}, 1 << 20, 10, None)[1]
        batch.done_callbacks = [(seen.append, i)] if i == 2 else None
        sl.accumulator_complete_batch(acc, batch, 10 * i, 1234 if i == 1 else None)
        assert (batch.done_flag, batch.base_offset, batch.log_append_time, batch.exception) == \
            (True, 10 * i, 1234 if i == 1 else -1, None)
    assert seen == [2]
    assert acc.used_memory == 0 and not acc.incomplete
    _free(DONE_LOCK)
