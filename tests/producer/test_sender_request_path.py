"""The Sender's per-request path without a broker.

The completion of an acknowledged batch in one call
(``RecordAccumulator.complete_batch``): what ``ProducerBatch.complete``
and then ``deallocate`` did, the usual batch completed inline.  Futures,
their offsets, done callbacks, record callbacks, waiters and the memory
released must come out as the two calls left them.

A pass's further requests (``SenderLoop._queued_behind``): the nodes the
ready scan would surely find ready are told without the scan; any doubt
(muted partition, retry back-off, a node without a full batch behind the
one sent) is left to the scan."""
import threading

import pytest

from kchannel.client.metadata import TopicPartition
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator, record_body_size

TP = TopicPartition("t", 0)


def _acc():
    return RecordAccumulator(batch_size=16384, linger_ms=0, retry_backoff_ms=0,
                             retry_backoff_max_ms=0, delivery_timeout_ms=120_000,
                             buffer_memory=1 << 20, time=lambda: 0)


def _drained_batch(acc, n, callback=None):
    """``n`` records appended to TP, the batch taken out as a drain does;
    (batch, futures)."""
    futures = []
    for i in range(n):
        value = b"v%d" % i
        f, _, _ = acc.append(TP, QueuedRecord(1000 + i, None, value, ()),
                             record_body_size(None, value, ()),
                             None if callback is None else callback(i), -1, len(value), 1000)
        futures.append(f)
    batch = acc.batches[TP].popleft()
    batch.closed = True
    return batch, futures


def _batch_state(acc, batch):
    return (batch.done_flag, batch.base_offset, batch.log_append_time, batch.exception,
            batch.done_callbacks, batch.allocated, batch.encoded, batch in acc.incomplete,
            acc.used_memory)


@pytest.mark.parametrize("append_time", [-1, 5555, None])
def test_complete_batch_leaves_what_complete_and_deallocate_left(append_time):
    one, two = _acc(), _acc()
    b1, f1 = _drained_batch(one, 3)
    b2, f2 = _drained_batch(two, 3)
    b1.encoded = b2.encoded = b"the batch as sent"
    assert one.used_memory > 0
    one.complete_batch(b1, 100, append_time)
    b2.complete(100, append_time)
    two.deallocate(b2)
    assert _batch_state(one, b1) == _batch_state(two, b2)
    assert one.used_memory == 0 and not one.incomplete
    expected = [(m.offset, m.timestamp) for m in (f.get(0) for f in f2)]
    assert [(m.offset, m.timestamp) for m in (f.get(0) for f in f1)] == expected
    assert [o for o, _ in expected] == [100, 101, 102]
    assert [t for _, t in expected] == ([1000, 1001, 1002] if append_time in (-1, None)
                                       else [5555] * 3)


def test_done_callbacks_and_waiters_are_served_once():
    acc = _acc()
    batch, futures = _drained_batch(acc, 2)
    seen = []
    futures[0].add_done_callback(lambda f: seen.append(("a", f.get(0).offset)))

    def bad(_f):
        raise RuntimeError("a callback's own error")
    futures[1].add_done_callback(bad)
    futures[1].add_done_callback(lambda f: seen.append(("b", f.get(0).offset)))
    got = []
    waiter = threading.Thread(target=lambda: got.append(futures[1].get(10).offset))
    waiter.start()
    # (the waiter is blocked on the batch's event once it made one)
    for _ in range(1000):
        if batch.event is not None:
            break
        threading.Event().wait(0.005)
    acc.complete_batch(batch, 7, -1)
    waiter.join(10)
    assert got == [8]
    # the raising callback is logged; the others ran, each once
    assert seen == [("a", 7), ("b", 8)]
    assert batch.done_callbacks is None
    # a callback added now runs at once
    futures[0].add_done_callback(lambda f: seen.append(("late", f.get(0).offset)))
    assert seen[-1] == ("late", 7)
    assert acc.used_memory == 0


