"""``AIOConsumer`` with ``group.protocol=consumer`` (KIP-848) against Apache
Kafka: two members on one event loop share a topic's partitions, read each
record once, stay in the group while the application awaits other work
between calls (the keep-alive task heartbeats), and the one that stays takes
the partitions of the one that closes, with its async listener awaited."""
import asyncio
import time

import pytest

from kchannel.aio import AIOConsumer, AIOProducer
from kchannel.consumer.membership import MemberState
from tests.fixtures.records import create_topic, topic_name

pytestmark = [pytest.mark.kafka]


def test_aio_members_on_the_consumer_group_protocol(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("aio-k848"), partitions=4)
    assigned = []

    class Listener:
        async def on_partitions_assigned(self, tps):
            await asyncio.sleep(0)
            assigned.append(sorted(tps))

    async def main():
        configs = {"bootstrap.servers": plain, "group.id": f"g-{topic}",
                   "group.protocol": "consumer", "auto.offset.reset": "earliest"}
        a, b = AIOConsumer(configs), AIOConsumer(configs)
        a.subscribe([topic], listener=Listener())
        b.subscribe([topic])
        deadline = time.monotonic() + 60
        while not (len(a.assignment()) == len(b.assignment()) == 2):
            assert time.monotonic() < deadline
            await a.poll(0.05)
            await b.poll(0.05)
        async with AIOProducer({"bootstrap.servers": plain}) as p:
            for i in range(40):
                await p.send(topic, b"%d" % i, partition=i % 4)
        got = {a: [], b: []}
        deadline = time.monotonic() + 60       # (a bound for each step)
        while len(got[a]) + len(got[b]) < 40:
            assert time.monotonic() < deadline
            for c in (a, b):
                got[c].extend(r for r in await c.poll(0.05))
        for c in (a, b):
            assert {r.partition for r in got[c]} == {tp.partition for tp in c.assignment()}
        assert sorted(r.value for c in (a, b) for r in got[c]) == sorted(
            b"%d" % i for i in range(40))
        # Away from both calls until each has heartbeated again (the
        # broker's interval: 500 ms; 30 s a bound a loaded machine does not
        # reach, not a speed target): the keep-alive task heartbeats for them.
        sent = [c._consumer._group.last_heartbeat_ms for c in (a, b)]
        away_until = time.monotonic() + 30
        while time.monotonic() < away_until:
            await asyncio.sleep(0.1)
            if all(c._consumer._group.last_heartbeat_ms > ms for c, ms in zip((a, b), sent)):
                break
        assert all(c._consumer._group.last_heartbeat_ms > ms for c, ms in zip((a, b), sent))
        assert all(c._consumer._group.state is MemberState.STABLE for c in (a, b))
        await b.close()
        deadline = time.monotonic() + 60
        while len(a.assignment()) < 4 or a._consumer._group.state is not MemberState.STABLE:
            assert time.monotonic() < deadline
            await a.poll(0.05)
        assert len(assigned) >= 2 and set(assigned[-1]) | set(assigned[0]) == a.assignment()
        await a.close()
    asyncio.run(main())
