"""SCRAM credential administration (DescribeUserScramCredentials, API 50, and
AlterUserScramCredentials, API 51) against Apache Kafka: ``kchannel configs
--bootstrap-server`` creates, describes and deletes users on a real broker,
and the same raw requests, valid and invalid, get the same error codes and
messages from Kafka and from ``kchannel serve``."""
import hashlib
import os
import re
import time

import pytest

from kchannel import errors
from kchannel.cli import main
from kchannel.client import KafkaClient
from kchannel.protocol.api_keys import ApiKey
from tests.fixtures.kafka import SCRAM_MODULE

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

SHA256, SHA512 = 1, 2          # Kafka's ScramMechanism type bytes


def configs_cli(capsys, *args):
    code = main(["configs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def can_login(broker, user, password, mechanism="SCRAM-SHA-256"):
    with KafkaClient(broker.client_configs("SASL_PLAINTEXT", mechanism, user=user,
                                           password=password)) as client:
        try:
            client.connect()
            return True
        except errors.SaslAuthenticationError:
            return False


def wait_until(predicate, limit_s=15):
    # KRaft: the controller commits the change, the broker applies it when it
    # replays the record, a moment after the admin call returned.
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "the broker did not apply the change"
        time.sleep(0.05)


def credentials_line(out):
    """{user: {mechanism=iterations, ...}} from kafka-configs' describe
    output (Kafka lists a user's mechanisms in no fixed order: an enum-keyed
    HashMap)."""
    found = {}
    for line in out.splitlines():
        m = re.fullmatch(r"SCRAM credential configs for user-principal '(.*)' are (.*)", line)
        assert m, line
        found[m.group(1)] = set(m.group(2).split(", "))
    return found


def test_kchannel_configs_against_kafka(kafka_broker, tmp_path, capsys):
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    props = kafka_broker.write_client_properties(tmp_path / "admin.properties", configs)
    common = ["--bootstrap-server", configs["bootstrap.servers"], "--command-config", props]
    user = "carol-" + os.urandom(3).hex()

    code, out, err = configs_cli(capsys, *common, "--describe", "--entity-type", "users",
                                 "--entity-name", "alice")
    assert (code, err) == (0, "")
    assert credentials_line(out) == {
        "alice": {"SCRAM-SHA-256=iterations=4096", "SCRAM-SHA-512=iterations=4096"}}

    # Kafka 4 (KRaft) takes one alteration per user and request: both
    # mechanisms at once fail there as kafka-configs.sh does (README,
    # Limitations: kchannel serve accepts them).
    code, out, err = configs_cli(
        capsys, *common, "--alter", "--entity-type", "users", "--entity-name", user,
        "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret],"
                        "SCRAM-SHA-512=[password=carol-secret]")
    assert code == 1
    assert err.splitlines()[1] == (
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
        "DuplicateResourceException: A user credential cannot be altered twice in the same "
        "request")

    for add in ("SCRAM-SHA-256=[iterations=8192,password=carol-secret]",
                "SCRAM-SHA-512=[password=carol-secret]"):
        code, out, err = configs_cli(capsys, *common, "--alter", "--entity-type", "users",
                                     "--entity-name", user, "--add-config", add)
        assert (code, err) == (0, ""), err
        assert out == f"Completed updating config for user {user}.\n"
    wait_until(lambda: can_login(kafka_broker, user, "carol-secret")
               and can_login(kafka_broker, user, "carol-secret", "SCRAM-SHA-512"))
    assert not can_login(kafka_broker, user, "wrong-secret")

    code, out, err = configs_cli(capsys, *common, "--describe", "--entity-type", "users",
                                 "--entity-name", user)
    assert credentials_line(out) == {
        user: {"SCRAM-SHA-256=iterations=8192", "SCRAM-SHA-512=iterations=4096"}}

    code, out, err = configs_cli(capsys, *common, "--describe", "--entity-type", "users")
    assert code == 0
    assert {"admin", "alice", user} <= set(credentials_line(out))

    code, out, err = configs_cli(capsys, *common, "--alter", "--entity-type", "users",
                                 "--entity-name", user, "--delete-config", "SCRAM-SHA-256")
    assert (code, out) == (0, f"Completed updating config for user {user}.\n"), err
    wait_until(lambda: not can_login(kafka_broker, user, "carol-secret"))
    assert can_login(kafka_broker, user, "carol-secret", "SCRAM-SHA-512")
    code, out, err = configs_cli(capsys, *common, "--alter", "--entity-type", "users",
                                 "--entity-name", user, "--delete-config", "SCRAM-SHA-512")
    assert code == 0, err
    wait_until(lambda: not can_login(kafka_broker, user, "carol-secret", "SCRAM-SHA-512"))

    code, out, err = configs_cli(capsys, *common, "--alter", "--entity-type", "users",
                                 "--entity-name", user, "--delete-config", "SCRAM-SHA-512")
    assert code == 1
    assert err.splitlines()[1] == (
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
        "ResourceNotFoundException: Attempt to delete a user credential that does not exist")


@pytest.mark.slow
def test_describe_output_same_as_kafka_configs_sh(kafka_broker, tmp_path, capsys):
    """kafka-configs.sh and kchannel configs print the same users in the
    same order for the same broker."""
    configs = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")
    props = kafka_broker.write_client_properties(tmp_path / "admin.properties", configs)
    args = ["--bootstrap-server", configs["bootstrap.servers"], "--command-config", props,
            "--describe", "--entity-type", "users"]
    java = kafka_broker.run_java("kafka.admin.ConfigCommand", *args)
    assert java.returncode == 0, java.stderr
    code, out, err = configs_cli(capsys, *args)
    assert code == 0, err
    assert list(credentials_line(out).items()) == list(credentials_line(java.stdout).items())


# ------------------------------------------------ the same requests to both
def upsertion(name, mechanism=SHA256, iterations=4096, password="secret"):
    salt = os.urandom(16)
    digest = "sha256" if mechanism != SHA512 else "sha512"
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, max(iterations, 1))
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": salted}


DESCRIBE_CASES = {
    "empty-name": [{"name": ""}],
    "named-twice": [{"name": "alice"}, {"name": "alice"}],
    "unknown-user": [{"name": "nobody"}],
    "known-user": [{"name": "alice"}],
    "known-and-unknown": [{"name": "alice"}, {"name": "nobody"}],
}

ALTER_CASES = {
    "empty-name": {"deletions": [], "upsertions": [upsertion("")]},
    "unknown-mechanism": {"deletions": [], "upsertions": [upsertion("dave", mechanism=3)]},
    "mechanism-zero": {"deletions": [], "upsertions": [upsertion("dave", mechanism=0)]},
    "too-few-iterations": {"deletions": [], "upsertions": [upsertion("dave", iterations=4095)]},
    "too-many-iterations": {"deletions": [],
                            "upsertions": [upsertion("dave", iterations=16385)]},
    "twice-in-upsertions": {"deletions": [],
                            "upsertions": [upsertion("dave"), upsertion("dave")]},
    "upsert-and-delete": {"deletions": [{"name": "dave", "mechanism": SHA256}],
                          "upsertions": [upsertion("dave")]},
    "delete-unknown": {"deletions": [{"name": "dave", "mechanism": SHA256}],
                       "upsertions": []},
    "delete-unknown-mechanism": {"deletions": [{"name": "alice", "mechanism": 7}],
                                 "upsertions": []},
    "two-mechanisms-new-user": {"deletions": [], "upsertions": [
        upsertion("erin", SHA256), upsertion("erin", SHA512)]},
    "delete-empty-name": {"deletions": [{"name": "", "mechanism": SHA256}],
                          "upsertions": []},
}


@pytest.fixture(scope="module")
def kchannel_peer(kchannel_server_module):
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
            f"{SCRAM_MODULE} required;",
        "super.users": "User:admin",
    }
    return kchannel_server_module(props, scram_users={"admin": "admin-secret",
                                                      "alice": "alice-secret"})


