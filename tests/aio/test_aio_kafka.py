"""kchannel.aio against Apache Kafka (the session's ``kafka_broker``): the
producer/consumer scenarios of the sync suite on the event loop (asyncio's
and uvloop's) over PLAINTEXT, SSL and SASL_SSL SCRAM; groups with eager and
cooperative rebalancing and async listeners; interop with aiokafka and
confluent-kafka both ways; no thread started; cancellation and close."""
import asyncio
import gc
import threading
import time

import pytest

from kchannel._impl import loaded_kind
from kchannel.aio import AIOConsumer, AIOProducer
from kchannel.client import RequestTimeoutError
from kchannel.errors import KafkaError
from kchannel.protocol.errors import Errors
from kchannel.client.metadata import TopicPartition
from kchannel.client import KafkaClient
from kchannel.tokens.admin import DelegationTokenAdmin
from tests.fixtures.aio import SlowTokenLogin
from tests.fixtures.kafka_tokens import created, expired, token_configs
from tests.fixtures.records import (consume_aiokafka, consume_confluent, create_topic,
                                    expected_rows, produce_aiokafka, produce_confluent, sample,
                                    topic_name)

pytestmark = [pytest.mark.interop]


def run_coro(coro, loop="asyncio"):
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro)
    return asyncio.run(coro)


async def aio_produce(configs, topic, records, **extra):
    async with AIOProducer({"linger.ms": 5, **configs, **extra}) as p:
        futures = [await p.send(topic, value=v, key=k, headers=h, timestamp_ms=ts)
                   for k, v, h, ts in records]
        return list(await asyncio.gather(*futures))


async def aio_consume(configs, topic, partitions, n, timeout=60, **extra):
    rows = []
    async with AIOConsumer({"auto.offset.reset": "earliest", **configs, **extra}) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(rows) < n and time.monotonic() < deadline:
            for tp, records in (await c.getmany(timeout_ms=500)).items():
                for r in records:
                    assert (r.topic, r.partition) == tp
                    # aiokafka's shape; the compiled reader leaves such a
                    # record out of the garbage collector's work.
                    assert type(r.headers) is tuple
                    assert gc.is_tracked(r) is (loaded_kind("records") == "pure")
                    rows.append((r.partition, r.offset, r.key, r.value,
                                 [tuple(h) for h in r.headers], r.timestamp))
    return sorted(rows)


# (listener, SASL mechanism, event loop)
SECURITY_CASES = [
    ("PLAINTEXT", None, "asyncio"),
    ("PLAINTEXT", None, "uvloop"),
    ("SSL", None, "asyncio"),
    ("SASL_SSL", "SCRAM-SHA-256", "asyncio"),
    ("SASL_SSL", "SCRAM-SHA-512", "uvloop"),
    ("SASL_PLAINTEXT", "PLAIN", "asyncio"),
    ("SASL_PLAINTEXT", "OAUTHBEARER", "uvloop"),
    ("MTLS", None, "asyncio"),
]


@pytest.mark.parametrize("listener,mechanism,loop", SECURITY_CASES)
def test_produce_and_consume(kafka_broker, listener, mechanism, loop):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio"))
    configs = kafka_broker.client_configs(listener, mechanism=mechanism)
    records = sample(30)

    async def scenario():
        mds = await aio_produce(configs, topic, records, **{"compression.type": "lz4"})
        got = await aio_consume(configs, topic, 3, len(records))
        return mds, got
    mds, got = run_coro(scenario(), loop)
    expected = expected_rows(records, mds)
    assert got == expected
    assert consume_confluent(plain, topic, 3, len(records)) == expected


