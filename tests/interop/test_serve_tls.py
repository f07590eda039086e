"""Real Kafka clients against ``kchannel serve`` over PLAINTEXT and SSL.

One ``kchannel serve`` subprocess for the module with three listeners, each
advertised at a distinct address:

* ``PLAINTEXT`` bound and advertised at ``127.0.0.1:<p1>``;
* ``SSL`` bound at ``127.0.0.1:<p2>``, advertised as ``localhost:<p2>``
  (the server certificate covers localhost and 127.0.0.1);
* ``WRONGHOST`` (SSL) with a certificate for ``wronghost.example`` only;
* ``MTLS`` (SSL, ``ssl.client.auth=required``) advertised as ``localhost``;
* ``TLS12`` (SSL, ``ssl.enabled.protocols=TLSv1.2``) advertised as ``localhost``.

librdkafka (confluent-kafka), kafka-python 3.x, aiokafka and Debian's
kafka-python 2.0.2 fetch metadata with host name verification on and must
see the broker at the advertised address of the listener they used; an
untrusted CA or a host name mismatch fails with a clear client-side error
while the server logs the failed handshake and keeps serving others.

At the end, the TLS server transport alone against librdkafka: one
handshake per test (mutual TLS over TLS 1.2 and 1.3, failure alerts).
"""
import asyncio
import gc
import logging
import selectors
import socket
import threading
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import ChannelConnectionError, SslAuthenticationError
from kchannel.network.ops import OP_READ
from kchannel.network.ssl_factory import SslFactory
from kchannel.network.ssl_transport import SslTransportLayer
from kchannel.protocol.api_keys import ApiKey
from tests.fixtures.peers import (free_ports, legacy_kafka_python_metadata, require_module,
                                  start_kchannel_server)
from tests.fixtures.rdkafka import rdkafka_brokers, rdkafka_describe_unknown_topics

pytestmark = [pytest.mark.slow, pytest.mark.interop]

NODE_ID = 7
FAIL_TIMEOUT_S = 1.5


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    p1, p2, p3, p4, p5 = free_ports(5)
    props = {
        "node.id": str(NODE_ID),
        "listeners": (f"PLAINTEXT://127.0.0.1:{p1},SSL://127.0.0.1:{p2},"
                      f"WRONGHOST://127.0.0.1:{p3},MTLS://127.0.0.1:{p4},"
                      f"TLS12://127.0.0.1:{p5}"),
        "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{p1},SSL://localhost:{p2},"
                                 f"WRONGHOST://localhost:{p3},MTLS://localhost:{p4},"
                                 f"TLS12://localhost:{p5}"),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SSL:SSL,WRONGHOST:SSL,MTLS:SSL,TLS12:SSL",
        "listener.name.tls12.ssl.enabled.protocols": "TLSv1.2",
        "inter.broker.listener.name": "PLAINTEXT",
    }
    for k, v in pki.server_configs().items():
        props[f"listener.name.ssl.{k}"] = v
    for k, v in pki.server_configs(pki.wronghost_server).items():
        props[f"listener.name.wronghost.{k}"] = v
    for k, v in pki.server_configs(client_auth="required").items():
        props[f"listener.name.mtls.{k}"] = v
    for k, v in pki.server_configs().items():
        props[f"listener.name.tls12.{k}"] = v
    srv = start_kchannel_server(tmp_path_factory.mktemp("tls-serve"), props)
    assert (srv.port("PLAINTEXT"), srv.port("SSL"), srv.port("WRONGHOST")) == (p1, p2, p3)
    yield srv
    srv.stop_and_check()


def still_serving(server):
    """A kchannel client still gets Metadata over both listeners."""
    assert server.alive()
    with KafkaClient({"bootstrap.servers": server.bootstrap("PLAINTEXT")}).connect() as c:
        md = c.request(ApiKey.METADATA, {"topics": []})
        assert md["brokers"][0]["port"] == server.port("PLAINTEXT")