def answers(configs, api_key, body):
    with KafkaClient(configs) as client:
        client.connect()
        return client.request(api_key, body)


def peers(kafka_broker, kchannel_peer):
    kafka = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-256")
    mine = dict(kafka, **{"bootstrap.servers": kchannel_peer.bootstrap("SASL_PLAINTEXT")})
    return kafka, mine


def results(response, with_credentials=False):
    out = [(r["user"], r["error_code"], r["error_message"]) for r in response["results"]]
    if with_credentials:
        out = [o + (sorted((c["mechanism"], c["iterations"])
                           for c in r.get("credential_infos") or ()),)
               for o, r in zip(out, response["results"])]
    return (response.get("error_code", 0), response.get("error_message")), out


@pytest.mark.parametrize("case", sorted(DESCRIBE_CASES))
def test_describe_same_answer_as_kafka(kafka_broker, kchannel_peer, case):
    kafka, mine = peers(kafka_broker, kchannel_peer)
    body = {"users": DESCRIBE_CASES[case]}
    expected = results(answers(kafka, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body), True)
    got = results(answers(mine, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body), True)
    assert got == expected


# AlterUserScramCredentials follows ZooKeeper-mode Kafka in kchannel (README,
# Limitations); Kafka 4's KRaft controller answers these differently.
ZK_MODE_ALTER = {
    # KRaft: at most one alteration per user in a request.
    "two-mechanisms-new-user": (
        [("erin", 92, "A user credential cannot be altered twice in the same request")],
        [("erin", 0, None)]),
    # KRaft checks the deletion before it sees the same user again.
    "upsert-and-delete": (
        [("dave", 91, "Attempt to delete a user credential that does not exist")],
        [("dave", 92, "A user credential cannot be altered twice in the same request")]),
}


@pytest.mark.parametrize("case", sorted(ALTER_CASES))
def test_alter_same_answer_as_kafka(kafka_broker, kchannel_peer, case):
    kafka, mine = peers(kafka_broker, kchannel_peer)
    body = ALTER_CASES[case]
    expected = results(answers(kafka, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body))
    got = results(answers(mine, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body))
    if case in ZK_MODE_ALTER:
        assert (expected[1], got[1]) == ZK_MODE_ALTER[case]
        assert expected[0] == got[0]
    else:
        assert got == expected
