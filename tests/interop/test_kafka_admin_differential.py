"""``kchannel.Admin`` against Java's ``Admin`` on the same brokers: each
method's result equals Java Admin's (one JVM for every Java call,
``tests/java/AdminOps.java``), and what one side changes the other sees.

Brokers: the session's Apache Kafka (no authorizer: its ACL APIs answer
SECURITY_DISABLED to both clients) and, for ACLs that exist, an in-process
``kchannel serve`` with ``StandardAuthorizer``.  State is made first (an
open confluent-kafka transaction, records, kchannel's own mutations), then
the JVM runs its checks, then each test compares one method."""
import base64
import contextlib
import io
import tempfile
import types

import pytest

from kchannel import Admin
from kchannel.cli import main as cli_main
from kchannel.client import KafkaClient
from kchannel.client.admin import (AclBinding, AclBindingFilter, ConfigResource, NewTopic,
                                   OffsetSpec, ScramCredentialInfo,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)
from kchannel.client.metadata import TopicPartition
from kchannel.errors import KafkaError, SaslAuthenticationError
from kchannel.protocol.errors import Errors
from kchannel.tokens.admin import exception_name
from tests.fixtures.peers import InProcessServer
from tests.fixtures.records import create_topic, led_topic, produce, topic_name
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.kafka]

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
# consumer-groups --reset-offsets by time: the records' timestamps are
# BASE_TS + 0..40 ms (2023-11-14T22:13:20.000Z + ...), so a datetime inside
# them, the same one in another zone, one after them all (no offset: Kafka's
# "Warn: ... Falling back to latest known offset."), and durations (the
# records are years old: every partition falls back).
BASE_TS = 1_700_000_000_000
RESETS = [("--to-datetime", "2023-11-14T22:13:20.020"),
          ("--to-datetime", "2023-11-14T23:13:20.020+01:00"),
          ("--to-datetime", "2023-11-14T22:13:21.000Z"),
          ("--to-datetime", "2023-11-14T22:13:19.999"),
          ("--by-duration", "P1DT2H"), ("--by-duration", "PT30M")]


def _tp(text):
    topic, _, p = text.rpartition(":")
    return TopicPartition(topic, int(p))


def _tp_name(tp):
    return f"{tp.topic}:{tp.partition}"


def _binding(b):
    return [b.resource_type.name, b.name, b.pattern_type.name, b.principal, b.host,
            b.operation.name, b.permission_type.name]


def _uuid(topic_id):
    """A topic id as Kafka's ``Uuid.toString()`` (URL-safe base64)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _jvm_outcome(call):
    """One name's result as the JVM prints it: "ok" or "Class: message"."""
    try:
        call()
    except KafkaError as exc:
        return f"{exception_name(exc.error_code)}: {exc.message}"
    return "ok"


def _described(d):
    return {"name": d.name, "internal": d.is_internal, "topicId": _uuid(d.topic_id),
            "partitions": [[p.partition, p.leader, p.replicas, p.isr] for p in d.partitions]}


def _token(t):
    i = t.token_info
    return {"tokenId": i.token_id, "hmac": t.hmac_base64, "owner": str(i.owner),
            "requester": str(i.token_requester), "renewers": [str(r) for r in i.renewers],
            "issueTimestamp": i.issue_timestamp, "expiryTimestamp": i.expiry_timestamp,
            "maxTimestamp": i.max_timestamp}


