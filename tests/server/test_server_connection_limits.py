"""What a server's SocketServer accepts, and how many: Kafka's connection
limits and quotas, socket settings, and kchannel's connection setup deadline.

* ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections``:
  once reached, the listener stops accepting (connections wait in the listen
  backlog, as behind Kafka's blocked acceptor) until a connection closes; the
  inter-broker listener is not held back by the broker-wide limit when there
  are other listeners;
* ``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes``: SO_SNDBUF /
  SO_RCVBUF of accepted connections (-1 = the OS default);
* ApiVersions lists SaslHandshake and SaslAuthenticate on every listener,
  which answer ILLEGAL_SASL_STATE outside SASL authentication;
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

The server is polled by the test itself (no server thread), some on a test
clock, so what it accepted at each step, and when, is exact.
"""
import logging
import socket
import ssl

import pytest
from hypothesis import given, settings, strategies as st

from kchannel.config import ServerConfig
from kchannel.errors import ConfigError
from kchannel.framing import encode_frame
from kchannel.metrics import Metrics
from kchannel.network.connection_quotas import ConnectionQuotas
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.server import Server
from tests.fixtures.clocks import Clock
from tests.fixtures.servers import PolledPeer, connections, poll

PLAIN = "PLAINTEXT"


def limited_server(servers, clock=None, **props):
    base = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    base.update({k.replace("_", "."): str(v) for k, v in props.items()})
    server = Server(base, time=clock)
    servers.append(server)
    return server


def open_socket(server, listener="PLAINTEXT"):
    return socket.create_connection(("127.0.0.1", server.bound_port(listener)), timeout=10)


def api_versions(peer):
    return peer.request(ApiKey.API_VERSIONS, {}, 0)


# ------------------------------------------------- max.connections, sockets
def test_max_connections_holds_new_connections_until_one_closes(servers):
    server = limited_server(servers, max_connections=2)
    first, second = PolledPeer(server), PolledPeer(server)
    assert api_versions(first)["error_code"] == 0
    assert api_versions(second)["error_code"] == 0
    third = PolledPeer(server)
    third.send(ApiKey.API_VERSIONS, {}, 0)
    poll(server)
    assert len(connections(server)) == 2         # the third waits in the backlog
    first.close()
    # Once the server has seen the close, the third connection is accepted
    # and its request (sent long ago) answered.
    third.correlation_id -= 1
    assert api_versions(third)["error_code"] == 0
    assert len(connections(server)) == 2
    for p in (second, third):
        p.close()


def test_listener_max_connections(servers):
    server = limited_server(servers, 
        listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
           "listener.name.other.max.connections": 1})
    assert server.listener("OTHER").max_connections == 1
    peers = [PolledPeer(server, "OTHER"), PolledPeer(server, "OTHER")]
    poll(server)
    assert len(connections(server, "OTHER")) == 1
    # The PLAINTEXT listener has no limit of its own.
    plain = [PolledPeer(server) for _ in range(3)]
    for p in plain:
        assert api_versions(p)["error_code"] == 0
    assert len(connections(server, "OTHER")) == 1
    for p in peers + plain:
        p.close()


def test_inter_broker_listener_not_held_back_by_the_broker_wide_limit(servers):
    server = limited_server(servers, 
        listeners="CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        max_connections=1,
        **{"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
           "inter.broker.listener.name": "REPLICATION",
           "listener.name.replication.max.connections": 3})
    client = PolledPeer(server, "CLIENT")
    assert api_versions(client)["error_code"] == 0
    waiting = PolledPeer(server, "CLIENT")
    brokers = [PolledPeer(server, "REPLICATION") for _ in range(3)]
    for b in brokers:
        assert api_versions(b)["error_code"] == 0
    extra = PolledPeer(server, "REPLICATION")       # over its own listener limit
    poll(server)
    assert len(connections(server, "CLIENT")) == 1
    assert len(connections(server, "REPLICATION")) == 3
    for p in [client, waiting, extra] + brokers:
        p.close()


def test_unlimited_by_default(servers):
    server = limited_server(servers)
    assert server.max_connections == 2147483647
    peers = [PolledPeer(server) for _ in range(5)]
    for p in peers:
        assert api_versions(p)["error_code"] == 0
    assert len(connections(server)) == 5
    for p in peers:
        p.close()


def _expected_buffer(option, size):
    # What the kernel reports for ``size`` (Linux doubles it).
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, option, size)
        return s.getsockopt(socket.SOL_SOCKET, option)
    finally:
        s.close()


@pytest.mark.parametrize("sndbuf,rcvbuf", [(None, None), (65536, 32768), (200000, 300000)])
def test_socket_buffer_sizes(servers, sndbuf, rcvbuf):
    props = {}
    if sndbuf is not None:
        props["socket.send.buffer.bytes"] = sndbuf
        props["socket.receive.buffer.bytes"] = rcvbuf
    server = limited_server(servers, **props)
    peer = PolledPeer(server)
    assert api_versions(peer)["error_code"] == 0
    (ch,) = connections(server)
    sock = ch.transport.socket
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == \
        _expected_buffer(socket.SO_SNDBUF, sndbuf or 102400)
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == \
        _expected_buffer(socket.SO_RCVBUF, rcvbuf or 102400)
    peer.close()


