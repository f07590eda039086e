"""Server + KafkaClient over SSL (the test PKI from tests/fixtures/certs.py).

Covers: ApiVersions/Metadata over TLS, client-certificate principals mapped by
ssl.principal.mapping.rules, principal.builder.class, failed TLS handshakes
closing only their own connection, plaintext to a TLS port and a handshake
cut off half-way.
"""
import socket
import ssl

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SslAuthenticationError
from kchannel.framing import encode_frame
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader, encode_request
from kchannel.server import Server


class FixedPrincipalBuilder:
    """A principal.builder.class for the test: every principal is
    User:fixed-<dn>."""

    def configure(self, configs):
        self.configs = configs

    def build(self, context):
        return KafkaPrincipal("User", f"fixed-{getattr(context, 'peer_subject_dn', None)}")


def ssl_server(pki, client_auth="required", extra=None):
    configs = pki.server_configs(client_auth=client_auth)
    configs.update(extra or {})
    s = Server(listeners=[
        {"name": "SSL", "host": "127.0.0.1", "port": 0, "security_protocol": "SSL",
         "configs": configs},
        "PLAINTEXT://127.0.0.1:0",
    ], node_id=1)
    principals = []

    def describe_cluster(ctx):
        principals.append(str(ctx.principal))
        return {"error_code": 0, "cluster_id": s.cluster_id, "controller_id": 1,
                "brokers": []}

    s.register_handler(ApiKey.DESCRIBE_CLUSTER, describe_cluster)
    s.principals = principals
    s.start()
    return s


def ssl_client(pki, server, keystore="pem", **extra):
    cfg = pki.client_configs(keystore=keystore)
    cfg["security.protocol"] = "SSL"
    cfg["bootstrap.servers"] = f"localhost:{server.bound_port('SSL')}"
    cfg.update(extra)
    return KafkaClient(cfg)


def plaintext_client(server):
    return KafkaClient({"bootstrap.servers": f"127.0.0.1:{server.bound_port('PLAINTEXT')}"})


@pytest.fixture
def server(pki):
    s = ssl_server(pki)
    yield s
    s.shutdown()


def test_ssl_api_versions_metadata_and_principal(pki, server):
    """Kafka: DefaultKafkaPrincipalBuilderTest.testUseSessionPeerPrincipalForSsl (through a
    server)."""
    with ssl_client(pki, server).connect() as c:
        assert c.api_versions[ApiKey.METADATA][1] >= 12
        md = c.request(ApiKey.METADATA, {"topics": []})
        assert md["brokers"][0]["port"] == server.bound_port("SSL")
        c.request(ApiKey.DESCRIBE_CLUSTER, {})
    assert server.principals == [f"User:{pki.client.dn}"]


