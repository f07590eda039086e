"""What each Kafka request needs, per resource, as Kafka's ``KafkaApis`` /
``ControllerApis`` check it: the gateway's authorization hook.

:meth:`RequestAuthorizer.check` takes one request (principal, client
address, API key and version, the frame and the offset of its body) and
returns a :class:`Verdict`, or None when the request may go upstream as it
is.  A verdict either answers the request itself (``response``: the body
Kafka would send, with Kafka's error codes per topic, partition, group or
transactional id), asks to close the connection (``close``: an acks=0
Produce with a refused topic, as Kafka closes it), or forwards a request
narrowed to the authorized resources (``request``) whose response
``fix(body)`` completes with the refused ones (and filters what the
principal may not see: Metadata, ListGroups, OffsetFetch of all topics).

APIs the table does not know are not offered in ApiVersions behind an
authorizer (:meth:`RequestAuthorizer.offered`), so clients fall back to ones
it knows (Kafka 4's admin DescribeTopicPartitions -> Metadata, KIP-848
consumer protocol -> classic); a client sending one anyway is answered
CLUSTER_AUTHORIZATION_FAILED unless it is a super user.  Versions naming
topics by id only are not offered either (Fetch 13+, DeleteTopics 6+), so
every topic check is by name.

Sans-I/O: bytes and values in, values out.
"""
import struct

from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.security.authorizer.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = ["RequestAuthorizer", "Verdict", "VERSION_CAPS"]

_TOPIC, _GROUP, _CLUSTER, _TXN = (ResourceType.TOPIC, ResourceType.GROUP,
                                  ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID)
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
    AclOperation.ALTER, AclOperation.DESCRIBE)
DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
CLUSTER_ACTION, IDEMPOTENT_WRITE = AclOperation.CLUSTER_ACTION, AclOperation.IDEMPOTENT_WRITE

