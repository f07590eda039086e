"""The gateway's constants, its per-client and per-request state, and the
request fields it reads without decoding (see :mod:`kchannel.server.gateway`).
"""
import collections
import logging
from dataclasses import dataclass

from ..log import get_logger
from ..principal import KafkaPrincipal
from ..protocol.api_keys import API_NAMES, ApiKey


UPSTREAM_PREFIX = "kchannel.upstream."

# Answered by the gateway itself, never forwarded.
LOCAL_API_KEYS = frozenset(int(k) for k in (
    ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
    ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    # the gateway's own ACLs (SECURITY_DISABLED without an authorizer): never
    # the upstream's, which clients would change as the gateway's principal
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS))
# Answered by the gateway, and only to principals its authorizer allows (a
# principal on no allow-list must not fill the token store).
TOKEN_API_KEYS = frozenset(int(k) for k in (
    ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN))
# Responses decoded and re-encoded with the gateway's endpoints.
REWRITTEN_API_KEYS = frozenset(int(k) for k in (
    ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER))
# Later versions put broker addresses into responses that pass untouched.
VERSION_CAPS = {int(ApiKey.PRODUCE): 9, int(ApiKey.FETCH): 15, int(ApiKey.DESCRIBE_QUORUM): 1}
NOT_FORWARDED = frozenset(int(k) for k in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE))
# What clients are offered while the upstream's own versions are not known
# yet (its login failing or it unreachable since start-up): the APIs of
# Apache Kafka 4.3.1's broker listener (its message schemas' "listeners"),
# at the versions both it and the gateway speak.  Listing only the gateway's
# local APIs instead made clients conclude the cluster lacks Metadata,
# CreateTopics... for the whole life of their connection (confluent-kafka's
# "Topic Admin API (KIP-4) not supported by broker"); a version the upstream
# turns out not to have closes only the connection that uses it, and its
# client reconnects to the real ranges.
KAFKA_BROKER_API_KEYS = frozenset(int(k) for k in (
    ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
    ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS, ApiKey.INIT_PRODUCER_ID, ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
    ApiKey.WRITE_TXN_MARKERS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS, ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS,
    ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.DESCRIBE_LOG_DIRS, ApiKey.SASL_AUTHENTICATE,
    ApiKey.CREATE_PARTITIONS, ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
    ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN, ApiKey.DELETE_GROUPS,
    ApiKey.ELECT_LEADERS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.OFFSET_DELETE, ApiKey.DESCRIBE_CLIENT_QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.DESCRIBE_QUORUM, ApiKey.UPDATE_FEATURES,
    ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_PRODUCERS, ApiKey.UNREGISTER_BROKER,
    ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS, ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY,
    ApiKey.LIST_CONFIG_RESOURCES, ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER, ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY))
_PRODUCE = int(ApiKey.PRODUCE)
_FETCH = int(ApiKey.FETCH)
# the APIs a broker may hold (see _waits_ms)
_WAITING = frozenset((_PRODUCE, _FETCH, int(ApiKey.JOIN_GROUP)))

BOOTSTRAP_NODE = -1          # upstream connection id of the bootstrap broker
DEFAULT_MAX_QUEUED = 100
# kchannel.gateway.max.queued.bytes: what one client connection may hold in
# the gateway (its forwarded requests and its unsent responses) before it is
# not read, nor its own upstream connections
DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024
# kchannel.gateway.total.max.queued.bytes: the same, summed over clients
DEFAULT_TOTAL_MAX_QUEUED_BYTES = 512 * 1024 * 1024
# kchannel.gateway.shared.fetch.max.wait.ms: on a shared upstream connection
# a Fetch waiting for data holds every request behind it (a broker answers a
# connection's requests in order): its max_wait_ms is lowered to this
DEFAULT_SHARED_FETCH_MAX_WAIT_MS = 500
# While anything is in flight upstream, the loop wakes at least this often
# for the upstream client's timeouts (connection setup, request timeout).
TIMER_MS = 100
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000
START_TIMEOUT_MS = 10000


