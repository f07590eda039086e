"""kchannel client against kchannel server over real 127.0.0.1 sockets.

Every mechanism x SaslHandshake version x SASL_PLAINTEXT / SASL_SSL, the
failure path (error response before close, failure delay not blocking other
clients), metrics, and KIP-368 re-authentication end to end.
"""
import threading

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import (ChannelConnectionError, KChannelError, SaslAuthenticationError,
                             UnsupportedSaslMechanismError)
from kchannel.principal import KafkaPrincipal
from kchannel.server import Server
from kchannel.utils import now_ms

from tests.fixtures.sasl_servers import (MECHANISMS, METADATA, STORE, Clock, client_configs,
                                        jaas_line, metric, start_server,
                                        v0_only_api_versions, wait_metric)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("handshake_version", [0, 1])
@pytest.mark.parametrize("mechanism", MECHANISMS + ["OAUTHBEARER"])
def test_mechanism_matrix(servers, pki, protocol, handshake_version, mechanism):
    """Kafka: SaslAuthenticatorTest.testValidSaslPlainOverPlaintext, testValidSaslPlainOverSsl,
    testValidSaslScramMechanisms, testValidSaslOauthBearerMechanism,
    testUnauthenticatedApiVersionsRequestOverPlaintextHandshakeVersion0/1,
    testUnauthenticatedApiVersionsRequestOverSslHandshakeVersion0/1."""
    sasl_kwargs = {} if handshake_version else {"api_versions_supplier": v0_only_api_versions}
    server, port = start_server(protocol, pki=pki, sasl_kwargs=sasl_kwargs,
                                failed_authentication_delay_ms=0)
    servers.append(server)
    seen = []
    server.register_handler(METADATA, lambda ctx: (seen.append(ctx.principal), {
        "brokers": [], "cluster_id": None, "controller_id": -1, "topics": []})[1])
    with KafkaClient(client_configs(protocol, mechanism, pki=pki)) as client:
        client.connect("127.0.0.1", port)
        ch = client.selector.channel(client.node_id)
        assert ch.authenticator.sasl_handshake_version == handshake_version
        assert ch.authenticator.sasl_authenticate_version == (2 if handshake_version else -1)
        assert client.request(METADATA, {"topics": []}, version=1)["topics"] == []
    assert seen == [KafkaPrincipal("User", "alice")]
    assert wait_metric(server, "successful-authentication-total", 1) == 1
    assert metric(server, "failed-authentication-total") == 0


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_bad_password_error_reaches_client_before_close(servers, pki, protocol, mechanism):
    """Kafka: SaslAuthenticatorTest.testInvalidPasswordSaslPlain, testInvalidPasswordSaslScram,
    testUnknownUserSaslScram."""
    server, port = start_server(protocol, pki=pki, failed_authentication_delay_ms=10)
    servers.append(server)
    client = KafkaClient(client_configs(protocol, mechanism, password="wrong", pki=pki))
    with pytest.raises(SaslAuthenticationError) as err:
        client.connect("127.0.0.1", port)
    client.close()
    # The server's message arrived (not a bare disconnect) ...
    assert "Authentication failed" in str(err.value)
    assert not err.value.retriable
    # ... and the same for an unknown user: nothing tells them apart.
    client = KafkaClient(client_configs(protocol, mechanism, user="nobody", pki=pki))
    with pytest.raises(SaslAuthenticationError) as err2:
        client.connect("127.0.0.1", port)
    client.close()
    if mechanism.startswith("SCRAM"):
        assert str(err2.value) == str(err.value)
    assert "nobody" not in str(err2.value)
    # Counted once per failure on the server.
    assert wait_metric(server, "failed-authentication-total", 2) == 2
    assert metric(server, "successful-authentication-total") == 0


