"""``kchannel.aio.AIOProducer``: ``kchannel.Producer`` on the running event
loop, with no thread.

The producer's parts are the sync producer's: ``send`` appends through the
same appender (compiled twin when built) to the same
:class:`~kchannel.producer.accumulator.RecordAccumulator`, and the same
:class:`~kchannel.producer.sender.Sender` turns batches into Produce
requests.  What changes is who runs the Sender: instead of a network thread
blocked in ``select``, the loop calls ``Sender.run_once`` when one of the
producer's sockets is ready (``LoopSelector``), when ``send`` filled or
opened a batch (the Selector's ``wakeup``), and at the time the Sender
asked to be polled again (``loop.call_at``: linger, retry backoff, request
timeouts).

Where the sync ``send`` would block -- metadata of a new topic, buffer
memory -- ``AIOProducer.send`` awaits instead.
"""
import asyncio
import time as _time

from kchannel import errors
from kchannel.aio._loop import LoopSelector
from kchannel.client import RequestTimeoutError
from kchannel.log import get_logger
from kchannel.producer import Producer

__all__ = ["AIOProducer"]

log = get_logger("kchannel.aio.producer")

# Longest the loop leaves the Sender unpolled while it has nothing due:
# request and connection-setup timeouts are checked by its polls.
_MAX_IDLE_S = 0.5


class _MetadataNeeded(Exception):
    """Raised by the loop producer where the sync one would block for a
    topic's metadata: ``AIOProducer.send`` awaits it and tries again."""


class _LoopProducer(Producer):
    """The sync producer with the event loop's selector and no thread."""

    def __init__(self, os_selector, configs, kwargs):
        self._loop_selector = os_selector
        super().__init__(configs, **kwargs)

    def _new_os_selector(self):
        return self._loop_selector

    def _start_io(self):
        self._thread = None

    def _wait_for_topic(self, topic, partition, max_wait_ms, start, count):
        raise _MetadataNeeded(topic)

    def _on_metadata(self, cluster):
        self._loop_selector.on_metadata()

    def close(self, timeout=None):
        # Reached only from __del__ of an AIOProducer never closed: no I/O
        # from a finalizer, just let go of the sockets.
        if self._closed and self._sender.force_close:
            return
        self._closed = True
        self._sender.running = False
        self._sender.force_close = True
        self.accumulator.close()
        try:
            self._sender.finish_shutdown()
        except Exception:
            pass


class _ProducerSelector(LoopSelector):
    def __init__(self, owner):
        super().__init__(owner._schedule_now, owner._schedule_now)
        self.on_metadata = owner._on_metadata


