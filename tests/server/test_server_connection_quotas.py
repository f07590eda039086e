"""Kafka's connection quotas for untrusted clients, and kchannel's
connection setup deadline.

* ``max.connections.per.ip`` / ``max.connections.per.ip.overrides``: a
  connection from an address that already has its maximum is closed at once
  (Kafka's "Rejected connection from ..., address already has the configured
  maximum of N connections."); it is accepted again once one closes.
* ``max.connection.creation.rate`` broker-wide and per listener (KIP-612):
  over the quota the listener's acceptor is throttled; the connection that
  went over waits and is taken on when the throttle time is over.  The
  throttle time is Kafka's: the delay that brings the rate measured over
  ``quota.window.num`` samples of ``quota.window.size.seconds`` back to the
  quota, at most one window.  The inter-broker listener only obeys its own
  rate.  Metrics: ``broker-connection-accept-rate``, ``connection-accept-rate``,
  ``connection-accept-throttle-time``.
* ``kchannel.connection.setup.timeout.ms`` (off by default): a connection
  that has not finished its TLS handshake and authentication in time is
  closed; an authenticated one is not.

The server runs on a test clock and is polled by the test, so what it
accepted at each step, and when, is exact.
"""
import logging
import socket
import ssl

import pytest
from hypothesis import given, settings, strategies as st

from kchannel.config import ServerConfig
from kchannel.errors import ConfigError
from kchannel.framing import FrameDecoder, encode_frame
from kchannel.metrics import Metrics
from kchannel.network.connection_quotas import ConnectionQuotas
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.server import Server
from tests.fixtures.servers import connections, poll
from tests.fixtures.clocks import Clock


def make_server(servers, clock=None, **props):
    base = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    base.update({k.replace("_", "."): str(v) for k, v in props.items()})
    server = Server(base, time=clock)
    servers.append(server)
    return server


def connect(server, listener="PLAINTEXT"):
    return socket.create_connection(("127.0.0.1", server.bound_port(listener)), timeout=10)


def closed_by_server(server, sock):
    """True once the server closed ``sock`` (EOF or reset), polling it."""
    sock.setblocking(False)
    for _ in range(200):
        server.poll(5)
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            continue
        except (ConnectionError, ssl.SSLError):
            return True
        if not data:
            return True
    return False


def api_versions(server, sock):
    header = RequestHeader(int(ApiKey.API_VERSIONS), 0, 7, "quotas")
    sock.sendall(encode_frame(encode_request(header, {})))
    sock.setblocking(False)
    decoder = FrameDecoder()
    for _ in range(400):
        server.poll(5)
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            continue
        assert data, "connection closed"
        decoder.feed(data)
        frame = decoder.next_frame()
        if frame is not None:
            return decode_response(frame, int(ApiKey.API_VERSIONS), 0)[1]
    raise AssertionError("no response")


def metric(server, name, listener=None):
    tags = {"listener": listener} if listener else {}
    return server.metrics.metric(name, "socket-server-metrics", tags)


# ------------------------------------------------------------ per-IP limits
def test_max_connections_per_ip_rejects_at_once(servers, caplog):
    server = make_server(servers, max_connections_per_ip=2)
    first, second = connect(server), connect(server)
    poll(server)
    with caplog.at_level(logging.INFO, logger="kchannel.server"):
        third = connect(server)
        assert closed_by_server(server, third)
    assert ("Rejected connection from 127.0.0.1, address already has the configured maximum "
            "of 2 connections.") in caplog.text
    assert len(connections(server)) == 2
    assert api_versions(server, first)["error_code"] == 0
    # A slot comes back when a connection closes.
    first.close()
    poll(server)
    fourth = connect(server)
    assert api_versions(server, fourth)["error_code"] == 0
    assert server.connection_quotas.count("127.0.0.1") == 2
    for s in (second, third, fourth):
        s.close()


