"""SaslServerAuthenticator fed raw frames, no sockets.

Scenarios follow Kafka's SaslAuthenticatorTest / SaslServerAuthenticatorTest:
pre-auth request rules, size limits, handshake versions, mechanisms, failures
and the deferred failure response, KIP-368 session lifetime and
re-authentication rules.
"""
import pytest

from kchannel.errors import (IllegalSaslStateError, InvalidRequestError, KChannelError,
                             SaslAuthenticationError, UnsupportedSaslMechanismError)
from kchannel.network.ops import OP_READ, OP_WRITE
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.errors import Errors
from kchannel.security.sasl.client_authenticator import SaslClientAuthenticator
from kchannel.security.sasl.mechanism import TokenCredential
from kchannel.security.sasl.server_authenticator import (SaslServerAuthenticator,
                                                          SaslState)
from kchannel.security.sasl import scram

from tests.fixtures.sasl import (NOW, FrameIO, drive, pair, raw_request, request,
                                            response, scram_store, server_callbacks,
                                            size_prefix)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 18, 17, 36, 3

SERVER_API_LIST = [
    {"api_key": 3, "min_version": 0, "max_version": 12},
    {"api_key": 17, "min_version": 0, "max_version": 1},
    {"api_key": 18, "min_version": 0, "max_version": 3},
    {"api_key": 36, "min_version": 0, "max_version": 2},
]


def supplier(version):
    return {"error_code": 0, "api_keys": SERVER_API_LIST, "throttle_time_ms": 0}


def make_server(mechanisms=("PLAIN",), **kw):
    kw.setdefault("callbacks", server_callbacks())
    kw.setdefault("api_versions_supplier", supplier)
    return SaslServerAuthenticator(enabled_mechanisms=list(mechanisms), **kw)


def handshake(io, server, mechanism="PLAIN", version=1, cid=2):
    io.feed_frame(request(SASL_HANDSHAKE, version, {"mechanism": mechanism}, cid))
    server.authenticate(io, NOW)
    (payload,) = io.take()
    return response(payload, SASL_HANDSHAKE, version)[1]


def plain_token(user, password):
    return b"\0" + user.encode() + b"\0" + password.encode()


def authenticate_v1(io, server, token, version=2, cid=3):
    io.feed_frame(request(SASL_AUTHENTICATE, version, {"auth_bytes": token}, cid))
    return server.authenticate(io, NOW)


# --------------------------------------------------------------- ApiVersions
@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_before_handshake_lists_server_apis(version):
    """Kafka: SaslAuthenticatorTest.testValidApiVersionsRequest;
    SaslServerAuthenticatorTest.testOldestApiVersionsRequest, testLatestApiVersionsRequest."""
    io, server = FrameIO(), make_server()
    body = {"client_software_name": "kchannel", "client_software_version": "1.0"}
    io.feed_frame(request(API_VERSIONS, version, body, 7))
    assert server.authenticate(io, NOW) == OP_READ
    (payload,) = io.take()
    cid, resp = response(payload, API_VERSIONS, version)
    assert cid == 7 and resp["error_code"] == 0
    assert {k["api_key"] for k in resp["api_keys"]} == {3, 17, 18, 36}
    assert server.state is SaslState.HANDSHAKE_REQUEST
    if version >= 3:
        assert server.client_information == ("kchannel", "1.0")
    # The handshake may follow.
    assert handshake(io, server)["error_code"] == 0


