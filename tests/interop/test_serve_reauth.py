"""KIP-368 re-authentication with real clients against ``kchannel serve``.

A SASL_PLAINTEXT listener hands out short sessions
(``connections.max.reauth.ms``).  librdkafka re-authenticates on the same
connection before its session expires, so its requests keep working and the
server never has to kill the connection; clients without KIP-368 support
(aiokafka, Debian's kafka-python 2.0.2, which uses SaslHandshake v0) are
disconnected at the end of their session and simply reconnect.  The server
runs at DEBUG so its log shows which happened.
"""
import asyncio
import logging
import re
import time

import pytest

from tests.fixtures.peers import free_ports, start_kchannel_server

pytestmark = [pytest.mark.slow, pytest.mark.interop]

# Kafka's broker (and kchannel's) starts at most one re-authentication per
# connection a second (KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS) and
# answers a SaslHandshake sooner than that ILLEGAL_SASL_STATE.  Clients
# re-authenticate at 85-95 % (kafka-python) or 90 % (librdkafka) of the
# session, so a 1 s session had every second re-authentication of a
# connection refused: the client dropped the connection, and a request
# caught behind it failed with ILLEGAL_SASL_STATE (seen under load).  1.5 s
# sessions space them at least 1.27 s apart.
SESSION_MS = 1500


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    (port,) = free_ports(1)
    props = {
        "node.id": "5",
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "connections.max.reauth.ms": str(SESSION_MS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }
    srv = start_kchannel_server(tmp_path_factory.mktemp("reauth"), props, log_level="DEBUG",
                                scram_users={"alice": {"SCRAM-SHA-256": "alice-secret"}})
    yield srv
    srv.stop_and_check()


def peer_ports(lines, pattern):
    rx = re.compile(pattern)
    return {m.group(1) for m in (rx.search(l) for l in lines) if m}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_librdkafka_reauthenticates_on_the_same_connection(server, mechanism):
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    mark = server.mark()
    admin = admin_mod.AdminClient({
        "bootstrap.servers": server.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    deadline = time.monotonic() + 2.5 * SESSION_MS / 1000
    requests = 0
    while time.monotonic() < deadline:
        assert list(admin.list_topics(timeout=5).brokers) == [5]
        requests += 1
        time.sleep(0.2)
    del admin
    lines = server.log_lines()[mark:]
    reauthenticated = peer_ports(lines, r"Successfully re-authenticated with 127\.0\.0\.1:(\d+)")
    expired = peer_ports(lines, r"Disconnecting expired channel: .*127\.0\.0\.1:(\d+)")
    failed = [l for l in lines if "Failed re-authentication" in l]
    assert reauthenticated, "".join(lines)[-4000:]
    assert not failed, failed
    # the connections that re-authenticated were never killed for expiry
    assert not (reauthenticated & expired), (reauthenticated, expired)


def test_aiokafka_without_reauthentication_reconnects(server):
    """aiokafka does not re-authenticate: the server closes its connection
    once the session is over and the next request reconnects."""
    aiokafka = pytest.importorskip("aiokafka")

    async def main():
        client = aiokafka.AIOKafkaClient(
            bootstrap_servers=server.bootstrap("SASL_PLAINTEXT"),
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username="alice", sasl_plain_password="alice-secret",
            metadata_max_age_ms=300)
        await client.bootstrap()
        try:
            seen = []
            deadline = time.monotonic() + 2.5 * SESSION_MS / 1000
            while time.monotonic() < deadline:
                await client.force_metadata_update()
                seen.append(sorted(b.nodeId for b in client.cluster.brokers()))
                await asyncio.sleep(0.2)
            return seen
        finally:
            await client.close()
    mark = server.mark()
    seen = asyncio.run(main())
    assert seen and all(s == [5] for s in seen)
    lines = server.log_lines()[mark:]
    # its session ran out at least once and the server closed the connection
    assert peer_ports(lines, r"Disconnecting expired channel: .*127\.0\.0\.1:(\d+)"), \
        "".join(lines)[-4000:]
    assert not [l for l in lines if re.search(r"\] (WARNING|ERROR) ", l)], lines


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kafka_python_reauthenticates(server, mechanism, caplog):
    """kafka-python 3 schedules KIP-368 re-authentication at 85-95 % of the
    session lifetime the server sent in SaslAuthenticate v1+."""
    kafka = pytest.importorskip("kafka")
    # kafka-python logs a refused re-authentication (and drops the connection)
    caplog.set_level(logging.WARNING, logger="kafka")
    mark = server.mark()
    admin = kafka.KafkaAdminClient(
        bootstrap_servers=server.bootstrap("SASL_PLAINTEXT"),
        security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
        sasl_plain_username="alice", sasl_plain_password="alice-secret",
        request_timeout_ms=5000, bootstrap_timeout_ms=10000)
    try:
        deadline = time.monotonic() + 2.5 * SESSION_MS / 1000
        while time.monotonic() < deadline:
            assert admin.list_topics() == []
            time.sleep(0.2)
    finally:
        admin.close()
    lines = server.log_lines()[mark:]
    reauthenticated = peer_ports(lines, r"Successfully re-authenticated with 127\.0\.0\.1:(\d+)")
    expired = peer_ports(lines, r"Disconnecting expired channel: .*127\.0\.0\.1:(\d+)")
    assert reauthenticated, "".join(lines)[-4000:]
    assert not [l for l in lines if "Failed re-authentication" in l]
    assert not (reauthenticated & expired), (reauthenticated, expired)
    assert not [r.getMessage() for r in caplog.records if "re-authentication" in r.getMessage()]


def test_revoked_scram_user_is_cut_off_at_reauthentication(server):
    """Deleting a SCRAM credential (kchannel configs, straight into the
    server's store) ends a connected librdkafka client's access at its next
    re-authentication, within connections.max.reauth.ms."""
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    from tests.fixtures.peers import create_scram_users, run_kchannel
    create_scram_users(server.config_path, {"bob": {"SCRAM-SHA-256": "bob-secret"}})
    errors = []
    admin = admin_mod.AdminClient({
        "bootstrap.servers": server.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "bob", "sasl.password": "bob-secret",
        "error_cb": lambda e: errors.append(str(e))})
    try:
        assert list(admin.list_topics(timeout=5).brokers) == [5]
        mark = server.mark()
        r = run_kchannel("configs", "--server-config", server.config_path, "--alter",
                         "--delete-config", "SCRAM-SHA-256", "--entity-type", "users",
                         "--entity-name", "bob")
        assert r.returncode == 0, r.stderr
        # Normally the live connection fails its re-authentication; on a
        # loaded machine librdkafka may have dropped it first and the revoked
        # user is refused on a fresh login instead.  Either way the deleted
        # credential no longer grants access, which list_topics checks below.
        m = server.wait_for_log(r"Failed (re-)?authentication with .*SCRAM-SHA-256",
                                timeout=5 * SESSION_MS / 1000, start=mark)
        assert m is not None, "".join(server.log_lines()[mark:])[-3000:]
        with pytest.raises(Exception):
            admin.list_topics(timeout=1.5)
    finally:
        del admin