@pytest.fixture(scope="module")
def world(kafka_broker, kafka_java):
    from confluent_kafka import Producer as CProducer
    w = types.SimpleNamespace()
    plain = kafka_broker.bootstrap("PLAINTEXT")
    w.config = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    w.topic = create_topic(plain, topic_name("adiff"), partitions=2)
    # Rising then falling timestamps: max-timestamp is not the last offset.
    produce(plain, w.topic, [(b"k%d" % (i % 2), b"v", [], BASE_TS + 10 * (i % 5))
                             for i in range(10)])
    w.tps = [TopicPartition(w.topic, 0), TopicPartition(w.topic, 1)]
    w.ours_del = create_topic(plain, topic_name("adiff-del"), partitions=1)
    w.java_del = create_topic(plain, topic_name("adiff-del"), partitions=1)
    for t in (w.ours_del, w.java_del):
        produce(plain, t, [(None, b"x", [], None)] * 6)
    w.cfg_topic = create_topic(plain, topic_name("adiff-cfg"), partitions=1)
    w.txn_topic = create_topic(plain, topic_name("adiff-txn"), partitions=1)
    w.tid = topic_name("adiff-tx")
    txn = CProducer({"bootstrap.servers": plain, "transactional.id": w.tid,
                     "transaction.timeout.ms": 120000})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(w.txn_topic, b"in-flight")
    assert txn.flush(30) == 0

    acl_server = InProcessServer({"listeners": "PLAINTEXT://127.0.0.1:0",
                                  "log.dirs": tempfile.mkdtemp(prefix="adiff-"),
                                  "authorizer.class.name": STANDARD,
                                  "super.users": "User:ANONYMOUS"})
    w.acl_config = {"bootstrap.servers": acl_server.bootstrap()}
    w.acl_a = AclBinding.of("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    w.acl_b = AclBinding.of("GROUP", "g-", "PREFIXED", "User:bob", "*", "ALL", "DENY")
    w.acl_c = AclBinding.of("CLUSTER", "kafka-cluster", "LITERAL", "User:carol", "10.0.0.1",
                            "IDEMPOTENT_WRITE", "ALLOW")
    w.scram_ours, w.scram_java = topic_name("ours"), topic_name("java")
    try:
        w.admin = Admin(w.config)
        w.acl_admin = Admin(w.acl_config)
        # kchannel's mutations, which the JVM then sees.
        w.admin.alter_configs({ConfigResource("TOPIC", w.cfg_topic):
                               {"retention.ms": "123456", "cleanup.policy": "compact"}})
        w.ours_low = w.admin.delete_records({TopicPartition(w.ours_del, 0): 4})
        w.acl_admin.create_acls([w.acl_a, w.acl_b])
        w.acls_before = w.acl_admin.describe_acls()
        # (Kafka refuses two alterations of one user in one request.)
        for mech, iterations in (("SCRAM-SHA-512", 4096), ("SCRAM-SHA-256", 8192)):
            w.admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                w.scram_ours, ScramCredentialInfo(mech, iterations), "ours-secret")])
        # A group with committed offsets, for the reset-by-time tool runs.
        w.group = topic_name("adiff-g")
        with Admin({"bootstrap.servers": plain}) as plain_admin:
            # (on a fresh broker the offsets topic may not be there yet:
            # the Admin retries COORDINATOR_NOT_AVAILABLE as Kafka's does)
            plain_admin.alter_consumer_group_offsets(w.group, {tp: 0 for tp in w.tps})
        w.plain = plain
        # Topics: kchannel's creations, growth and deletion (seen by Java),
        # Java's (seen by kchannel), and requests both refuse alike.
        w.ours_new, w.java_new = topic_name("adiff-new"), topic_name("adiff-new")
        w.ours_grow = create_topic(plain, topic_name("adiff-grow"), partitions=1)
        w.java_grow = create_topic(plain, topic_name("adiff-grow"), partitions=1)
        w.ours_gone = create_topic(plain, topic_name("adiff-gone"), partitions=1)
        w.java_gone = create_topic(plain, topic_name("adiff-gone"), partitions=1)
        w.missing = topic_name("adiff-missing")
        w.admin.create_topics([NewTopic(w.ours_new, 3, 1, {"retention.ms": "7200000"})])
        w.admin.create_partitions({w.ours_grow: 2})
        w.admin.delete_topics([w.ours_gone])
        wait_until(lambda: led_topic(w.admin, w.ours_new, 3) and led_topic(w.admin, w.ours_grow, 2)
                    and w.ours_gone not in w.admin.list_topics(), 30)
        # (one name per refusal: a request names a topic once)
        w.refused_topics = [[w.topic, 1, 1, {}],                  # TOPIC_ALREADY_EXISTS
                            ["bad name!", 1, 1, {}],              # INVALID_TOPIC_EXCEPTION
                            [topic_name("adiff-rf"), 1, 3, {}],   # INVALID_REPLICATION_FACTOR
                            [topic_name("adiff-p0"), 0, 1, {}],   # INVALID_PARTITIONS
                            [topic_name("adiff-cfg"), 1, 1, {"no.such.config": "1"}],
                            [topic_name("adiff-val"), 1, 1, {"retention.ms": "x"}]]
        w.validated = topic_name("adiff-validate")
        # Both listings just before Java's own changes.
        w.listed = w.admin.list_topics()
        w.listed_internal = w.admin.list_topics(list_internal=True)
        w.token = w.admin.create_delegation_token(renewers=["User:alice"],
                                                  max_lifetime_ms=3_600_000)
        # (described by the JVM below: wait until the broker replayed it)
        wait_until(lambda: w.token.token_info.token_id in {
            t.token_info.token_id for t in w.admin.describe_delegation_token()},
            "kchannel's token described")
        node = w.admin.describe_cluster().nodes[0].id
        w.node = node
        tp_names = [_tp_name(tp) for tp in w.tps]
        c, a = w.config, w.acl_config
        checks = [
            {"id": "list-topics", "op": "listTopics", "config": c},
            {"id": "list-topics-internal", "op": "listTopics", "config": c, "listInternal": True},
            {"id": "cluster", "op": "describeCluster", "config": c},
            {"id": "create-topics", "op": "createTopics", "config": c,
             "topics": [[w.java_new, 3, 1, {"retention.ms": "7200000"}],
                        [w.ours_new, 1, 1, {}], *w.refused_topics]},
            {"id": "create-topics-validate", "op": "createTopics", "config": c,
             "validateOnly": True, "topics": [[w.validated, 2, 1, {}]]},
            {"id": "create-partitions", "op": "createPartitions", "config": c,
             "counts": {w.java_grow: 2, w.ours_grow: 2, w.topic: 1, w.missing: 3}},
            {"id": "create-partitions-validate", "op": "createPartitions", "config": c,
             "validateOnly": True, "counts": {w.topic: 5}},
            {"id": "delete-topics", "op": "deleteTopics", "config": c,
             "topics": [w.java_gone, w.ours_gone, w.missing]},
            {"id": "describe-topics", "op": "describeTopics", "config": c,
             "topics": [w.topic, w.ours_new, w.ours_grow, w.missing]},
            {"id": "configs", "op": "describeConfigs", "config": c, "type": "TOPIC",
             "name": w.cfg_topic},
            {"id": "broker-configs", "op": "describeConfigs", "config": c, "type": "BROKER",
             "name": str(node)},
            *({"id": f"offsets-{s}", "op": "listOffsets", "config": c, "partitions": tp_names,
               "spec": s} for s in ("earliest", "latest", "maxTimestamp", str(BASE_TS + 25),
                                    str(BASE_TS + 10 ** 9))),
            {"id": "offsets-deleted", "op": "listOffsets", "config": c,
             "partitions": [f"{w.ours_del}:0"], "spec": "earliest"},
            {"id": "delete-records", "op": "deleteRecords", "config": c,
             "offsets": {f"{w.java_del}:0": 4}},
            {"id": "kafka-acls", "op": "describeAcls", "config": c,
             "filter": [None] * 7},
            {"id": "kafka-create-acls", "op": "createAcls", "config": c,
             "bindings": [_binding(w.acl_a)]},
            {"id": "acls", "op": "describeAcls", "config": a, "filter": [None] * 7},
            {"id": "acls-topic", "op": "describeAcls", "config": a,
             "filter": ["TOPIC", "orders", "MATCH", None, None, None, None]},
            {"id": "delete-acls", "op": "deleteAcls", "config": a,
             "filters": [[None, None, None, "User:bob", None, None, None]]},
            {"id": "create-acls", "op": "createAcls", "config": a,
             "bindings": [_binding(w.acl_c)]},
            {"id": "scram-upsert", "op": "alterScram", "config": c,
             "upserts": [{"user": w.scram_java, "mechanism": "SCRAM-SHA-256",
                          "iterations": 8192, "password": "java-secret"}]},
            # Per-user results (values()): one done, one refused by the
            # admin client itself, one refused by the broker.
            {"id": "scram-per-user", "op": "alterScram", "config": c,
             "upserts": [{"user": w.scram_java + "-2", "mechanism": "SCRAM-SHA-256",
                          "password": "s"},
                         {"user": w.scram_java + "-empty", "mechanism": "SCRAM-SHA-512",
                          "password": ""}],
             "deletions": [{"user": w.scram_java + "-missing", "mechanism": "SCRAM-SHA-512"}]},
            # (Kafka answers AlterUserScramCredentials once the controller
            # committed it; the broker's describe follows when it replays the
            # record: the JVM describes again until it has Java's upsert)
            {"id": "scram", "op": "describeScram", "config": c,
             "users": [w.scram_ours, w.scram_java],
             "untilDescribed": [w.scram_ours, w.scram_java]},
            {"id": "scram-missing", "op": "describeScram", "config": c,
             "users": [topic_name("nobody")]},
            {"id": "token-create", "op": "createToken", "config": c,
             "renewers": ["User:bob"], "maxLifetimeMs": 7_200_000},
            {"id": "token-renew", "op": "renewToken", "config": c,
             "hmac": w.token.hmac_base64, "renewPeriodMs": 600_000},
            {"id": "tokens", "op": "describeTokens", "config": c},
            {"id": "log-dirs", "op": "describeLogDirs", "config": c, "brokers": [node]},
            {"id": "producers", "op": "describeProducers", "config": c,
             "partitions": [*tp_names, f"{w.txn_topic}:0"]},
            {"id": "transactions", "op": "listTransactions", "config": c},
            {"id": "transactions-ongoing", "op": "listTransactions", "config": c,
             "states": ["Ongoing"]},
            {"id": "describe-transactions", "op": "describeTransactions", "config": c,
             "ids": [w.tid]},
            *({"id": f"reset-{i}", "op": "tool", "main": GROUP_COMMAND,
               "args": ["--bootstrap-server", plain, "--reset-offsets", "--group", w.group,
                        "--topic", w.topic, *args, "--dry-run"]}
              for i, args in enumerate(RESETS)),
        ]
        w.java = kafka_java.probe([{**c, "shared": True} for c in checks], timeout=180)
        yield w
    finally:
        for name in ("admin", "acl_admin"):
            if hasattr(w, name):
                getattr(w, name).close()
        acl_server.stop()
        try:
            txn.abort_transaction(30)
        except Exception:  # noqa: BLE001 - the broker may have aborted it already
            pass


