"""``kchannel.aio.AIOConsumer``: ``kchannel.Consumer`` on the running event
loop, with no thread.

The consumer's own code (fetcher, subscription state, group coordinator,
offset requests) runs unchanged through :class:`~kchannel.aio._loop.Bridge`:
where it would wait for the network it awaits the loop instead, its
sockets being the loop's readers and writers (``LoopSelector``).  Calls are
served one at a time, in order (an ``asyncio.Lock``): a ``commit()`` from
another task waits for a running ``getmany()`` to return.

Responses that arrive while no call is running are read at once, in a
bridged ``poll(0)`` of their own (a fetch the last poll pipelined is
buffered, not left in the socket).

Between calls a keep-alive task does what Kafka's heartbeat thread does:
it sends the group's heartbeats when they are due, so an application that
awaits other work between ``getmany`` calls stays in the group for up to
``max.poll.interval.ms``; past that, it leaves the group ("consumer poll
timeout has expired") and the next call rejoins, reporting the partitions
as lost.  A running call heartbeats itself (``Consumer.poll``); the task
then only waits.
"""
import asyncio
import inspect
import operator
from itertools import groupby

from kchannel import errors
from kchannel.aio._loop import Bridge, LoopSelector
from kchannel.consumer import Consumer
from kchannel.log import get_logger
from kchannel.client.metadata import TopicPartition

__all__ = ["AIOConsumer"]

log = get_logger("kchannel.aio.consumer")

# A ConsumerRecord's (topic, partition): its first two fields, read in C by
# groupby over every record of a poll.
_TOPIC_PARTITION = operator.itemgetter(0, 1)


class _LoopConsumer(Consumer):
    """The sync consumer with the event loop's selector."""

    def __init__(self, os_selector, configs, kwargs):
        self._loop_selector = os_selector
        super().__init__(configs, **kwargs)
        # Headers as a tuple of (key, value) pairs, as aiokafka's records':
        # a record holding nothing the garbage collector tracks cannot be
        # part of a reference cycle, so the compiled decoder leaves it
        # untracked for good -- applications hold a poll's records while
        # the next poll decodes, and every collection would otherwise
        # traverse and promote them (see README, AIOConsumer).
        self._fetcher.tuple_headers = True

    def _new_os_selector(self):
        return self._loop_selector


def _tp(tp):
    return tp if isinstance(tp, TopicPartition) else TopicPartition(tp[0], int(tp[1]))


def _is_tp(value):
    return isinstance(value, TopicPartition) or (
        isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str))


def _partitions(args):
    """``pause(tp1, tp2)`` (aiokafka) and ``pause([tp1, tp2])`` (Kafka,
    confluent-kafka) alike."""
    if len(args) == 1 and not _is_tp(args[0]):
        args = args[0]
    return [_tp(p) for p in args]


class _Listener:
    """The rebalance listener the coordinator calls: puts back the records
    the iterator holds for revoked partitions, then calls the
    application's listener, awaiting it when it is a coroutine function."""

    def __init__(self, owner, listener):
        self._owner = owner
        self._listener = listener

    def _call(self, name, partitions):
        fn = getattr(self._listener, name, None) if self._listener is not None else None
        if fn is None:
            return
        result = fn(partitions)
        if inspect.isawaitable(result):
            self._owner._bridge.await_(result)

    def on_partitions_revoked(self, partitions):
        self._owner._rewind(set(partitions))
        self._call("on_partitions_revoked", partitions)

    def on_partitions_assigned(self, partitions):
        self._call("on_partitions_assigned", partitions)

    def __getattr__(self, name):
        # The coordinator calls on_partitions_lost only when the
        # application's listener has it (else on_partitions_revoked).
        if name == "on_partitions_lost" and getattr(self._listener, name, None) is not None:
            def lost(partitions):
                self._owner._rewind(set(partitions))
                self._call(name, partitions)
            return lost
        raise AttributeError(name)