@dataclass(frozen=True)
class GatewayRequest:
    """What an authorizer sees of a request about to be forwarded."""
    principal: KafkaPrincipal
    listener_name: str
    api_key: int
    api_version: int
    client_id: str
    client_address: object

    @property
    def api_name(self):
        return API_NAMES.get(self.api_key, str(self.api_key))


class AllowListAuthorizer:
    """Allows the principals listed for a listener (``{listener name:
    iterable of "Type:name"}``); a listener without a list allows every
    authenticated principal."""

    def __init__(self, allowed):
        self.allowed = {str(k).upper(): frozenset(str(p).strip() for p in v if str(p).strip())
                        for k, v in (allowed or {}).items()}
        self.allowed = {k: v for k, v in self.allowed.items() if v}

    def authorize(self, request):
        allowed = self.allowed.get(request.listener_name)
        if allowed is None:
            return True
        p = request.principal
        return p is not None and f"{p.principal_type}:{p.name}" in allowed


class _Slot:
    """One request of a client, in its order: forwarded (``response`` set
    once the upstream answered) or answered locally (``local`` = its
    frame, handled when it reaches the head)."""
    __slots__ = ("api_key", "version", "corr", "start", "response", "local", "timeout_ms",
                 "req_bytes", "silent", "fix")

    def __init__(self, api_key, version, corr, start, local=None):
        self.timeout_ms = None       # upstream request timeout, if not the default
        self.req_bytes = 0           # its frame's bytes, counted until answered
        # an acks=0 Produce sent as acks=1 on a shared connection: its
        # answer is not the client's (see Gateway.intercept)
        self.silent = False
        self.fix = None              # ACL hook: completes/filters the decoded response
        self.api_key = api_key
        self.version = version
        self.corr = corr
        self.start = start
        self.response = None
        self.local = local


class _Downstream:
    __slots__ = ("cid", "listener_name", "node", "queue", "muted", "closed", "uids",
                 "req_bytes", "held_bytes", "out_bytes", "unacked_bytes", "up_muted", "uid",
                 "authz", "authz_counter", "principal", "host")

    def __init__(self, cid, listener_name, node):
        self.cid = cid
        self.listener_name = listener_name
        self.node = node              # upstream node of its port, None: bootstrap port
        self.queue = collections.deque()
        self.muted = False
        self.closed = False
        self.uids = ()                # upstream connections of its own (per-client mode)
        # Bytes it holds in the gateway: forwarded requests not answered
        # yet, responses waiting for their turn, responses handed to its
        # socket and not written yet, acks=0 requests not written upstream.
        self.req_bytes = 0
        self.held_bytes = 0
        self.out_bytes = 0
        self.unacked_bytes = 0
        self.up_muted = False         # its upstream connections are not read
        # per-client mode, a node port's client: its one upstream
        # connection id, (node, cid), made once instead of per request
        self.uid = (node, cid) if node is not None else None
        # authorizer.class.name (see _Authorization._authorize_request): the
        # requests this connection may forward as they are, by (API key,
        # transactional id or None, topic names...), valid while the ACL
        # store's change counter is authz_counter; its principal (a
        # re-authentication cannot change it) and address as the
        # authorizer takes them, read once
        self.authz = None
        self.authz_counter = None
        self.principal = None
        self.host = None

    def queued_bytes(self):
        return self.req_bytes + self.held_bytes + self.out_bytes + self.unacked_bytes


class _Up:
    """A client's own upstream connection (per-client mode): a channel of
    the upstream selector that the gateway drives itself, not a
    NetworkClient node.  The broker answers a connection's requests in
    order, so ``in_flight`` (the slots of the requests sent, in order;
    None: the gateway's own ApiVersions) says whose every response is: the
    frame passes back with the client's own correlation id, never
    decoded, never copied into a ClientResponse."""
    __slots__ = ("uid", "ds", "in_flight", "ready")

    def __init__(self, uid, ds):
        self.uid = uid
        self.ds = ds
        self.in_flight = collections.deque()
        self.ready = False


