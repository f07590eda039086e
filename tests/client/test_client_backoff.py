"""Reconnect backoff, connection setup timeout and the authentication-failure
blackout of the kchannel clients (Kafka's ClusterConnectionStates and
ExponentialBackoff).

Real 127.0.0.1 sockets throughout: a kchannel Server (PLAINTEXT, or
SASL_PLAINTEXT/PLAIN whose password check the test switches), and plain
listening sockets that count what they accept.  Client clocks are injected, so
backoffs are stepped through without sleeping; "no new socket" is checked on
both ends (nothing in the client's selector, nothing accepted by the server).
"""
import random
import socket
import threading

import pytest

from kchannel.client.network_client import (ConnectionState, ExponentialBackoff, KafkaClient,
                                            NetworkClient, RequestTimeoutError,
                                            client_configs)
from kchannel.errors import ChannelConnectionError, SaslAuthenticationError
from kchannel.protocol.api_keys import ApiKey
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.server import Server
from tests.fixtures.clocks import Clock

HOST = "127.0.0.1"


def bounds(attempts, base=50, cap=1000, jitter=0.2, multiplier=2):
    """Kafka's ExponentialBackoff range for ``attempts`` (Java's (long) cast
    truncates; the jittered value never exceeds the cap)."""
    term = min(base * multiplier ** attempts, cap)
    return int((1 - jitter) * term), min(int((1 + jitter) * term), cap)


def within(value, attempts, **kw):
    lo, hi = bounds(attempts, **kw)
    return lo <= value <= hi


