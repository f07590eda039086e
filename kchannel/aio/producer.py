"""``kchannel.aio.AIOProducer``: ``kchannel.Producer`` on the running event
loop, with no thread.

The producer's parts are the sync producer's: ``send`` appends through the
same appender (compiled twin when built) to the same
:class:`~kchannel.producer.accumulator.RecordAccumulator`, and the same
:class:`~kchannel.producer.sender.Sender` turns batches into Produce
requests.  What changes is where the Sender runs: instead of on a network
thread blocked in ``select``, its loop runs in a greenlet on the event loop
(:class:`~kchannel.aio._loop.Driver`) and, where it would wait, switches
back to the loop until its next event for its sockets (``LoopSelector``),
a ``wakeup`` from ``send`` (a batch filled or opened) or the time it asked
to be polled again (linger, retry backoff): the loop callback of that event
switches into it directly.  A blocking credential callback it meets
(an OAuth token fetch) is awaited on the loop's executor.

Where the sync ``send`` would block -- metadata of a new topic, buffer
memory -- ``AIOProducer.send`` awaits instead.
"""
import asyncio
import time as _time

from kchannel import _impl, errors
from kchannel.aio._aiosend_py import _MetadataNeeded
from kchannel.aio._loop import Driver, LoopSelector
from kchannel.client import RequestTimeoutError
from kchannel.client.group_metadata import ConsumerGroupMetadata
from kchannel.log import get_logger
from kchannel.producer import Producer
from kchannel.producer.transaction_manager import State

__all__ = ["AIOProducer"]

log = get_logger("kchannel.aio.producer")

# Longest the Sender waits for an event while it has nothing due: request
# and connection-setup timeouts are checked by its polls.
_MAX_IDLE_S = 0.5

# The per-record path (send, the await of a record's future), compiled when
# built; see kchannel.aio._aiosend_py.
_aiosend = _impl.load_twin("aiosend")
# An acknowledged record's await with no generator (the compiled twin; the
# pure twin's is the method's own, left in place).  Set on the class, not per
# instance: the sync producer's futures are the same type and await the same
# way.
_aiosend.install_await()


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
        super().__init__()
        self.on_metadata = owner._on_metadata
        self.max_wait = _MAX_IDLE_S
        self.yield_on_zero = True


