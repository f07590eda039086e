"""SaslClientAuthenticator fed raw frames, no sockets (Kafka's
SaslClientAuthenticator behaviour: ApiVersions first, version choice,
reserved correlation ids, error mapping, KIP-368 client side)."""
import random

import pytest

from kchannel.errors import (AuthenticationError, ChannelConnectionError,
                             IllegalSaslStateError, SaslAuthenticationError,
                             UnsupportedSaslMechanismError)
from kchannel.network.ops import OP_READ
from kchannel.protocol.headers import encode_response, parse_request_header
from kchannel.protocol.messages import API
from kchannel.security.sasl.client_authenticator import (
    MAX_RESERVED_CORRELATION_ID, MIN_RESERVED_CORRELATION_ID, SaslClientAuthenticator,
    SaslState, is_reserved)
from kchannel.security.sasl.server_authenticator import SaslServerAuthenticator

from tests.fixtures.sasl import NOW, FrameIO, drive, pair, server_callbacks

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


def plain_authenticator(mechanism="PLAIN", user="alice", password="alice-secret", **kw):
    return SaslClientAuthenticator(mechanism=mechanism,
                                   jaas_options={"username": user, "password": password},
                                   **kw)


def sent_request(io):
    (payload,) = io.take()
    header, off = parse_request_header(payload)
    body = API[header.api_key].request.decode(payload, header.api_version, off)
    return header, body


