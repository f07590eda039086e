"""A record's future as ``AIOProducer.send`` returns it, on its own (no
broker): the RecordMetadata or error its await gives in every state of its
batch, against the sync getter (``get()``), for the loaded aiosend twin; and
the compiled twin's futures left out of the garbage collector's lists
without leaking what a done callback ties to them."""
import asyncio
import gc
import weakref
from types import SimpleNamespace

import pytest

from kchannel._impl import load_twin, loaded_kind
from kchannel.aio import AIOProducer  # noqa: F401  (installs the compiled await)
from kchannel.client.metadata import TopicPartition
from kchannel.errors import KafkaError
from kchannel.producer.accumulator import FutureRecordMetadata, ProducerBatch
from kchannel.protocol.errors import Errors, exception_for
from kchannel.protocol.records import QueuedRecord

aiosend = load_twin("aiosend")
COMPILED = loaded_kind("aiosend") == "compiled"

T0 = 1_700_000_000_000


def batch_of(n, partition=3):
    """A batch of ``n`` records (CreateTime ``T0 + i``, key size 1 from the
    second record on), made as the appender makes them."""
    b = ProducerBatch(TopicPartition("topic-a", partition), 0, 0)
    for i in range(n):
        b.records.append(QueuedRecord(T0 + i, b"k" if i else None, b"v" * (i + 1), None))
        b.sizes.append((1 if i else -1, i + 1))
    return b


def fields(md):
    return (md.topic, md.partition, md.offset, md.timestamp, md.serialized_key_size,
            md.serialized_value_size)


def send_stub(batch):
    """An object with what ``send`` reads of an AIOProducer, appending to
    ``batch`` (the appender's future per record)."""
    def _send(topic, value, key, headers, partition, timestamp_ms):
        index = len(batch.sizes)
        batch.records.append(QueuedRecord(T0 + index, key, value, headers))
        batch.sizes.append((-1 if key is None else len(key), len(value)))
        return FutureRecordMetadata(batch, index)
    return SimpleNamespace(_driver=object(), _acc=SimpleNamespace(used_memory=0),
                           _memory_limit=1 << 20, _send=_send)


@pytest.mark.parametrize("log_append_time,base_offset", [(-1, 100), (T0 + 999, 7), (-1, -1)])
def test_await_gives_the_getters_metadata(log_append_time, base_offset):
    """Awaited once acknowledged (the compiled twin's own path: the
    TopicPartition read as a tuple, the record's timestamp from its C
    field) or before (the method's generator), late, after the batch let go
    of its bytes: the RecordMetadata ``get()`` gives."""
    b = batch_of(5)
    futures = [FutureRecordMetadata(b, i) for i in range(5)]

    async def scenario():
        early = asyncio.ensure_future(_await(futures[2]))
        await asyncio.sleep(0)
        assert not early.done()
        b.complete(base_offset, log_append_time)
        b.encoded = None             # (what deallocate does: the records stay)
        return [await f for f in futures], await early
    mds, early = asyncio.run(scenario())
    expected = [fields(f.get()) for f in futures]
    assert [fields(md) for md in mds] == expected
    assert fields(early) == expected[2]
    ts = [T0 + i for i in range(5)] if log_append_time < 0 else [log_append_time] * 5
    offsets = [base_offset + i for i in range(5)] if base_offset >= 0 else [-1] * 5
    assert expected == [("topic-a", 3, o, t, 1 if i else -1, i + 1)
                        for i, (o, t) in enumerate(zip(offsets, ts))]


async def _await(f):
    return await f


def test_await_raises_the_batchs_error_and_a_split_batchs_own():
    """A failed batch's error raised at every record's await, late too; a
    split batch's per-record outcome (the method's path)."""
    failed = batch_of(3)
    error = exception_for(Errors.NOT_LEADER_OR_FOLLOWER.value)
    failed.complete(-1, -1, error)
    split = batch_of(2)
    split.split_results = [(40, -1, None), (-1, -1, KafkaError("part failed"))]
    split.complete(-1, -1)

    async def scenario():
        raised = []
        for f in [FutureRecordMetadata(failed, i) for i in range(3)]:
            with pytest.raises(KafkaError) as err:
                await f
            raised.append(err.value)
        md = await FutureRecordMetadata(split, 0)
        with pytest.raises(KafkaError, match="part failed"):
            await FutureRecordMetadata(split, 1)
        return raised, md
    raised, md = asyncio.run(scenario())
    assert raised == [error] * 3
    assert fields(md) == ("topic-a", 3, 40, T0, -1, 1)