class AIOProducer(_aiosend.SendBase):
    """An asyncio Kafka producer; ``config`` (and keyword arguments) as
    ``kchannel.Producer``'s.  Use ``async with`` or ``await close()``.

    ``send`` is its base class's (``kchannel.aio._aiosend_py.SendBase``,
    compiled when built): the per-record path."""

    def __init__(self, config=None, **kwargs):
        self._loop = None
        self._finished = False       # closed: the Sender is not run again
        self._driver = None          # future of the Sender's greenlet's end (Driver.done)
        self._metadata_waiters = []
        self._memory_waiters = []
        self._idle_waiters = []      # flush(): futures set when nothing is incomplete
        # Transactional operations awaited: [(TransactionalRequestResult,
        # future)], each future set once the Sender completed its result.
        self._txn_waiters = []
        self._bridge = Driver()
        self._selector = _ProducerSelector(self)
        self._selector.bridge = self._bridge
        self._producer = _LoopProducer(self._selector, config, kwargs)
        p = self._producer
        self.config = p.config
        self.client_id = p.client_id
        self._acc = p.accumulator
        self._memory_slack = self._acc.buffer_memory // 8   # see _release_waiters
        # send() awaits buffer memory above this (one batch must fit).
        self._memory_limit = self._acc.buffer_memory - self._acc.batch_size
        self._sender = p._sender
        self._client = p._client
        self._send = p.send          # the appender's fast path (transactional: joins it)
        self._txn = p._txn
        # What send reads per record, read once (the compiled twin: held in
        # the SendBase's C fields).  No instance attribute named send or
        # produce: one would shadow the class's method and keep the
        # interpreter from specializing ``p.send(...)`` (see SendBase).
        _aiosend.bind_send(self)

    # -- driving the Sender ----------------------------------------------------------
    def _get_loop(self):
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _start_driver(self):
        if self._driver is None and not self._finished:
            self._bridge.start(self._get_loop(), self._drive)
            self._driver = self._bridge.done

    def _wake(self):
        self._start_driver()
        self._selector.wakeup()

    def _drive(self):
        """The Sender's thread body (``Sender.run``: passes while it runs,
        then while its shutdown is pending), in the bridged greenlet,
        telling the awaiting coroutines after each pass.  A pass is written
        out here, no method of its own: it runs once per Produce request."""
        sender = self._sender
        log.debug("Starting Kafka producer I/O on the event loop.")
        while sender.running or sender.shutdown_pending():
            try:
                # (looked up per pass: a test may replace it)
                sender.run_once()
            except Exception:
                log.exception("Uncaught error in kafka producer I/O: ")
            if self._idle_waiters or self._memory_waiters or self._txn_waiters:
                self._release_waiters()

    def _release_waiters(self):
        acc = self._acc
        if self._idle_waiters and not acc.incomplete:
            _release(self._idle_waiters)
        # Memory waiters are woken once a batch and a slack of
        # buffer.memory / 8 are free, as the sync producer's waiting
        # appends: woken per completed batch, an application outrunning the
        # network would append one batch and wait again, a future and a
        # task wake-up per batch.
        if self._memory_waiters and (
                acc.used_memory + acc.batch_size + self._memory_slack <= acc.buffer_memory
                or acc.used_memory <= 0):
            _release(self._memory_waiters)
        if self._txn_waiters:
            self._release_txn_waiters()

    def _release_txn_waiters(self):
        waiting = []
        for result, fut in self._txn_waiters:
            if result.is_completed:
                if not fut.done():
                    fut.set_result(None)
            elif not fut.done():
                waiting.append((result, fut))
        self._txn_waiters[:] = waiting

    def _on_metadata(self):
        if self._metadata_waiters:
            _release(self._metadata_waiters)

    async def _wait(self, waiters, deadline):
        """Wait on the loop until ``_run`` releases ``waiters`` or the
        monotonic ``deadline`` passes (False then); the Sender makes a pass
        at once (what is waited for may be done by one).

        A future and a loop timer, not ``asyncio.wait_for`` (a task per
        wait)."""
        left = deadline - _time.monotonic()
        if left <= 0:
            return False
        loop = self._get_loop()
        fut = loop.create_future()
        waiters.append(fut)
        timer = None if left == float("inf") else loop.call_later(left, _expire, fut)
        self._wake()
        try:
            return await fut
        finally:
            if timer is not None:
                timer.cancel()
            if fut in waiters:
                waiters.remove(fut)

    # -- send ----------------------------------------------------------------------------
    async def start(self):
        """aiokafka's ``start()``: starts the Sender on the loop (connections
        are made when records are sent)."""
        self._start_driver()

    # send: SendBase's (set below, made for this class).

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
            # Counted with the accumulator's waiters: every batch is
            # sendable meanwhile (Kafka's ready() with the pool exhausted),
            # which the Sender's pass woken here sees.
            acc.waiters += 1
            try:
                waited = await self._wait(self._memory_waiters, deadline)
            finally:
                acc.waiters -= 1
            if not waited:
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

    # -- transactions ----------------------------------------------------------------
    # confluent_kafka.aio's names and signatures (timeouts in seconds,
    # default max.block.ms); the Sender completes each operation on the loop
    # and the call awaits it -- no thread, nothing blocking.  A timeout or a
    # cancellation stops the wait, not the operation: the Sender carries it
    # on, and calling the same method again awaits the same request (Kafka's
    # handleCachedTransactionRequestResult).
    def _require_transactional(self, operation):
        self._producer._require_transactional(operation)

    async def _await_result(self, result, timeout):
        """Await a ``TransactionalRequestResult`` the Sender completes;
        raises its error, or RequestTimeoutError after ``timeout`` s."""
        if timeout is None:
            timeout = self.config["max.block.ms"] / 1000.0
        if not result.is_completed:
            fut = self._get_loop().create_future()
            self._txn_waiters.append((result, fut))
            self._wake()
            try:
                await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                pass
            finally:
                if not fut.done():
                    fut.cancel()
            if not result.is_completed:
                if self._finished:
                    raise errors.KChannelError(
                        "Cannot perform operation after producer has been closed")
                raise RequestTimeoutError(
                    f"Timeout expired after {int(timeout * 1000)}ms while awaiting "
                    f"{result.operation}")
        if result.error is not None:
            raise result.error

    async def init_transactions(self, timeout=None):
        """Register ``transactional.id`` with its coordinator (Kafka's
        ``initTransactions``): fences any earlier producer with the same id
        and completes its open transaction.  Once, before the first
        transaction."""
        self._require_transactional("initTransactions")
        if self._driver is None:
            self._start_driver()
        await self._await_result(self._txn.initialize_transactions(), timeout)

    def begin_transaction(self):
        """Start a transaction (Kafka's ``beginTransaction``; no I/O).  Takes
        effect when called; returns an awaitable, so that both
        ``await p.begin_transaction()`` (confluent_kafka.aio) and
        ``p.begin_transaction()`` (aiokafka) work."""
        self._require_transactional("beginTransaction")
        self._txn.begin_transaction()
        return _DONE

    async def send_offsets_to_transaction(self, offsets, group_metadata, timeout=None):
        """Commit ``offsets`` ({TopicPartition: OffsetAndMetadata or offset},
        the next offsets to read) for the group of ``group_metadata``
        (``AIOConsumer.group_metadata()``, or a group id string as
        aiokafka's) with this transaction: committed if and only if it
        commits (Kafka's ``sendOffsetsToTransaction``)."""
        self._require_transactional("sendOffsetsToTransaction")
        group_metadata = ConsumerGroupMetadata.coerce(group_metadata)
        if not offsets:
            return
        await self._await_result(
            self._txn.send_offsets_to_transaction(offsets, group_metadata), timeout)

    async def commit_transaction(self, timeout=None):
        """Send every buffered record, then commit the transaction (Kafka's
        ``commitTransaction``).  An abortable error (a record failed)
        raises here; ``abort_transaction()`` then starts over.  Cancelled
        or timed out, the commit goes on: await ``commit_transaction()``
        again for its outcome (the producer accepts nothing else until it
        is known)."""
        self._require_transactional("commitTransaction")
        acc = self._acc
        acc.begin_flush()
        try:
            await self._await_result(self._txn.begin_commit(), timeout)
        finally:
            acc.end_flush()

    async def abort_transaction(self, timeout=None):
        """Abort the transaction: records not sent yet fail with
        TransactionAbortedError, the ones written are never visible to
        read_committed consumers (Kafka's ``abortTransaction``).  Cancelled
        or timed out, as ``commit_transaction``."""
        self._require_transactional("abortTransaction")
        await self._await_result(self._txn.begin_abort(), timeout)

    def transaction(self):
        """aiokafka's ``async with producer.transaction():``: begins a
        transaction (initializing transactions first if not done yet, as
        aiokafka's ``start()`` does), commits it when the block ends,
        aborts it when the block raises."""
        return _Transaction(self)

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
        self._acc.close()
        if timeout is not None and timeout <= 0:
            sender.force_close = True
        self._wake()
        driver = self._driver
        try:
            try:
                await asyncio.wait_for(asyncio.shield(driver), timeout)
            except asyncio.TimeoutError:
                sender.force_close = True
                self._selector.wakeup()
                await driver
        finally:
            # A close cancelled part-way still ends forcefully: nothing is
            # left running on the loop.
            if not driver.done():
                sender.force_close = True
                if not self._bridge.cancel():
                    driver.cancel()
            self._finished = True
            sender.finish_shutdown()
            _release(self._idle_waiters)
            _release(self._memory_waiters)
            _release(self._metadata_waiters)
            for _, fut in self._txn_waiters:
                if not fut.done():
                    fut.set_result(None)
            self._txn_waiters.clear()
        log.debug("Kafka producer has been closed")

    stop = close

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()


