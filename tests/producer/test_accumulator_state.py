"""RecordAccumulator's base class (the senderloop twin's
``AccumulatorState``) holds the state its Sender side reads per request,
C fields of the compiled twin; the attributes the compiled appender reads
from the accumulator's ``__dict__`` (see ``kchannel._cappender``: its
per-record path reads them there only when each is a plain instance
attribute, else through ``getattr``) stay plain instance attributes, and
every attribute reads and writes as before in both twins.  Likewise
ProducerBatch's base class (``BatchState``) holds the batch fields only
the Sender's side uses."""
from kchannel.client.metadata import TopicPartition
from kchannel.producer import accumulator as accumulator_module
from kchannel.producer.accumulator import ProducerBatch, RecordAccumulator
from kchannel.utils import now_ms

# What kchannel._cappender reads from the accumulator's __dict__.
APPENDER_DICT_NAMES = ("used_memory", "buffer_memory", "waiters", "on_new_batch",
                       "incomplete", "wakeup_needed", "closed")
SENDER_SIDE = ("batches", "lock", "memory", "muted", "linger_ms", "batch_size",
               "delivery_timeout_ms", "retry_backoff_ms", "retry_backoff_max_ms",
               "flushes_in_progress", "_drain_index", "_memory_waiters", "expiry_due")


def _new_accumulator():
    return RecordAccumulator(1024, 5, 100, 1000, 120000, 1 << 20, now_ms)


def test_the_appenders_attributes_stay_in_the_instance_dict():
    acc = _new_accumulator()
    d = vars(acc)
    for name in APPENDER_DICT_NAMES:
        assert name in d, name
        assert not any(name in vars(k) for k in type(acc).__mro__), name


def test_the_sender_side_state_is_the_base_class_s():
    acc = _new_accumulator()
    base = accumulator_module._senderloop.AccumulatorState
    assert isinstance(acc, base)
    for name in SENDER_SIDE:
        assert hasattr(base, name), name
        assert name not in vars(acc), name
    assert (acc.batch_size, acc.linger_ms, acc.delivery_timeout_ms) == (1024, 5, 120000)
    assert (acc.retry_backoff_ms, acc.retry_backoff_max_ms) == (100, 1000)
    assert acc.batches == {} and acc.muted == set() and acc.expiry_due is False
    acc.batch_size = 2048
    acc.expiry_due = True
    assert acc.batch_size == 2048 and acc.expiry_due is True
    # (a flush's count, kept by the accumulator's own methods)
    acc.begin_flush()
    assert acc.flushes_in_progress == 1
    acc.end_flush()
    assert acc.flushes_in_progress == 0



def test_deallocate_reads_and_writes_the_instance_dict():
    # accumulator_deallocate reaches incomplete and used_memory through
    # _instance_dict (the accumulator's own __dict__, where the appender
    # reads them): the attributes show what it did.
    acc = _new_accumulator()
    assert acc._instance_dict is vars(acc)
    batch = ProducerBatch(TopicPartition("t", 0), now_ms(), 300)
    other = ProducerBatch(TopicPartition("t", 1), now_ms(), 200)
    batch.encoded = b"x" * 10
    acc.used_memory = 500
    acc.incomplete.update((batch, other))
    acc.deallocate(batch)
    assert acc.used_memory == 200 and vars(acc)["used_memory"] == 200
    assert acc.incomplete == {other}
    assert batch.allocated == 0 and batch.encoded is None
    acc.deallocate(other)
    assert acc.used_memory == 0 and not acc.incomplete


# ProducerBatch's fields only the Sender's side uses, in its base class.
BATCH_SENDER_SIDE = ("encoded", "producer_id", "producer_epoch", "base_sequence", "attempts",
                     "event", "done_callbacks", "parent", "retry")


def test_producer_batch_sender_side_fields_are_its_base_class_s():
    base = accumulator_module._senderloop.BatchState
    assert ProducerBatch.__base__ is base
    for name in BATCH_SENDER_SIDE:
        assert name in vars(base), name
        assert name not in ProducerBatch.__slots__, name
    b = ProducerBatch(TopicPartition("t", 0), 5, 100)
    assert (b.encoded, b.producer_id, b.producer_epoch, b.base_sequence, b.attempts) == \
        (None, -1, -1, -1, 0)
    assert (b.event, b.done_callbacks, b.parent, b.retry) == (None, None, None, False)
    b.producer_id, b.base_sequence, b.attempts, b.retry = 7, 3, 2, True
    assert (b.producer_id, b.base_sequence, b.attempts, b.retry) == (7, 3, 2, True)
    if type(vars(base)["encoded"]).__name__ == "getset_descriptor":
        # The compiled twin: a batch made without __init__ (the compiled
        # appender opens batches with the type's tp_new) has __init__'s
        # values in these fields, and the compiled appender accepts the
        # class (its import refuses a base whose fields it cannot fill).
        import kchannel._cappender  # noqa: F401
        raw = ProducerBatch.__new__(ProducerBatch)
        assert (raw.encoded, raw.producer_id, raw.producer_epoch, raw.base_sequence,
                raw.attempts, raw.event, raw.done_callbacks, raw.parent, raw.retry) == \
            (None, -1, -1, -1, 0, None, None, None, False)


def test_the_lock_s_methods_are_bound_once():
    # The Sender's side calls acc._lock_acquire/_lock_release (the lock's
    # own bound methods): the lock they take is the accumulator's lock.
    acc = _new_accumulator()
    assert acc._lock_acquire.__self__ is acc.lock
    assert acc._lock_release.__self__ is acc.lock
    acc._lock_acquire()
    try:
        assert acc.lock.locked()
    finally:
        acc._lock_release()
    assert not acc.lock.locked()
    # ready() takes and releases it, and writes wakeup_needed to the
    # instance dict, where the appender reads it
    acc.wakeup_needed = False

    class _Cluster:
        leaders = {}

    acc.ready(_Cluster(), now_ms())
    assert not acc.lock.locked()
    assert vars(acc)["wakeup_needed"] is True
