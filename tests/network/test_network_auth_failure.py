"""Which authentication failures close late (Kafka's
``DelayedResponseAuthenticationException``).

KafkaChannel.prepare raises ``DelayedResponseAuthenticationError`` when the
authenticator failed; the selector then closes after
``connection.failed.authentication.delay.ms`` and sends the authenticator's
error response first.  A TLS handshake failure is raised as is and closes at
once.  Kafka counterparts: SelectorTest / SslSelectorTest and
SaslAuthenticatorTest's failed-authentication delay cases.
"""
import socket
import ssl
import threading

import pytest

from kchannel.errors import (AuthenticationError, DelayedResponseAuthenticationError,
                             SslAuthenticationError, UnsupportedSaslMechanismError)
from kchannel.framing import FrameDecoder, encode_frame
from kchannel.network.authenticator import Authenticator
from kchannel.network.channel import ChannelState, KafkaChannel, State
from kchannel.network.channel_builder import _plaintext_transport
from kchannel.network.ops import OP_READ
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.security.sasl.channel_builder import SaslChannelBuilder

from tests.fixtures.selectors import listening_selector

SASL_HANDSHAKE = 17


class RefusingAuthenticator(Authenticator):
    """Reads one frame and refuses it."""

    def authenticate(self, io, now):
        if io.read_frame() is None:
            return OP_READ
        raise AuthenticationError("Authentication failed: refused")

    def complete(self):
        return False

    def principal(self):
        return None


def test_prepare_wraps_the_authenticators_failure():
    a, b = socket.socketpair()
    try:
        ch = KafkaChannel("x", _plaintext_transport(a), RefusingAuthenticator, mode="server")
        ch.mark_connected()
        b.sendall(encode_frame(b"credentials"))
        with pytest.raises(DelayedResponseAuthenticationError) as err:
            for _ in range(100):
                ch.prepare(0)
        cause = err.value.__cause__
        assert type(cause) is AuthenticationError
        assert str(err.value) == str(cause) == "Authentication failed: refused"
        # The channel's state carries the authenticator's own exception.
        assert ch.state == ChannelState.AUTHENTICATION_FAILED
        assert ch.state.exception is cause
        ch.close()
    finally:
        a.close()
        b.close()


@pytest.fixture
def sasl_ssl_server(pki):
    configs = dict(pki.server_configs())
    configs["sasl.enabled.mechanisms"] = "PLAIN"
    configs["listener.name.sasl_ssl.plain.sasl.jaas.config"] = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')
    with listening_selector(SaslChannelBuilder("server", configs, "SASL_SSL", "SASL_SSL"), 8,
                            failed_authentication_delay_ms=1000) as served:
        yield served


def _poll_until(sel, done, polls=500):
    for _ in range(polls):
        sel.poll(10)
        if done():
            return
    raise AssertionError("the selector never got there")


def _decode_frame(sock):
    dec = FrameDecoder()
    while True:
        frame = dec.next_frame()
        if frame is not None:
            return frame
        data = sock.recv(4096)
        if not data:
            return None
        dec.feed(data)


def test_sasl_failure_closes_after_the_delay_tls_failure_at_once(pki, sasl_ssl_server):
    sel, addr, ids, clock = sasl_ssl_server
    failures = lambda: sel.metrics.snapshot()["failed-authentication-total"]

    # Not TLS at all: the handshake fails, the connection closes at once.
    plain = socket.create_connection(addr)
    plain.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"\0" * 64)
    _poll_until(sel, lambda: ids and ids[0] in sel.disconnected)
    assert sel.disconnected[ids[0]] == State.AUTHENTICATION_FAILED
    assert isinstance(sel.disconnected[ids[0]].exception, SslAuthenticationError)
    assert failures() == 1
    plain.close()

    # TLS fine, SASL mechanism refused: the close (and the error response)
    # wait for the delay.
    ctx = ssl.create_default_context(cafile=pki.ca.cert_path)
    outcome = {}

    def client():
        with socket.create_connection(addr, timeout=30) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(encode_frame(encode_request(
                    RequestHeader(SASL_HANDSHAKE, 1, 7, "test"),
                    {"mechanism": "SCRAM-SHA-512"})))
                outcome["response"] = _decode_frame(tls)
                outcome["then"] = _decode_frame(tls)

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    _poll_until(sel, lambda: failures() == 2)
    failed_id = ids[1]
    for _ in range(20):
        sel.poll(10)
        assert failed_id not in sel.disconnected and "response" not in outcome
    clock.now += 1000
    _poll_until(sel, lambda: failed_id in sel.disconnected)
    thread.join(30)
    state = sel.disconnected[failed_id]
    assert state == State.AUTHENTICATION_FAILED
    # The authenticator's exception, not the wrapper that routed the close.
    assert isinstance(state.exception, UnsupportedSaslMechanismError)
    correlation_id, body = decode_response(outcome["response"], SASL_HANDSHAKE, 1)
    assert correlation_id == 7 and body["error_code"] == 33
    assert body["mechanisms"] == ["PLAIN"]
    assert outcome["then"] is None
