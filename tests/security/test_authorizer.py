"""The built-in authorizer (issue 23): StandardAuthorizer semantics decision
by decision (rules read from Kafka's StandardAuthorizerData), the SQLite ACL
store shared by processes, the configuration failing closed, and the ACL
APIs of ``kchannel serve`` (SECURITY_DISABLED without an authorizer; one
worker's change seen by the others with ``num.network.threads=2``).
The differential proof against Apache Kafka is tests/gateway/test_gateway_acls.py."""
import multiprocessing
import os

import pytest

from kchannel import errors
from kchannel.client import KafkaClient
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.security.authorizer.acl import (AclBinding, AclBindingFilter, AclOperation,
                                              AclPermissionType, PatternType, ResourceType)
from kchannel.security.authorizer.requests import RequestAuthorizer
from kchannel.security.authorizer.setup import authorizer_from_config
from kchannel.security.authorizer.standard import StandardAuthorizer
from kchannel.security.authorizer.store import SqliteAclStore

from tests.fixtures.peers import InProcessServer
from tests.fixtures.waiting import wait_until

T, G, C, TX = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
               ResourceType.TRANSACTIONAL_ID)
O = AclOperation
ALLOW, DENY = "ALLOW", "DENY"


def acl(rtype, name, principal, op, perm=ALLOW, pattern="LITERAL", host="*"):
    return AclBinding.of(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings, **kw):
    a = StandardAuthorizer(**kw)
    assert a.create_acls(bindings) == [None] * len(bindings)
    return a


def test_literal_prefixed_wildcard_and_deny_wins():
    a = authorizer(acl(T, "orders", "User:alice", "WRITE"),
                   acl(T, "pay", "User:*", "READ", pattern="PREFIXED"),
                   acl(T, "payroll", "User:bob", "READ", DENY),
                   acl(T, "*", "User:carol", "DESCRIBE"))
    ok = a.authorize
    assert ok("User:alice", "10.0.0.1", O.WRITE, T, "orders")
    assert not ok("User:alice", "10.0.0.1", O.READ, T, "orders")
    assert not ok("User:alice", "10.0.0.1", O.WRITE, T, "orders2")    # literal is exact
    assert ok("User:bob", "h", O.READ, T, "payments")                  # prefix, User:*
    assert not ok("User:bob", "h", O.READ, T, "payroll")               # DENY wins
    assert ok("User:alice", "h", O.READ, T, "payroll")
    assert not ok("User:bob", "h", O.READ, T, "pa")                    # shorter than prefix
    assert ok("User:carol", "h", O.DESCRIBE, T, "anything")            # wildcard name
    assert not ok("User:carol", "h", O.READ, T, "anything")
    assert not ok("User:carol", "h", O.DESCRIBE, G, "anything")        # other type
    # Denied when no ACL applies (allow.everyone.if.no.acl.found=false)
    assert not ok("User:dave", "h", O.DESCRIBE, G, "g1")


def test_implied_operations_only_for_allow():
    a = authorizer(*(acl(T, f"t-{op}", "User:u", op) for op in
                     ("READ", "WRITE", "DELETE", "ALTER", "CREATE", "ALTER_CONFIGS",
                      "DESCRIBE_CONFIGS", "ALL")),
                   acl(T, "denied", "User:u", "ALL"), acl(T, "denied", "User:u", "READ", DENY))
    ok = a.authorize
    for op in ("READ", "WRITE", "DELETE", "ALTER"):
        assert ok("User:u", "h", O.DESCRIBE, T, f"t-{op}"), op
    assert not ok("User:u", "h", O.DESCRIBE, T, "t-CREATE")
    assert not ok("User:u", "h", O.DESCRIBE, T, "t-ALTER_CONFIGS")
    assert ok("User:u", "h", O.DESCRIBE_CONFIGS, T, "t-ALTER_CONFIGS")
    assert not ok("User:u", "h", O.ALTER_CONFIGS, T, "t-DESCRIBE_CONFIGS")
    for op in (O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS):
        assert ok("User:u", "h", op, T, "t-ALL")
    # a DENY of READ does not deny DESCRIBE (implication is for ALLOW only)
    assert not ok("User:u", "h", O.READ, T, "denied")
    assert ok("User:u", "h", O.DESCRIBE, T, "denied")