def test_api_versions_unsupported_version_gets_v0_fallback_and_connection_stays_usable():
    """Kafka: SaslAuthenticatorTest.testApiVersionsRequestWithServerUnsupportedVersion."""
    io, server = FrameIO(), make_server()
    # Body of an unknown future version: must not be parsed at all.
    io.feed_frame(raw_request(API_VERSIONS, 32767, b"\xff\xfe garbage", 1))
    server.authenticate(io, NOW)
    (payload,) = io.take()
    assert payload[:4] == (1).to_bytes(4, "big")      # header v0: correlation id only
    _, resp = response(payload, API_VERSIONS, 0)
    assert resp["error_code"] == Errors.UNSUPPORTED_VERSION
    assert [(k["api_key"], k["min_version"]) for k in resp["api_keys"]] == [(18, 0)]
    assert server.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
    # A supported ApiVersions, the handshake and PLAIN still work.
    io.feed_frame(request(API_VERSIONS, 3, {"client_software_name": "a",
                                            "client_software_version": "1"}, 2))
    server.authenticate(io, NOW)
    assert response(io.take()[0], API_VERSIONS, 3)[1]["error_code"] == 0
    assert handshake(io, server, cid=3)["error_code"] == 0
    assert authenticate_v1(io, server, plain_token("alice", "alice-secret")) == 0
    assert server.complete() and server.principal() == KafkaPrincipal("User", "alice")


def test_api_versions_invalid_software_name_gets_invalid_request_and_stays_usable():
    """Kafka: SaslAuthenticatorTest.testInvalidApiVersionsRequest."""
    io, server = FrameIO(), make_server()
    io.feed_frame(request(API_VERSIONS, 3, {"client_software_name": "  ",
                                            "client_software_version": "   "}, 1))
    server.authenticate(io, NOW)
    assert response(io.take()[0], API_VERSIONS, 3)[1]["error_code"] == Errors.INVALID_REQUEST
    assert server.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
    io.feed_frame(request(API_VERSIONS, 0, {}, 2))
    server.authenticate(io, NOW)
    assert response(io.take()[0], API_VERSIONS, 0)[1]["error_code"] == 0


def test_api_versions_twice_fails_without_response():
    io, server = FrameIO(), make_server()
    io.feed_frame(request(API_VERSIONS, 0, {}, 1))
    server.authenticate(io, NOW)
    io.take()
    io.feed_frame(request(API_VERSIONS, 0, {}, 2))
    with pytest.raises(InvalidRequestError):
        server.authenticate(io, NOW)
    assert io.take() == [] and server.state is SaslState.FAILED


@pytest.mark.parametrize("handshake_version", [0, 1])
def test_api_versions_after_handshake_fails(handshake_version):
    """Kafka: SaslAuthenticatorTest.testInvalidApiVersionsRequestSequence."""
    io, server = FrameIO(), make_server()
    handshake(io, server, version=handshake_version)
    io.feed_frame(request(API_VERSIONS, 0, {}, 5))
    with pytest.raises(KChannelError):
        server.authenticate(io, NOW)
    assert not server.complete()


# ---------------------------------------------------- disallowed / malformed
def test_metadata_before_handshake_is_illegal_sasl_state_from_header_alone():
    """Kafka: SaslAuthenticatorTest.testDisallowedKafkaRequestsBeforeAuthentication;
    SaslServerAuthenticatorTest.testUnexpectedRequestType."""
    io, server = FrameIO(), make_server()
    # A Metadata header followed by a body no schema could parse.
    io.feed_frame(raw_request(METADATA, 12, b"\xff" * 3, 1))
    with pytest.raises(IllegalSaslStateError) as err:
        server.authenticate(io, NOW)
    assert str(err.value) == "Unexpected Kafka request of type METADATA during SASL handshake."
    assert err.value.error_code == 34
    # Kafka sends nothing for this case, then or at close time.
    server.handle_authentication_failure()
    assert io.take() == []


def test_metadata_after_handshake_v1_is_illegal_sasl_state():
    """Kafka: SaslAuthenticatorTest.testDisallowedKafkaRequestsBeforeAuthentication (after the
    handshake)."""
    io, server = FrameIO(), make_server()
    handshake(io, server)
    io.feed_frame(raw_request(METADATA, 1, b"\x00\x00\x00\x00", 3))
    with pytest.raises(IllegalSaslStateError) as err:
        server.authenticate(io, NOW)
    assert str(err.value) == ("Unexpected Kafka request of type METADATA during SASL "
                              "authentication.")
    # Kafka's MetadataRequest.getErrorResponse goes out before the close.
    server.handle_authentication_failure()
    (payload,) = io.take()
    # (v1 has no throttle time)
    assert response(payload, METADATA, 1) == (3, {"brokers": [], "controller_id": -1,
                                                  "topics": []})


