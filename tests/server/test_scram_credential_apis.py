"""The SCRAM credential APIs (DescribeUserScramCredentials, API 50, and
AlterUserScramCredentials, API 51): the handlers' semantics, error codes,
messages and authorization; against Apache Kafka, ``kchannel configs
--bootstrap-server`` on a real broker and the same raw requests answered
alike by Kafka and ``kchannel serve`` (marked kafka, interop).
"""
import hashlib
import os
import re
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel import errors
from kchannel.cli import main
from kchannel.client import KafkaClient
from kchannel.config import ServerConfig
from kchannel.principal import ANONYMOUS, KafkaPrincipal
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.security.sasl import mechanism as registry
from kchannel.security.sasl import scram
from kchannel.security.sasl.mechanism import ServerCallbacks
from kchannel.security.sasl.scram_store import InMemoryScramCredentialStore
from kchannel.server.scram_handlers import (
    SuperUserAuthorizer, alter_user_scram_credentials, describe_user_scram_credentials,
    make_alter_handler, make_describe_handler, register_scram_handlers)
from tests.fixtures.scram import SCRAM_MODULE, SHA256, SHA512
from tests.fixtures.waiting import wait_until


# ----------------------------------------------------------------------
# Describe/AlterUserScramCredentials handlers: Kafka's semantics, error
# codes and messages; authorization; response bodies encode with the schema.
# ----------------------------------------------------------------------

def upsert(name, mechanism=SHA256, iterations=4096, password="pw", salt=b"salt"):
    mech = scram.MECHANISMS_BY_TYPE.get(mechanism, scram.SCRAM_SHA_256)
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt,
            "salted_password": scram.hi(mech, password.encode(), salt, 4096)}


def delete(name, mechanism=SHA256):
    return {"name": name, "mechanism": mechanism}


def by_user(response):
    return {r["user"]: (r["error_code"], r["error_message"]) for r in response["results"]}


@pytest.fixture
def store():
    return InMemoryScramCredentialStore()


def test_upsert_then_authenticate(store):
    resp = alter_user_scram_credentials({"upsertions": [upsert("alice", SHA512, password="s")]},
                                        store)
    assert by_user(resp) == {"alice": (0, None)}
    cred = store.get("alice", "SCRAM-SHA-512")
    assert cred.salt == b"salt"
    c = registry.create_client("SCRAM-SHA-512", jaas_options={"username": "alice",
                                                              "password": "s"})
    s = registry.create_server("SCRAM-SHA-512", callbacks=ServerCallbacks.default(store=store),
                               now=0)
    tok = c.evaluate_challenge(b"")
    while not s.is_complete():
        tok = c.evaluate_challenge(s.evaluate_response(tok, 0))
    assert s.get_authorization_id() == "alice"


def test_both_mechanisms_for_one_user_in_one_request(store):
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("alice", SHA256, 8192), upsert("alice", SHA512)]}, store)
    assert by_user(resp) == {"alice": (0, None)}
    assert set(store.list()["alice"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}


@pytest.mark.parametrize("item,code,message", [
    (upsert("a", iterations=4095), Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    (upsert("a", iterations=16385), Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    (upsert("a", mechanism=0), Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsert("a", mechanism=3), Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    (upsert(""), Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
])
def test_invalid_upsertions(store, item, code, message):
    resp = alter_user_scram_credentials({"upsertions": [item]}, store)
    assert by_user(resp) == {item["name"]: (int(code), message)}
    assert store.list() == {}


def test_iteration_bounds_inclusive(store):
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("lo", iterations=4096), upsert("hi", iterations=16384)]}, store)
    assert by_user(resp) == {"lo": (0, None), "hi": (0, None)}


def test_invalid_deletions(store):
    resp = alter_user_scram_credentials({"deletions": [delete("a", 9), delete("", SHA256),
                                                       delete("nobody")]}, store)
    assert by_user(resp) == {
        "a": (int(Errors.UNSUPPORTED_SASL_MECHANISM), "Unknown SCRAM mechanism"),
        "": (int(Errors.UNACCEPTABLE_CREDENTIAL), "Username must not be empty"),
        "nobody": (int(Errors.RESOURCE_NOT_FOUND),
                   "Attempt to delete a user credential that does not exist")}


def test_duplicate_user_mechanism_fails_whole_user(store):
    alter_user_scram_credentials({"upsertions": [upsert("alice")]}, store)
    before = store.list()
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("alice", SHA256), upsert("alice", SHA512), upsert("bob")],
         "deletions": [delete("alice", SHA256)]}, store)
    assert by_user(resp) == {
        "alice": (int(Errors.DUPLICATE_RESOURCE),
                  "A user credential cannot be altered twice in the same request"),
        "bob": (0, None)}
    assert store.list()["alice"] == before["alice"]
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("carol"), upsert("carol")]}, store)
    assert by_user(resp)["carol"][0] == int(Errors.DUPLICATE_RESOURCE)


