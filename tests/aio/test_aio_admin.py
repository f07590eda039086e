"""kchannel.aio.AIOAdmin against Apache Kafka: every Admin method is a
coroutine of the same name; results equal the blocking Admin's on the same
broker; no thread is started; errors are Kafka's."""
import asyncio
import inspect
import threading
import time

import pytest

from kchannel.aio import AIOAdmin, AIOProducer
from kchannel.aio.admin import ADMIN_METHODS
from kchannel.client.admin import Admin, ConfigResource, NewTopic, OffsetSpec
from kchannel.client.metadata import TopicPartition
from kchannel.errors import KafkaError
from kchannel.protocol.errors import Errors
from tests.fixtures.records import topic_name

pytestmark = [pytest.mark.interop]


def test_every_admin_method_is_a_coroutine():
    public = {n for n, _ in inspect.getmembers(Admin, inspect.isfunction) if not n.startswith("_")}
    assert set(ADMIN_METHODS) | {"close"} == public
    for name in public:
        method = getattr(AIOAdmin, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(getattr(Admin, name)), name


def test_aio_admin_equals_admin_on_the_loop_without_a_thread(kafka_broker):
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = topic_name("aio-admin")

    async def scenario():
        before = set(threading.enumerate())
        async with AIOAdmin({"bootstrap.servers": b}) as admin:
            cluster = await admin.describe_cluster()
            await admin.create_topics([NewTopic(topic, 2, 1)])
            with pytest.raises(KafkaError) as err:
                await admin.create_topics([NewTopic(topic, 1, 1)])
            deadline = time.monotonic() + 30
            while True:
                # (the broker answering may not have replayed the creation
                # yet: "unknown topic" until it has)
                try:
                    desc = (await admin.describe_topics([topic]))[topic]
                except KafkaError as e:
                    if e.error_code != Errors.UNKNOWN_TOPIC_OR_PARTITION or \
                            time.monotonic() > deadline:
                        raise
                    desc = None
                if desc is not None and (all(p.leader >= 0 for p in desc.partitions)
                                         or time.monotonic() > deadline):
                    break
                await asyncio.sleep(0.1)
            async with AIOProducer({"bootstrap.servers": b}) as p:
                for i in range(5):
                    await p.send(topic, b"v%d" % i, partition=i % 2)
                await p.flush()
            tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            latest = await admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
            res = ConfigResource("TOPIC", topic)
            configs = await admin.describe_configs([res])
            topics = await admin.list_topics()
            during = set(threading.enumerate())
        return cluster, err.value, desc, latest, configs[res], topics, during - before

    cluster, err, desc, latest, configs, topics, new_threads = asyncio.run(scenario())
    assert new_threads == set()
    assert err.error_code == Errors.TOPIC_ALREADY_EXISTS
    assert topic in topics
    assert {tp.partition: r.offset for tp, r in latest.items()} == {0: 3, 1: 2}
    with Admin({"bootstrap.servers": b}) as admin:
        assert admin.describe_cluster() == cluster
        assert admin.describe_topics([topic])[topic] == desc
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}) == latest
        res = ConfigResource("TOPIC", topic)
        assert admin.describe_configs([res])[res] == configs
        admin.delete_topics([topic])


def test_closed_aio_admin_refuses_calls(kafka_broker):
    async def scenario():
        admin = AIOAdmin({"bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT")})
        await admin.list_topics()
        await admin.close()
        await admin.close()
        with pytest.raises(Exception, match="already been closed"):
            await admin.list_topics()
    asyncio.run(scenario())