def test_unparsable_request_after_handshake_gets_no_response():
    """A refused request whose body does not parse is closed without an
    answer, as Kafka (its parseRequest fails first)."""
    io, server = FrameIO(), make_server()
    handshake(io, server)
    io.feed_frame(raw_request(METADATA, 1, b"\x00\x00", 3))
    with pytest.raises(IllegalSaslStateError):
        server.authenticate(io, NOW)
    server.handle_authentication_failure()
    assert io.take() == []


def test_unknown_api_key_is_not_a_kafka_request():
    io, server = FrameIO(), make_server()
    io.feed_frame(raw_request(30000, 0, b"", 1))
    with pytest.raises(UnsupportedSaslMechanismError) as err:
        server.authenticate(io, NOW)
    assert "GSSAPI is not supported by server" in str(err.value)


def test_random_first_packet_without_gssapi_fails():
    """Kafka: SaslAuthenticatorTest.testInvalidSaslPacket (before the handshake)."""
    io, server = FrameIO(), make_server()
    io.feed_frame(b"\x60\x82\x02\x10" + bytes(range(200)))
    with pytest.raises(UnsupportedSaslMechanismError):
        server.authenticate(io, NOW)
    assert not server.complete()


@pytest.mark.parametrize("version", [2, 32767, -1])
def test_unsupported_handshake_version_closes_without_response(version):
    """Kafka: SaslAuthenticatorTest.testSaslHandshakeRequestWithUnsupportedVersion."""
    io, server = FrameIO(), make_server()
    io.feed_frame(request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 2)[:0]
                  + raw_request(SASL_HANDSHAKE, version, b"\x00\x05PLAIN", 2))
    with pytest.raises(InvalidRequestError):
        server.authenticate(io, NOW)
    assert io.take() == []
    assert server.state is SaslState.FAILED


def test_garbage_after_handshake_v1_fails():
    """Kafka: SaslAuthenticatorTest.testInvalidSaslPacket (after the handshake)."""
    io, server = FrameIO(), make_server()
    handshake(io, server)
    io.feed_frame(bytes(range(256)) * 4)
    with pytest.raises(KChannelError):
        server.authenticate(io, NOW)
    assert not server.complete()


def test_garbage_after_handshake_v0_fails_authentication():
    """Kafka: SaslAuthenticatorTest.testInvalidSaslPacket (after a v0 handshake)."""
    io, server = FrameIO(), make_server()
    handshake(io, server, version=0)
    io.feed_frame(bytes(range(256)) * 4)
    with pytest.raises(SaslAuthenticationError):
        server.authenticate(io, NOW)
    assert not server.complete()


def test_unsupported_sasl_authenticate_version_fails():
    io, server = FrameIO(), make_server()
    handshake(io, server)
    io.feed_frame(raw_request(SASL_AUTHENTICATE, 9, b"\x00\x00\x00\x00", 3))
    with pytest.raises(InvalidRequestError):
        server.authenticate(io, NOW)


# ---------------------------------------------------------------- size limits
@pytest.mark.parametrize("size", [524289, 2 ** 31 - 1, -1])
@pytest.mark.parametrize("after_handshake", [False, True])
def test_oversized_receive_fails_before_reading_body(size, after_handshake):
    """Kafka: SaslAuthenticatorTest.testPacketSizeTooBig;
    SaslServerAuthenticatorTest.testOversizeRequest."""
    io, server = FrameIO(), make_server()
    if after_handshake:
        handshake(io, server)
    io.feed(size_prefix(size) + b"\x00" * 1020)
    with pytest.raises(SaslAuthenticationError) as err:
        server.authenticate(io, NOW)
    assert str(err.value) == "Failing SASL authentication due to invalid receive size"
    assert io.sizes_set[-1] == 524288


