"""Three named listeners (KIP-103) on one ``kchannel serve``, with real clients.

The broker, configured only through server.properties (per-listener keys
``listener.name.<l>.*`` and per-listener JAAS ``listener.name.<l>.<mech>.
sasl.jaas.config``) and a SCRAM user created offline with ``kchannel configs
--server-config``:

* INTERNAL     SASL_PLAINTEXT, PLAIN          bound/advertised 127.0.0.1:<p1>
* EXTERNAL     SASL_SSL, SCRAM-SHA-512        bound/advertised 127.0.0.2:<p2>,
               its own certificate CN=external (SAN IP 127.0.0.2)
* REPLICATION  SSL, client certificate required, certificate CN=replication
               (SAN IP 127.0.0.3), bound/advertised 127.0.0.3:<p3>; the
               inter-broker listener

librdkafka (confluent-kafka), kafka-python 3.x and aiokafka connect to each
listener with matching settings and must see the broker at the advertised
address of *that* listener (Metadata and DescribeCluster), and, on the TLS
listeners, that listener's certificate; each client then keeps working
against the advertised address.  A client using another listener's
mechanism gets UNSUPPORTED_SASL_MECHANISM naming the listener's mechanism;
a client without a certificate is refused by REPLICATION.
"""
import asyncio
import datetime
import ipaddress
import os
import socket
import ssl
import threading
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.server.cluster import connect_inter_broker
from kchannel.config import ServerConfig
from kchannel.errors import SslAuthenticationError, UnsupportedSaslMechanismError
from kchannel.protocol.api_keys import ApiKey
from tests.fixtures.peers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.interop]

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
HOSTS = {"INTERNAL": "127.0.0.1", "EXTERNAL": "127.0.0.2", "REPLICATION": "127.0.0.3"}
TIMEOUT_S = 10


def _loopback_alias_usable():
    # 127.0.0.2/3 are loopback on Linux without configuration; elsewhere not.
    try:
        with socket.socket() as s:
            s.bind((HOSTS["EXTERNAL"], 0))
        return True
    except OSError:
        return False