def _ok(w, check):
    r = w.java[check]
    assert r["ok"], r
    return r


def test_describe_cluster(world):
    w = world
    ours = w.admin.describe_cluster()
    java = _ok(w, "cluster")
    assert [ours.cluster_id, ours.controller.id, [[n.id, n.host, n.port] for n in ours.nodes]] \
        == [java["clusterId"], java["controller"], java["nodes"]]
    assert java["nodes"] and java["controller"] == w.node


def test_list_topics(world):
    w = world
    for check, ours in (("list-topics", w.listed), ("list-topics-internal", w.listed_internal)):
        assert {n: [_uuid(t.topic_id), t.is_internal] for n, t in ours.items()} == \
            _ok(w, check)["topics"], check
    java = _ok(w, "list-topics-internal")["topics"]
    assert java["__consumer_offsets"][1] is True and "__consumer_offsets" not in w.listed
    assert java[w.ours_new][1] is False and w.ours_gone not in java


def test_create_topics(world):
    w = world
    java = _ok(w, "create-topics")["results"]
    assert java[w.java_new] == "ok"
    for name, partitions, rf, configs in w.refused_topics:
        ours = _jvm_outcome(
            lambda: w.admin.create_topics([NewTopic(name, partitions, rf, configs)]))
        assert ours == java[name] and ours != "ok", name
    # Each side's creation refused to the other as the other refuses it.
    ours = _jvm_outcome(lambda: w.admin.create_topics([NewTopic(w.java_new, 1, 1)]))
    assert ours == java[w.ours_new].replace(w.ours_new, w.java_new)
    assert ours.startswith("TopicExistsException: ")
    # validate_only: accepted by both, created by neither.
    assert _ok(w, "create-topics-validate")["results"] == {w.validated: "ok"}
    assert w.admin.create_topics([NewTopic(w.validated, 2, 1)], validate_only=True) is None
    assert w.validated not in w.admin.list_topics()
    # Java's topic, as kchannel sees it.
    wait_until(lambda: led_topic(w.admin, w.java_new, 3))
    res = ConfigResource("TOPIC", w.java_new)
    entry = w.admin.describe_configs([res])[res]["retention.ms"]
    assert (entry.value, entry.source) == ("7200000", "DYNAMIC_TOPIC_CONFIG")