def api_versions_response(cid, keys):
    body = {"error_code": 0, "api_keys": [
        {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in keys]}
    return encode_response(API_VERSIONS, 0, cid, body)


def test_correlation_ids_stay_in_reserved_range():
    """Kafka: SaslAuthenticatorTest.testCorrelationId."""
    c = plain_authenticator()
    count = (MAX_RESERVED_CORRELATION_ID - MIN_RESERVED_CORRELATION_ID) * 2
    ids = {c.next_correlation_id() for _ in range(count)}
    assert len(ids) == MAX_RESERVED_CORRELATION_ID - MIN_RESERVED_CORRELATION_ID + 1
    assert all(is_reserved(i) and i <= 2 ** 31 - 1 for i in ids)
    assert MIN_RESERVED_CORRELATION_ID == 2 ** 31 - 8
    assert not is_reserved(1)


def test_first_request_is_api_versions_v0_with_reserved_id_and_client_id():
    io = FrameIO()
    c = plain_authenticator(configs={"client.id": "my-app"})
    assert c.authenticate(io, NOW) == OP_READ
    header, body = sent_request(io)
    assert (header.api_key, header.api_version) == (API_VERSIONS, 0)
    assert header.correlation_id == MIN_RESERVED_CORRELATION_ID
    assert header.client_id == "my-app"
    assert c.state is SaslState.RECEIVE_APIVERSIONS_RESPONSE


@pytest.mark.parametrize("keys,handshake_v,auth_v", [
    ([(17, 0, 3), (36, 0, 7)], 1, 2),         # newer broker: capped at ours
    ([(17, 0, 1), (36, 0, 1)], 1, 1),
    ([(17, 0, 1), (36, 0, 0)], 1, 0),
    ([(17, 0, 0)], 0, -1),                    # old broker: raw tokens
])
def test_versions_chosen_from_broker_api_versions(keys, handshake_v, auth_v):
    """Kafka: SaslAuthenticatorTest.testSaslUnsupportedClientVersions,
    oldSaslPlainPlaintextServerWithoutSaslAuthenticateHeader (the client's version choice)."""
    io = FrameIO()
    c = plain_authenticator()
    c.authenticate(io, NOW)
    header, _ = sent_request(io)
    io.feed_frame(api_versions_response(header.correlation_id, keys))
    c.authenticate(io, NOW)
    header, body = sent_request(io)
    assert (header.api_key, header.api_version) == (SASL_HANDSHAKE, handshake_v)
    assert body["mechanism"] == "PLAIN"
    assert c.sasl_authenticate_version == auth_v


def _to_handshake_response(io, c, keys=((17, 0, 1), (36, 0, 2))):
    c.authenticate(io, NOW)
    header, _ = sent_request(io)
    io.feed_frame(api_versions_response(header.correlation_id, list(keys)))
    c.authenticate(io, NOW)
    header, _ = sent_request(io)
    return header


def test_unsupported_mechanism_raises_with_server_list():
    io = FrameIO()
    c = plain_authenticator("SCRAM-SHA-512")
    header = _to_handshake_response(io, c)
    io.feed_frame(encode_response(SASL_HANDSHAKE, 1, header.correlation_id,
                                  {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}))
    with pytest.raises(UnsupportedSaslMechanismError) as err:
        c.authenticate(io, NOW)
    assert str(err.value) == ("Client SASL mechanism 'SCRAM-SHA-512' not enabled in the "
                              "server, enabled mechanisms are [PLAIN, SCRAM-SHA-256]")
    assert err.value.enabled_mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    assert not err.value.retriable
    assert c.state is SaslState.FAILED


def test_authentication_failure_carries_server_message():
    io = FrameIO()
    c = plain_authenticator()
    header = _to_handshake_response(io, c)
    io.feed_frame(encode_response(SASL_HANDSHAKE, 1, header.correlation_id,
                                  {"error_code": 0, "mechanisms": ["PLAIN"]}))
    c.authenticate(io, NOW)
    header, body = sent_request(io)
    assert header.api_key == SASL_AUTHENTICATE and body["auth_bytes"] == \
        b"\0alice\0alice-secret"
    io.feed_frame(encode_response(SASL_AUTHENTICATE, 2, header.correlation_id,
                                  {"error_code": 58, "error_message": "nope, not you",
                                   "auth_bytes": b""}))
    with pytest.raises(SaslAuthenticationError) as err:
        c.authenticate(io, NOW)
    assert str(err.value) == "nope, not you"
    assert isinstance(err.value, AuthenticationError) and not err.value.retriable


def test_illegal_sasl_state_handshake_error():
    io = FrameIO()
    c = plain_authenticator()
    header = _to_handshake_response(io, c)
    io.feed_frame(encode_response(SASL_HANDSHAKE, 1, header.correlation_id,
                                  {"error_code": 34, "mechanisms": ["PLAIN"]}))
    with pytest.raises(IllegalSaslStateError) as err:
        c.authenticate(io, NOW)
    assert str(err.value) == ("Unexpected handshake request with client mechanism PLAIN, "
                              "enabled mechanisms are [PLAIN]")


def test_garbage_response_is_illegal_sasl_state():
    io = FrameIO()
    c = plain_authenticator()
    c.authenticate(io, NOW)
    io.take()
    io.feed_frame(b"\x01\x02")
    with pytest.raises(IllegalSaslStateError) as err:
        c.authenticate(io, NOW)
    assert "Invalid SASL mechanism response" in str(err.value)


def test_mismatched_correlation_id_outside_reauthentication_fails():
    io = FrameIO()
    c = plain_authenticator()
    c.authenticate(io, NOW)
    io.take()
    io.feed_frame(api_versions_response(12345, [(17, 0, 1)]))
    with pytest.raises(IllegalSaslStateError):
        c.authenticate(io, NOW)


def test_connection_closed_during_authentication_is_retriable_network_error():
    io = FrameIO()
    c = plain_authenticator()
    c.authenticate(io, NOW)
    io.eof = True
    with pytest.raises(ChannelConnectionError) as err:
        c.authenticate(io, NOW)
    assert err.value.retriable


def test_v0_plain_client_waits_for_server_final_frame():
    """Kafka: SaslAuthenticatorTest.oldSaslPlainPlaintextServerWithoutSaslAuthenticateHeader (the
    client's side)."""
    io = FrameIO()
    c = plain_authenticator()
    header = _to_handshake_response(io, c, keys=[(17, 0, 0)])
    io.feed_frame(encode_response(SASL_HANDSHAKE, 0, header.correlation_id,
                                  {"error_code": 0, "mechanisms": ["PLAIN"]}))
    assert c.authenticate(io, NOW) == OP_READ
    assert io.take() == [b"\0alice\0alice-secret"]     # raw token, no header
    assert not c.complete()
    io.feed_frame(b"")
    assert c.authenticate(io, NOW) == 0
    assert c.complete()


def test_without_handshake_sends_first_token_raw():
    io = FrameIO()
    c = plain_authenticator(handshake_request_enable=False)
    assert c.state is SaslState.INITIAL
    c.authenticate(io, NOW)
    assert io.take() == [b"\0alice\0alice-secret"]


def test_mechanism_error_becomes_authentication_failed():
    class Broken:
        def has_initial_response(self):
            return True

        def evaluate_challenge(self, challenge):
            raise ValueError("boom")

        def is_complete(self):
            return False

        def dispose(self):
            pass

    io = FrameIO()
    c = SaslClientAuthenticator(mechanism="PLAIN", mechanism_factory=lambda m, **kw: Broken())
    header = _to_handshake_response(io, c)
    io.feed_frame(encode_response(SASL_HANDSHAKE, 1, header.correlation_id,
                                  {"error_code": 0, "mechanisms": ["PLAIN"]}))
    with pytest.raises(SaslAuthenticationError) as err:
        c.authenticate(io, NOW)
    assert "Kafka Client will go to AUTHENTICATION_FAILED state" in str(err.value)


# ------------------------------------------------------------------ KIP-368
def _plain_server(**kw):
    return SaslServerAuthenticator(enabled_mechanisms=["PLAIN"], callbacks=server_callbacks(),
                                   **kw)


@pytest.mark.parametrize("seed", range(5))
def test_client_reauth_time_is_85_to_95_percent_of_session(seed):
    client_io, server_io = pair()
    c = plain_authenticator(rng=random.Random(seed))
    drive(c, client_io, _plain_server(connections_max_reauth_ms=100_000), server_io)
    at = c.client_session_reauth_ms()
    assert NOW + 85_000 <= at <= NOW + 95_000
    assert c.session_lifetime_ms == 100_000


def test_no_session_lifetime_no_reauth():
    client_io, server_io = pair()
    c = plain_authenticator()
    drive(c, client_io, _plain_server(), server_io)
    assert c.client_session_reauth_ms() is None


def test_responses_arriving_during_reauthentication_are_kept():
    client_io, server_io = pair()
    c = plain_authenticator()
    s = _plain_server(connections_max_reauth_ms=10_000)
    drive(c, client_io, s, server_io)
    # The application had a request in flight (correlation id 5) when
    # re-authentication began; its response arrives before the handshake's.
    c2 = plain_authenticator()
    c2.reauthenticate(client_io, None, NOW + 9_000, c)
    handshake = server_io.read_frame()
    in_flight_response = (5).to_bytes(4, "big") + b"metadata response bytes"
    client_io.feed_frame(in_flight_response)
    s2 = _plain_server(connections_max_reauth_ms=10_000)
    s2.reauthenticate(server_io, handshake, NOW + 9_000, s)
    drive(c2, client_io, s2, server_io, now=NOW + 9_002)
    assert c2.get_and_clear_responses_received_during_reauthentication() == \
        [in_flight_response]
    assert c2.get_and_clear_responses_received_during_reauthentication() == []
    assert c2.reauthentication_latency_ms() == 2
    # Re-authentication reuses the original ApiVersions: no new request.
    assert c2.sasl_authenticate_version == 2


def test_reauthentication_needs_original_api_versions():
    c = plain_authenticator(handshake_request_enable=False)
    with pytest.raises(IllegalSaslStateError):
        c.reauthenticate(FrameIO(), None, NOW)


def test_requests_kept_between_connections_are_the_bytes_of_each_connection():
    """The client keeps request headers and constant bodies between
    connections: every connection still sends its own client id, mechanism,
    correlation ids and tokens (full exchanges with the server
    authenticator; connections alternate client ids and mechanisms)."""
    from kchannel.protocol.headers import RequestHeader, encode_request
    runs = [("app-a", "SCRAM-SHA-256"), ("app-b", "SCRAM-SHA-256"), ("app-a", "PLAIN"),
            ("app-a", "SCRAM-SHA-256"), ("", "SCRAM-SHA-512")]
    tokens = []
    for client_id, mechanism in runs:
        client_io, server_io = pair()
        sent = client_io.out
        c = plain_authenticator(mechanism, configs={"client.id": client_id})
        s = SaslServerAuthenticator(enabled_mechanisms=["PLAIN", "SCRAM-SHA-256",
                                                        "SCRAM-SHA-512"],
                                    callbacks=server_callbacks())
        drive(c, client_io, s, server_io)
        assert s.principal().name == "alice"
        requests = []
        for payload in sent:
            header, off = parse_request_header(payload)
            body = API[header.api_key].request.decode(payload, header.api_version, off)
            # what encoding this request afresh gives
            assert payload == encode_request(
                RequestHeader(header.api_key, header.api_version, header.correlation_id,
                              client_id), body)
            requests.append((header.api_key, header.correlation_id, body))
        assert [(k, cid) for k, cid, _ in requests] == [
            (API_VERSIONS, MIN_RESERVED_CORRELATION_ID),
            (SASL_HANDSHAKE, MIN_RESERVED_CORRELATION_ID + 1),
            (SASL_AUTHENTICATE, MIN_RESERVED_CORRELATION_ID + 2)] + (
            [] if mechanism == "PLAIN" else [(SASL_AUTHENTICATE, MIN_RESERVED_CORRELATION_ID + 3)])
        assert requests[1][2] == {"mechanism": mechanism}
        tokens.append(requests[2][2]["auth_bytes"])
    # SCRAM's client-first carries a fresh nonce every time
    scram_firsts = [t for t, (_, m) in zip(tokens, runs) if m != "PLAIN"]
    assert len(set(scram_firsts)) == len(scram_firsts)