def make_listener_cert(pki, directory, label, common_name, ip):
    """A server certificate signed by the test CA for one listener; returns
    (PEM keystore path: key + chain, subject DN)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(pki.ca.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(ip)), x509.DNSName(common_name)]),
                critical=False)
            .sign(pki.ca.key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    path = os.path.join(directory, f"{label}.keystore.pem")
    with open(path, "w", encoding="utf-8") as f:
        f.write(key_pem + cert.public_bytes(pem).decode() + pki.ca.cert_pem)
    return path, f"CN={common_name}"


def three_listener_props(ports, external_keystore, replication_keystore, ca_path):
    hostports = {name: f"{HOSTS[name]}:{ports[name]}" for name in HOSTS}
    return {
        "node.id": "1",
        "listeners": ",".join(f"{n}://{hp}" for n, hp in hostports.items()),
        "advertised.listeners": ",".join(f"{n}://{hp}" for n, hp in hostports.items()),
        "listener.security.protocol.map": ("INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_SSL,"
                                           "REPLICATION:SSL"),
        "inter.broker.listener.name": "REPLICATION",
        # INTERNAL: PLAIN users from its JAAS options
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": (
            f'{PLAIN_MODULE} required username="admin" password="admin-secret" '
            'user_admin="admin-secret" user_alice="alice-plain";'),
        # EXTERNAL: SCRAM-SHA-512 users from the credential store, own keystore
        "listener.name.external.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.external.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "listener.name.external.ssl.keystore.type": "PEM",
        "listener.name.external.ssl.keystore.location": external_keystore,
        # REPLICATION: mutual TLS with its own keystore and the CA
        "listener.name.replication.ssl.keystore.type": "PEM",
        "listener.name.replication.ssl.keystore.location": replication_keystore,
        "listener.name.replication.ssl.truststore.type": "PEM",
        "listener.name.replication.ssl.truststore.location": ca_path,
        "listener.name.replication.ssl.client.auth": "required",
    }


class Broker:
    def __init__(self, serve, ports, external_dn, replication_dn, props, pki, certs):
        self.serve = serve
        self.ports = ports
        self.external_dn = external_dn
        self.replication_dn = replication_dn
        self.props = props
        self.pki = pki
        self.certs = certs

    def address(self, listener):
        return HOSTS[listener], self.ports[listener]

    def bootstrap(self, listener):
        return "%s:%d" % self.address(listener)


@pytest.fixture(scope="module")
def broker(kchannel_server_module, pki, tmp_path_factory):
    if not _loopback_alias_usable():
        pytest.skip("127.0.0.2/127.0.0.3 are not usable loopback addresses here")
    directory = tmp_path_factory.mktemp("three-listeners")
    ext_path, ext_dn = make_listener_cert(pki, str(directory), "external", "external",
                                          HOSTS["EXTERNAL"])
    rep_path, rep_dn = make_listener_cert(pki, str(directory), "replication", "replication",
                                          HOSTS["REPLICATION"])
    # A client identity for REPLICATION peers (another broker, a tool).
    peer_path, peer_dn = make_listener_cert(pki, str(directory), "peer", "peer-broker",
                                            "127.0.0.1")
    ports = {name: free_port(host) for name, host in HOSTS.items()}
    props = three_listener_props(ports, ext_path, rep_path, pki.ca.cert_path)
    serve = kchannel_server_module(props, scram_users={
        "alice": {"SCRAM-SHA-512": "alice-scram"}}, directory=str(directory / "broker"))
    assert {n: (l.host, l.port) for n, l in serve.listeners.items()} == \
        {n: (HOSTS[n], ports[n]) for n in HOSTS}
    return Broker(serve, ports, ext_dn, rep_dn, props, pki,
                  {"peer": (peer_path, peer_dn), "replication": (rep_path, rep_dn)})


# ----------------------------------------------------------------- helpers
_SHORT = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
          "countryName": "C"}


def subject_of(cert):
    """``getpeercert()`` subject as ``CN=...`` (the leaf's own RDN order)."""
    return ",".join(f"{_SHORT.get(k, k)}={v}" for rdn in cert["subject"] for k, v in rdn)


class RecordingContext(ssl.SSLContext):
    """An SSLContext that remembers every TLS connection it made, so the
    test can read the certificate the broker presented."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls, *args, **kwargs)
        self.made = []
        return self

    def wrap_socket(self, *args, **kwargs):
        s = super().wrap_socket(*args, **kwargs)
        self.made.append(s)
        return s

    def wrap_bio(self, *args, **kwargs):
        o = super().wrap_bio(*args, **kwargs)
        self.made.append(o)
        return o

    def peer_subjects(self):
        out = []
        for s in self.made:
            try:
                cert = s.getpeercert()
            except (ValueError, OSError, AttributeError):
                continue       # not connected, or already closed
            if cert:
                out.append(subject_of(cert))
        return out


def recording_context(pki, certfile=None):
    ctx = RecordingContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki.ca.cert_path)
    if certfile is not None:
        ctx.load_cert_chain(certfile)
    return ctx


def raw_peer_subject(address, pki, certfile=None):
    """Subject of the certificate a TLS listener presents (plain ssl module,
    host name checked against the address)."""
    ctx = ssl.create_default_context(cafile=pki.ca.cert_path)
    if certfile is not None:
        ctx.load_cert_chain(certfile)
    with socket.create_connection(address, timeout=TIMEOUT_S) as sock:
        with ctx.wrap_socket(sock, server_hostname=address[0]) as tls:
            cert = tls.getpeercert()
    return subject_of(cert)


def raw_sasl_handshake(broker, listener, mechanism):
    """(error code, mechanisms) of a SaslHandshake v1 sent over a plain
    socket (TLS first on EXTERNAL)."""
    import struct
    from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
    sock = socket.create_connection(broker.address(listener), timeout=TIMEOUT_S)
    try:
        if listener == "EXTERNAL":
            ctx = ssl.create_default_context(cafile=broker.pki.ca.cert_path)
            sock = ctx.wrap_socket(sock, server_hostname=HOSTS[listener])
        payload = encode_request(RequestHeader(ApiKey.SASL_HANDSHAKE, 1, 7, "raw"),
                                 {"mechanism": mechanism})
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        corr, body = decode_response(data[4:], ApiKey.SASL_HANDSHAKE, 1)
        assert corr == 7
        return body["error_code"], body["mechanisms"]
    finally:
        sock.close()


def listener_rdkafka_conf(broker, listener, **extra):
    conf = {"bootstrap.servers": broker.bootstrap(listener), "socket.timeout.ms": 5000,
            "socket.connection.setup.timeout.ms": 5000}
    if listener == "INTERNAL":
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.username": "alice", "sasl.password": "alice-plain"})
    elif listener == "EXTERNAL":
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.username": "alice", "sasl.password": "alice-scram",
                     "ssl.ca.location": broker.pki.ca.cert_path})
    else:
        peer_path = broker.certs["peer"][0]
        conf.update({"security.protocol": "SSL", "ssl.ca.location": broker.pki.ca.cert_path,
                     "ssl.certificate.location": peer_path, "ssl.key.location": peer_path})
    conf.update(extra)
    return conf


def kafka_python_conf(broker, listener, ctx, **extra):
    conf = {"bootstrap_servers": broker.bootstrap(listener), "request_timeout_ms": 5000}
    if listener == "INTERNAL":
        conf.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                    sasl_plain_username="alice", sasl_plain_password="alice-plain")
    elif listener == "EXTERNAL":
        conf.update(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                    sasl_plain_username="alice", sasl_plain_password="alice-scram",
                    ssl_context=ctx)
    else:
        conf.update(security_protocol="SSL", ssl_context=ctx)
    conf.update(extra)
    return conf


def kchannel_conf(broker, listener, **extra):
    conf = {"request.timeout.ms": 5000}
    if listener == "INTERNAL":
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" '
                                         'password="alice-plain";'})
    elif listener == "EXTERNAL":
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config": f'{SCRAM_MODULE} required username="alice" '
                                         'password="alice-scram";',
                     "ssl.truststore.type": "PEM",
                     "ssl.truststore.location": broker.pki.ca.cert_path})
    else:
        peer_path = broker.certs["peer"][0]
        conf.update({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                     "ssl.truststore.location": broker.pki.ca.cert_path,
                     "ssl.keystore.type": "PEM", "ssl.keystore.location": peer_path})
    conf.update(extra)
    return conf


LISTENERS = ["INTERNAL", "EXTERNAL", "REPLICATION"]
CERT_SUBJECTS = {"EXTERNAL": "CN=external", "REPLICATION": "CN=replication"}


# --------------------------------------------------------- working clients
@pytest.mark.parametrize("listener", LISTENERS)
def test_librdkafka_sees_the_listener_address(broker, listener):
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    admin = admin_mod.AdminClient(listener_rdkafka_conf(broker, listener))
    md = admin.list_topics(timeout=TIMEOUT_S)
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == \
        {1: broker.address(listener)}
    assert md.cluster_id == broker.serve.cluster_id
    # DescribeCluster, sent after the client re-connected to the advertised
    # address the bootstrap Metadata gave it.
    result = admin.describe_cluster(request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    assert [(n.id, n.host, n.port) for n in result.nodes] == [(1, *broker.address(listener))]
    assert result.controller.id == 1
    assert result.cluster_id == broker.serve.cluster_id
    if listener in CERT_SUBJECTS:
        # librdkafka verified the host name (IP SAN) of that listener's own
        # certificate; the raw TLS view confirms which certificate it is.
        assert raw_peer_subject(broker.address(listener), broker.pki,
                                broker.certs["peer"][0]) == CERT_SUBJECTS[listener]


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafka_python_sees_the_listener_address_and_certificate(broker, listener):
    kafka = pytest.importorskip("kafka")
    ctx = recording_context(broker.pki, broker.certs["peer"][0]
                            if listener == "REPLICATION" else None)
    admin = kafka.KafkaAdminClient(**kafka_python_conf(broker, listener, ctx))
    try:
        cluster = admin.describe_cluster()
        assert [(b.get("broker_id", b.get("node_id")), b["host"], b["port"])
                for b in cluster["brokers"]] == [(1, *broker.address(listener))]
        assert cluster["cluster_id"] == broker.serve.cluster_id
        assert cluster["controller_id"] == 1
        # The client's own cluster view (from the bootstrap Metadata).
        brokers = {(getattr(b, "node_id", getattr(b, "nodeId", None)), b.host, b.port)
                   for b in admin._manager.cluster.brokers()}
        assert brokers == {(1, *broker.address(listener))}
        # Read while the connections are open (a closed SSLSocket forgets).
        subjects = ctx.peer_subjects()
    finally:
        admin.close()
    if listener in CERT_SUBJECTS:
        assert subjects and set(subjects) == {CERT_SUBJECTS[listener]}


@pytest.mark.parametrize("listener", LISTENERS)
def test_aiokafka_sees_the_listener_address_and_certificate(broker, listener):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.client import AIOKafkaClient
    ctx = recording_context(broker.pki, broker.certs["peer"][0]
                            if listener == "REPLICATION" else None)
    conf = kafka_python_conf(broker, listener, ctx)
    assert aiokafka

    async def main():
        client = AIOKafkaClient(**conf)
        await client.bootstrap()
        try:
            md = await client.fetch_all_metadata()
            return ({(b.nodeId, b.host, b.port) for b in client.cluster.brokers()},
                    {(b.nodeId, b.host, b.port) for b in md.brokers()})
        finally:
            await client.close()

    bootstrapped, fetched = asyncio.run(main())
    assert bootstrapped == fetched == {(1, *broker.address(listener))}
    if listener in CERT_SUBJECTS:
        subjects = ctx.peer_subjects()
        assert subjects and set(subjects) == {CERT_SUBJECTS[listener]}


@pytest.mark.parametrize("listener", LISTENERS)
def test_kchannel_client_sees_the_listener_address_and_principal(broker, listener):
    with KafkaClient(kchannel_conf(broker, listener)) as c:
        c.connect(*broker.address(listener))
        metadata = c.request(ApiKey.METADATA, {"topics": []})
        described = c.request(ApiKey.DESCRIBE_CLUSTER, {})
        if listener in CERT_SUBJECTS:
            transport = c.selector.channel(c.node_id).transport
            assert transport.peer_subject_dn() == CERT_SUBJECTS[listener]
    assert [(b["node_id"], b["host"], b["port"]) for b in metadata["brokers"]] == \
        [(1, *broker.address(listener))]
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == \
        [(1, *broker.address(listener))]


def test_inter_broker_settings_reach_the_replication_listener(broker):
    # This broker's own inter-broker client settings (REPLICATION: its
    # keystore, the CA) authenticate it to a REPLICATION listener as the
    # certificate's DN.
    config = ServerConfig(broker.props)
    with connect_inter_broker(config, *broker.address("REPLICATION")) as c:
        body = c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert c.selector.channel(c.node_id).transport.peer_subject_dn() == "CN=replication"
    assert [(b["broker_id"], b["host"], b["port"]) for b in body["brokers"]] == \
        [(1, *broker.address("REPLICATION"))]


# ------------------------------------------------------------------ refusals
def _rdkafka_errors(conf):
    """Error callback messages of a librdkafka admin client whose
    ``list_topics`` is expected to fail."""
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    errors = []
    seen = threading.Event()

    def on_error(err):
        errors.append(str(err))
        seen.set()

    admin = admin_mod.AdminClient({**conf, "error_cb": on_error})
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + TIMEOUT_S
    while not seen.is_set() and time.monotonic() < deadline:
        admin.poll(0.2)
    return errors


WRONG_MECHANISM = [
    # (listener, client mechanism, what the listener offers)
    ("EXTERNAL", "PLAIN", "SCRAM-SHA-512"),
    ("INTERNAL", "SCRAM-SHA-512", "PLAIN"),
]


@pytest.mark.parametrize("listener, mechanism, offered", WRONG_MECHANISM)
def test_librdkafka_wrong_mechanism(broker, listener, mechanism, offered):
    errors = _rdkafka_errors(listener_rdkafka_conf(broker, listener,
                                                   **{"sasl.mechanism": mechanism}))
    assert any("Unsupported SASL mechanism" in e and offered in e for e in errors), errors


@pytest.mark.parametrize("listener, mechanism, offered", WRONG_MECHANISM)
def test_kafka_python_wrong_mechanism(broker, listener, mechanism, offered, caplog):
    # kafka-python 3 reports the handshake's error code when it reads the
    # answer; it drops data that arrives in the same read as the broker's
    # close (Kafka, too, closes right after the delayed failure response),
    # so sometimes it only sees the disconnect.  Its bootstrap fails either
    # way; the broker logs why, and the raw answer lists the mechanism.
    kafka = pytest.importorskip("kafka")
    ctx = recording_context(broker.pki)
    conf = kafka_python_conf(broker, listener, ctx, sasl_mechanism=mechanism,
                             bootstrap_timeout_ms=2000)
    mark = broker.serve.mark()
    with caplog.at_level("ERROR", logger="kafka"):
        with pytest.raises(kafka.errors.KafkaError):
            kafka.KafkaAdminClient(**conf).close()
    text = " | ".join(r.getMessage() for r in caplog.records if r.name.startswith("kafka"))
    assert ("SaslHandshake failed: UnsupportedSaslMechanismError" in text
            or "socket disconnected" in text), text
    assert broker.serve.wait_for_log(
        rf"Failed authentication with [\d.]+:\d+ \(channelId={HOSTS[listener]}:"
        rf"{broker.ports[listener]}-.*\(Unsupported SASL mechanism {mechanism}\)",
        timeout=5, start=mark)
    assert raw_sasl_handshake(broker, listener, mechanism) == (33, [offered])


@pytest.mark.parametrize("listener, mechanism, offered", WRONG_MECHANISM)
def test_aiokafka_wrong_mechanism(broker, listener, mechanism, offered, caplog):
    pytest.importorskip("aiokafka")
    from aiokafka.client import AIOKafkaClient
    from aiokafka.errors import KafkaConnectionError
    ctx = recording_context(broker.pki)
    conf = kafka_python_conf(broker, listener, ctx, sasl_mechanism=mechanism)

    async def main():
        client = AIOKafkaClient(**conf)
        try:
            await client.bootstrap()
        finally:
            await client.close()

    # aiokafka logs why each bootstrap server failed, then gives up.
    with caplog.at_level("ERROR", logger="aiokafka"):
        with pytest.raises(KafkaConnectionError):
            asyncio.run(main())
    text = " | ".join(r.getMessage() for r in caplog.records if r.name.startswith("aiokafka"))
    # aiokafka, too, reports the error code without the broker's list.
    assert "[Error 33] UnsupportedSaslMechanismError" in text, text
    assert raw_sasl_handshake(broker, listener, mechanism) == (33, [offered])


@pytest.mark.parametrize("listener, mechanism, offered", WRONG_MECHANISM)
def test_kchannel_client_wrong_mechanism(broker, listener, mechanism, offered):
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    conf = kchannel_conf(broker, listener, **{
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="alice" password="x";'})
    with pytest.raises(UnsupportedSaslMechanismError) as exc:
        KafkaClient(conf).connect(*broker.address(listener))
    assert offered in str(exc.value) and mechanism in str(exc.value)


def test_replication_refuses_clients_without_certificate(broker):
    address = broker.address("REPLICATION")
    # kchannel client
    conf = kchannel_conf(broker, "REPLICATION")
    del conf["ssl.keystore.location"], conf["ssl.keystore.type"]
    with pytest.raises(SslAuthenticationError):
        KafkaClient(conf).connect(*address)
    # librdkafka
    rd = listener_rdkafka_conf(broker, "REPLICATION")
    del rd["ssl.certificate.location"], rd["ssl.key.location"]
    errors = _rdkafka_errors(rd)
    assert any("SSL" in e and ("certificate required" in e or "handshake" in e.lower())
               for e in errors), errors
    # plain ssl: the handshake (or the first read, with TLS 1.3) fails
    ctx = ssl.create_default_context(cafile=broker.pki.ca.cert_path)
    with socket.create_connection(address, timeout=TIMEOUT_S) as sock:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(sock, server_hostname=address[0]) as tls:
                tls.sendall(b"\x00\x00\x00\x01\x00")
                tls.recv(1)
    # ... and a certificate from an untrusted CA is refused as well.
    conf["ssl.keystore.type"] = "PEM"
    conf["ssl.keystore.location"] = broker.pki.untrusted_client.keystore_pem_path
    with pytest.raises(SslAuthenticationError):
        KafkaClient(conf).connect(*address)


def test_kafka_python_without_certificate_is_refused(broker):
    kafka = pytest.importorskip("kafka")
    ctx = recording_context(broker.pki)
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaAdminClient(**kafka_python_conf(broker, "REPLICATION", ctx,
                                                   bootstrap_timeout_ms=2000)).close()


def test_tls_listeners_present_their_own_certificates(broker):
    # The same CA, three distinct endpoints: EXTERNAL and REPLICATION each
    # serve the keystore configured with their listener prefix.
    peer = broker.certs["peer"][0]
    assert raw_peer_subject(broker.address("EXTERNAL"), broker.pki) == "CN=external"
    assert raw_peer_subject(broker.address("REPLICATION"), broker.pki, peer) == "CN=replication"
    # The EXTERNAL certificate is not valid for the REPLICATION address and
    # vice versa: a client checking host names only accepts the right one.
    ctx = ssl.create_default_context(cafile=broker.pki.ca.cert_path)
    with socket.create_connection(broker.address("EXTERNAL"), timeout=TIMEOUT_S) as sock:
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(sock, server_hostname=HOSTS["REPLICATION"])


def test_server_log_names_each_listener(broker):
    log = broker.serve.log()
    for name, proto in (("INTERNAL", "SASL_PLAINTEXT"), ("EXTERNAL", "SASL_SSL"),
                        ("REPLICATION", "SSL")):
        assert (f"[SocketServer listener={name}, securityProtocol={proto}] Awaiting socket "
                f"connections on {HOSTS[name]}:{broker.ports[name]}.") in log


def test_aiokafka_without_certificate_is_refused(broker, caplog):
    pytest.importorskip("aiokafka")
    from aiokafka.client import AIOKafkaClient
    from aiokafka.errors import KafkaConnectionError
    conf = kafka_python_conf(broker, "REPLICATION", recording_context(broker.pki))

    async def main():
        client = AIOKafkaClient(**conf)
        try:
            await client.bootstrap()
        finally:
            await client.close()

    with caplog.at_level("ERROR", logger="aiokafka"):
        with pytest.raises(KafkaConnectionError):
            asyncio.run(main())
    text = " | ".join(r.getMessage() for r in caplog.records if r.name.startswith("aiokafka"))
    assert f'Unable connect to "{HOSTS["REPLICATION"]}:{broker.ports["REPLICATION"]}"' in text, text
