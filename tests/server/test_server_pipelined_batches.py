"""A Server handed several pipelined requests of one connection in one poll.

The Server takes up to ``max_receives_per_channel`` complete requests from a
connection per poll.  Each is handled as a Kafka broker handles requests of
one connection, one at a time and in order:

* every request is answered, in the order it was sent;
* a SaslHandshake that starts a re-authentication hands what follows it to
  the authenticator (its SaslAuthenticate token; a data request there is a
  failed re-authentication), and data requests behind the completed
  re-authentication are answered afterwards;
* a request that closes the connection answers nothing behind it, while the
  requests before it are answered.

A raw socket client writes each pipeline in one ``sendall`` so that the
whole batch is on the server's socket before it reads.
"""
import socket

import pytest

from kchannel.framing import encode_frame
from kchannel.server.server import MAX_RECEIVES_PER_CHANNEL, Server

from tests.fixtures.raw_client import RawClient, authenticate, handshake, login, request, wait_for
from tests.fixtures.sasl import plain_jaas

METADATA = 3
SASL_HANDSHAKE = 17
API_VERSIONS = 18
SASL_AUTHENTICATE = 36
NONE = 0
ILLEGAL_SASL_STATE = 34


def metadata(corr):
    return request(METADATA, 1, corr, {"topics": []})


@pytest.fixture
def start():
    servers = []

    def _start(listener="PLAINTEXT", **kw):
        if listener == "SASL_PLAINTEXT":
            kw.setdefault("listener_configs", {"SASL_PLAINTEXT": {
                "sasl.enabled.mechanisms": "PLAIN",
                "connections.max.reauth.ms": "60000"}})
            kw.setdefault("jaas", {"PLAIN": plain_jaas()})
        s = Server(listeners=[f"{listener}://127.0.0.1:0"],
                   failed_authentication_delay_ms=0, **kw)
        s.start()
        servers.append(s)
        return s, s.bound_port(listener)

    yield _start
    for s in servers:
        s.shutdown()


def test_default_batches_requests():
    assert MAX_RECEIVES_PER_CHANNEL > 1
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    try:
        assert s.selector.max_receives_per_channel == MAX_RECEIVES_PER_CHANNEL
    finally:
        s.shutdown()


@pytest.mark.parametrize("batch", [MAX_RECEIVES_PER_CHANNEL, 1])
def test_pipelined_requests_answered_in_order(start, batch):
    _, port = start(max_receives_per_channel=batch)
    c = RawClient(port)
    try:
        n = 3 * MAX_RECEIVES_PER_CHANNEL + 5
        # Metadata and ApiVersions interleaved: different handlers, header
        # versions and response sizes, all in one write.
        c.send(b"".join(metadata(i) if i % 3 else
                        request(API_VERSIONS, 3, i, {"client_software_name": "x",
                                                     "client_software_version": "1"})
                        for i in range(n)))
        for i in range(n):
            if i % 3:
                corr, body = c.response(METADATA, 1)
                assert body["brokers"]
            else:
                corr, body = c.response(API_VERSIONS, 3)
                assert body["error_code"] == NONE
            assert corr == i
        c.sock.shutdown(socket.SHUT_WR)
        assert c.frame() is None
    finally:
        c.close()


def test_sasl_handshake_on_plaintext_listener_mid_batch_keeps_order(start):
    """No re-authentication can begin there: the SaslHandshake is answered
    as a request and the requests behind it follow, in order."""
    _, port = start()
    c = RawClient(port)
    try:
        c.send(metadata(1) + handshake(2) + metadata(3) + metadata(4))
        assert c.response(METADATA, 1)[0] == 1
        corr, body = c.response(SASL_HANDSHAKE, 1)
        assert corr == 2 and body["error_code"] == ILLEGAL_SASL_STATE
        assert c.response(METADATA, 1)[0] == 3
        assert c.response(METADATA, 1)[0] == 4
    finally:
        c.close()


def test_reauthentication_in_the_middle_of_a_pipelined_batch(start):
    srv, port = start("SASL_PLAINTEXT")
    c = RawClient(port)
    try:
        assert login(c)["session_lifetime_ms"] > 0
        c.send(metadata(3) + metadata(4) + handshake(5) + authenticate(6)
               + metadata(7) + metadata(8))
        assert c.response(METADATA, 1)[0] == 3
        assert c.response(METADATA, 1)[0] == 4
        corr, body = c.response(SASL_HANDSHAKE, 1)
        assert (corr, body["error_code"]) == (5, NONE)
        corr, body = c.response(SASL_AUTHENTICATE, 2)
        assert (corr, body["error_code"]) == (6, NONE)
        assert body["session_lifetime_ms"] > 0
        assert c.response(METADATA, 1)[0] == 7
        assert c.response(METADATA, 1)[0] == 8
    finally:
        c.close()
    assert srv.metrics.metric("successful-reauthentication-total") == 1
    assert srv.metrics.metric("failed-reauthentication-total") == 0


def test_data_request_between_reauth_handshake_and_token_fails_reauthentication(start):
    """The request right behind the SaslHandshake is the re-authentication's
    next frame: a Metadata request there is not handled as a data request
    but fails the re-authentication (Kafka: IllegalSaslStateException), and
    nothing behind it is answered."""
    srv, port = start("SASL_PLAINTEXT")
    c = RawClient(port)
    try:
        assert login(c)["session_lifetime_ms"] > 0
        c.send(metadata(3) + handshake(4) + metadata(5) + authenticate(6) + metadata(7))
        assert c.response(METADATA, 1)[0] == 3
        corr, body = c.response(SASL_HANDSHAKE, 1)
        assert (corr, body["error_code"]) == (4, NONE)
        rest = []
        while True:
            f = c.frame()
            if f is None:
                break
            rest.append(int.from_bytes(f[:4], "big"))
        # at most the error response to the out-of-place request
        assert rest in ([], [5])
    finally:
        c.close()
    wait_for(lambda: srv.metrics.metric("failed-reauthentication-total") == 1)
    assert srv.metrics.metric("successful-reauthentication-total") == 0


@pytest.mark.parametrize("bad", [
    pytest.param(encode_frame(b"\x00\x03\x00"), id="truncated-header"),
    pytest.param(request(0, 9, 3, b"\x00" * 20), id="api-without-handler"),
    pytest.param(request(METADATA, 999, 3, b""), id="unsupported-version"),
    pytest.param(request(METADATA, 1, 3, b"\x00\x00"), id="truncated-body"),
])
def test_bad_request_mid_batch_closes_without_answering_the_rest(start, bad):
    srv, port = start()
    c = RawClient(port)
    try:
        c.send(metadata(1) + metadata(2) + bad + metadata(4) + metadata(5))
        assert c.response(METADATA, 1)[0] == 1
        assert c.response(METADATA, 1)[0] == 2
        assert c.frame() is None
    finally:
        c.close()
    # the server keeps serving other connections
    c = RawClient(port)
    try:
        c.send(metadata(9))
        assert c.response(METADATA, 1)[0] == 9
    finally:
        c.close()
