"""``kchannel console-producer`` and ``kchannel console-consumer``: lines in,
records out, flag for flag with Kafka's tools.  On Tansu the other side is
confluent-kafka; on Apache Kafka it is Kafka's own ConsoleConsumer and
ConsoleProducer, whose output must be what kchannel's prints."""
import re

import pytest

from tests.fixtures.peers import run_kchannel
from tests.fixtures.records import consume_confluent, create_topic, topic_name

pytestmark = pytest.mark.interop

LINES = "k1:hello\nk2:wörld\nk1:again\n:empty key\n"


def produce_lines(bootstrap, topic, lines=LINES, *extra):
    r = run_kchannel("console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--property", "parse.key=true", "--property", "key.separator=:", *extra,
                     stdin=lines)
    assert r.returncode == 0, r.stderr
    return r


def test_console_producer_then_confluent_and_console_consumer(tansu):
    topic = create_topic(tansu.bootstrap, topic_name("console"), partitions=1)
    produce_lines(tansu.bootstrap, topic, LINES, "--compression-codec", "lz4")
    rows = consume_confluent(tansu.bootstrap, topic, 1, 4)
    assert [(r[2], r[3]) for r in rows] == [
        (b"k1", b"hello"), (b"k2", "wörld".encode()), (b"k1", b"again"), (b"", b"empty key")]
    r = run_kchannel("console-consumer", "--bootstrap-server", tansu.bootstrap, "--topic", topic,
                     "--partition", "0", "--offset", "earliest", "--max-messages", "4",
                     "--property", "print.key=true", "--property", "print.offset=true",
                     "--property", "key.separator=|")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["Offset:0|k1|hello", "Offset:1|k2|wörld",
                                         "Offset:2|k1|again", "Offset:3||empty key"]
    assert "Processed a total of 4 messages" in r.stderr


@pytest.mark.slow
def test_console_consumer_group_from_beginning_and_timeout(kafka_broker):
    # On Apache Kafka: Tansu takes ~23 s to complete a group join (README).
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("console-group"), partitions=2)
    produce_lines(bootstrap, topic)
    r = run_kchannel("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--from-beginning", "--group", f"g-{topic}", "--timeout-ms", "5000",
                     timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == sorted(["hello", "wörld", "again", "empty key"])
    assert "Processed a total of 4 messages" in r.stderr


def test_console_tools_usage_errors():
    r = run_kchannel("console-producer", "--topic", "t", stdin="")
    assert r.returncode == 2 and "bootstrap-server" in r.stderr
    r = run_kchannel("console-consumer", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                     "--offset", "5")
    assert r.returncode == 2 and "partition is required" in r.stderr
    r = run_kchannel("console-producer", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                     "--producer-property", "acks=2", stdin="")
    assert r.returncode == 1 and "acks" in r.stderr


@pytest.mark.slow
def test_kafka_console_tools_agree_with_kchannels(kafka_broker):
    """Kafka's ConsoleConsumer prints what kchannel's console-producer wrote
    exactly as kchannel's console-consumer does; and kchannel reads what
    Kafka's ConsoleProducer wrote."""
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("console-kafka"), partitions=1)
    produce_lines(bootstrap, topic)
    fmt = ["--property", "print.key=true", "--property", "print.partition=true",
           "--property", "print.headers=true", "--property", "key.separator=,"]
    theirs = kafka_broker.run_java("org.apache.kafka.tools.consumer.ConsoleConsumer",
                                   "--bootstrap-server", bootstrap, "--topic", topic,
                                   "--from-beginning", "--max-messages", "4", *fmt)
    assert theirs.returncode == 0, theirs.stderr
    ours = run_kchannel("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                        "--from-beginning", "--max-messages", "4", *fmt)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout
    assert ours.stdout.splitlines()[1] == "Partition:0,NO_HEADERS,k1,hello"
    # the other way: Kafka's ConsoleProducer writes, kchannel reads
    topic2 = create_topic(bootstrap, topic_name("console-kafka2"), partitions=1)
    their_producer = kafka_broker.run_java(
        "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", bootstrap,
        "--topic", topic2, "--property", "parse.key=true", "--property", "key.separator=:",
        input=LINES)
    assert their_producer.returncode == 0, their_producer.stderr
    ours_producer = produce_lines(bootstrap, topic2, "")
    assert ours_producer.stdout == their_producer.stdout   # the same deprecation notice
    ours = run_kchannel("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic2,
                        "--from-beginning", "--max-messages", "4", "--property", "print.key=true")
    assert ours.stdout.splitlines()[1:] == ["k1\thello", "k2\twörld", "k1\tagain",
                                            "\tempty key"]


@pytest.mark.slow
def test_perf_tests(kafka_broker):
    # On Apache Kafka: consumer-perf-test joins a group, which takes Tansu ~23 s.
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name("perf"), partitions=2)
    r = run_kchannel("producer-perf-test", "--topic", topic, "--num-records", "3000",
                     "--record-size", "100", "--throughput", "-1", "--producer-props",
                     f"bootstrap.servers={bootstrap}", "acks=1", "linger.ms=5")
    assert r.returncode == 0, r.stderr
    last = r.stdout.splitlines()[-1]
    assert re.fullmatch(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                        r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms "
                        r"99th, \d+ ms 99.9th\.", last), last
    rows = consume_confluent(bootstrap, topic, 2, 3000)
    assert len(rows) == 3000 and all(len(row[3]) == 100 for row in rows)
    r = run_kchannel("consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                     "--messages", "3000", "--timeout", "60000", timeout=150)
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()[-2:]
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, "
                      "data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, "
                      "fetch.MB.sec, fetch.nMsg.sec")
    fields = row.split(", ")
    assert len(fields) == 10 and fields[4] == "3000"
    assert abs(float(fields[2]) - 3000 * 100 / 1024 / 1024) < 0.001