def test_unsupported_mechanism_reports_server_list(servers):
    """Kafka: SaslAuthenticatorTest.testDisabledMechanism."""
    server, port = start_server(mechanisms=["SCRAM-SHA-256", "PLAIN"],
                                failed_authentication_delay_ms=0)
    servers.append(server)
    client = KafkaClient(client_configs("SASL_PLAINTEXT", "SCRAM-SHA-512"))
    with pytest.raises(UnsupportedSaslMechanismError) as err:
        client.connect("127.0.0.1", port)
    client.close()
    assert err.value.enabled_mechanisms == ["SCRAM-SHA-256", "PLAIN"]
    assert "[SCRAM-SHA-256, PLAIN]" in str(err.value)


def test_failure_delay_does_not_block_other_clients(servers):
    """Kafka: SaslAuthenticatorFailureDelayTest.testInvalidPasswordSaslPlain."""
    delay_ms = 3000
    server, port = start_server(failed_authentication_delay_ms=delay_ms)
    servers.append(server)
    outcome = {}

    def bad_client():
        c = KafkaClient(client_configs("SASL_PLAINTEXT", "PLAIN", password="wrong"))
        try:
            c.connect("127.0.0.1", port)
        except KChannelError as exc:
            outcome["error"] = exc
        finally:
            outcome["done_at"] = now_ms()
            c.close()

    t = threading.Thread(target=bad_client)
    t.start()
    # Wait until the server has seen the failure (the close is now delayed).
    deadline = now_ms() + 10_000
    while metric(server, "failed-authentication-total") < 1 and now_ms() < deadline:
        t.join(0.01)
    failed_at = now_ms()
    assert metric(server, "failed-authentication-total") == 1
    # Another client authenticates and gets an answer meanwhile.
    with KafkaClient(client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")) as good:
        good.connect("127.0.0.1", port)
        good.request(METADATA, {"topics": []}, version=1)
        good_done_at = now_ms()
    assert "done_at" not in outcome or outcome["done_at"] >= good_done_at
    t.join(30)
    assert isinstance(outcome.get("error"), SaslAuthenticationError)
    assert str(outcome["error"]) == "Authentication failed: Invalid username or password"
    # The failed client heard back only after the delay (the bound is loose:
    # failed_at is when this thread noticed the failure, a little after it).
    assert outcome["done_at"] - failed_at >= delay_ms // 2


def test_pre_auth_requests_before_handshake_are_refused(servers):
    """A PLAINTEXT client talking to a SASL listener: Metadata before the
    handshake gets the connection closed (Kafka sends nothing).

    Kafka: SaslAuthenticatorTest.testDisallowedKafkaRequestsBeforeAuthentication."""
    server, port = start_server(failed_authentication_delay_ms=0)
    servers.append(server)
    client = KafkaClient({"security.protocol": "PLAINTEXT"})
    # The client's own ApiVersions is answered pre-auth; Metadata is not.
    client.connect("127.0.0.1", port)
    with pytest.raises((ChannelConnectionError, KChannelError)):
        client.request(METADATA, {"topics": []}, version=1)
    client.close()
    assert wait_metric(server, "failed-authentication-total", 1) == 1


# ------------------------------------------------------------------- KIP-368
@pytest.mark.parametrize("mechanism", MECHANISMS + ["OAUTHBEARER"])
def test_reauthentication_end_to_end(servers, mechanism):
    """Kafka: SaslAuthenticatorTest.testValidSaslPlainOverPlaintext, testValidSaslScramSha256,
    testValidSaslOauthBearerMechanism (their re-authentication)."""
    clock = Clock()
    server, port = start_server(extra={"connections.max.reauth.ms": "60000"},
                                time=clock, failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs("SASL_PLAINTEXT", mechanism), time=clock) as client:
        client.connect("127.0.0.1", port)
        ch = client.selector.channel(client.node_id)
        assert ch.authenticator.session_lifetime_ms == 60_000
        reauth_at = ch.authenticator.client_session_reauth_ms()
        assert reauth_at is not None
        client.request(METADATA, {"topics": []}, version=1)
        # Jump past the re-authentication point: the next write re-authenticates
        # first, and the request still gets its response.
        clock.offset += reauth_at - now_ms() + 10
        assert client.request(METADATA, {"topics": []}, version=1)["topics"] == []
        assert client.selector.metrics.metric("successful-reauthentication-total") == 1
        assert client.request(METADATA, {"topics": []}, version=1)["topics"] == []
    assert wait_metric(server, "successful-reauthentication-total", 1) == 1
    assert metric(server, "successful-authentication-total") == 1
    assert metric(server, "failed-reauthentication-total") == 0
    assert metric(server, "reauthentication-latency-max") >= 0


def test_client_without_reauth_support_is_disconnected_after_session_expiry(servers):
    clock = Clock()
    # Handshake v0 only: the client cannot re-authenticate.
    server, port = start_server(extra={"connections.max.reauth.ms": "60000"}, time=clock,
                                sasl_kwargs={"api_versions_supplier": v0_only_api_versions},
                                failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs("SASL_PLAINTEXT", "PLAIN"), time=clock) as client:
        client.connect("127.0.0.1", port)
        assert client.selector.channel(client.node_id).authenticator \
            .client_session_reauth_ms() is None
        client.request(METADATA, {"topics": []}, version=1)
        clock.offset += 61_000
        with pytest.raises(ChannelConnectionError):
            client.request(METADATA, {"topics": []}, version=1)
    assert wait_metric(server, "successful-authentication-no-reauth-total", 1) == 1


def test_oauthbearer_session_lifetime_follows_token_expiry(servers):
    """Kafka: SaslServerAuthenticatorTest.testSessionExpiresAtTokenExpiry (OAUTHBEARER)."""
    server, port = start_server(failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs("SASL_PLAINTEXT", "OAUTHBEARER")) as client:
        client.connect("127.0.0.1", port)
        lifetime = client.selector.channel(client.node_id).authenticator.session_lifetime_ms
    # Unsecured tokens live an hour by default; no connections.max.reauth.ms.
    # The token's exp has fractional seconds, rounded to ms as Kafka does,
    # while the server clock is floored to ms: +1 ms is possible when both
    # happen within the same millisecond.
    assert 3_590_000 <= lifetime <= 3_600_001


def test_reauthentication_with_different_principal_fails(servers):
    """Kafka: SaslAuthenticatorTest.testCannotReauthenticateWithDifferentPrincipal."""
    from kchannel.security.sasl.mechanism import create_client
    clock = Clock()
    server, port = start_server(extra={"connections.max.reauth.ms": "60000"}, time=clock,
                                failed_authentication_delay_ms=0)
    servers.append(server)
    subjects = iter(["alice", "mallory"])

    def factory(mechanism, **kw):
        # The token source hands out a token for someone else the second time.
        kw["jaas_options"] = {"unsecuredLoginStringClaim_sub": next(subjects)}
        return create_client(mechanism, **kw)

    client = KafkaClient(client_configs("SASL_PLAINTEXT", "OAUTHBEARER"), time=clock,
                         sasl_kwargs={"client_mechanism_factory": factory})
    try:
        client.connect("127.0.0.1", port)
        client.request(METADATA, {"topics": []}, version=1)
        reauth_at = client.selector.channel(client.node_id).authenticator \
            .client_session_reauth_ms()
        clock.offset += reauth_at - now_ms() + 10
        with pytest.raises(SaslAuthenticationError) as err:
            client.request(METADATA, {"topics": []}, version=1)
        assert str(err.value) == ("Cannot change principals during re-authentication from "
                                  "User.alice: User.mallory")
    finally:
        client.close()
    assert wait_metric(server, "failed-reauthentication-total", 1) == 1
    assert metric(server, "successful-reauthentication-total") == 0


def test_reauthentication_with_different_mechanism_fails(servers):
    """Kafka: SaslAuthenticatorTest.testCannotReauthenticateWithDifferentMechanism."""
    clock = Clock()
    server, port = start_server(extra={"connections.max.reauth.ms": "60000"}, time=clock,
                                failed_authentication_delay_ms=0)
    servers.append(server)
    client = KafkaClient(client_configs("SASL_PLAINTEXT", "PLAIN"), time=clock)
    try:
        client.connect("127.0.0.1", port)
        reauth_at = client.selector.channel(client.node_id).authenticator \
            .client_session_reauth_ms()
        # The next authenticator the builder makes uses another mechanism.
        builder = client.network.channel_builder
        builder.client_mechanism = "SCRAM-SHA-256"
        builder.client_jaas_options = {"username": "alice", "password": "alice-secret"}
        clock.offset += reauth_at - now_ms() + 10
        with pytest.raises(KChannelError):
            client.request(METADATA, {"topics": []}, version=1)
    finally:
        client.close()
    assert wait_metric(server, "failed-reauthentication-total", 1) == 1


class DnRecordingPrincipalBuilder:
    """principal.builder.class stand-in that exposes what the builder saw."""

    def build(self, context):
        return KafkaPrincipal("User", f"{context.authorization_id}|"
                                      f"{context.ssl_peer_subject_dn}|{context.mechanism}")


@pytest.mark.parametrize("client_auth,expect_dn", [(None, False), ("required", True)])
def test_sasl_ssl_peer_dn_reaches_principal_builder(servers, pki, client_auth, expect_dn):
    """Kafka: SaslAuthenticatorTest.testSslClientAuthDisabledForSaslSslListener,
    testSslClientAuthRequiredOverriddenForSaslSslListener."""
    extra = {}
    if client_auth is not None:
        extra["listener.name.sasl_ssl.ssl.client.auth"] = client_auth
    server, port = start_server("SASL_SSL", pki=pki, extra=extra,
                                sasl_kwargs={"principal_builder": DnRecordingPrincipalBuilder()},
                                failed_authentication_delay_ms=0)
    servers.append(server)
    seen = []
    server.register_handler(METADATA, lambda ctx: (seen.append(ctx.principal), {
        "brokers": [], "cluster_id": None, "controller_id": -1, "topics": []})[1])
    cfg = client_configs("SASL_SSL", "SCRAM-SHA-512", pki=pki)
    cfg.update(pki.client_configs(keystore="pem"))
    with KafkaClient(cfg) as client:
        client.connect("127.0.0.1", port)
        client.request(METADATA, {"topics": []}, version=1)
    dn = pki.client.dn if expect_dn else "None"
    assert seen == [KafkaPrincipal("User", f"alice|{dn}|SCRAM-SHA-512")]


def test_sasl_ssl_listener_ignores_unprefixed_client_auth(servers, pki):
    """ssl.client.auth without the listener prefix does not apply to a
    SASL_SSL listener (Kafka): a client without a certificate still gets in.

    Kafka: SaslAuthenticatorTest.testSslClientAuthRequiredForSaslSslListener."""
    server, port = start_server("SASL_SSL", pki=pki, extra={"ssl.client.auth": "required"},
                                failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs("SASL_SSL", "PLAIN", pki=pki)) as client:
        client.connect("127.0.0.1", port)
        client.request(METADATA, {"topics": []}, version=1)


def test_server_from_broker_properties(servers):
    """Listener- and mechanism-prefixed broker properties, as Kafka reads them:
    JAAS per mechanism, connections.max.reauth.ms per mechanism.

    Kafka: SaslAuthenticatorTest.testJaasConfigurationForListener."""
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="alice" password="alice-secret" user_alice="alice-secret";',
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000",
        "connections.max.reauth.ms": "7000",
        "connection.failed.authentication.delay.ms": "0",
    }
    server = Server(props, sasl_kwargs={"scram_store": STORE})
    server.start()
    servers.append(server)
    port = server.bound_port("SASL_PLAINTEXT")
    for mechanism, lifetime in (("PLAIN", 5000), ("SCRAM-SHA-256", 7000)):
        with KafkaClient(client_configs("SASL_PLAINTEXT", mechanism)) as client:
            client.connect("127.0.0.1", port)
            ch = client.selector.channel(client.node_id)
            assert ch.authenticator.session_lifetime_ms == lifetime
    bad = KafkaClient(client_configs("SASL_PLAINTEXT", "PLAIN", password="nope"))
    with pytest.raises(SaslAuthenticationError):
        bad.connect("127.0.0.1", port)
    bad.close()


