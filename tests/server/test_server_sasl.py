"""Server/Selector plumbing for SASL: principals, delayed close after a failed
authentication, KIP-368 re-authentication and the expired-session kill.

Server and NetworkClient run in the test thread with injected clocks, so the
authentication-failure delay and session lifetimes are driven without sleeps.
"""
import pytest

from kchannel.client import ConnectionState, KafkaClient, NetworkClient
from kchannel.errors import SaslAuthenticationError
from kchannel.network.channel import State
from kchannel.protocol.api_keys import ApiKey
from kchannel.server import Server
from tests.fixtures.clocks import Clock

JAAS_SERVER = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_alice="alice-secret";')


def jaas_client(user, password):
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{user}" password="{password}";')


def server_props(reauth_ms=None, delay_ms=100):
    p = {
        "listeners": "SASL://127.0.0.1:0,PLAIN://127.0.0.1:0",
        "listener.security.protocol.map": "SASL:SASL_PLAINTEXT,PLAIN:PLAINTEXT",
        "inter.broker.listener.name": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS_SERVER,
        "connection.failed.authentication.delay.ms": str(delay_ms),
    }
    if reauth_ms is not None:
        p["listener.name.sasl.plain.connections.max.reauth.ms"] = str(reauth_ms)
    return p


def alice_configs(server, password="alice-secret"):
    return {"bootstrap.servers": f"127.0.0.1:{server.bound_port('SASL')}",
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas_client("alice", password)}


def drive(server, net, cond, max_rounds=2000):
    out = []
    for _ in range(max_rounds):
        out += net.poll(0)
        server.poll(5)
        if cond(out):
            return out
    raise AssertionError("condition not reached")


@pytest.fixture
def principals():
    return []


def add_whoami(server, principals):
    def describe_cluster(ctx):
        principals.append(str(ctx.principal))
        return {"error_code": 0, "cluster_id": server.cluster_id, "controller_id": 0,
                "brokers": []}
    server.register_handler(ApiKey.DESCRIBE_CLUSTER, describe_cluster)


def test_sasl_plain_principal_and_api_versions(principals):
    s = Server(server_props())
    add_whoami(s, principals)
    s.start()
    try:
        with KafkaClient(alice_configs(s)).connect() as c:
            assert ApiKey.SASL_HANDSHAKE in c.api_versions
            assert ApiKey.SASL_AUTHENTICATE in c.api_versions
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert principals == ["User:alice"]
        snap = s.metrics.snapshot()
        assert snap["successful-authentication-total"] == 1
        assert snap["successful-authentication-no-reauth-total"] == 0
        # the PLAINTEXT listener lists the SASL APIs too, as a Kafka broker
        with KafkaClient({"bootstrap.servers":
                          f"127.0.0.1:{s.bound_port('PLAIN')}"}).connect() as p:
            assert ApiKey.SASL_HANDSHAKE in p.api_versions
            assert ApiKey.SASL_AUTHENTICATE in p.api_versions
    finally:
        s.shutdown()


def test_failed_authentication_close_is_delayed_without_blocking_others():
    clock = Clock()
    s = Server(server_props(delay_ms=5000), time=clock)
    good = NetworkClient(alice_configs(s))
    bad = NetworkClient(alice_configs(s, password="wrong"))
    port = s.bound_port("SASL")
    try:
        good.connect("g", "127.0.0.1", port)
        drive(s, good, lambda out: good.is_ready("g"))
        bad.connect("b", "127.0.0.1", port)
        # The server answers the failed SaslAuthenticate only after the delay
        # (Kafka's connection.failed.authentication.delay.ms): until the
        # clock moves on, the bad client is still authenticating...
        for _ in range(50):
            bad.poll(0)
            s.poll(5)
        assert s.metrics.snapshot()["failed-authentication-total"] == 1
        assert bad.connection_state("b") is ConnectionState.CONNECTING
        # ...while the good connection keeps being served.
        corr = good.send("g", ApiKey.METADATA, {"topics": []})
        out = drive(s, good, lambda out: any(r.correlation_id == corr for r in out))
        assert out[-1].exception is None
        clock.now += 5000
        for _ in range(200):
            bad.poll(0)
            s.poll(5)
            if bad.connection_state("b") is not ConnectionState.CONNECTING:
                break
        assert bad.connection_state("b") is ConnectionState.AUTHENTICATION_FAILED
        exc = bad.connection_exception("b")
        assert isinstance(exc, SaslAuthenticationError)
        assert "Invalid username or password" in str(exc)
    finally:
        good.close()
        bad.close()
        s.shutdown()