def test_no_thread_is_started(kafka_broker):
    """Producing, consuming in a group, committing: all on the loop."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-threads"), partitions=2)

    async def scenario():
        before = set(threading.enumerate())
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            for i in range(20):
                await p.send(topic, b"v%d" % i)
            await p.flush()
            async with AIOConsumer({"bootstrap.servers": plain, "group.id": topic,
                                    "auto.offset.reset": "earliest"}) as c:
                c.subscribe([topic])
                n = 0
                deadline = time.monotonic() + 60
                while n < 20 and time.monotonic() < deadline:
                    n += sum(len(v) for v in (await c.getmany(timeout_ms=500)).values())
                await c.commit()
                during = set(threading.enumerate())
        return n, before, during
    n, before, during = run_coro(scenario())
    assert n == 20
    assert during - before == set()


# The functions a pass of the AIOProducer's Sender runs once per Produce
# request (its read, write, poll and wait, the loop's callback resuming
# it): the netpass, clientloop and looppass twins' functions, taken as
# their classes' methods.
_PER_PASS = {"read_frames", "settle_state", "receive_into", "write", "record_poll",
             "cluster_poll", "select", "on_event"}
# (a larger request's: a gather write)
_PER_PASS_LARGE = {"write_vectored"}


def test_a_sender_pass_runs_its_per_request_functions_compiled(kafka_broker):
    """Each record sent and awaited alone (a Produce request and a pass of
    the Sender each): with the compiled twins, none of the functions a pass
    runs once per request is an interpreted frame, nor is there a per-pass
    method of the driver (``_run_once``) or a wait token's ``__init__``;
    with the pure twins the same functions are the interpreted ones."""
    import sys
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-pass"), partitions=1)
    n = 30

    async def scenario():
        calls = {}

        def profile(frame, event, arg):
            if event == "call" and "kchannel" in frame.f_code.co_filename:
                key = frame.f_code.co_qualname
                calls[key] = calls.get(key, 0) + 1
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            await p.send_and_wait(topic, b"warm-up")
            sys.setprofile(profile)
            try:
                for i in range(n):
                    await p.send_and_wait(topic, b"v%d" % i)
            finally:
                sys.setprofile(None)
        return calls
    calls = run_coro(scenario())
    assert not {"AIOProducer._run_once", "Driver.wait_io", "_Resume.__init__"} & set(calls)
    # (by their own names: methods of the same names, such as
    # KafkaChannel.read_frames, count too)
    names = {}
    for qualname, count in calls.items():
        name = qualname.rpartition(".")[2]
        names[name] = names.get(name, 0) + count
    kinds = {loaded_kind(t) for t in ("netpass", "clientloop", "looppass")}
    if kinds == {"compiled"}:
        every = _PER_PASS | _PER_PASS_LARGE
        assert every.isdisjoint(names), sorted(every & set(names))
    elif kinds == {"pure"}:
        # one Produce request and its response per record, each read, polled
        # for, waited for and acknowledged
        for name in _PER_PASS:
            assert names.get(name, 0) >= n, (name, names.get(name))


@pytest.mark.parametrize("peer", ["aiokafka", "confluent-kafka"])
def test_interop_both_ways(kafka_broker, peer):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    records = sample(25)
    # kchannel.aio writes, the peer reads
    topic = create_topic(plain, topic_name("aio-out"))
    mds = run_coro(aio_produce({"bootstrap.servers": plain}, topic, records,
                               **{"compression.type": "zstd"}))
    reader = consume_aiokafka if peer == "aiokafka" else consume_confluent
    assert reader(plain, topic, 3, len(records)) == expected_rows(records, mds)
    # the peer writes, kchannel.aio reads
    topic = create_topic(plain, topic_name("aio-in"))
    writer = produce_aiokafka if peer == "aiokafka" else produce_confluent
    mds = writer(plain, topic, records, "gzip")
    got = run_coro(aio_consume({"bootstrap.servers": plain}, topic, 3, len(records)))
    assert got == expected_rows(records, mds)


def test_consumer_offsets_pause_and_iteration(kafka_broker):
    """commit/committed/position/end_offsets/pause/resume/seek and ``async
    for``: a commit after iterating counts only the records handed out."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-offsets"), partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            for i in range(10):
                await p.send(topic, b"a%d" % i, partition=0)
                await p.send(topic, b"b%d" % i, partition=1)
        cfg = {"bootstrap.servers": plain, "group.id": topic, "enable.auto.commit": False,
               "auto.offset.reset": "earliest"}
        async with AIOConsumer(cfg) as c:
            c.assign([tp0, tp1])
            assert await c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 10}
            assert await c.committed(tp0) is None
            c.pause(tp1)
            assert c.paused() == {tp1}
            got = []
            async for r in c:
                assert r.partition == 0
                got.append(r.value)
                if len(got) == 4:
                    break
            assert got == [b"a0", b"a1", b"a2", b"a3"]
            # the iterator may hold more records: position and commit count
            # only the four handed out
            assert await c.position(tp0) == 4
            await c.commit()
            assert (await c.committed([tp0]))[tp0].offset == 4
            c.resume([tp1])
            c.seek(tp0, 8)
            rest = []
            deadline = time.monotonic() + 30
            while len(rest) < 12 and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500, max_records=3)).values():
                    assert len(records) <= 3
                    rest += [r.value for r in records]
            assert sorted(rest) == sorted([b"a8", b"a9"] + [b"b%d" % i for i in range(10)])
        async with AIOConsumer(cfg) as c:
            c.assign([tp0])
            assert await c.position(tp0) == 4
    run_coro(scenario())


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_group_rebalance(kafka_broker, strategy):
    """Two members share four partitions; every record is consumed once;
    cooperative members keep their partitions across the second join (no
    revocation of what they keep), eager ones have them all revoked."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-group"), partitions=4)
    n = 80

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            for i in range(n):
                await p.send(topic, b"%d" % i, partition=i % 4)
        events = {0: [], 1: []}

        class Listener:
            def __init__(self, i):
                self.i = i

            async def on_partitions_revoked(self, partitions):
                await asyncio.sleep(0)
                events[self.i].append(("revoked", sorted(p.partition for p in partitions)))

            def on_partitions_assigned(self, partitions):
                events[self.i].append(("assigned", sorted(p.partition for p in partitions)))

        cfg = {"bootstrap.servers": plain, "group.id": topic, "auto.offset.reset": "earliest",
               "partition.assignment.strategy": strategy, "heartbeat.interval.ms": 500,
               "session.timeout.ms": 10000, "enable.auto.commit": False}
        seen = []
        sizes = {}
        stop = asyncio.Event()
        first_assigned = asyncio.Event()

        async def member(i, after):
            # (member 1 joins once member 0 holds all four partitions, not
            # after a fixed delay: a loaded machine's first join can take
            # longer, and both would then share the first generation)
            if after is not None:
                await after.wait()
            async with AIOConsumer(cfg) as c:
                c.subscribe([topic], listener=Listener(i))
                while not stop.is_set():
                    for records in (await c.getmany(timeout_ms=200)).values():
                        seen.extend(int(r.value) for r in records)
                    try:
                        await c.commit()
                    except KafkaError as exc:
                        # getmany returns within its timeout, also while the
                        # group rebalances; the commit is then refused, as
                        # Kafka's (RebalanceInProgressException): try again
                        # after the next getmany.
                        if exc.error_code != Errors.REBALANCE_IN_PROGRESS:
                            raise
                    # (both members hold two partitions: getmany returns
                    # within its timeout, also between a cooperative
                    # rebalance's two rounds)
                    sizes[i] = len(c.assignment())
                    if i == 0 and events[0]:
                        first_assigned.set()
                    if sizes == {0: 2, 1: 2} and len(seen) >= n:
                        stop.set()
        await asyncio.wait_for(asyncio.gather(member(0, None), member(1, first_assigned)), 90)
        return seen, events
    seen, events = run_coro(scenario())
    assert sorted(seen) == list(range(n))
    first = events[0]
    assert first[0] == ("assigned", [0, 1, 2, 3])
    assert any(e[0] == "assigned" and len(e[1]) == 2 for e in events[1])
    revoked = [e[1] for e in first if e[0] == "revoked"]
    if strategy == "range":
        assert revoked and revoked[0] == [0, 1, 2, 3]
    else:
        assert revoked and len(revoked[0]) == 2


def test_cancelled_send_and_wait_leaves_the_producer_consistent(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-cancel-send"), partitions=1)
    tp = TopicPartition(topic, 0)

    async def scenario():
        # (a linger no pause of a loaded machine's loop reaches: flush sends)
        async with AIOProducer({"bootstrap.servers": plain, "linger.ms": 60_000}) as p:
            await p.partitions_for(topic)
            tasks = [asyncio.ensure_future(p.send_and_wait(topic, b"%d" % i))
                     for i in range(200)]
            await asyncio.sleep(0.1)      # enqueued, not yet acknowledged (linger)
            assert not any(t.done() for t in tasks)
            for t in tasks[::2]:
                t.cancel()
            await p.flush()       # (sends now instead of after the linger)
            results = await asyncio.gather(*tasks, return_exceptions=True)
            cancelled = sum(isinstance(r, asyncio.CancelledError) for r in results)
            after = await p.send(topic, b"after")
            await p.flush()
            md = await after
        async with AIOConsumer({"bootstrap.servers": plain}) as c:
            end = (await c.end_offsets([tp]))[tp]
        return cancelled, results, md, end
    cancelled, results, md, end = run_coro(scenario())
    assert cancelled == 100
    offsets = [r.offset for r in results if not isinstance(r, BaseException)]
    assert len(offsets) == 100 and len(set(offsets)) == 100
    # cancelling stopped the waits, not the records: all 200 were written once
    assert md.offset == 200 and end == 201


def test_cancelled_getmany_loses_no_record(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-cancel-get"), partitions=2)
    n = 300

    async def scenario():
        cfg = {"bootstrap.servers": plain, "auto.offset.reset": "earliest",
               "max.poll.records": 7}
        async with AIOConsumer(cfg) as c:
            c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            # a getmany cancelled while it waits for records that do not exist yet
            t = asyncio.ensure_future(c.getmany(timeout_ms=10_000))
            await asyncio.sleep(0.3)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            async with AIOProducer({"bootstrap.servers": plain}) as p:
                for i in range(n):
                    await p.send(topic, b"%d" % i)
            got = []
            deadline = time.monotonic() + 60
            k = 0
            while len(got) < n and time.monotonic() < deadline:
                k += 1
                t = asyncio.ensure_future(c.getmany(timeout_ms=1000))
                if k % 3 == 0:
                    await asyncio.sleep(0)
                    t.cancel()
                try:
                    batch = await t
                except asyncio.CancelledError:
                    continue
                for records in batch.values():
                    got += [int(r.value) for r in records]
            return got
    got = run_coro(scenario())
    assert sorted(got) == list(range(n))


def test_close_flushes_and_times_out(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-close"), partitions=1)

    async def scenario():
        # a long linger: close() sends what is buffered
        p = AIOProducer({"bootstrap.servers": plain, "linger.ms": 60_000})
        futures = [await p.send(topic, b"%d" % i) for i in range(10)]
        t0 = time.monotonic()
        await p.close(timeout=30)
        closed_in = time.monotonic() - t0
        offsets = [(await f).offset for f in futures]
        # close(timeout=0): what is left fails at once
        p = AIOProducer({"bootstrap.servers": plain, "linger.ms": 60_000})
        futures = [await p.send(topic, b"%d" % i) for i in range(5)]
        await p.close(timeout=0)
        failures = [f.exception() for f in futures]
        # no broker: send gives up after max.block.ms, close returns
        dead = AIOProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 300})
        with pytest.raises(RequestTimeoutError):
            await dead.send(topic, b"x")
        await asyncio.wait_for(dead.close(timeout=1), 5)
        return offsets, closed_in, failures
    offsets, closed_in, failures = run_coro(scenario())
    assert offsets == list(range(10)) and closed_in < 10
    assert all(isinstance(e, KafkaError) and "closed forcefully" in str(e) for e in failures)


def test_cancelled_close_still_ends_the_producer(kafka_broker):
    """close() cancelled while it waits for acknowledgements ends the
    producer forcefully: the Sender's greenlet is stopped where it waits,
    every record's future completes (written, or failed "closed
    forcefully"), and none of its sockets stays on the loop."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-close-cancel"), partitions=1)

    async def scenario():
        p = AIOProducer({"bootstrap.servers": plain, "linger.ms": 60_000})
        first = await p.send(topic, b"connected")
        await p.flush()         # (not send_and_wait: that would wait out the linger)
        await first
        futures = [await p.send(topic, b"%d" % i) for i in range(2000)]
        closing = asyncio.ensure_future(p.close())
        # close() has woken the Sender, which sends what is buffered and
        # waits for the responses: cancel it there.
        for _ in range(3):
            await asyncio.sleep(0)
        driver_waiting = p._bridge.current is not None and not p._driver.done()
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        outcomes = []
        for f in futures:
            assert f.done()
            exc = f.exception()
            outcomes.append("ok" if exc is None else str(exc))
        return (driver_waiting, p._driver.cancelled(), p._bridge.current,
                len(p._selector.get_map()), outcomes)
    driver_waiting, cancelled, greenlet, registered, outcomes = run_coro(scenario())
    assert driver_waiting and cancelled and greenlet is None and registered == 0
    assert len(outcomes) == 2000
    assert all(o == "ok" or "closed forcefully" in o for o in outcomes), set(outcomes)


