"""Real clients against ``kchannel serve`` running the pure-Python twins.

The other interop modules run the server with the compiled extensions when
they are built; this one starts it with ``KCHANNEL_NO_EXTENSIONS=1`` (framing,
wire primitives, TLS pump and SCRAM all pure Python) and drives it over SSL
and SASL_SSL, including requests and responses of a few hundred kilobytes
that span many TLS records.
"""
import asyncio

import pytest

from tests.fixtures.peers import free_ports, legacy_kafka_python_metadata, start_kchannel_server
from tests.fixtures.rdkafka import rdkafka_brokers, rdkafka_describe_unknown_topics

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NODE_ID = 11
TOPICS = [f"topic-{i:05d}-" + "x" * 40 for i in range(3000)]


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    p1, p2 = free_ports(2)
    props = {
        "node.id": str(NODE_ID),
        "listeners": f"SSL://127.0.0.1:{p1},SASL_SSL://127.0.0.1:{p2}",
        "advertised.listeners": f"SSL://localhost:{p1},SASL_SSL://localhost:{p2}",
        "inter.broker.listener.name": "SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    }
    for listener in ("ssl", "sasl_ssl"):
        for k, v in pki.server_configs().items():
            props[f"listener.name.{listener}.{k}"] = v
    srv = start_kchannel_server(tmp_path_factory.mktemp("pure"), props, log_level="DEBUG",
                                env={"KCHANNEL_NO_EXTENSIONS": "1"},
                                scram_users={"alice": {"SCRAM-SHA-512": "alice-secret"}})
    yield srv
    srv.stop_and_check()


def test_server_runs_pure_twins(server):
    log = server.log()
    assert "framing: using pure-Python" in log
    assert "wire: using pure-Python" in log
    assert "using compiled" not in log


def test_librdkafka_ssl(server, pki):
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SSL", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path})
    assert brokers == [(NODE_ID, "localhost", server.port("SSL"))], errors


def test_librdkafka_large_metadata_over_tls(server, pki):
    """3000 named topics: a ~170 kB Metadata request and a larger response
    through the pure TLS pump; every topic comes back unknown."""
    rdkafka_describe_unknown_topics({
        "bootstrap.servers": server.bootstrap("SSL", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path}, TOPICS)


def test_librdkafka_sasl_ssl_scram(server, pki):
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SASL_SSL", "localhost"),
        "security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca.cert_path,
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
        "sasl.password": "alice-secret"})
    assert brokers == [(NODE_ID, "localhost", server.port("SASL_SSL"))], errors


def test_kafka_python_sasl_ssl_scram(server, pki):
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=server.bootstrap("SASL_SSL", "localhost"),
        security_protocol="SASL_SSL", ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True,
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
        sasl_plain_password="alice-secret", request_timeout_ms=5000,
        bootstrap_timeout_ms=10000)
    try:
        assert consumer.topics() == set()
        assert [(b.node_id, b.host, b.port) for b in consumer._client.cluster.brokers()] == [
            (NODE_ID, "localhost", server.port("SASL_SSL"))]
    finally:
        consumer.close()


def test_aiokafka_ssl(server, pki):
    aiokafka = pytest.importorskip("aiokafka")
    helpers = pytest.importorskip("aiokafka.helpers")

    async def main():
        client = aiokafka.AIOKafkaClient(
            bootstrap_servers=server.bootstrap("SSL", "localhost"), security_protocol="SSL",
            ssl_context=helpers.create_ssl_context(cafile=pki.ca.cert_path))
        await client.bootstrap()
        try:
            return sorted((b.nodeId, b.host, b.port) for b in client.cluster.brokers())
        finally:
            await client.close()
    assert asyncio.run(main()) == [(NODE_ID, "localhost", server.port("SSL"))]


def test_debian_kafka_python_sasl_ssl_plain(server, pki, legacy_kafka_python):
    r = legacy_kafka_python_metadata({
        "bootstrap_servers": server.bootstrap("SASL_SSL", "localhost"),
        "security_protocol": "SASL_SSL", "ssl_cafile": pki.ca.cert_path,
        "ssl_check_hostname": True, "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"})
    assert r["ok"], r
    assert r["brokers"] == [[NODE_ID, "localhost", server.port("SASL_SSL")]]
