"""Whatever a (malicious or broken) broker sends, the client authenticator
either waits, completes a legitimate exchange, or raises a kchannel error --
never an unexpected exception."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import KChannelError
from kchannel.protocol.headers import encode_response, parse_request_header
from kchannel.security.sasl.client_authenticator import SaslClientAuthenticator

from tests.fixtures.sasl import NOW, FrameIO

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


def _advance(mechanism, stage, handshake_v=1):
    """A client after ``stage`` legitimate server answers (0: ApiVersions sent,
    1: handshake sent, 2: first token sent)."""
    io = FrameIO()
    c = SaslClientAuthenticator(mechanism=mechanism,
                                jaas_options={"username": "alice", "password": "pw"})
    c.authenticate(io, NOW)
    if stage >= 1:
        (req,) = io.take()
        cid = parse_request_header(req)[0].correlation_id
        keys = [{"api_key": 17, "min_version": 0, "max_version": handshake_v}]
        if handshake_v:
            keys.append({"api_key": 36, "min_version": 0, "max_version": 2})
        io.feed_frame(encode_response(API_VERSIONS, 0, cid, {"error_code": 0, "api_keys": keys}))
        c.authenticate(io, NOW)
    if stage >= 2:
        (req,) = io.take()
        cid = parse_request_header(req)[0].correlation_id
        io.feed_frame(encode_response(SASL_HANDSHAKE, handshake_v, cid,
                                      {"error_code": 0, "mechanisms": [mechanism]}))
        c.authenticate(io, NOW)
    io.take()
    return io, c


def _correlated(frame_body):
    # A frame carrying the first reserved correlation ids so that it gets
    # past the correlation check more often.
    return st.builds(lambda cid, body: cid.to_bytes(4, "big") + body,
                     st.integers(2 ** 31 - 8, 2 ** 31 - 1), frame_body)


_frames = st.lists(st.binary(max_size=120) | _correlated(st.binary(max_size=120)),
                   min_size=1, max_size=3)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       stage=st.integers(0, 2), handshake_v=st.integers(0, 1), frames=_frames)
def test_any_server_bytes_fail_closed(mechanism, stage, handshake_v, frames):
    io, c = _advance(mechanism, stage, handshake_v)
    for f in frames:
        io.feed_frame(f)
    for _ in range(6):
        try:
            c.authenticate(io, NOW)
        except KChannelError as exc:
            # Classified, not the catch-all for an internal error.
            assert "Unexpected error during SASL" not in str(exc), repr(exc.__cause__)
            return
        if c.complete() or io.decoder.buffered == 0:
            return