def test_send_futures_are_untracked_and_give_their_metadata():
    """The compiled send's futures are left out of the garbage collector's
    lists (the pure twin's are plain objects, tracked); held across
    collections and awaited late, each gives its own record's metadata."""
    b = ProducerBatch(TopicPartition("topic-a", 0), 0, 0)
    p = send_stub(b)

    async def scenario():
        futures = [await aiosend.send(p, "topic-a", b"x" * i, key=b"kk") for i in range(1, 50)]
        gc.collect()
        b.complete(1000, -1)
        return futures, [await f for f in futures]
    futures, mds = asyncio.run(scenario())
    assert [gc.is_tracked(f) for f in futures] == [not COMPILED] * 49
    assert [fields(md) for md in mds] == [("topic-a", 0, 1000 + i, T0 + i, 2, i + 1)
                                          for i in range(49)]


def test_a_cycle_through_a_held_futures_done_callback_is_freed():
    """An untracked future in a cycle (its batch's done callbacks hold it,
    a callback holds it back) is freed once the batch completes: the
    completion drops the callbacks, and with them the cycle."""
    b = ProducerBatch(TopicPartition("topic-a", 0), 0, 0)
    p = send_stub(b)

    class Witness:
        pass

    async def scenario():
        future = await aiosend.send(p, "topic-a", b"v")
        witness = Witness()
        seen = []
        future.add_done_callback(lambda f, w=witness, me=future: seen.append((f is me, w)))
        return weakref.ref(witness), seen
    ref, seen = asyncio.run(scenario())
    gc.collect()
    assert ref() is not None         # the batch still holds the callback
    b.complete(0, -1)
    assert [s[0] for s in seen] == [True]
    seen.clear()
    del b, p
    gc.collect()
    assert ref() is None


class _StubProducer:
    """What the bound send reads of an AIOProducer (weakly referable, as
    the AIOProducer is)."""

    def __init__(self, batch, used_memory=0):
        self._driver = None
        self.started = 0
        self.memory_waits = 0
        self._acc = SimpleNamespace(used_memory=used_memory)
        self._memory_limit = 1000
        self._send = send_stub(batch)._send

    def _start_driver(self):
        self.started += 1
        self._driver = object()

    async def _wait_for_memory(self):
        self.memory_waits += 1
        self._acc.used_memory = 0


def test_bound_send_starts_the_driver_once_and_waits_for_memory():
    """``bind_send``'s send (the instance's, compiled) as the class's:
    starts the Sender once, appends at once while the accumulator's memory
    is under the limit, else returns the waiting coroutine, which appends
    once memory is free; every future gives its record's metadata."""
    b = ProducerBatch(TopicPartition("topic-a", 0), 0, 0)
    p = _StubProducer(b)
    bound = aiosend.bind_send(p)
    if bound is None:                 # (the pure twin: the class's send)
        bound = lambda *a, **k: aiosend.send(p, *a, **k)   # noqa: E731

    async def scenario():
        first = await bound("topic-a", b"a")
        p._acc.used_memory = 5000     # over the limit: the send waits
        pending = bound("topic-a", b"bb", key=b"k")
        assert len(b.sizes) == 1      # not appended yet
        second = await pending
        b.complete(0, -1)
        return [await first, await second]
    mds = asyncio.run(scenario())
    assert (p.started, p.memory_waits) == (1, 1)
    assert [fields(md) for md in mds] == [("topic-a", 0, 0, T0, -1, 1),
                                          ("topic-a", 0, 1, T0 + 1, 1, 2)]


def test_send_is_the_class_method_never_an_instance_attribute():
    """The AIOProducer's send (and produce) is its SendBase's method, on
    the class: no instance attribute shadows it (one keeps the interpreter
    from specializing ``p.send(...)``), in both twins; a subclass's own
    send is kept; bind_send fills a SendBase and returns None."""
    p = AIOProducer({"bootstrap.servers": "127.0.0.1:1"})
    assert isinstance(p, aiosend.SendBase)
    assert vars(AIOProducer)["send"] is vars(AIOProducer)["produce"]
    assert p.send == p.produce
    assert "send" not in vars(p) and "produce" not in vars(p)
    assert aiosend.bind_send(p) is None

    class Sub(AIOProducer):
        async def send(self, *args, **kwargs):
            return "own"
    s = Sub({"bootstrap.servers": "127.0.0.1:1"})
    assert "send" not in vars(s)
    assert asyncio.run(s.send("t", b"v")) == "own"


