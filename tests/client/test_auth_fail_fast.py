"""A refused login fails fast (issue 22), as Java's NetworkClient makes it:
the authentication error of a connection is handed to whoever waits for
metadata, so a Producer send, ``partitions_for``, the Consumer's waits and
the console tools raise ``SaslAuthenticationError`` with the broker's
message at once, instead of retrying the same credentials until
``max.block.ms`` and ending with "Topic t not present in metadata after
60000 ms" (Kafka's console producer reports SaslAuthenticationException in
about 2.6 s, JVM start included).

Against Apache Kafka (SCRAM-SHA-256, wrong password) and against ``kchannel
serve`` as a PLAIN gateway in front of that broker (wrong password refused
by the gateway).  ``max.block.ms`` is 20 s here: before the fix the same
sends waited that long and raised RequestTimeoutError instead.
"""
import logging
import time

import pytest

from kchannel import Consumer, Producer
from kchannel.errors import SaslAuthenticationError
from kchannel.client.metadata import TopicPartition
from tests.fixtures.kafka_messages import PLAIN_FAILED, SCRAM_FAILED
from tests.fixtures.peers import plain_gateway_props, run_kchannel

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

MAX_BLOCK_MS = 20000
SCRAM_MESSAGE = SCRAM_FAILED.format("SCRAM-SHA-256")


@pytest.fixture(scope="module")
def wrong_scram(kafka_broker):
    """Client configs (Java keys) with a wrong SCRAM-SHA-256 password."""
    return kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256",
                                       password="wrong-secret")


@pytest.fixture
def gateway(kafka_broker, kchannel_inprocess_server, tmp_path):
    """``kchannel serve`` (as build_server runs it) as a SASL_PLAINTEXT PLAIN
    gateway for alice in front of the Kafka broker's PLAINTEXT listener."""
    props = plain_gateway_props({"bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT")},
                                tmp_path / "data")
    return kchannel_inprocess_server(props)


def plain_configs(gateway, password):
    return {"bootstrap.servers": gateway.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                f'required username="alice" password="{password}";'}


def warnings_logged(caplog):
    return [r for r in caplog.records
            if r.name.startswith("kchannel") and r.levelno >= logging.WARNING]


def test_producer_send_raises_the_brokers_message(wrong_scram, caplog):
    caplog.set_level(logging.INFO, logger="kchannel")
    producer = Producer(dict(wrong_scram, **{"max.block.ms": MAX_BLOCK_MS}))
    try:
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationError) as info:
            producer.send("auth-fail-fast", b"value")
        waited = time.monotonic() - start
        assert str(info.value) == SCRAM_MESSAGE
        assert info.value.error_code == 58 and not info.value.retriable
        # One failed login (a WARNING from the selector, an ERROR from the
        # client), not a retry loop that lasts max.block.ms.
        assert waited < MAX_BLOCK_MS / 1000 / 2
        assert len(warnings_logged(caplog)) <= 4, [r.getMessage() for r in caplog.records]
        # The next send fails the same way: each new attempt is refused again.
        with pytest.raises(SaslAuthenticationError):
            producer.send("auth-fail-fast", b"value")
    finally:
        producer.close(0)


def test_producer_partitions_for_raises(wrong_scram):
    producer = Producer(dict(wrong_scram, **{"max.block.ms": MAX_BLOCK_MS}))
    try:
        with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
            producer.partitions_for("auth-fail-fast")
    finally:
        producer.close(0)


@pytest.mark.parametrize("call", ["subscribe-poll", "assign-poll", "position", "committed",
                                  "end_offsets"])
def test_consumer_waits_raise(wrong_scram, call):
    consumer = Consumer(dict(wrong_scram, **{"group.id": "auth-fail-fast",
                                              "default.api.timeout.ms": MAX_BLOCK_MS}))
    tp = TopicPartition("auth-fail-fast", 0)
    try:
        with pytest.raises(SaslAuthenticationError) as info:
            if call == "subscribe-poll":
                consumer.subscribe([tp.topic])
                consumer.poll(MAX_BLOCK_MS / 1000)
            elif call == "assign-poll":
                consumer.assign([tp])
                consumer.poll(MAX_BLOCK_MS / 1000)
            elif call == "position":
                consumer.assign([tp])
                consumer.position(tp)
            elif call == "committed":
                consumer.committed([tp])
            else:
                consumer.end_offsets([tp])
        assert str(info.value) == SCRAM_MESSAGE
    finally:
        consumer.close()