def test_error_for_a_user_fails_all_its_changes(store):
    alter_user_scram_credentials({"upsertions": [upsert("alice", SHA512)]}, store)
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("alice", SHA256)], "deletions": [delete("alice", SHA256)]},
        store)
    assert by_user(resp)["alice"][0] == int(Errors.DUPLICATE_RESOURCE)
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("alice", SHA256, iterations=1)],
         "deletions": [delete("alice", SHA512)]}, store)
    assert by_user(resp)["alice"] == (int(Errors.UNACCEPTABLE_CREDENTIAL), "Too few iterations")
    assert set(store.list()["alice"]) == {"SCRAM-SHA-512"}


def test_delete_and_upsert_other_mechanism(store):
    alter_user_scram_credentials({"upsertions": [upsert("alice", SHA512)]}, store)
    resp = alter_user_scram_credentials(
        {"upsertions": [upsert("alice", SHA256)], "deletions": [delete("alice", SHA512)]}, store)
    assert by_user(resp) == {"alice": (0, None)}
    assert set(store.list()["alice"]) == {"SCRAM-SHA-256"}


def test_describe_all_and_specific(store):
    """Kafka 4's ScramImage.describe: one result per distinct user in the
    order of the java.util.HashMap Kafka gathers them in ("zed" hashes
    before "amy"), "" rather than null messages on success, and the empty
    name is just a user without credentials."""
    alter_user_scram_credentials({"upsertions": [upsert("zed", SHA512, 8192), upsert("amy"),
                                                 upsert("amy", SHA512)]}, store)
    for users in (None, []):
        resp = describe_user_scram_credentials({"users": users}, store)
        assert (resp["error_code"], resp["error_message"]) == (0, "")
        assert [r["user"] for r in resp["results"]] == ["zed", "amy"]
        assert resp["results"][1]["credential_infos"] == [
            {"mechanism": SHA256, "iterations": 4096}, {"mechanism": SHA512, "iterations": 4096}]
        assert resp["results"][0]["credential_infos"] == [{"mechanism": SHA512, "iterations": 8192}]
    resp = describe_user_scram_credentials(
        {"users": [{"name": "zed"}, {"name": "nobody"}, {"name": "amy"}, {"name": "amy"},
                   {"name": ""}]}, store)
    assert [(r["user"], r["error_code"], r["error_message"]) for r in resp["results"]] == [
        ("", int(Errors.RESOURCE_NOT_FOUND),
         "Attempt to describe a user credential that does not exist: "),
        ("zed", 0, ""),
        ("nobody", int(Errors.RESOURCE_NOT_FOUND),
         "Attempt to describe a user credential that does not exist: nobody"),
        ("amy", int(Errors.DUPLICATE_RESOURCE),
         "Cannot describe SCRAM credentials for the same user twice in a single request: amy")]


class BrokenStore(InMemoryScramCredentialStore):
    def list(self, users=None):
        raise OSError("disk on fire")

    def alter(self, upsertions=(), deletions=()):
        raise OSError("disk on fire")


def test_store_failures_are_unknown_server_error():
    store = BrokenStore()
    resp = describe_user_scram_credentials({"users": None}, store)
    assert resp["error_code"] == int(Errors.UNKNOWN_SERVER_ERROR)
    assert "disk" not in (resp["error_message"] or "")
    resp = alter_user_scram_credentials({"upsertions": [upsert("a")]}, store)
    assert by_user(resp)["a"][0] == int(Errors.UNKNOWN_SERVER_ERROR)


def ctx(body, principal):
    return SimpleNamespace(body=body, principal=principal, header=None)