def test_hosts_super_users_and_allow_everyone():
    a = authorizer(acl(T, "t", "User:u", "READ", host="10.0.0.1"),
                   acl(T, "t", "User:u", "READ", DENY, host="10.0.0.9"),
                   super_users="User:admin;User:ops")
    assert a.authorize("User:u", "10.0.0.1", O.READ, T, "t")
    assert not a.authorize("User:u", "10.0.0.2", O.READ, T, "t")
    assert not a.authorize("User:u", "10.0.0.9", O.READ, T, "t")
    assert a.authorize("User:ops", "1.2.3.4", O.ALTER, C, "kafka-cluster")
    # allow.everyone.if.no.acl.found: only where no ACL applies at all
    b = authorizer(acl(T, "t", "User:u", "READ"), allow_everyone_if_no_acl_found=True)
    assert b.authorize("User:x", "h", O.WRITE, T, "other")
    assert not b.authorize("User:x", "h", O.READ, T, "t")


def test_authorize_by_resource_type():
    a = authorizer(acl(T, "a", "User:u", "WRITE"), acl(T, "b", "User:v", "WRITE"),
                   acl(T, "b", "User:v", "WRITE", DENY, pattern="PREFIXED"),
                   acl(T, "*", "User:w", "WRITE"), acl(T, "*", "User:w", "WRITE", DENY))
    assert a.authorize_by_resource_type("User:u", "h", O.WRITE, T)
    assert not a.authorize_by_resource_type("User:u", "h", O.READ, T)
    assert not a.authorize_by_resource_type("User:v", "h", O.WRITE, T)   # covered by DENY
    assert not a.authorize_by_resource_type("User:w", "h", O.WRITE, T)   # wildcard DENY


def test_invalid_acls_rejected_with_kafkas_reasons():
    a = StandardAuthorizer()
    bad = [acl(T, "", "User:u", "READ"), acl(C, "other", "User:u", "READ"),
           acl(T, "t", "User:u", "ANY"), acl(T, "t", "u-without-type", "READ"),
           AclBinding.of(T, "t", "MATCH", "User:u", "*", "READ", "ALLOW")]
    reasons = a.create_acls(bad)
    assert all(reasons), reasons
    assert "kafka-cluster" in reasons[1] and "patternType" in reasons[4]
    assert a.acls() == []


def test_filters_match_as_kafkas():
    a = authorizer(acl(T, "orders", "User:u", "READ"),
                   acl(T, "ord", "User:u", "READ", pattern="PREFIXED"),
                   acl(T, "*", "User:v", "READ"), acl(G, "orders", "User:u", "READ"))
    match = AclBindingFilter(T, "orders", PatternType.MATCH)
    assert len(a.acls(match)) == 3
    assert len(a.acls(AclBindingFilter(T, "orders", PatternType.ANY))) == 1
    assert len(a.acls(AclBindingFilter(ResourceType.ANY, principal="User:u"))) == 3
    assert [b.name for b in a.delete_acls([AclBindingFilter(T, "ord",
                                                            PatternType.PREFIXED)])[0]] == ["ord"]
    assert len(a.acls()) == 3


def _add_in_child(path, name):
    store = SqliteAclStore(path)
    StandardAuthorizer(store).create_acls([acl(T, name, "User:u", "READ")])
    store.close()


def test_sqlite_store_changes_seen_by_other_processes(tmp_path):
    path = str(tmp_path / "acls.db")
    a = StandardAuthorizer(SqliteAclStore(path))
    assert not a.authorize("User:u", "h", O.READ, T, "t")        # decision cached
    ctx = multiprocessing.get_context("fork")
    p = ctx.Process(target=_add_in_child, args=(path, "t"))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert a.authorize("User:u", "h", O.READ, T, "t")            # seen, cache dropped
    b = StandardAuthorizer(SqliteAclStore(path))
    b.delete_acls([AclBindingFilter()])
    assert not a.authorize("User:u", "h", O.READ, T, "t")