def test_create_partitions(world):
    w = world
    java = _ok(w, "create-partitions")["results"]
    assert java[w.java_grow] == "ok"
    for topic, count in ((w.topic, 1), (w.missing, 3)):
        ours = _jvm_outcome(lambda: w.admin.create_partitions({topic: count}))
        assert ours == java[topic] and ours != "ok", topic
    # Each side's growth: the other's request for the same count is refused alike.
    ours = _jvm_outcome(lambda: w.admin.create_partitions({w.java_grow: 2}))
    assert ours == java[w.ours_grow].replace(w.ours_grow, w.java_grow)
    assert ours.startswith("InvalidPartitionsException: ")
    assert _ok(w, "create-partitions-validate")["results"] == {w.topic: "ok"}
    w.admin.create_partitions({w.topic: 5}, validate_only=True)
    assert len(w.admin.describe_topics([w.topic])[w.topic].partitions) == 2
    wait_until(lambda: led_topic(w.admin, w.java_grow, 2))


def test_delete_topics(world):
    w = world
    java = _ok(w, "delete-topics")["results"]
    assert java[w.java_gone] == "ok"
    ours = _jvm_outcome(lambda: w.admin.delete_topics([w.missing]))
    assert ours == java[w.missing] and ours.startswith("UnknownTopicOrPartitionException: ")
    # kchannel's deletion, seen by Java; Java's, seen by kchannel.
    assert java[w.ours_gone] == java[w.missing].replace(w.missing, w.ours_gone)
    wait_until(lambda: w.java_gone not in w.admin.list_topics())
    assert _jvm_outcome(lambda: w.admin.delete_topics([w.java_gone])) == \
        java[w.missing].replace(w.missing, w.java_gone)