def test_everyone_refused_by_default(store):
    # Without super users nobody may read or change credentials, however
    # authenticated.
    describe = make_describe_handler(store)
    alter = make_alter_handler(store)
    alice = KafkaPrincipal("User", "alice")
    for principal in (ANONYMOUS, alice, None):
        resp = describe(ctx({"users": None}, principal))
        assert resp["error_code"] == int(Errors.CLUSTER_AUTHORIZATION_FAILED)
        resp = alter(ctx({"upsertions": [upsert("b")]}, principal))
        assert by_user(resp) == {"b": (int(Errors.CLUSTER_AUTHORIZATION_FAILED),
                                       "Cluster authorization failed.")}
    assert store.list() == {}


def test_only_super_users_allowed(store):
    authorize = SuperUserAuthorizer("User:admin; User:ops;")
    describe = make_describe_handler(store, authorize)
    alter = make_alter_handler(store, authorize)
    resp = describe(ctx({"users": [{"name": "a"}]}, ANONYMOUS))
    assert resp["error_code"] == int(Errors.CLUSTER_AUTHORIZATION_FAILED)
    assert resp["error_message"] == "Cluster authorization failed."
    resp = alter(ctx({"upsertions": [upsert("b"), upsert("a")], "deletions": [delete("a")]},
                     ANONYMOUS))
    assert [(r["user"], r["error_code"]) for r in resp["results"]] == [
        ("a", int(Errors.CLUSTER_AUTHORIZATION_FAILED)),
        ("b", int(Errors.CLUSTER_AUTHORIZATION_FAILED))]
    assert store.list() == {}
    # An authenticated principal that is not a super user is refused too.
    alice = KafkaPrincipal("User", "alice")
    resp = alter(ctx({"upsertions": [upsert("alice")]}, alice))
    assert by_user(resp) == {"alice": (int(Errors.CLUSTER_AUTHORIZATION_FAILED),
                                       "Cluster authorization failed.")}
    resp = describe(ctx({"users": [{"name": "alice"}]}, alice))
    assert (resp["error_code"], resp["error_message"]) == (
        int(Errors.CLUSTER_AUTHORIZATION_FAILED), "Cluster authorization failed.")
    assert store.list() == {}
    # Super users are allowed, a token-authenticated one as well.
    admin = KafkaPrincipal("User", "admin")
    assert by_user(alter(ctx({"upsertions": [upsert("b")]}, admin))) == {"b": (0, None)}
    ops = KafkaPrincipal("User", "ops", token_authenticated=True)
    assert describe(ctx({"users": None}, ops))["results"][0]["user"] == "b"
    # The principal type matters.
    assert describe(ctx({"users": None}, KafkaPrincipal("Group", "admin")))["error_code"] == \
        int(Errors.CLUSTER_AUTHORIZATION_FAILED)


def test_register_reads_super_users_from_the_server_config(store):
    registered = {}
    server = SimpleNamespace(
        config=ServerConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                             "super.users": "User:admin"}),
        register_handler=lambda key, fn, lo, hi: registered.__setitem__(key, fn))
    register_scram_handlers(server, store)
    admin, bob = KafkaPrincipal("User", "admin"), KafkaPrincipal("User", "bob")
    assert registered[50](ctx({"users": None}, admin))["error_code"] == 0
    assert registered[50](ctx({"users": None}, bob))["error_code"] == \
        int(Errors.CLUSTER_AUTHORIZATION_FAILED)
    register_scram_handlers(server, store, super_users="User:bob")
    assert registered[50](ctx({"users": None}, bob))["error_code"] == 0
    assert registered[50](ctx({"users": None}, admin))["error_code"] == \
        int(Errors.CLUSTER_AUTHORIZATION_FAILED)


def test_custom_authorize(store):
    seen = []

    def authorize(principal, operation):
        seen.append((str(principal), operation))
        return principal.name == "admin"

    alter = make_alter_handler(store, authorize)
    describe = make_describe_handler(store, authorize)
    assert by_user(alter(ctx({"upsertions": [upsert("x")]}, KafkaPrincipal("User", "admin")))) \
        == {"x": (0, None)}
    assert describe(ctx({"users": None}, KafkaPrincipal("User", "bob")))["error_code"] == \
        int(Errors.CLUSTER_AUTHORIZATION_FAILED)
    assert seen == [("User:admin", "ALTER"), ("User:bob", "DESCRIBE")]


