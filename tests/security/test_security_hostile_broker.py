"""The kchannel client against a hostile broker on a real socket.

A fake broker answers the client's ApiVersions / SaslHandshake /
SaslAuthenticate legitimately until one chosen step, where it sends
arbitrary bytes, a mutated answer, a wrong correlation id, closes, or goes
silent.  The broker does not know the SCRAM password, so it can never
produce a valid server signature: a SCRAM client must never become ready,
and every outcome must be a kchannel error raised within the client's
timeout (no other exception type, no hang).
"""
import base64
import os
import socket
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.client import KafkaClient
from kchannel.errors import KChannelError, SaslAuthenticationError
from kchannel.protocol.headers import encode_response, parse_request_header

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
TIMEOUT_MS = 400
# Generous bound on how long a connect() with TIMEOUT_MS may take: it is a
# liveness check (no hang), not a speed check.
WATCHDOG_S = 30


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


class HostileBroker:
    """One listening socket; ``plan`` decides how the next connection is
    answered.  ``plan = (mechanism, hostile_step, action)``; ``server_first``
    may override the SCRAM server-first message (a function of the client
    nonce)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.plan = None
        self.server_first = None
        self.server_final = None
        self.closed = False
        self.errors = []
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    def close(self):
        self.closed = True
        self.sock.close()

    def _accept_loop(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn, self.plan), daemon=True).start()

    def _legit(self, mechanism, header, body_bytes, state):
        key, version, cid = header.api_key, header.api_version, header.correlation_id
        if key == API_VERSIONS:
            keys = [{"api_key": 3, "min_version": 0, "max_version": 12},
                    {"api_key": 17, "min_version": 0, "max_version": 1},
                    {"api_key": 18, "min_version": 0, "max_version": 3},
                    {"api_key": 36, "min_version": 0, "max_version": 2}]
            return encode_response(API_VERSIONS, min(version, 3), cid,
                                   {"error_code": 0, "api_keys": keys})
        if key == SASL_HANDSHAKE:
            return encode_response(SASL_HANDSHAKE, version, cid,
                                   {"error_code": 0, "mechanisms": [mechanism]})
        if key == SASL_AUTHENTICATE:
            token = self._token(mechanism, body_bytes, state)
            return encode_response(SASL_AUTHENTICATE, version, cid,
                                   {"error_code": 0, "error_message": None,
                                    "auth_bytes": token, "session_lifetime_ms": 0})
        return None

    def _token(self, mechanism, client_token, state):
        """The mechanism's next server token (PLAIN: empty; SCRAM:
        server-first, then a server-final that cannot carry the right
        signature)."""
        auth = state["auth"]
        state["auth"] += 1
        if mechanism == "PLAIN":
            return b""
        if auth == 0:
            text = client_token.decode("utf-8", "replace")
            cnonce = text.split(",r=", 1)[1].split(",", 1)[0]
            return (self.server_first(cnonce) if self.server_first else
                    f"r={cnonce}hostile,s={base64.b64encode(b'salt' * 4).decode()},"
                    "i=4096").encode()
        size = 32 if mechanism == "SCRAM-SHA-256" else 64
        return self.server_final or b"v=" + base64.b64encode(os.urandom(size))

    def _serve(self, conn, plan):
        mechanism, hostile_step, action = plan
        state = {"auth": 0, "tokens": 0}
        step = 0
        conn.settimeout(WATCHDOG_S)
        try:
            while True:
                size = struct.unpack(">i", _recv_exact(conn, 4))[0]
                payload = _recv_exact(conn, size)
                if state["tokens"] and payload[:2] != b"\x00\x24":
                    # A client that saw SaslHandshake v0 or no SaslAuthenticate
                    # in ApiVersions (a hostile answer may have said so) sends
                    # its tokens as raw frames, as Kafka's client does.
                    state["tokens"] -= 1
                    legit = self._token(mechanism, payload, state)
                    step = self._answer(conn, None, legit, step, hostile_step, action)
                    if step is None:
                        return
                    continue
                header, offset = parse_request_header(payload)
                body = payload[offset:]
                auth_bytes = b""
                if header.api_key == SASL_HANDSHAKE:
                    # the mechanism's client tokens: PLAIN sends one, SCRAM two
                    state["tokens"] = 1 if mechanism == "PLAIN" else 2
                if header.api_key == SASL_AUTHENTICATE:
                    state["tokens"] = max(0, state["tokens"] - 1)
                    # The request's auth bytes: a length-prefixed blob (v0-v1
                    # int32, v2 compact unsigned varint) after the header.
                    auth_bytes = _auth_bytes(body, header.api_version)
                elif header.api_key not in (API_VERSIONS, SASL_HANDSHAKE):
                    # A SaslHandshake v0 client sends raw tokens after the
                    # handshake; this broker always offers v1.
                    pass
                legit = self._legit(mechanism, header, auth_bytes, state)
                step = self._answer(conn, header, legit, step, hostile_step, action)
                if step is None:
                    return
        except (OSError, ConnectionError, ValueError):
            return
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            conn.close()

    @staticmethod
    def _answer(conn, header, legit, step, hostile_step, action):
        """Send the legitimate answer, or the hostile one at ``hostile_step``.
        Returns the next step, or None to end the connection.  ``header`` is
        None for a raw token (no correlation id)."""
        if step != hostile_step:
            if legit is not None:
                conn.sendall(struct.pack(">i", len(legit)) + legit)
            return step + 1
        kind, arg = action
        if kind == "close":
            return None
        if kind == "silence":
            while conn.recv(65536):
                pass
            return None
        legit = legit or b""
        if kind == "raw":
            conn.sendall(arg)
        elif kind == "frame":
            conn.sendall(struct.pack(">i", len(arg)) + arg)
        elif kind == "cid":
            if header is not None:
                bad = (struct.pack(">i", (header.correlation_id + arg) & 0x7FFFFFFF)
                       + legit[4:])
            else:
                bad = struct.pack(">i", arg) + legit
            conn.sendall(struct.pack(">i", len(bad)) + bad)
        elif kind == "mutate":
            data = bytearray(legit or b"\0")
            for pos, xor in arg:
                data[pos % len(data)] ^= xor
            conn.sendall(struct.pack(">i", len(data)) + bytes(data))
        elif kind == "size":
            conn.sendall(struct.pack(">i", arg) + legit[:8])
        return step + 1


def _auth_bytes(body, version):
    if version >= 2:
        n, shift, i = 0, 0, 0
        while True:
            b = body[i]
            i += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return bytes(body[i:i + n - 1])
    n = struct.unpack(">i", body[:4])[0]
    return bytes(body[4:4 + n])


@pytest.fixture(scope="module")
def broker():
    b = HostileBroker()
    yield b
    b.close()


def _configs(mechanism):
    module = PLAIN if mechanism == "PLAIN" else SCRAM
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="alice" password="alice-secret";',
            "request.timeout.ms": str(TIMEOUT_MS),
            "socket.connection.setup.timeout.ms": str(TIMEOUT_MS),
            "socket.connection.setup.timeout.max.ms": str(TIMEOUT_MS)}


def _connect_on_watchdog(broker, mechanism):
    """connect() on a watchdog thread: ``("ready", None)`` or
    ``("error", exc)``; fails the test if it outlives the watchdog."""
    out = {}

    def run():
        client = KafkaClient(_configs(mechanism))
        try:
            client.connect("127.0.0.1", broker.port, timeout_ms=TIMEOUT_MS)
            out["result"] = ("ready", None)
        except BaseException as exc:  # noqa: BLE001 - classified below
            out["result"] = ("error", exc)
        finally:
            client.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(WATCHDOG_S)
    assert not t.is_alive(), "connect() hung past its timeout"
    return out["result"]


_actions = st.one_of(
    st.tuples(st.just("raw"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("frame"), st.binary(max_size=96)),
    st.tuples(st.just("cid"), st.integers(1, 2 ** 31 - 1)),
    st.tuples(st.just("mutate"), st.lists(st.tuples(st.integers(0, 4096), st.integers(1, 255)),
                                          min_size=1, max_size=4)),
    st.tuples(st.just("size"), st.sampled_from([-1, -2 ** 31, 2 ** 31 - 1, 600 * 1024 * 1024])),
    st.tuples(st.just("close"), st.none()),
    st.tuples(st.just("silence"), st.none()),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       step=st.integers(0, 4), action=_actions)
def test_hostile_answers_fail_closed(broker, mechanism, step, action):
    broker.plan = (mechanism, step, action)
    outcome, exc = _connect_on_watchdog(broker, mechanism)
    assert broker.errors == []
    if outcome == "error":
        assert isinstance(exc, KChannelError), repr(exc)
        return
    # Ready: only PLAIN can be accepted by a broker that is not checking
    # anything (PLAIN has no server authentication); a SCRAM broker without
    # the password cannot prove itself.
    assert mechanism == "PLAIN", f"SCRAM client authenticated a hostile broker ({action})"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_rejects_wrong_server_signature(broker, mechanism):
    broker.plan = (mechanism, 99, None)
    outcome, exc = _connect_on_watchdog(broker, mechanism)
    assert outcome == "error" and isinstance(exc, SaslAuthenticationError)
    assert "Invalid server signature" in str(exc)


@pytest.mark.parametrize("first, message", [
    (lambda cnonce: f"r=other{cnonce}x,s=c2FsdHNhbHQ=,i=4096",
     "does not start with client nonce"),
    (lambda cnonce: f"r={cnonce},s=c2FsdHNhbHQ=,i=4096", "did not add a nonce of its own"),
    # The client nonce's last character changed (to one it cannot be).
    (lambda cnonce: f"r={cnonce[:-1]}{'y' if cnonce.endswith('x') else 'x'},s=c2FsdHNhbHQ=,i=4096",
     "does not start with client nonce"),
    (lambda cnonce: f"r={cnonce}x,s=c2FsdHNhbHQ=,i=1", "less than the minimum"),
])
def test_scram_client_rejects_bad_server_first(broker, first, message):
    broker.plan = ("SCRAM-SHA-256", 99, None)
    broker.server_first = first
    try:
        outcome, exc = _connect_on_watchdog(broker, "SCRAM-SHA-256")
    finally:
        broker.server_first = None
    assert outcome == "error" and isinstance(exc, SaslAuthenticationError), exc
    assert message in str(exc)


def test_scram_client_rejects_server_final_without_signature(broker):
    broker.plan = ("SCRAM-SHA-256", 99, None)
    broker.server_final = b"v="
    try:
        outcome, exc = _connect_on_watchdog(broker, "SCRAM-SHA-256")
    finally:
        broker.server_final = None
    assert outcome == "error" and isinstance(exc, SaslAuthenticationError), exc


def test_fake_broker_answers_legitimately_until_its_hostile_step(broker):
    """Control: without a hostile step a PLAIN login completes, so the
    property above exercises every step of a real exchange."""
    broker.plan = ("PLAIN", 99, None)
    assert _connect_on_watchdog(broker, "PLAIN") == ("ready", None)
