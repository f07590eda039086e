"""SASL/PLAIN client and server: RFC 4616 message, Kafka's validation rules
and messages, JAAS users and the plain_authenticate callback."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel.config.types import Password
from kchannel.errors import SaslAuthenticationError
from kchannel.security.sasl import mechanism as registry
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.security.sasl.plain import jaas_plain_authenticator

JAAS = {"username": "admin", "password": Password("admin-secret"),
        "user_admin": "admin-secret", "user_alice": Password("alice-secret")}
INVALID = "Authentication failed: Invalid username or password"


def server(jaas=JAAS, callbacks=None):
    return registry.create_server("PLAIN", jaas_options=jaas, configs={}, callbacks=callbacks,
                                  server_host="localhost", now=0)


def test_client_message_format_and_completion():
    c = registry.create_client("PLAIN", jaas_options={"username": "alice",
                                                      "password": Password("alice-secret")},
                               server_host="h")
    assert c.mechanism_name == "PLAIN" and c.has_initial_response()
    assert not c.is_complete()
    assert c.evaluate_challenge(b"") == b"\x00alice\x00alice-secret"
    assert c.is_complete()
    assert c.evaluate_challenge(b"") is None  # the server's empty answer
    assert "alice-secret" not in repr(c)


def test_client_to_server_round_trip():
    c = registry.create_client("PLAIN", jaas_options={"username": "alice",
                                                      "password": "alice-secret"})
    s = server()
    assert s.evaluate_response(c.evaluate_challenge(b""), 0) == b""
    assert s.is_complete() and s.get_authorization_id() == "alice"
    assert not s.token_authenticated
    assert s.get_negotiated_property("CREDENTIAL.LIFETIME.MS") is None


@pytest.mark.parametrize("message", [b"\x00alice\x00wrong", b"\x00mallory\x00alice-secret",
                                     b"\x00ALICE\x00alice-secret",
                                     b"\x00alice\x00alice-secret "])
def test_wrong_password_and_unknown_user_same_message(message):
    with pytest.raises(SaslAuthenticationError) as exc:
        server().evaluate_response(message, 0)
    assert str(exc.value) == INVALID


def test_authzid_empty_or_equal_to_user():
    """Kafka: PlainSaslServerTest.noAuthorizationIdSpecified,
    authorizationIdEqualsAuthenticationId, authorizationIdNotEqualsAuthenticationId."""
    s = server()
    s.evaluate_response(b"alice\x00alice\x00alice-secret", 0)
    assert s.get_authorization_id() == "alice"
    with pytest.raises(SaslAuthenticationError) as exc:
        server().evaluate_response(b"admin\x00alice\x00alice-secret", 0)
    assert str(exc.value) == ("Authentication failed: Client requested an authorization id "
                              "that is different from username")


def test_authzid_checked_after_password():
    # As Kafka: a wrong password gets the generic message even with a bad authzid.
    with pytest.raises(SaslAuthenticationError) as exc:
        server().evaluate_response(b"admin\x00alice\x00wrong", 0)
    assert str(exc.value) == INVALID


@pytest.mark.parametrize("message,error", [
    (b"\x00\x00pw", "Authentication failed: username not specified"),
    (b"\x00alice\x00", "Authentication failed: password not specified"),
    (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\x00alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"a\x00b\x00c\x00d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
])
def test_kafka_validation_messages(message, error):
    """Kafka: PlainSaslServerTest.emptyTokens."""
    with pytest.raises(SaslAuthenticationError) as exc:
        server().evaluate_response(message, 0)
    assert str(exc.value) == error


def test_callback_replaces_jaas_users():
    seen = []

    def authenticate(username, password):
        seen.append((username, password))
        return (username, password) == ("bob", "bob-pw")

    s = server(callbacks=ServerCallbacks(plain_authenticate=authenticate))
    s.evaluate_response(b"\x00bob\x00bob-pw", 0)
    assert s.get_authorization_id() == "bob"
    with pytest.raises(SaslAuthenticationError):
        server(callbacks=ServerCallbacks(plain_authenticate=authenticate)).evaluate_response(
            b"\x00alice\x00alice-secret", 0)
    assert seen[-1] == ("alice", "alice-secret")


def test_callback_error_is_hidden():
    def broken(username, password):
        raise OSError("database at 10.0.0.7 unreachable")

    with pytest.raises(SaslAuthenticationError) as exc:
        server(callbacks=ServerCallbacks(plain_authenticate=broken)).evaluate_response(
            b"\x00bob\x00pw", 0)
    assert str(exc.value) == "Authentication failed: credentials for user could not be verified"


def test_callbacks_without_plain_fall_back_to_jaas():
    s = server(callbacks=ServerCallbacks(scram_credential=lambda u, m: None))
    s.evaluate_response(b"\x00admin\x00admin-secret", 0)
    assert s.get_authorization_id() == "admin"


def test_utf8_user_and_password():
    jaas = {"user_jürgen": "pässwörd"}
    s = server(jaas)
    s.evaluate_response("\x00jürgen\x00pässwörd".encode(), 0)
    assert s.get_authorization_id() == "jürgen"


def test_jaas_authenticator_constant_time_paths():
    auth = jaas_plain_authenticator({"user_a": "x"})
    assert auth("a", "x") and not auth("a", "y") and not auth("b", "x") and not auth(None, "x")


def test_second_message_refused():
    s = server()
    s.evaluate_response(b"\x00alice\x00alice-secret", 0)
    with pytest.raises(SaslAuthenticationError):
        s.evaluate_response(b"\x00alice\x00alice-secret", 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_arbitrary_bytes_fail_closed(first, second):
    s = server()
    for message in (first, second):
        try:
            s.evaluate_response(message, 0)
        except SaslAuthenticationError:
            assert not s.is_complete() or message is second
            return
        # Only a correct password can be accepted.
        assert s.get_authorization_id() in ("admin", "alice")


PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture
def plain_server(tmp_path):
    from kchannel.server import Server
    server = Server({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "log.dirs": str(tmp_path),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_alice="alice-secret" user_bob="bob-secret";',
    })
    server.start()
    try:
        yield server.bound_port("SASL_PLAINTEXT")
    finally:
        server.shutdown()


def test_kchannel_client_over_sockets(plain_server):
    from kchannel.client import KafkaClient

    def configs(user, password):
        return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{PLAIN_MODULE} required username="{user}" '
                                    f'password="{password}";'}

    c = KafkaClient(configs("alice", "alice-secret"))
    try:
        c.connect("127.0.0.1", plain_server)
        assert c.api_versions
    finally:
        c.close()
    for user, password in (("alice", "bob-secret"), ("carol", "x")):
        c = KafkaClient(configs(user, password))
        with pytest.raises(SaslAuthenticationError) as exc:
            c.connect("127.0.0.1", plain_server)
        c.close()
        assert INVALID in str(exc.value)


@pytest.mark.slow
@pytest.mark.interop
def test_librdkafka_plain_client(plain_server):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    errors = []

    def metadata(user, password, timeout):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain_server}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": user, "sasl.password": password,
                             "error_cb": errors.append})
        try:
            return admin.list_topics(timeout=timeout)
        finally:
            admin.poll(0.5)

    assert metadata("bob", "bob-secret", 10).brokers
    assert errors == []
    with pytest.raises(confluent_kafka.KafkaException):
        metadata("bob", "alice-secret", 3)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION and INVALID in e.str()
               for e in errors), errors


@pytest.mark.slow
@pytest.mark.interop
def test_kafka_python_plain_client(plain_server):
    kafka = pytest.importorskip("kafka")
    admin = kafka.KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{plain_server}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret",
        request_timeout_ms=10000)
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()