def test_record_callbacks_run_in_order_through_the_batch():
    acc = _acc()
    calls = []
    batch, _ = _drained_batch(acc, 3, callback=lambda i: (
        lambda md, exc: calls.append((i, md.offset, exc))))
    acc.complete_batch(batch, 40, -1)
    assert calls == [(0, 40, None), (1, 41, None), (2, 42, None)]
    assert acc.used_memory == 0 and batch.allocated == 0


def test_a_batch_already_done_keeps_its_result_and_releases_its_memory():
    acc = _acc()
    batch, futures = _drained_batch(acc, 1)
    exc = RuntimeError("failed first")
    batch.complete(None, None, exc)
    acc.complete_batch(batch, 9, -1)
    assert futures[0].exception(0) is exc and batch.base_offset == -1
    assert acc.used_memory == 0 and not acc.incomplete


def test_the_last_completion_wakes_a_flush():
    acc = _acc()
    first, _ = _drained_batch(acc, 1)
    second, _ = _drained_batch(acc, 1)
    acc.begin_flush()
    done = []

    def flush():
        with acc.lock:
            while acc.incomplete:
                acc.memory.wait(30)     # (woken by the last completion)
        done.append(True)
    t = threading.Thread(target=flush, daemon=True)
    t.start()
    acc.complete_batch(first, 0, -1)
    t.join(0.05)
    assert not done
    acc.complete_batch(second, 1, -1)
    t.join(5)
    acc.end_flush()
    assert done == [True]


# -- a pass's further requests: which nodes are surely ready ---------------------
def _node_state_base():
    # (the network client's node type: the Sender reads its fields as C
    # fields once compiled)
    from kchannel.client.network_client import NodeState
    return NodeState


class _NodeState(_node_state_base()):
    def __init__(self, in_flight=0):
        from kchannel.client import ConnectionState
        self.state = ConnectionState.READY
        self.in_flight = dict.fromkeys(range(in_flight))


@pytest.fixture
def idle_producer():
    """A producer whose Sender never drains (no broker: no node is ready),
    its accumulator filled by the test."""
    from kchannel import Producer
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 600000, "batch.size": 200,
                  "reconnect.backoff.ms": 100000, "reconnect.backoff.max.ms": 100000})
    yield p
    p.close(0)


def _fill(acc, tp, n):
    for i in range(n):
        value = b"x" * 60
        acc.append(tp, QueuedRecord(i, None, value, ()), record_body_size(None, value, ()),
                   None, -1, len(value), 1000)


def test_queued_behind_tells_the_surely_ready_nodes(idle_producer):
    from kchannel.producer import sender as sender_module
    unsure = sender_module._senderloop._UNSURE
    s, acc = idle_producer._sender, idle_producer.accumulator
    other = TopicPartition("t", 1)
    _fill(acc, TP, 8)           # full batches of 2-3 records
    _fill(acc, other, 1)        # one batch, not full
    with acc.lock:
        sent = acc.batches[TP].popleft()
        sent_other = acc.batches[other].popleft()
    ready = {1: _NodeState()}
    # a full batch behind the one sent: the node is ready for sure
    assert s._queued_behind({1: [sent]}, ready, 5) == {1}
    # nothing behind the batch sent: nothing more to send
    assert s._queued_behind({1: [sent_other]}, ready, 5) is None
    # a node that cannot take another request is left out
    assert s._queued_behind({1: [sent]}, {1: _NodeState(in_flight=5)}, 5) == set()
    assert s._queued_behind({1: [sent], 2: [sent_other]}, {1: _NodeState(5), 2: _NodeState()},
                            5) is unsure
    # muted, or a retry's back-off: the ready scan decides
    acc.muted.add(TP)
    try:
        assert s._queued_behind({1: [sent]}, ready, 5) is unsure
    finally:
        acc.muted.discard(TP)
    acc.batches[TP][0].attempts = 1
    assert s._queued_behind({1: [sent]}, ready, 5) is unsure