def test_per_ip_overrides(servers):
    server = make_server(servers, max_connections_per_ip=0,
                         max_connections_per_ip_overrides="127.0.0.1:1, 10.1.2.3:5")
    first = connect(server)
    assert api_versions(server, first)["error_code"] == 0
    second = connect(server)
    assert closed_by_server(server, second)
    assert server.connection_quotas.max_for("10.1.2.3") == 5
    assert server.connection_quotas.max_for("192.0.2.1") == 0
    first.close()
    second.close()


def test_per_ip_counts_follow_every_close(servers):
    """Connections the server itself closes (a bad size prefix) give their
    slot back as well."""
    server = make_server(servers, max_connections_per_ip=1)
    for _ in range(5):
        sock = connect(server)
        sock.sendall(b"\xff\xff\xff\xff")
        assert closed_by_server(server, sock)
        sock.close()
        poll(server)
        assert server.connection_quotas.count("127.0.0.1") == 0
    last = connect(server)
    assert api_versions(server, last)["error_code"] == 0
    last.close()


@pytest.mark.parametrize("props, message", [
    ({"max.connections.per.ip": "0"},
     "requirement failed: max.connections.per.ip can be set to zero only if "
     "max.connections.per.ip.overrides property is set."),
    ({"max.connections.per.ip.overrides": "host1:100,host2"},
     "Error parsing configuration property 'max.connections.per.ip.overrides'"),
    ({"max.connections.per.ip.overrides": "host1:x"},
     "Error parsing configuration property 'max.connections.per.ip.overrides'"),
    ({"max.connections.per.ip.overrides": "host 1:1,host$2:2"},
     "max.connections.per.ip.overrides contains invalid addresses : host 1,host$2"),
    ({"max.connections.per.ip": "-1"},
     "Invalid value -1 for configuration max.connections.per.ip: Value must be at least 0"),
    ({"max.connection.creation.rate": "-1"},
     "Invalid value -1 for configuration max.connection.creation.rate: Value must be at least 0"),
    ({"kchannel.connection.setup.timeout.ms": "-5"},
     "Invalid value -5 for configuration kchannel.connection.setup.timeout.ms: "
     "Value must be at least 0"),
])
def test_quota_config_validation(props, message):
    with pytest.raises(ConfigError) as info:
        ServerConfig(dict(props, listeners="PLAINTEXT://127.0.0.1:0"))
    assert message in str(info.value)


def test_quota_defaults_are_kafkas():
    c = ServerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert c.get("max.connections.per.ip") == 2147483647
    assert c.get("max.connections.per.ip.overrides") == ""
    assert c.get("max.connection.creation.rate") == 2147483647
    assert c.get("quota.window.num") == 11
    assert c.get("quota.window.size.seconds") == 1
    assert c.get("kchannel.connection.setup.timeout.ms") == 0


# ----------------------------------------------------- creation rate quotas
def test_broker_connection_creation_rate_throttles_the_acceptor(servers):
    clock = Clock(1_000_000)
    server = make_server(servers, clock, max_connection_creation_rate=2)
    socks = [connect(server) for _ in range(25)]
    poll(server)
    # 2/s over 11 samples of 1 s: a fresh window counts as 10 s, so 20
    # connections fit; the 21st makes the rate 2.1/s and waits
    # (2.1 - 2) / 2 * 10 s = 500 ms, the others behind it in the backlog.
    assert len(connections(server)) == 20
    assert server.listener("PLAINTEXT").parked is not None
    assert metric(server, "connection-accept-throttle-time", "PLAINTEXT") == 500
    assert metric(server, "broker-connection-accept-rate") == pytest.approx(2.1)
    clock.now += 499
    poll(server)
    assert len(connections(server)) == 20
    clock.now += 1
    poll(server)
    # The 21st is taken on; the 22nd makes 22 in 10.5 s and waits
    # (22 / 10.5 - 2) / 2 * 10.5 s = 500 ms as well.
    assert len(connections(server)) == 21
    assert metric(server, "connection-accept-throttle-time", "PLAINTEXT") == 500
    clock.now += 500
    poll(server)
    # A new sample: 23 in 10 s is 2.3/s, 1.5 s of delay, capped at one
    # quota window (1 s) as Kafka caps it.
    assert len(connections(server)) == 22
    assert metric(server, "connection-accept-throttle-time", "PLAINTEXT") == \
        pytest.approx((500 + 500 + 1000) / 3)
    clock.now += 1000
    poll(server)
    assert len(connections(server)) == 23
    for s in socks:
        s.close()


