"""An idempotent producer's per-batch sequence bookkeeping
(``ProducerSequences.assign``, ``first_unacked``, ``acked``) lives in the
senderloop twin's ``SequenceState``, its base class, so that the compiled
Sender calls it as C calls: both twins keep the same books, and compiled,
the calls make no interpreted frame."""
import sys

import pytest

import kchannel
from kchannel.client.metadata import TopicPartition
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator, record_body_size
from kchannel.producer.idempotence import ProducerSequences

TP = TopicPartition("t", 0)
TP2 = TopicPartition("t", 1)


def _drained_batches(tp, n, per_batch=5):
    acc = RecordAccumulator(batch_size=1000, linger_ms=0, retry_backoff_ms=0,
                            retry_backoff_max_ms=0, delivery_timeout_ms=120_000,
                            buffer_memory=1 << 20, time=lambda: 0)
    for i in range(n * per_batch):
        value = b"%d-" % i + b"v" * (900 // per_batch)
        acc.append(tp, QueuedRecord(0, None, value, ()), record_body_size(None, value, ()),
                   None, 0, len(value), 1000)
    return list(acc.batches[tp])[:n]


def _books(seqs):
    return (seqs.producer_id, seqs.producer_epoch, dict(seqs._next), dict(seqs._last_acked),
            dict(seqs._started), set(seqs.bump_partitions), seqs.first_sequence_checked)


def _scenario(seqs):
    """Every branch of assign, first_unacked and acked; what each call
    answered, the batches' fields and the books after each step."""
    out = []
    b = _drained_batches(TP, 6)
    c = _drained_batches(TP2, 2)
    seqs.producer_id, seqs.producer_epoch = 7, 3

    def step(answer):
        out.append((answer, [(x.producer_id, x.producer_epoch, x.base_sequence)
                             for x in b + c], _books(seqs)))

    step(seqs.assign(TP, b[0], []))            # a partition's first batch of the epoch
    step(seqs.first_unacked(TP, [b[0]]))        # nothing written yet, one in flight
    step(seqs.assign(TP, b[1], [b[0]]))         # so the next one waits
    seqs.acked(b[0])
    step(seqs.first_unacked(TP, [b[1]]))
    step(seqs.assign(TP, b[1], [b[0]]))         # written: the next goes
    seqs.acked(b[1])
    step(None)
    seqs.bump_partitions.add(TP)
    step(seqs.assign(TP, b[2], []))             # a bump pending
    seqs.bump_partitions.clear()
    seqs.producer_epoch = 4                     # a new epoch of the same producer id:
    step(seqs.assign(TP, b[2], [b[1]]))         # waits while the old epoch is in flight
    step(seqs.assign(TP, b[2], []))             # then starts from 0, last acked -1
    step(seqs.assign(TP, b[3], [b[2]]))         # and need not wait for its first
    seqs.acked(b[2])
    old = b[3]
    seqs.producer_epoch = 5
    seqs.acked(old)                             # of an older epoch: not counted
    step(None)
    seqs.producer_id = 8                        # a new producer id: starts over
    step(seqs.assign(TP, b[4], []))
    step(seqs.assign(TP, b[5], [b[4]]))
    seqs.first_sequence_checked = True          # transaction version 2: no wait
    step(seqs.first_unacked(TP, [b[4]]))
    step(seqs.assign(TP, b[5], [b[4]]))
    seqs._next[TP2] = 0x7FFFFFFF - 2            # the sequence wraps at 2**31
    seqs._started[TP2] = (8, 5)
    seqs._last_acked[TP2] = 5
    step(seqs.assign(TP2, c[0], []))
    seqs.acked(c[0])
    step(seqs.assign(TP2, c[1], [c[0]]))
    seqs.acked(c[1])
    step(None)
    return out


def test_both_twins_keep_the_same_books(impl_pair):
    pure, compiled = impl_pair
    results = [_scenario(twin.senderloop.SequenceState()) for twin in (pure, compiled)]
    assert results[0] == results[1]
    answers = [a for a, _, _ in results[0]]
    assert answers == [True, True, False, False, True, None, False, False, True, True, None,
                       True, False, False, True, True, True, None]
    # the sequence wraps: TP2's first batch starts at 2**31 - 3, the next
    # one past 2**31 - 1 from 0 again
    first, second = results[0][-1][1][-2:]
    assert first == (8, 5, 0x7FFFFFFF - 2)
    assert second == (8, 5, (0x7FFFFFFF - 2 + 4) & 0x7FFFFFFF)


def test_producer_sequences_reads_the_same_books():
    seqs = ProducerSequences()
    assert isinstance(seqs, kchannel._impl.load_twin("senderloop").SequenceState)
    assert _books(seqs) == (-1, -1, {}, {}, {}, set(), False)
    assert not seqs.has_producer_id()
    _scenario(seqs)
    # (ProducerSequences' own methods read the same fields)
    # (nothing of producer 8 acknowledged on TP: sequence 0 is next)
    assert seqs.is_next_sequence(TP, 0) and not seqs.is_next_sequence(TP, 4)
    assert seqs.is_current(_drained_batches(TP, 1)[0]) is False


def test_the_per_batch_calls_make_no_interpreted_frame():
    """Compiled, assign/first_unacked/acked are C calls (no frame); with the
    pure twins the same three are the interpreted frames (so the test checks
    what it means to on both runs, and never skips)."""
    seqs = ProducerSequences()
    seqs.set_producer_id(7, 3)
    b = _drained_batches(TP, 2)
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        assigned = seqs.assign(TP, b[0], [])
        waits = seqs.first_unacked(TP, [b[0]])
        seqs.acked(b[0])
    finally:
        sys.setprofile(None)
    assert (assigned, waits) == (True, True)
    assert seqs._last_acked[TP] == b[0].record_count - 1
    per_batch = {"assign", "first_unacked", "acked"}
    if kchannel._impl.loaded_kind("senderloop") == "compiled":
        assert not per_batch & set(calls), calls
    else:
        assert per_batch <= set(calls), calls
