"""``kchannel topics`` against Apache Kafka, next to Kafka's own
TopicCommand: the same topics listed, the same partition lines described,
create/delete with Kafka's messages and exit codes."""

import pytest

from kchannel import Admin
from tests.fixtures.peers import run_kchannel
from tests.fixtures.records import led_topic, topic_name
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.slow]


def test_topics_as_kafka_topics_sh(kafka_broker):
    b = kafka_broker.bootstrap("PLAINTEXT")
    topic = topic_name("cli-topics")
    r = run_kchannel("topics", "--bootstrap-server", b, "--create", "--topic", topic,
                     "--partitions", "3", "--replication-factor", "1",
                     "--config", "retention.ms=3600000")
    assert (r.returncode, r.stdout) == (0, f"Created topic {topic}.\n"), r.stderr
    again = run_kchannel("topics", "--bootstrap-server", b, "--create", "--topic", topic)
    assert again.returncode == 1
    assert again.stderr.startswith("Error while executing topic command : Topic "
                                   f"'{topic}' already exists.")
    assert run_kchannel("topics", "--bootstrap-server", b, "--create", "--topic", topic,
                        "--if-not-exists").returncode == 0
    # (KRaft acknowledges a creation once the controller committed it; the
    # broker answering Metadata replays it a moment later: both tools list
    # and describe it once it has)
    with Admin({"bootstrap.servers": b}) as admin:
        wait_until(lambda: led_topic(admin, topic, 3), "the created topic led")

    theirs = kafka_broker.run_java("org.apache.kafka.tools.TopicCommand",
                                   "--bootstrap-server", b, "--list")
    ours = run_kchannel("topics", "--bootstrap-server", b, "--list")
    assert ours.returncode == 0 and topic in ours.stdout.splitlines()
    assert ours.stdout == theirs.stdout

    theirs = kafka_broker.run_java("org.apache.kafka.tools.TopicCommand",
                                   "--bootstrap-server", b, "--describe", "--topic", topic)
    ours = run_kchannel("topics", "--bootstrap-server", b, "--describe", "--topic", topic)
    assert ours.returncode == 0, ours.stderr
    # the partition lines are Kafka's; the topic line's Configs needs
    # DescribeConfigs, which kchannel lacks (README Limitations)
    their_lines, our_lines = theirs.stdout.splitlines(), ours.stdout.splitlines()
    assert our_lines[1:] == their_lines[1:]
    assert our_lines[0].split("\tConfigs:")[0] == their_lines[0].split("\tConfigs:")[0]

    r = run_kchannel("topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    assert r.returncode == 0, r.stderr
    gone = run_kchannel("topics", "--bootstrap-server", b, "--delete", "--topic", topic)
    assert gone.returncode == 1
    assert run_kchannel("topics", "--bootstrap-server", b, "--delete", "--topic", topic,
                        "--if-exists").returncode == 0
    assert run_kchannel("topics", "--bootstrap-server", b, "--list").returncode == 0


def test_topics_usage_errors():
    assert run_kchannel("topics", "--bootstrap-server", "127.0.0.1:1").returncode == 2
    assert run_kchannel("topics", "--bootstrap-server", "127.0.0.1:1", "--create").returncode == 2