def test_describe_topics(world):
    w = world
    java = _ok(w, "describe-topics")["topics"]
    ours = w.admin.describe_topics([w.topic, w.ours_new, w.ours_grow])
    assert {n: _described(d) for n, d in ours.items()} == \
        {n: java[n] for n in (w.topic, w.ours_new, w.ours_grow)}
    assert [len(java[n]["partitions"]) for n in (w.topic, w.ours_new, w.ours_grow)] == [2, 3, 2]
    assert _jvm_outcome(lambda: w.admin.describe_topics([w.missing])) == java[w.missing]
    assert java[w.missing].startswith("UnknownTopicOrPartitionException: ")


def test_describe_configs_and_legacy_alter_configs(world):
    w = world
    for check, res in (("configs", ConfigResource("TOPIC", w.cfg_topic)),
                       ("broker-configs", ConfigResource("BROKER", str(w.node)))):
        ours = {n: [e.value, e.source, e.is_read_only, e.is_sensitive]
                for n, e in w.admin.describe_configs([res])[res].items()}
        assert ours == _ok(w, check)["configs"], check
    # kchannel's legacy AlterConfigs, as Java sees it.
    java = _ok(w, "configs")["configs"]
    assert java["retention.ms"][:2] == ["123456", "DYNAMIC_TOPIC_CONFIG"]
    assert java["cleanup.policy"][:2] == ["compact", "DYNAMIC_TOPIC_CONFIG"]
    # Legacy semantics: what is not in the request is removed.
    res = ConfigResource("TOPIC", w.cfg_topic)
    w.admin.alter_configs({res: {"cleanup.policy": "delete"}})
    # (Kafka acknowledges AlterConfigs once the change is in the metadata
    # log; the broker's DescribeConfigs reads its own copy, which follows a
    # moment later: seen once on a loaded CI machine)
    wait_until(lambda: w.admin.describe_configs([res])[res]["cleanup.policy"].value == "delete",
               "the altered cleanup.policy described")
    entries = w.admin.describe_configs([res])[res]
    assert entries["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
    with pytest.raises(KafkaError) as err:
        w.admin.alter_configs({res: {"no.such.config": "1"}})
    assert err.value.error_code == Errors.INVALID_CONFIG


@pytest.mark.parametrize("spec", ["earliest", "latest", "maxTimestamp", str(BASE_TS + 25),
                                  str(BASE_TS + 10 ** 9)])
def test_list_offsets(world, spec):
    w = world
    value = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "maxTimestamp": OffsetSpec.max_timestamp()}.get(spec)
    value = OffsetSpec.for_timestamp(int(spec)) if value is None else value
    ours = w.admin.list_offsets({tp: value for tp in w.tps})
    assert {_tp_name(tp): [r.offset, r.timestamp, -1 if r.leader_epoch is None else r.leader_epoch]
            for tp, r in ours.items()} == _ok(w, f"offsets-{spec}")["offsets"]


