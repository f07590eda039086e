"""``buffer.memory`` as Kafka's ``BufferPool`` hands it out: appends that
must wait for memory are served first come first served, the first in line
is woken once enough memory for it is free, and a later append does not
take memory ahead of one already waiting."""
import threading
import time

import pytest

from kchannel.client import RequestTimeoutError
from kchannel.client.metadata import TopicPartition
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator
from kchannel.utils import now_ms
from tests.fixtures.waiting import wait_until

BATCH = 1024


def _accumulator_of_batches(batches):
    return RecordAccumulator(BATCH, 5, 100, 1000, 120000, batches * BATCH, now_ms)


def _new_batch(acc, partition, max_block_ms=60000):
    """Append a record that opens a batch on ``partition``; the batch."""
    tp = TopicPartition("t", partition)
    acc.append(tp, QueuedRecord(0, None, b"v", ()), 40, None, -1, 1, max_block_ms)
    return acc.batches[tp][-1]


def test_waiting_appends_are_served_in_arrival_order():
    acc = _accumulator_of_batches(2)
    first, second = _new_batch(acc, 0), _new_batch(acc, 1)
    served = []

    def append(partition):
        _new_batch(acc, partition)
        served.append(partition)

    a = threading.Thread(target=append, args=(2,))
    a.start()
    wait_until(lambda: acc.waiters == 1, "1 waiting", interval_s=0.002)
    b = threading.Thread(target=append, args=(3,))
    b.start()
    wait_until(lambda: acc.waiters == 2, "2 waiting", interval_s=0.002)
    acc.deallocate(first)           # room for one: the first in line
    a.join(60)
    assert served == [2] and acc.waiters == 1
    # A newcomer queues behind the waiter even when memory is free for it.
    acc.deallocate(second)
    b.join(60)
    assert served == [2, 3] and acc.waiters == 0
    assert acc.used_memory == 2 * BATCH


def test_an_append_queues_behind_a_waiter_needing_more_than_is_free():
    """A large record waits for its whole allocation; a small batch arriving
    later waits behind it (FIFO), even though it alone would fit."""
    acc = _accumulator_of_batches(3)
    batches = [_new_batch(acc, p) for p in range(3)]
    served = []

    def big():
        tp = TopicPartition("t", 9)
        acc.append(tp, QueuedRecord(0, None, b"x" * 1500, ()), 1536, None, -1, 1500, 60000)
        served.append("big")

    def small():
        _new_batch(acc, 5)
        served.append("small")

    t1 = threading.Thread(target=big)
    t1.start()
    wait_until(lambda: acc.waiters == 1, "1 waiting", interval_s=0.002)
    acc.deallocate(batches[0])      # one batch free: not enough for the big one
    t2 = threading.Thread(target=small)
    t2.start()
    wait_until(lambda: acc.waiters == 2, "2 waiting", interval_s=0.002)
    time.sleep(0.12)                # a few re-check slices: nobody may jump the line
    assert served == []
    acc.deallocate(batches[1])
    t1.join(60)
    wait_until(lambda: acc.waiters == 1, "1 waiting", interval_s=0.002)
    assert served == ["big"]
    acc.deallocate(batches[2])
    t2.join(60)
    assert served == ["big", "small"]


def test_a_waiting_append_times_out_and_leaves_the_line():
    acc = _accumulator_of_batches(1)
    held = _new_batch(acc, 0)
    with pytest.raises(RequestTimeoutError, match="max blocking time 50 ms"):
        _new_batch(acc, 1, max_block_ms=50)
    assert acc.waiters == 0
    acc.deallocate(held)
    _new_batch(acc, 1, max_block_ms=0)   # nobody left in line ahead of it
    assert acc.used_memory == BATCH


def test_a_batch_opened_with_memory_free_takes_it_without_the_waiting_path(monkeypatch):
    """Opening a batch while memory is free and nobody waits takes
    max(batch.size, the record's bound) at once under the append's lock
    (the waiting path, _allocate, and its re-check of the deque are for
    appends that had to wait); with a waiter in line it still queues."""
    acc = _accumulator_of_batches(3)

    def no_wait(size, max_block_ms):
        raise AssertionError("an append with memory free went through _allocate")
    monkeypatch.setattr(acc, "_allocate", no_wait)
    first = _new_batch(acc, 0)
    second = _new_batch(acc, 1)
    assert acc.used_memory == 2 * BATCH
    assert (first.allocated, second.allocated) == (BATCH, BATCH)
    # a record joining the open batch takes nothing more
    acc.append(TopicPartition("t", 0), QueuedRecord(0, None, b"v", ()), 40, None, -1, 1,
               10000)
    assert acc.used_memory == 2 * BATCH and len(acc.batches[TopicPartition("t", 0)]) == 1
    monkeypatch.undo()
    acc.deallocate(first)
    acc.deallocate(second)
    assert acc.used_memory == 0
    # someone in line: a new batch queues behind it even though memory is free
    acc._memory_waiters.append([BATCH, threading.Condition(acc.lock)])
    with pytest.raises(RequestTimeoutError):
        _new_batch(acc, 2, max_block_ms=50)
    assert acc.used_memory == 0