def _props(**kw):
    values = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    values.update(kw)
    return values.get


def test_configuration_fails_closed(tmp_path):
    assert authorizer_from_config(_props(**{"authorizer.class.name": ""}), str(tmp_path)) is None
    a = authorizer_from_config(_props(**{"super.users": "User:admin"}), str(tmp_path))
    assert isinstance(a.store, SqliteAclStore) and "User:admin" in a.super_users
    assert not a.allow_everyone_if_no_acl_found
    a.store.close()
    for key, value in (("authorizer.class.name", "com.example.MyAuthorizer"),
                       ("allow.everyone.if.no.acl.found", "yes"),
                       ("kchannel.acl.store", "postgres")):
        with pytest.raises(errors.ConfigError) as info:
            authorizer_from_config(_props(**{key: value}), str(tmp_path))
        assert key in str(info.value)


def test_config_validate_refuses_an_unknown_authorizer(tmp_path):
    from tests.fixtures.peers import run_kchannel, write_properties
    path = str(tmp_path / "server.properties")
    write_properties(path, {"listeners": "PLAINTEXT://127.0.0.1:0",
                            "authorizer.class.name": "com.example.MyAuthorizer"})
    r = run_kchannel("config", "validate", "--config", path)
    assert r.returncode == 1 and "authorizer.class.name" in r.stdout + r.stderr
    write_properties(path, {"listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name":
                            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    assert run_kchannel("config", "validate", "--config", path).returncode == 0


def test_unknown_apis_are_not_offered_behind_an_authorizer():
    ra = RequestAuthorizer(StandardAuthorizer())
    assert ra.offered(int(ApiKey.FETCH), 4, 17) == (4, 12)            # names, not ids
    assert ra.offered(int(ApiKey.DELETE_TOPICS), 1, 6) == (1, 5)
    assert ra.offered(int(ApiKey.CONSUMER_GROUP_HEARTBEAT), 0, 1) is None
    assert ra.offered(int(ApiKey.PRODUCE), 3, 9) == (3, 9)


# ------------------------------------------------------------- kchannel serve
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _serve_props(tmp_path, **extra):
    props = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN",
             "inter.broker.listener.name": "SASL_PLAINTEXT",
             "sasl.mechanism.inter.broker.protocol": "PLAIN",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                 f'{PLAIN} required user_admin="admin-secret" user_alice="alice-secret";',
             "kchannel.scram.credential.store": "memory",
             "log.dirs": str(tmp_path / "data")}
    props.update(extra)
    return props


def _client(bootstrap, user):
    host, _, port = bootstrap.rpartition(":")
    c = KafkaClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN",
                     "sasl.jaas.config": f'{PLAIN} required username="{user}" '
                                         f'password="{user}-secret";'})
    c.connect(host, int(port))
    return c