def test_send_method_is_made_for_subclasses_of_send_base_only():
    """send_method gives SendBase's send for a subclass (compiled: its
    method descriptor made for that class, with the method's signature)
    and refuses any other class."""
    import inspect

    class Own(aiosend.SendBase):
        pass
    method = aiosend.send_method(Own)
    assert str(inspect.signature(method)) == \
        "(self, /, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None)"
    with pytest.raises(TypeError):
        aiosend.send_method(object)
    with pytest.raises(TypeError):
        aiosend.send_method(Own())


def test_send_takes_its_arguments_by_keyword_and_position_alike():
    """The compiled send reads positional arguments itself and passes any
    call with keywords to the parsing method: both append the same record
    (key, partition, timestamp and headers as given)."""
    b = ProducerBatch(TopicPartition("topic-a", 0), 0, 0)
    got = []

    def _send(topic, value, key, headers, partition, timestamp_ms):
        got.append((topic, value, key, headers, partition, timestamp_ms))
        return FutureRecordMetadata(b, 0)
    p = AIOProducer({"bootstrap.servers": "127.0.0.1:1"})
    p._driver = object()
    p._send = _send
    aiosend.bind_send(p)

    async def scenario():
        await p.send("t", b"v", b"k", 2, 5, [("h", b"1")])
        await p.send("t", value=b"v", key=b"k", partition=2, timestamp_ms=5,
                     headers=[("h", b"1")])
        await p.send(topic="t", value=b"v", key=b"k", partition=2, timestamp_ms=5,
                     headers=[("h", b"1")])
        await p.produce("t", b"v")
        await p.send("t")
    asyncio.run(scenario())
    with pytest.raises(TypeError):
        p.send()
    with pytest.raises(TypeError):
        p.send("t", b"v", None, None, None, None, "extra")
    full = ("t", b"v", b"k", [("h", b"1")], 2, 5)
    assert got == [full, full, full, ("t", b"v", None, None, None, None),
                   ("t", None, None, None, None, None)]


def test_send_of_a_producer_made_without_init_takes_the_generic_path():
    """A SendBase whose bind_send never ran (a subclass's __init__ not
    calling AIOProducer's) still sends: its send reads the producer's
    attributes, as the module's ``send``."""
    b = ProducerBatch(TopicPartition("topic-a", 0), 0, 0)
    stub = _StubProducer(b)

    class Bare(aiosend.SendBase):
        pass
    p = Bare()
    for name in ("_driver", "_acc", "_memory_limit", "_send"):
        setattr(p, name, getattr(stub, name))
    p._start_driver = stub._start_driver

    async def scenario():
        future = await p.send("topic-a", b"a")
        b.complete(7, -1)
        return await future
    md = asyncio.run(scenario())
    assert fields(md) == ("topic-a", 0, 7, T0, -1, 1)
    assert stub.started == 1


def test_a_held_metadata_is_never_refilled():
    """The compiled await refills the RecordMetadata it gave last only when
    nothing else holds it: one the application keeps (in a list, a local)
    keeps its record's fields through later awaits."""
    b = batch_of(6)
    b.complete(50, -1)
    futures = [FutureRecordMetadata(b, i) for i in range(6)]

    async def scenario():
        kept = [await futures[0]]
        one = await futures[1]
        for f in futures[2:4]:
            await f                   # (given and let go: may be refilled)
        kept.append(await futures[4])
        last = await futures[5]
        return kept, one, last
    kept, one, last = asyncio.run(scenario())
    assert [fields(md) for md in kept + [one, last]] == \
        [fields(futures[i].get()) for i in (0, 4, 1, 5)]
    assert len({id(md) for md in kept + [one, last]}) == 4