def test_max_receive_size_config_is_enforced_and_restored_after_authentication():
    """Kafka: SaslAuthenticatorTest.testSaslAuthenticationMaxReceiveSize."""
    io, server = FrameIO(max_receive_size=10_000_000), make_server(max_receive_size=1024)
    handshake(io, server)
    assert authenticate_v1(io, server, plain_token("alice", "alice-secret")) == 0
    assert server.complete()
    assert io.decoder.max_size == 10_000_000     # data phase limit back

    io2, server2 = FrameIO(), make_server(max_receive_size=1024)
    io2.feed_frame(request(SASL_HANDSHAKE, 1, {"mechanism": "P" * 1024}, 1))
    with pytest.raises(SaslAuthenticationError):
        server2.authenticate(io2, NOW)

    io3, server3 = FrameIO(), make_server(max_receive_size=1024)
    handshake(io3, server3)
    io3.feed_frame(request(SASL_AUTHENTICATE, 2,
                           {"auth_bytes": plain_token("alice", "x" * 1024)}, 3))
    with pytest.raises(SaslAuthenticationError):
        server3.authenticate(io3, NOW)


def test_exact_max_size_frame_is_accepted():
    io, server = FrameIO(), make_server(max_receive_size=64)
    payload = request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, 2)
    payload = payload[:-7] + b"\x00\x05PLAIN"
    assert len(payload) <= 64
    io.feed_frame(payload)
    server.authenticate(io, NOW)
    assert response(io.take()[0], SASL_HANDSHAKE, 1)[1]["error_code"] == 0