DESCRIBE_ALL = {"resource_type_filter": 1, "resource_name_filter": None,
                "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                "operation": 1, "permission_type": 1}


def test_acl_apis_without_an_authorizer_are_security_disabled(tmp_path):
    s = InProcessServer(_serve_props(tmp_path))
    try:
        with _client(s.bootstrap("SASL_PLAINTEXT"), "admin") as c:
            body = c.request(ApiKey.DESCRIBE_ACLS, DESCRIBE_ALL)
            assert body["error_code"] == int(Errors.SECURITY_DISABLED)
            assert body["error_message"] == "No Authorizer is configured."
    finally:
        s.stop()


def test_workers_share_acls(tmp_path, kchannel_server):
    """num.network.threads=2: an ACL created through one connection is seen
    on every connection (whichever worker process the kernel gave it)."""
    props = _serve_props(tmp_path, **{
        "num.network.threads": "2", "super.users": "User:admin",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    del props["kchannel.scram.credential.store"]       # (memory: one process only)
    srv = kchannel_server(props)
    bootstrap = srv.bootstrap("SASL_PLAINTEXT")
    with _client(bootstrap, "admin") as c:
        r = c.request(ApiKey.CREATE_ACLS, {"creations": [
            {"resource_type": 2, "resource_name": "orders", "resource_pattern_type": 3,
             "principal": "User:alice", "host": "*", "operation": 8,
             "permission_type": 3}]})
        assert [x["error_code"] for x in r["results"]] == [0]
    for _ in range(8):
        with _client(bootstrap, "admin") as c:
            body = c.request(ApiKey.DESCRIBE_ACLS, DESCRIBE_ALL)
            assert [r["resource_name"] for r in body["resources"]] == ["orders"]
        with _client(bootstrap, "alice") as c:
            body = c.request(ApiKey.DESCRIBE_ACLS, DESCRIBE_ALL)
            assert body["error_code"] == int(Errors.CLUSTER_AUTHORIZATION_FAILED)


@pytest.mark.slow
def test_zookeeper_store_in_kafkas_layout(zookeeper):
    """kchannel.acl.store=zookeeper: Kafka's /kafka-acl znodes and JSON, change
    notifications, and a second store (another server) following them."""
    import json
    from kazoo.client import KazooClient
    from kchannel.security.authorizer.zk_store import ZkAclStore
    connect = zookeeper.chroot()
    chroot = "/" + connect.split("/", 1)[1]
    a = StandardAuthorizer(ZkAclStore(connect))
    b = StandardAuthorizer(ZkAclStore(connect))
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start()
    try:
        assert not b.authorize("User:alice", "h", O.DESCRIBE_CONFIGS, T, "orders")
        a.create_acls([acl(T, "orders", "User:alice", "ALTER_CONFIGS"),
                       acl(TX, "tx-", "User:alice", "WRITE", DENY, pattern="PREFIXED")])
        data, _ = zk.get(f"{chroot}/kafka-acl/Topic/orders")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "AlterConfigs",
             "host": "*"}]}
        data, _ = zk.get(f"{chroot}/kafka-acl-extended/prefixed/TransactionalId/tx-")
        assert json.loads(data)["acls"][0]["permissionType"] == "Deny"
        assert [zk.get(f"{chroot}/kafka-acl-changes/{c}")[0] for c in
                zk.get_children(f"{chroot}/kafka-acl-changes")] == [b"Topic:orders"]
        wait_until(lambda: b.authorize("User:alice", "h", O.DESCRIBE_CONFIGS, T, "orders"),
                   "the other authorizer to see the ACL", timeout_s=15.0)
        assert not b.authorize("User:alice", "h", O.WRITE, TX, "tx-1")
        b.delete_acls([AclBindingFilter(T, "orders")])
        assert not zk.exists(f"{chroot}/kafka-acl/Topic/orders")
        wait_until(lambda: not a.authorize("User:alice", "h", O.DESCRIBE_CONFIGS, T, "orders"),
                   "the other authorizer to see the removal", timeout_s=15.0)
        assert len(a.acls()) == 1
    finally:
        zk.stop()
        a.store.close()
        b.store.close()


# ------------------------------------------------- Produce/Fetch fast paths
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kchannel.protocol import messages  # noqa: E402
from kchannel.security.authorizer.requests import fetch_names, produce_names  # noqa: E402
from tests.fixtures.strategies import body_strategy  # noqa: E402


def _prefixed_request(api, version, body, prefix=b"\x00\x07hdr"):
    return prefix + bytes(api.request.encode(body, version))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_paths_read_what_the_decoder_reads(data):
    """The topic names (and transactional id, acks, replica id) read
    straight off Produce v3-9 and Fetch v4-12 frames are the decoder's, for
    any body the schema allows (tagged fields, nulls, long varints)."""
    api = data.draw(st.sampled_from([messages.PRODUCE, messages.FETCH]))
    lo, hi = (3, 9) if api is messages.PRODUCE else (4, 12)
    version = data.draw(st.integers(lo, hi))
    body = data.draw(body_strategy(api.request.fields, version))
    frame = _prefixed_request(api, version, body)
    decoded = api.request.decode(frame, version, 5)
    if api is messages.PRODUCE:
        assert produce_names(frame, 5, version) == (
            decoded["transactional_id"], decoded["acks"],
            [t["name"] for t in decoded["topic_data"]])
    else:
        assert fetch_names(frame, 5, version) == (
            decoded["replica_id"] if version <= 14 else -1,
            [t["topic"] for t in decoded["topics"]])
    # a truncated frame fails, or (cut after the topics, which is all the
    # fast path reads) gives the same names: never other ones
    cut = data.draw(st.integers(5, len(frame) - 1))
    scan = produce_names if api is messages.PRODUCE else fetch_names
    try:
        partial = scan(frame[:cut], 5, version)
    except (IndexError, ValueError, UnicodeDecodeError, struct_error):
        return
    assert partial == scan(frame, 5, version)