# ------------------------------------------------------------ client drivers
def kafka_python_brokers(caplog, timeout_ms=10000, **cfg):
    kafka = pytest.importorskip("kafka")
    caplog.set_level(logging.WARNING, logger="kafka")
    try:
        consumer = kafka.KafkaConsumer(request_timeout_ms=5000, bootstrap_timeout_ms=timeout_ms,
                                       **cfg)
    except Exception as exc:  # noqa: BLE001 - the failure is the result
        return RuntimeError(repr(exc)), [r.getMessage() for r in caplog.records]
    try:
        consumer.topics()
        return sorted((b.node_id, b.host, b.port)
                      for b in consumer._client.cluster.brokers()), []
    finally:
        consumer.close()


def aiokafka_brokers(caplog, **cfg):
    aiokafka = pytest.importorskip("aiokafka")
    caplog.set_level(logging.WARNING, logger="aiokafka")

    async def main():
        client = aiokafka.AIOKafkaClient(request_timeout_ms=5000, **cfg)
        try:
            await client.bootstrap()
            return sorted((b.nodeId, b.host, b.port) for b in client.cluster.brokers())
        finally:
            await client.close()
    try:
        return asyncio.run(main()), []
    except Exception as exc:  # noqa: BLE001
        return RuntimeError(repr(exc)), [r.getMessage() for r in caplog.records]


def aiokafka_ssl_context(cafile):
    helpers = pytest.importorskip("aiokafka.helpers")
    ctx = helpers.create_ssl_context(cafile=cafile)
    assert ctx.check_hostname
    return ctx


# ------------------------------------------------------------------- PLAINTEXT
def test_librdkafka_plaintext(server):
    brokers, errors = rdkafka_brokers({"bootstrap.servers": server.bootstrap("PLAINTEXT")})
    assert brokers == [(NODE_ID, "127.0.0.1", server.port("PLAINTEXT"))], errors


def test_librdkafka_unknown_topic_and_cluster_id(server):
    """Metadata for a named topic this node does not host, and the cluster
    id / controller the server logged at start."""
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    kafka_error = pytest.importorskip("confluent_kafka").KafkaError
    admin = admin_mod.AdminClient({"bootstrap.servers": server.bootstrap("PLAINTEXT")})
    md = admin.list_topics(topic="no-such-topic", timeout=10)
    assert md.topics["no-such-topic"].error.code() == kafka_error.UNKNOWN_TOPIC_OR_PART
    assert (md.cluster_id, md.controller_id) == (server.cluster_id, NODE_ID)
    del admin
    gc.collect()


def test_kafka_python_admin_describe_cluster(server):
    kafka = pytest.importorskip("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=server.bootstrap("PLAINTEXT"),
                                   request_timeout_ms=5000, bootstrap_timeout_ms=10000)
    try:
        info = admin.describe_cluster()
        assert info["cluster_id"] == server.cluster_id
        assert [(b["broker_id"], b["host"], b["port"]) for b in info["brokers"]] == [
            (NODE_ID, "127.0.0.1", server.port("PLAINTEXT"))]
        assert admin.list_topics() == []
    finally:
        admin.close()


def test_metadata_cluster_authorized_operations_as_describe_cluster(server):
    with KafkaClient({"bootstrap.servers": server.bootstrap("PLAINTEXT")}).connect() as c:
        if ApiKey.DESCRIBE_CLUSTER not in c.api_versions:
            pytest.skip("kchannel serve does not serve DescribeCluster")
        dc = c.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True})
        md = c.request(ApiKey.METADATA, {"topics": [], "include_cluster_authorized_operations":
                                         True}, version=10)
        not_asked = c.request(ApiKey.METADATA, {"topics": []}, version=10)
    assert not_asked["cluster_authorized_operations"] == -2147483648
    assert md["cluster_authorized_operations"] == dc["cluster_authorized_operations"]


def test_kafka_python_plaintext(server, caplog):
    brokers, _ = kafka_python_brokers(caplog, bootstrap_servers=server.bootstrap("PLAINTEXT"))
    assert brokers == [(NODE_ID, "127.0.0.1", server.port("PLAINTEXT"))]


def test_aiokafka_plaintext(server, caplog):
    brokers, logs = aiokafka_brokers(caplog, bootstrap_servers=server.bootstrap("PLAINTEXT"))
    assert brokers == [(NODE_ID, "127.0.0.1", server.port("PLAINTEXT"))], logs