# ------------------------------------------------------------------ mechanisms
@pytest.mark.parametrize("version", [0, 1])
def test_unknown_mechanism_lists_enabled_and_sends_response_only_at_close(version):
    """Kafka: SaslAuthenticatorTest.testInvalidMechanism."""
    io, server = FrameIO(), make_server(("PLAIN", "SCRAM-SHA-256"))
    io.feed_frame(request(SASL_HANDSHAKE, version, {"mechanism": "DIGEST-MD5"}, 9))
    with pytest.raises(UnsupportedSaslMechanismError) as err:
        server.authenticate(io, NOW)
    assert str(err.value) == "Unsupported SASL mechanism DIGEST-MD5"
    assert io.take() == []            # deferred until the delayed close
    server.handle_authentication_failure()
    (payload,) = io.take()
    cid, resp = response(payload, SASL_HANDSHAKE, version)
    assert cid == 9
    assert resp["error_code"] == Errors.UNSUPPORTED_SASL_MECHANISM
    assert resp["mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]


def test_handshake_lists_enabled_mechanisms():
    io, server = FrameIO(), make_server(("SCRAM-SHA-512", "PLAIN"))
    resp = handshake(io, server, "PLAIN")
    assert resp == {"error_code": 0, "mechanisms": ["SCRAM-SHA-512", "PLAIN"]}


def test_no_enabled_mechanisms_is_rejected():
    with pytest.raises(ValueError):
        SaslServerAuthenticator(enabled_mechanisms=[])


MATRIX = [(m, v) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") for v in (0, 1)]


@pytest.mark.parametrize("mechanism,handshake_version", MATRIX)
def test_mechanism_and_handshake_version_matrix(mechanism, handshake_version):
    """Kafka: SaslAuthenticatorTest.testMultipleServerMechanisms,
    oldSaslPlainPlaintextServerWithoutSaslAuthenticateHeader,
    oldSaslScramPlaintextServerWithoutSaslAuthenticateHeader."""
    client_io, server_io = pair()
    server = make_server(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
    client = SaslClientAuthenticator(mechanism=mechanism,
                                     jaas_options={"username": "alice",
                                                   "password": "alice-secret"})
    if handshake_version == 0:
        # A broker advertising SaslHandshake v0 only and no SaslAuthenticate.
        server._api_versions_supplier = lambda v: {
            "error_code": 0, "throttle_time_ms": 0,
            "api_keys": [{"api_key": 17, "min_version": 0, "max_version": 0},
                         {"api_key": 18, "min_version": 0, "max_version": 3}]}
    drive(client, client_io, server, server_io)
    assert server.principal() == KafkaPrincipal("User", "alice")
    assert server.mechanism == mechanism
    assert client.sasl_handshake_version == handshake_version
    assert client.sasl_authenticate_version == (2 if handshake_version else -1)
    assert server.connected_client_supports_reauthentication() == (handshake_version == 1)
    # Nothing left over in either direction.
    assert client_io.decoder.buffered == 0 and server_io.decoder.buffered == 0


def test_plain_v0_server_sends_empty_final_frame():
    """Kafka: SaslAuthenticatorTest.oldSaslPlainPlaintextClientWithoutSaslAuthenticateHeader."""
    io, server = FrameIO(), make_server()
    handshake(io, server, version=0)
    io.feed_frame(plain_token("alice", "alice-secret"))
    assert server.authenticate(io, NOW) == 0
    assert io.take() == [b""]         # old clients wait for this frame


def test_scram_v0_raw_tokens():
    """Kafka: SaslAuthenticatorTest.oldSaslScramPlaintextClientWithoutSaslAuthenticateHeader."""
    client_io, server_io = pair()
    server = make_server(("SCRAM-SHA-256",))
    server._api_versions_supplier = lambda v: {
        "error_code": 0, "api_keys": [{"api_key": 17, "min_version": 0, "max_version": 0}]}
    client = SaslClientAuthenticator(mechanism="SCRAM-SHA-256",
                                     jaas_options={"username": "bob", "password": "bob-secret"})
    drive(client, client_io, server, server_io)
    # ApiVersions, handshake, server-first, server-final: raw tokens are not
    # Kafka responses (no correlation id).
    sent = server_io.out
    assert sent[2].startswith(b"r=") and sent[3].startswith(b"v=")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_unknown_user_and_bad_password_look_the_same(mechanism):
    """Kafka: SaslAuthenticatorTest.testInvalidPasswordSaslPlain, testInvalidUsernameSaslPlain,
    testInvalidPasswordSaslScram, testUnknownUserSaslScram."""
    messages = []
    for user, password in (("nobody", "whatever"), ("alice", "wrong")):
        client_io, server_io = pair()
        server = make_server(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))
        client = SaslClientAuthenticator(mechanism=mechanism,
                                         jaas_options={"username": user, "password": password})
        with pytest.raises(SaslAuthenticationError) as server_err:
            drive(client, client_io, server, server_io)
        assert not server.complete()
        # The error response leaves only at the (delayed) close.
        server.handle_authentication_failure()
        with pytest.raises(SaslAuthenticationError) as client_err:
            client.authenticate(client_io, NOW)
        assert str(client_err.value) == str(server_err.value)
        messages.append(str(client_err.value))
    assert messages[0] == messages[1]
    assert "nobody" not in messages[0]


def test_scram_credentials_for_one_variant_only():
    """Kafka: SaslAuthenticatorTest.testUserCredentialsUnavailableForScramMechanism."""
    store = scram_store({"carol": "carol-secret"}, mechanisms=["SCRAM-SHA-256"])
    callbacks = server_callbacks(store=store)
    for mechanism, ok in (("SCRAM-SHA-256", True), ("SCRAM-SHA-512", False)):
        client_io, server_io = pair()
        server = make_server(("SCRAM-SHA-256", "SCRAM-SHA-512"), callbacks=callbacks)
        client = SaslClientAuthenticator(mechanism=mechanism,
                                         jaas_options={"username": "carol",
                                                       "password": "carol-secret"})
        if ok:
            drive(client, client_io, server, server_io)
            assert server.principal().name == "carol"
        else:
            with pytest.raises(SaslAuthenticationError):
                drive(client, client_io, server, server_io)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_user_names_with_comma_and_equals(mechanism):
    """Kafka: SaslAuthenticatorTest.testScramUsernameWithSpecialCharacters."""
    client_io, server_io = pair()
    server = make_server((mechanism,))
    client = SaslClientAuthenticator(mechanism=mechanism,
                                     jaas_options={"username": "us,er=1",
                                                   "password": "odd-secret"})
    drive(client, client_io, server, server_io)
    assert server.principal() == KafkaPrincipal("User", "us,er=1")


def test_mechanism_failure_other_than_sasl_error_gets_generic_message():
    """Kafka: SaslAuthenticatorTest.testClientExceptionDoesNotContainSensitiveData."""
    class Broken:
        def evaluate_response(self, response, now):
            raise KeyError("user alice does not exist")

        def is_complete(self):
            return False

        def dispose(self):
            pass

    io, server = FrameIO(), make_server(mechanism_factory=lambda m, **kw: Broken())
    handshake(io, server)
    with pytest.raises(SaslAuthenticationError) as err:
        authenticate_v1(io, server, b"anything")
    expected = ("Authentication failed during authentication due to invalid credentials "
                "with SASL mechanism PLAIN")
    assert str(err.value) == expected
    server.handle_authentication_failure()
    body = response(io.take()[0], SASL_AUTHENTICATE, 2)[1]
    assert body["error_code"] == 58 and body["error_message"] == expected


def test_successful_response_must_be_flushed_before_complete():
    io, server = FrameIO(), make_server()
    handshake(io, server)
    io.flush_ok = False
    assert authenticate_v1(io, server, plain_token("alice", "alice-secret")) == OP_WRITE
    assert not server.complete()
    assert server.authenticate(io, NOW) == OP_WRITE
    io.flush_ok = True
    assert server.authenticate(io, NOW) == 0
    assert server.complete()


def test_failure_waits_for_pending_writes_then_raises():
    io, server = FrameIO(), make_server()
    io.flush_ok = False
    io.feed_frame(request(API_VERSIONS, 0, {}, 1))
    io.feed_frame(raw_request(METADATA, 0, b"", 2))
    # The ApiVersions response is not flushed yet: nothing else is read.
    assert server.authenticate(io, NOW) == OP_WRITE
    io.flush_ok = True
    with pytest.raises(IllegalSaslStateError):
        server.authenticate(io, NOW)


def test_pipelined_frames_after_authentication_stay_buffered():
    io, server = FrameIO(), make_server()
    handshake(io, server)
    io.feed_frame(request(SASL_AUTHENTICATE, 2,
                          {"auth_bytes": plain_token("alice", "alice-secret")}, 3))
    io.feed_frame(request(METADATA, 1, {"topics": None}, 4))
    assert server.authenticate(io, NOW) == 0
    # The Metadata request belongs to the data phase.
    assert io.read_frame()[:2] == b"\x00\x03"


# ------------------------------------------------------------ legacy GSSAPI
class FakeGssapiServer:
    """Routing test double: a real GSSAPI exchange needs the KDC (see the
    end-to-end tests)."""

    def __init__(self):
        self.tokens = []

    def evaluate_response(self, response, now):
        self.tokens.append(response)
        return None if len(self.tokens) >= 2 else b"challenge"

    def is_complete(self):
        return len(self.tokens) >= 2

    def get_authorization_id(self):
        return "client@EXAMPLE.COM"

    def get_negotiated_property(self, name):
        return None

    def dispose(self):
        pass


def test_legacy_gssapi_client_without_handshake():
    created = []

    def factory(mechanism, **kw):
        created.append(mechanism)
        return FakeGssapiServer()

    io, server = FrameIO(), make_server(("GSSAPI", "PLAIN"), mechanism_factory=factory)
    token = b"\x60\x82\x01\x00" + b"\x06\x09*\x86H\x86\xf7\x12\x01\x02\x02" + b"x" * 40
    io.feed_frame(token)
    assert server.authenticate(io, NOW) == OP_READ
    assert created == ["GSSAPI"] and server.state is SaslState.AUTHENTICATE
    assert io.take() == [b"challenge"]   # raw, no Kafka header
    io.feed_frame(b"final")
    assert server.authenticate(io, NOW) == 0
    assert io.take() == []               # GSSAPI: no extra final frame
    assert server.principal().name == "client@EXAMPLE.COM"


# ------------------------------------------------------------------- KIP-368
def test_session_lifetime_off_by_default():
    io, server = FrameIO(), make_server()
    handshake(io, server)
    authenticate_v1(io, server, plain_token("alice", "alice-secret"))
    body = response(io.take()[0], SASL_AUTHENTICATE, 2)[1]
    assert body["session_lifetime_ms"] == 0
    assert server.server_session_expiration_ms() is None


@pytest.mark.parametrize("version,expect", [(0, None), (1, 10_000), (2, 10_000)])
def test_session_lifetime_from_connections_max_reauth_ms(version, expect):
    """Kafka: SaslServerAuthenticatorTest.testSessionExpiresAtMaxReauthTime."""
    io, server = FrameIO(), make_server(connections_max_reauth_ms=10_000)
    handshake(io, server)
    authenticate_v1(io, server, plain_token("alice", "alice-secret"), version=version)
    body = response(io.take()[0], SASL_AUTHENTICATE, version)[1]
    assert body.get("session_lifetime_ms") == expect
    assert server.server_session_expiration_ms() == NOW + 10_000
    assert server.connected_client_supports_reauthentication() == (version > 0)


def _expiring_token_callbacks(expiry_ms, owner="alice"):
    cred = scram.generate_credential("SCRAM-SHA-256", "hmac-of-token", 4096)

    def token_credential(token_id, mechanism, now):
        if token_id != "token1":
            return None
        return TokenCredential(cred, KafkaPrincipal("User", owner), expiry_ms, token_id)

    return server_callbacks(token_credential=token_credential)


@pytest.mark.parametrize("max_reauth,expect", [(0, 5_000), (3_000, 3_000), (60_000, 5_000)])
def test_session_lifetime_is_min_of_credential_expiry_and_max_reauth(max_reauth, expect):
    """Kafka: SaslServerAuthenticatorTest.testSessionExpiresAtTokenExpiry,
    testSessionExpiresAtTokenExpiryDespiteNoReauthIsSet."""
    client_io, server_io = pair()
    server = make_server(("SCRAM-SHA-256",), callbacks=_expiring_token_callbacks(NOW + 5_000),
                         connections_max_reauth_ms=max_reauth)
    client = SaslClientAuthenticator(
        mechanism="SCRAM-SHA-256",
        jaas_options={"username": "token1", "password": "hmac-of-token", "tokenauth": "true"})
    drive(client, client_io, server, server_io)
    p = server.principal()
    assert p == KafkaPrincipal("User", "alice") and p.token_authenticated
    assert client.session_lifetime_ms == expect
    assert server.server_session_expiration_ms() == NOW + expect


def _authenticated_pair(user="alice", mechanism="PLAIN", mechanisms=("PLAIN",), **kw):
    client_io, server_io = pair()
    kw.setdefault("connections_max_reauth_ms", 10_000)
    server = make_server(mechanisms, **kw)
    client = SaslClientAuthenticator(mechanism=mechanism,
                                     jaas_options={"username": user,
                                                   "password": f"{user}-secret"})
    drive(client, client_io, server, server_io)
    return client, client_io, server, server_io


def test_reauthentication_succeeds_with_same_principal():
    """Kafka: SaslAuthenticatorTest.testValidSaslPlainOverPlaintext (its re-authentication)."""
    client, client_io, server, server_io = _authenticated_pair()
    later = NOW + 9_000
    new_client = SaslClientAuthenticator(mechanism="PLAIN",
                                         jaas_options={"username": "alice",
                                                       "password": "alice-secret"})
    new_client.reauthenticate(client_io, None, later, client)
    frame = server_io.read_frame()       # the data phase saw a SaslHandshake
    new_server = make_server(connections_max_reauth_ms=10_000)
    new_server.reauthenticate(server_io, frame, later, server)
    drive(new_client, client_io, new_server, server_io, now=later + 5)
    assert new_server.principal() == KafkaPrincipal("User", "alice")
    assert new_server.reauthentication_latency_ms() == 5
    assert new_server.server_session_expiration_ms() == later + 5 + 10_000
    assert new_client.reauthentication_latency_ms() == 5


def test_reauthentication_with_different_principal_fails():
    """Kafka: SaslAuthenticatorTest.testCannotReauthenticateWithDifferentPrincipal."""
    client, client_io, server, server_io = _authenticated_pair()
    other = SaslClientAuthenticator(mechanism="PLAIN",
                                    jaas_options={"username": "bob", "password": "bob-secret"})
    other.reauthenticate(client_io, None, NOW + 9_000, client)
    new_server = make_server(connections_max_reauth_ms=10_000)
    with pytest.raises(SaslAuthenticationError) as err:
        new_server.reauthenticate(server_io, server_io.read_frame(), NOW + 9_000, server)
        drive(other, client_io, new_server, server_io)
    assert str(err.value) == ("Cannot change principals during re-authentication from "
                              "User.alice: User.bob")
    new_server.handle_authentication_failure()
    with pytest.raises(SaslAuthenticationError) as client_err:
        other.authenticate(client_io, NOW + 9_000)
    assert "Cannot change principals" in str(client_err.value)


def test_reauthentication_with_different_mechanism_fails_on_next_token():
    """Kafka: SaslAuthenticatorTest.testCannotReauthenticateWithDifferentMechanism."""
    client, client_io, server, server_io = _authenticated_pair(
        mechanisms=("PLAIN", "SCRAM-SHA-256"))
    other = SaslClientAuthenticator(mechanism="SCRAM-SHA-256",
                                    jaas_options={"username": "alice",
                                                  "password": "alice-secret"})
    other.reauthenticate(client_io, None, NOW + 9_000, client)
    new_server = make_server(("PLAIN", "SCRAM-SHA-256"), connections_max_reauth_ms=10_000)
    # The handshake itself is answered normally ...
    new_server.reauthenticate(server_io, server_io.read_frame(), NOW + 9_000, server)
    assert new_server.state is SaslState.REAUTH_BAD_MECHANISM
    other.authenticate(client_io, NOW + 9_000)
    # ... and the first token fails the re-authentication.
    with pytest.raises(SaslAuthenticationError) as err:
        new_server.authenticate(server_io, NOW + 9_000)
    assert str(err.value) == ("SASL mechanism 'SCRAM-SHA-256' requested by client is not "
                              "supported for re-authentication of mechanism 'PLAIN'")


def test_api_versions_during_reauthentication_fails():
    client, client_io, server, server_io = _authenticated_pair()
    new_server = make_server(connections_max_reauth_ms=10_000)
    with pytest.raises(InvalidRequestError):
        new_server.reauthenticate(server_io, request(API_VERSIONS, 0, {}, 99),
                                  NOW + 9_000, server)


def test_reauthentication_in_place_without_previous():
    client, client_io, server, server_io = _authenticated_pair()
    client.reauthenticate(client_io, None, NOW + 9_000)
    server.reauthenticate(server_io, server_io.read_frame(), NOW + 9_000)
    drive(client, client_io, server, server_io, now=NOW + 9_001)
    assert server.principal().name == "alice" and server.reauthenticating()