def test_send_awaits_buffer_memory_and_waiting_makes_batches_sendable(kafka_broker):
    """With buffer.memory taken by batches still lingering, send() awaits
    memory and, as Kafka's appends waiting on an exhausted pool, makes every
    batch sendable at once instead of after linger.ms."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-memory"), partitions=4)

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain, "linger.ms": 60_000,
                                "buffer.memory": 4 * 16384, "batch.size": 16384,
                                "max.block.ms": 20_000}) as p:
            await p.partitions_for(topic)
            t0 = time.monotonic()
            # Four partitions: four half-full batches take all the memory.
            futures = [await p.send(topic, b"x" * 1000, partition=i % 4) for i in range(200)]
            sent_in = time.monotonic() - t0
            await p.flush()
            return [(md.partition, md.offset) for md in [await f for f in futures]], sent_in
    got, sent_in = run_coro(scenario())
    assert sorted(got) == [(p, o) for p in range(4) for o in range(50)]
    assert sent_in < 30     # not held until linger.ms (60 s) or max.block.ms (20 s)


def test_send_is_a_coroutine_as_asyncio_expects(kafka_broker):
    """What ``send`` returns (the compiled twin's C awaitable or the pure
    twin's coroutine) runs as a task, is awaited once, raises an append's
    error where it is awaited; an acknowledged record's await (the compiled
    twin's own path) gives the RecordMetadata the sync getter gives."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-send-coro"), partitions=1)

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            await p.partitions_for(topic)
            first = await asyncio.create_task(p.send(topic, b"a", key=b"k"))
            md = await first
            assert md is not await first      # (a new RecordMetadata per await)
            direct = first.get()
            pending = p.send(topic, b"b")      # (enqueued now: awaited below)
            assert asyncio.iscoroutine(pending)
            second = await pending
            with pytest.raises(RuntimeError, match="cannot reuse already awaited"):
                await pending
            bad = p.send(topic, "not bytes")
            with pytest.raises(TypeError):
                await bad
            return md, direct, await second
    md, direct, md2 = run_coro(scenario())
    assert (md.topic, md.partition, md.offset, md.timestamp, md.serialized_key_size,
            md.serialized_value_size) == (direct.topic, direct.partition, 0, direct.timestamp,
                                          1, 1)
    assert md.timestamp > 0 and md2.offset == 1


def test_acknowledged_batches_let_go_of_their_bytes(kafka_broker):
    """A batch acknowledged drops its encoded bytes with its memory, while
    the application still holds its records' futures (which give their
    RecordMetadata from the records and sizes kept): holding every future
    of a long run kept ~batch.size bytes per batch sent."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-let-go"), partitions=1)

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain, "batch.size": 4096}) as p:
            futures = [await p.send(topic, b"x" * 1000, key=b"k") for _ in range(40)]
            mds = [await f for f in futures]
            batches = list({id(f._batch): f._batch for f in futures}.values())
            return mds, batches
    mds, batches = run_coro(scenario())
    assert [(md.offset, md.serialized_key_size, md.serialized_value_size) for md in mds] == \
        [(i, 1, 1000) for i in range(40)]
    assert len(batches) >= 10 and all(b.done_flag for b in batches)
    assert [b.encoded for b in batches] == [None] * len(batches)


def test_send_errors_fail_the_future(kafka_broker):
    """A record larger than the broker allows fails its future with the
    broker's error; the producer goes on."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-big"), partitions=1,
                         extra=None)

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain,
                                "max.request.size": 4 << 20}) as p:
            with pytest.raises(KafkaError) as err:
                await p.send_and_wait(topic, b"x" * (2 << 20))
            md = await p.send_and_wait(topic, b"small")
        return err.value, md
    err, md = run_coro(scenario())
    assert err.name == "MESSAGE_TOO_LARGE"
    assert md.offset == 0