def test_debian_kafka_python_plaintext(server, legacy_kafka_python):
    r = legacy_kafka_python_metadata({"bootstrap_servers": server.bootstrap("PLAINTEXT")})
    assert r["ok"], r
    assert r["brokers"] == [[NODE_ID, "127.0.0.1", server.port("PLAINTEXT")]]


# ------------------------------------------------------------------------ SSL
def test_librdkafka_ssl(server, pki):
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SSL", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path,
        "ssl.endpoint.identification.algorithm": "https"})
    assert brokers == [(NODE_ID, "localhost", server.port("SSL"))], errors


def test_librdkafka_ssl_by_ip_address(server, pki):
    """Bootstrapping at 127.0.0.1 (an IP SAN) still lands on the advertised
    localhost address."""
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SSL", "127.0.0.1"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path,
        "ssl.endpoint.identification.algorithm": "https"})
    assert brokers == [(NODE_ID, "localhost", server.port("SSL"))], errors


def test_librdkafka_large_metadata_over_tls(server, pki):
    """3000 named topics: Metadata frames of a few hundred kB across many
    TLS records in both directions."""
    rdkafka_describe_unknown_topics({
        "bootstrap.servers": server.bootstrap("SSL", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path},
        [f"topic-{i:05d}-" + "y" * 40 for i in range(3000)])


def test_kafka_python_ssl(server, pki, caplog):
    brokers, logs = kafka_python_brokers(
        caplog, bootstrap_servers=server.bootstrap("SSL", "localhost"),
        security_protocol="SSL", ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True)
    assert brokers == [(NODE_ID, "localhost", server.port("SSL"))], logs


def test_kafka_python_ssl_with_client_certificate(server, pki, caplog):
    brokers, logs = kafka_python_brokers(
        caplog, bootstrap_servers=server.bootstrap("SSL", "localhost"),
        security_protocol="SSL", ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True,
        ssl_certfile=pki.client.chain_path, ssl_keyfile=pki.client.key_path)
    assert brokers == [(NODE_ID, "localhost", server.port("SSL"))], logs


def test_aiokafka_ssl(server, pki, caplog):
    brokers, logs = aiokafka_brokers(
        caplog, bootstrap_servers=server.bootstrap("SSL", "localhost"),
        security_protocol="SSL", ssl_context=aiokafka_ssl_context(pki.ca.cert_path))
    assert brokers == [(NODE_ID, "localhost", server.port("SSL"))], logs


def test_debian_kafka_python_ssl(server, pki, legacy_kafka_python):
    r = legacy_kafka_python_metadata({
        "bootstrap_servers": server.bootstrap("SSL", "localhost"),
        "security_protocol": "SSL", "ssl_cafile": pki.ca.cert_path,
        "ssl_check_hostname": True})
    assert r["ok"], r
    assert r["brokers"] == [[NODE_ID, "localhost", server.port("SSL")]]


def test_kchannel_client_ssl(server, pki):
    conf = {"bootstrap.servers": server.bootstrap("SSL", "localhost"),
            "security.protocol": "SSL", **pki.client_configs()}
    with KafkaClient(conf).connect() as c:
        md = c.request(ApiKey.METADATA, {"topics": []})
    assert [(b["node_id"], b["host"], b["port"]) for b in md["brokers"]] == [
        (NODE_ID, "localhost", server.port("SSL"))]


# ------------------------------------------------------------ TLS failures
def _failed_handshake_logged(server, mark, reason):
    # Only for librdkafka: it sends its TLS alert before closing.  Python's
    # ssl clients may close with unread data, so the kernel resets the
    # connection and the server sees a reset instead of the alert (logged at
    # DEBUG as a connection closed during the handshake).
    m = server.wait_for_log(r"Failed authentication with .*SSL handshake failed.*" + reason,
                            timeout=5, start=mark)
    assert m is not None, server.log()[-3000:]


def test_librdkafka_untrusted_ca(server, pki):
    mark = server.mark()
    result, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("SSL", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.untrusted_ca.cert_path,
        "reconnect.backoff.ms": 500}, timeout=FAIL_TIMEOUT_S)
    assert isinstance(result, Exception)
    assert any("certificate verify failed" in e for e in errors), errors
    _failed_handshake_logged(server, mark, "unknown ca")
    still_serving(server)


