"""``kchannel.Admin``: Kafka's ``Admin`` client, its methods in snake_case.

    >>> with Admin({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
    ...     admin.create_topics([NewTopic("orders", 3, 1)])
    ...     admin.describe_topics(["orders"])["orders"].partitions

Calls block and return plain values (Kafka's ``XxxResult.all().get()``); a
Kafka error code is raised as the project's exception for it
(:func:`kchannel.protocol.errors.exception_for`: ``KafkaError`` with Kafka's
error name and the broker's message).  Requests go where Kafka's admin client
sends them: any broker for topics and cluster metadata, the partition leader
for ListOffsets, the group coordinator (FindCoordinator) for group APIs, the
broker itself for its BROKER configs.  One blocking connection per broker
(:class:`~kchannel.client.KafkaClient`), opened on first use with the
``security.protocol``/``sasl.*``/``ssl.*`` settings of ``config``.

Only classic-protocol consumer groups (JoinGroup/SyncGroup, the protocol
kchannel's Consumer speaks) are described; KIP-848 ``consumer`` groups need
ConsumerGroupDescribe, which this client does not send yet.
"""
import collections
import functools
import struct
import time
import uuid

from kchannel import errors
from kchannel.client.network_client import KafkaClient, _parse_bootstrap
from kchannel.log import get_logger
from kchannel.client.metadata import TopicPartition
from kchannel.protocol import messages
from kchannel.protocol.consumer_protocol import ASSIGNMENT
from kchannel.protocol.errors import COORDINATOR_ERRORS, Errors, exception_for
from kchannel.security.authorizer.acl import AclBinding, AclBindingFilter, PatternType
from kchannel.security.sasl import scram
from kchannel.tokens.admin import DelegationTokenAdmin

__all__ = ["Admin", "NewTopic", "TopicListing", "TopicDescription", "TopicPartitionInfo",
           "Node", "ClusterDescription", "ConsumerGroupListing", "ConsumerGroupDescription",
           "MemberDescription", "OffsetAndMetadata", "OffsetSpec", "ListOffsetsResultInfo",
           "ConfigResource", "ConfigEntry", "ConfigSynonym", "AlterConfigOp", "TopicPartition",
           "ScramCredentialInfo", "UserScramCredentialsDescription",
           "UserScramCredentialUpsertion", "UserScramCredentialDeletion", "AclBinding",
           "AclBindingFilter", "LogDirDescription", "ReplicaInfo", "ProducerState",
           "TransactionListing", "TransactionDescription"]

log = get_logger("kchannel.client.admin")

Node = collections.namedtuple("Node", "id host port rack")
NewTopic = collections.namedtuple("NewTopic", "name num_partitions replication_factor configs",
                                  defaults=(-1, -1, None))
TopicListing = collections.namedtuple("TopicListing", "name topic_id is_internal")
TopicPartitionInfo = collections.namedtuple("TopicPartitionInfo", "partition leader replicas isr")
TopicDescription = collections.namedtuple("TopicDescription",
                                          "name is_internal partitions topic_id")
ClusterDescription = collections.namedtuple("ClusterDescription", "cluster_id controller nodes")
ConsumerGroupListing = collections.namedtuple("ConsumerGroupListing",
                                              "group_id is_simple_consumer_group state type")
MemberDescription = collections.namedtuple(
    "MemberDescription", "consumer_id group_instance_id client_id host assignment")
ConsumerGroupDescription = collections.namedtuple(
    "ConsumerGroupDescription",
    "group_id is_simple_consumer_group members partition_assignor state coordinator")
OffsetAndMetadata = collections.namedtuple("OffsetAndMetadata", "offset metadata leader_epoch",
                                           defaults=("", None))
ListOffsetsResultInfo = collections.namedtuple("ListOffsetsResultInfo",
                                               "offset timestamp leader_epoch")
ConfigResource = collections.namedtuple("ConfigResource", "type name")
ConfigEntry = collections.namedtuple(
    "ConfigEntry", "name value source is_read_only is_sensitive is_default synonyms",
    defaults=(None, False, False, False, ()))
# One of a ConfigEntry's synonyms (describe_configs(include_synonyms=True)),
# as Kafka's ConfigEntry.ConfigSynonym; ``source`` named as ConfigEntry's.
ConfigSynonym = collections.namedtuple("ConfigSynonym", "name value source")
AlterConfigOp = collections.namedtuple("AlterConfigOp", "name value op_type",
                                       defaults=("SET",))
# SCRAM credentials (Kafka's ScramCredentialInfo & co); ``mechanism`` is the
# mechanism name ("SCRAM-SHA-256"/"SCRAM-SHA-512").
ScramCredentialInfo = collections.namedtuple("ScramCredentialInfo", "mechanism iterations")
UserScramCredentialsDescription = collections.namedtuple("UserScramCredentialsDescription",
                                                         "name credential_infos")
UserScramCredentialUpsertion = collections.namedtuple(
    "UserScramCredentialUpsertion", "user credential_info password salt", defaults=(None,))
UserScramCredentialDeletion = collections.namedtuple("UserScramCredentialDeletion",
                                                     "user mechanism")
# describeLogDirs: {broker: {path: LogDirDescription}}; total/usable bytes
# None when the broker does not say (Kafka's OptionalLong.empty()).
ReplicaInfo = collections.namedtuple("ReplicaInfo", "size offset_lag is_future")
LogDirDescription = collections.namedtuple(
    "LogDirDescription", "error replica_infos total_bytes usable_bytes")
