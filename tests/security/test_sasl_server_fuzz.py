"""Any bytes, in any pre-authentication server state, fail closed.

The server authenticator must either keep waiting, answer with a proper
response, or raise a kchannel error -- never authenticate, never raise
anything else (IndexError, struct.error, UnicodeDecodeError ...).
"""
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import KChannelError
from kchannel.network.ops import OP_READ, OP_WRITE
from kchannel.security.sasl.server_authenticator import SaslServerAuthenticator

from tests.fixtures.sasl import NOW, FrameIO, request, server_callbacks

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
CALLBACKS = server_callbacks()


def _fuzz_server(mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")):
    return SaslServerAuthenticator(enabled_mechanisms=list(mechanisms), callbacks=CALLBACKS,
                                   max_receive_size=4096)


def _prefix(name):
    """Put a fresh server in the named state."""
    io, server = FrameIO(), _fuzz_server()
    steps = {
        "INITIAL_REQUEST": [],
        "HANDSHAKE_REQUEST": [request(API_VERSIONS, 3, {"client_software_name": "x",
                                                        "client_software_version": "1"})],
        "AUTHENTICATE_v0_PLAIN": [request(SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})],
        "AUTHENTICATE_v1_PLAIN": [request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})],
        "AUTHENTICATE_v1_SCRAM": [request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})],
        "AUTHENTICATE_v0_SCRAM_mid": [request(SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-512"}),
                                      b"n,,n=alice,r=abcdefgh"],
        "AUTHENTICATE_v1_SCRAM_mid": [
            request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"}),
            request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=abcdefgh"}, 2)],
    }[name]
    for frame in steps:
        io.feed_frame(frame)
        server.authenticate(io, NOW)
    io.take()
    assert not server.complete()
    return io, server


STATES = ["INITIAL_REQUEST", "HANDSHAKE_REQUEST", "AUTHENTICATE_v0_PLAIN",
          "AUTHENTICATE_v1_PLAIN", "AUTHENTICATE_v1_SCRAM", "AUTHENTICATE_v0_SCRAM_mid",
          "AUTHENTICATE_v1_SCRAM_mid"]

# Frames that get past the header check often: a plausible header for one of
# the pre-auth APIs (or any key), any version, then arbitrary bytes.
_kafka_like = st.builds(
    lambda key, version, cid, cid_len, body: struct.pack(">hhih", key, version, cid, cid_len)
    + body,
    st.sampled_from([API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, 3, 0, 7, 30000, -1]),
    st.integers(-2, 5) | st.integers(-32768, 32767),
    st.integers(-2 ** 31, 2 ** 31 - 1),
    st.integers(-2, 8),
    st.binary(max_size=64),
)
_frames = st.lists(st.binary(max_size=200) | _kafka_like, min_size=1, max_size=4)


def _run(io, server):
    for _ in range(8):
        try:
            ops = server.authenticate(io, NOW)
        except KChannelError as exc:
            # Classified, not the catch-all for an internal error.
            assert "Unexpected error during SASL" not in str(exc), repr(exc.__cause__)
            server.handle_authentication_failure()
            assert not server.complete()
            return
        assert ops in (OP_READ, OP_WRITE, OP_READ | OP_WRITE)
        assert not server.complete()
        if io.decoder.buffered == 0:
            return


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=st.sampled_from(STATES), frames=_frames)
def test_any_frames_fail_closed(state, frames):
    io, server = _prefix(state)
    for frame in frames:
        io.feed_frame(frame)
    _run(io, server)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=st.sampled_from(STATES), data=st.binary(min_size=1, max_size=600))
def test_any_raw_bytes_fail_closed(state, data):
    io, server = _prefix(state)
    io.feed(data)
    _run(io, server)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.binary(max_size=200) | _kafka_like, more=_frames)
def test_any_first_reauthentication_frame_fails_closed(frame, more):
    # A completed PLAIN session, then hostile bytes where the re-authentication
    # SaslHandshake should be.
    io, server = _prefix("AUTHENTICATE_v1_PLAIN")
    io.feed_frame(request(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0alice-secret"}, 3))
    server.authenticate(io, NOW)
    assert server.complete()
    io.take()
    fresh = SaslServerAuthenticator(enabled_mechanisms=["PLAIN", "SCRAM-SHA-256"],
                                    callbacks=CALLBACKS, connections_max_reauth_ms=1000)
    try:
        fresh.reauthenticate(io, frame, NOW + 1, server)
    except KChannelError as exc:
        assert "Unexpected error during SASL" not in str(exc), repr(exc.__cause__)
        assert not fresh.complete()
        return
    for f in more:
        io.feed_frame(f)
    _run(io, fresh)