class AIOConsumer:
    """An asyncio Kafka consumer; ``config`` (and keyword arguments) as
    ``kchannel.Consumer``'s.  Use ``async with`` or ``await close()``."""

    def __init__(self, config=None, **kwargs):
        self._bridge = Bridge()
        self._selector = LoopSelector(self._on_event)
        self._selector.bridge = self._bridge
        self._idle_task = None
        self._keepalive_task = None
        self._consumer = _LoopConsumer(self._selector, config, kwargs)
        self.config = self._consumer.config
        self._max_poll_interval_s = self.config["max.poll.interval.ms"] / 1000.0
        self._last_poll = None       # loop time the application last polled
        # Records handed to the iterator but not yet to the application:
        # self._records[self._next:].
        self._records = []
        self._next = 0
        self._closed = False

    # -- loop callbacks --------------------------------------------------------------
    def _on_event(self):
        """A socket event no waiting call took: read it soon, in a bridged
        poll of its own (responses to the fetches the last call pipelined
        are buffered in the fetcher).  False while a call is in progress:
        it polls when it next waits."""
        if self._closed or self._bridge.busy or self._idle_task is not None:
            return False
        self._idle_task = self._selector.loop.create_task(self._idle_poll())
        return True

    async def _idle_poll(self):
        try:
            if not self._closed:
                await self._bridge.run(self._consumer._client.poll, 0)
        except Exception:
            log.exception("Error reading responses between calls")
        finally:
            self._idle_task = None

    # -- heartbeats between calls ----------------------------------------------------
    def _start_keepalive(self):
        if self._keepalive_task is None and not self._closed:
            self._keepalive_task = self._selector.loop.create_task(self._keepalive())

    async def _keepalive(self):
        """Kafka's heartbeat thread, as a task: heartbeats while no call runs."""
        c = self._consumer
        loop = self._selector.loop
        try:
            while not self._closed:
                group = c._group
                # (a heartbeat in flight: its response is read by the idle
                # poll; look again after at most one interval)
                delay = c.config["heartbeat.interval.ms"] / 1000.0
                if group is not None and group.active:
                    delay = min(delay, group.time_to_next_heartbeat(c._time()) / 1000.0)
                if self._last_poll is not None:
                    # Wake when the poll timer expires too.
                    delay = min(delay, max(self._last_poll + self._max_poll_interval_s
                                           - loop.time(), 0.0))
                await asyncio.sleep(max(delay, 0.001))
                if self._closed or self._bridge.busy:
                    continue
                group = c._group
                if group is None or not group.active:
                    continue
                if (self._last_poll is not None
                        and loop.time() - self._last_poll > self._max_poll_interval_s):
                    # Kafka's heartbeat thread on an expired poll timer.
                    log.warning(
                        "consumer poll timeout has expired. This means the time between "
                        "subsequent calls to poll() was longer than the configured "
                        "max.poll.interval.ms, which typically implies that the poll loop "
                        "is spending too much time processing messages. You can address "
                        "this either by increasing max.poll.interval.ms or by reducing "
                        "the maximum size of batches returned in poll() with "
                        "max.poll.records.")
                    self._last_poll = None
                    await self._bridge.run(group.leave_group, c.config["request.timeout.ms"],
                                           "consumer poll timeout has expired.")
                    continue
                await self._bridge.run(self._heartbeat)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Error heartbeating between calls")
        finally:
            self._keepalive_task = None

    def _heartbeat(self):
        # In the bridged greenlet: send the heartbeat if due; its response
        # is read by the idle poll (_on_event) or the next call.
        c = self._consumer
        group = c._group
        if group is not None:
            group.maybe_heartbeat(c._time())
        c._client.poll(0)

    # -- helpers ------------------------------------------------------------------------
    def _call(self, fn, *args, **kwargs):
        if self._closed:
            raise errors.KChannelError("This consumer has already been closed.")
        return self._bridge.run(fn, *args, **kwargs)

    def _polled(self):
        """The application polls: the poll timer restarts."""
        self._last_poll = self._selector.loop.time()
        self._start_keepalive()

    def _rewind(self, tps=None):
        """Seek the partitions (all by default) of the records the
        iterator holds back to the first one not handed out, and drop
        those records: positions and commits then count only what the
        application received."""
        records, i = self._records, self._next
        if i >= len(records):
            self._records, self._next = [], 0
            return
        first = {}
        for r in records[i:]:
            tp = TopicPartition(r.topic, r.partition)
            if tp not in first and (tps is None or tp in tps):
                first[tp] = r.offset
        c = self._consumer
        for tp, offset in first.items():
            if c.subscriptions.is_assigned(tp):
                c.seek(tp, offset)
        if tps is None:
            self._records, self._next = [], 0
        else:
            self._records = [r for r in records[i:]
                             if TopicPartition(r.topic, r.partition) not in tps]
            self._next = 0

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self):
        """aiokafka's ``start()``: connections are made by the first call
        that needs them, so there is nothing to do."""

    async def close(self, timeout=None):
        """Commit (with ``enable.auto.commit``), leave the group, close the
        connections."""
        if self._closed:
            return
        self._rewind()
        task, self._keepalive_task = self._keepalive_task, None
        if task is not None:
            task.cancel()
        try:
            await self._bridge.run(self._consumer.close, timeout)
        finally:
            self._closed = True

    stop = close

    async def __aenter__(self):
        await self.start()
        return self

    async def __aexit__(self, *exc):
        await self.close()

    # -- assignment ---------------------------------------------------------------------
    def subscribe(self, topics, listener=None):
        """Join ``group.id`` for ``topics``; ``listener``'s
        ``on_partitions_revoked`` / ``on_partitions_assigned`` /
        ``on_partitions_lost`` may be plain or ``async`` methods."""
        self._consumer.subscribe(topics, listener=_Listener(self, listener))

    def subscription(self):
        return self._consumer.subscription()

    def group_metadata(self):
        """This consumer's ``ConsumerGroupMetadata`` (Kafka's
        ``groupMetadata()``), for ``AIOProducer.send_offsets_to_transaction``."""
        return self._consumer.group_metadata()

    def assign(self, partitions):
        self._rewind()
        self._consumer.assign(partitions)

    def assignment(self):
        return self._consumer.assignment()

    async def unsubscribe(self):
        self._rewind()
        await self._call(self._consumer.unsubscribe)

    def seek(self, partition, offset):
        self._rewind()
        self._consumer.seek(partition, offset)

    async def seek_to_beginning(self, *partitions):
        self._rewind()
        self._consumer.seek_to_beginning(_partitions(partitions) if partitions else None)

    async def seek_to_end(self, *partitions):
        self._rewind()
        self._consumer.seek_to_end(_partitions(partitions) if partitions else None)

    def pause(self, *partitions):
        tps = _partitions(partitions)
        self._rewind(set(tps))
        self._consumer.pause(tps)

    def resume(self, *partitions):
        self._consumer.resume(_partitions(partitions))

    def paused(self):
        return self._consumer.paused()

    async def position(self, partition, timeout=None):
        self._rewind({_tp(partition)})
        return await self._call(self._consumer.position, partition, timeout)

    # -- offsets --------------------------------------------------------------------------
    async def beginning_offsets(self, partitions, timeout=None):
        return await self._call(self._consumer.beginning_offsets, partitions, timeout)

    async def end_offsets(self, partitions, timeout=None):
        return await self._call(self._consumer.end_offsets, partitions, timeout)

    async def offsets_for_times(self, timestamps, timeout=None):
        return await self._call(self._consumer.offsets_for_times, timestamps, timeout)

    async def commit(self, offsets=None, timeout=None):
        """Commit ``offsets`` (``{tp: offset or OffsetAndMetadata}``), by
        default the positions after the records handed out."""
        if offsets is None:
            self._rewind()
        await self._call(self._consumer.commit, offsets, timeout)

    async def committed(self, partitions, timeout=None):
        """``{tp: OffsetAndMetadata or None}``; for one ``TopicPartition``
        (aiokafka's call) its committed offset or None."""
        if _is_tp(partitions):
            tp = _tp(partitions)
            found = await self._call(self._consumer.committed, [tp], timeout)
            om = found.get(tp)
            return None if om is None else om.offset
        return await self._call(self._consumer.committed, partitions, timeout)

    # -- records ----------------------------------------------------------------------------
    async def poll(self, timeout=None):
        """The records ``kchannel.Consumer.poll`` returns (a list, at most
        ``max.poll.records``), waiting up to ``timeout`` seconds on the loop."""
        self._rewind()
        self._polled()
        return await self._call(self._consumer.poll, timeout)

    async def getmany(self, *partitions, timeout_ms=0, max_records=None):
        """aiokafka's ``getmany``: ``{TopicPartition: [records]}``, waiting
        up to ``timeout_ms`` for some; ``partitions`` limits it to those.
        At most ``max_records`` and ``max.poll.records`` records."""
        self._rewind()
        self._polled()
        return await self._call(self._getmany, _partitions(partitions) if partitions else None,
                                timeout_ms, max_records)

    def _getmany(self, partitions, timeout_ms, max_records):
        # In the bridged greenlet: the sync consumer's poll, with the
        # fetcher's budget and the other partitions paused for this call.
        c = self._consumer
        fetcher = c._fetcher
        budget = fetcher.max_poll_records
        others = []
        if partitions is not None:
            wanted = set(partitions)
            others = [tp for tp in c.assignment() if tp not in wanted and tp not in c.paused()]
            c.pause(others)
        if max_records is not None and max_records < budget:
            # Lowers max.poll.records for this call, never raises it: records
            # handed out in max.poll.records-sized lists die young, where
            # tens of thousands at once keep the garbage collector busy.
            fetcher.max_poll_records = max_records
        try:
            records = c.poll(timeout_ms / 1000.0)
        finally:
            fetcher.max_poll_records = budget
            if others:
                c.resume(others)
        out = {}
        if not records:
            return out
        if len(c.subscriptions.assignment) == 1:
            first = records[0]
            out[TopicPartition(first.topic, first.partition)] = records
            return out
        for (topic, partition), run in groupby(records, _TOPIC_PARTITION):
            out.setdefault(TopicPartition(topic, partition), []).extend(run)
        return out

    async def getone(self):
        """The next record (aiokafka's ``getone``)."""
        return await self.__anext__()

    def __aiter__(self):
        return self

    async def __anext__(self):
        records = self._records
        i = self._next
        if i < len(records):
            self._next = i + 1
            return records[i]
        while True:
            if self._closed:
                raise StopAsyncIteration
            self._polled()
            records = await self._call(self._consumer.poll, 1.0)
            if records:
                self._records, self._next = records, 1
                return records[0]