def test_socket_buffer_os_default(servers):
    server = limited_server(servers, **{"socket.send.buffer.bytes": -1,
                            "socket.receive.buffer.bytes": -1})
    assert (server.selector._factory.send_buffer_size,
            server.selector._factory.receive_buffer_size) == (-1, -1)
    peer = PolledPeer(server)
    assert api_versions(peer)["error_code"] == 0
    (ch,) = connections(server)
    sock = ch.transport.socket
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) != \
        _expected_buffer(socket.SO_SNDBUF, 102400)
    peer.close()


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_sasl_apis_listed_and_answered_on_non_sasl_listeners(servers, pki, protocol):
    props = {"listeners": f"{protocol}://127.0.0.1:0"}
    if protocol == "SSL":
        props.update(pki.server_configs())
        props["security.inter.broker.protocol"] = "SSL"
        from kchannel.client import KafkaClient
        configs = {"security.protocol": "SSL", **pki.client_configs()}
    else:
        from kchannel.client import KafkaClient
        configs = {}
    server = Server(props)
    server.start()
    host = "localhost" if protocol == "SSL" else "127.0.0.1"
    with KafkaClient(dict(configs, **{"bootstrap.servers":
                                      f"{host}:{server.bound_port(protocol)}"})).connect() as c:
        assert c.api_versions[ApiKey.SASL_HANDSHAKE] == (0, messages.SASL_HANDSHAKE.max_version)
        assert c.api_versions[ApiKey.SASL_AUTHENTICATE] == \
            (0, messages.SASL_AUTHENTICATE.max_version)
        body = c.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, version=1)
        assert (body["error_code"], body["mechanisms"]) == (int(Errors.ILLEGAL_SASL_STATE), [])
        body = c.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\x00a\x00b"}, version=2)
        assert body["error_code"] == int(Errors.ILLEGAL_SASL_STATE)
        assert body["error_message"] == \
            "SaslAuthenticate request received after successful authentication"
        # the connection stays usable
        assert c.request(ApiKey.METADATA, {"topics": []})["brokers"]


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


def metric(server, name, listener=None):
    tags = {"listener": listener} if listener else {}
    return server.metrics.metric(name, "socket-server-metrics", tags)


# ------------------------------------------------------------ per-IP limits
def test_max_connections_per_ip_rejects_at_once(servers, caplog):
    server = limited_server(servers, max_connections_per_ip=2)
    first, second = open_socket(server), open_socket(server)
    poll(server)
    with caplog.at_level(logging.INFO, logger="kchannel.server"):
        third = open_socket(server)
        assert closed_by_server(server, third)
    assert ("Rejected connection from 127.0.0.1, address already has the configured maximum "
            "of 2 connections.") in caplog.text
    assert len(connections(server)) == 2
    assert api_versions(PolledPeer(server, sock=first))["error_code"] == 0
    # A slot comes back when a connection closes.
    first.close()
    poll(server)
    fourth = open_socket(server)
    assert api_versions(PolledPeer(server, sock=fourth))["error_code"] == 0
    assert server.connection_quotas.count("127.0.0.1") == 2
    for s in (second, third, fourth):
        s.close()


def test_per_ip_overrides(servers):
    server = limited_server(servers, max_connections_per_ip=0,
                            max_connections_per_ip_overrides="127.0.0.1:1, 10.1.2.3:5")
    first = open_socket(server)
    assert api_versions(PolledPeer(server, sock=first))["error_code"] == 0
    second = open_socket(server)
    assert closed_by_server(server, second)
    assert server.connection_quotas.max_for("10.1.2.3") == 5
    assert server.connection_quotas.max_for("192.0.2.1") == 0
    first.close()
    second.close()


def test_per_ip_counts_follow_every_close(servers):
    """Connections the server itself closes (a bad size prefix) give their
    slot back as well."""
    server = limited_server(servers, max_connections_per_ip=1)
    for _ in range(5):
        sock = open_socket(server)
        sock.sendall(b"\xff\xff\xff\xff")
        assert closed_by_server(server, sock)
        sock.close()
        poll(server)
        assert server.connection_quotas.count("127.0.0.1") == 0
    last = open_socket(server)
    assert api_versions(PolledPeer(server, sock=last))["error_code"] == 0
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
    server = limited_server(servers, clock, max_connection_creation_rate=2)
    socks = [open_socket(server) for _ in range(25)]
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
    server = limited_server(
        servers, clock, listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
           "listener.name.other.max.connection.creation.rate": 1})
    assert server.listener("OTHER").max_connection_creation_rate == 1
    assert server.listener("PLAINTEXT").max_connection_creation_rate == 2147483647
    other = [open_socket(server, "OTHER") for _ in range(15)]
    plain = [open_socket(server) for _ in range(30)]
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
    server = limited_server(
        servers, clock, listeners="CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        max_connection_creation_rate=1,
        **{"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
           "inter.broker.listener.name": "REPLICATION",
           "listener.name.replication.max.connection.creation.rate": 1000})
    replication = [open_socket(server, "REPLICATION") for _ in range(30)]
    poll(server)
    clients = [open_socket(server, "CLIENT") for _ in range(30)]
    poll(server)
    assert len(connections(server, "REPLICATION")) == 30
    # The broker-wide rate counts only the CLIENT connections: 10 fit.
    assert len(connections(server, "CLIENT")) == 10
    for s in replication + clients:
        s.close()


def test_parked_connection_closed_at_shutdown(servers):
    clock = Clock(1_000_000)
    server = limited_server(servers, clock, max_connection_creation_rate=0)
    sock = open_socket(server)
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


def sasl_login(peer):
    assert peer.request(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, 1)["error_code"] == 0
    r = peer.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0alice-secret"}, 2)
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
    sasl_login(PolledPeer(server, sock=good))
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
    assert api_versions(PolledPeer(server, sock=good))["error_code"] == 0
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
    assert api_versions(PolledPeer(server, sock=plain))["error_code"] == 0
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