def test_responses_in_flight_during_reauthentication_are_delivered(servers, monkeypatch):
    """Request A is in flight when re-authentication starts for request B;
    A's response arrives during the re-authentication exchange and must still
    reach the application, in order, followed by B's."""
    clock = Clock()
    server, port = start_server(extra={"connections.max.reauth.ms": "60000"}, time=clock,
                                failed_authentication_delay_ms=0)
    servers.append(server)
    slow = threading.Event()
    release = threading.Event()

    def metadata(ctx):
        if slow.is_set():
            slow.clear()
            # Hold A's response until the client has begun re-authenticating
            # (its SaslHandshake then queues up behind this response).
            release.wait(30)
        return {"brokers": [], "cluster_id": None, "controller_id": -1, "topics": []}

    server.register_handler(METADATA, metadata)
    from kchannel.security.sasl.client_authenticator import SaslClientAuthenticator
    handed_back = []
    original = SaslClientAuthenticator.get_and_clear_responses_received_during_reauthentication

    def spy(self):
        out = original(self)
        handed_back.append(len(out))
        return out

    monkeypatch.setattr(SaslClientAuthenticator,
                        "get_and_clear_responses_received_during_reauthentication", spy)
    # The clock jump must not expire request A.
    configs = client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256", **{"request.timeout.ms": 600000})
    with KafkaClient(configs, time=clock) as client:
        client.connect("127.0.0.1", port)
        net, node = client.network, client.node_id
        reauth_at = client.selector.channel(node).authenticator.client_session_reauth_ms()
        slow.set()
        corr_a = net.send(node, METADATA, {"topics": []}, 1)
        got = []
        while net.in_flight_count(node) and client.selector.channel(node).has_send():
            got += net.poll(10)
        clock.offset += reauth_at - now_ms() + 10
        corr_b = net.send(node, METADATA, {"topics": []}, 1)
        deadline = now_ms() + 10_000
        channel = client.selector.channel(node)
        while channel.ready() and now_ms() < deadline:
            got += net.poll(10)
        assert not channel.ready(), "re-authentication did not begin"
        release.set()
        while len(got) < 2 and now_ms() < deadline:
            got += net.poll(50)
        assert [(r.correlation_id, r.exception) for r in got] == [(corr_a, None), (corr_b, None)]
        # A's response really did arrive mid re-authentication.
        assert handed_back == [1]
        assert client.selector.metrics.metric("successful-reauthentication-total") == 1
    assert wait_metric(server, "successful-reauthentication-total", 1) == 1


