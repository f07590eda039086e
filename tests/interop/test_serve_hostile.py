"""Hostile input against ``kchannel serve`` while real clients are served.

One server subprocess (PLAINTEXT, SSL and SASL_PLAINTEXT listeners, DEBUG
logging so that every closed connection leaves its reason in the log).  A
kchannel client connection and a librdkafka client are opened first; then
each case sends bad bytes on a fresh connection: garbage, negative and huge
sizes, a zero-size frame, truncated frames, unknown API keys, a request
header cut short, an abrupt close in the middle of a TLS handshake, TLS to a
PLAINTEXT port and Kafka requests to an SSL port, unauthenticated requests on
a SASL listener.  Each must close only that connection, with one clear reason
in the server log naming the peer, while both real clients keep being
served.
"""
import gc
import logging
import re
import socket
import ssl
import struct
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader, encode_request
from tests.fixtures.peers import free_ports, start_kchannel_server
from tests.fixtures.rdkafka import rdkafka_brokers

pytestmark = [pytest.mark.slow, pytest.mark.interop]

MAX_REQUEST = 1048576       # socket.request.max.bytes for this server


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    p1, p2, p3 = free_ports(3)
    props = {
        "node.id": "3",
        "listeners": (f"PLAINTEXT://127.0.0.1:{p1},SSL://127.0.0.1:{p2},"
                      f"SASL_PLAINTEXT://127.0.0.1:{p3}"),
        "socket.request.max.bytes": str(MAX_REQUEST),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "connection.failed.authentication.delay.ms": "0",
    }
    for k, v in pki.server_configs().items():
        props[f"listener.name.ssl.{k}"] = v
    srv = start_kchannel_server(tmp_path_factory.mktemp("hostile"), props, log_level="DEBUG")
    yield srv
    srv.stop_and_check()


@pytest.fixture(scope="module")
def steady(server, pki):
    """A kchannel client connection over SSL opened before any hostile input
    and kept for the whole module."""
    conf = {"bootstrap.servers": server.bootstrap("SSL", "localhost"),
            "security.protocol": "SSL", **pki.client_configs()}
    client = KafkaClient(conf).connect()
    yield client
    client.close()


class _Rdkafka:
    """Holds the librdkafka handle so teardown can drop the last reference
    (librdkafka keeps reconnecting until the handle is destroyed)."""

    def __init__(self, admin):
        self.admin = admin

    def list_topics(self, **kw):
        return self.admin.list_topics(**kw)


@pytest.fixture(scope="module")
def rdkafka(server):
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    holder = _Rdkafka(admin_mod.AdminClient({"bootstrap.servers": server.bootstrap("PLAINTEXT")}))
    assert holder.list_topics(timeout=10).brokers
    yield holder
    del holder.admin
    gc.collect()


def served(server, steady, rdkafka):
    assert server.alive()
    md = steady.request(ApiKey.METADATA, {"topics": []})
    assert md["brokers"][0]["node_id"] == 3
    assert list(rdkafka.list_topics(timeout=10).brokers) == [3]


def connect_raw(server, listener="PLAINTEXT"):
    s = socket.create_connection(("127.0.0.1", server.port(listener)), timeout=10)
    return s, s.getsockname()[1]


def read_until_closed(sock, timeout=10):
    """Read until the server closes; returns what it sent."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
    except ConnectionResetError:
        return data
    finally:
        sock.close()


def reason_for(server, port, pattern, mark):
    """The server's log lines about the connection from ``port``: exactly one
    says why it was closed and it matches ``pattern``; nothing about it is
    logged above INFO except an authentication failure."""
    peer = re.compile(rf"127\.0\.0\.1:{port}\b")
    rx = re.compile(pattern, re.IGNORECASE)
    m = server.wait_for_log(rf"(?i)127\.0\.0\.1:{port}\b.*(?:{pattern})", timeout=10,
                            start=mark)
    assert m is not None, "".join(server.log_lines()[mark:])[-4000:]
    time.sleep(0.05)   # let any further line about this connection arrive
    lines = [l for l in server.log_lines()[mark:] if peer.search(l)]
    reasons = [l for l in lines if rx.search(l)]
    # At the server's usual level (INFO) one line gives the reason; a peer
    # that merely went away is only worth a DEBUG line, as in Kafka.
    shown = [l for l in reasons if not re.search(r"\] DEBUG ", l)]
    assert len(shown) <= 1, lines
    assert reasons, lines
    loud = [l for l in lines if re.search(r"\] (WARNING|ERROR|CRITICAL) ", l)]
    assert len(loud) <= 1, lines
    assert "Traceback" not in "".join(server.log_lines()[mark:])
    return (shown or reasons)[0]


def request_bytes(api_key, version, body, corr=1, client_id="hostile"):
    payload = encode_request(RequestHeader(api_key, version, corr, client_id), body)
    return struct.pack(">i", len(payload)) + payload


def client_hello():
    """The first flight of a real TLS client."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