def test_producer_through_kchannel_serve(gateway):
    """The gateway refuses the password itself; the right one goes through
    to Kafka (so the gateway was usable all along)."""
    bad = Producer(dict(plain_configs(gateway, "wrong"), **{"max.block.ms": MAX_BLOCK_MS}))
    try:
        with pytest.raises(SaslAuthenticationError) as info:
            bad.send("auth-fail-fast-gw", b"value")
        assert str(info.value) == PLAIN_FAILED
    finally:
        bad.close(0)
    with Producer(plain_configs(gateway, "alice-secret")) as good:
        assert good.send("auth-fail-fast-gw", b"value").get(30).offset >= 0


def console_auth_args(tmp_path, kafka_broker, wrong_scram):
    props = tmp_path / "client.properties"
    kafka_broker.write_client_properties(props, wrong_scram)
    return ["--bootstrap-server", wrong_scram["bootstrap.servers"], "--topic",
            "auth-fail-fast", "--command-config", str(props)]


def test_console_producer_fails_fast(tmp_path, kafka_broker, wrong_scram):
    r = run_kchannel("console-producer", *console_auth_args(tmp_path, kafka_broker, wrong_scram),
                     "--max-block-ms", str(MAX_BLOCK_MS), stdin="one\ntwo\n")
    assert r.returncode == 1, r.stderr
    assert f"ERROR SaslAuthenticationError: {SCRAM_MESSAGE}" in r.stderr.splitlines()
    # WARN by default: the failed login is logged once, nothing else.
    assert len(r.stderr.splitlines()) <= 4, r.stderr


def test_console_consumer_fails_fast(tmp_path, kafka_broker, wrong_scram):
    r = run_kchannel("console-consumer", *console_auth_args(tmp_path, kafka_broker, wrong_scram),
                     "--from-beginning")
    assert r.returncode == 1, r.stderr
    assert f"ERROR SaslAuthenticationError: {SCRAM_MESSAGE}" in r.stderr.splitlines()


def test_console_producer_through_kchannel_serve(tmp_path, gateway):
    props = tmp_path / "client.properties"
    configs = plain_configs(gateway, "wrong")
    props.write_text("".join(f"{k}={v}\n" for k, v in configs.items()
                             if k != "bootstrap.servers"))
    r = run_kchannel("console-producer", "--bootstrap-server", configs["bootstrap.servers"],
                     "--topic", "auth-fail-fast-gw", "--command-config", str(props),
                     "--max-block-ms", str(MAX_BLOCK_MS), stdin="one\n")
    assert r.returncode == 1, r.stderr
    assert f"ERROR SaslAuthenticationError: {PLAIN_FAILED}" in r.stderr.splitlines()


@pytest.mark.slow
def test_kafka_console_producer_agrees(tmp_path, kafka_broker, wrong_scram):
    """Kafka's own console producer, same broker, same wrong password: the
    same exception (``...Exception`` there) with the same message, and it
    does not wait out max.block.ms either."""
    args = console_auth_args(tmp_path, kafka_broker, wrong_scram)
    theirs = kafka_broker.run_java("org.apache.kafka.tools.ConsoleProducer",
                                   *[a.replace("--command-config", "--producer.config")
                                     for a in args],
                                   "--max-block-ms", str(MAX_BLOCK_MS), input="one\n")
    assert f"SaslAuthenticationException: {SCRAM_MESSAGE}" in theirs.stderr, theirs.stderr
    ours = run_kchannel("console-producer", *args, "--max-block-ms", str(MAX_BLOCK_MS),
                        stdin="one\n")
    assert f"ERROR SaslAuthenticationError: {SCRAM_MESSAGE}" in ours.stderr, ours.stderr