class _UpstreamLoginLogFilter(logging.Filter):
    """Lowers to DEBUG what the upstream client and its selector log at
    each failed login of the gateway's upstream connections (an ERROR and a
    WARNING per attempt, every reconnect backoff): the gateway's own ERROR,
    once per failure streak, says it with what to do (see
    Gateway._login_failed).  A record is the gateway's when it names an
    upstream address; the server's own listeners' failures stay as they
    are."""

    MESSAGES = ("Connection to node %s (%s:%s) failed authentication due to: %s",
                "Failed %sauthentication with %s%s (%s)")

    def __init__(self, gateway):
        super().__init__()
        self.gateway = gateway

    def filter(self, record):
        if record.msg in self.MESSAGES and record.levelno > logging.DEBUG:
            args = record.args if isinstance(record.args, tuple) else ()
            text = " ".join(str(a) for a in args)
            for host, port in self.gateway.upstream_addresses():
                if f"{host}:{port}" in text or (host in args and port in args):
                    record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                    # (its logger let it through at its own level)
                    return get_logger(record.name).isEnabledFor(logging.DEBUG)
        return True


class _Fd:
    """A file descriptor for Selector.add_listener (the upstream selector's
    epoll descriptor: readable when an upstream connection has an event)."""

    def __init__(self, fd):
        self._fd = fd

    def fileno(self):
        return self._fd

    def setblocking(self, flag):
        pass


def _skip_string(payload, off, flexible):
    """Offset after a (nullable) string at ``off``."""
    if flexible:         # compact: unsigned varint length + 1
        n, shift = 0, 0
        while True:
            b = payload[off]
            off += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        return off + max(n - 1, 0)
    n = int.from_bytes(payload[off:off + 2], "big", signed=True)
    return off + 2 + max(n, 0)


def _int(payload, off, size):
    if off + size > len(payload):
        raise IndexError("request truncated")
    return int.from_bytes(payload[off:off + size], "big", signed=True)


def _acks(payload, off, version):
    """The ``acks`` of a Produce request (v3+: after transactional_id)."""
    return _int(payload, _acks_offset(payload, off, version), 2)


def _fetch_max_wait_offset(version, off):
    """Where a Fetch request's max_wait_ms is (before v15 a replica_id
    comes first)."""
    return off if version >= 15 else off + 4


def _acks_offset(payload, off, version):
    """Where a Produce request's acks is (after transactional_id)."""
    if version >= 9:
        # a compact transactional_id with a one-byte length (null, or under
        # 127 bytes: in practice always), without _skip_string's loop
        b = payload[off]
        if b < 0x80:
            return off + (b or 1)
    return _skip_string(payload, off, version >= 9)


def _waits_ms(key, version, payload, off):
    """How long the broker may hold this request before answering (0 for
    most): a Produce's timeout_ms, a Fetch's max_wait_ms, a JoinGroup's
    rebalance timeout.  The upstream request timeout is stretched by it, as
    Kafka's clients do, so that a long poll or a rebalance does not count as
    a dead upstream connection."""
    if key == int(ApiKey.PRODUCE):
        return max(_int(payload, _skip_string(payload, off, version >= 9) + 2, 4), 0)
    if key == int(ApiKey.FETCH):
        return max(_int(payload, _fetch_max_wait_offset(version, off), 4), 0)
    if key == int(ApiKey.JOIN_GROUP):
        pos = _skip_string(payload, off, version >= 6)
        # v0 has no rebalance timeout: the session timeout bounds the join
        return max(_int(payload, pos + (4 if version >= 1 else 0), 4), 0)
    return 0


def _drop_none(d):
    """A body dict without its None values (their fields take the schema's
    default: a null topic id is the zero UUID)."""
    return {k: v for k, v in d.items() if v is not None}


def _has_top_level_field(spec, key, version):
    for f in spec.fields:
        if f.key == key and version in f.versions:
            return True
    return False
