"""SCRAM over real sockets: kchannel's Server with the SCRAM credential store
and the Describe/AlterUserScramCredentials handlers, driven by ``kchannel
configs --bootstrap-server``, kchannel's client, and real Kafka clients
(librdkafka through confluent-kafka, kafka-python)."""
import os
import subprocess
import sys

import pytest

from kchannel.client import KafkaClient
from kchannel.errors import SaslAuthenticationError
from kchannel.protocol.api_keys import ApiKey
from kchannel.server.scram_handlers import register_scram_handlers
from kchannel.security.sasl.scram_store import (
    SqliteScramCredentialStore, credential_from_password)
from kchannel.server import Server

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
GENERIC = ("Authentication failed during authentication due to invalid credentials with "
           "SASL mechanism {}")


@pytest.fixture
def scram_server(tmp_path):
    store = SqliteScramCredentialStore(tmp_path / "scram-credentials.db")
    store.put("admin", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "admin-secret"))
    server = Server({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAIN_TEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,PLAIN_TEXT:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "log.dirs": str(tmp_path),
        "super.users": "User:admin",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }, sasl_kwargs={"scram_store": store})
    register_scram_handlers(server, store)
    server.start()
    try:
        yield server, store, tmp_path
    finally:
        server.shutdown()
        store.close()


def client_configs(mechanism, username, password):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{SCRAM_MODULE} required username="{username}" '
                                f'password="{password}";'}


def kc(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "kchannel", "configs", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_configs_cli_over_the_api_then_login(scram_server):
    server, store, tmp_path = scram_server
    port = server.bound_port("SASL_PLAINTEXT")
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     f'sasl.jaas.config={SCRAM_MODULE} required username="admin" '
                     'password="admin-secret";\n')
    target = ["--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(props)]
    r = kc(*target, "--alter", "--add-config",
           "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
           "SCRAM-SHA-512=[password=alice-secret]",
           "--entity-type", "users", "--entity-name", "alice")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for user alice.\n"), r.stderr
    r = kc(*target, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert r.stdout == ("SCRAM credential configs for user-principal 'alice' are "
                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")
    r = kc(*target, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=16385,password=x]",
           "--user", "bob")
    assert r.returncode == 1
    assert "UnacceptableCredentialException: Too many iterations" in r.stderr

    # alice can now log in with either mechanism, but as she is not a super
    # user she may neither read nor change credentials.
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        c = KafkaClient(client_configs(mech, "alice", "alice-secret"))
        try:
            c.connect("127.0.0.1", port)
            body = c.request(int(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS), {"users": None})
            assert (body["error_code"], body["error_message"], body["results"]) == (
                31, "Cluster authorization failed.", [])
        finally:
            c.close()
    alice_props = tmp_path / "alice.properties"
    alice_props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                           f'sasl.jaas.config={SCRAM_MODULE} required username="alice" '
                           'password="alice-secret";\n')
    r = kc("--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(alice_props),
           "--alter", "--add-config", "SCRAM-SHA-256=[password=stolen]", "--user", "admin")
    assert r.returncode == 1
    assert "ClusterAuthorizationException: Cluster authorization failed." in r.stderr
    r = kc(*target, "--describe", "--entity-type", "users")
    assert r.stdout == ("SCRAM credential configs for user-principal 'admin' are "
                        "SCRAM-SHA-256=iterations=4096\n"
                        "SCRAM credential configs for user-principal 'alice' are "
                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")

    r = kc(*target, "--alter", "--delete-config", "SCRAM-SHA-512", "--user", "alice")
    assert r.returncode == 0
    c = KafkaClient(client_configs("SCRAM-SHA-512", "alice", "alice-secret"))
    with pytest.raises(SaslAuthenticationError) as exc:
        c.connect("127.0.0.1", port)
    c.close()
    assert GENERIC.format("SCRAM-SHA-512") in str(exc.value)


@pytest.mark.parametrize("user,password", [("admin", "wrong"), ("nobody", "wrong")])
def test_wrong_password_and_unknown_user_same_error(scram_server, user, password):
    server, _, _ = scram_server
    c = KafkaClient(client_configs("SCRAM-SHA-256", user, password))
    with pytest.raises(SaslAuthenticationError) as exc:
        c.connect("127.0.0.1", server.bound_port("SASL_PLAINTEXT"))
    c.close()
    assert GENERIC.format("SCRAM-SHA-256") in str(exc.value)


def test_anonymous_principal_not_authorized(scram_server):
    server, _, _ = scram_server
    port = server.bound_port("PLAIN_TEXT")
    r = kc("--bootstrap-server", f"127.0.0.1:{port}", "--describe", "--entity-type", "users")
    assert r.returncode == 1
    assert "ClusterAuthorizationException" in r.stderr
    r = kc("--bootstrap-server", f"127.0.0.1:{port}", "--alter", "--add-config",
           "SCRAM-SHA-256=[password=x]", "--user", "mallory")
    assert r.returncode == 1
    assert "ClusterAuthorizationException: Cluster authorization failed." in r.stderr


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_scram_client(scram_server, mech):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    server, store, _ = scram_server
    store.put("rdk", mech, credential_from_password(mech, "rdk-secret", 8192))
    port = server.bound_port("SASL_PLAINTEXT")

    errors = []

    def metadata(password, timeout):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                             "sasl.username": "rdk", "sasl.password": password,
                             "error_cb": errors.append})
        try:
            return admin.list_topics(timeout=timeout)
        finally:
            admin.poll(0.5)  # serves error_cb

    md = metadata("rdk-secret", 10)
    assert md.brokers and md.topics == {}
    assert errors == []
    with pytest.raises(confluent_kafka.KafkaException):
        metadata("wrong", 3)
    assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION
               and GENERIC.format(mech) in e.str() for e in errors), errors


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_scram_client(scram_server, mech):
    kafka = pytest.importorskip("kafka")
    server, store, _ = scram_server
    store.put("kp-user", mech, credential_from_password(mech, "kp-secret"))
    port = server.bound_port("SASL_PLAINTEXT")

    def connect(password, timeout_ms=10000):
        return kafka.KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mech, sasl_plain_username="kp-user",
            sasl_plain_password=password, request_timeout_ms=timeout_ms)

    admin = connect("kp-secret")
    try:
        assert admin.describe_cluster()["brokers"]
    finally:
        admin.close()