def test_listener_connection_creation_rate(servers):
    clock = Clock(1_000_000)
    server = make_server(
        servers, clock, listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
           "listener.name.other.max.connection.creation.rate": 1})
    assert server.listener("OTHER").max_connection_creation_rate == 1
    assert server.listener("PLAINTEXT").max_connection_creation_rate == 2147483647
    other = [connect(server, "OTHER") for _ in range(15)]
    plain = [connect(server) for _ in range(30)]
    poll(server)
    assert len(connections(server, "OTHER")) == 10
    assert len(connections(server, "PLAINTEXT")) == 30
    assert metric(server, "connection-accept-rate", "OTHER") == pytest.approx(1.1)
    assert metric(server, "connection-accept-rate", "PLAINTEXT") == pytest.approx(3.0)
    # PLAINTEXT is the inter-broker listener (security.inter.broker.protocol
    # defaults to PLAINTEXT): the broker-wide rate leaves it out.
    assert metric(server, "broker-connection-accept-rate") == pytest.approx(1.1)
    for s in other + plain:
        s.close()


def test_inter_broker_listener_obeys_only_its_own_rate(servers):
    clock = Clock(1_000_000)
    server = make_server(
        servers, clock, listeners="CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        max_connection_creation_rate=1,
        **{"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
           "inter.broker.listener.name": "REPLICATION",
           "listener.name.replication.max.connection.creation.rate": 1000})
    replication = [connect(server, "REPLICATION") for _ in range(30)]
    poll(server)
    clients = [connect(server, "CLIENT") for _ in range(30)]
    poll(server)
    assert len(connections(server, "REPLICATION")) == 30
    # The broker-wide rate counts only the CLIENT connections: 10 fit.
    assert len(connections(server, "CLIENT")) == 10
    for s in replication + clients:
        s.close()


def test_parked_connection_closed_at_shutdown(servers):
    clock = Clock(1_000_000)
    server = make_server(servers, clock, max_connection_creation_rate=0)
    sock = connect(server)
    poll(server)
    parked = server.listener("PLAINTEXT").parked
    assert parked is not None and not connections(server)
    server.shutdown()
    assert parked[0].fileno() == -1
    sock.close()


# ------------------------------------------------- connection setup deadline
SASL_PROPS = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";',
    "kchannel.scram.credential.store": "memory",
    "kchannel.delegation.token.store": "memory",
}


def sasl_login(server, sock):
    def request(api_key, version, body, correlation_id):
        sock.sendall(encode_frame(encode_request(
            RequestHeader(int(api_key), version, correlation_id, "quotas"), body)))
        sock.setblocking(False)
        decoder = FrameDecoder()
        for _ in range(400):
            server.poll(5)
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            assert data, "connection closed"
            decoder.feed(data)
            frame = decoder.next_frame()
            if frame is not None:
                return decode_response(frame, int(api_key), version)[1]
        raise AssertionError("no response")
    assert request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 1)["error_code"] == 0
    r = request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-secret"}, 2)
    assert r["error_code"] == 0


def test_setup_deadline_closes_a_dripping_connection(servers, caplog):
    clock = Clock(1_000_000)
    server = Server(dict(SASL_PROPS, **{"kchannel.connection.setup.timeout.ms": "10000"}),
                    time=clock)
    servers.append(server)
    port = server.bound_port("SASL_PLAINTEXT")
    drip = socket.create_connection(("127.0.0.1", port), timeout=10)
    good = socket.create_connection(("127.0.0.1", port), timeout=10)
    poll(server)
    sasl_login(server, good)
    # One byte of a frame every second: never idle, never done.
    frame = encode_frame(b"x" * 40)
    for i in range(9):
        drip.send(frame[i:i + 1])
        clock.now += 1000
        poll(server, 3)
    assert len(connections(server)) == 2
    drip.send(frame[9:10])
    clock.now += 1000
    with caplog.at_level(logging.INFO, logger="kchannel.network.selector"):
        assert closed_by_server(server, drip)
    assert "did not complete its TLS handshake and authentication in time" in caplog.text
    # The authenticated connection is not concerned.
    clock.now += 60000
    assert api_versions(server, good)["error_code"] == 0
    drip.close()
    good.close()


