"""Transactions of kchannel.aio's AIOProducer against Apache Kafka (the
session's ``kafka_broker``), on the event loop with no thread: committed
records are seen by read_committed consumers (AIOConsumer's and
confluent-kafka's), aborted ones never; aiokafka's ``transaction()``
block; a cancelled ``commit_transaction`` goes on and is awaited again;
consume-transform-produce with the offsets committed in the transaction; a
zombie is fenced."""
import asyncio
import threading
import time

import pytest

from kchannel.aio import AIOConsumer, AIOProducer
from kchannel.client.metadata import TopicPartition
from kchannel.errors import IllegalStateError, ProducerFencedError
from kchannel.producer.transaction_manager import State
from tests.fixtures.records import create_topic, topic_name

pytestmark = [pytest.mark.interop]

END = b"end"


def _aio_txn_producer(bootstrap, tid, **extra):
    return AIOProducer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                        "linger.ms": 5, **extra})


async def _read_committed(bootstrap, topic, partitions, n, **extra):
    """The values a read_committed AIOConsumer sees: at least ``n`` (the
    committed ones), then whatever one more fetch would add (the aborted
    ones, wrongly)."""
    values = []
    async with AIOConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                            "isolation.level": "read_committed", **extra}) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while len(values) < n and time.monotonic() < deadline:
            for records in (await c.getmany(timeout_ms=500)).values():
                values.extend(r.value for r in records)
        for records in (await c.getmany(timeout_ms=200)).values():
            values.extend(r.value for r in records)
    return values


def _read_n_committed_confluent(bootstrap, topic, partitions, n):
    from confluent_kafka import Consumer, TopicPartition as CTP
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{topic}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([CTP(topic, p, 0) for p in range(partitions)])
    values = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5 if len(values) < n else 0.2)
            if m is None and len(values) >= n:
                break
            if m is not None and not m.error():
                values.append(m.value())
    finally:
        c.close()
    return values


class _Boom(Exception):
    pass


def test_transactional_calls_check_the_state():
    """Kafka's IllegalStateException cases, before any broker is involved."""
    async def scenario():
        async with AIOProducer({"bootstrap.servers": "127.0.0.1:9"}) as plain:
            with pytest.raises(IllegalStateError, match="transactional.id"):
                await plain.begin_transaction()
            with pytest.raises(IllegalStateError, match="transactional.id"):
                await plain.commit_transaction()
        p = _aio_txn_producer("127.0.0.1:9", "tx")
        try:
            with pytest.raises(IllegalStateError):
                p.begin_transaction()
            with pytest.raises(IllegalStateError, match="initTransactions"):
                await p.send("t", b"v")
        finally:
            await p.close(0)
        with pytest.raises(IllegalStateError, match="closed"):
            await p.init_transactions(1)
    asyncio.run(scenario())


