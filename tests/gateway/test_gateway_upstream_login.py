"""The gateway's own login to the upstream failing (issue 23): a wrong
password, or a SCRAM user (or delegation token) that the upstream's brokers
learn only a moment later (KRaft propagates both asynchronously), is what
users bring on a first run.

The upstream is the session's Apache Kafka broker (tests/fixtures/kafka.py,
its SASL_PLAINTEXT listener with SCRAM-SHA-256); the gateway runs in this
process as ``kchannel serve`` would.  While the login fails, clients are
offered Kafka's APIs (not the gateway's local ones only), their requests fail
at once, the log has one ERROR naming the cause and never the secret, and
the gateway logs in with the reconnect backoff, not once per client request.
Once the credential is right upstream, the gateway recovers by itself: a
producer created during the failure delivers its records, a consumer reads
them.
"""
import logging
import time
import uuid

import pytest

from kchannel import Admin, Consumer
from kchannel.client import KafkaClient
from kchannel.client.admin import (NewTopic, ScramCredentialInfo, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)
from kchannel.errors import KChannelError
from kchannel.protocol.api_keys import ApiKey

from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

MECHANISM = "SCRAM-SHA-256"


def set_password(admin, user, password):
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(MECHANISM, 4096), password)])


@pytest.mark.parametrize("mode", ["per-client", "shared"])
def test_failing_upstream_login_fails_clients_fast_then_recovers(
        kafka_broker, kchannel_inprocess_server, caplog, mode):
    caplog.set_level(logging.INFO, logger="kchannel")
    user, password = f"gw-{uuid.uuid4().hex[:8]}", f"right-{uuid.uuid4().hex}"
    admin = Admin(kafka_broker.client_configs("SASL_PLAINTEXT", MECHANISM))
    topic = f"gw-login-{uuid.uuid4().hex[:8]}"
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        # The gateway's user exists upstream with another password.
        set_password(admin, user, "not-the-gateway-password")
        up = kafka_broker.client_configs("SASL_PLAINTEXT", MECHANISM, user=user,
                                         password=password)
        props = {"listeners": "PLAINTEXT://127.0.0.1:0",
                 "kchannel.scram.credential.store": "memory",
                 "kchannel.gateway.upstream.connections": mode}
        props.update({f"kchannel.upstream.{k}": v for k, v in up.items()})
        began = time.monotonic()
        gw = kchannel_inprocess_server(props)
        gateway = gw.server.gateway

        client = KafkaClient({"bootstrap.servers": gw.bootstrap(), "reconnect.backoff.ms": 20,
                              "reconnect.backoff.max.ms": 100})
        client.connect()
        # Kafka's APIs, not only the gateway's own (SASL, tokens, ACLs):
        # else clients conclude the cluster lacks them for good.
        for key in (ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.CREATE_TOPICS):
            assert int(key) in client.api_versions
        # Requests fail at once: their connection closed (a retriable
        # network error), none waits for the request timeout (20 s here).
        started = time.monotonic()
        for _ in range(20):
            with pytest.raises(KChannelError) as info:
                client.request(ApiKey.METADATA, {"topics": []}, timeout_ms=20000)
            assert not isinstance(info.value, TimeoutError), info.value
        assert time.monotonic() - started < 20
        # ... and they do not each make a login upstream: the gateway's own
        # attempts follow the reconnect backoff (50 ms doubling up to 1 s,
        # -20% jitter at most: 6 attempts in the first 1.24 s, then at most
        # one per 0.8 s), so fewer than the 20 requests.
        logins = gw.server.metrics.metric("failed-authentication-total",
                                          group="kchannel-upstream-metrics")
        elapsed_s = time.monotonic() - began
        assert 1 <= logins <= 6 + 1.25 * elapsed_s, (logins, elapsed_s)

        # A producer started meanwhile: its records wait, none is lost.
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": gw.bootstrap(), "acks": "all",
                             "reconnect.backoff.max.ms": 200, "message.timeout.ms": 30000})
        failures = []
        for i in range(5):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                             on_delivery=lambda err, msg: err is not None and failures.append(err))
        producer.poll(0.2)

        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert [r.name for r in errors] == ["kchannel.gateway"], \
            [(r.name, r.getMessage()) for r in errors]
        text = errors[0].getMessage()
        assert kafka_broker.bootstrap("SASL_PLAINTEXT") in text and f'user "{user}"' in text
        assert "kchannel.upstream.sasl.jaas.config" in text and "not a client's" in text
        assert password not in caplog.text

        # The right password upstream: the gateway logs in by itself.
        # (Kafka's broker takes the new credential when it replays the
        # controller's record, a moment after the answer; then the gateway's
        # next attempt, at most a backoff of 1 s later, logs in)
        set_password(admin, user, password)

        def metadata():
            try:
                return client.request(ApiKey.METADATA, {"topics": []})
            except KChannelError:
                return None
        body = wait_until(metadata, "the gateway to recover")
        # the upstream node's port at the gateway, bound once it logged in
        assert [b["port"] for b in body["brokers"]] == \
            [l.bound_port for l in gateway.node_listeners.values()]
        assert producer.flush(20) == 0 and failures == []
        consumer = Consumer({"bootstrap.servers": gw.bootstrap(),
                             "auto.offset.reset": "earliest"})
        got = []
        try:
            consumer.assign([(topic, 0)])
            deadline = time.monotonic() + 15
            while len(got) < 5 and time.monotonic() < deadline:
                got.extend((r.key, r.value) for r in consumer.poll(0.5))
        finally:
            consumer.close()
        assert got == [(b"k%d" % i, b"v%d" % i) for i in range(5)]
        assert gateway._login_error is None
        assert [r.name for r in caplog.records if r.levelno >= logging.ERROR] == \
            ["kchannel.gateway"]            # one per failure streak
        assert any("logged in to upstream" in r.getMessage() and r.levelno == logging.WARNING
                   for r in caplog.records)
        client.close()
    finally:
        admin.delete_topics([topic])
        admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, MECHANISM)])
        admin.close()