def test_librdkafka_wrong_host_name(server, pki):
    result, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("WRONGHOST", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path,
        "ssl.endpoint.identification.algorithm": "https",
        "reconnect.backoff.ms": 500}, timeout=FAIL_TIMEOUT_S)
    assert isinstance(result, Exception)
    assert any("certificate verify failed" in e for e in errors), errors
    still_serving(server)


def test_kafka_python_untrusted_ca(server, pki, caplog):
    result, logs = kafka_python_brokers(
        caplog, timeout_ms=int(FAIL_TIMEOUT_S * 1000),
        bootstrap_servers=server.bootstrap("SSL", "localhost"), security_protocol="SSL",
        ssl_cafile=pki.untrusted_ca.cert_path, ssl_check_hostname=True)
    assert isinstance(result, Exception), result
    assert any("CERTIFICATE_VERIFY_FAILED" in m for m in logs), logs
    still_serving(server)


def test_kafka_python_wrong_host_name(server, pki, caplog):
    result, logs = kafka_python_brokers(
        caplog, timeout_ms=int(FAIL_TIMEOUT_S * 1000),
        bootstrap_servers=server.bootstrap("WRONGHOST", "localhost"), security_protocol="SSL",
        ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True)
    assert isinstance(result, Exception), result
    assert any("Hostname mismatch" in m or "doesn't match" in m for m in logs), logs
    still_serving(server)


def test_aiokafka_untrusted_ca(server, pki, caplog):
    result, logs = aiokafka_brokers(
        caplog, bootstrap_servers=server.bootstrap("SSL", "localhost"), security_protocol="SSL",
        ssl_context=aiokafka_ssl_context(pki.untrusted_ca.cert_path))
    assert isinstance(result, Exception), result
    assert any("CERTIFICATE_VERIFY_FAILED" in m for m in logs), logs
    still_serving(server)


def test_aiokafka_wrong_host_name(server, pki, caplog):
    result, logs = aiokafka_brokers(
        caplog, bootstrap_servers=server.bootstrap("WRONGHOST", "localhost"),
        security_protocol="SSL", ssl_context=aiokafka_ssl_context(pki.ca.cert_path))
    assert isinstance(result, Exception), result
    assert any("Hostname mismatch" in m for m in logs), logs
    still_serving(server)


def test_debian_kafka_python_untrusted_ca(server, pki, legacy_kafka_python):
    r = legacy_kafka_python_metadata({
        "bootstrap_servers": server.bootstrap("SSL", "localhost"),
        "security_protocol": "SSL", "ssl_cafile": pki.untrusted_ca.cert_path,
        "ssl_check_hostname": True}, timeout=10)
    assert not r["ok"], r
    assert "CERTIFICATE_VERIFY_FAILED" in r["message"], r
    still_serving(server)


def test_debian_kafka_python_wrong_host_name(server, pki, legacy_kafka_python):
    r = legacy_kafka_python_metadata({
        "bootstrap_servers": server.bootstrap("WRONGHOST", "localhost"),
        "security_protocol": "SSL", "ssl_cafile": pki.ca.cert_path,
        "ssl_check_hostname": True}, timeout=10)
    assert not r["ok"], r
    assert "Hostname mismatch" in r["message"] or "doesn't match" in r["message"], r
    still_serving(server)


def test_kchannel_client_wrong_host_name(server, pki):
    from kchannel.errors import SslAuthenticationError
    conf = {"bootstrap.servers": server.bootstrap("WRONGHOST", "localhost"),
            "security.protocol": "SSL", **pki.client_configs()}
    client = KafkaClient(conf)
    try:
        with pytest.raises(SslAuthenticationError, match="(?i)hostname mismatch"):
            client.connect()
    finally:
        client.close()
    still_serving(server)