def test_send_awaitables_keep_their_own_future_until_awaited_then_forget_it():
    """The compiled send makes its awaitable ready again for a later send
    only when nothing else holds it: awaitables kept unawaited (as
    ``create_task`` would) each still give their own record's future after
    later sends and awaits; awaited once they give it away (holding no
    reference: a kept awaitable keeps nothing alive) and refuse a second
    await, as a finished coroutine does."""
    import sys
    b = ProducerBatch(TopicPartition("topic-a", 0), 0, 0)
    p = send_stub(b)

    async def scenario():
        held = [aiosend.send(p, "topic-a", b"x" * i) for i in range(1, 6)]
        between = [await aiosend.send(p, "topic-a", b"y") for _ in range(3)]
        b.complete(0, -1)
        between_mds = [fields(await f) for f in between]
        futures = []
        for a in held:
            f = await a
            # (f: the local, getrefcount's argument, the list below not yet)
            assert sys.getrefcount(f) == 2
            futures.append(f)
        with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
            await held[0]
        return futures, between, between_mds
    futures, between, between_mds = asyncio.run(scenario())
    assert [f._index for f in futures] == [0, 1, 2, 3, 4]
    assert [f._index for f in between] == [5, 6, 7]
    assert [fields(f.get()) for f in futures] == [("topic-a", 0, i, T0 + i, -1, i + 1)
                                                  for i in range(5)]
    assert between_mds == [("topic-a", 0, i, T0 + i, -1, 1) for i in (5, 6, 7)]


@pytest.mark.parametrize("base_offset", [7, 1 << 31, (1 << 60) - 3, (1 << 63) - 3])
def test_offsets_kept_by_the_application_never_change(base_offset):
    """The compiled await gives the offset in the RecordMetadata it refills
    (its int changed in place when nothing else holds it): an offset the
    application kept, with its RecordMetadata let go, keeps its value
    through later awaits; offsets past one int digit and near int64's end
    are the getter's too."""
    b = batch_of(6)
    b.complete(base_offset, -1)
    futures = [FutureRecordMetadata(b, i) for i in range(6)]

    async def scenario():
        offsets = []
        for f in futures:
            offsets.append((await f).offset)
        return offsets
    offsets = asyncio.run(scenario())
    assert offsets == [base_offset + i for i in range(6)]
    assert offsets == [f.get().offset for f in futures]


def test_awaits_alternating_between_batches_give_each_records_own_fields():
    """The compiled await refills one RecordMetadata, each slot only where
    it changes: futures of two batches (topics, partitions, offsets, key
    sizes, CreateTime and LogAppendTime) awaited in turn each give their
    own record's fields, as ``get()``."""
    a = batch_of(4, partition=3)
    b = ProducerBatch(TopicPartition("topic-b", 9), 0, 0)
    for i in range(4):
        b.records.append(QueuedRecord(T0 + 50 + i, b"kk", b"v" * (i + 3), ()))
        b.sizes.append((2, i + 3))
    a.complete(1 << 40, -1)
    b.complete(11, T0 + 777)
    futures = [FutureRecordMetadata(x, i) for i in range(4) for x in (a, b)]

    async def scenario():
        return [fields(await f) for f in futures]
    got = asyncio.run(scenario())
    assert got == [fields(f.get()) for f in futures]
    assert got[:2] == [("topic-a", 3, 1 << 40, T0, -1, 1),
                       ("topic-b", 9, 11, T0 + 777, 2, 3)]


def test_a_cancelled_wait_leaves_the_record_and_a_later_await_gets_it():
    """A record awaited before it is done, its task cancelled: the await
    raises CancelledError, the batch's completion still runs (the wake of
    a cancelled waiter is a no-op), and a later await gives the record's
    metadata."""
    b = batch_of(3)
    future = FutureRecordMetadata(b, 2)

    async def scenario():
        task = asyncio.ensure_future(_await(future))
        await asyncio.sleep(0)        # the task waits on the record
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not future.done()
        assert b.complete(40, -1)
        return await future
    md = asyncio.run(scenario())
    assert fields(md) == ("topic-a", 3, 42, T0 + 2, 1, 3) == fields(future.get())


def test_a_wait_is_woken_by_a_batch_completed_on_another_thread():
    """A record awaited before it is done and completed from another thread
    (a sync producer's network thread): the await is woken through the
    loop and gives the metadata; a failed batch's error is raised."""
    import threading
    ok, failed = batch_of(2), batch_of(1)
    exc = exception_for(Errors.NOT_LEADER_OR_FOLLOWER)

    async def scenario():
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, lambda: threading.Thread(
            target=ok.complete, args=(10, -1)).start())
        md = await FutureRecordMetadata(ok, 1)
        loop.call_later(0.01, lambda: threading.Thread(
            target=failed.complete, args=(-1, -1, exc)).start())
        with pytest.raises(KafkaError) as raised:
            await FutureRecordMetadata(failed, 0)
        return md, raised.value
    md, error = asyncio.run(scenario())
    assert fields(md) == ("topic-a", 3, 11, T0 + 1, 1, 2)
    assert error is exc