def test_setup_deadline_is_off_by_default_and_per_listener(servers):
    clock = Clock(1_000_000)
    server = Server(dict(SASL_PROPS, **{
        "listener.name.plaintext.kchannel.connection.setup.timeout.ms": "5000"}), time=clock)
    servers.append(server)
    assert server.listener("SASL_PLAINTEXT").setup_timeout_ms == 0
    assert server.listener("PLAINTEXT").setup_timeout_ms == 5000
    slow = socket.create_connection(("127.0.0.1", server.bound_port("SASL_PLAINTEXT")))
    plain = socket.create_connection(("127.0.0.1", server.bound_port("PLAINTEXT")))
    poll(server)
    frame = encode_frame(b"x" * 40)
    for i in range(12):
        slow.send(frame[i:i + 1])
        clock.now += 1000
        poll(server, 3)
    # no deadline on the SASL listener; a PLAINTEXT connection has no TLS
    # handshake or authentication to finish, so its deadline never applies
    # (even to one that sent nothing yet)
    assert len(connections(server, "SASL_PLAINTEXT")) == 1
    assert api_versions(server, plain)["error_code"] == 0
    slow.close()
    plain.close()


def test_setup_deadline_bounds_the_tls_handshake(servers, pki):
    clock = Clock(1_000_000)
    server = Server({"listeners": "SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL",
                     "kchannel.connection.setup.timeout.ms": "3000",
                     **{f"listener.name.ssl.{k}": v for k, v in pki.server_configs().items()}},
                    time=clock)
    servers.append(server)
    sock = socket.create_connection(("127.0.0.1", server.bound_port("SSL")))
    sock.send(b"\x16\x03\x01")          # the start of a ClientHello, never finished
    poll(server)
    clock.now += 2999
    poll(server)
    assert len(connections(server)) == 1
    clock.now += 1
    assert closed_by_server(server, sock)
    assert not connections(server)
    sock.close()


# ------------------------------------------------------- the bookkeeping alone
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 40)), max_size=200),
       st.integers(0, 4))
def test_per_ip_counts_match_open_connections(ops, limit):
    """Any interleaving of connects and closes: each address's count is its
    open connections, never above its maximum, and a connection is refused
    exactly when its address is at the maximum."""
    quotas = ConnectionQuotas(Metrics(), max_connections_per_ip=limit,
                              overrides={"10.0.0.3": limit + 2})
    open_ = {}          # connection id -> address
    next_id = 0
    for connect, host, pick in ops:
        address = f"10.0.0.{host}"
        if connect:
            next_id += 1
            at_max = sum(1 for a in open_.values() if a == address) >= quotas.max_for(address)
            refused = quotas.inc(next_id, address)
            assert (refused is not None) == at_max
            if refused is None:
                open_[next_id] = address
        elif open_:
            cid = sorted(open_)[pick % len(open_)]
            quotas.dec(cid)
            quotas.dec(cid)           # a second close changes nothing
            del open_[cid]
        for h in range(4):
            a = f"10.0.0.{h}"
            n = sum(1 for x in open_.values() if x == a)
            assert quotas.count(a) == n <= quotas.max_for(a)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50), st.lists(st.integers(0, 3000), min_size=1, max_size=300))
def test_throttle_time_is_bounded_and_zero_within_quota(rate, gaps):
    clock = Clock(0)
    quotas = ConnectionQuotas(Metrics(time=clock), max_connection_creation_rate=rate)
    quotas.add_listener("L")
    for gap in gaps:
        clock.now += gap
        throttle = quotas.record_connection("L", False, clock.now)
        measured = quotas._broker.rate.measure(clock.now)
        assert 0 <= throttle <= 1000
        assert (throttle > 0) == (measured > rate)
