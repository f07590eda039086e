"""The authentication-failure response reaches the client before the close.

Kafka sends the SaslAuthenticate / SaslHandshake error response and only
then closes the connection.  These tests make the orderings that used to lose
that response happen every time, with a raw socket client that controls
exactly which bytes are on the wire:

* a re-authentication whose token arrives together with its SaslHandshake
  (the server reads the token while starting the re-authentication);
* a client that wrote more bytes behind its failing token, which the server
  never reads (closing a socket with unread input makes the kernel send RST
  instead of FIN, and a reset can destroy response bytes still in flight);
* a client that does not read before the server closes;
* on the client side, a broker whose error response is followed at once by
  a reset: the client must report the response, not the reset.

Each test reads the response after the server has closed its end and
asserts on its exact error code and message.
"""
import socket
import struct
import threading

import pytest

from kchannel.framing import FrameDecoder, encode_frame
from kchannel.protocol.headers import decode_response
from kchannel.server import Server
from kchannel.utils import now_ms

from tests.fixtures.raw_client import RawClient, authenticate, handshake, login, request, wait_for
from tests.fixtures.sasl import plain_jaas
from tests.fixtures.sasl_servers import metric
from tests.fixtures.clocks import OffsetClock as Clock

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
METADATA = 3
NONE = 0
SASL_AUTHENTICATION_FAILED = 58


@pytest.fixture
def server():
    servers = []

    def start(**kw):
        s = Server(listeners=["SASL_PLAINTEXT://127.0.0.1:0"],
                   listener_configs={"SASL_PLAINTEXT": {
                       "sasl.enabled.mechanisms": "PLAIN",
                       "connections.max.reauth.ms": "60000"}},
                   jaas={"PLAIN": plain_jaas()}, **kw)
        s.start()
        servers.append(s)
        return s, s.bound_port("SASL_PLAINTEXT")

    yield start
    for s in servers:
        s.shutdown()


def test_reauthentication_token_pipelined_with_handshake_gets_failure_response(server):
    srv, port = server(failed_authentication_delay_ms=0)
    c = RawClient(port)
    try:
        assert login(c)["session_lifetime_ms"] > 0
        # Handshake and the token of another user in one write: the server
        # finds the token already buffered when it starts re-authenticating.
        c.send(handshake(3) + authenticate(4, "bob", "bob-secret"))
        corr, body = decode_response(c.frame(), SASL_HANDSHAKE, 1)
        assert (corr, body["error_code"]) == (3, NONE)
        frame = c.frame()
        assert frame is not None, "connection closed without the failure response"
        corr, body = decode_response(frame, SASL_AUTHENTICATE, 2)
        assert corr == 4
        assert body["error_code"] == SASL_AUTHENTICATION_FAILED
        assert body["error_message"] == ("Cannot change principals during re-authentication "
                                         "from User.alice: User.bob")
        assert c.frame() is None
    finally:
        c.close()
    wait_for(lambda: metric(srv, "failed-reauthentication-total") == 1)
    assert metric(srv, "successful-reauthentication-total") == 0


def test_reauthentication_pipelined_failure_is_delayed_then_answered(server):
    srv, port = server(failed_authentication_delay_ms=50)
    c = RawClient(port)
    try:
        login(c)
        c.send(handshake(3) + authenticate(4, "bob", "bob-secret"))
        decode_response(c.frame(), SASL_HANDSHAKE, 1)
        frame = c.frame()
        assert frame is not None, "connection closed without the failure response"
        _, body = decode_response(frame, SASL_AUTHENTICATE, 2)
        assert body["error_code"] == SASL_AUTHENTICATION_FAILED
        assert c.frame() is None
    finally:
        c.close()


@pytest.mark.parametrize("delay_ms", [0, 20])
def test_failure_response_survives_unread_bytes_behind_the_token(server, delay_ms):
    srv, port = server(failed_authentication_delay_ms=delay_ms)
    c = RawClient(port)
    try:
        c.send(handshake(1))
        decode_response(c.frame(), SASL_HANDSHAKE, 1)
        # Wrong password, and a pipelined request (plus garbage) behind it
        # that the server never reads because authentication fails first.
        extra = request(METADATA, 1, 3, {"topics": []}) + b"\x00" * 70000
        c.send(authenticate(2, "alice", "wrong") + extra)
        frame = c.frame()
        assert frame is not None, "connection closed without the failure response"
        corr, body = decode_response(frame, SASL_AUTHENTICATE, 2)
        assert corr == 2
        assert body["error_code"] == SASL_AUTHENTICATION_FAILED
        assert body["error_message"] == "Authentication failed: Invalid username or password"
        assert c.frame() is None
        # the server read and dropped the rest: a clean close, not a reset
        assert not c.reset
    finally:
        c.close()
    wait_for(lambda: metric(srv, "failed-authentication-total") == 1)