def test_commit_abort_cancel_and_the_transaction_block(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-txn"), partitions=2)
    threads = threading.active_count()

    async def scenario():
        async with _aio_txn_producer(plain, f"aio-{topic}") as p:
            await p.init_transactions(30)
            # Committed (confluent_kafka.aio's awaited begin).
            await p.begin_transaction()
            futures = [await p.send(topic, b"a%d" % i) for i in range(5)]
            await p.commit_transaction(30)
            assert all(f.done() for f in futures)
            # Aborted (aiokafka's plain begin): sent, never visible.
            p.begin_transaction()
            for i in range(5):
                await p.send(topic, b"b%d" % i)
            await p.flush(30)
            await p.abort_transaction(30)
            # A cancelled commit goes on in the Sender: nothing else is
            # accepted until the application awaits its outcome again.
            p.begin_transaction()
            for i in range(5):
                await p.send(topic, b"c%d" % i)
            task = asyncio.ensure_future(p.commit_transaction(30))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # (cancelled before the loop ran the Sender: nothing is sent yet)
            assert p._txn.state is State.COMMITTING_TRANSACTION
            with pytest.raises(IllegalStateError, match="commitTransaction"):
                p.begin_transaction()
            await p.commit_transaction(30)
            assert p._txn.state is State.READY
            # aiokafka's block: aborted when it raises, committed when not.
            with pytest.raises(_Boom):
                async with p.transaction():
                    await p.send(topic, b"d0")
                    raise _Boom()
            async with p.transaction():
                await p.send(topic, END, partition=0)
        assert threading.active_count() == threads
        return await _read_committed(plain, topic, 2, 11)

    expected = [b"a%d" % i for i in range(5)] + [b"c%d" % i for i in range(5)] + [END]
    assert sorted(asyncio.run(scenario())) == sorted(expected)
    assert sorted(_read_n_committed_confluent(plain, topic, 2, 11)) == sorted(expected)


def test_consume_transform_produce(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("aio-ctp-in"), partitions=2)
    sink = create_topic(plain, topic_name("aio-ctp-out"), partitions=2)
    group = f"g-{source}"
    tps = [TopicPartition(source, 0), TopicPartition(source, 1)]

    async def scenario():
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            for i in range(10):
                await p.send(source, b"%d" % i, key=b"%d" % i)
        async with AIOConsumer({"bootstrap.servers": plain, "group.id": group,
                                "auto.offset.reset": "earliest",
                                "enable.auto.commit": False,
                                "isolation.level": "read_committed"}) as c, \
                _aio_txn_producer(plain, f"ctp-{source}") as p:
            c.subscribe([source])
            await p.init_transactions(30)
            batch = []
            deadline = time.monotonic() + 30
            while len(batch) < 10 and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    batch.extend(records)
            assert len(batch) == 10
            metadata = c.group_metadata()
            assert metadata.group_id == group and metadata.generation_id >= 1
            offsets = {TopicPartition(r.topic, r.partition): r.offset + 1 for r in batch}
            # Aborted: neither the output nor the offsets.
            await p.begin_transaction()
            for r in batch:
                await p.send(sink, b"out-" + r.value, key=r.key)
            await p.send_offsets_to_transaction(offsets, metadata)
            await p.abort_transaction(30)
            assert await c.committed(tps) == {tp: None for tp in tps}
            # Committed: both.
            await p.begin_transaction()
            for r in batch:
                await p.send(sink, b"out-" + r.value, key=r.key)
            await p.send(sink, END, partition=0)
            await p.send_offsets_to_transaction(offsets, c.group_metadata())
            await p.commit_transaction(30)
            committed = await c.committed(tps)
            assert {tp: om.offset for tp, om in committed.items()} == offsets
        return await _read_committed(plain, sink, 2, 11)

    out = asyncio.run(scenario())
    assert sorted(out) == sorted([b"out-%d" % i for i in range(10)] + [END])


def test_zombie_is_fenced(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-fence"), partitions=1)
    tid = f"aio-zombie-{topic}"

    async def scenario():
        zombie = _aio_txn_producer(plain, tid)
        try:
            await zombie.init_transactions(30)
            await zombie.begin_transaction()
            await zombie.send(topic, b"zombie")
            await zombie.flush(30)
            async with _aio_txn_producer(plain, tid) as successor:
                # Fences the zombie and aborts its open transaction.
                await successor.init_transactions(30)
                with pytest.raises(ProducerFencedError):
                    await zombie.commit_transaction(30)
                assert zombie._txn.state is State.FATAL_ERROR
                with pytest.raises(ProducerFencedError):
                    await zombie.begin_transaction()
                with pytest.raises(ProducerFencedError):
                    await zombie.send(topic, b"late")
                async with successor.transaction():
                    await successor.send(topic, END)
        finally:
            await zombie.close(5)
        return await _read_committed(plain, topic, 1, 1)

    assert asyncio.run(scenario()) == [END]