# describeProducers: coordinator_epoch/current_transaction_start_offset None
# when the broker sends -1 (Kafka's OptionalInt/OptionalLong.empty()).
ProducerState = collections.namedtuple(
    "ProducerState", "producer_id producer_epoch last_sequence last_timestamp "
                     "coordinator_epoch current_transaction_start_offset")
TransactionListing = collections.namedtuple("TransactionListing",
                                            "transactional_id producer_id state")
TransactionDescription = collections.namedtuple(
    "TransactionDescription", "coordinator_id state producer_id producer_epoch "
                              "transaction_timeout_ms transaction_start_time_ms "
                              "topic_partitions")


class OffsetSpec:
    """What ListOffsets looks up, as Kafka's ``OffsetSpec``: the special
    timestamps of the ListOffsets API, or a timestamp in ms."""
    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3

    @staticmethod
    def latest():
        return OffsetSpec.LATEST

    @staticmethod
    def earliest():
        return OffsetSpec.EARLIEST

    @staticmethod
    def max_timestamp():
        return OffsetSpec.MAX_TIMESTAMP

    @staticmethod
    def for_timestamp(ms):
        return int(ms)


# ConfigResource.Type ids (DescribeConfigs/IncrementalAlterConfigs).
RESOURCE_TYPES = {"TOPIC": 2, "BROKER": 4, "BROKER_LOGGER": 8, "GROUP": 32,
                  "CLIENT_METRICS": 16}
_RESOURCE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
# AlterConfigOp.OpType ids.
OP_TYPES = {"SET": 0, "DELETE": 1, "APPEND": 2, "SUBTRACT": 3}
# DescribeConfigsResponse ConfigSource ids, named as Kafka's ConfigEntry.ConfigSource.
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                  5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                  7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}

_CONSUMER_PROTOCOL = "consumer"
# Kafka's Uuid.ZERO_UUID: topics named, not identified by id.
_NO_TOPIC_ID = uuid.UUID(int=0)


def _decode_assignment(data):
    if not data or len(data) < 2:
        return []
    version = min(struct.unpack_from(">h", data)[0], 3)
    if version < 0:
        return []
    try:
        body = ASSIGNMENT.decode(data, version, 2)
    except errors.KChannelError:
        return []
    return [TopicPartition(t["topic"], p) for t in body["assigned_partitions"]
            for p in t["partitions"]]


def _raise(code, message=None):
    if code:
        raise exception_for(code, message)


# -- SCRAM credential requests and results, shared with the tools that work
# -- on a server's credential store directly (``kchannel configs --server-config``)
def describe_scram_request(users=None):
    """The DescribeUserScramCredentials body for ``users`` (None: all)."""
    return {"users": None if users is None else [{"name": u} for u in users]}


def describe_scram_results(resp):
    """{user: UserScramCredentialsDescription or exception} of a
    DescribeUserScramCredentials response; a top-level error raises."""
    _raise(resp["error_code"], resp.get("error_message"))
    out = {}
    for r in resp["results"]:
        if r["error_code"]:
            out[r["user"]] = exception_for(r["error_code"], r.get("error_message"))
            continue
        infos = []
        for c in r["credential_infos"]:
            mech = scram.MECHANISMS_BY_TYPE.get(c["mechanism"])
            infos.append(ScramCredentialInfo(mech.mechanism_name if mech else "UNKNOWN",
                                              c["iterations"]))
        out[r["user"]] = UserScramCredentialsDescription(r["user"], infos)
    return out


def alter_scram_request(alterations):
    """(AlterUserScramCredentials body, {user: exception} of the users whose
    alterations Kafka's admin client refuses before sending).  Upsertions
    carry a salt and the SaltedPassword, never the password."""
    failed = {}
    for a in alterations:
        if not a.user:
            failed[a.user] = exception_for(Errors.UNACCEPTABLE_CREDENTIAL,
                                           "Username must not be empty")
            continue
        mechanism = a.mechanism if isinstance(a, UserScramCredentialDeletion) \
            else ScramCredentialInfo(*a.credential_info).mechanism
        if isinstance(mechanism, scram.ScramMechanism):
            mechanism = mechanism.mechanism_name
        if not scram.is_scram(mechanism):
            failed.setdefault(a.user, exception_for(Errors.UNSUPPORTED_SASL_MECHANISM,
                                                    "Unknown SCRAM mechanism"))
        elif not isinstance(a, UserScramCredentialDeletion) and not a.password:
            failed.setdefault(a.user, exception_for(Errors.UNACCEPTABLE_CREDENTIAL,
                                                    "Password must not be empty"))
    upsertions, deletions = [], []
    for a in alterations:
        if a.user in failed:
            continue
        if isinstance(a, UserScramCredentialDeletion):
            deletions.append({"name": a.user,
                              "mechanism": scram.mechanism_for(a.mechanism).type})
            continue
        info = ScramCredentialInfo(*a.credential_info)
        mech = scram.mechanism_for(info.mechanism)
        salt = a.salt if a.salt is not None else scram.generate_salt()
        password = a.password.encode("utf-8") if isinstance(a.password, str) \
            else bytes(a.password)
        upsertions.append({"name": a.user, "mechanism": mech.type,
                           "iterations": info.iterations, "salt": salt,
                           "salted_password": scram.hi(mech, password, salt, info.iterations)})
    return {"deletions": deletions, "upsertions": upsertions}, failed