@pytest.mark.slow
def test_produce_and_consume_on_tansu(tansu):
    """The same round trip against the other broker implementation."""
    records = sample(20)
    topic = create_topic(tansu.bootstrap, topic_name("aio-tansu"), partitions=1)
    configs = {"bootstrap.servers": tansu.bootstrap}

    async def scenario():
        mds = await aio_produce(configs, topic, records)
        return mds, await aio_consume(configs, topic, 1, len(records))
    mds, got = run_coro(scenario(), "uvloop")
    assert got == expected_rows(records, mds)


@pytest.mark.slow
def test_example_service(kafka_broker):
    """examples/aio_service.py: produces what it is POSTed, its consumer task
    reads it back, SIGTERM ends it with exit status 0."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-service"), partitions=1)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, os.path.join(root, "examples", "aio_service.py"),
                             "--bootstrap-server", plain, "--topic", topic, "--port", "0",
                             "--group", topic], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        base = "http://" + line.split()[2].rstrip(",")
        answers = []
        for i in range(3):
            req = urllib.request.Request(base + "/produce", data=b"/page-%d" % i,
                                         headers={"X-Key": "user-%d" % i})
            answers.append(json.load(urllib.request.urlopen(req, timeout=30)))
        assert [(a["topic"], a["offset"]) for a in answers] == [(topic, 0), (topic, 1),
                                                               (topic, 2)]
        deadline = time.monotonic() + 60
        stats = None
        while time.monotonic() < deadline:
            stats = json.load(urllib.request.urlopen(base + "/stats", timeout=30))
            if stats["consumed"] >= 3:
                break
            time.sleep(0.2)
        assert stats == {"consumed": 3, "last_offset": {f"{topic}-0": 2}}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_blocking_token_fetch_runs_on_an_executor(kafka_broker, monkeypatch):
    """OAUTHBEARER with a slow login handler: the loop keeps running (a
    ticker task ticks while each fetch is under way: the fetch waits for
    two ticks before it answers, which a fetch run on the loop's thread
    would wait for in vain), the fetch ran off the loop's thread, and the
    records go through."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-oauth"), partitions=1)
    configs = kafka_broker.client_configs("OAUTH_JWKS", "OAUTHBEARER",
                                          token=kafka_broker.oauth.token(sub="alice"))
    configs["sasl.login.callback.handler.class"] = "tests.fixtures.aio.SlowTokenLogin"
    records = sample(10)
    SlowTokenLogin.threads.clear()
    ticks = [0]
    ticks_during_fetches = []
    slow_token = SlowTokenLogin.token

    def token(self, now):
        # (a bound on waiting for the loop, not a speed target: without
        # the executor no tick comes and the 30 s run out)
        start = ticks[0]
        deadline = time.monotonic() + 30
        while ticks[0] < start + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        ticks_during_fetches.append(ticks[0] - start)
        return slow_token(self, now)
    monkeypatch.setattr(SlowTokenLogin, "token", token)

    async def scenario():
        done = asyncio.Event()

        async def ticker():
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks[0] += 1
        ticking = asyncio.ensure_future(ticker())
        mds = await aio_produce(configs, topic, records)
        got = await aio_consume(configs, topic, 1, len(records))
        done.set()
        await ticking
        return mds, got
    mds, got = run_coro(scenario())
    assert got == expected_rows(records, mds)
    assert SlowTokenLogin.threads
    assert threading.main_thread() not in SlowTokenLogin.threads
    assert ticks_during_fetches and all(n >= 2 for n in ticks_during_fetches), \
        ticks_during_fetches