def test_responses_encode_with_the_schema(store):
    alter_user_scram_credentials({"upsertions": [upsert("a")]}, store)
    bodies = [
        (messages.API[50].response, describe_user_scram_credentials(
            {"users": [{"name": "a"}, {"name": "b"}]}, store)),
        (messages.API[51].response, alter_user_scram_credentials(
            {"upsertions": [upsert("c", iterations=1)], "deletions": [delete("d")]}, store)),
    ]
    for spec, body in bodies:
        decoded = spec.decode(spec.encode(body, 0), 0)
        assert [r["user"] for r in decoded["results"]] == [r["user"] for r in body["results"]]
        assert [r["error_code"] for r in decoded["results"]] == \
            [r["error_code"] for r in body["results"]]


_names = st.sampled_from(["", "a", "b", "c=,d"])
_mechs = st.sampled_from([0, 1, 2, 3, -1])
_iters = st.sampled_from([0, 4095, 4096, 8192, 16384, 16385, -5])
_upserts = st.lists(st.builds(lambda n, m, i: {"name": n, "mechanism": m, "iterations": i,
                                               "salt": b"s", "salted_password": b"p" * 32},
                              _names, _mechs, _iters), max_size=5)
_deletes = st.lists(st.builds(lambda n, m: {"name": n, "mechanism": m}, _names, _mechs),
                    max_size=5)


@settings(max_examples=200, deadline=None)
@given(upsertions=_upserts, deletions=_deletes)
def test_alter_property_one_result_per_user_all_or_nothing(upsertions, deletions):
    store = InMemoryScramCredentialStore()
    store.put("b", "SCRAM-SHA-256", scram.credential_from_salted_password(
        "SCRAM-SHA-256", b"s", b"x" * 32, 4096))
    before = store.list()
    resp = alter_user_scram_credentials({"upsertions": upsertions, "deletions": deletions}, store)
    users = [r["user"] for r in resp["results"]]
    assert sorted(users) == sorted({x["name"] for x in upsertions + deletions})
    after = store.list()
    for r in resp["results"]:
        user = r["user"]
        if r["error_code"]:
            assert after.get(user) == before.get(user)   # nothing applied for a failed user
        else:
            for u in upsertions:
                if u["name"] == user:
                    mech = scram.MECHANISMS_BY_TYPE[u["mechanism"]].mechanism_name
                    assert after[user][mech].iterations == u["iterations"]
            for d in deletions:
                if d["name"] == user:
                    mech = scram.MECHANISMS_BY_TYPE[d["mechanism"]].mechanism_name
                    assert mech not in after.get(user, {})


# ----------------------------------------------------------------------
# SCRAM credential administration (DescribeUserScramCredentials, API 50, and
# AlterUserScramCredentials, API 51) against Apache Kafka: ``kchannel configs
# --bootstrap-server`` creates, describes and deletes users on a real broker,
# and the same raw requests, valid and invalid, get the same error codes and
# messages from Kafka and from ``kchannel serve``.
# ----------------------------------------------------------------------

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


@pytest.mark.kafka
@pytest.mark.interop
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
    # kafka-configs.sh prints the same (the mechanisms' order is the
    # broker's, so compared as sets).
    theirs = kafka_broker.run_java("kafka.admin.ConfigCommand", *common, "--describe",
                                   "--entity-type", "users", "--entity-name", user)
    assert theirs.returncode == 0, theirs.stderr
    assert credentials_line(theirs.stdout) == credentials_line(out)

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


@pytest.mark.kafka
@pytest.mark.interop
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


def answer_once(configs, api_key, body):
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


@pytest.mark.kafka
@pytest.mark.interop
@pytest.mark.parametrize("case", sorted(DESCRIBE_CASES))
def test_describe_same_answer_as_kafka(kafka_broker, kchannel_peer, case):
    kafka, mine = peers(kafka_broker, kchannel_peer)
    body = {"users": DESCRIBE_CASES[case]}
    expected = results(answer_once(kafka, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body), True)
    got = results(answer_once(mine, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body), True)
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


@pytest.mark.kafka
@pytest.mark.interop
@pytest.mark.parametrize("case", sorted(ALTER_CASES))
def test_alter_same_answer_as_kafka(kafka_broker, kchannel_peer, case):
    kafka, mine = peers(kafka_broker, kchannel_peer)
    body = ALTER_CASES[case]
    expected = results(answer_once(kafka, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body))
    got = results(answer_once(mine, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body))
    if case in ZK_MODE_ALTER:
        assert (expected[1], got[1]) == ZK_MODE_ALTER[case]
        assert expected[0] == got[0]
    else:
        assert got == expected
