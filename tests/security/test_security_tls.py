"""TLS defaults seen on the wire: TLS < 1.2 refused unless configured (both
sides), host name verification on by default, no compression, no
renegotiation, ``ssl.client.auth=required`` enforced."""
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import KChannelError, SslAuthenticationError
from kchannel.network.ssl_factory import SslFactory
from kchannel.protocol.api_keys import ApiKey
from kchannel.server import Server


def tls_server(pki, **configs):
    c = pki.server_configs()
    c.update(configs)
    s = Server(listeners=[{"name": "SSL", "host": "127.0.0.1", "port": 0,
                           "security_protocol": "SSL", "configs": c}])
    s.start()
    return s


def legacy_client_context(pki, version):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ctx.maximum_version = version
    # OpenSSL 3 allows TLS < 1.2 only at security level 0.
    ctx.set_ciphers("DEFAULT@SECLEVEL=0")
    ctx.load_verify_locations(pki.ca.cert_path)
    return ctx


def tls_handshake(ctx, port, host="localhost"):
    """Complete a handshake and one read; returns the SSLSocket or raises."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s = ctx.wrap_socket(raw, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    return s


def metadata_ok(pki, port, **extra):
    cfg = pki.client_configs()
    cfg.update({"security.protocol": "SSL"}, **extra)
    with KafkaClient(cfg) as c:
        c.connect("localhost", port)
        return c.request(ApiKey.METADATA, {"topics": []})["brokers"] is not None


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1])
def test_server_refuses_legacy_tls_by_default(pki, servers, version):
    default = tls_server(pki)
    servers.append(default)
    with pytest.raises(ssl.SSLError):
        tls_handshake(legacy_client_context(pki, version), default.bound_port("SSL"))
    # Control: the same client is accepted once the listener enables that
    # version (so the refusal above is the listener's default, not an
    # OpenSSL build without TLS < 1.2).
    name = {ssl.TLSVersion.TLSv1: "TLSv1", ssl.TLSVersion.TLSv1_1: "TLSv1.1"}[version]
    legacy = tls_server(pki, **{"ssl.enabled.protocols": f"{name},TLSv1.2",
                                "ssl.cipher.suites": "DEFAULT@SECLEVEL=0"})
    servers.append(legacy)
    try:
        s = tls_handshake(legacy_client_context(pki, version), legacy.bound_port("SSL"))
    except ssl.SSLError as exc:
        pytest.skip(f"this OpenSSL cannot negotiate {name} at all: {exc}")
    assert s.version() == name
    s.close()
    assert metadata_ok(pki, default.bound_port("SSL"))


def test_client_refuses_legacy_tls_server_by_default(pki):
    """A server that speaks only TLS 1.1 is refused by a default kchannel
    client; a plain TLS 1.1 client completes a handshake with it."""
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.minimum_version = sctx.maximum_version = ssl.TLSVersion.TLSv1_1
    sctx.set_ciphers("DEFAULT@SECLEVEL=0")
    sctx.load_cert_chain(pki.server.chain_path, pki.server.key_path)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    port = lsock.getsockname()[1]
    results = []

    def serve(n):
        for _ in range(n):
            conn, _ = lsock.accept()
            conn.settimeout(10)
            try:
                t = sctx.wrap_socket(conn, server_side=True)
                results.append(t.version())
                t.close()
            except (ssl.SSLError, OSError) as exc:
                results.append(exc)
                conn.close()

    t = threading.Thread(target=serve, args=(2,), daemon=True)
    t.start()
    try:
        try:
            tls_handshake(legacy_client_context(pki, ssl.TLSVersion.TLSv1_1), port).close()
        except ssl.SSLError as exc:
            pytest.skip(f"this OpenSSL cannot negotiate TLSv1.1 at all: {exc}")
        cfg = pki.client_configs()
        cfg["security.protocol"] = "SSL"
        with pytest.raises(SslAuthenticationError):
            KafkaClient(cfg).connect("localhost", port, timeout_ms=10000)
        t.join(10)
        assert results[0] == "TLSv1.1"
        assert isinstance(results[1], ssl.SSLError)
    finally:
        lsock.close()


def test_factories_default_to_tls12_with_verification_no_compression_no_renegotiation(pki):
    client = SslFactory("client", pki.client_configs()).context
    server = SslFactory("server", pki.server_configs()).context
    for ctx in (client, server):
        assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
        assert ctx.options & ssl.OP_NO_COMPRESSION
        assert ctx.options & ssl.OP_NO_RENEGOTIATION
    assert client.check_hostname is True and client.verify_mode == ssl.CERT_REQUIRED
    # No ssl.endpoint.identification.algorithm at all: Kafka's default https.
    cfg = pki.client_configs()
    del cfg["ssl.endpoint.identification.algorithm"]
    assert SslFactory("client", cfg).context.check_hostname is True


def test_hostname_verification_on_without_configuring_it(pki, servers):
    s = Server(listeners=[{"name": "SSL", "host": "127.0.0.1", "port": 0,
                           "security_protocol": "SSL",
                           "configs": pki.server_configs(identity=pki.wronghost_server)}])
    s.start()
    servers.append(s)
    cfg = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
           "ssl.truststore.location": pki.ca.cert_path}
    with pytest.raises(SslAuthenticationError) as err:
        KafkaClient(cfg).connect("localhost", s.bound_port("SSL"))
    assert "hostname" in str(err.value).lower() or "host name" in str(err.value).lower()


def test_no_compression_negotiated(pki, servers):
    s = tls_server(pki)
    servers.append(s)
    ctx = ssl.create_default_context(cafile=pki.ca.cert_path)
    ctx.options &= ~ssl.OP_NO_COMPRESSION       # the client offers it
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx.minimum_version = ctx.maximum_version = version
        conn = tls_handshake(ctx, s.bound_port("SSL"))
        assert conn.compression() is None
        conn.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_server_refuses_client_initiated_renegotiation(pki, servers):
    s = tls_server(pki)
    servers.append(s)
    # s_client's "R" command renegotiates a TLS 1.2 session.  Its input is
    # kept open (an EOF would end it) and its output read until the
    # server's answer shows up (or s_client ends).
    p = subprocess.Popen(["openssl", "s_client", "-connect",
                          f"127.0.0.1:{s.bound_port('SSL')}", "-tls1_2", "-CAfile",
                          pki.ca.cert_path, "-servername", "localhost"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    lines = []
    done = threading.Event()

    def read():
        for line in p.stdout:
            lines.append(line.decode("utf-8", "replace"))
            if "no renegotiation" in lines[-1]:
                done.set()
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        p.stdin.write(b"R\n")
        p.stdin.flush()
        done.wait(60)
    finally:
        p.kill()
        p.wait()
        reader.join(10)
    out = "".join(lines)
    assert "Protocol  : TLSv1.2" in out, out
    assert "RENEGOTIATING" in out, out
    assert "no renegotiation" in out, out
    # The listener still serves everyone else.
    assert metadata_ok(pki, s.bound_port("SSL"))


def test_client_auth_required_is_enforced(pki, servers):
    s = tls_server(pki, **{"ssl.client.auth": "required"})
    servers.append(s)
    port = s.bound_port("SSL")
    cfg = pki.client_configs()
    cfg["security.protocol"] = "SSL"
    with pytest.raises(KChannelError):
        c = KafkaClient(cfg)
        try:
            c.connect("localhost", port)
            c.request(ApiKey.METADATA, {"topics": []})
        finally:
            c.close()
    # A raw TLS 1.2 client without a certificate fails in the handshake.
    ctx = ssl.create_default_context(cafile=pki.ca.cert_path)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises((ssl.SSLError, ConnectionError)):
        conn = tls_handshake(ctx, port)
        conn.recv(1)
    # With its certificate the client is served.
    cfg = pki.client_configs(keystore="pem")
    cfg["security.protocol"] = "SSL"
    with KafkaClient(cfg) as c:
        c.connect("localhost", port)
        assert c.request(ApiKey.METADATA, {"topics": []})["brokers"]