@pytest.mark.slow
def test_gssapi_login_runs_on_an_executor(kafka_broker):
    """GSSAPI on the loop: the Kerberos login (keytab, service ticket from
    the KDC) goes to the loop's executor, and the metadata comes back over
    the authenticated connection.  (The session broker advertises
    127.0.0.1, which has no Kerberos service principal, so this stops at
    the bootstrap connection.)"""
    if not kafka_broker.gssapi:
        pytest.skip("the MIT KDC is not available, so the broker has no GSSAPI")
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-gssapi"), partitions=2)
    configs = kafka_broker.client_configs("SASL_SSL", mechanism="GSSAPI")

    async def scenario():
        async with AIOProducer(configs) as p:
            partitions = await p.partitions_for(topic)
        return partitions, [t.name for t in threading.enumerate()]
    partitions, threads = run_coro(scenario())
    assert len(partitions) == 2
    assert any(name.startswith("asyncio_") for name in threads)   # the default executor


def test_delegation_token(kafka_broker):
    """A token Kafka issued produces and consumes on the loop as its owner."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-token"), partitions=1)
    with KafkaClient(kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")) as admin_client:
        admin_client.connect()
        admin = DelegationTokenAdmin(admin_client)
        token = created(admin, max_lifetime_ms=3600_000)
        try:
            configs = token_configs(kafka_broker, token, "SASL_SSL", "SCRAM-SHA-256")
            records = sample(10)

            async def scenario():
                mds = await aio_produce(configs, topic, records)
                return mds, await aio_consume(configs, topic, 1, len(records))
            mds, got = run_coro(scenario())
            assert got == expected_rows(records, mds)
        finally:
            expired(admin, token)


def test_sync_producer_future_is_awaitable(kafka_broker):
    """A kchannel.Producer's future, completed on its network thread, wakes
    the coroutine awaiting it on the loop's thread."""
    from kchannel import Producer
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-sync-future"), partitions=1)

    async def scenario():
        with Producer({"bootstrap.servers": plain, "linger.ms": 50}) as p:
            return await asyncio.wait_for(p.send(topic, b"x"), 30)
    assert run_coro(scenario()).offset == 0


