"""``AIOProducer``'s per-record path: ``send`` (the method) and the await of
a record's future.  Pure twin of ``kchannel._caiosend``.

Here ``send`` is an ``async def`` (so that ``asyncio.create_task(p.send(...))``
works, as with aiokafka) and a record's future is awaited by
``FutureRecordMetadata.__await__`` itself.  The compiled twin cuts what
asyncio adds per record on top of the sync producer's appender: its ``send``
appends at once and returns a C awaitable already done (no coroutine frame),
and the await of an acknowledged record's future finishes with no generator
(see ``kchannel_ext/_caiosend.pyx``).
"""
from kchannel.producer.accumulator import FutureRecordMetadata

__all__ = ["send", "future_await"]


class _MetadataNeeded(Exception):
    """Raised by the loop producer where the sync one would block for a
    topic's metadata: ``send`` awaits it and tries again."""


async def send(producer, topic, value=None, key=None, partition=None, timestamp_ms=None,
               headers=None):
    """Enqueue one record; returns its
    :class:`~kchannel.producer.FutureRecordMetadata`: await it for the
    RecordMetadata, as aiokafka's ``send`` future.  It is not an
    ``asyncio.Future`` (none is made per record): ``asyncio.gather``
    wraps each in a task, so for many records await them in turn or
    ``flush()``.  Awaits metadata of a
    new topic and buffer memory for up to ``max.block.ms``."""
    if producer._driver is None:
        producer._start_driver()
    if producer._acc.used_memory > producer._memory_limit:
        await producer._wait_for_memory()
    try:
        return producer._send(topic, value, key, headers, partition, timestamp_ms)
    except _MetadataNeeded:
        pass
    await producer._wait_for_metadata(topic, partition)
    return producer._send(topic, value, key, headers, partition, timestamp_ms)


_await = FutureRecordMetadata.__await__


def future_await(future):
    """``FutureRecordMetadata.__await__`` (installed on the class by
    kchannel.aio): here the method's own generator."""
    return _await(future)