def test_delete_records(world):
    w = world
    assert w.ours_low == {TopicPartition(w.ours_del, 0): 4}
    assert _ok(w, "delete-records")["lowWatermarks"] == {f"{w.java_del}:0": 4}
    # Each side sees the other's deletion.
    assert _ok(w, "offsets-deleted")["offsets"][f"{w.ours_del}:0"][0] == 4
    tp = TopicPartition(w.java_del, 0)
    assert w.admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset == 4
    with pytest.raises(KafkaError) as err:
        w.admin.delete_records({tp: 100})
    assert err.value.error_code == Errors.OFFSET_OUT_OF_RANGE


def test_acls_without_authorizer_as_java(world):
    w = world
    for check, call in (("kafka-acls", lambda: w.admin.describe_acls()),
                        ("kafka-create-acls", lambda: w.admin.create_acls([w.acl_a]))):
        java = w.java[check]
        assert not java["ok"]
        with pytest.raises(KafkaError) as err:
            call()
        assert err.value.error_code == Errors.SECURITY_DISABLED
        assert exception_name(err.value.error_code) == java["error"]
        assert java["message"] in str(err.value)


def test_create_describe_delete_acls(world):
    w = world
    java_before = sorted(_ok(w, "acls")["bindings"])
    assert java_before == sorted(map(_binding, w.acls_before))
    assert java_before == sorted(map(_binding, [w.acl_a, w.acl_b]))
    assert _ok(w, "acls-topic")["bindings"] == [_binding(w.acl_a)]
    assert _ok(w, "delete-acls")["bindings"] == [_binding(w.acl_b)]
    # Java's delete and create, seen by kchannel.
    assert w.acl_admin.describe_acls() == sorted([w.acl_a, w.acl_c])
    match = AclBindingFilter(resource_type=w.acl_a.resource_type, name="orders",
                             pattern_type=AclBindingFilter().pattern_type.MATCH)
    assert w.acl_admin.describe_acls(match) == [w.acl_a]
    assert w.acl_admin.delete_acls([AclBindingFilter(principal="User:carol")]) == [w.acl_c]
    assert w.acl_admin.describe_acls() == [w.acl_a]