def test_many_clients_at_once(server, pki):
    """Real clients of three kinds connecting concurrently over SSL."""
    # Here, not in the thread, where a skip would only lose its result.
    require_module("confluent_kafka.admin", "confluent-kafka")
    results = {}

    def rd():
        results["rdkafka"] = rdkafka_brokers({
            "bootstrap.servers": server.bootstrap("SSL", "localhost"),
            "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path})[0]

    def kc(i):
        conf = {"bootstrap.servers": server.bootstrap("SSL", "localhost"),
                "security.protocol": "SSL", **pki.client_configs()}
        with KafkaClient(conf).connect() as c:
            results[f"kchannel-{i}"] = [(b["node_id"], b["host"], b["port"]) for b in
                                        c.request(ApiKey.METADATA, {"topics": []})["brokers"]]

    threads = [threading.Thread(target=rd)] + [threading.Thread(target=kc, args=(i,))
                                               for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    expected = [(NODE_ID, "localhost", server.port("SSL"))]
    assert results == {k: expected for k in ["rdkafka"] + [f"kchannel-{i}" for i in range(8)]}


# ------------------------------------------------ mutual TLS (client auth)
def test_librdkafka_client_certificate_required(server, pki):
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("MTLS", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path,
        "ssl.certificate.location": pki.client.cert_path,
        "ssl.key.location": pki.client.key_path})
    assert brokers == [(NODE_ID, "localhost", server.port("MTLS"))], errors


def test_librdkafka_without_client_certificate(server, pki):
    mark = server.mark()
    result, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("MTLS", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path,
        "reconnect.backoff.ms": 500}, timeout=FAIL_TIMEOUT_S)
    assert isinstance(result, Exception)
    assert errors, errors
    m = server.wait_for_log(r"Failed authentication with .*SSL handshake failed: .*"
                            r"(?i:certificate)", timeout=5, start=mark)
    assert m is not None, server.log()[-3000:]
    still_serving(server)


def test_kafka_python_client_certificate_required(server, pki, caplog):
    brokers, logs = kafka_python_brokers(
        caplog, bootstrap_servers=server.bootstrap("MTLS", "localhost"),
        security_protocol="SSL", ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True,
        ssl_certfile=pki.client.chain_path, ssl_keyfile=pki.client.key_path)
    assert brokers == [(NODE_ID, "localhost", server.port("MTLS"))], logs


def test_kafka_python_untrusted_client_certificate(server, pki, caplog):
    mark = server.mark()
    result, logs = kafka_python_brokers(
        caplog, timeout_ms=int(FAIL_TIMEOUT_S * 1000),
        bootstrap_servers=server.bootstrap("MTLS", "localhost"), security_protocol="SSL",
        ssl_cafile=pki.ca.cert_path, ssl_check_hostname=True,
        ssl_certfile=pki.untrusted_client.chain_path, ssl_keyfile=pki.untrusted_client.key_path)
    assert isinstance(result, Exception), result
    m = server.wait_for_log(r"Failed authentication with .*SSL handshake failed: .*"
                            r"certificate verify failed", timeout=5, start=mark)
    assert m is not None, server.log()[-3000:]
    still_serving(server)


def test_aiokafka_client_certificate_required(server, pki, caplog):
    ctx = aiokafka_ssl_context(pki.ca.cert_path)
    ctx.load_cert_chain(pki.client.chain_path, pki.client.key_path)
    brokers, logs = aiokafka_brokers(
        caplog, bootstrap_servers=server.bootstrap("MTLS", "localhost"),
        security_protocol="SSL", ssl_context=ctx)
    assert brokers == [(NODE_ID, "localhost", server.port("MTLS"))], logs


def test_debian_kafka_python_client_certificate_required(server, pki, legacy_kafka_python):
    r = legacy_kafka_python_metadata({
        "bootstrap_servers": server.bootstrap("MTLS", "localhost"),
        "security_protocol": "SSL", "ssl_cafile": pki.ca.cert_path,
        "ssl_certfile": pki.client.chain_path, "ssl_keyfile": pki.client.key_path,
        "ssl_check_hostname": True})
    assert r["ok"], r
    assert r["brokers"] == [[NODE_ID, "localhost", server.port("MTLS")]]


# ------------------------------------------------------ protocol versions
def tls_context(pki, lo, hi):
    import ssl
    ctx = ssl.create_default_context(cafile=pki.ca.cert_path)
    ctx.minimum_version = getattr(ssl.TLSVersion, lo)
    ctx.maximum_version = getattr(ssl.TLSVersion, hi)
    return ctx


def test_librdkafka_tls12_only_listener(server, pki):
    brokers, errors = rdkafka_brokers({
        "bootstrap.servers": server.bootstrap("TLS12", "localhost"),
        "security.protocol": "SSL", "ssl.ca.location": pki.ca.cert_path})
    assert brokers == [(NODE_ID, "localhost", server.port("TLS12"))], errors


@pytest.mark.parametrize("listener", ["SSL", "TLS12"])
def test_kafka_python_tls12_client(server, pki, caplog, listener):
    brokers, logs = kafka_python_brokers(
        caplog, bootstrap_servers=server.bootstrap(listener, "localhost"),
        security_protocol="SSL", ssl_context=tls_context(pki, "TLSv1_2", "TLSv1_2"))
    assert brokers == [(NODE_ID, "localhost", server.port(listener))], logs


def test_kafka_python_tls13_only_client_to_tls12_listener(server, pki, caplog):
    mark = server.mark()
    result, logs = kafka_python_brokers(
        caplog, timeout_ms=int(FAIL_TIMEOUT_S * 1000),
        bootstrap_servers=server.bootstrap("TLS12", "localhost"), security_protocol="SSL",
        ssl_context=tls_context(pki, "TLSv1_3", "TLSv1_3"))
    assert isinstance(result, Exception), result
    assert any("PROTOCOL_VERSION" in m.upper() or "VERSION" in m.upper() for m in logs), logs
    m = server.wait_for_log(r"Failed authentication with .*SSL handshake failed: "
                            r"unsupported protocol", timeout=5, start=mark)
    assert m is not None, server.log()[-3000:]
    still_serving(server)


# -------------------------------------------------------------------- IPv6
def ipv6_loopback():
    import socket
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback (::1) on this host")
def test_ipv6_listener(kchannel_server, caplog):
    """An IPv6 listener: advertised as ::1, which real clients and
    broker-api-versions (Kafka's Node format, no brackets) use as is."""
    from tests.fixtures.peers import run_kchannel
    srv = kchannel_server({"node.id": "6", "listeners": "PLAINTEXT://[::1]:0"})
    assert srv.listeners["PLAINTEXT"].host == "::1"
    port = srv.port("PLAINTEXT")
    brokers, errors = rdkafka_brokers({"bootstrap.servers": f"[::1]:{port}"})
    assert brokers == [(6, "::1", port)], errors
    brokers, logs = kafka_python_brokers(caplog, bootstrap_servers=f"[::1]:{port}")
    assert brokers == [(6, "::1", port)], logs
    r = run_kchannel("broker-api-versions", "--bootstrap-server", f"[::1]:{port}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"::1:{port} (id: 6 rack: null isFenced: false) -> (\n")


def test_tls_version_mismatch_reason_does_not_blame_the_peer(server, pki):
    import socket
    import ssl
    mark = server.mark()
    ctx = tls_context(pki, "TLSv1_3", "TLSv1_3")
    with socket.create_connection(("127.0.0.1", server.port("TLS12"))) as sock:
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(sock, server_hostname="localhost")
    m = server.wait_for_log(r"Failed authentication with .*SSL handshake failed: "
                            r"unsupported protocol.*", timeout=5, start=mark)
    assert m is not None, server.log()[-3000:]
    assert "may not be speaking TLS" not in m.group(0)


# ----------------------------------------------------------------------
# The TLS server transport alone (no kchannel server) against librdkafka,
# whose TLS client is its own OpenSSL build driven through socket BIOs: a
# real Kafka client's handshake, mutual TLS and failure alerts.
# ----------------------------------------------------------------------
DEADLINE_S = 30.0


class OneShotTlsServer:
    """Accepts one connection, completes the TLS handshake and reads the
    first Kafka frame; records the outcome."""

    def __init__(self, server_configs, impl):
        self.factory = SslFactory("server", server_configs)
        self.impl = impl
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(4)
        self.port = self.ls.getsockname()[1]
        self.result = {}
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        try:
            self.ls.settimeout(DEADLINE_S)
            sock, _ = self.ls.accept()
            t = SslTransportLayer(sock, self.factory.create_engine(),
                                  pump_module=self.impl.tlspump)
            deadline = time.monotonic() + DEADLINE_S
            sel.register(sock, OP_READ)
            try:
                while True:
                    ops = t.handshake()
                    if ops == 0:
                        break
                    sel.modify(sock, ops)
                    sel.select(0.5)
                    if time.monotonic() > deadline:
                        raise TimeoutError("handshake")
                self.result["protocol"] = t.protocol()
                self.result["dn"] = t.peer_subject_dn()
                buf = bytearray()
                sel.modify(sock, OP_READ)
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    if t.read_into(buf.extend) == 0 and not t.has_bytes_buffered():
                        sel.select(0.5)
                    if time.monotonic() > deadline:
                        raise TimeoutError("first frame")
                size = int.from_bytes(buf[:4], "big")
                frame = bytes(buf[4:4 + size])
                self.result["api_key"] = int.from_bytes(frame[:2], "big", signed=True)
                client_id_len = int.from_bytes(frame[8:10], "big", signed=True)
                self.result["client_id"] = frame[10:10 + client_id_len].decode()
            except (SslAuthenticationError, ChannelConnectionError) as exc:
                self.result["error"] = exc
            finally:
                t.close()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            self.result["unexpected"] = exc
        finally:
            sel.close()
            self.ls.close()

    def join(self):
        self.thread.join(DEADLINE_S + 5)
        assert not self.thread.is_alive()
        assert "unexpected" not in self.result, self.result["unexpected"]
        return self.result


def _poke(port, extra):
    """Make librdkafka connect (and give up quickly)."""
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
            "client.id": "rdkafka-interop", "socket.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000}
    conf.update(extra)
    confluent_kafka = require_module("confluent_kafka", "confluent-kafka")
    admin = require_module("confluent_kafka.admin", "confluent-kafka").AdminClient(conf)
    try:
        admin.list_topics(timeout=2)
    except confluent_kafka.KafkaException:
        pass


@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
def test_librdkafka_mutual_tls(pki, impl, version):
    sc = pki.server_configs(client_auth="required")
    sc["ssl.enabled.protocols"] = version
    server = OneShotTlsServer(sc, impl)
    _poke(server.port, {"ssl.ca.location": pki.ca.cert_path,
                        "ssl.certificate.location": pki.client.cert_path,
                        "ssl.key.location": pki.client.encrypted_key_path,
                        "ssl.key.password": pki.client.key_password,
                        "ssl.endpoint.identification.algorithm": "https"})
    res = server.join()
    assert "error" not in res, res["error"]
    assert res["protocol"] == version
    assert res["dn"] == "CN=client,OU=Eng,O=Example,C=US"
    assert res["api_key"] == 18  # ApiVersions: the first thing a Kafka client says
    assert res["client_id"] == "rdkafka-interop"


class _Active:
    from kchannel.network import ssl_transport as _st
    tlspump = _st._pump


def test_librdkafka_rejects_untrusted_server(pki):
    server = OneShotTlsServer(pki.server_configs(identity=pki.untrusted_server), _Active)
    _poke(server.port, {"ssl.ca.location": pki.ca.cert_path})
    res = server.join()
    assert isinstance(res.get("error"), SslAuthenticationError)
    assert "unknown ca" in str(res["error"]) or "certificate" in str(res["error"])


def test_librdkafka_without_client_cert_when_required(pki):
    server = OneShotTlsServer(pki.server_configs(client_auth="required"), _Active)
    _poke(server.port, {"ssl.ca.location": pki.ca.cert_path})
    res = server.join()
    assert isinstance(res.get("error"), SslAuthenticationError)
    assert "certificate" in str(res["error"])