def pending_input(sock):
    """Bytes waiting in a socket's receive queue (peeked, not consumed)."""
    try:
        return len(sock.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return 0


@pytest.mark.parametrize("linger", [True, False])
def test_failure_response_survives_bytes_sent_during_the_delay(server, linger):
    """The client writes again while the server delays its close; those bytes
    are in the server's receive queue when the failure response is sent and
    the socket closed.  With the lingering close the server drops them and
    the client reads the response and a clean EOF; closing at once
    (linger_ms=0) makes the kernel send a reset instead of FIN."""
    clock = Clock()
    srv, port = server(failed_authentication_delay_ms=60000, time=clock)
    # A linger far longer than the test keeps the outcome independent of
    # scheduling; the server's shutdown closes lingering sockets.
    srv.selector.linger_ms = 60000 if linger else 0
    c = RawClient(port)
    try:
        c.send(handshake(1))
        decode_response(c.frame(), SASL_HANDSHAKE, 1)
        c.send(authenticate(2, "alice", "wrong"))
        wait_for(lambda: metric(srv, "failed-authentication-total") == 1)
        (ch,) = srv.selector.channels()     # waiting for its delayed close
        extra = request(METADATA, 1, 3, {"topics": []})
        c.send(extra)
        wait_for(lambda: pending_input(ch.transport.socket) == len(extra))
        clock.offset += 60000
        srv.selector.wakeup()
        frame = c.frame()
        assert frame is not None, "connection closed without the failure response"
        _, body = decode_response(frame, SASL_AUTHENTICATE, 2)
        assert body["error_code"] == SASL_AUTHENTICATION_FAILED
        assert c.frame() is None
        assert c.reset is not linger
    finally:
        c.close()


def test_explicit_close_lingers_and_shutdown_closes_lingering_sockets(server):
    """A server-side close after a response half-closes the socket: the
    client reads the response and EOF, and the server still holds the socket
    (draining) until the client closes or the server shuts down."""
    srv, port = server(failed_authentication_delay_ms=0)
    srv.selector.linger_ms = 60000
    c = RawClient(port)
    try:
        c.send(handshake(1))
        decode_response(c.frame(), SASL_HANDSHAKE, 1)
        c.send(authenticate(2, "alice", "wrong"))
        assert c.frame() is not None
        assert c.frame() is None and not c.reset
        wait_for(lambda: len(srv.selector._lingering) == 1)
        # the peer's EOF ends the linger
        c.sock.shutdown(socket.SHUT_WR)
        wait_for(lambda: len(srv.selector._lingering) == 0)
    finally:
        c.close()
    c2 = RawClient(port)
    try:
        c2.send(handshake(1))
        decode_response(c2.frame(), SASL_HANDSHAKE, 1)
        c2.send(authenticate(2, "alice", "wrong"))
        assert c2.frame() is not None
        wait_for(lambda: len(srv.selector._lingering) == 1)
        entry = srv.selector._lingering[0]
        srv.shutdown()
        assert entry.sock.fileno() == -1
    finally:
        c2.close()


class ResettingBroker:
    """Answers ApiVersions and SaslHandshake, then answers SaslAuthenticate
    with an error and resets the connection at once (SO_LINGER 0): the
    client finds the response in its receive queue followed by a reset."""

    MESSAGE = "Authentication failed: Invalid username or password"

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        from kchannel.protocol.headers import encode_response, parse_request_header
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        conn.settimeout(10)
        decoder = FrameDecoder()
        try:
            while True:
                frame = decoder.next_frame()
                if frame is None:
                    data = conn.recv(65536)
                    if not data:
                        return
                    decoder.feed(data)
                    continue
                header, _ = parse_request_header(bytes(frame))
                if header.api_key == 18:
                    body = {"error_code": 0, "api_keys": [
                        {"api_key": 17, "min_version": 0, "max_version": 1},
                        {"api_key": 18, "min_version": 0, "max_version": 3},
                        {"api_key": 36, "min_version": 0, "max_version": 2}]}
                    out = encode_response(18, min(header.api_version, 3),
                                          header.correlation_id, body)
                elif header.api_key == SASL_HANDSHAKE:
                    out = encode_response(SASL_HANDSHAKE, header.api_version,
                                          header.correlation_id,
                                          {"error_code": 0, "mechanisms": ["PLAIN"]})
                else:
                    out = encode_response(SASL_AUTHENTICATE, header.api_version,
                                          header.correlation_id,
                                          {"error_code": SASL_AUTHENTICATION_FAILED,
                                           "error_message": self.MESSAGE, "auth_bytes": b"",
                                           "session_lifetime_ms": 0})
                    conn.sendall(encode_frame(out))
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                    return
                conn.sendall(encode_frame(out))
        finally:
            conn.close()

    def close(self):
        self.sock.close()
        self.thread.join(10)


def test_client_reads_the_failure_response_that_precedes_a_reset():
    """The kchannel client reports the broker's error response, not the
    reset that came right behind it."""
    from kchannel.client import KafkaClient
    from kchannel.errors import SaslAuthenticationError
    broker = ResettingBroker()
    client = KafkaClient({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                            'required username="alice" password="wrong";'})
    try:
        with pytest.raises(SaslAuthenticationError) as err:
            client.connect("127.0.0.1", broker.port)
        assert str(err.value) == ResettingBroker.MESSAGE
    finally:
        client.close()
        broker.close()