def test_scram_credentials(world, kafka_broker):
    w = world
    assert _ok(w, "scram-upsert")["results"] == {w.scram_java: "ok"}
    ours = w.admin.describe_user_scram_credentials([w.scram_ours, w.scram_java])
    java = _ok(w, "scram")["users"]
    assert {u: sorted([i.mechanism, i.iterations] for i in d.credential_infos)
            for u, d in ours.items()} == {u: sorted(v) for u, v in java.items()}
    # Per-user results, as Java's values(): the same outcome for each role.
    ours = w.admin.alter_user_scram_credentials_results([
        UserScramCredentialUpsertion(w.scram_ours + "-2",
                                     ScramCredentialInfo("SCRAM-SHA-256", 4096), "s"),
        UserScramCredentialUpsertion(w.scram_ours + "-empty",
                                     ScramCredentialInfo("SCRAM-SHA-512", 4096), ""),
        UserScramCredentialDeletion(w.scram_ours + "-missing", "SCRAM-SHA-512")])
    java = _ok(w, "scram-per-user")["results"]
    assert {u[len(w.scram_ours):]: "ok" if e is None else f"{exception_name(e.error_code)}: "
            f"{e.message}" for u, e in ours.items()} == \
        {u[len(w.scram_java):]: r for u, r in java.items()}
    assert java[w.scram_java + "-missing"].startswith("ResourceNotFoundException")
    # And per user for describe (Java's description(user)): a user without
    # credentials is RESOURCE_NOT_FOUND there, the others described.
    nobody = topic_name("nobody")
    results = w.admin.describe_user_scram_credentials_results([w.scram_java, nobody])
    assert results[nobody].error_code == Errors.RESOURCE_NOT_FOUND
    assert [(i.mechanism, i.iterations) for i in results[w.scram_java].credential_infos] == \
        [("SCRAM-SHA-256", 8192)]
    # A user without credentials: there, with none, as in Java's all().
    [(nobody, infos)] = _ok(w, "scram-missing")["users"].items()
    assert infos == []
    assert w.admin.describe_user_scram_credentials([nobody])[nobody].credential_infos == []
    # kchannel's salted password logs in to Kafka; a deletion removes it.
    configs = kafka_broker.client_configs("SASL_PLAINTEXT", "SCRAM-SHA-512",
                                          user=w.scram_ours, password="ours-secret")
    def logs_in():
        # (the credential reaches the broker from the metadata log a moment
        # after AlterUserScramCredentials answered)
        try:
            with KafkaClient(configs) as client:
                client.connect()
            return True
        except SaslAuthenticationError:
            return False
    wait_until(logs_in)
    w.admin.alter_user_scram_credentials([UserScramCredentialDeletion(w.scram_ours,
                                                                      "SCRAM-SHA-256")])
    # (applied from the metadata log: describe may lag a moment)
    wait_until(lambda: [i.mechanism for i in w.admin.describe_user_scram_credentials(
        [w.scram_ours])[w.scram_ours].credential_infos] == ["SCRAM-SHA-512"])


def test_delegation_tokens(world):
    w = world
    created = _ok(w, "token-create")
    expiry = _ok(w, "token-renew")["expiry"]
    # Brokers apply token changes from the metadata log: a describe right
    # after a create or renew (Java's, in the same JVM) may not show it yet
    # (the renewal is a later record than the creation: wait for both).
    mine = w.token.token_info.token_id
    wait_until(lambda: (lambda d: created["tokenId"] in d and d.get(mine) == expiry)({
        t.token_info.token_id: t.token_info.expiry_timestamp
        for t in w.admin.describe_delegation_token()}),
        "Java's token and its renewal of kchannel's described")
    ours = {t.token_info.token_id: _token(t) for t in w.admin.describe_delegation_token()}
    java = {t["tokenId"]: t for t in _ok(w, "tokens")["tokens"]}
    # Java's token as Java created it; kchannel's as Java renewed it.
    assert ours[created["tokenId"]] == {k: v for k, v in created.items()
                                        if k not in ("id", "ok")}
    assert ours[mine] == {**_token(w.token), "expiryTimestamp": expiry}
    # Every token both describe is described alike (but for that renewal).
    both = set(ours) & set(java)
    assert mine in both
    for token_id in both:
        assert {**ours[token_id], "expiryTimestamp": None} == \
            {**java[token_id], "expiryTimestamp": None}
        if token_id != mine:
            assert ours[token_id] == java[token_id]
    new_expiry = w.admin.renew_delegation_token(created["hmac"], 60_000)
    assert new_expiry <= created["maxTimestamp"]
    assert w.admin.expire_delegation_token(created["hmac"], -1) <= new_expiry
    wait_until(lambda: created["tokenId"] not in {
        t.token_info.token_id for t in w.admin.describe_delegation_token()})