class AIOProducer:
    """An asyncio Kafka producer; ``config`` (and keyword arguments) as
    ``kchannel.Producer``'s.  Use ``async with`` or ``await close()``."""

    def __init__(self, config=None, **kwargs):
        self._loop = None
        self._finished = False       # closed: the Sender is not run again
        self._scheduled = False      # a call_soon of _run is pending
        self._timer = None           # the call_at of _run, when one is pending
        self._timer_when = None
        self._metadata_waiters = []
        self._memory_waiters = []
        self._idle_waiters = []      # flush(): futures set when nothing is incomplete
        self._selector = _ProducerSelector(self)
        self._producer = _LoopProducer(self._selector, config, kwargs)
        p = self._producer
        self.config = p.config
        self.client_id = p.client_id
        self._acc = p.accumulator
        self._sender = p._sender
        self._client = p._client
        self._send = p.send          # the appender's fast path
        self._closing = False

    # -- driving the Sender ----------------------------------------------------------
    def _get_loop(self):
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _schedule_now(self):
        if not self._scheduled and not self._finished:
            self._scheduled = True
            self._get_loop().call_soon(self._run)

    def _run(self):
        self._scheduled = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._finished:
            return
        sender = self._sender
        try:
            sender.run_once()
        except Exception:
            log.exception("Uncaught error in kafka producer I/O: ")
        acc = self._acc
        if self._idle_waiters and not acc.incomplete:
            _release(self._idle_waiters)
        if self._memory_waiters and acc.used_memory + acc.batch_size <= acc.buffer_memory:
            _release(self._memory_waiters)
        if self._closing:
            if not sender.shutdown_pending():
                _release(self._idle_waiters)
                return
        if self._client.client.has_pending_io():
            self._schedule_now()
            return
        timeout = self._selector.timeout
        if timeout is None or timeout > _MAX_IDLE_S:
            timeout = _MAX_IDLE_S
        loop = self._loop
        self._timer = loop.call_at(loop.time() + timeout, self._run)

    def _on_metadata(self):
        if self._metadata_waiters:
            _release(self._metadata_waiters)

    async def _wait(self, waiters, deadline):
        """Wait on the loop until ``_run`` releases ``waiters`` or the
        monotonic ``deadline`` passes (False then)."""
        left = deadline - _time.monotonic()
        if left <= 0:
            return False
        fut = self._get_loop().create_future()
        waiters.append(fut)
        self._schedule_now()
        try:
            if left == float("inf"):
                await fut
            else:
                await asyncio.wait_for(fut, left)
        except asyncio.TimeoutError:
            return False
        finally:
            if fut in waiters:
                waiters.remove(fut)
        return True

    # -- send ----------------------------------------------------------------------------
    async def start(self):
        """aiokafka's ``start()``: connections are made when records are
        sent, so there is nothing to do."""
        self._get_loop()

    async def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                   headers=None):
        """Enqueue one record; returns its
        :class:`~kchannel.producer.FutureRecordMetadata`: await it for the
        RecordMetadata, as aiokafka's ``send`` future.  It is not an
        ``asyncio.Future`` (none is made per record): ``asyncio.gather``
        wraps each in a task, so for many records await them in turn or
        ``flush()``.  Awaits metadata of a
        new topic and buffer memory for up to ``max.block.ms``."""
        acc = self._acc
        if acc.used_memory + acc.batch_size > acc.buffer_memory:
            await self._wait_for_memory()
        try:
            return self._send(topic, value, key, headers, partition, timestamp_ms)
        except _MetadataNeeded:
            pass
        await self._wait_for_metadata(topic, partition)
        return self._send(topic, value, key, headers, partition, timestamp_ms)

    produce = send

    async def send_and_wait(self, topic, value=None, key=None, partition=None,
                            timestamp_ms=None, headers=None):
        """Send one record and await its RecordMetadata.  Cancelling this
        stops the wait, not the record: it stays enqueued and is sent."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    async def _wait_for_memory(self):
        max_block = self.config["max.block.ms"]
        deadline = _time.monotonic() + max_block / 1000.0
        acc = self._acc
        while acc.used_memory + acc.batch_size > acc.buffer_memory and acc.used_memory > 0:
            if self._producer._closed:
                raise errors.KChannelError(
                    "Cannot perform operation after producer has been closed")
            if not await self._wait(self._memory_waiters, deadline):
                raise RequestTimeoutError(
                    f"Failed to allocate memory within the configured max blocking time "
                    f"{max_block} ms.")

    async def _wait_for_metadata(self, topic, partition):
        p = self._producer
        max_block = self.config["max.block.ms"]
        deadline = _time.monotonic() + max_block / 1000.0
        while True:
            p.metadata.add_topic(topic, p._time())
            p.metadata.request_update()
            waited = await self._wait(self._metadata_waiters, deadline)
            cluster = p.metadata.cluster
            p._check_topic_metadata(topic, cluster)
            count = cluster.partition_count(topic)
            if count and (partition is None or partition < count):
                return
            if not waited:
                if count and partition is not None and partition >= count:
                    raise RequestTimeoutError(
                        f"Partition {partition} of topic {topic} with partition count {count} "
                        f"is not present in metadata after {max_block} ms.")
                raise RequestTimeoutError(
                    f"Topic {topic} not present in metadata after {max_block} ms.")

    async def partitions_for(self, topic):
        """The topic's partitions (``PartitionInfo``), awaiting metadata up
        to ``max.block.ms``."""
        p = self._producer
        count = p.metadata.cluster.partition_count(topic)
        if not count:
            p.metadata.add_topic(topic, p._time())
            await self._wait_for_metadata(topic, None)
        return p.metadata.cluster.partitions_for_topic(topic)

    # -- flush / close --------------------------------------------------------------------
    async def flush(self, timeout=None):
        """Send everything buffered now and wait until every record sent so
        far is acknowledged or failed; ``timeout`` (seconds) raises
        ``RequestTimeoutError`` when it passes first (the records stay
        enqueued)."""
        acc = self._acc
        deadline = None if timeout is None else _time.monotonic() + timeout
        acc.begin_flush()
        try:
            while acc.incomplete:
                if deadline is None:
                    await self._wait(self._idle_waiters, float("inf"))
                elif not await self._wait(self._idle_waiters, deadline):
                    raise RequestTimeoutError(
                        f"Flush did not complete within {timeout} s: "
                        f"{len(acc.incomplete)} batch(es) still pending")
        finally:
            acc.end_flush()

    async def close(self, timeout=None):
        """Send what is buffered and close: with no ``timeout`` wait until
        every record is acknowledged; with ``timeout`` seconds at most that
        long, then fail what is left ("Producer is closed forcefully.")."""
        p = self._producer
        if p._closed:
            return
        log.info("Closing the Kafka producer with timeoutMillis = %s ms.",
                 "9223372036854775807" if timeout is None else int(timeout * 1000))
        p._closed = True
        sender = self._sender
        sender.running = False
        self._closing = True
        self._acc.close()
        if timeout is not None and timeout <= 0:
            sender.force_close = True
        deadline = float("inf") if timeout is None else _time.monotonic() + timeout
        try:
            while sender.shutdown_pending():
                if not await self._wait(self._idle_waiters, deadline):
                    sender.force_close = True
                    break
        finally:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            # A close cancelled part-way still ends forcefully: nothing is
            # left running on the loop.
            if sender.shutdown_pending():
                sender.force_close = True
            self._finished = True
            sender.finish_shutdown()
            _release(self._idle_waiters)
            _release(self._memory_waiters)
            _release(self._metadata_waiters)
        log.debug("Kafka producer has been closed")

    stop = close

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()


def _release(waiters):
    for fut in waiters:
        if not fut.done():
            fut.set_result(None)
    waiters.clear()
