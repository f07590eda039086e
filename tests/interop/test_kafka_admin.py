"""``kchannel.Admin`` and the ``consumer-groups``/``get-offsets`` tools
against Apache Kafka: Admin results are the broker's state (topics, configs,
offsets, a group made by a kchannel Consumer), and the tools print what
Kafka's own ``kafka-consumer-groups.sh``/``kafka-get-offsets.sh`` print on
the same broker, a reset by one seen by the other."""
import time

import pytest

from kchannel import Admin, Consumer
from kchannel.client.admin import (AlterConfigOp, ConfigResource, NewTopic, OffsetAndMetadata,
                            OffsetSpec)
from kchannel.errors import KafkaError
from kchannel.client.metadata import TopicPartition
from kchannel.protocol.errors import Errors
from tests.fixtures.peers import run_kchannel
from tests.fixtures.records import create_topic, led_topic, produce, topic_name
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.kafka]

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"


def test_admin_topics_partitions_configs_cluster(kafka_broker):
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = topic_name("admin")
    with Admin({"bootstrap.servers": b}) as admin:
        cluster = admin.describe_cluster()
        assert [n.port for n in cluster.nodes] == [kafka_broker.port("PLAINTEXT")]
        node = cluster.nodes[0].id

        admin.create_topics([NewTopic(topic, 2, 1, {"retention.ms": "3600000"})])
        with pytest.raises(KafkaError) as err:
            admin.create_topics([NewTopic(topic, 1, 1)])
        assert err.value.error_code == Errors.TOPIC_ALREADY_EXISTS
        assert f"Topic '{topic}' already exists." in str(err.value)
        # (KRaft acknowledges a creation once the controller has committed
        # it; the broker answering Metadata replays it a moment later, so a
        # listing right after may not have it yet: Java's Admin alike)
        listed = wait_until(lambda: (lambda t: t if topic in t else None)(admin.list_topics()),
                            "the created topic to be listed")
        assert "__consumer_offsets" not in listed

        desc = wait_until(lambda: led_topic(admin, topic, 2), "two led partitions")
        assert [(p.partition, p.leader, p.replicas, p.isr) for p in desc.partitions] == \
            [(0, node, [node], [node]), (1, node, [node], [node])]

        admin.create_partitions({topic: 3})
        assert len(wait_until(lambda: led_topic(admin, topic, 3), "three partitions").partitions) == 3

        res = ConfigResource("TOPIC", topic)
        entries = admin.describe_configs([res])[res]
        assert entries["retention.ms"].value == "3600000"
        assert entries["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
        assert entries["cleanup.policy"].is_default
        admin.incremental_alter_configs({res: [AlterConfigOp("cleanup.policy", "compact"),
                                               AlterConfigOp("retention.ms", None, "DELETE")]})
        # (KRaft applies an alteration through the controller: a describe
        # right after it may still see the old value)
        entries = wait_until(lambda: (lambda e: e if e["cleanup.policy"].value == "compact" else None)(
            admin.describe_configs([res])[res]), "the altered cleanup.policy")
        assert entries["cleanup.policy"].value == "compact"
        assert entries["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
        broker = ConfigResource("BROKER", str(node))
        assert admin.describe_configs([broker])[broker]["num.partitions"].value == "1"

        admin.delete_topics([topic])
        with pytest.raises(KafkaError) as err:
            wait_until(lambda: topic not in admin.list_topics() and admin.describe_topics([topic]),
                  "the topic's deletion")
        assert err.value.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_and_get_offsets_as_kafka(kafka_broker):
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(b, topic_name("get-offsets"), partitions=2)
    base = 1_700_000_000_000
    # Timestamps rise then fall: the max timestamp is not the last record.
    stamps = [base + 10 * i for i in range(6)] + [base]
    produce(b, topic, [(None, b"%d" % i, [], ts) for i, ts in enumerate(stamps)],
            **{"batch.size": 100})
    with Admin({"bootstrap.servers": b}) as admin:
        ends = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest()
                                   for p in (0, 1)})
        total = sum(r.offset for r in ends.values())
        assert total == len(stamps)
        tp = max(ends, key=lambda t: ends[t].offset)
        assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset == 0
        found = admin.list_offsets({tp: OffsetSpec.for_timestamp(base + 10 ** 9)})[tp]
        assert found.offset == -1

    for time_arg in ("-1", "earliest", "-3", str(base + 10 ** 9)):
        ours = run_kchannel("get-offsets", "--bootstrap-server", b, "--topic", topic, "--time",
                            time_arg)
        theirs = kafka_broker.run_java(GET_OFFSETS, "--bootstrap-server", b, "--topic", topic,
                                       "--time", time_arg)
        assert ours.returncode == theirs.returncode == 0, (ours.stderr, theirs.stderr)
        assert ours.stdout == theirs.stdout, time_arg
    ours = run_kchannel("get-offsets", "--bootstrap-server", b, "--topic", topic, "--partitions",
                        "1")
    assert ours.stdout == f"{topic}:1:{ends[TopicPartition(topic, 1)].offset}\n"