@pytest.mark.slow
@pytest.mark.interop
def test_librdkafka_admin_alters_and_describes_credentials(scram_server):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
        UserScramCredentialUpsertion)
    server, store, _ = scram_server
    port = server.bound_port("SASL_PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}",
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    # librdkafka computes the salted password itself (as Kafka's admin client).
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(
            "rdk-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"pw-512"),
        UserScramCredentialUpsertion(
            "rdk-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw-256",
            b"fixed-salt"),
    ])
    for f in futures.values():
        f.result(timeout=10)
    assert store.get("rdk-user", "SCRAM-SHA-256").salt == b"fixed-salt"
    assert store.get("rdk-user", "SCRAM-SHA-512").iterations == 8192

    described = admin.describe_user_scram_credentials(["rdk-user"])["rdk-user"].result(timeout=10)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 8192)]

    # The credentials librdkafka created work for logging in.
    for mech, password in (("SCRAM-SHA-256", "pw-256"), ("SCRAM-SHA-512", "pw-512")):
        c = KafkaClient(client_configs(mech, "rdk-user", password))
        try:
            c.connect("127.0.0.1", port)
        finally:
            c.close()

    # Kafka's error codes surface as librdkafka errors.
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(
            "low", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x")])
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        futures["low"].result(timeout=10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.UNACCEPTABLE_CREDENTIAL
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        futures["nobody"].result(timeout=10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=10)
    assert exc.value.args[0].code() == confluent_kafka.KafkaError.RESOURCE_NOT_FOUND