def test_ssl_principal_mapping_rules(pki):
    s = ssl_server(pki, extra={
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT"})
    try:
        with ssl_client(pki, s).connect() as c:
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        cn = pki.client.dn.split(",")[0][3:]
        ou = pki.client.dn.split(",")[1][3:]
        assert s.principals == [f"User:{cn}@{ou}".lower().replace("user:", "User:")]
    finally:
        s.shutdown()


def test_principal_builder_class(pki):
    s = ssl_server(pki, extra={
        "principal.builder.class": f"{__name__}.FixedPrincipalBuilder"})
    try:
        with ssl_client(pki, s).connect() as c:
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert s.principals == [f"User:fixed-{pki.client.dn}"]
    finally:
        s.shutdown()


def test_no_client_cert_is_anonymous_when_not_required(pki):
    """Kafka: DefaultKafkaPrincipalBuilderTest.testPrincipalIfSSLPeerIsNotAuthenticated (through a
    server)."""
    s = ssl_server(pki, client_auth="none")
    try:
        with ssl_client(pki, s, keystore=None).connect() as c:
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert s.principals == ["User:ANONYMOUS"]
    finally:
        s.shutdown()


def test_missing_required_client_cert_fails_fast(pki, server):
    """Kafka: SslTransportLayerTest.testClientAuthenticationRequiredNotProvided (through a
    server)."""
    good = ssl_client(pki, server).connect()
    c = ssl_client(pki, server, keystore=None)
    with pytest.raises(SslAuthenticationError):
        c.connect()
        c.request(ApiKey.METADATA, {"topics": []})
    c.close()
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()
    server.shutdown()      # join the server thread before reading its metrics
    assert server.metrics.snapshot()["failed-authentication-total"] >= 1


def test_untrusted_server_rejected_by_client(pki, server):
    cfg = {"security.protocol": "SSL",
           "ssl.truststore.type": "PEM",
           # the client's own cert is not a CA for the server's cert
           "ssl.truststore.location": pki.client.cert_path}
    c = KafkaClient(cfg)
    with pytest.raises(SslAuthenticationError):
        c.connect("localhost", server.bound_port("SSL"))
    c.close()


def test_hostname_verification(pki):
    # A server whose certificate is for wronghost.example only: the client
    # connecting to localhost must refuse it (ssl.endpoint.identification.algorithm=https).
    configs = pki.server_configs(identity=pki.wronghost_server)
    s = Server(listeners=[{"name": "SSL", "host": "127.0.0.1", "port": 0,
                           "security_protocol": "SSL", "configs": configs}])
    s.start()
    try:
        c = ssl_client(pki, s, keystore=None)
        with pytest.raises(SslAuthenticationError):
            c.connect()
        c.close()
        # with identification disabled the same server is accepted
        c = ssl_client(pki, s, keystore=None, **{"ssl.endpoint.identification.algorithm": ""})
        assert c.connect().request(ApiKey.METADATA, {"topics": []})["brokers"]
        c.close()
    finally:
        s.shutdown()


def test_untrusted_client_cert_rejected(pki, server):
    good = ssl_client(pki, server).connect()
    c = ssl_client(pki, server, keystore="pem")
    c.close()
    cfg = pki.client_configs(identity=pki.untrusted_client, keystore="pem")
    cfg["security.protocol"] = "SSL"
    bad = KafkaClient(cfg)
    with pytest.raises(SslAuthenticationError):
        bad.connect("localhost", server.bound_port("SSL"))
        bad.request(ApiKey.METADATA, {"topics": []})
    bad.close()
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()


def test_plaintext_request_to_tls_port_closes_only_that_connection(pki, server):
    good = ssl_client(pki, server).connect()
    raw = socket.create_connection(("127.0.0.1", server.bound_port("SSL")))
    raw.settimeout(10)
    raw.sendall(encode_frame(encode_request(RequestHeader(ApiKey.API_VERSIONS, 0, 1, "x"), {})))
    try:
        while raw.recv(65536):
            pass       # a TLS alert may come back before the close
    except ConnectionResetError:
        pass
    raw.close()
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()


def test_abrupt_close_mid_handshake(pki, server):
    good = ssl_client(pki, server).connect()
    # Start a real TLS handshake and drop the TCP connection after the
    # ClientHello: the server is left mid-handshake.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    hello = outgoing.read()
    raw = socket.create_connection(("127.0.0.1", server.bound_port("SSL")))
    raw.sendall(hello[: len(hello) // 2])
    raw.close()
    raw2 = socket.create_connection(("127.0.0.1", server.bound_port("SSL")))
    raw2.sendall(hello)
    raw2.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    raw2.close()     # RST after a full ClientHello
    assert good.request(ApiKey.METADATA, {"topics": []})["brokers"]
    # the PLAINTEXT listener is unaffected too
    with plaintext_client(server).connect() as p:
        assert p.request(ApiKey.METADATA, {"topics": []})["brokers"]
    good.close()


def test_many_ssl_clients(pki, server):
    clients = [ssl_client(pki, server).connect() for _ in range(20)]
    try:
        for c in clients:
            assert c.request(ApiKey.METADATA, {"topics": []})["brokers"][0]["node_id"] == 1
    finally:
        for c in clients:
            c.close()
    assert server.metrics.snapshot()["successful-authentication-total"] >= 20


def test_large_request_over_tls(pki, server):
    # a Metadata request naming many topics: multi-record TLS writes and reads
    topics = [{"name": f"topic-{i:05d}-" + "x" * 100} for i in range(3000)]
    with ssl_client(pki, server).connect() as c:
        body = c.request(ApiKey.METADATA, {"topics": topics})
        assert len(body["topics"]) == 3000
        assert body["topics"][-1]["name"] == topics[-1]["name"]


def test_reconnect_resumes_the_tls_session_and_keeps_the_principal(pki, server):
    """TLS session resumption through Server and NetworkClient: the client's
    next connections to the same host:port resume (OpenSSL says so on the
    client only when the server accepted the ticket) and the server still
    maps the client certificate's DN to the principal."""
    from kchannel.client import NetworkClient
    cfg = pki.client_configs(keystore="pem")
    cfg["security.protocol"] = "SSL"
    net = NetworkClient(cfg)
    reused = []
    try:
        for node in range(3):
            net.connect(node, "localhost", server.bound_port("SSL"))
            for _ in range(200):
                if net.is_ready(node):
                    break
                net.poll(50)
            assert net.is_ready(node), net.connection_exception(node)
            corr = net.send(node, ApiKey.DESCRIBE_CLUSTER, {})
            responses = []
            for _ in range(200):
                responses += net.poll(50)
                if any(r.correlation_id == corr for r in responses):
                    break
            reused.append(net.selector.channel(node).transport.session_reused())
            net.close(node)
    finally:
        net.close()
    assert reused == [False, True, True]
    assert server.principals == [f"User:{pki.client.dn}"] * 3