@pytest.mark.slow   # one JVM per Kafka tool run
def test_consumer_groups_as_kafka_consumer_groups_sh(kafka_broker):
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(b, topic_name("groups"), partitions=2)
    group = topic_name("group")
    produce(b, topic, [(b"k%d" % i, b"v%d" % i, [], None) for i in range(20)])
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    def tool(*args):
        ours = run_kchannel("consumer-groups", "--bootstrap-server", b, *args)
        theirs = kafka_broker.run_java(GROUP_COMMAND, "--bootstrap-server", b, *args)
        return ours, theirs

    with Admin({"bootstrap.servers": b}) as admin:
        # kchannel's Consumer heartbeats from poll(), which the tool runs
        # below hold up: a session longer than they take on a loaded machine
        # keeps the member in the group.
        with Consumer({"bootstrap.servers": b, "group.id": group, "client.id": "cg-test",
                       "auto.offset.reset": "earliest", "session.timeout.ms": 180000,
                       "enable.auto.commit": "false"}) as consumer:
            consumer.subscribe([topic])
            seen = 0
            deadline = time.time() + 60
            while seen < 15 and time.time() < deadline:
                seen += len(consumer.poll(0.5) or [])
            assert seen >= 15
            consumer.commit()
            committed = consumer.committed(tps)

            listed = {g.group_id: g for g in admin.list_consumer_groups()}
            assert listed[group].state == "Stable" and not listed[group].is_simple_consumer_group
            desc = admin.describe_consumer_groups([group])[group]
            assert desc.state == "Stable" and desc.partition_assignor
            [member] = desc.members
            assert (member.client_id, sorted(member.assignment)) == ("cg-test", tps)
            offsets = admin.list_consumer_group_offsets(group)
            assert {tp: o.offset for tp, o in offsets.items()} == \
                {tp: c.offset for tp, c in committed.items() if c is not None}

            # The default offsets view, rows for the live member.
            ours, theirs = tool("--describe", "--group", group)
            assert ours.returncode == 0, ours.stderr
            assert member.consumer_id in ours.stdout
            assert ours.stdout == theirs.stdout
            ours, theirs = tool("--describe", "--group", group, "--members")
            assert ours.stdout == theirs.stdout
            ours, theirs = tool("--describe", "--group", group, "--state")
            assert ours.stdout == theirs.stdout
            ours, theirs = tool("--list")
            assert group in ours.stdout.split()
            assert sorted(ours.stdout.split()) == sorted(theirs.stdout.split())
            ours, theirs = tool("--list", "--state", "Stable")
            assert group in ours.stdout
            assert ours.stdout == theirs.stdout
            # A reset is refused while the group has a member.
            ours = run_kchannel("consumer-groups", "--bootstrap-server", b, "--reset-offsets",
                                "--group", group, "--all-topics", "--to-earliest", "--execute")
            assert ours.returncode == 1
            assert "but the current state is Stable." in ours.stdout

        wait_until(lambda: admin.describe_consumer_groups([group])[group].state == "Empty",
              "the group to empty")
        # Empty group: rows without consumer, "has no active members." on stderr.
        ours, theirs = tool("--describe", "--group", group)
        assert (ours.stdout, ours.stderr) == (theirs.stdout, theirs.stderr)

        # A reset by kchannel, seen by Kafka's tool (and the Admin).
        ours, theirs = tool("--reset-offsets", "--group", group, "--topic", topic,
                            "--to-offset", "2", "--dry-run")
        assert ours.returncode == 0
        assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines())
        ours = run_kchannel("consumer-groups", "--bootstrap-server", b, "--reset-offsets",
                            "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert ours.returncode == 0, ours.stdout + ours.stderr
        assert {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()} \
            == {tp: 0 for tp in tps}
        theirs = kafka_broker.run_java(GROUP_COMMAND, "--bootstrap-server", b, "--describe",
                                       "--group", group)
        rows = [line.split() for line in theirs.stdout.splitlines()[2:]]
        assert [(r[1], r[2], r[3]) for r in rows] == [(topic, "0", "0"), (topic, "1", "0")]
        assert ours.stdout and run_kchannel("consumer-groups", "--bootstrap-server", b,
                                            "--describe", "--group", group).stdout == theirs.stdout
        ours, theirs = tool("--reset-offsets", "--group", group, "--all-topics", "--shift-by",
                            "3", "--dry-run")
        assert sorted(ours.stdout.splitlines()) == sorted(theirs.stdout.splitlines())
        assert (topic, "0", "3") in [tuple(line.split()[1:]) for line in ours.stdout.splitlines()]

        # Admin: alter, delete one partition's offset, delete the group.
        admin.alter_consumer_group_offsets(group, {tps[0]: 1, tps[1]: OffsetAndMetadata(2)})
        assert {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()} \
            == {tps[0]: 1, tps[1]: 2}
        admin.delete_consumer_group_offsets(group, [tps[1]])
        assert list(admin.list_consumer_group_offsets(group)) == [tps[0]]
        ours = run_kchannel("consumer-groups", "--bootstrap-server", b, "--delete-offsets",
                            "--group", group, "--topic", f"{topic}:0")
        assert ours.returncode == 0, ours.stdout + ours.stderr
        assert ours.stdout.startswith(f"Request succeeded for deleting offsets from group "
                                      f"{group}.\n")
        assert admin.list_consumer_group_offsets(group) == {}
        ours = run_kchannel("consumer-groups", "--bootstrap-server", b, "--delete", "--group",
                            group)
        assert (ours.returncode, ours.stdout) == (
            0, f"Deletion of requested consumer groups ('{group}') was successful.\n")
        assert group not in [g.group_id for g in admin.list_consumer_groups()]
        with pytest.raises(KafkaError) as err:
            admin.delete_consumer_groups([group])
        assert err.value.error_code == Errors.GROUP_ID_NOT_FOUND
        ours, theirs = tool("--describe", "--group", group)
        assert ours.stdout == theirs.stdout


CONFIG_COMMAND = "kafka.admin.ConfigCommand"


@pytest.mark.slow   # a JVM
def test_configs_topics_and_brokers_as_kafka_configs_sh(kafka_broker, kafka_java, capsys):
    """``kchannel configs`` for topics and brokers (DescribeConfigs /
    IncrementalAlterConfigs through the Admin) prints what kafka-configs.sh
    prints on the same broker, and each sees the other's changes.  Kafka's
    runs share one JVM (its tools' main() in the probe)."""
    from kchannel.cli import main
    b = kafka_broker.bootstrap("PLAINTEXT")
    ours_topic = create_topic(b, topic_name("cfg-ours"), partitions=1)
    java_topic = create_topic(b, topic_name("cfg-java"), partitions=1)
    with Admin({"bootstrap.servers": b}) as admin:
        node = str(admin.describe_cluster().nodes[0].id)

    def ours(*args):
        code = main(["configs", "--bootstrap-server", b, *args])
        out, err = capsys.readouterr()
        return code, out, err

    assert ours("--alter", "--entity-type", "topics", "--entity-name", ours_topic,
                "--add-config", "retention.ms=123456,cleanup.policy=[compact,delete]") == \
        (0, f"Completed updating config for topic {ours_topic}.\n", "")
    # A harmless per-broker dynamic config, removed again at the end.
    assert ours("--alter", "--broker", node, "--add-config", "log.cleaner.backoff.ms=15001") \
        == (0, f"Completed updating config for broker {node}.\n", "")
    # Kafka acknowledges an alteration once the controller committed it; the
    # broker's DescribeConfigs follows when it replays the record: both
    # changes described before Kafka's tool describes them.
    topic_res, broker_res = ConfigResource("TOPIC", ours_topic), ConfigResource("BROKER", node)
    with Admin({"bootstrap.servers": b}) as admin:
        wait_until(lambda: admin.describe_configs([topic_res])[topic_res]["retention.ms"].value
                   == "123456" and admin.describe_configs([broker_res])[broker_res][
                       "log.cleaner.backoff.ms"].value == "15001", "the alterations described")
    runs = {
        "topic": ["--describe", "--entity-type", "topics", "--entity-name", ours_topic],
        "topic-all": ["--describe", "--all", "--topic", ours_topic],
        "broker": ["--describe", "--entity-type", "brokers", "--entity-name", node],
        "broker-default": ["--describe", "--entity-type", "brokers", "--entity-default"],
        "delete-missing": ["--alter", "--topic", ours_topic, "--delete-config", "segment.ms"],
        "bad-value": ["--alter", "--topic", ours_topic, "--add-config", "retention.ms=x"],
        "java-alter": ["--alter", "--topic", java_topic, "--add-config", "max.message.bytes=2048"],
    }
    try:
        java = kafka_java.probe([{"id": k, "op": "tool", "main": CONFIG_COMMAND,
                                  "args": ["--bootstrap-server", b, *args]}
                                 for k, args in runs.items()], timeout=180)
        for key in ("topic", "topic-all", "broker", "broker-default"):
            code, out, err = ours(*runs[key])
            assert (code, err) == (0, ""), (key, err)
            assert out == java[key]["stdout"], key
            assert java[key]["exit"] == 0
        assert f"  retention.ms=123456 sensitive=false synonyms={{DYNAMIC_TOPIC_CONFIG:" \
               f"retention.ms=123456" in java["topic"]["stdout"]
        assert "  log.cleaner.backoff.ms=15001 sensitive=false" in java["broker"]["stdout"]
        # Deleting a config the topic does not have: done (the broker
        # ignores it), as Kafka 4's tool; a bad value: the broker's error.
        code, out, err = ours(*runs["delete-missing"])
        assert (code, out, err) == (java["delete-missing"]["exit"],
                                    java["delete-missing"]["stdout"], "")
        code, out, err = ours(*runs["bad-value"])
        assert (code, out) == (java["bad-value"]["exit"], java["bad-value"]["stdout"]) == (1, "")
        # The error line and the cause (Kafka's stack trace follows it).
        assert err.splitlines() == java["bad-value"]["stderr"].splitlines()[:2], err
        # Kafka's change, seen by kchannel (once the broker replayed it).
        assert java["java-alter"]["stdout"] == \
            f"Completed updating config for topic {java_topic}.\n"
        java_res = ConfigResource("TOPIC", java_topic)
        with Admin({"bootstrap.servers": b}) as admin:
            wait_until(lambda: admin.describe_configs([java_res])[java_res][
                "max.message.bytes"].value == "2048", "Kafka's alteration described")
        code, out, _ = ours("--describe", "--topic", java_topic)
        assert "  max.message.bytes=2048 sensitive=false" in out
    finally:
        ours("--alter", "--broker", node, "--delete-config", "log.cleaner.backoff.ms")


@pytest.mark.slow   # a JVM
def test_consumer_groups_of_a_librdkafka_group_as_kafka_tool(kafka_broker, kafka_java, capsys):
    """A group made by confluent-kafka (librdkafka's member metadata and
    assignment bytes): ``kchannel consumer-groups --describe`` (offsets,
    ``--members``, ``--state``) prints what kafka-consumer-groups.sh prints,
    Kafka's runs in one JVM."""
    from confluent_kafka import Consumer as CConsumer
    from kchannel.cli import main
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(b, topic_name("rdk-groups"), partitions=2)
    group = topic_name("rdk-group")
    produce(b, topic, [(b"k%d" % i, b"v", [], None) for i in range(12)])
    consumer = CConsumer({"bootstrap.servers": b, "group.id": group, "client.id": "cg-rdkafka",
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen, deadline = 0, time.time() + 60
        while seen < 8 and time.time() < deadline:
            msgs = consumer.consume(12, 0.5)
            seen += len([m for m in msgs if m.error() is None])
        assert seen >= 8
        consumer.commit(asynchronous=False)
        # (librdkafka heartbeats from its own thread: the member stays.)
        # And a reset executed by Kafka's tool (a group without members),
        # which kchannel then sees.
        reset_group = topic_name("rdk-reset")
        runs = {"offsets": ["--describe", "--group", group],
                "members": ["--describe", "--group", group, "--members"],
                "state": ["--describe", "--group", group, "--state"],
                "reset": ["--reset-offsets", "--group", reset_group, "--topic", topic,
                          "--to-latest", "--execute"],
                "reset-seen": ["--describe", "--group", reset_group]}
        java = kafka_java.probe([{"id": k, "op": "tool", "main": GROUP_COMMAND,
                                  "args": ["--bootstrap-server", b, *args]}
                                 for k, args in runs.items()], timeout=180)
        for key in ("offsets", "members", "state", "reset-seen"):
            code = main(["consumer-groups", "--bootstrap-server", b, *runs[key]])
            out, err = capsys.readouterr()
            assert (code, java[key]["exit"]) == (0, 0), (key, err, java[key])
            assert (out, err) == (java[key]["stdout"], java[key]["stderr"]), key
        assert "cg-rdkafka" in java["members"]["stdout"]
        with Admin({"bootstrap.servers": b}) as admin:
            tps = [TopicPartition(topic, p) for p in (0, 1)]
            ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
            assert {tp: o.offset for tp, o in
                    admin.list_consumer_group_offsets(reset_group).items()} == \
                {tp: r.offset for tp, r in ends.items()}
    finally:
        consumer.close()


@pytest.mark.slow   # two JVMs (the member's and the tools')
def test_consumer_groups_of_a_java_group_as_kafka_tool(kafka_broker, kafka_java, capsys):
    """A group made by Kafka's Java consumer (ConsoleConsumer, classic
    protocol): ``kchannel consumer-groups --describe`` (offsets, ``--members``,
    ``--state``) prints what kafka-consumer-groups.sh prints for the live
    member, with a lag (the member reads committed records only, an open
    transaction's are past its position); then, the member gone, a reset
    executed by kchannel is what Kafka's tool describes."""
    from confluent_kafka import Producer as CProducer
    from kchannel.cli import main
    from tests.fixtures.java import ConsoleConsumerMember
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(b, topic_name("java-groups"), partitions=2)
    group = topic_name("java-group")
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    produce(b, topic, [(b"k%d" % i, b"v%d" % i, [], None) for i in range(10)])
    txn = CProducer({"bootstrap.servers": b, "transactional.id": topic_name("java-groups-tx"),
                     "transaction.timeout.ms": 120000})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(3):
        txn.produce(topic, b"open%d" % i, partition=0)
    assert txn.flush(30) == 0
    member = ConsoleConsumerMember(b, topic, group, ["isolation.level=read_committed",
                                                     "auto.commit.interval.ms=200",
                                                     "client.id=cg-java"])

    def ours(*args):
        code = main(["consumer-groups", "--bootstrap-server", b, *args])
        out, err = capsys.readouterr()
        return code, out, err

    try:
        with Admin({"bootstrap.servers": b}) as admin:
            ends = {tp: r.offset for tp, r in admin.list_offsets(
                {tp: OffsetSpec.latest() for tp in tps}).items()}
            stable = {tp: r.offset for tp, r in admin.list_offsets(
                {tp: OffsetSpec.latest() for tp in tps}, "read_committed").items()}
            assert ends[tps[0]] == stable[tps[0]] + 3 and sum(stable.values()) == 10
            # The member has read every committed record and committed its
            # position (the last stable offset) in a Stable group.
            wait_until(lambda: len(member.records) == 10 and {
                tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
                == stable and admin.describe_consumer_groups([group])[group].state == "Stable",
                "the Java member's commits", timeout_s=60)
            assert member.proc.poll() is None, member.stderr()
            runs = {"offsets": ["--describe", "--group", group],
                    "members": ["--describe", "--group", group, "--members"],
                    "state": ["--describe", "--group", group, "--state"]}
            java = kafka_java.probe([{"id": k, "op": "tool", "main": GROUP_COMMAND,
                                      "args": ["--bootstrap-server", b, *args]}
                                     for k, args in runs.items()], timeout=180)
            for key, args in runs.items():
                code, out, err = ours(*args)
                assert (code, java[key]["exit"]) == (0, 0), (key, err, java[key])
                assert (out, err) == (java[key]["stdout"], java[key]["stderr"]), key
            # Rows: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
            # CONSUMER-ID HOST CLIENT-ID, the open transaction's 3 as lag.
            rows = sorted(line.split() for line in java["offsets"]["stdout"].splitlines()[2:])
            assert [r[:6] for r in rows] == [
                [group, topic, str(tp.partition), str(stable[tp]), str(ends[tp]),
                 str(ends[tp] - stable[tp])] for tp in tps]
            assert {r[-1] for r in rows} == {"cg-java"}
            assert "Stable" in java["state"]["stdout"]

            member.stop()
            wait_until(lambda: admin.describe_consumer_groups([group])[group].state == "Empty",
                  "the group to empty")
            code, out, err = ours("--reset-offsets", "--group", group, "--topic", topic,
                                  "--to-earliest", "--execute")
            assert code == 0, out + err
            theirs = kafka_java.run_main(GROUP_COMMAND, "--bootstrap-server", b, "--describe",
                                         "--group", group)
            assert theirs.returncode == 0, theirs.stderr
            rows = [line.split() for line in theirs.stdout.splitlines()[2:]]
            assert sorted((r[1], r[2], r[3]) for r in rows) == [(topic, "0", "0"),
                                                                (topic, "1", "0")]
            assert ours("--describe", "--group", group)[1:] == (theirs.stdout, theirs.stderr)
    finally:
        member.stop()
        txn.abort_transaction(30)