@pytest.mark.slow
def test_heartbeats_between_calls_and_the_poll_timer(kafka_broker):
    """Kafka's heartbeat thread, as a task.  Member A awaits other work for
    8 s between two getmany calls, longer than its 6 s session timeout:
    it stays in the group (same generation, nothing lost).  Member B
    (``max.poll.interval.ms`` 2 s) awaits 4 s, within its session timeout
    but past its poll timer: it leaves the group, and its next call rejoins
    with its partitions reported lost."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-heartbeat"), partitions=2)

    async def member(group, idle_s, max_poll_interval_ms):
        events = []

        class Listener:
            def on_partitions_assigned(self, partitions):
                events.append("assigned")

            def on_partitions_revoked(self, partitions):
                events.append("revoked")

            def on_partitions_lost(self, partitions):
                events.append("lost")

        cfg = {"bootstrap.servers": plain, "group.id": group, "session.timeout.ms": 6000,
               "heartbeat.interval.ms": 500, "max.poll.interval.ms": max_poll_interval_ms}
        async with AIOConsumer(cfg) as c:
            c.subscribe([topic], listener=Listener())
            deadline = time.monotonic() + 60
            while len(c.assignment()) < 2 and time.monotonic() < deadline:
                await c.getmany(timeout_ms=200)
            generation = c._consumer._group.generation
            before = list(events)
            await asyncio.sleep(idle_s)          # the application's other work
            deadline = time.monotonic() + 30
            await c.getmany(timeout_ms=200)
            while len(c.assignment()) < 2 and time.monotonic() < deadline:
                await c.getmany(timeout_ms=200)
            return before, events[len(before):], generation, c._consumer._group.generation

    async def scenario():
        return await asyncio.gather(member(topic + "-a", 8, 300000),
                                    member(topic + "-b", 4, 2000))
    (a_before, a_after, a_gen0, a_gen1), (b_before, b_after, b_gen0, b_gen1) = run_coro(scenario())
    assert a_before == ["assigned"] and b_before == ["assigned"]
    assert a_after == [] and a_gen1 == a_gen0
    assert b_after == ["lost", "assigned"] and b_gen1 > b_gen0


def test_host_names_are_resolved_off_the_loop(kafka_broker, monkeypatch):
    """A broker named by host name is looked up on the loop's default
    executor (as ``loop.getaddrinfo`` does), not on the loop's thread; a
    numeric address needs no lookup and stays on the loop."""
    import socket

    from kchannel.network import selector as selector_module
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-resolve"), partitions=1)
    port = plain.rsplit(":", 1)[1]
    real = socket.getaddrinfo
    calls = []

    def spy(host, *args, **kwargs):
        calls.append((host, threading.current_thread() is threading.main_thread(), args))
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    monkeypatch.setattr(selector_module, "_resolved", {})

    async def scenario():
        async with AIOProducer({"bootstrap.servers": f"localhost:{port}"}) as p:
            md = await (await p.send(topic, b"v"))
        return md
    md = run_coro(scenario())
    assert md.offset >= 0
    lookups = [(host, on_main) for host, on_main, args in calls
               if host == "localhost"]
    assert lookups and not any(on_main for _, on_main in lookups)
    numeric = [on_main for host, on_main, _ in calls if host == "127.0.0.1"]
    assert numeric and all(numeric)