class Acceptor:
    """A listening socket served by a thread: counts accepted connections
    and closes each at once (a broker that drops every connection)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1       # counted before the client can see the close
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def acceptor():
    a = Acceptor()
    yield a
    a.close()


def poll_until(net, cond, server=None, rounds=3000):
    out = []
    for _ in range(rounds):
        out += net.poll(0 if server is not None else 5)
        if server is not None:
            server.poll(5)
        if cond():
            return out
    raise AssertionError("condition not reached")


def fail_once(net, node, port, server=None):
    assert net.connect(node, HOST, port) is True
    poll_until(net, lambda: net.connection_failed(node), server)


# --------------------------------------------------------------- the formula
def test_exponential_backoff_formula_jitter_and_cap():
    rng = random.Random(7)
    b = ExponentialBackoff(50, 2, 1000, 0.2, rng)
    for attempts in range(12):
        samples = [b.backoff(attempts) for _ in range(400)]
        lo, hi = bounds(attempts)
        assert lo <= min(samples) and max(samples) <= hi
        # the jitter is real: the samples spread over most of the range
        assert max(samples) - min(samples) > (hi - lo) // 2
    # capped: never above the maximum, and the cap is reached
    assert max(b.backoff(30) for _ in range(400)) == 1000
    # maximum not above the base: constant, no jitter (Kafka's expMax == 0)
    assert {ExponentialBackoff(50, 2, 50, 0.2).backoff(n) for n in range(5)} == {50}
    assert {ExponentialBackoff(500, 2, 100, 0.2).backoff(n) for n in range(5)} == {100}
    # no jitter: exact doubling
    assert [ExponentialBackoff(10, 2, 100, 0.0).backoff(n) for n in range(6)] == \
        [10, 20, 40, 80, 100, 100]


def test_backoff_configs_and_kafka_defaults():
    c = client_configs({})
    assert (c["reconnect.backoff.ms"], c["reconnect.backoff.max.ms"]) == (50, 1000)
    assert (c["socket.connection.setup.timeout.ms"],
            c["socket.connection.setup.timeout.max.ms"]) == (10000, 30000)
    # CommonClientConfigs.postProcessReconnectBackoffConfigs: a base set
    # without a maximum disables the exponential growth
    c = client_configs({"reconnect.backoff.ms": "200"})
    assert (c["reconnect.backoff.ms"], c["reconnect.backoff.max.ms"]) == (200, 200)
    c = client_configs({"reconnect.backoff.ms": "200", "reconnect.backoff.max.ms": "5000"})
    assert (c["reconnect.backoff.ms"], c["reconnect.backoff.max.ms"]) == (200, 5000)
    net = NetworkClient({"reconnect.backoff.ms": 200})
    try:
        assert {net.reconnect_backoff.backoff(n) for n in range(6)} == {200}
    finally:
        net.close()


# ------------------------------------------------------- backoff over sockets
def test_backoff_grows_within_jitter_bounds_caps_and_blacks_out(acceptor):
    clock = Clock()
    net = NetworkClient({}, time=clock)
    try:
        assert net.can_connect("n") and not net.is_blacked_out("n")
        assert net.connection_delay("n") == 0
        for attempt in range(8):
            fail_once(net, "n", acceptor.port)
            assert acceptor.accepted == attempt + 1
            assert net.connection_state("n") is ConnectionState.DISCONNECTED
            assert isinstance(net.connection_exception("n"), ChannelConnectionError)
            assert net.authentication_exception("n") is None
            delay = net.connection_delay("n", clock.now)
            assert delay == net.reconnect_backoff_for("n")
            assert within(delay, attempt), (attempt, delay)
            if attempt >= 5:            # 50 * 2**5 > 1000: at the cap
                assert 800 <= delay <= 1000
            # one millisecond before the backoff ends: blacked out, no socket
            clock.now += delay - 1
            assert net.is_blacked_out("n") and not net.can_connect("n")
            assert net.connection_delay("n") == 1
            assert net.connect("n", HOST, acceptor.port) is False
            assert net.selector.channel("n") is None and len(net.selector) == 0
            for _ in range(20):
                net.poll(1)
            assert acceptor.accepted == attempt + 1
            assert net.connection_state("n") is ConnectionState.DISCONNECTED
            clock.now += 1
            assert net.can_connect("n") and not net.is_blacked_out("n")
    finally:
        net.close()


def test_backoff_is_per_node(acceptor):
    clock = Clock()
    net = NetworkClient({}, time=clock)
    try:
        fail_once(net, "a", acceptor.port)
        assert net.is_blacked_out("a") and net.connect("a", HOST, acceptor.port) is False
        # another node on the same address is not held back by "a"'s failure
        assert net.can_connect("b")
        fail_once(net, "b", acceptor.port)
        assert acceptor.accepted == 2
        assert net.is_blacked_out("a") and net.is_blacked_out("b")
    finally:
        net.close()


def test_backoff_resets_after_a_successful_connection(acceptor):
    clock = Clock()
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    net = NetworkClient({}, time=clock)
    try:
        for attempt in range(3):
            fail_once(net, "n", acceptor.port)
            clock.now += net.connection_delay("n")
        assert within(net.reconnect_backoff_for("n"), 2)
        # Same host, the port of a working broker: the node's state carries
        # over (Kafka keys it by host) and the success resets it.
        assert net.connect("n", HOST, server.bound_port("PLAINTEXT"))
        poll_until(net, lambda: net.is_ready("n"), server)
        assert within(net.reconnect_backoff_for("n"), 0)
        # the broker closes the connection: the next backoff is the base one
        server.shutdown()
        poll_until(net, lambda: net.connection_failed("n"))
        assert within(net.connection_delay("n"), 0)
        assert net.connect("n", HOST, acceptor.port) is False
    finally:
        net.close()
        server.shutdown()


def test_disconnect_keeps_backoff_close_forgets_it():
    clock = Clock()
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    port = server.bound_port("PLAINTEXT")
    net = NetworkClient({}, time=clock)
    try:
        net.connect("n", HOST, port)
        poll_until(net, lambda: net.is_ready("n"), server)
        corr = net.send("n", ApiKey.METADATA, {"topics": []})
        net.disconnect("n")
        out = poll_until(net, lambda: True, server)
        assert [r.correlation_id for r in out if r.disconnected] == [corr]
        assert net.is_blacked_out("n") and within(net.connection_delay("n"), 0)
        assert net.connect("n", HOST, port) is False
        net.close("n")
        assert net.can_connect("n") and net.connection_delay("n") == 0
        assert net.connect("n", HOST, port) is True
        poll_until(net, lambda: net.is_ready("n"), server)
        assert net.connection_delay("n") > 10 ** 15     # connected: no reconnect pending
    finally:
        net.close()
        server.shutdown()


# ------------------------------------------------------ connection setup timeout
@pytest.fixture
def unresponsive_port():
    """A port whose TCP handshake never completes: a listening socket with a
    full accept queue drops further SYNs."""
    lsock = socket.socket()
    lsock.bind((HOST, 0))
    lsock.listen(0)
    port = lsock.getsockname()[1]
    filler = socket.create_connection((HOST, port), timeout=5)
    probe = socket.socket()
    probe.settimeout(0.3)
    try:
        probe.connect((HOST, port))
        hangs = False
    except (socket.timeout, OSError):
        hangs = True
    probe.close()
    if not hangs:
        filler.close()
        lsock.close()
        pytest.skip("this OS completes TCP handshakes beyond a full accept queue")
    yield port
    filler.close()
    lsock.close()


def test_connection_setup_timeout_grows_per_failed_connect(unresponsive_port):
    clock = Clock()
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    net = NetworkClient({}, time=clock)
    st = dict(base=10000, cap=30000)
    try:
        for attempt in range(4):
            assert net.connect("n", HOST, unresponsive_port)
            timeout = net.connection_setup_timeout_for("n")
            assert within(timeout, attempt, **st), (attempt, timeout)
            # while connecting, the delay is the setup timeout (Kafka's connectionDelay)
            assert net.connection_delay("n") == timeout
            for _ in range(5):
                net.poll(1)
            assert net.connection_state("n") is ConnectionState.CONNECTING
            clock.now += timeout
            net.poll(0)
            assert net.connection_state("n") is ConnectionState.CONNECTING
            clock.now += 1
            net.poll(0)
            assert net.connection_state("n") is ConnectionState.DISCONNECTED
            assert isinstance(net.connection_exception("n"), RequestTimeoutError)
            assert within(net.connection_setup_timeout_for("n"), attempt + 1, **st)
            clock.now += net.connection_delay("n")
        # a connection that gets through resets it
        assert net.connect("n", HOST, server.bound_port("PLAINTEXT"))
        assert within(net.connection_setup_timeout_for("n"), 4, **st)
        poll_until(net, lambda: net.is_ready("n"), server)
        assert within(net.connection_setup_timeout_for("n"), 0, **st)
    finally:
        net.close()
        server.shutdown()


def test_request_timeouts_fire_at_each_requests_deadline():
    """poll() looks for timed-out requests only once the earliest deadline
    has passed: a request sent later with a shorter timeout moves that
    deadline earlier, and each request still times out at its own."""
    clock = Clock()
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    net = NetworkClient({"request.timeout.ms": 1000}, time=clock)
    port = server.bound_port("PLAINTEXT")
    body = {"topics": [], "allow_auto_topic_creation": False}
    try:
        for node in ("long", "short"):
            assert net.connect(node, HOST, port)
        poll_until(net, lambda: net.is_ready("long") and net.is_ready("short"), server)
        # the server is not polled from here on: nothing is answered
        net.send("long", ApiKey.METADATA, body, version=4, timeout_ms=5000)
        clock.now += 100
        net.send("short", ApiKey.METADATA, body, version=4)
        clock.now += 1000
        assert net.poll(0) == []                          # "short" is due at +1100 ms
        clock.now += 1
        failed = net.poll(0)
        assert [(r.node_id, type(r.exception)) for r in failed] == \
            [("short", RequestTimeoutError)]
        assert net.is_ready("long")
        clock.now += 5000 - 1101
        assert net.poll(0) == []                          # "long" is due at +5000 ms
        clock.now += 1
        failed = net.poll(0)
        assert [(r.node_id, type(r.exception)) for r in failed] == \
            [("long", RequestTimeoutError)]
    finally:
        net.close()
        server.shutdown()


# ------------------------------------------------ authentication failure blackout
class Passwords:
    """PLAIN password check the test switches between refusing and accepting."""

    def __init__(self):
        self.accept = False
        self.attempts = 0

    def __call__(self, username, password):
        self.attempts += 1
        return self.accept and username == "alice"


def checking_sasl_server(check, **kw):
    return Server(listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                  listener_configs={"SASL_PLAINTEXT": {"sasl.enabled.mechanisms": "PLAIN"}},
                  failed_authentication_delay_ms=0,
                  callbacks=ServerCallbacks(plain_authenticate=check), **kw)


def sasl_client_configs(port=None, extra_bootstrap=()):
    c = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                             'required username="alice" password="not-checked-here";'}
    if port is not None:
        c["bootstrap.servers"] = ",".join([f"{HOST}:{port}", *extra_bootstrap])
    return c


def created(server):
    return server.metrics.snapshot()["connection-creation-total"]


def test_authentication_failure_blacks_out_the_node():
    clock = Clock()
    check = Passwords()
    server = checking_sasl_server(check)
    port = server.bound_port("SASL_PLAINTEXT")
    net = NetworkClient(sasl_client_configs(), time=clock)
    try:
        net.connect("n", HOST, port)
        poll_until(net, lambda: net.connection_failed("n"), server)
        assert net.connection_state("n") is ConnectionState.AUTHENTICATION_FAILED
        exc = net.connection_exception("n")
        assert isinstance(exc, SaslAuthenticationError)
        assert "Invalid username or password" in str(exc)
        assert net.authentication_exception("n") is exc
        assert created(server) == 1 and check.attempts == 1
        # Kafka advances the backoff twice for an authentication failure
        # (disconnected, then authenticationFailed): backoff(1)
        delay = net.connection_delay("n")
        assert within(delay, 1), delay
        clock.now += delay - 1
        assert net.is_blacked_out("n")
        assert net.connect("n", HOST, port) is False
        assert net.selector.channel("n") is None
        for _ in range(50):
            net.poll(0)
            server.poll(2)
        assert created(server) == 1 and check.attempts == 1
        assert net.connection_state("n") is ConnectionState.AUTHENTICATION_FAILED
        assert net.connection_exception("n") is exc
        assert net.authentication_exception("n") is exc
        # after the backoff: a new connection, refused again, longer backoff
        clock.now += 1
        assert net.connect("n", HOST, port) is True
        assert net.connection_state("n") is ConnectionState.CONNECTING
        # the kept error stays until a connection is READY (Kafka)
        assert net.authentication_exception("n") is exc
        poll_until(net, lambda: net.connection_failed("n"), server)
        assert created(server) == 2 and check.attempts == 2
        exc2 = net.authentication_exception("n")
        assert type(exc2) is type(exc) and str(exc2) == str(exc)
        assert within(net.connection_delay("n"), 3)
        # credentials accepted now: READY, kept error and backoff cleared
        check.accept = True
        clock.now += net.connection_delay("n")
        assert net.connect("n", HOST, port) is True
        poll_until(net, lambda: net.is_ready("n"), server)
        assert created(server) == 3
        assert net.authentication_exception("n") is None
        assert within(net.reconnect_backoff_for("n"), 0)
    finally:
        net.close()
        server.shutdown()


def test_kafka_client_raises_kept_authentication_error_without_a_socket(acceptor):
    clock = Clock()
    check = Passwords()
    server = checking_sasl_server(check).start()
    port = server.bound_port("SASL_PLAINTEXT")
    # the second bootstrap server is never tried after an authentication failure
    client = KafkaClient(sasl_client_configs(port, [f"{HOST}:{acceptor.port}"]), time=clock)
    try:
        with pytest.raises(SaslAuthenticationError) as first:
            client.connect()
        assert "Invalid username or password" in str(first.value)
        assert created(server) == 1 and check.attempts == 1
        node = client.node_id
        assert client.network.connection_state(node) is ConnectionState.AUTHENTICATION_FAILED
        delay = client.network.connection_delay(node)
        assert within(delay, 1)
        # blacked out: the same error at once, nothing opened anywhere
        clock.now += delay - 1
        for _ in range(3):
            with pytest.raises(SaslAuthenticationError) as again:
                client.connect()
            assert type(again.value) is type(first.value)
            assert str(again.value) == str(first.value)
            assert client.network.selector.channel(node) is None
        # nor does request() reconnect after an authentication failure
        with pytest.raises(SaslAuthenticationError):
            client.request(ApiKey.METADATA, {"topics": []})
        # backoff over: connect() opens a new connection (refused again)
        clock.now += 1
        with pytest.raises(SaslAuthenticationError) as third:
            client.connect()
        assert str(third.value) == str(first.value)
        assert created(server) == 2 and check.attempts == 2
        assert acceptor.accepted == 0
        # once the password is accepted, the next attempt after the backoff works
        check.accept = True
        with pytest.raises(SaslAuthenticationError):
            client.connect()
        clock.now += client.network.connection_delay(node)
        client.connect()
        assert client.request(ApiKey.METADATA, {"topics": []})["brokers"]
        assert created(server) == 3
        assert acceptor.accepted == 0
    finally:
        client.close()
        server.shutdown()


def test_kafka_client_waits_out_the_backoff_of_a_lost_connection(acceptor):
    clock = Clock()
    client = KafkaClient({"bootstrap.servers": f"{HOST}:{acceptor.port}"}, time=clock)
    try:
        with pytest.raises(ChannelConnectionError):
            client.connect()
        assert acceptor.accepted == 1
        # The clock stands still: the wait cannot end the backoff, so the
        # client gives up without a socket and says why.
        with pytest.raises(ChannelConnectionError, match="reconnect backoff"):
            client.connect()
        assert acceptor.accepted == 1
        assert client.network.selector.channel(client.node_id) is None
        clock.now += client.network.connection_delay(client.node_id)
        with pytest.raises(ChannelConnectionError) as exc:
            client.connect()
        assert "reconnect backoff" not in str(exc.value)
        assert acceptor.accepted == 2
    finally:
        client.close()


def test_kafka_client_with_real_clock_reconnects_after_backoff(acceptor):
    client = KafkaClient({"bootstrap.servers": f"{HOST}:{acceptor.port}",
                          "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 40})
    try:
        for n in range(1, 4):
            with pytest.raises(ChannelConnectionError) as exc:
                client.connect()
            # each call waited out the backoff and really connected again
            assert "reconnect backoff" not in str(exc.value)
            assert acceptor.accepted == n
    finally:
        client.close()


def test_metadata_refresh_backoff_doubles_while_attempts_fail():
    from kchannel.client.metadata import Metadata
    md = Metadata([("127.0.0.1", 9092)], refresh_backoff_ms=100, refresh_backoff_max_ms=1000)
    md.request_update()
    waits = []
    now = 0
    for _ in range(6):
        md.failed_update(now)
        md.request_update()
        waits.append(md.time_to_next_update(now))
    assert waits == [100, 200, 400, 800, 1000, 1000]
    md.update({"brokers": [{"node_id": 1, "host": "h", "port": 1}], "topics": []}, now)
    md.request_update()
    assert md.time_to_next_update(now) == 100
    assert md.time_to_next_update(now + 100) == 0