from struct import error as struct_error  # noqa: E402


# ------------------------------------------------ token Describe by ACLs
def test_token_describe_follows_acls_and_looks_up_only_the_granted_tokens():
    """DescribeDelegationToken with ACLs (KafkaApis' rule): a principal sees
    its own tokens and those it has DESCRIBE on (the token id) or
    DESCRIBE_TOKENS on (the owner), a DENY wins, and the look-up touches
    only those tokens, not the thousands of others."""
    from kchannel.principal import KafkaPrincipal
    from kchannel.security.authorizer.setup import AclTokenAuthorizer
    from kchannel.tokens.manager import TokenManager
    from kchannel.tokens.store import InMemoryTokenStore

    alice, bob, carol = (KafkaPrincipal("User", n) for n in ("alice", "bob", "carol"))
    acls = StandardAuthorizer(super_users="User:admin")
    token_authorizer = AclTokenAuthorizer(acls)
    asked = []
    plain_check = token_authorizer.authorize_describe_token

    def counting(requester, info):
        asked.append(info.token_id)
        return plain_check(requester, info)
    token_authorizer.authorize_describe_token = counting
    m = TokenManager("k", store=InMemoryTokenStore(), authorizer=token_authorizer,
                     max_tokens_per_owner=5000)
    now = 1_700_000_000_000
    a1 = m.create_token(alice, now=now).token_id
    a2 = m.create_token(alice, now=now).token_id
    c1 = m.create_token(carol, now=now).token_id
    b1 = m.create_token(bob, now=now).token_id
    for i in range(2000):
        m.create_token(KafkaPrincipal("User", f"u{i % 20}"), now=now)

    def seen(who, owners=None):
        del asked[:]
        err, tokens = m.describe_tokens(who, owners, now=now)
        assert err is Errors.NONE
        return sorted(t.token_info.token_id for t in tokens)
    # no ACL: each sees its own only, and no other token is asked about
    assert seen(bob) == [b1] and asked == []
    assert seen(alice) == sorted([a1, a2]) and asked == []
    # bob: DESCRIBE on alice's token a1, DESCRIBE_TOKENS on carol's tokens
    assert acls.create_acls([
        AclBinding.of("DELEGATION_TOKEN", a1, "LITERAL", "User:bob", "*", "DESCRIBE", "ALLOW"),
        AclBinding.of("USER", "User:carol", "LITERAL", "User:bob", "*", "DESCRIBE_TOKENS",
                      "ALLOW"),
        # not bob's: alice's grants do not leak to bob
        AclBinding.of("DELEGATION_TOKEN", b1, "LITERAL", "User:alice", "*", "DESCRIBE",
                      "ALLOW")]) == [None] * 3
    assert seen(bob) == sorted([b1, a1, c1])
    assert len(asked) <= 3              # not 2,004 tokens
    assert seen(alice) == sorted([a1, a2, b1])
    assert seen(bob, [alice]) == [a1]   # an owners filter narrows the same set
    # a DENY on the token wins over the ALLOW
    acls.create_acls([AclBinding.of("DELEGATION_TOKEN", a1, "LITERAL", "User:bob", "*",
                                    "DESCRIBE", "DENY")])
    assert seen(bob) == sorted([b1, c1])
    # a wildcard grant is every token: the whole store is the answer
    acls.create_acls([AclBinding.of("DELEGATION_TOKEN", "*", "LITERAL", "User:carol", "*",
                                    "DESCRIBE", "ALLOW")])
    assert len(seen(carol)) == 2004             # (the DENY on a1 is bob's)