def test_client_reauthentication_and_responses_keep_flowing():
    clock = Clock()
    s = Server(server_props(reauth_ms=10_000), time=clock)
    net = NetworkClient(alice_configs(s), time=clock)
    try:
        net.connect("n", "127.0.0.1", s.bound_port("SASL"))
        drive(s, net, lambda out: net.is_ready("n"))
        clock.now += 9_600          # past the 85-95% re-authentication point
        corr = net.send("n", ApiKey.METADATA, {"topics": []})
        out = drive(s, net, lambda out: any(r.correlation_id == corr for r in out))
        assert out[-1].exception is None and out[-1].body["brokers"]
        assert net.metrics.snapshot()["successful-reauthentication-total"] == 1
        drive(s, net, lambda out: s.metrics.snapshot()["successful-reauthentication-total"] == 1)
        # the re-authenticated session lives on
        clock.now += 5_000
        corr = net.send("n", ApiKey.METADATA, {"topics": []})
        out = drive(s, net, lambda out: any(r.correlation_id == corr for r in out))
        assert out[-1].exception is None
        assert s.metrics.snapshot()["expired-connections-killed-count"] == 0
    finally:
        net.close()
        s.shutdown()


def test_expired_session_is_killed_on_next_request():
    server_clock = Clock()
    client_clock = Clock()        # never moves: this client never re-authenticates
    s = Server(server_props(reauth_ms=10_000), time=server_clock)
    net = NetworkClient(alice_configs(s), time=client_clock)
    try:
        net.connect("n", "127.0.0.1", s.bound_port("SASL"))
        drive(s, net, lambda out: net.is_ready("n"))
        server_clock.now += 10_001
        corr = net.send("n", ApiKey.METADATA, {"topics": []})
        out = drive(s, net, lambda out: any(r.correlation_id == corr for r in out))
        assert out[-1].exception is not None
        assert net.connection_state("n") is ConnectionState.DISCONNECTED
        assert s.metrics.snapshot()["expired-connections-killed-count"] == 1
    finally:
        net.close()
        s.shutdown()


def test_disconnected_state_carries_authentication_exception():
    s = Server(server_props(delay_ms=0))
    s.start()
    try:
        net = NetworkClient(alice_configs(s, password="nope"))
        net.connect("x", "127.0.0.1", s.bound_port("SASL"))
        states = {}
        for _ in range(500):
            net.poll(10)
            states.update(net.selector.disconnected)
            if states:
                break
        assert states["x"] == State.AUTHENTICATION_FAILED
        assert isinstance(states["x"].exception, SaslAuthenticationError)
        net.close()
    finally:
        s.shutdown()


def test_connections_with_equal_api_versions_share_them():
    # A client's connections to one cluster get equal ApiVersions answers:
    # the nodes share one body and one map instead of ~3 KB each; what each
    # node reports is unchanged.
    s = Server(server_props())
    net = NetworkClient(alice_configs(s))
    port = s.bound_port("SASL")
    try:
        for node in ("a", "b"):
            net.connect(node, "127.0.0.1", port)
        drive(s, net, lambda out: net.is_ready("a") and net.is_ready("b"))
        assert net.api_versions("a") is net.api_versions("b")
        assert net.api_versions_response("a") is net.api_versions_response("b")
        assert net.api_versions("a")[int(ApiKey.METADATA)][1] >= 1
        assert net.choose_version("b", ApiKey.METADATA) >= 1
        corr = net.send("b", ApiKey.METADATA, {"topics": []})
        out = drive(s, net, lambda out: any(r.correlation_id == corr for r in out))
        assert out[-1].exception is None
    finally:
        net.close()
        s.shutdown()