def test_describe_log_dirs(world):
    w = world
    ours = w.admin.describe_log_dirs([w.node])[w.node]
    java = _ok(w, "log-dirs")["dirs"][str(w.node)]
    assert sorted(ours) == sorted(java)
    mine = {w.topic, w.ours_del, w.java_del, w.cfg_topic}
    for path, d in ours.items():
        assert (d.error, java[path]["error"]) == (None, None)
        assert (d.total_bytes or 0) > 0 and java[path]["totalBytes"] > 0
        replicas = {_tp_name(tp): [r.size, r.offset_lag, r.is_future]
                    for tp, r in d.replica_infos.items() if tp.topic in mine}
        assert replicas == {k: v for k, v in java[path]["replicas"].items()
                            if _tp(k).topic in mine}
        assert len(replicas) == 5


def test_describe_producers(world):
    w = world
    ours = w.admin.describe_producers([*w.tps, TopicPartition(w.txn_topic, 0)])
    java = _ok(w, "producers")["producers"]
    assert {_tp_name(tp): [[s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                            -1 if s.coordinator_epoch is None else s.coordinator_epoch,
                            -1 if s.current_transaction_start_offset is None
                            else s.current_transaction_start_offset] for s in states]
            for tp, states in ours.items()} == java
    [txn_state] = ours[TopicPartition(w.txn_topic, 0)]
    assert txn_state.current_transaction_start_offset == 0


def test_list_and_describe_transactions(world):
    w = world
    ours = [list(t) for t in w.admin.list_transactions() if t.transactional_id == w.tid]
    java = [t for t in _ok(w, "transactions")["transactions"] if t[0] == w.tid]
    assert ours == java and java[0][2] == "Ongoing"
    assert [w.tid, java[0][1], "Ongoing"] in \
        [list(t) for t in w.admin.list_transactions(states=["Ongoing"])]
    assert [w.tid, java[0][1], "Ongoing"] in _ok(w, "transactions-ongoing")["transactions"]
    d = w.admin.describe_transactions([w.tid])[w.tid]
    j = _ok(w, "describe-transactions")["transactions"][w.tid]
    assert {"coordinatorId": d.coordinator_id, "state": d.state, "producerId": d.producer_id,
            "producerEpoch": d.producer_epoch, "timeoutMs": d.transaction_timeout_ms,
            "startTimeMs": d.transaction_start_time_ms,
            "partitions": [_tp_name(tp) for tp in d.topic_partitions]} == j
    assert j["partitions"] == [f"{w.txn_topic}:0"] and j["timeoutMs"] == 120000


@pytest.mark.parametrize("index", range(len(RESETS)), ids=[" ".join(r) for r in RESETS])
def test_reset_offsets_by_time_as_kafka_consumer_groups_sh(world, index):
    w = world
    theirs = _ok(w, f"reset-{index}")
    argv = ["consumer-groups", "--bootstrap-server", w.plain, "--reset-offsets", "--group",
            w.group, "--topic", w.topic, *RESETS[index], "--dry-run"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(argv)
    assert (code, theirs["exit"]) == (0, 0), theirs
    # Rows in Kafka's (hash) order may differ: same lines, same warnings.
    assert sorted(out.getvalue().splitlines()) == sorted(theirs["stdout"].splitlines())
    assert "NEW-OFFSET" in out.getvalue()


def test_reset_offsets_to_datetime_executes(world):
    w = world
    argv = ["consumer-groups", "--bootstrap-server", w.plain, "--reset-offsets", "--group",
            w.group, "--all-topics", "--to-datetime", "2023-11-14T22:13:20.020", "--execute"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli_main(argv) == 0
    with Admin({"bootstrap.servers": w.plain}) as admin:
        found = admin.list_offsets({tp: OffsetSpec.for_timestamp(BASE_TS + 20)
                                    for tp in w.tps})
        ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in w.tps})
        got = admin.list_consumer_group_offsets(w.group)
    # (a partition with no record at or after the time: its end offset)
    assert {tp: o.offset for tp, o in got.items()} == {
        tp: ends[tp].offset if r.offset == -1 else r.offset for tp, r in found.items()}
    assert any(o.offset > 0 for o in got.values())
    for bad, message in ((("--to-datetime", "2023-11-14"), "does not contain a 'T'"),
                         (("--by-duration", "1D"), "cannot be parsed to a Duration")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli_main(argv[:7] + list(bad) + ["--dry-run"]) == 1
        assert message in out.getvalue()