def alter_scram_results(resp):
    """{user: None or exception} of an AlterUserScramCredentials response."""
    return {r["user"]: exception_for(r["error_code"], r.get("error_message"))
            for r in resp["results"]}


# Kafka's AdminClientConfig keys the Admin itself reads (the rest go to
# each broker connection), with Kafka's defaults.
_ADMIN_KEYS = {"default.api.timeout.ms": 60000, "retry.backoff.ms": 100,
               "retry.backoff.max.ms": 1000}


def _admin_setting(configs, key):
    value = configs.get(key, _ADMIN_KEYS[key])
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise errors.ConfigError(f"Invalid value {value!r} for configuration {key}: "
                                 "Not a number of type LONG", key=key) from None
    if value < 0:
        raise errors.ConfigError(f"Invalid value {value} for configuration {key}: "
                                 "Value must be at least 0", key=key)
    return value


# What Kafka's Admin retries (its coordinator and partition-leader
# lookups): the coordinator not ready or moved, a leader being elected.
_RETRIED = COORDINATOR_ERRORS | {Errors.LEADER_NOT_AVAILABLE, Errors.NOT_LEADER_OR_FOLLOWER}


def _retrying(method):
    """Kafka's Admin call: a coordinator that is loading, not available or
    has moved, and a partition leader being elected, are looked up again
    after ``retry.backoff.ms`` (doubling up to ``retry.backoff.max.ms``)
    until ``default.api.timeout.ms`` has passed; then, or on any other
    error, the error is raised."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        deadline = time.monotonic() + self._api_timeout_ms / 1000.0
        backoff_ms = self._retry_backoff_ms
        while True:
            try:
                return method(self, *args, **kwargs)
            except errors.KafkaError as exc:
                if (exc.error_code not in _RETRIED
                        or time.monotonic() + backoff_ms / 1000.0 >= deadline):
                    raise
                log.debug("%s: %s; retrying in %d ms", method.__name__, exc, backoff_ms)
                self._nodes.clear()
                self._sleep(backoff_ms / 1000.0)
                backoff_ms = min(backoff_ms * 2, max(self._retry_backoff_max_ms,
                                                     self._retry_backoff_ms))
    return call


class Admin:
    """``config``: client configs (``bootstrap.servers`` required; security,
    ``client.id``, ``request.timeout.ms`` ...).  Each request waits at most
    ``request.timeout.ms``.  As in Kafka's Admin, a call whose coordinator is
    loading, not available or moved, or whose partition leader is being
    elected, is retried until ``default.api.timeout.ms`` (60000) has passed,
    waiting ``retry.backoff.ms`` (100), doubling up to
    ``retry.backoff.max.ms`` (1000), between attempts."""

    def __init__(self, config):
        self.configs = dict(config)
        if not _parse_bootstrap(self.configs.get("bootstrap.servers")):
            raise errors.ConfigError("No bootstrap.servers configured",
                                     key="bootstrap.servers")
        self._api_timeout_ms = _admin_setting(self.configs, "default.api.timeout.ms")
        self._retry_backoff_ms = _admin_setting(self.configs, "retry.backoff.ms")
        self._retry_backoff_max_ms = _admin_setting(self.configs, "retry.backoff.max.ms")
        self._client_configs = {k: v for k, v in self.configs.items() if k not in _ADMIN_KEYS}
        self._clients = {}          # (host, port) -> connected KafkaClient
        self._bootstrap = None
        self._nodes = {}            # node id -> (host, port) from the last Metadata

    # -- connections ---------------------------------------------------------
    def _new_client(self):
        """A client for one broker (``kchannel.aio.AIOAdmin`` gives it the
        event loop's selector)."""
        return KafkaClient(self._client_configs)

    def _sleep(self, seconds):
        """The back-off between attempts (``AIOAdmin`` awaits the loop)."""
        time.sleep(seconds)

    def _any(self):
        if self._bootstrap is None:
            client = self._new_client()
            try:
                client.connect()
            except BaseException:
                client.close()
                raise
            self._bootstrap = client
            self._clients[client.address] = client
        return self._bootstrap

    def _node(self, node_id):
        if node_id not in self._nodes:
            self._metadata([])
        addr = self._nodes.get(node_id)
        if addr is None:
            raise exception_for(Errors.BROKER_NOT_AVAILABLE,
                                f"Broker {node_id} is not in the cluster's metadata")
        return self._at(addr)

    def _at(self, addr):
        addr = (addr[0], int(addr[1]))
        client = self._clients.get(addr)
        if client is None:
            bootstrap = self._any()
            if bootstrap.address == addr:
                return bootstrap
            client = self._new_client()
            try:
                client.connect(addr[0], addr[1])
            except BaseException:
                client.close()
                raise
            self._clients[addr] = client
        return client

    def close(self):
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        self._bootstrap = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- cluster and topics --------------------------------------------------
    def _metadata(self, topics):
        """Metadata for ``topics`` (None: every topic)."""
        body = {"topics": None if topics is None else [{"name": t, "topic_id": _NO_TOPIC_ID}
                                                        for t in topics],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        md = self._any().request(messages.METADATA.api_key, body)
        self._nodes = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
        return md

    def describe_cluster(self):
        """:class:`ClusterDescription` (cluster id, controller, nodes)."""
        md = self._metadata([])
        nodes = [Node(b["node_id"], b["host"], b["port"], b.get("rack"))
                 for b in sorted(md["brokers"], key=lambda b: b["node_id"])]
        controller = next((n for n in nodes if n.id == md.get("controller_id")), None)
        return ClusterDescription(md.get("cluster_id"), controller, nodes)

    def list_topics(self, list_internal=False):
        """{name: :class:`TopicListing`}; internal topics only with
        ``list_internal``."""
        md = self._metadata(None)
        return {t["name"]: TopicListing(t["name"], t.get("topic_id"), t.get("is_internal", False))
                for t in sorted(md["topics"], key=lambda t: t["name"])
                if list_internal or not t.get("is_internal")}

    def describe_topics(self, topics):
        """{name: :class:`TopicDescription`}; raises for a topic that does
        not exist (UNKNOWN_TOPIC_OR_PARTITION) as Kafka's ``all()``."""
        md = self._metadata(list(topics))
        out = {}
        for t in md["topics"]:
            # (Kafka's message, without the topic's name, as Java's all())
            _raise(t["error_code"])
            parts = [TopicPartitionInfo(p["partition_index"], p["leader_id"],
                                        list(p["replica_nodes"]), list(p["isr_nodes"]))
                     for p in sorted(t["partitions"], key=lambda p: p["partition_index"])]
            out[t["name"]] = TopicDescription(t["name"], t.get("is_internal", False), parts,
                                              t.get("topic_id"))
        return out

    def create_topics(self, new_topics, validate_only=False, timeout_ms=30000):
        """Create :class:`NewTopic` s; returns None, raises the first topic's
        error (TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR, ...)."""
        topics = []
        for t in new_topics:
            t = t if isinstance(t, NewTopic) else NewTopic(*t)
            topics.append({"name": t.name, "num_partitions": t.num_partitions,
                           "replication_factor": t.replication_factor, "assignments": [],
                           "configs": [{"name": k, "value": v}
                                       for k, v in (t.configs or {}).items()]})
        resp = self._any().request(messages.CREATE_TOPICS.api_key,
                                   {"topics": topics, "timeout_ms": timeout_ms,
                                    "validate_only": validate_only})
        for r in resp["topics"]:
            _raise(r["error_code"], r.get("error_message"))

    def delete_topics(self, topics, timeout_ms=30000):
        topics = list(topics)
        resp = self._any().request(messages.DELETE_TOPICS.api_key,
                                   {"topic_names": topics, "timeout_ms": timeout_ms,
                                    "topics": [{"name": t, "topic_id": _NO_TOPIC_ID}
                                               for t in topics]})
        for r in resp["responses"]:
            _raise(r["error_code"], r.get("error_message"))

    def create_partitions(self, new_partitions, validate_only=False, timeout_ms=30000):
        """``new_partitions``: {topic: total partition count}."""
        resp = self._any().request(messages.CREATE_PARTITIONS.api_key, {
            "topics": [{"name": t, "count": int(n), "assignments": None}
                       for t, n in new_partitions.items()],
            "timeout_ms": timeout_ms, "validate_only": validate_only})
        for r in resp["results"]:
            _raise(r["error_code"], r.get("error_message"))

    # -- offsets -------------------------------------------------------------
    def list_offsets(self, specs, isolation_level="read_uncommitted"):
        """``specs``: {TopicPartition: OffsetSpec value} ->
        {TopicPartition: :class:`ListOffsetsResultInfo`}; each partition is
        asked of its leader."""
        specs = {TopicPartition(*tp): int(s) for tp, s in specs.items()}
        by_leader = self._leaders(specs)
        iso = 1 if isolation_level == "read_committed" else 0
        out = {}
        for leader, topics in by_leader.items():
            body = {"replica_id": -1, "isolation_level": iso, "timeout_ms": 30000,
                    "topics": [{"name": t, "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1,
                         "timestamp": specs[TopicPartition(t, p)], "max_num_offsets": 1}
                        for p in parts]}
                        for t, parts in topics.items()]}
            resp = self._node(leader).request(messages.LIST_OFFSETS.api_key, body)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    _raise(p["error_code"])
                    epoch = p.get("leader_epoch", -1)
                    out[TopicPartition(t["name"], p["partition_index"])] = ListOffsetsResultInfo(
                        p["offset"], p["timestamp"], None if epoch is None or epoch < 0
                        else epoch)
        return out

    # -- consumer groups -----------------------------------------------------
    def _coordinator(self, group_id, key_type=0):
        """(Node, client) of the coordinator of ``group_id`` (key type 0:
        group, 1: transactional id)."""
        client = self._any()
        version = client.choose_version(messages.FIND_COORDINATOR.api_key)
        if version >= 4:
            resp = client.request(messages.FIND_COORDINATOR.api_key,
                                  {"key_type": key_type, "coordinator_keys": [group_id]})
            c = resp["coordinators"][0]
        else:
            c = client.request(messages.FIND_COORDINATOR.api_key,
                               {"key": group_id, "key_type": key_type})
        _raise(c["error_code"], c.get("error_message"))
        self._nodes.setdefault(c["node_id"], (c["host"], c["port"]))
        return Node(c["node_id"], c["host"], c["port"], None), self._at((c["host"], c["port"]))

    def list_consumer_groups(self, states=None):
        """[:class:`ConsumerGroupListing`] of every broker's groups that are
        consumer groups (protocol type ``consumer`` or none, as Kafka's
        ``listConsumerGroups``); ``states``: only groups in these states."""
        self._metadata([])
        out = {}
        for node_id in sorted(self._nodes):
            body = {"states_filter": list(states or []), "types_filter": []}
            resp = self._node(node_id).request(messages.LIST_GROUPS.api_key, body)
            _raise(resp["error_code"])
            for g in resp["groups"]:
                gtype = (g.get("group_type") or "classic").lower()
                if g["protocol_type"] not in (_CONSUMER_PROTOCOL, "") or \
                        gtype not in ("classic", "consumer"):
                    continue
                out[g["group_id"]] = ConsumerGroupListing(
                    g["group_id"], g["protocol_type"] == "", g.get("group_state") or None, gtype)
        return [out[g] for g in sorted(out)]

    def describe_consumer_groups(self, group_ids):
        """{group id: :class:`ConsumerGroupDescription`}.  A group the
        coordinator does not know (state ``Dead``) raises GROUP_ID_NOT_FOUND
        ``Group G not found.``, as Kafka's admin client."""
        out = {}
        for gid in group_ids:
            coordinator, client = self._coordinator(gid)
            described = self._describe_kip848_group(gid, coordinator, client)
            if described is not None:
                out[gid] = described
                continue
            resp = client.request(messages.DESCRIBE_GROUPS.api_key,
                                  {"groups": [gid], "include_authorized_operations": False})
            g = resp["groups"][0]
            _raise(g["error_code"], g.get("error_message"))
            if g["group_state"] == "Dead":
                raise exception_for(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
            members = []
            for m in g["members"]:
                assignment = (_decode_assignment(m["member_assignment"])
                              if g["protocol_type"] == _CONSUMER_PROTOCOL else [])
                members.append(MemberDescription(m["member_id"], m.get("group_instance_id"),
                                                 m["client_id"], m["client_host"], assignment))
            out[gid] = ConsumerGroupDescription(
                gid, g["protocol_type"] == "", members, g["protocol_data"], g["group_state"],
                coordinator)
        return out

    def _describe_kip848_group(self, gid, coordinator, client):
        """A group of the KIP-848 protocol described with
        ConsumerGroupDescribe, as Kafka's admin client; None for a classic
        group (GROUP_ID_NOT_FOUND "... is not a consumer group"), an unknown
        one or a broker without the API: DescribeGroups says."""
        try:
            client.choose_version(messages.CONSUMER_GROUP_DESCRIBE.api_key)
        except errors.UnsupportedVersionError:
            return None
        g = client.request(messages.CONSUMER_GROUP_DESCRIBE.api_key, {
            "group_ids": [gid], "include_authorized_operations": False})["groups"][0]
        if g["error_code"] == Errors.GROUP_ID_NOT_FOUND:
            return None
        _raise(g["error_code"], g.get("error_message"))
        members = [MemberDescription(
            m["member_id"], m.get("instance_id"), m["client_id"], m["client_host"],
            [TopicPartition(t["topic_name"], p) for t in m["assignment"]["topic_partitions"]
             for p in t["partitions"]]) for m in g["members"]]
        return ConsumerGroupDescription(gid, False, members, g["assignor_name"],
                                        g["group_state"], coordinator)

    def delete_consumer_groups(self, group_ids):
        """Deletes each group; raises the first group's error
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) after trying all."""
        results = self.delete_consumer_groups_results(group_ids)
        for exc in results.values():
            if exc is not None:
                raise exc

    def delete_consumer_groups_results(self, group_ids):
        """{group id: None or the exception of its error}."""
        out = {}
        for gid in group_ids:
            try:
                _, client = self._coordinator(gid)
                resp = client.request(messages.DELETE_GROUPS.api_key, {"groups_names": [gid]})
                r = resp["results"][0]
                out[gid] = exception_for(r["error_code"])
            except errors.KafkaError as exc:
                out[gid] = exc
        return out

    def list_consumer_group_offsets(self, group_id, partitions=None, require_stable=False):
        """{TopicPartition: :class:`OffsetAndMetadata`} of the group's
        committed offsets (all of them, or of ``partitions``)."""
        _, client = self._coordinator(group_id)
        topics = None
        if partitions is not None:
            by_topic = collections.defaultdict(list)
            for tp in partitions:
                by_topic[tp[0]].append(tp[1])
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        version = client.choose_version(messages.OFFSET_FETCH.api_key)
        if version >= 8:
            resp = client.request(messages.OFFSET_FETCH.api_key, {
                "groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1,
                            "topics": topics}], "require_stable": require_stable})
            g = resp["groups"][0]
            _raise(g["error_code"])
            result_topics = g["topics"]
        else:
            resp = client.request(messages.OFFSET_FETCH.api_key, {
                "group_id": group_id, "topics": topics, "require_stable": require_stable})
            _raise(resp.get("error_code", 0))
            result_topics = resp["topics"]
        out = {}
        for t in result_topics:
            for p in t["partitions"]:
                _raise(p["error_code"])
                if p["committed_offset"] < 0:
                    continue
                epoch = p.get("committed_leader_epoch", -1)
                out[TopicPartition(t["name"], p["partition_index"])] = OffsetAndMetadata(
                    p["committed_offset"], p.get("metadata") or "",
                    None if epoch is None or epoch < 0 else epoch)
        return dict(sorted(out.items()))

    def alter_consumer_group_offsets(self, group_id, offsets):
        """``offsets``: {TopicPartition: offset or OffsetAndMetadata}.  The
        group must have no members (UNKNOWN_MEMBER_ID otherwise), as in
        Kafka: the commit is made outside any generation."""
        by_topic = collections.defaultdict(list)
        for tp, o in offsets.items():
            o = o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            by_topic[tp[0]].append({
                "partition_index": tp[1], "committed_offset": o.offset,
                "committed_leader_epoch": -1 if o.leader_epoch is None else o.leader_epoch,
                "commit_timestamp": -1, "committed_metadata": o.metadata or ""})
        _, client = self._coordinator(group_id)
        resp = client.request(messages.OFFSET_COMMIT.api_key, {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        for t in resp["topics"]:
            for p in t["partitions"]:
                _raise(p["error_code"])

    def delete_consumer_group_offsets(self, group_id, partitions):
        """Deletes the committed offsets of ``partitions`` (OffsetDelete):
        the group must not be subscribed to their topics."""
        by_topic = collections.defaultdict(list)
        for tp in partitions:
            by_topic[tp[0]].append({"partition_index": tp[1]})
        _, client = self._coordinator(group_id)
        resp = client.request(messages.OFFSET_DELETE.api_key, {
            "group_id": group_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        _raise(resp["error_code"])
        for t in resp["topics"]:
            for p in t["partitions"]:
                _raise(p["error_code"])

    # -- configs -------------------------------------------------------------
    def _config_client(self, resource):
        # A broker's own configs are answered by that broker (Kafka's admin
        # sends them there); topic configs by any broker.
        if resource.type in ("BROKER", "BROKER_LOGGER") and resource.name:
            return self._node(int(resource.name))
        return self._any()

    def describe_configs(self, resources, include_synonyms=False):
        """{ConfigResource: {name: :class:`ConfigEntry`}}; ``resources``
        are :class:`ConfigResource` ("TOPIC"/"BROKER"/..., name); with
        ``include_synonyms`` each entry's ``synonyms`` lists
        :class:`ConfigSynonym` s, the entry's own source first (Kafka's
        ``DescribeConfigsOptions.includeSynonyms``)."""
        out = {}
        for res in resources:
            res = ConfigResource(*res)
            resp = self._config_client(res).request(messages.DESCRIBE_CONFIGS.api_key, {
                "resources": [{"resource_type": RESOURCE_TYPES[res.type],
                               "resource_name": res.name, "configuration_keys": None}],
                "include_synonyms": bool(include_synonyms), "include_documentation": False})
            r = resp["results"][0]
            _raise(r["error_code"], r.get("error_message"))
            entries = {}
            for c in r["configs"]:
                source = CONFIG_SOURCES.get(c.get("config_source", 0), "UNKNOWN")
                synonyms = tuple(ConfigSynonym(y["name"], y["value"],
                                               CONFIG_SOURCES.get(y["source"], "UNKNOWN"))
                                 for y in c.get("synonyms") or ()) if include_synonyms else ()
                entries[c["name"]] = ConfigEntry(c["name"], c["value"], source,
                                                 c["read_only"], c["is_sensitive"],
                                                 source == "DEFAULT_CONFIG", synonyms)
            out[res] = entries
        return out

    def incremental_alter_configs(self, configs, validate_only=False):
        """``configs``: {ConfigResource: [AlterConfigOp(name, value,
        "SET"|"DELETE"|"APPEND"|"SUBTRACT")]}."""
        for res, ops in configs.items():
            res = ConfigResource(*res)
            resp = self._config_client(res).request(
                messages.INCREMENTAL_ALTER_CONFIGS.api_key, {
                    "resources": [{"resource_type": RESOURCE_TYPES[res.type],
                                   "resource_name": res.name,
                                   "configs": [{"name": op.name,
                                                "config_operation": OP_TYPES[op.op_type],
                                                "value": op.value} for op in ops]}],
                    "validate_only": validate_only})
            for r in resp["responses"]:
                _raise(r["error_code"], r.get("error_message"))

    def alter_configs(self, configs, validate_only=False):
        """Legacy AlterConfigs: ``configs`` {ConfigResource: {name: value}
        or [ConfigEntry]}; each resource's dynamic configs become exactly
        these (the others are removed), as Kafka's deprecated
        ``alterConfigs``.  Raises the first resource's error."""
        for res, entries in configs.items():
            res = ConfigResource(*res)
            if isinstance(entries, dict):
                pairs = list(entries.items())
            else:
                pairs = [(e.name, e.value) for e in entries]
            resp = self._config_client(res).request(messages.ALTER_CONFIGS.api_key, {
                "resources": [{"resource_type": RESOURCE_TYPES[res.type],
                               "resource_name": res.name,
                               "configs": [{"name": k, "value": v} for k, v in pairs]}],
                "validate_only": validate_only})
            for r in resp["responses"]:
                _raise(r["error_code"], r.get("error_message"))

    # -- records -------------------------------------------------------------
    def _leaders(self, partitions):
        """{leader id: {topic: [partition]}} of ``partitions``; raises for a
        partition that does not exist or has no leader."""
        partitions = [TopicPartition(*tp) for tp in partitions]
        leaders = {}
        for name, desc in self.describe_topics({tp.topic for tp in partitions}).items():
            for p in desc.partitions:
                leaders[TopicPartition(name, p.partition)] = p.leader
        by_leader = collections.defaultdict(lambda: collections.defaultdict(list))
        for tp in partitions:
            leader = leaders.get(tp)
            if leader is None:
                raise exception_for(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                    f"Partition {tp.topic}-{tp.partition} does not exist")
            if leader < 0:
                raise exception_for(Errors.LEADER_NOT_AVAILABLE,
                                    f"Partition {tp.topic}-{tp.partition} has no leader")
            by_leader[leader][tp.topic].append(tp.partition)
        return by_leader

    def delete_records(self, before_offsets, timeout_ms=30000):
        """``before_offsets``: {TopicPartition: offset} (-1: the high
        watermark) -> {TopicPartition: new low watermark}; each partition
        is sent to its leader, as Kafka's ``deleteRecords``."""
        before_offsets = {TopicPartition(*tp): int(o) for tp, o in before_offsets.items()}
        out = {}
        for leader, topics in self._leaders(before_offsets).items():
            resp = self._node(leader).request(messages.DELETE_RECORDS.api_key, {
                "topics": [{"name": t, "partitions": [
                    {"partition_index": p, "offset": before_offsets[TopicPartition(t, p)]}
                    for p in ps]} for t, ps in topics.items()],
                "timeout_ms": timeout_ms})
            for t in resp["topics"]:
                for p in t["partitions"]:
                    _raise(p["error_code"])
                    out[TopicPartition(t["name"], p["partition_index"])] = p["low_watermark"]
        return dict(sorted(out.items()))

    # -- SCRAM credentials ---------------------------------------------------
    def describe_user_scram_credentials(self, users=None):
        """{user: :class:`UserScramCredentialsDescription`} of ``users``
        (None: every user with credentials).  A user asked for who has no
        credentials (RESOURCE_NOT_FOUND) is there with none, as in Kafka's
        ``all()``; any other error raises."""
        out = {}
        for user, result in self.describe_user_scram_credentials_results(users).items():
            if isinstance(result, Exception):
                if not (isinstance(result, errors.KafkaError)
                        and result.error_code == Errors.RESOURCE_NOT_FOUND):
                    raise result
                result = UserScramCredentialsDescription(user, [])
            out[user] = result
        return out

    def describe_user_scram_credentials_results(self, users=None):
        """Per user, as Kafka's ``DescribeUserScramCredentialsResult
        .description(user)``: {user: :class:`UserScramCredentialsDescription`
        or the exception of its error (RESOURCE_NOT_FOUND for a user without
        credentials)}, in the broker's order.  An error of the whole request
        (CLUSTER_AUTHORIZATION_FAILED ...) raises."""
        resp = self._any().request(messages.DESCRIBE_USER_SCRAM_CREDENTIALS.api_key,
                                   describe_scram_request(users))
        return describe_scram_results(resp)

    def alter_user_scram_credentials(self, alterations):
        """``alterations``: :class:`UserScramCredentialUpsertion` (user,
        ScramCredentialInfo, password[, salt]) and
        :class:`UserScramCredentialDeletion` (user, mechanism).  As Kafka's
        admin client only the salted password leaves this process.  Raises
        the first user's error after all were tried (Kafka's ``all()``)."""
        for exc in self.alter_user_scram_credentials_results(alterations).values():
            if exc is not None:
                raise exc

    def alter_user_scram_credentials_results(self, alterations):
        """Per user, as Kafka's ``AlterUserScramCredentialsResult.values()``:
        {user: None (done) or the exception of its error}.  As Kafka's admin
        client, a user whose alterations are invalid here (empty user name or
        password: UNACCEPTABLE_CREDENTIAL, unknown mechanism:
        UNSUPPORTED_SASL_MECHANISM) fails without being sent, and its other
        alterations are not sent either."""
        body, failed = alter_scram_request(alterations)
        out = dict.fromkeys(a.user for a in alterations)
        out.update(failed)
        if body["deletions"] or body["upsertions"]:
            resp = self._any().request(messages.ALTER_USER_SCRAM_CREDENTIALS.api_key, body)
            out.update(alter_scram_results(resp))
        return out

    # -- ACLs ----------------------------------------------------------------
    def create_acls(self, acls):
        """Create :class:`AclBinding` s; raises the first one's error
        (SECURITY_DISABLED without an authorizer, INVALID_REQUEST ...)."""
        resp = self._any().request(messages.CREATE_ACLS.api_key, {"creations": [
            {"resource_type": int(b.resource_type), "resource_name": b.name,
             "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
             "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission_type)} for b in acls]})
        for r in resp["results"]:
            _raise(r["error_code"], r.get("error_message"))

    @staticmethod
    def _filter_body(f):
        return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
                "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
                "host_filter": f.host, "operation": int(f.operation),
                "permission_type": int(f.permission_type)}

    def describe_acls(self, acl_filter=AclBindingFilter()):
        """[:class:`AclBinding`] matching ``acl_filter``
        (:class:`AclBindingFilter`; the default matches every ACL)."""
        resp = self._any().request(messages.DESCRIBE_ACLS.api_key,
                                   self._filter_body(acl_filter))
        _raise(resp["error_code"], resp.get("error_message"))
        out = []
        for r in resp["resources"]:
            for a in r["acls"]:
                out.append(AclBinding.of(r["resource_type"], r["resource_name"],
                                         r.get("pattern_type", int(PatternType.LITERAL)),
                                         a["principal"], a["host"], a["operation"],
                                         a["permission_type"]))
        return sorted(out)

    def delete_acls(self, filters):
        """Deletes the ACLs matching each :class:`AclBindingFilter`;
        returns the deleted :class:`AclBinding` s (Kafka's ``values()``
        flattened); raises the first filter's error."""
        resp = self._any().request(messages.DELETE_ACLS.api_key,
                                   {"filters": [self._filter_body(f) for f in filters]})
        out = []
        for r in resp["filter_results"]:
            _raise(r["error_code"], r.get("error_message"))
            for m in r["matching_acls"]:
                _raise(m["error_code"], m.get("error_message"))
                out.append(AclBinding.of(m["resource_type"], m["resource_name"],
                                         m.get("pattern_type", int(PatternType.LITERAL)),
                                         m["principal"], m["host"], m["operation"],
                                         m["permission_type"]))
        return sorted(out)

    # -- delegation tokens (kchannel.tokens.admin over the bootstrap broker) --
    def create_delegation_token(self, renewers=(), max_lifetime_ms=-1, owner=None):
        """-> :class:`kchannel.tokens.token.DelegationToken`; errors raise
        :class:`kchannel.errors.DelegationTokenError`."""
        return DelegationTokenAdmin(self._any()).create(renewers, max_lifetime_ms, owner)

    def renew_delegation_token(self, hmac, renew_time_period_ms=-1):
        """-> the new expiry timestamp (ms)."""
        return DelegationTokenAdmin(self._any()).renew(hmac, renew_time_period_ms)

    def expire_delegation_token(self, hmac, expiry_time_period_ms=-1):
        """-> the new expiry timestamp (ms)."""
        return DelegationTokenAdmin(self._any()).expire(hmac, expiry_time_period_ms)

    def describe_delegation_token(self, owners=None):
        """-> [DelegationToken] of ``owners`` (None: all the caller may see)."""
        return DelegationTokenAdmin(self._any()).describe(owners)

    # -- log dirs, producers, transactions -----------------------------------
    def describe_log_dirs(self, broker_ids):
        """{broker id: {path: :class:`LogDirDescription`}} (replica_infos:
        {TopicPartition: :class:`ReplicaInfo`}), each broker asked itself."""
        out = {}
        for broker in broker_ids:
            resp = self._node(int(broker)).request(messages.DESCRIBE_LOG_DIRS.api_key,
                                                   {"topics": None})
            _raise(resp.get("error_code", 0))
            dirs = {}
            for r in resp["results"]:
                replicas = {TopicPartition(t["name"], p["partition_index"]):
                            ReplicaInfo(p["partition_size"], p["offset_lag"],
                                        p["is_future_key"])
                            for t in r["topics"] for p in t["partitions"]}
                total, usable = r.get("total_bytes", -1), r.get("usable_bytes", -1)
                dirs[r["log_dir"]] = LogDirDescription(
                    exception_for(r["error_code"]) if r["error_code"] else None,
                    dict(sorted(replicas.items())), None if total < 0 else total,
                    None if usable < 0 else usable)
            out[int(broker)] = dirs
        return out

    def describe_producers(self, partitions):
        """{TopicPartition: [:class:`ProducerState`]} of the partitions'
        active producers, asked of each leader."""
        out = {}
        for leader, topics in self._leaders(partitions).items():
            resp = self._node(leader).request(messages.DESCRIBE_PRODUCERS.api_key, {
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
            for t in resp["topics"]:
                for p in t["partitions"]:
                    _raise(p["error_code"], p.get("error_message"))
                    out[TopicPartition(t["name"], p["partition_index"])] = [
                        ProducerState(s["producer_id"], s["producer_epoch"], s["last_sequence"],
                                      s["last_timestamp"],
                                      None if s["coordinator_epoch"] < 0
                                      else s["coordinator_epoch"],
                                      None if s["current_txn_start_offset"] < 0
                                      else s["current_txn_start_offset"])
                        for s in p["active_producers"]]
        return dict(sorted(out.items()))

    def list_transactions(self, states=(), producer_ids=(), duration_ms=-1):
        """[:class:`TransactionListing`] of every broker's transaction
        coordinator, filtered as Kafka's ``ListTransactionsOptions``
        (``duration_ms`` >= 0 needs ListTransactions v1)."""
        self._metadata([])
        out = []
        for node_id in sorted(self._nodes):
            client = self._node(node_id)
            if duration_ms >= 0 and client.choose_version(
                    messages.LIST_TRANSACTIONS.api_key) < 1:
                raise errors.UnsupportedVersionError(
                    f"Broker {node_id} cannot filter transactions by duration "
                    "(ListTransactions v1)")
            resp = client.request(messages.LIST_TRANSACTIONS.api_key, {
                "state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": int(duration_ms)})
            _raise(resp["error_code"])
            out.extend(TransactionListing(t["transactional_id"], t["producer_id"],
                                          t["transaction_state"])
                       for t in resp["transaction_states"])
        return sorted(out)

    def describe_transactions(self, transactional_ids):
        """{transactional id: :class:`TransactionDescription`}, each asked
        of its transaction coordinator (FindCoordinator key type 1)."""
        out = {}
        for tid in transactional_ids:
            node, client = self._coordinator(tid, key_type=1)
            resp = client.request(messages.DESCRIBE_TRANSACTIONS.api_key,
                                  {"transactional_ids": [tid]})
            s = resp["transaction_states"][0]
            _raise(s["error_code"])
            out[tid] = TransactionDescription(
                node.id, s["transaction_state"], s["producer_id"], s["producer_epoch"],
                s["transaction_timeout_ms"],
                None if s["transaction_start_time_ms"] < 0 else s["transaction_start_time_ms"],
                sorted(TopicPartition(t["topic"], p) for t in s["topics"]
                       for p in t["partitions"]))
        return out


# Every public call retries as Kafka's Admin does (see _retrying).
for _name, _fn in list(vars(Admin).items()):
    if not _name.startswith("_") and _name != "close" and callable(_fn):
        setattr(Admin, _name, _retrying(_fn))
del _name, _fn