CASES = {
    # name: (listener, bytes to send, close right after, reason regex)
    "http-request": ("PLAINTEXT", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", False,
                     r"Invalid receive \(size = 1195725856 larger than 1048576\)"),
    "negative-size": ("PLAINTEXT", b"\xff\xff\xff\xfe" + b"x" * 10, False,
                      r"Invalid receive \(size = -2\)"),
    "huge-size": ("PLAINTEXT", b"\x7f\xff\xff\xff", False,
                  r"Invalid receive \(size = 2147483647 larger than 1048576\)"),
    "just-over-max": ("PLAINTEXT", struct.pack(">i", MAX_REQUEST + 1), False,
                      rf"Invalid receive \(size = {MAX_REQUEST + 1} larger than 1048576\)"),
    "zero-size": ("PLAINTEXT", b"\x00\x00\x00\x00", False, r"invalid request|header"),
    "short-header": ("PLAINTEXT", b"\x00\x00\x00\x03\x00\x12\x00", False,
                     r"invalid request|header"),
    # v1 header: api key, version, correlation id, null client id
    "unknown-api-key": ("PLAINTEXT", struct.pack(">ihhih", 10, 999, 0, 1, -1), False,
                        r"api key 999|unknown api"),
    "unsupported-api": ("PLAINTEXT", struct.pack(">ihhih", 10, 0, 3, 1, -1) , False,
                        r"api key 0\b|no handler"),
    "truncated-body": ("PLAINTEXT", request_bytes(ApiKey.METADATA, 1, {"topics": [
        {"name": "t" * 50}]})[:-20] + b"", True, r"closed by peer|disconnected"),
    "truncated-then-close": ("PLAINTEXT", b"\x00\x00\x01\x00" + b"\x00" * 10, True,
                             r"closed by peer|disconnected"),
    "tls-to-plaintext": ("PLAINTEXT", None, False,
                         r"Invalid receive \(size = \d+ larger than 1048576\)"),
    "kafka-to-ssl": ("SSL", request_bytes(ApiKey.API_VERSIONS, 0, {}), False,
                     r"ssl handshake failed|wrong version|not a TLS"),
    "close-mid-tls-handshake": ("SSL", None, True, r"TLS handshake|closed by peer"),
    "garbage-to-ssl": ("SSL", bytes(range(256)) * 4, False, r"ssl handshake failed"),
    "metadata-before-sasl": ("SASL_PLAINTEXT",
                             request_bytes(ApiKey.METADATA, 1, {"topics": []}), False,
                             r"unexpected kafka request|illegal sasl state"),
    # Not a Kafka request header: Kafka takes it for a 0.9 GSSAPI token.
    "garbage-to-sasl": ("SASL_PLAINTEXT", b"\x00\x00\x00\x08" + b"\xfe" * 8, False,
                        r"GSSAPI is not supported by server"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_input_closes_only_that_connection(server, steady, rdkafka, case):
    listener, data, close_after, reason = CASES[case]
    if case == "tls-to-plaintext":
        data = client_hello()
    elif case == "close-mid-tls-handshake":
        data = client_hello()[:40]
    mark = server.mark()
    sock, port = connect_raw(server, listener)
    sock.sendall(data)
    if close_after:
        sock.close()
    else:
        read_until_closed(sock)
    line = reason_for(server, port, reason, mark)
    assert "channelId=" in line or f"127.0.0.1:{port}" in line
    served(server, steady, rdkafka)


def test_slow_loris_does_not_block_others(server, steady, rdkafka):
    """A peer that sends one byte of a size prefix and stalls holds no one
    up."""
    socks = []
    try:
        for _ in range(20):
            s, _ = connect_raw(server)
            s.sendall(b"\x00")
            socks.append(s)
        served(server, steady, rdkafka)
    finally:
        for s in socks:
            s.close()
    served(server, steady, rdkafka)


def test_many_bad_connections_at_once(server, steady, rdkafka):
    socks = []
    for i in range(50):
        s, _ = connect_raw(server)
        s.sendall(b"\xff\xff\xff\xff" if i % 2 else b"GET / HTTP/1.0\r\n\r\n")
        socks.append(s)
    for s in socks:
        read_until_closed(s)
    served(server, steady, rdkafka)


# ------------------------------------------- security protocol mix-ups
def test_kchannel_sasl_client_to_plaintext_listener(server, steady, rdkafka):
    """As a Kafka broker: SaslHandshake on a PLAINTEXT listener is answered
    ILLEGAL_SASL_STATE with Kafka's message."""
    from kchannel.errors import IllegalSaslStateError
    client = KafkaClient({
        "bootstrap.servers": server.bootstrap("PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                            'required username="alice" password="alice-secret";',
        "request.timeout.ms": 5000})
    try:
        with pytest.raises(IllegalSaslStateError,
                           match=r"Unexpected handshake request with client mechanism PLAIN, "
                                 r"enabled mechanisms are \[\]"):
            client.connect()
    finally:
        client.close()
    served(server, steady, rdkafka)


def test_kafka_python_sasl_client_to_plaintext_listener(server, steady, rdkafka, caplog):
    """The PLAINTEXT listener lists SaslHandshake (as Kafka), so kafka-python
    sends it and gets Kafka's ILLEGAL_SASL_STATE answer."""
    kafka = pytest.importorskip("kafka")
    caplog.set_level(logging.WARNING, logger="kafka")
    started = time.monotonic()
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaConsumer(bootstrap_servers=server.bootstrap("PLAINTEXT"),
                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username="alice", sasl_plain_password="alice-secret",
                            request_timeout_ms=3000, bootstrap_timeout_ms=1500)
    assert time.monotonic() - started < 10
    assert any("IllegalSaslStateError" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    served(server, steady, rdkafka)


def test_librdkafka_plaintext_client_to_sasl_listener(server, steady, rdkafka):
    mark = server.mark()
    result, _ = rdkafka_brokers({"bootstrap.servers": server.bootstrap("SASL_PLAINTEXT")},
                                timeout=1.5)
    assert isinstance(result, Exception)
    assert server.wait_for_log(r"Failed authentication with .*Unexpected Kafka request of "
                               r"type (METADATA|API_VERSIONS) during SASL", start=mark)
    served(server, steady, rdkafka)
