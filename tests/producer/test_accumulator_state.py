"""RecordAccumulator's base class (the senderloop twin's
``AccumulatorState``) holds the state its Sender side reads per request,
C fields of the compiled twin; the attributes the compiled appender reads
from the accumulator's ``__dict__`` (see ``kchannel._cappender``: its
per-record path reads them there only when each is a plain instance
attribute, else through ``getattr``) stay plain instance attributes, and
every attribute reads and writes as before in both twins."""
from kchannel.producer import accumulator as accumulator_module
from kchannel.producer.accumulator import RecordAccumulator
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