# SendBase.send as this class's own method (the compiled twin: a method
# descriptor of AIOProducer itself, which the interpreter calls without a
# generic call when the instance's type is exactly AIOProducer; a
# subclass's instances call it too, or their own send).
AIOProducer.send = AIOProducer.produce = _aiosend.send_method(AIOProducer)


class _Done:
    """An awaitable already done (``begin_transaction``'s)."""
    __slots__ = ()

    def __await__(self):
        return
        yield


_DONE = _Done()


class _Transaction:
    __slots__ = ("_producer",)

    def __init__(self, producer):
        self._producer = producer

    async def __aenter__(self):
        p = self._producer
        p._require_transactional("beginTransaction")
        if p._txn.state is State.UNINITIALIZED:
            await p.init_transactions()
        p.begin_transaction()
        return p

    async def __aexit__(self, exc_type, exc, tb):
        p = self._producer
        if exc_type is None:
            await p.commit_transaction()
        elif p._txn.in_open_transaction():
            # A fatal error (fenced) cannot be aborted: the block's own
            # exception is what the application sees.
            await p.abort_transaction()
        return False


def _release(waiters):
    for fut in waiters:
        if not fut.done():
            fut.set_result(True)
    waiters.clear()


def _expire(fut):
    # The deadline of AIOProducer._wait.
    if not fut.done():
        fut.set_result(False)