TAF = int(Errors.TOPIC_AUTHORIZATION_FAILED)
GAF = int(Errors.GROUP_AUTHORIZATION_FAILED)
CAF = int(Errors.CLUSTER_AUTHORIZATION_FAILED)
TIAF = int(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
NOT_ATTEMPTED = int(Errors.OPERATION_NOT_ATTEMPTED)
UNKNOWN_TOPIC = int(Errors.UNKNOWN_TOPIC_OR_PARTITION)
_CAF_MESSAGE = "Cluster authorization failed."

_PRODUCE, _FETCH = int(ApiKey.PRODUCE), int(ApiKey.FETCH)

# Highest versions offered behind an authorizer: later ones name topics by id.
VERSION_CAPS = {int(ApiKey.FETCH): 12, int(ApiKey.DELETE_TOPICS): 5}

# KIP-430 authorized operations: the operations each resource type supports
# (AclEntry.supportedOperations), as a bit field of AclOperation codes.
_TOPIC_OPS = (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
_GROUP_OPS = (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
_NO_OPS = -2147483648        # Integer.MIN_VALUE: not asked for


def _authorized_operations(ok, ops, rtype, name):
    return sum(1 << int(op) for op in ops if ok(op, rtype, name))


# ConfigResource.Type codes of DescribeConfigs / AlterConfigs.
_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_CLIENT_METRICS, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = \
    2, 4, 16, 8, 32
# FindCoordinator key types.
_KEY_GROUP, _KEY_TXN = 0, 1


# ----------------------------------------------------------- fast paths
# Produce and Fetch are most of a gateway's requests and nearly always
# allowed: their topic names (and transactional id, acks, replica id) are
# read straight off the frame, skipping the records, without building the
# request's dicts.  Anything unexpected (or a refusal) falls back to the
# full decode, which also rejects malformed frames.
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


def _uvarint(buf, pos):
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _skip_tags(buf, pos):
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def produce_names(buf, off, version, _i16=_I16.unpack_from, _i32=_I32.unpack_from):
    """(transactional id, acks, [topic names]) of a Produce v3-v9 frame."""
    if version >= 9:
        b = buf[off]
        n, pos = (b, off + 1) if b < 0x80 else _uvarint(buf, off)
        tid = None if n == 0 else str(buf[pos:pos + n - 1], "utf-8")
        pos += max(n - 1, 0)
        acks = _i16(buf, pos)[0]
        pos += 6
        b = buf[pos]
        topics, pos = (b, pos + 1) if b < 0x80 else _uvarint(buf, pos)
        names = []
        for _ in range(topics - 1):
            b = buf[pos]
            n, pos = (b, pos + 1) if b < 0x80 else _uvarint(buf, pos)
            end = pos + n - 1
            names.append(str(buf[pos:end], "utf-8"))
            b = buf[end]
            partitions, pos = (b, end + 1) if b < 0x80 else _uvarint(buf, end)
            for _ in range(partitions - 1):
                pos += 4
                b = buf[pos]
                n, pos = (b, pos + 1) if b < 0x80 else _uvarint(buf, pos)
                if n > 1:
                    pos += n - 1
                pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
            pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
    else:
        n = _i16(buf, off)[0]
        pos = off + 2
        tid = None if n < 0 else str(buf[pos:pos + n], "utf-8")
        pos += max(n, 0)
        acks = _i16(buf, pos)[0]
        topics = _i32(buf, pos + 6)[0]
        pos += 10
        names = []
        for _ in range(topics):
            n = _i16(buf, pos)[0]
            pos += 2
            names.append(str(buf[pos:pos + n], "utf-8"))
            pos += n
            partitions = _i32(buf, pos)[0]
            pos += 4
            for _ in range(partitions):
                n = _i32(buf, pos + 4)[0]
                pos += 8 + (n if n > 0 else 0)
    if pos > len(buf):
        raise IndexError("request truncated")
    return tid, acks, names


def fetch_names(buf, off, version, _i16=_I16.unpack_from, _i32=_I32.unpack_from):
    """(replica id, [topic names]) of a Fetch v4-v12 frame."""
    flexible = version >= 12
    replica_id = _i32(buf, off)[0]
    pos = off + 4 + 12 + 1                    # replica, max wait, min/max bytes, isolation
    if version >= 7:
        pos += 8                              # session id and epoch
    # per partition: partition, [current leader epoch], fetch offset,
    # [last fetched epoch], [log start offset], partition max bytes
    fixed = 4 + (4 if version >= 9 else 0) + 8 + (4 if version >= 12 else 0) \
        + (8 if version >= 5 else 0) + 4
    names = []
    if flexible:
        b = buf[pos]
        topics, pos = (b, pos + 1) if b < 0x80 else _uvarint(buf, pos)
        for _ in range(topics - 1):
            b = buf[pos]
            n, pos = (b, pos + 1) if b < 0x80 else _uvarint(buf, pos)
            end = pos + n - 1
            names.append(str(buf[pos:end], "utf-8"))
            b = buf[end]
            partitions, pos = (b, end + 1) if b < 0x80 else _uvarint(buf, end)
            for _ in range(partitions - 1):
                pos += fixed
                pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
            pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
    else:
        topics = _i32(buf, pos)[0]
        pos += 4
        for _ in range(topics):
            n = _i16(buf, pos)[0]
            pos += 2
            names.append(str(buf[pos:pos + n], "utf-8"))
            pos += n + 4 + fixed * _i32(buf, pos + n)[0]
    if pos > len(buf):
        raise IndexError("request truncated")
    return replica_id, names


class Verdict:
    __slots__ = ("response", "request", "fix", "close")

    def __init__(self, response=None, request=None, fix=None, close=None):
        self.response = response
        self.request = request
        self.fix = fix
        self.close = close

    def __repr__(self):
        kind = ("response" if self.response is not None else "close" if self.close
                else "narrowed" if self.request is not None else "filter")
        return f"Verdict({kind})"


def _split(items, ok):
    allowed, denied = [], []
    for it in items:
        (allowed if ok(it) else denied).append(it)
    return allowed, denied


def _extend(key):
    def fix(extra):
        def apply(body):
            body[key] = list(body.get(key) or ()) + extra
        return apply
    return fix


class RequestAuthorizer:
    """Kafka's per-request authorization rules over an authorizer with
    ``authorize(principal, host, operation, resource_type, name)``,
    ``authorize_by_resource_type(principal, host, operation, type)``,
    ``super_users`` and ``store`` (an ``AclStore``): the
    :class:`~kchannel.security.authorizer.standard.StandardAuthorizer`."""

    def __init__(self, authorizer, auto_create_topics=True):
        self.authorizer = authorizer
        # The ACL store's change counter (a callable, moved by every ACL
        # created or deleted in any worker process): a caller caching
        # decisions (the gateway's per-connection cache) drops them when it
        # moves.
        self.acl_version = authorizer.store.version
        # the upstream's auto.create.topics.enable (Kafka's default: true)
        self.auto_create_topics = auto_create_topics
        k = ApiKey
        self._rules = {
            int(k.PRODUCE): self._produce, int(k.FETCH): self._fetch,
            int(k.LIST_OFFSETS): self._list_offsets, int(k.METADATA): self._metadata,
            int(k.OFFSET_COMMIT): self._offset_commit, int(k.OFFSET_FETCH): self._offset_fetch,
            int(k.FIND_COORDINATOR): self._find_coordinator,
            int(k.JOIN_GROUP): self._group_read, int(k.SYNC_GROUP): self._group_read,
            int(k.HEARTBEAT): self._group_read, int(k.LEAVE_GROUP): self._group_read,
            int(k.DESCRIBE_GROUPS): self._describe_groups, int(k.LIST_GROUPS): self._list_groups,
            int(k.DELETE_GROUPS): self._delete_groups, int(k.OFFSET_DELETE): self._offset_delete,
            int(k.CREATE_TOPICS): self._create_topics, int(k.DELETE_TOPICS): self._delete_topics,
            int(k.CREATE_PARTITIONS): self._create_partitions,
            int(k.DELETE_RECORDS): self._delete_records,
            int(k.OFFSET_FOR_LEADER_EPOCH): self._offset_for_leader_epoch,
            int(k.DESCRIBE_CONFIGS): self._describe_configs,
            int(k.ALTER_CONFIGS): self._alter_configs,
            int(k.INCREMENTAL_ALTER_CONFIGS): self._alter_configs,
            int(k.INIT_PRODUCER_ID): self._init_producer_id,
            int(k.ADD_PARTITIONS_TO_TXN): self._add_partitions_to_txn,
            int(k.ADD_OFFSETS_TO_TXN): self._add_offsets_to_txn,
            int(k.END_TXN): self._end_txn, int(k.TXN_OFFSET_COMMIT): self._txn_offset_commit,
            int(k.DESCRIBE_CLIENT_QUOTAS): self._describe_client_quotas,
            # no resource: Kafka checks nothing (DescribeCluster's authorized
            # operations are only computed when asked for; a client's
            # telemetry, KIP-714, is the broker's to accept)
            int(k.DESCRIBE_CLUSTER): None,
            int(k.GET_TELEMETRY_SUBSCRIPTIONS): None, int(k.PUSH_TELEMETRY): None,
            # the cluster's: ALTER / DESCRIBE / ALTER_CONFIGS on CLUSTER
            int(k.DESCRIBE_LOG_DIRS): self._describe_log_dirs,
            int(k.ALTER_REPLICA_LOG_DIRS): self._alter_replica_log_dirs,
            int(k.ELECT_LEADERS): self._elect_leaders,
            int(k.ALTER_PARTITION_REASSIGNMENTS): self._alter_partition_reassignments,
            int(k.LIST_PARTITION_REASSIGNMENTS): self._list_partition_reassignments,
            int(k.ALTER_CLIENT_QUOTAS): self._alter_client_quotas,
            int(k.DESCRIBE_QUORUM): self._describe_quorum,
            int(k.UPDATE_FEATURES): self._update_features,
            int(k.UNREGISTER_BROKER): self._unregister_broker,
            # per topic / transactional id
            int(k.DESCRIBE_PRODUCERS): self._describe_producers,
            int(k.DESCRIBE_TRANSACTIONS): self._describe_transactions,
            int(k.LIST_TRANSACTIONS): self._list_transactions,
        }

    # ------------------------------------------------------------ offering
    def offered(self, api_key, lo, hi):
        """The (min, max) versions of ``api_key`` to offer, None for none."""
        if api_key not in self._rules:
            return None
        cap = VERSION_CAPS.get(api_key)
        if cap is not None:
            hi = min(hi, cap)
        return (lo, hi) if lo <= hi else None

    # --------------------------------------------------------------- check
    def check(self, principal, host, api_key, version, payload, off):
        """See the module docstring.  ``principal``: ``Type:name`` text."""
        try:
            rule = self._rules[api_key]
        except KeyError:
            if principal in self.authorizer.super_users:
                return None
            return self._cluster_refusal(api_key, version)
        if rule is None:
            return None
        auth = self.authorizer.authorize
        try:
            if api_key == _PRODUCE and 3 <= version <= 9:
                tid, _, names = produce_names(payload, off, version)
                if (tid is None or auth(principal, host, WRITE, _TXN, tid)) and all(
                        auth(principal, host, WRITE, _TOPIC, n) for n in names):
                    return None
            elif api_key == _FETCH and 4 <= version <= 12:
                replica_id, names = fetch_names(payload, off, version)
                if replica_id < 0 and all(auth(principal, host, READ, _TOPIC, n)
                                          for n in names):
                    return None
        except (IndexError, ValueError, UnicodeDecodeError):
            pass          # the full decode below says what is wrong
        api = messages.API[api_key]
        req = api.request.decode(payload, version, off)

        def ok(op, rtype, name):
            return auth(principal, host, op, rtype, name)
        ok.by_type = lambda op, rtype: self.authorizer.authorize_by_resource_type(
            principal, host, op, rtype)
        return rule(ok, req, version)

    @staticmethod
    def _cluster_refusal(api_key, version):
        api = messages.API.get(api_key)
        if api is not None:
            for f in api.response.fields:
                if f.key == "error_code" and version in f.versions:
                    return Verdict(response={"error_code": CAF})
        return Verdict(close="CLUSTER_AUTHORIZATION_FAILED: the API is not authorized here")

    # ----------------------------------------------------------- data path
    def _produce(self, ok, req, version):
        topics = req.get("topic_data") or ()
        tid = req.get("transactional_id")

        def errors(ts, code):
            return [{"name": t["name"], "partition_responses": [
                {"index": p["index"], "error_code": code, "base_offset": -1,
                 "log_append_time_ms": -1, "log_start_offset": -1}
                for p in t.get("partition_data") or ()]} for t in ts]
        acks0 = req.get("acks") == 0
        if tid is not None and not ok(WRITE, _TXN, tid):
            if acks0:
                return Verdict(close="TRANSACTIONAL_ID_AUTHORIZATION_FAILED (acks=0)")
            return Verdict(response={"responses": errors(topics, TIAF)})
        allowed, denied = _split(topics, lambda t: ok(WRITE, _TOPIC, t["name"]))
        if not denied:
            return None
        if acks0:
            # Kafka closes an acks=0 producer's connection on any error
            return Verdict(close="TOPIC_AUTHORIZATION_FAILED (acks=0)")
        if not allowed:
            return Verdict(response={"responses": errors(denied, TAF)})
        return Verdict(request=dict(req, topic_data=allowed),
                       fix=_extend("responses")(errors(denied, TAF)))

    def _fetch(self, ok, req, version):
        if req.get("replica_id", -1) >= 0:
            if ok(CLUSTER_ACTION, _CLUSTER, CLUSTER_NAME):
                return None
            return Verdict(response={"error_code": TAF, "responses": []}) if version >= 7 \
                else Verdict(close="follower fetch not authorized")
        topics = req.get("topics") or ()
        allowed, denied = _split(topics, lambda t: ok(READ, _TOPIC, t["topic"]))
        if not denied:
            return None
        extra = [{"topic": t["topic"], "partitions": [
            {"partition_index": p["partition"], "error_code": TAF, "high_watermark": -1,
             "last_stable_offset": -1, "log_start_offset": -1, "preferred_read_replica": -1,
             "aborted_transactions": None, "records": None}
            for p in t.get("partitions") or ()]} for t in denied]
        if not allowed and not req.get("forgotten_topics_data"):
            return Verdict(response={"error_code": 0, "session_id": 0, "responses": extra})
        return Verdict(request=dict(req, topics=allowed), fix=_extend("responses")(extra))

    def _list_offsets(self, ok, req, version):
        topics = req.get("topics") or ()
        allowed, denied = _split(topics, lambda t: ok(DESCRIBE, _TOPIC, t["name"]))
        if not denied:
            return None
        extra = [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": TAF, "timestamp": -1,
             "offset": -1, "leader_epoch": -1} for p in t.get("partitions") or ()]}
            for t in denied]
        if not allowed:
            return Verdict(response={"topics": extra})
        return Verdict(request=dict(req, topics=allowed), fix=_extend("topics")(extra))

    def _offset_for_leader_epoch(self, ok, req, version):
        if req.get("replica_id", -1) >= 0 and not ok(CLUSTER_ACTION, _CLUSTER, CLUSTER_NAME):
            return Verdict(close="follower OffsetForLeaderEpoch not authorized")
        topics = req.get("topics") or ()
        allowed, denied = _split(topics, lambda t: ok(DESCRIBE, _TOPIC, t["topic"]))
        if not denied:
            return None
        extra = [{"topic": t["topic"], "partitions": [
            {"partition": p["partition"], "error_code": TAF, "leader_epoch": -1,
             "end_offset": -1} for p in t.get("partitions") or ()]} for t in denied]
        if not allowed:
            return Verdict(response={"topics": extra})
        return Verdict(request=dict(req, topics=allowed), fix=_extend("topics")(extra))

    def _metadata(self, ok, req, version):
        requested = req.get("topics")
        names = None if requested is None else [t.get("name") for t in requested]
        auto = bool(req.get("allow_auto_topic_creation", True)) and self.auto_create_topics
        narrowed = None
        no_create = set()
        if names and auto and not ok(CREATE, _CLUSTER, CLUSTER_NAME):
            no_create = {n for n in names if n is not None and not ok(CREATE, _TOPIC, n)}
            if no_create and version >= 4:
                # The upstream creates as the gateway's principal: ask it not
                # to, and answer the missing topics this principal may not
                # create as Kafka does.
                narrowed = dict(req, allow_auto_topic_creation=False)

        want_ops = bool(req.get("include_topic_authorized_operations"))

        def fix(body):
            out = []
            for t in body.get("topics") or ():
                name = t.get("name")
                if name is not None and ok(DESCRIBE, _TOPIC, name):
                    if (name in no_create and t.get("error_code") == UNKNOWN_TOPIC):
                        t.update(error_code=TAF, partitions=[])
                    if want_ops:
                        # the client's, not the upstream's for the gateway
                        t["topic_authorized_operations"] = _authorized_operations(
                            ok, _TOPIC_OPS, _TOPIC, name)
                    out.append(t)
                elif names is not None:
                    # asked for by name (or id): the name is not disclosed
                    # when it was asked for by id
                    out.append({"error_code": TAF, "name": name if name in names else None,
                                "topic_id": t.get("topic_id"), "is_internal": False,
                                "partitions": [], "topic_authorized_operations": -2147483648})
            body["topics"] = out
        return Verdict(request=narrowed, fix=fix)

    # -------------------------------------------------------------- groups
    def _group_read(self, ok, req, version):
        if ok(READ, _GROUP, req.get("group_id")):
            return None
        return Verdict(response={"error_code": GAF})

    def _offset_commit(self, ok, req, version):
        topics = req.get("topics") or ()
        if not ok(READ, _GROUP, req.get("group_id")):
            return Verdict(response={"topics": _commit_errors(topics, GAF)})
        return _commit_topics_verdict(ok, req, topics)

    def _txn_offset_commit(self, ok, req, version):
        topics = req.get("topics") or ()
        if not ok(WRITE, _TXN, req.get("transactional_id")):
            return Verdict(response={"topics": _commit_errors(topics, TIAF)})
        if not ok(READ, _GROUP, req.get("group_id")):
            return Verdict(response={"topics": _commit_errors(topics, GAF)})
        return _commit_topics_verdict(ok, req, topics)

    def _offset_fetch(self, ok, req, version):
        def partitions_error(topics, code):
            return [{"name": t["name"], "partitions": [
                {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1,
                 "metadata": "", "error_code": code} for i in t.get("partition_indexes") or ()]}
                for t in topics]

        def narrow(topics):
            """(topics to forward, error entries, filter for all-topics)"""
            if topics is None:
                return None, [], True
            allowed, denied = _split(topics, lambda t: ok(DESCRIBE, _TOPIC, t["name"]))
            return allowed, partitions_error(denied, TAF), False

        def visible(ts):
            return [t for t in ts or () if ok(DESCRIBE, _TOPIC, t["name"])]
        if version < 8:
            if not ok(DESCRIBE, _GROUP, req.get("group_id")):
                if version >= 2:
                    return Verdict(response={"error_code": GAF, "topics": []})
                return Verdict(response={"topics": partitions_error(req.get("topics") or (),
                                                                   GAF)})
            allowed, extra, filter_all = narrow(req.get("topics"))
            if filter_all:
                return Verdict(fix=lambda body: body.update(topics=visible(body.get("topics"))))
            if not extra:
                return None
            if not allowed:
                return Verdict(response={"error_code": 0, "topics": extra})

            def fix_v7(body):
                # a group-level error (NOT_COORDINATOR...) carries no topics
                if not body.get("error_code"):
                    body["topics"] = list(body.get("topics") or ()) + extra
            return Verdict(request=dict(req, topics=allowed), fix=fix_v7)
        groups = req.get("groups") or ()
        allowed_groups, denied_groups = _split(groups, lambda g: ok(DESCRIBE, _GROUP,
                                                                     g["group_id"]))
        denied_entries = [{"group_id": g["group_id"], "error_code": GAF, "topics": []}
                          for g in denied_groups]
        forwarded, extras, filters = [], {}, set()
        for g in allowed_groups:
            allowed, extra, filter_all = narrow(g.get("topics"))
            if filter_all:
                filters.add(g["group_id"])
            if extra:
                extras[g["group_id"]] = extra
            forwarded.append(dict(g, topics=allowed))
        if not denied_groups and not extras and not filters:
            return None
        if not allowed_groups:
            return Verdict(response={"groups": denied_entries})

        def fix(body):
            for g in body.get("groups") or ():
                gid = g.get("group_id")
                if g.get("error_code"):
                    continue      # a group-level error carries no topics
                if gid in filters:
                    g["topics"] = visible(g.get("topics"))
                if gid in extras:
                    g["topics"] = list(g.get("topics") or ()) + extras[gid]
            body["groups"] = list(body.get("groups") or ()) + denied_entries
        return Verdict(request=dict(req, groups=forwarded), fix=fix)

    def _find_coordinator(self, ok, req, version):
        def allowed(key_type, key):
            if key_type == _KEY_TXN:
                return ok(DESCRIBE, _TXN, key)
            if key_type == _KEY_GROUP:
                return ok(DESCRIBE, _GROUP, key)
            return True     # the upstream answers unknown key types
        code = {_KEY_TXN: TIAF}.get(req.get("key_type", 0), GAF)
        if version < 4:
            if allowed(req.get("key_type", 0), req.get("key")):
                return None
            return Verdict(response={"error_code": code, "node_id": -1, "host": "",
                                     "port": -1})
        keys = req.get("coordinator_keys") or ()
        ok_keys, denied = _split(keys, lambda k: allowed(req.get("key_type", 0), k))
        if not denied:
            return None
        extra = [{"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code}
                 for k in denied]
        if not ok_keys:
            return Verdict(response={"coordinators": extra})
        return Verdict(request=dict(req, coordinator_keys=ok_keys),
                       fix=_extend("coordinators")(extra))

    def _describe_groups(self, ok, req, version):
        groups = req.get("groups") or ()
        allowed, denied = _split(groups, lambda g: ok(DESCRIBE, _GROUP, g))
        want_ops = bool(req.get("include_authorized_operations"))
        extra = [{"error_code": GAF, "group_id": g, "group_state": "", "protocol_type": "",
                  "protocol_data": "", "members": [], "authorized_operations": _NO_OPS}
                 for g in denied]

        def fix(body):
            if want_ops:
                for g in body.get("groups") or ():
                    if g.get("error_code") == 0:
                        g["authorized_operations"] = _authorized_operations(
                            ok, _GROUP_OPS, _GROUP, g["group_id"])
            body["groups"] = list(body.get("groups") or ()) + extra
        if not denied:
            return Verdict(fix=fix) if want_ops else None
        if not allowed:
            return Verdict(response={"groups": extra})
        return Verdict(request=dict(req, groups=allowed), fix=fix)

    def _list_groups(self, ok, req, version):
        if ok(DESCRIBE, _CLUSTER, CLUSTER_NAME):
            return None
        return Verdict(fix=lambda body: body.update(groups=[
            g for g in body.get("groups") or () if ok(DESCRIBE, _GROUP, g["group_id"])]))

    def _delete_groups(self, ok, req, version):
        names = req.get("groups_names") or ()
        allowed, denied = _split(names, lambda g: ok(DELETE, _GROUP, g))
        if not denied:
            return None
        extra = [{"group_id": g, "error_code": GAF} for g in denied]
        if not allowed:
            return Verdict(response={"results": extra})
        return Verdict(request=dict(req, groups_names=allowed), fix=_extend("results")(extra))

    def _offset_delete(self, ok, req, version):
        if not ok(DELETE, _GROUP, req.get("group_id")):
            return Verdict(response={"error_code": GAF, "topics": []})
        topics = req.get("topics") or ()
        allowed, denied = _split(topics, lambda t: ok(READ, _TOPIC, t["name"]))
        if not denied:
            return None
        extra = [{"name": t["name"], "partitions": [
            {"partition_index": p["partition_index"], "error_code": TAF}
            for p in t.get("partitions") or ()]} for t in denied]
        if not allowed:
            return Verdict(response={"error_code": 0, "topics": extra})
        return Verdict(request=dict(req, topics=allowed), fix=_extend("topics")(extra))

    # -------------------------------------------------------------- admin
    def _create_topics(self, ok, req, version):
        topics = req.get("topics") or ()
        if ok(CREATE, _CLUSTER, CLUSTER_NAME):
            allowed, denied = list(topics), []
        else:
            allowed, denied = _split(topics, lambda t: ok(CREATE, _TOPIC, t["name"]))
        extra = [{"name": t["name"], "error_code": TAF, "error_message": "Authorization failed.",
                  "topic_config_error_code": 0, "num_partitions": -1, "replication_factor": -1,
                  "configs": None if version >= 5 else []} for t in denied]
        if version >= 5:
            for e in extra:
                e["configs"] = []

        def fix(body):
            if version >= 5:
                for t in body.get("topics") or ():
                    if t.get("error_code") == 0 and not ok(DESCRIBE_CONFIGS, _TOPIC, t["name"]):
                        t.update(topic_config_error_code=TAF, configs=[])
            body["topics"] = list(body.get("topics") or ()) + extra
        if not denied:
            return Verdict(fix=fix) if version >= 5 else None
        if not allowed:
            return Verdict(response={"topics": extra})
        return Verdict(request=dict(req, topics=allowed), fix=fix)

    def _named_results(self, ok, req, op, list_key, result_key, make):
        items = req.get(list_key) or ()
        name = (lambda t: t) if items and isinstance(items[0], str) else (lambda t: t["name"])
        allowed, denied = _split(items, lambda t: ok(op, _TOPIC, name(t)))
        if not denied:
            return None
        extra = [make(t) for t in denied]
        if not allowed:
            return Verdict(response={result_key: extra})
        return Verdict(request=dict(req, **{list_key: allowed}), fix=_extend(result_key)(extra))

    def _delete_topics(self, ok, req, version):
        return self._named_results(
            ok, req, DELETE, "topic_names", "responses",
            lambda n: {"name": n, "error_code": TAF, "error_message": None})

    def _create_partitions(self, ok, req, version):
        return self._named_results(
            ok, req, ALTER, "topics", "results",
            lambda t: {"name": t["name"], "error_code": TAF,
                       "error_message": "Authorization failed."})

    def _delete_records(self, ok, req, version):
        return self._named_results(
            ok, req, DELETE, "topics", "topics",
            lambda t: {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "low_watermark": -1,
                 "error_code": TAF} for p in t.get("partitions") or ()]})

    def _config_check(self, ok, op, rtype, name):
        if rtype == _CONFIG_TOPIC:
            return ok(op, _TOPIC, name) or TAF
        if rtype in (_CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_CLIENT_METRICS):
            return ok(op, _CLUSTER, CLUSTER_NAME) or CAF
        if rtype == _CONFIG_GROUP:
            return ok(op, _GROUP, name) or GAF
        return True

    def _describe_configs(self, ok, req, version):
        resources = req.get("resources") or ()
        codes = [self._config_check(ok, DESCRIBE_CONFIGS, r["resource_type"],
                                    r["resource_name"]) for r in resources]
        if all(c is True for c in codes):
            return None
        allowed = [r for r, c in zip(resources, codes) if c is True]
        extra = [{"error_code": c, "error_message": None, "resource_type": r["resource_type"],
                  "resource_name": r["resource_name"], "configs": []}
                 for r, c in zip(resources, codes) if c is not True]
        if not allowed:
            return Verdict(response={"results": extra})
        return Verdict(request=dict(req, resources=allowed), fix=_extend("results")(extra))

    def _alter_configs(self, ok, req, version):
        resources = req.get("resources") or ()
        codes = [self._config_check(ok, ALTER_CONFIGS, r["resource_type"], r["resource_name"])
                 for r in resources]
        if all(c is True for c in codes):
            return None
        allowed = [r for r, c in zip(resources, codes) if c is True]
        extra = [{"error_code": c, "error_message": None, "resource_type": r["resource_type"],
                  "resource_name": r["resource_name"]}
                 for r, c in zip(resources, codes) if c is not True]
        if not allowed:
            return Verdict(response={"responses": extra})
        return Verdict(request=dict(req, resources=allowed), fix=_extend("responses")(extra))

    def _describe_client_quotas(self, ok, req, version):
        if ok(DESCRIBE_CONFIGS, _CLUSTER, CLUSTER_NAME):
            return None
        return Verdict(response={"error_code": CAF, "error_message": None, "entries": None})

    # ------------------------------------------------------------ cluster
    # KafkaApis / ControllerApis: one check on the cluster, the whole request
    # answered with the request's getErrorResponse when refused.
    @staticmethod
    def _cluster_ok(ok, op):
        return ok(op, _CLUSTER, CLUSTER_NAME)

    def _describe_log_dirs(self, ok, req, version):
        if self._cluster_ok(ok, DESCRIBE):
            return None
        # before v3 the response has no error code: an empty answer
        return Verdict(response={"error_code": CAF, "results": []})

    def _alter_replica_log_dirs(self, ok, req, version):
        if self._cluster_ok(ok, ALTER):
            return None
        return Verdict(response={"results": [
            {"topic_name": t["name"], "partitions": [
                {"partition_index": p, "error_code": CAF} for p in t.get("partitions") or ()]}
            for d in req.get("dirs") or () for t in d.get("topics") or ()]})

    def _elect_leaders(self, ok, req, version):
        if self._cluster_ok(ok, ALTER):
            return None
        return Verdict(response={"error_code": CAF, "replica_election_results": [
            {"topic": t["topic"], "partition_result": [
                {"partition_id": p, "error_code": CAF, "error_message": _CAF_MESSAGE}
                for p in t.get("partitions") or ()]}
            for t in req.get("topic_partitions") or ()]})

    def _alter_partition_reassignments(self, ok, req, version):
        if self._cluster_ok(ok, ALTER):
            return None
        return Verdict(response={"error_code": CAF, "error_message": _CAF_MESSAGE, "responses": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": CAF,
                 "error_message": _CAF_MESSAGE} for p in t.get("partitions") or ()]}
            for t in req.get("topics") or ()]})

    def _list_partition_reassignments(self, ok, req, version):
        if self._cluster_ok(ok, DESCRIBE):
            return None
        return Verdict(response={"error_code": CAF, "error_message": _CAF_MESSAGE, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p, "replicas": [], "adding_replicas": [],
                 "removing_replicas": []} for p in t.get("partition_indexes") or ()]}
            for t in req.get("topics") or ()]})

    def _alter_client_quotas(self, ok, req, version):
        if self._cluster_ok(ok, ALTER_CONFIGS):
            return None
        return Verdict(response={"entries": [
            {"error_code": CAF, "error_message": _CAF_MESSAGE, "entity": [
                {"entity_type": e["entity_type"], "entity_name": e.get("entity_name")}
                for e in entry.get("entity") or ()]}
            for entry in req.get("entries") or ()]})

    def _describe_quorum(self, ok, req, version):
        if self._cluster_ok(ok, DESCRIBE):
            return None
        return Verdict(response={"error_code": CAF, "error_message": _CAF_MESSAGE, "topics": [],
                                 "nodes": []})

    def _update_features(self, ok, req, version):
        if self._cluster_ok(ok, ALTER):
            return None
        return Verdict(response={"error_code": CAF, "error_message": _CAF_MESSAGE,
                                 "results": []})

    def _unregister_broker(self, ok, req, version):
        if self._cluster_ok(ok, ALTER):
            return None
        return Verdict(response={"error_code": CAF, "error_message": _CAF_MESSAGE})

    def _describe_producers(self, ok, req, version):
        topics = req.get("topics") or ()
        allowed, denied = _split(topics, lambda t: ok(READ, _TOPIC, t["name"]))
        if not denied:
            return None
        extra = [{"name": t["name"], "partitions": [
            {"partition_index": p, "error_code": TAF, "error_message": None,
             "active_producers": []} for p in t.get("partition_indexes") or ()]}
            for t in denied]
        if not allowed:
            return Verdict(response={"topics": extra})
        return Verdict(request=dict(req, topics=allowed), fix=_extend("topics")(extra))

    def _describe_transactions(self, ok, req, version):
        ids = req.get("transactional_ids") or ()
        allowed, denied = _split(ids, lambda t: ok(DESCRIBE, _TXN, t))
        extra = [{"error_code": TIAF, "transactional_id": t, "transaction_state": "",
                  "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                  "producer_id": -1, "producer_epoch": -1, "topics": []} for t in denied]

        def fix(body):
            # only the partitions of topics it may describe
            for state in body.get("transaction_states") or ():
                state["topics"] = [t for t in state.get("topics") or ()
                                   if ok(DESCRIBE, _TOPIC, t["topic"])]
            body["transaction_states"] = list(body.get("transaction_states") or ()) + extra
        if not allowed:
            return Verdict(response={"transaction_states": extra})
        return Verdict(request=dict(req, transactional_ids=allowed) if denied else None,
                       fix=fix)

    def _list_transactions(self, ok, req, version):
        return Verdict(fix=lambda body: body.update(transaction_states=[
            s for s in body.get("transaction_states") or ()
            if ok(DESCRIBE, _TXN, s["transactional_id"])]))

    # -------------------------------------------------------- transactions
    def _init_producer_id(self, ok, req, version):
        tid = req.get("transactional_id")
        if tid is None:
            if ok(IDEMPOTENT_WRITE, _CLUSTER, CLUSTER_NAME) or ok.by_type(WRITE, _TOPIC):
                return None
            code = CAF
        elif ok(WRITE, _TXN, tid):
            return None
        else:
            code = TIAF
        return Verdict(response={"error_code": code, "producer_id": -1, "producer_epoch": -1})

    def _add_partitions_to_txn(self, ok, req, version):
        if version >= 4:
            if ok(CLUSTER_ACTION, _CLUSTER, CLUSTER_NAME):
                return None
            return Verdict(response={"error_code": CAF, "results_by_transaction": []})
        topics = req.get("v3_and_below_topics") or ()

        def results(code_of):
            return [{"name": t["name"], "results_by_partition": [
                {"partition_index": p, "partition_error_code": code_of(t)}
                for p in t.get("partitions") or ()]} for t in topics]
        if not ok(WRITE, _TXN, req.get("v3_and_below_transactional_id")):
            return Verdict(response={"results_by_topic_v3_and_below": results(lambda t: TIAF)})
        denied = {t["name"] for t in topics if not ok(WRITE, _TOPIC, t["name"])}
        if not denied:
            return None
        return Verdict(response={"results_by_topic_v3_and_below": results(
            lambda t: TAF if t["name"] in denied else NOT_ATTEMPTED)})

    def _add_offsets_to_txn(self, ok, req, version):
        if not ok(WRITE, _TXN, req.get("transactional_id")):
            return Verdict(response={"error_code": TIAF})
        if not ok(READ, _GROUP, req.get("group_id")):
            return Verdict(response={"error_code": GAF})
        return None

    def _end_txn(self, ok, req, version):
        if ok(WRITE, _TXN, req.get("transactional_id")):
            return None
        return Verdict(response={"error_code": TIAF})


def _commit_errors(topics, code):
    """An (Txn)OffsetCommit response body's topics, every partition ``code``."""
    return [{"name": t["name"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": code}
        for p in t.get("partitions") or ()]} for t in topics]


def _commit_topics_verdict(ok, req, topics):
    """An (Txn)OffsetCommit whose group (and transactional id) may commit:
    topics without READ get TOPIC_AUTHORIZATION_FAILED, the rest go on."""
    allowed, denied = _split(topics, lambda t: ok(READ, _TOPIC, t["name"]))
    if not denied:
        return None
    if not allowed:
        return Verdict(response={"topics": _commit_errors(denied, TAF)})
    return Verdict(request=dict(req, topics=allowed),
                   fix=_extend("topics")(_commit_errors(denied, TAF)))
