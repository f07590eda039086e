"""``AIOProducer``'s per-record path: ``send`` (the method) and the await of
a record's future.  Pure twin of ``kchannel._caiosend``.

``send`` appends at once when the record needs no wait and returns a
coroutine already holding its future (so that
``asyncio.create_task(p.send(...))`` works, as with aiokafka); here a
record's future is awaited by ``FutureRecordMetadata.__await__`` itself.  The
compiled twin cuts what asyncio adds per record on top of the sync
producer's appender: its ``send`` returns a C awaitable already done (no
coroutine frame), and the await of an acknowledged record's future finishes
with no generator (see ``kchannel_ext/_caiosend.pyx``).
"""
from kchannel.producer.accumulator import FutureRecordMetadata

__all__ = ["SendBase", "send", "send_method", "bind_send", "future_await", "install_await"]


class _MetadataNeeded(Exception):
    """Raised by the loop producer where the sync one would block for a
    topic's metadata: ``send`` awaits it and tries again."""


class SendBase:
    """SendBase()

    AIOProducer's base class: its ``send`` method.  (The compiled twin's
    keeps what ``send`` reads of the producer per record in C fields,
    filled by ``bind_send``.)"""
    __slots__ = ()

    def send(self, /, topic, value=None, key=None, partition=None, timestamp_ms=None,
             headers=None):
        """Enqueue one record; returns its
        :class:`~kchannel.producer.FutureRecordMetadata`: await it for the
        RecordMetadata, as aiokafka's ``send`` future.  It is not an
        ``asyncio.Future`` (none is made per record): ``asyncio.gather``
        wraps each in a task, so for many records await them in turn or
        ``flush()``.  Awaits metadata of a
        new topic and buffer memory for up to ``max.block.ms``.

        The record is enqueued when ``send(...)`` is called, when that needs
        no wait (its topic's metadata known, buffer memory free); what is
        returned is a coroutine (``asyncio.create_task(p.send(...))``
        works) that gives the future, or raises the append's error, where
        it is awaited."""
        if self._driver is None:
            self._start_driver()
        if self._acc.used_memory > self._memory_limit:
            return _send_slow(self, topic, value, key, partition, timestamp_ms, headers)
        try:
            future = self._send(topic, value, key, headers, partition, timestamp_ms)
        except _MetadataNeeded:
            return _send_slow(self, topic, value, key, partition, timestamp_ms, headers)
        except Exception as exc:
            # Raised where the result is awaited, as from a coroutine.
            return _raise(exc)
        return _done(future)


def send(producer, topic, value=None, key=None, partition=None, timestamp_ms=None,
         headers=None):
    """``SendBase.send`` for ``producer`` (an AIOProducer, or any object
    with its ``_driver``, ``_start_driver``, ``_acc``, ``_memory_limit``,
    ``_send``, ``_wait_for_memory`` and ``_wait_for_metadata``)."""
    return SendBase.send(producer, topic, value, key, partition, timestamp_ms, headers)


def send_method(cls):
    """SendBase.send, to be set as ``cls``'s (a subclass of SendBase)
    ``send``: here the function itself (the compiled twin makes its method
    descriptor for ``cls``, which the interpreter calls fastest)."""
    if not isinstance(cls, type) or not issubclass(cls, SendBase):
        raise TypeError(f"{cls!r} is not a subclass of SendBase")
    return SendBase.send


def bind_send(producer):
    """None: nothing to bind here (``SendBase.send`` reads the producer's
    attributes; the compiled twin fills a SendBase's C fields and returns
    None, or returns a bound send for any other producer)."""
    return None


async def _send_slow(producer, topic, value, key, partition, timestamp_ms, headers):
    # send() where the record waits first: buffer memory, a new topic's
    # metadata (both awaited up to max.block.ms).
    if producer._acc.used_memory > producer._memory_limit:
        await producer._wait_for_memory()
    try:
        return producer._send(topic, value, key, headers, partition, timestamp_ms)
    except _MetadataNeeded:
        pass
    await producer._wait_for_metadata(topic, partition)
    return producer._send(topic, value, key, headers, partition, timestamp_ms)


async def _done(value):
    return value


async def _raise(exc):
    raise exc


_await = FutureRecordMetadata.__await__


def future_await(future):
    """``FutureRecordMetadata.__await__`` (installed on the class by
    kchannel.aio): here the method's own generator."""
    return _await(future)


def install_await():
    """Here nothing: ``FutureRecordMetadata.__await__`` is the method's own
    (the compiled twin installs its await on the class)."""