def test_delegation_token_login_end_to_end(servers):
    """KIP-48 over real sockets: a SCRAM user creates a token, then logs in
    with it (tokenauth=true); the session is the owner's, token-authenticated,
    bounded by the token's expiry, and may not mint more tokens.

    Kafka: SaslAuthenticatorTest.testTokenAuthenticationOverSaslScram."""
    import base64

    from kchannel.server.token_handlers import register_token_handlers
    from kchannel.tokens.manager import TokenManager

    manager = TokenManager("token-secret", max_lifetime_ms=7 * 24 * 3600 * 1000,
                           expiry_time_ms=3600 * 1000)
    server, port = start_server(extra={"connections.max.reauth.ms": "7200000"},
                                token_manager=manager, failed_authentication_delay_ms=0)
    servers.append(server)
    register_token_handlers(server, manager)
    seen = []
    server.register_handler(METADATA, lambda ctx: (seen.append(ctx.principal), {
        "brokers": [], "cluster_id": None, "controller_id": -1, "topics": []})[1])

    with KafkaClient(client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")) as owner:
        owner.connect("127.0.0.1", port)
        created = owner.request(38, {"renewers": [], "max_lifetime_ms": -1})
    assert created["error_code"] == 0
    token_id = created["token_id"]
    password = base64.b64encode(created["hmac"]).decode()

    configs = client_configs("SASL_PLAINTEXT", "SCRAM-SHA-512")
    configs["sasl.jaas.config"] = jaas_line("SCRAM-SHA-512", token_id, password,
                                            tokenauth="true")
    with KafkaClient(configs) as client:
        client.connect("127.0.0.1", port)
        lifetime = client.selector.channel(client.node_id).authenticator.session_lifetime_ms
        client.request(METADATA, {"topics": []}, version=1)
        refused = client.request(38, {"renewers": [], "max_lifetime_ms": -1})
    # The token expires in an hour: that, not the two-hour reauth bound,
    # limits the session.
    assert 3_590_000 <= lifetime <= 3_600_000
    assert seen == [KafkaPrincipal("User", "alice")] and seen[0].token_authenticated
    assert refused["error_code"] == 64       # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED

    # A wrong HMAC, or the token id without tokenauth, is refused.
    for jaas in (jaas_line("SCRAM-SHA-512", token_id, "bm9wZQ==", tokenauth="true"),
                 jaas_line("SCRAM-SHA-512", token_id, password)):
        configs["sasl.jaas.config"] = jaas
        bad = KafkaClient(configs)
        with pytest.raises(SaslAuthenticationError):
            bad.connect("127.0.0.1", port)
        bad.close()


def test_sasl_requests_after_authentication_get_illegal_sasl_state(servers):
    server, port = start_server(failed_authentication_delay_ms=0)
    servers.append(server)
    with KafkaClient(client_configs("SASL_PLAINTEXT", "PLAIN")) as client:
        client.connect("127.0.0.1", port)
        # No session expiry, so this SaslHandshake is not a re-authentication.
        assert client.request(17, {"mechanism": "PLAIN"}, version=1)["error_code"] == 34
        body = client.request(36, {"auth_bytes": b"\0alice\0alice-secret"}, version=2)
        assert body["error_code"] == 34
        assert body["error_message"] == ("SaslAuthenticate request received after "
                                         "successful authentication")
        # The connection is still authenticated and usable.
        assert client.request(METADATA, {"topics": []}, version=1)["topics"] == []


@pytest.mark.parametrize("tls", ["TLSv1.2", "TLSv1.3"])
def test_sasl_ssl_handshake_last_flight_sent_with_first_frame(servers, pki, tls):
    """KafkaChannel holds the TLS handshake's last flight back and sends it
    with the first authentication frame (or flushes it alone when there is
    none, as for the TLS 1.2 server's Finished): with either TLS version
    both sides complete and nothing is left unsent."""
    server, port = start_server("SASL_SSL", pki=pki, failed_authentication_delay_ms=0)
    servers.append(server)
    server.register_handler(METADATA, lambda ctx: {
        "brokers": [], "cluster_id": None, "controller_id": -1, "topics": []})
    cfg = client_configs("SASL_SSL", "SCRAM-SHA-512", pki=pki)
    cfg["ssl.enabled.protocols"] = tls
    for _ in range(2):
        with KafkaClient(cfg) as client:
            client.connect("localhost", port)
            ch = client.selector.channel(client.node_id)
            assert ch.transport.protocol() == tls
            assert client.request(METADATA, {"topics": []}, version=1)["topics"] == []
            assert not ch.transport.has_pending_writes()
    assert wait_metric(server, "successful-authentication-total", 2) == 2
