"""kchannel as a security gateway in front of any Kafka-compatible cluster.

:class:`Gateway` plugs into a :class:`kchannel.server.Server`: clients
connect to the server's listeners (TLS, SASL, delegation tokens, SCRAM
administration: the server's own), and every request the gateway does not
answer itself goes to the upstream broker that must receive it, over
:class:`kchannel.client.NetworkClient` connections configured by the
``kchannel.upstream.`` properties.

Endpoints (one port per upstream node)
    A listener's configured port is the bootstrap port: its connections go
    to any upstream broker.  Upstream node ``k`` is reached on the port
    ``port + 1 + (k - kchannel.gateway.node.id.base)`` of the same listener
    (same host, security protocol, configs), bound when the gateway first
    learns of node ``k``; Metadata, FindCoordinator and DescribeCluster
    responses name that port at the listener's advertised host (advertised
    port + the same offset).  With port 0 the node ports are ephemeral.
    Kroxylicious's port-per-broker scheme is the same idea (a bootstrap port
    and a broker port range); its SNI scheme needs TLS and wildcard DNS, which
    SASL_PLAINTEXT clients cannot use.  kafka-proxy configures one local
    listener per upstream broker by hand and rewrites addresses the same way.

Requests
    ApiVersions, SaslHandshake, SaslAuthenticate, the delegation token APIs
    and the SCRAM credential APIs are answered by the server itself.
    ApiVersions lists them and, for everything else, the versions both the
    upstream (its bootstrap broker's ApiVersions; until they are known,
    KAFKA_BROKER_API_KEYS at the gateway's versions) and the gateway support:
    Produce at most v9 and Fetch at most v15 (later versions carry broker
    addresses, KIP-951, in responses the gateway forwards untouched), no
    ShareFetch/ShareAcknowledge (same reason), DescribeQuorum at most v1.
    Metadata, FindCoordinator and DescribeCluster responses are decoded and
    re-encoded with the gateway's endpoints; every other frame passes as it
    is, only the correlation id at bytes 4-8 of the header replaced both
    ways.  Responses go back to the client in the order of its requests
    (a request answered locally waits behind forwarded ones).  A client
    with ``kchannel.gateway.max.queued.requests`` requests waiting is not
    read (muted) until one is answered: a slow upstream holds clients back
    through TCP instead of filling the gateway's memory (see Memory).
    Every request is forwarded (or refused) in :meth:`Gateway.intercept`.

Upstream connections
    By default (``kchannel.gateway.upstream.connections=per-client``) each
    client connection gets upstream connections of its own, per upstream
    node it needs, opened on its first request there and closed with it: a
    broker serves a connection's requests one at a time and closes a
    connection over a bad request, so nothing one client sends delays,
    breaks or disconnects another's.  When the broker closes a client's own
    upstream connection, the client's connection is closed too.  These
    connections are channels of the upstream client's selector that the
    gateway drives itself (:class:`_Up`), not NetworkClient nodes: its
    ApiVersions opens each, the client's frames go out unchanged behind it
    (the client's correlation id too), and the responses, in request
    order, go back undecoded.  With
    ``shared`` (trusted clients only) one connection per upstream node
    serves every client: a Fetch's max_wait_ms is lowered to
    ``kchannel.gateway.shared.fetch.max.wait.ms``, requests are checked to
    decode before they are forwarded (APIs with a codec), and an acks=0
    Produce is sent as acks=1, its client closed if it failed.  Either way
    the upstream sees the gateway's principal
    (``kchannel.upstream.sasl.jaas.config``) for every request, so the
    gateway's authorization hook (and the upstream's ACLs for that one
    principal) decide what clients may do.  When an upstream connection
    fails, every client with a request on it is disconnected (client
    libraries reconnect and retry); a request waits at most the upstream
    ``request.timeout.ms`` plus the time the broker may hold it (Produce
    timeout, Fetch max wait, JoinGroup rebalance timeout).

Upstream login
    :meth:`Gateway.start` learns the upstream's versions and nodes over a
    NetworkClient connection; when the upstream is not reachable or refuses
    the gateway's login, it returns and the same check (:meth:`Gateway._probe`)
    goes on in the background with the upstream reconnect backoff until it
    succeeds.  An authentication failure of any upstream connection starts a
    failure streak: one ERROR (the upstream, the login, the keys to fix,
    never the secret), the upstream client's own per-attempt messages lowered
    to DEBUG, and until the probe logs in again a request that needs a new
    upstream connection closes its client at once instead of making another
    login that fails the same way.

Memory
    A client is not read while it holds ``kchannel.gateway.max.queued.bytes``
    in the gateway (forwarded requests not answered, responses not written
    to it), and, per-client mode, neither are its own upstream connections
    while its unwritten responses reach that bound: the broker then waits
    on that connection alone.  While all clients together hold
    ``kchannel.gateway.total.max.queued.bytes`` no client is read.  Bytes
    are counted until written (``_check_draining``) and dropped with the
    client.

Authorization
    ``authorizer.authorize(request) -> bool`` for every forwarded request
    (:class:`GatewayRequest`: principal, listener, API key and version,
    client id and address).  Built-in: :class:`AllowListAuthorizer`, the
    principals of ``kchannel.gateway.allowed.principals`` per listener
    (``listener.name.<l>.kchannel.gateway.allowed.principals``; empty: every
    authenticated principal).  A refused request gets Kafka's
    CLUSTER_AUTHORIZATION_FAILED in the response's top-level error code,
    TOPIC_AUTHORIZATION_FAILED per topic for Metadata and Produce; a request
    whose response has neither closes the connection (logged).  The
    delegation-token APIs the gateway answers are asked about too (refused:
    DELEGATION_TOKEN_AUTHORIZATION_FAILED).

Metrics (the server's registry)
    ``RequestsPerSec`` (group ``RequestMetrics``, tag ``request`` = Kafka's
    API name), ``TotalTimeMs`` / ``TotalTimeMs-max`` (ms from a request's
    arrival to its response being queued), as Kafka's
    ``kafka.network:type=RequestMetrics`` MBeans; ``connection-count`` of
    group ``kchannel-upstream-metrics`` (upstream connections).
"""
import collections
import logging
from dataclasses import dataclass

from .. import errors
from .. import __version__
from ..client.network_client import (CLIENT_SOFTWARE_NAME, NetworkClient, RequestTimeoutError,
                                      _parse_bootstrap)
from ..config.client import ClientConfig
from ..config.definitions import resolve_class
from ..log import get_logger
from ..metrics import Avg, Max, MetricName, Rate
from ..network.channel import State
from ..principal import KafkaPrincipal
from ..protocol import messages
from ..protocol.api_keys import API_NAMES, API_VALID_VERSIONS, ApiKey
from ..protocol.errors import Errors
from ..protocol.headers import decode_response, encode_response, request_encoder
from ..security.authorizer.requests import RequestAuthorizer

log = get_logger("kchannel.gateway")

__all__ = ["Gateway", "GatewayRequest", "AllowListAuthorizer", "UPSTREAM_PREFIX",
           "LOCAL_API_KEYS", "install_gateway"]

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
                 "req_bytes", "held_bytes", "out_bytes", "unacked_bytes", "up_muted", "uid")

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


class Gateway:
    """See the module docstring.  ``upstream_configs``: client configs of the
    upstream connections (``bootstrap.servers`` required)."""

    def __init__(self, server, upstream_configs, *, node_id_base=0,
                 max_queued_requests=DEFAULT_MAX_QUEUED, authorizer=None,
                 upstream_connections="per-client", request_authorizer=None,
                 max_queued_bytes=DEFAULT_MAX_QUEUED_BYTES,
                 total_max_queued_bytes=DEFAULT_TOTAL_MAX_QUEUED_BYTES,
                 shared_fetch_max_wait_ms=DEFAULT_SHARED_FETCH_MAX_WAIT_MS):
        configs = dict(upstream_configs)
        self.bootstrap = _parse_bootstrap(configs.get("bootstrap.servers"))
        if not self.bootstrap:
            raise errors.ConfigError(
                "kchannel.upstream.bootstrap.servers is empty: set the upstream cluster's "
                "bootstrap servers to run a gateway", key="kchannel.upstream.bootstrap.servers")
        configs.setdefault("client.id", "kchannel-gateway")
        self.server = server
        self.time = server.time
        self.node_id_base = int(node_id_base)
        self.max_queued_requests = max(1, int(max_queued_requests))
        self.authorizer = authorizer
        # authorizer.class.name: Kafka's per-resource checks (a
        # kchannel.security.authorizer.requests.RequestAuthorizer)
        self.request_authorizer = request_authorizer
        mode = str(upstream_connections).strip().lower()
        if mode not in ("shared", "per-client"):
            raise errors.ConfigError(
                f"Invalid value {upstream_connections} for configuration "
                "kchannel.gateway.upstream.connections: String must be one of: shared, per-client",
                key="kchannel.gateway.upstream.connections", value=upstream_connections)
        self.per_client = mode == "per-client"
        self.max_queued_bytes = max(1, int(max_queued_bytes))
        self.total_max_queued_bytes = max(1, int(total_max_queued_bytes))
        self.shared_fetch_max_wait_ms = max(0, int(shared_fetch_max_wait_ms))
        self.queued_bytes = 0         # sum of the clients' queued_bytes()
        self._total_over = False      # queued_bytes >= total_max_queued_bytes
        self._draining = set()        # clients with bytes on their way out
        self.client = NetworkClient(configs, metrics=server.metrics, time=server.time,
                                    metric_group_prefix="kchannel-upstream")
        self.request_timeout_ms = self.client.request_timeout_ms
        self.nodes = {}               # upstream node id -> (host, port)
        self.node_listeners = {}      # (listener name, node id) -> Listener
        self.downstreams = {}         # connection id -> _Downstream
        self.in_flight = {}           # (upstream id, corr) -> (_Downstream, _Slot)
        self.waiting = {}             # upstream id -> deque[(ds, slot, frame, expect)]
        self.connecting = set()       # upstream ids connected on behalf of waiting requests
        self.ups = {}                 # per-client mode: upstream id -> _Up
        self._up_in_flight = 0        # requests in flight on them
        self._next_up_timeout_scan = 0
        self._api_versions_frame = None
        self.upstream_versions = None  # {api_key: (min, max)} of the upstream
        self._ranges_cache = None
        self._offered_cache = None
        self._bootstrap_index = 0
        self._next_waiting_scan = 0   # see _waiting_now
        self._sensors = {}
        # request times (ms) per API key not recorded yet: recorded once per
        # poll with one record_many call per stat (see _record_times)
        self._times = {}
        # The gateway's own check of the upstream (see _probe): running
        # until the upstream's versions and nodes are known, and again while
        # its login fails (_login_error: the streak's last failure).
        self._probing = False
        self._probe_uid = None        # its connection being set up or used
        self._probe_corr = None       # (uid, corr) of its Metadata request
        self._probe_node = None       # the node whose login failed, else any
        self._login_error = None
        self._login_failures = 0
        self._login_failed_since = 0
        self._login_name = self._describe_login(configs)
        self._log_filter = _UpstreamLoginLogFilter(self)
        for name in ("kchannel.client", "kchannel.network.selector"):
            get_logger(name).addFilter(self._log_filter)
        self._fd = _Fd(self.client.selector.fileno())
        server.selector.add_listener(self._fd, self._upstream_event)
        server.gateway = self

    # ------------------------------------------------------------ start-up
    def start(self, timeout_ms=None):
        """Connect to the bootstrap broker and learn the upstream's API
        versions and nodes (binding their ports), waiting at most
        ``timeout_ms`` (default: the upstream request.timeout.ms, at most
        10 s).  Returns True when done; False (logged) when the upstream is
        not reachable yet or refuses the gateway's login: the gateway then
        keeps trying in the background with the upstream reconnect backoff
        (see :meth:`_probe`) and learns it once it can."""
        if timeout_ms is None:
            # the listeners wait meanwhile: not longer than this
            timeout_ms = min(self.request_timeout_ms, START_TIMEOUT_MS)
        deadline = self.time() + timeout_ms
        self._probing = True
        while self.time() < deadline:
            self._probe()
            if not self._probing:
                return True
            if self._login_error is not None:
                # Not waited out here: a wrong credential stays wrong, and
                # clients are better served by a running gateway that fails
                # their requests at once (and recovers by itself) than by
                # listeners that do not answer.
                return False
            for resp in self.client.poll(50):
                if self._probe_corr is not None and \
                        (resp.node_id, resp.correlation_id) == self._probe_corr:
                    self._probe_response(resp, at_start=True)
            self._probe()
            if not self._probing:
                return True
        if self._login_error is None:
            log.warning("Upstream cluster %s not reachable within %d ms; requests are forwarded "
                        "once it is", ",".join(f"{h}:{p}" for h, p in self.bootstrap),
                        timeout_ms)
        return False

    # ------------------------------------------------ the upstream's login
    def _probe(self):
        """One step of the gateway's own check of the upstream, run until it
        succeeds: at start-up, while the upstream's versions and nodes are
        not known, and while its login fails.  A NetworkClient connection
        (so Kafka's reconnect backoff: ``reconnect.backoff.ms`` doubling up
        to ``reconnect.backoff.max.ms``) that logs in, learns the
        upstream's ApiVersions and asks Metadata for its nodes."""
        if not self._probing:
            return
        client = self.client
        uid = self._probe_uid
        if uid is not None:
            if client.is_ready(uid):
                if self._probe_corr is None:
                    self._learn_versions(uid)
                    version = min(client.choose_version(uid, int(ApiKey.METADATA)), 12)
                    corr = client.send(uid, int(ApiKey.METADATA),
                                       {"topics": [], "allow_auto_topic_creation": False,
                                        "include_cluster_authorized_operations": False,
                                        "include_topic_authorized_operations": False},
                                       version)
                    self._probe_corr = (uid, corr)
                return
            if not client.connection_failed(uid):
                return          # being set up
            self._probe_uid = self._probe_corr = None
            auth = client.authentication_exception(uid)
            if auth is not None:
                self._login_failed(uid, auth)
            else:
                log.debug("Upstream connection %s (%s:%s) failed: %s", uid, *self._address(uid),
                          client.connection_exception(uid))
                if self._is_bootstrap(uid):
                    self._next_bootstrap()
        uid = self._probe_node if self._probe_node is not None else self._route(None)
        if client.is_ready(uid):
            self._probe_uid = uid
            return
        try:
            started = client.connect(uid, *self._address(uid))
        except errors.KChannelError as exc:
            log.debug("Cannot connect to upstream %s: %s", self._address(uid), exc)
            self._next_bootstrap()
            return
        if started:             # else in its reconnect backoff
            self._probe_uid = uid

    def _probe_response(self, resp, at_start=False):
        self._probe_corr = None
        if resp.exception is not None:
            return              # its connection failed: _probe sees it
        for b in resp.body.get("brokers") or ():
            self._learn_node(b["node_id"], b["host"], b["port"])
        problem = self._node_port_collision(sorted(self.nodes))
        if problem and at_start:
            raise errors.ConfigError(problem, key="kchannel.gateway.node.id.base")
        for l in list(self.server.listeners):
            if l.upstream_node is None:
                for nid in sorted(self.nodes):
                    self._endpoint(l.name, nid)     # (a collision is logged there)
        upstream = ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        if self._login_error is not None:
            # WARN, as serve logs by default: whoever saw the ERROR sees it end
            log.warning("Gateway logged in to upstream cluster %s after %d failed attempts in "
                        "%.1f s: forwarding requests again", upstream, self._login_failures,
                        (self.time() - self._login_failed_since) / 1000.0)
        log.info("Gateway ready: upstream %s, nodes %s", upstream, sorted(self.nodes))
        self._login_error = None
        self._login_failures = 0
        self._probe_node = None
        self._probing = False

    def _login_failed(self, uid, exc):
        """An upstream connection ``uid`` failed authentication: the
        upstream refused the gateway's own credentials (or its TLS
        handshake).  One ERROR per failure streak; until the probe logs in
        again (with the reconnect backoff, never in a loop of its own),
        requests that need a new upstream connection fail at once (their
        clients' connections are closed) instead of each making a login
        that fails the same way."""
        self._probing = True
        self._login_failures += 1
        if isinstance(uid, int):
            self._probe_node = uid     # logs in again where it failed
        if self._login_error is not None:
            self._login_error = exc
            log.debug("Upstream connection %s failed authentication again: %s", uid, exc)
            return
        self._login_error = exc
        self._login_failed_since = self.time()
        host, port = self._address(uid)
        if isinstance(exc, errors.SslAuthenticationError):
            what, keys = "TLS handshake", "kchannel.upstream.ssl.* (truststore, keystore)"
        else:
            what = f"{self._login_name} login" if self._login_name else "login"
            keys = ("kchannel.upstream.sasl.jaas.config and kchannel.upstream.sasl.mechanism "
                    "(the user, or delegation token, must exist on the upstream cluster; "
                    "a new one can take a moment to reach every broker)")
        node = uid[0] if isinstance(uid, tuple) else uid
        where = "" if node == BOOTSTRAP_NODE else f" (node {node} at {host}:{port})"
        log.error("Gateway cannot authenticate to upstream cluster %s%s: %s "
                  "failed: %s. The upstream refused the gateway's own credentials, not a "
                  "client's: fix %s. Retrying with the upstream reconnect backoff "
                  "(kchannel.upstream.reconnect.backoff.ms, reconnect.backoff.max.ms); until "
                  "then client requests that need a new upstream connection fail at once "
                  "(their connections are closed).",
                  ",".join(f"{h}:{p}" for h, p in self.bootstrap), where, what,
                  str(exc).rstrip("."), keys)
        if self.per_client:
            # The start-up connection may still be logged in (idle): the
            # probe must log in afresh to learn that the credential works.
            for nid in [BOOTSTRAP_NODE, *sorted(self.nodes)]:
                if self.client.is_ready(nid):
                    self.client.disconnect(nid)

    @staticmethod
    def _describe_login(configs):
        """What the ERROR says the gateway logs in as: ``SASL/<mechanism> as
        "<user>"`` (a token login names its token id), never a secret."""
        protocol = str(configs.get("security.protocol") or "PLAINTEXT").upper()
        if not protocol.startswith("SASL"):
            return None
        mechanism = str(configs.get("sasl.mechanism") or "GSSAPI").upper()
        try:
            jaas = ClientConfig(dict(configs)).jaas()
            user = jaas.option("username") if jaas is not None else None
            token = jaas is not None and str(jaas.option("tokenauth")).lower() == "true"
        except Exception:  # noqa: BLE001 - a description only: the client reports bad configs
            user, token = None, False
        if user is None:
            return f"SASL/{mechanism}"
        return f'SASL/{mechanism} as {"delegation token" if token else "user"} "{user}"'

    def _login_refused(self, ds, uid):
        """Fail ``ds`` at once: the upstream login is failing (see
        _login_failed)."""
        self._fail_downstream(ds, errors.ChannelConnectionError(
            f"the gateway cannot log in to upstream node "
            f"{uid[0] if isinstance(uid, tuple) else uid} ({self._login_error}); its operator "
            "must fix the gateway's kchannel.upstream credentials"))

    def close(self):
        if self._times:
            self._record_times()
        for name in ("kchannel.client", "kchannel.network.selector"):
            get_logger(name).removeFilter(self._log_filter)
        self.server.selector.remove_listener(self._fd)
        self.client.close()

    # --------------------------------------------------------- the server
    def api_ranges(self, local):
        """ApiVersions ranges: the gateway's own APIs as the server has them,
        then what both the upstream and the gateway support."""
        up = self.upstream_versions
        if up is None:
            # not known yet: Kafka's broker APIs (see KAFKA_BROKER_API_KEYS),
            # not cached, the upstream's own replacing them once learned
            up = {k: API_VALID_VERSIONS[k] for k in KAFKA_BROKER_API_KEYS
                  if k in API_VALID_VERSIONS}
        elif self._ranges_cache is not None and self._ranges_cache[0] == local:
            return dict(self._ranges_cache[1])
        out = {k: r for k, r in local.items() if k in LOCAL_API_KEYS}
        for k, (lo, hi) in up.items():
            if k in LOCAL_API_KEYS or k in NOT_FORWARDED or k not in API_NAMES:
                continue
            valid = API_VALID_VERSIONS.get(k)
            if valid is not None:
                lo, hi = max(lo, valid[0]), min(hi, valid[1])
            if k in VERSION_CAPS:
                hi = min(hi, VERSION_CAPS[k])
            if k in REWRITTEN_API_KEYS:
                api = messages.API[k]
                lo, hi = max(lo, api.min_version), min(hi, api.max_version)
            if self.request_authorizer is not None and lo <= hi:
                # only what the authorizer can check, at versions it can read
                lo, hi = self.request_authorizer.offered(k, lo, hi) or (0, -1)
            if lo <= hi:
                out[k] = (lo, hi)
        if self.upstream_versions is not None:
            self._ranges_cache = (dict(local), dict(out))
        return out

    def _offered(self):
        """{api_key: (min, max)} offered to clients (cached until the
        upstream's versions change)."""
        offered = self._offered_cache
        if offered is None:
            body = self.server.api_versions_body(0)
            offered = {e["api_key"]: (e["min_version"], e["max_version"])
                       for e in body["api_keys"]}
            if self.upstream_versions is not None:
                self._offered_cache = offered
        return offered

    def connection_closed(self, cid):
        ds = self.downstreams.get(cid)
        if ds is not None:
            self._forget(ds)

    def _forget(self, ds):
        """A client gone: its upstream connections (per-client mode) and
        every byte it held go with it."""
        ds.closed = True
        if self.downstreams.get(ds.cid) is not ds:
            return
        del self.downstreams[ds.cid]
        ds.queue.clear()
        self.queued_bytes -= ds.queued_bytes()
        ds.req_bytes = ds.held_bytes = ds.out_bytes = ds.unacked_bytes = 0
        self._draining.discard(ds)
        usel = self.client.selector
        for uid in ds.uids:
            # its own upstream connection (per-client mode) goes with it
            up = self.ups.pop(uid, None)
            if up is not None:
                self._up_in_flight -= len(up.in_flight)
                up.in_flight.clear()
            usel.close(uid)
        self._update_total()

    def poll_timeout(self, timeout_ms):
        if self.client.has_pending_io():
            return 0
        if (self.in_flight or self.waiting or self._draining or self._up_in_flight
                or self._probing):
            if timeout_ms is None or timeout_ms < 0 or timeout_ms > TIMER_MS:
                return TIMER_MS
        return timeout_ms

    def _upstream_event(self):
        pass     # after_poll polls the upstream client in every iteration

    def intercept(self, ch, header, payload, off, now):
        """Called by the server for each request of an authenticated client:
        False to let the server answer it now, True when the gateway took
        it (forwarded, refused or queued behind earlier requests)."""
        key = header.api_key
        cid = ch.id
        ds = self.downstreams.get(cid)
        if ds is None:
            ds = self.downstreams[cid] = _Downstream(
                cid, ch.listener_name, self.server.connection_upstream_node.get(cid))
        if key in TOKEN_API_KEYS and self.authorizer is not None:
            handler = self.server.handlers.get(key)
            request = GatewayRequest(ch.principal(), ds.listener_name, key, header.api_version,
                                     header.client_id, ch.remote_address)
            if (handler is not None and handler.min_version <= header.api_version
                    <= handler.max_version and not self.authorizer.authorize(request)):
                log.info("Refusing %s v%d of %s on %s (client %s)", request.api_name,
                         header.api_version, request.principal, request.listener_name, cid)
                slot = _Slot(key, header.api_version, header.correlation_id, now)
                slot.response = encode_response(key, header.api_version, header.correlation_id, {
                    "error_code": int(Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED)})
                ds.held_bytes += len(slot.response)
                self.queued_bytes += len(slot.response)
                ds.queue.append(slot)
                self._flush(ds)
                return True
        if key in LOCAL_API_KEYS:
            if not ds.queue:
                return False
            ds.queue.append(_Slot(key, header.api_version, header.correlation_id, now,
                                  local=bytes(payload)))
            self._update_flow(ds)
            return True
        version = header.api_version
        rng = (self._offered_cache or self._offered()).get(key)
        if rng is None or not rng[0] <= version <= rng[1]:
            name = API_NAMES.get(key, str(key))
            log.info("Closing connection %s from %s: %s v%d is not offered by the gateway",
                     cid, ch.socket_description(), name, version)
            self._fail_downstream(ds, errors.UnsupportedVersionError(
                f"{name} version {version} is not supported by the gateway"))
            return True
        slot = _Slot(key, version, header.correlation_id, now)
        if self.authorizer is not None:
            request = GatewayRequest(ch.principal(), ds.listener_name, key, version,
                                     header.client_id, ch.remote_address)
            if not self.authorizer.authorize(request):
                self._refuse(ds, slot, header, payload, off, request)
                return True
        if self.request_authorizer is not None:
            payload = self._authorize_request(ch, ds, slot, header, payload, off)
            if payload is None:
                return True       # answered, refused or closed by the ACL check
        expect = True
        timeout_ms = None
        # per-client: forwarded as it is (the client's own correlation id
        # too, its connection being the client's alone); shared: the copy
        # the changes below and the upstream correlation id are written to
        frame = payload if self.per_client else bytearray(payload)
        try:
            api = messages.API.get(key) if not self.per_client else None
            if api is not None and api.min_version <= version <= api.max_version:
                # A request the upstream cannot parse makes it close the
                # connection: a shared one must not carry it (checked for
                # the APIs kchannel has a codec for).
                api.request.decode(payload, version, off)
            if key == _PRODUCE:
                # _acks_offset and _int, inlined (every Produce): v9+ with
                # a one-byte compact transactional_id length is the usual
                b = payload[off]
                pos = (off + (b or 1) if version >= 9 and b < 0x80
                       else _acks_offset(payload, off, version))
                size = len(payload)
                if pos + 2 > size:
                    raise IndexError("request truncated")
                expect = payload[pos] != 0 or payload[pos + 1] != 0
                if not expect and not self.per_client:
                    # A broker closes the connection of an acks=0 Produce
                    # that fails: on a shared one it is sent as acks=1 and
                    # only its own client is closed if it failed.
                    frame[pos:pos + 2] = (1).to_bytes(2, "big")
                    expect = slot.silent = True
                # _waits_ms's Produce timeout_ms, read where acks was found
                if pos + 6 > size:
                    raise IndexError("request truncated")
                wait = int.from_bytes(payload[pos + 2:pos + 6], "big", signed=True)
                if wait < 0:
                    wait = 0
            else:
                if key == _FETCH and not self.per_client:
                    pos = _fetch_max_wait_offset(version, off)
                    if _int(payload, pos, 4) > self.shared_fetch_max_wait_ms:
                        frame[pos:pos + 4] = self.shared_fetch_max_wait_ms.to_bytes(4, "big")
                wait = _waits_ms(key, version, frame, off) if key in _WAITING else 0
            if wait:
                # Kafka's consumer: JoinGroup gets rebalance timeout + 5 s.
                timeout_ms = max(self.request_timeout_ms, wait + JOIN_GROUP_TIMEOUT_LAPSE_MS) \
                    if key == int(ApiKey.JOIN_GROUP) else self.request_timeout_ms + wait
        except IndexError:
            pass     # a malformed request on its own connection: the upstream says so
        except Exception as exc:  # noqa: BLE001 - whatever the codec raises on bad bytes
            log.info("Closing connection %s from %s: invalid %s v%d request: %s", cid,
                     ch.socket_description(), API_NAMES.get(key, str(key)), version, exc)
            self._fail_downstream(ds, errors.InvalidRequestError(str(exc)))
            return True
        slot.timeout_ms = timeout_ms
        if expect:
            if not slot.silent:
                ds.queue.append(slot)
            slot.req_bytes = len(frame)
            ds.req_bytes += slot.req_bytes
        else:
            # acks=0: counted until written upstream (see _check_draining)
            ds.unacked_bytes += len(frame)
            self._draining.add(ds)
        self.queued_bytes += len(frame)
        if self.per_client:
            uid = ds.uid or self._route(ds.node, ds.cid)
            up = self.ups.get(uid)
            if up is None:
                up = self._open_upstream(ds, uid)
                if up is None:
                    return True
            try:
                # queued on the channel even while it connects: written
                # once it is ready, behind the gateway's ApiVersions
                self.client.selector.send(uid, frame)
            except errors.KChannelError as exc:
                self._fail_downstream(ds, exc)
                return True
            if expect:
                up.in_flight.append(slot)
                self._up_in_flight += 1
            if (ds.muted or len(ds.queue) >= self.max_queued_requests or self._total_over
                    or ds.req_bytes + ds.held_bytes + ds.out_bytes + ds.unacked_bytes
                    >= self.max_queued_bytes
                    or self.queued_bytes >= self.total_max_queued_bytes):
                self._update_flow(ds)
            return True
        uid = self._route(ds.node)
        client = self.client
        if client.is_ready(uid):
            # _send, inlined (once per forwarded request)
            try:
                corr = client.send_raw(uid, frame, expect, timeout_ms)
            except errors.KChannelError as exc:
                self._fail_downstream(ds, exc)
                return True
            if expect:
                self.in_flight[(uid, corr)] = (ds, slot)
            if ds.up_muted and type(uid) is tuple:
                client.selector.mute(uid)
        elif self._login_error is not None:
            self._login_refused(ds, uid)
            return True
        else:
            self.waiting.setdefault(uid, collections.deque()).append((ds, slot, frame, expect))
            self._ensure_connecting(uid)
        # _update_flow(ds) when a bound may be reached (it never is for a
        # client with few requests and bytes in the gateway: the usual case)
        if (ds.muted or len(ds.queue) >= self.max_queued_requests or self._total_over
                or ds.req_bytes + ds.held_bytes + ds.out_bytes + ds.unacked_bytes
                >= self.max_queued_bytes
                or self.queued_bytes >= self.total_max_queued_bytes):
            self._update_flow(ds)
        return True

    def after_poll(self):
        """Upstream I/O after the server's: send what waited for a
        connection, hand responses back to their clients."""
        usel = self.client.selector
        if self._probing:
            self._probe()
        for _ in range(2):
            self._drain_waiting(self._waiting_now())
            responses = self.client.poll(0)
            probe = self._probe_corr
            for resp in responses:
                if probe is not None and (resp.node_id, resp.correlation_id) == probe:
                    probe = None
                    self._probe_response(resp)
                    continue
                self._on_response(resp)
            if self.ups:
                # the clients' own connections: not NetworkClient nodes
                # (it skips them), their results read off the selector
                if usel.completed_receives:
                    self._up_receives(usel.completed_receives)
                if usel.newly_ready:
                    self._up_ready(usel.newly_ready)
            if self.per_client and usel.disconnected:
                self._own_upstream_closed(usel.disconnected)
            self._drain_waiting(self._waiting_changed())
            if not self.client.has_pending_io():
                break
        if self._up_in_flight:
            now = self.time()
            if now >= self._next_up_timeout_scan:
                self._next_up_timeout_scan = now + TIMER_MS
                self._expire_up_requests(now)
        self._check_draining()
        if self._times:
            self._record_times()

    def _waiting_now(self):
        """The upstream connections with requests waiting to look at now:
        all of them every TIMER_MS (request timeouts, reconnect back-off,
        setup timeouts), else none (see _waiting_changed)."""
        if not self.waiting:
            return ()
        now = self.time()
        if now < self._next_waiting_scan:
            return ()
        self._next_waiting_scan = now + TIMER_MS
        return list(self.waiting)

    def _waiting_changed(self):
        """The upstream connections with requests waiting whose state the
        last upstream poll may have changed: a connection becomes ready on
        a response (ApiVersions, SASL) or on its connection/authentication
        completing, and fails as a disconnection; anything else is looked at
        by _waiting_now's periodic pass.  (Looking at every waiting
        connection after each poll was O(connections being set up) per
        poll: with hundreds of clients arriving at once, most of the
        gateway's time.)"""
        waiting = self.waiting
        if not waiting:
            return ()
        sel = self.client.selector
        changed = {nid for nid, _ in sel.completed_receives if nid in waiting}
        for ids in (sel.disconnected, sel.connected, sel.newly_ready):
            for nid in ids:
                if nid in waiting:
                    changed.add(nid)
        return changed

    def _own_upstream_closed(self, disconnected):
        """A client's own upstream connection closed by the broker (an
        acks=0 Produce that failed, a request it could not parse, its idle
        timeout): the client's connection is closed too, as the broker
        would have closed it, and no one else is affected."""
        for uid, state in list(disconnected.items()):
            if not isinstance(uid, tuple):
                continue
            up = self.ups.pop(uid, None)
            if up is not None:
                self._up_in_flight -= len(up.in_flight)
                up.in_flight.clear()
            ds = self.downstreams.get(uid[1])
            if ds is None or uid not in ds.uids:
                continue
            if up is not None and not up.ready:
                host, port = self._address(uid)
                exc = state.exception or errors.ChannelConnectionError(
                    f"Connection to upstream node {uid[0]} ({host}:{port}) failed "
                    f"({state.name})")
                if state == State.AUTHENTICATION_FAILED:
                    # the gateway's credentials: one ERROR per streak
                    self._login_failed(uid, exc)
                    self._login_refused(ds, uid)
                    continue
                log.warning("Upstream connection %s (%s:%s) failed: %s", uid, host, port, exc)
                self._fail_downstream(ds, exc)
                continue
            self._fail_downstream(ds, errors.ChannelConnectionError(
                f"its upstream connection to node {uid[0]} was closed by the broker"))

    # -------------------------------------------- per-client upstream connections
    def _open_upstream(self, ds, uid):
        """Start ``ds``'s own upstream connection ``uid`` with the gateway's
        ApiVersions queued first (as Kafka's clients open a connection);
        None (the client failed) when it cannot be started."""
        if self._login_error is not None:
            self._login_refused(ds, uid)
            return None
        usel = self.client.selector
        host, port = self._address(uid)
        try:
            usel.connect(uid, (host, port))
        except errors.KChannelError as exc:
            log.warning("Cannot connect to upstream node %s (%s:%s): %s", uid[0], host, port,
                        exc)
            if self._is_bootstrap(uid):
                self._next_bootstrap()
            self._fail_downstream(ds, exc)
            return None
        # the TCP connection, TLS handshake and SASL authentication within
        # socket.connection.setup.timeout.ms (reported as a disconnection)
        usel.set_setup_deadline(uid, self.time() + self.client.connection_setup_timeout_for(uid))
        up = self.ups[uid] = _Up(uid, ds)
        if uid not in ds.uids:
            ds.uids = ds.uids + (uid,)
        frame = self._api_versions_frame
        if frame is None:
            frame = self._api_versions_frame = self._encode_api_versions()
        usel.send(uid, frame, True)
        up.in_flight.append(None)
        self._up_in_flight += 1
        return up

    def _encode_api_versions(self):
        """The ApiVersions request opening each per-client upstream
        connection (the upstream learns the client software, as from any
        Kafka client), at the highest version both sides have."""
        key = int(ApiKey.API_VERSIONS)
        version = messages.API_VERSIONS.max_version
        if self.upstream_versions and key in self.upstream_versions:
            version = min(version, self.upstream_versions[key][1])
        encode = request_encoder(key, version, self.client.client_id, framed=True)
        return encode(0, {"client_software_name": CLIENT_SOFTWARE_NAME,
                          "client_software_version": __version__})

    def _up_ready(self, newly_ready):
        for uid in newly_ready:
            up = self.ups.get(uid)
            if up is None:
                continue
            up.ready = True
            if up.ds.up_muted:
                self.client.selector.mute(uid)    # held back before it was ready

    def _up_receives(self, receives):
        """Responses on the clients' own upstream connections, each
        handed to its client in the order of the requests."""
        ups = self.ups
        now = self.client.selector.poll_time_ms
        for uid, frame in receives:
            if type(uid) is not tuple:
                continue
            up = ups.get(uid)
            if up is None:
                continue
            ds = up.ds
            q = up.in_flight
            if not q:
                self._up_protocol_failure(up, "a response with no request in flight")
                continue
            slot = q.popleft()
            self._up_in_flight -= 1
            if slot is None:
                # the gateway's ApiVersions: its error code (bytes 4-6 of
                # a v0 response header's frame) is all that matters
                if len(frame) < 6 or frame[4] or frame[5]:
                    self._up_protocol_failure(up, "its ApiVersions request failed")
                continue
            if ds.closed:
                continue
            corr = slot.corr.to_bytes(4, "big", signed=True)
            if frame[0:4] != corr:
                self._up_protocol_failure(
                    up, f"a response with correlation id "
                        f"{int.from_bytes(frame[0:4], 'big', signed=True)}, not {slot.corr}")
                continue
            ds.req_bytes -= slot.req_bytes
            self.queued_bytes -= slot.req_bytes
            slot.req_bytes = 0
            self._deliver(ds, slot, frame, now)

    def _up_protocol_failure(self, up, what):
        log.warning("Closing upstream connection %s: %s", up.uid, what)
        self._fail_downstream(up.ds, errors.InvalidRequestError(
            f"its upstream connection to node {up.uid[0]} returned {what}"))

    def _expire_up_requests(self, now):
        """Kafka's request timeout on the clients' own upstream
        connections: a connection whose oldest request waited too long is
        closed, and its client with it."""
        for up in list(self.ups.values()):
            q = up.in_flight
            if not q:
                continue
            slot = q[0]
            if slot is None:
                if len(q) == 1:
                    continue    # nothing of the client's waits on it
                slot = q[1]
            timeout = slot.timeout_ms if slot.timeout_ms is not None else self.request_timeout_ms
            if now - slot.start > timeout:
                log.info("Disconnecting from upstream node %s due to request timeout.", up.uid)
                self._fail_downstream(up.ds, RequestTimeoutError(
                    f"Request {slot.corr} to upstream node {up.uid[0]} timed out after "
                    f"{timeout} ms"))

    def _check_draining(self):
        """Bytes handed to a client's socket (or, acks=0, to its upstream
        connection) stop counting once everything queued there is written."""
        if not self._draining:
            return
        sel, usel = self.server.selector, self.client.selector
        for ds in list(self._draining):
            if ds.closed:
                self._draining.discard(ds)
                continue
            freed = 0
            if ds.out_bytes:
                ch = sel.channel(ds.cid)
                if ch is None or not ch.has_pending_writes():
                    freed += ds.out_bytes
                    ds.out_bytes = 0
            if ds.unacked_bytes:
                pending = False
                for uid in ds.uids or (self._route(ds.node),):
                    uch = usel.channel(uid)
                    if uch is not None and uch.has_pending_writes():
                        pending = True
                        break
                if not pending:
                    freed += ds.unacked_bytes
                    ds.unacked_bytes = 0
            if not ds.out_bytes and not ds.unacked_bytes:
                self._draining.discard(ds)
            if freed:
                self.queued_bytes -= freed
                self._update_flow(ds)

    # --------------------------------------------------------------- routing
    def _route(self, node, cid=None):
        """Upstream connection id for a client of ``node``'s port (None: the
        bootstrap port, served by any ready upstream connection); with
        per-client connections, ``(node, client connection id)``."""
        if cid is not None:
            if node is None:
                node = min(self.nodes) if self.nodes else BOOTSTRAP_NODE
            return (node, cid)
        if node is not None:
            return node
        client = self.client
        for uid in sorted(self.nodes):
            if client.is_ready(uid):
                return uid
        if client.is_ready(BOOTSTRAP_NODE):
            return BOOTSTRAP_NODE
        # none ready: one being set up, else one that may connect now
        for uid in sorted(self.nodes) + [BOOTSTRAP_NODE]:
            if not client.connection_state(uid).is_disconnected():
                return uid
        for uid in sorted(self.nodes):
            if client.can_connect(uid):
                return uid
        return BOOTSTRAP_NODE

    def upstream_addresses(self):
        """(host, port) of the upstream's bootstrap servers and nodes."""
        return list(self.bootstrap) + list(self.nodes.values())

    def _address(self, uid):
        node = uid[0] if isinstance(uid, tuple) else uid
        if node == BOOTSTRAP_NODE or node not in self.nodes:
            return self.bootstrap[self._bootstrap_index % len(self.bootstrap)]
        return self.nodes[node]

    @staticmethod
    def _is_bootstrap(uid):
        return (uid[0] if isinstance(uid, tuple) else uid) == BOOTSTRAP_NODE

    def _next_bootstrap(self):
        self._bootstrap_index = (self._bootstrap_index + 1) % len(self.bootstrap)

    def _ensure_connecting(self, uid):
        client = self.client
        state = client.connection_state(uid)
        if not state.is_disconnected():
            return
        host, port = self._address(uid)
        try:
            started = client.connect(uid, host, port)
        except errors.KChannelError as exc:
            self._fail_waiting(uid, exc)
            if self._is_bootstrap(uid):
                self._next_bootstrap()
            return
        if started:
            self.connecting.add(uid)
        # else in its reconnect backoff: the requests wait for it (at most
        # the upstream request timeout, see _drain_waiting)

    def _drain_waiting(self, uids=None):
        """Send the requests waiting for the upstream connections ``uids``
        (default: all) that are ready now; fail those whose connection
        failed or that waited longer than the request timeout."""
        if not self.waiting:
            return
        client = self.client
        for uid in list(self.waiting) if uids is None else uids:
            if uid not in self.waiting:
                continue
            if client.is_ready(uid):
                self.connecting.discard(uid)
                self._learn_versions(uid)
                queue = self.waiting.pop(uid)
                for ds, slot, frame, expect in queue:
                    if not ds.closed:
                        self._send(uid, ds, slot, frame, expect)
            elif client.connection_state(uid).is_disconnected():
                if uid in self.connecting:
                    self.connecting.discard(uid)
                    auth = client.authentication_exception(uid)
                    exc = (auth or client.connection_exception(uid)
                           or errors.ChannelConnectionError(f"Upstream node {uid} unreachable"))
                    if auth is not None:
                        self._login_failed(uid, auth)     # one ERROR per streak
                    else:
                        log.warning("Upstream connection %s (%s:%s) failed: %s", uid,
                                    *self._address(uid), exc)
                    if self._is_bootstrap(uid):
                        self._next_bootstrap()
                    self._fail_waiting(uid, exc)
                else:
                    queue = self.waiting[uid]
                    if queue and self.time() - queue[0][1].start > self.request_timeout_ms:
                        self._fail_waiting(uid, client.connection_exception(uid) or
                                           errors.ChannelConnectionError(
                                               f"Upstream node {uid} is not reachable"))
                    else:
                        self._ensure_connecting(uid)

    def _fail_waiting(self, uid, exc):
        for ds, slot, frame, expect in self.waiting.pop(uid, ()):
            self._fail_downstream(ds, exc)

    def _send(self, uid, ds, slot, frame, expect):
        try:
            corr = self.client.send_raw(uid, frame, expect_response=expect,
                                        timeout_ms=slot.timeout_ms)
        except errors.KChannelError as exc:
            self._fail_downstream(ds, exc)
            return
        if expect:
            self.in_flight[(uid, corr)] = (ds, slot)
        if ds.up_muted and isinstance(uid, tuple):
            self.client.selector.mute(uid)     # a connection (re)made while held back

    def _learn_versions(self, uid):
        if self.upstream_versions is None:
            versions = self.client.api_versions(uid)
            if versions:
                self.upstream_versions = dict(versions)
                self._ranges_cache = self._offered_cache = None

    def _learn_node(self, nid, host, port):
        if nid is None or nid < 0 or not host or port is None or port < 0:
            return
        self.nodes[int(nid)] = (host, int(port))

    # -------------------------------------------------------------- responses
    def _on_response(self, resp):
        entry = self.in_flight.pop((resp.node_id, resp.correlation_id), None)
        if entry is None:
            return
        ds, slot = entry
        if ds.closed:
            return
        ds.req_bytes -= slot.req_bytes
        self.queued_bytes -= slot.req_bytes
        slot.req_bytes = 0
        if resp.exception is not None:
            self._fail_downstream(ds, resp.exception)
            return
        if slot.silent:
            self._silent_answer(ds, slot, resp.body)
            return
        frame = resp.body
        if slot.fix is None and slot.api_key not in REWRITTEN_API_KEYS:
            frame = frame if type(frame) is bytearray else bytearray(frame)
            frame[0:4] = slot.corr.to_bytes(4, "big", signed=True)
        self._deliver(ds, slot, frame, resp.receive_time_ms)

    def _deliver(self, ds, slot, frame, receive_time_ms):
        """The upstream's response ``frame`` to ``slot`` (its correlation
        id the client's) on its way to the client, in its turn."""
        if slot.fix is None and slot.api_key not in REWRITTEN_API_KEYS:
            # _response_frame's pass-through, inlined (nearly every response)
            out = frame
            q = ds.queue
            if len(q) == 1 and q[0] is slot:
                # _flush of a client's only request (one in flight: the
                # usual case), inlined: written at once when the socket
                # takes it, counted until written otherwise
                q.popleft()
                sel = self.server.selector
                ch = sel.channel(ds.cid)
                held = False
                if ch is not None:
                    sel.send(ds.cid, out)
                    if ch.has_pending_writes():
                        n = len(out)
                        ds.out_bytes += n
                        self.queued_bytes += n
                        self._draining.add(ds)
                        held = True
                    # the response's arrival (the upstream poll's clock,
                    # the server's) is when it was queued for the client;
                    # (_record, inlined)
                    times = self._times.get(slot.api_key)
                    if times is None:
                        times = self._times[slot.api_key] = []
                    times.append(receive_time_ms - slot.start)
                if held or ds.muted or ds.up_muted or self._total_over:
                    self._update_flow(ds)
                return
            slot.response = out
            ds.held_bytes += len(out)
            self.queued_bytes += len(out)
            self._flush(ds)
            return
        try:
            slot.response = self._response_frame(ds, slot, frame)
        except Exception as exc:  # noqa: BLE001 - an undecodable response closes its client
            log.warning("Closing connection %s: cannot rewrite the upstream's %s v%d "
                        "response: %s", ds.cid, API_NAMES.get(slot.api_key), slot.version, exc)
            self._fail_downstream(ds, exc)
            return
        ds.held_bytes += len(slot.response)
        self.queued_bytes += len(slot.response)
        self._flush(ds)

    def _silent_answer(self, ds, slot, frame):
        """The answer to an acks=0 Produce sent as acks=1 (shared mode): an
        error closes its client's connection, as the broker would have
        closed it; nothing goes to the client otherwise."""
        try:
            _, body = decode_response(frame, slot.api_key, slot.version)
            failed = [p.get("error_code") for t in body.get("responses") or ()
                      for p in t.get("partition_responses") or () if p.get("error_code")]
        except Exception as exc:  # noqa: BLE001
            failed = [str(exc)]
        if failed:
            self._fail_downstream(ds, errors.ChannelConnectionError(
                f"its acks=0 Produce failed upstream ({failed[0]}); a broker closes the "
                "connection then"))
        else:
            self._update_flow(ds)

    def _response_frame(self, ds, slot, frame):
        if slot.fix is not None:
            _, body = decode_response(frame, slot.api_key, slot.version)
            slot.fix(body)
            if slot.api_key in REWRITTEN_API_KEYS:
                self._rewrite(ds.listener_name, slot.api_key, slot.version, body)
            return encode_response(slot.api_key, slot.version, slot.corr, body)
        if slot.api_key not in REWRITTEN_API_KEYS:
            out = frame if isinstance(frame, bytearray) else bytearray(frame)
            out[0:4] = slot.corr.to_bytes(4, "big", signed=True)
            return out
        _, body = decode_response(frame, slot.api_key, slot.version)
        self._rewrite(ds.listener_name, slot.api_key, slot.version, body)
        return encode_response(slot.api_key, slot.version, slot.corr, body)

    def _rewrite(self, listener_name, api_key, version, body):
        if api_key == int(ApiKey.METADATA):
            brokers = []
            for b in body.get("brokers") or ():
                self._learn_node(b["node_id"], b["host"], b["port"])
                ep = self._endpoint(listener_name, b["node_id"])
                if ep is not None:
                    brokers.append(dict(b, host=ep[0], port=ep[1]))
            body["brokers"] = brokers
        elif api_key == int(ApiKey.DESCRIBE_CLUSTER):
            brokers = []
            controllers = body.get("endpoint_type", 1) == 2
            for b in body.get("brokers") or ():
                if not controllers:
                    self._learn_node(b["broker_id"], b["host"], b["port"])
                ep = self._endpoint(listener_name, b["broker_id"])
                if ep is not None:
                    brokers.append(dict(b, host=ep[0], port=ep[1]))
            body["brokers"] = brokers
        elif api_key == int(ApiKey.FIND_COORDINATOR):
            entries = body.get("coordinators") if version >= 4 else [body]
            for c in entries or ():
                if c.get("error_code", 0) != 0 or c.get("node_id", -1) < 0:
                    continue
                self._learn_node(c["node_id"], c["host"], c["port"])
                ep = self._endpoint(listener_name, c["node_id"])
                if ep is None:
                    c.update(node_id=-1, host="", port=-1,
                             error_code=int(Errors.COORDINATOR_NOT_AVAILABLE))
                else:
                    c.update(host=ep[0], port=ep[1])

    def _node_port_collision(self, nids):
        """Why the ports of upstream nodes ``nids`` cannot be bound (a
        message naming the listeners), or None.  A node port equal to
        another listener's port, or to another node port, is refused: with
        SO_REUSEPORT (num.network.threads > 1) it would be bound anyway and
        share that listener's connections, whatever its security."""
        taken = {}       # port -> (host, what)
        for l in self.server.listeners:
            if l.upstream_node is None and l.port:
                taken[l.port] = (l.host, f"listener {l.name}")
        for key, l in self.node_listeners.items():
            if l.port:
                taken[l.port] = (l.host, f"the port of upstream node {key[1]} on listener {key[0]}")
        wildcard = ("", "0.0.0.0", "::")
        for l in self.server.listeners:
            if l.upstream_node is not None or not l.port:
                continue
            for nid in nids:
                if (l.name, nid) in self.node_listeners:
                    continue
                port = l.port + 1 + int(nid) - self.node_id_base
                other = taken.get(port)
                if other is not None and (other[0] == l.host or other[0] in wildcard
                                          or l.host in wildcard):
                    return (f"upstream node {nid} would be served on listener {l.name}'s port + "
                            f"{port - l.port} = {port}, which is {other[1]}'s: leave room "
                            "between listener ports for every upstream node (node port = "
                            "listener port + 1 + node id - kchannel.gateway.node.id.base)")
                taken[port] = (l.host, f"the port of upstream node {nid} on listener {l.name}")
        return None

    def _endpoint(self, listener_name, nid):
        """(host, port) clients use for upstream node ``nid`` on
        ``listener_name``, binding its port on first use; None (logged) when
        it cannot be bound."""
        server = self.server
        parent = server.listener(listener_name)
        key = (parent.name, nid)
        l = self.node_listeners.get(key)
        offset = 1 + int(nid) - self.node_id_base
        if l is None:
            if offset < 1 or (parent.port and parent.port + offset > 65535):
                log.error("Upstream node %s has no port on listener %s: node ids start at "
                          "kchannel.gateway.node.id.base=%d and ports at %d", nid, parent.name,
                          self.node_id_base, parent.port + 1)
                return None
            port = parent.port + offset if parent.port else 0
            problem = self._node_port_collision([nid]) if port else None
            if problem:
                log.error("Not serving upstream node %s on listener %s: %s", nid, parent.name,
                          problem)
                return None
            try:
                l = server.add_node_listener(parent.name, int(nid), port)
            except errors.KChannelError as exc:
                log.error("Cannot bind the port of upstream node %s on listener %s: %s",
                          nid, parent.name, exc)
                return None
            self.node_listeners[key] = l
        host, adv_port = server.advertised_endpoint(parent.name)
        port = adv_port + offset if parent.port else l.bound_port
        return host, port

    # -------------------------------------------------------------- clients
    def _flush(self, ds):
        sel = self.server.selector
        q = ds.queue
        while q and not ds.closed:
            slot = q[0]
            if slot.local is not None:
                q.popleft()
                self.server._process_request(ds.cid, slot.local, local=True)
                continue
            if slot.response is None:
                break
            q.popleft()
            ch = sel.channel(ds.cid)
            if ch is None:
                break
            n = len(slot.response)
            sel.send(ds.cid, slot.response)
            slot.response = b""
            ds.held_bytes -= n
            if ch.has_pending_writes():
                ds.out_bytes += n
                self._draining.add(ds)
            else:
                # written at once (the usual case): nothing left to count
                self.queued_bytes -= n
            self._record(slot)
        self._update_flow(ds)

    def _update_total(self):
        over = self.queued_bytes >= self.total_max_queued_bytes
        if over != self._total_over:
            self._total_over = over
            if over:
                log.warning("Gateway clients hold %d bytes (kchannel.gateway.total.max.queued."
                            "bytes=%d): no client is read until their responses are written",
                            self.queued_bytes, self.total_max_queued_bytes)
            for other in list(self.downstreams.values()):
                self._update_flow(other, False)

    def _update_flow(self, ds, total=True):
        """Read a client (and, per-client mode, its upstream connections)
        only while it holds less than its bounds: fewer than
        max.queued.requests requests waiting, fewer than max.queued.bytes
        bytes; no client is read while all of them together hold
        total.max.queued.bytes.  Its upstream connections are not read
        while its responses waiting to be written reach the bound (or any,
        over the total): the broker then waits on that one connection, as
        it waits on a client that does not read."""
        if total and (self.queued_bytes >= self.total_max_queued_bytes) != self._total_over:
            self._update_total()
        if ds.closed:
            return
        own = ds.req_bytes + ds.held_bytes + ds.out_bytes + ds.unacked_bytes
        over_total = self._total_over
        mute = (len(ds.queue) >= self.max_queued_requests or own >= self.max_queued_bytes
                or over_total)
        sel = self.server.selector
        if mute != ds.muted and sel.channel(ds.cid) is not None:
            ds.muted = mute
            if mute:
                sel.mute(ds.cid)
            else:
                sel.unmute(ds.cid)
        if self.per_client:
            out = ds.held_bytes + ds.out_bytes
            up_mute = out >= self.max_queued_bytes or (over_total and out > 0)
            if up_mute != ds.up_muted:
                ds.up_muted = up_mute
                usel = self.client.selector
                for uid in ds.uids:
                    # (one not ready yet is muted once it is: _up_ready)
                    if usel.is_channel_ready(uid):
                        if up_mute:
                            usel.mute(uid)
                        else:
                            usel.unmute(uid)

    def _fail_downstream(self, ds, exc):
        """Disconnect a client whose request cannot be answered: what its
        library retries on (responses completed before it go out first)."""
        if ds.closed:
            return
        self._flush(ds)
        if ds.closed:
            return
        log.info("Disconnecting %s: %s", ds.cid, exc)
        sel = self.server.selector
        if sel.channel(ds.cid) is not None:
            sel.write_queued(ds.cid)
            sel.close(ds.cid)
        self._forget(ds)

    def _authorize_request(self, ch, ds, slot, header, payload, off):
        """The authorization hook (``authorizer.class.name``): the frame to
        forward (``payload``, or one narrowed to the authorized resources),
        or None when the request was answered here or its connection
        closed."""
        key, version = slot.api_key, slot.version
        principal = ch.principal()
        addr = ch.remote_address
        host = str(addr[0]) if isinstance(addr, (tuple, list)) and addr else str(addr or "")
        try:
            verdict = self.request_authorizer.check(str(principal), host, key, version,
                                                    payload, off)
        except (errors.KChannelError, KeyError, IndexError, TypeError, ValueError) as exc:
            log.info("Closing connection %s from %s: invalid %s v%d request: %s", ds.cid,
                     ch.socket_description(), API_NAMES.get(key, key), version, exc)
            self._fail_downstream(ds, errors.InvalidRequestError(str(exc)))
            return None
        if verdict is None:
            return payload
        if verdict.close:
            log.info("Closing connection %s of %s: %s %s", ds.cid, principal,
                     API_NAMES.get(key, key), verdict.close)
            self._fail_downstream(ds, errors.KafkaError(
                int(Errors.TOPIC_AUTHORIZATION_FAILED), "AUTHORIZATION_FAILED", verdict.close))
            return None
        if verdict.response is not None:
            log.debug("Answering %s v%d of %s from the ACLs", API_NAMES.get(key, key),
                      version, principal)
            slot.response = encode_response(key, version, slot.corr, verdict.response)
            ds.held_bytes += len(slot.response)
            self.queued_bytes += len(slot.response)
            ds.queue.append(slot)
            self._flush(ds)
            return None
        slot.fix = verdict.fix
        if verdict.request is not None:
            body = messages.API[key].request.encode(verdict.request, version)
            return bytes(payload[:off]) + bytes(body)
        return payload

    def _refuse(self, ds, slot, header, payload, off, request):
        key, version = slot.api_key, slot.version
        log.info("Refusing %s v%d of %s on %s (client %s)", request.api_name, version,
                 request.principal, request.listener_name, ds.cid)
        body = None
        api = messages.API.get(key)
        try:
            if key == int(ApiKey.METADATA):
                req = api.request.decode(payload, version, off)
                body = {"brokers": [], "cluster_id": None, "controller_id": -1,
                        "topics": [_drop_none({"error_code": int(Errors.TOPIC_AUTHORIZATION_FAILED),
                                               "name": t.get("name"), "topic_id": t.get("topic_id"),
                                               "is_internal": False, "partitions": []})
                                   for t in req.get("topics") or ()]}
            elif key == int(ApiKey.PRODUCE):
                req = api.request.decode(payload, version, off)
                if req.get("acks") == 0:
                    return
                body = {"responses": [
                    _drop_none({"name": t.get("name"), "topic_id": t.get("topic_id"),
                     "partition_responses": [
                         {"index": p.get("index"),
                          "error_code": int(Errors.TOPIC_AUTHORIZATION_FAILED)}
                         for p in t.get("partition_data") or ()]})
                    for t in req.get("topic_data") or ()]}
            elif api is not None and _has_top_level_field(api.response, "error_code", version):
                body = {"error_code": int(Errors.CLUSTER_AUTHORIZATION_FAILED)}
        except errors.KChannelError as exc:
            log.info("Closing connection %s: invalid %s request: %s", ds.cid,
                     request.api_name, exc)
            body = None
        if body is None:
            self._fail_downstream(ds, errors.KafkaError(
                int(Errors.CLUSTER_AUTHORIZATION_FAILED), "CLUSTER_AUTHORIZATION_FAILED",
                f"{request.principal} may not use {request.api_name} on listener "
                f"{request.listener_name}"))
            return
        slot.response = encode_response(key, version, slot.corr, body)
        ds.held_bytes += len(slot.response)
        self.queued_bytes += len(slot.response)
        ds.queue.append(slot)
        self._flush(ds)

    # -------------------------------------------------------------- metrics
    def _record(self, slot, now=None):
        """Counts ``slot``'s time from request to response (``now``, default
        the current time): recorded by the end of this poll (_record_times)."""
        if now is None:
            now = self.time()
        times = self._times.get(slot.api_key)
        if times is None:
            times = self._times[slot.api_key] = []
        times.append(now - slot.start)

    def _record_times(self):
        """Records the request times counted since the last poll: per API
        key one record_many per stat instead of a sensor record per
        request (a poll forwards tens of responses under load)."""
        times, self._times = self._times, {}
        now = self.time()
        for key, values in times.items():
            self._sensor(key).record_many(values, now)

    def _sensor(self, key):
        sensor = self._sensors.get(key)
        if sensor is None:
            metrics = self.server.metrics
            name = API_NAMES.get(key, str(key))
            tags = {"request": name}
            sensor = metrics.sensor(f"gateway-request:{name}")
            total = Avg(metrics.config)
            # the requests per second are the count of TotalTimeMs's
            # samples: measured from them, one stat less to record
            sensor.add_view(MetricName.of("RequestsPerSec", "RequestMetrics",
                                          "Requests forwarded per second", tags),
                            Rate.view_of(total, count=True))
            sensor.add(MetricName.of("TotalTimeMs", "RequestMetrics",
                                     "Average time from request to response (ms)", tags),
                       total)
            sensor.add(MetricName.of("TotalTimeMs-max", "RequestMetrics",
                                     "Longest time from request to response (ms)", tags),
                       Max(metrics.config))
            self._sensors[key] = sensor
        return sensor


def upstream_configs(props):
    """The ``kchannel.upstream.`` properties without their prefix."""
    n = len(UPSTREAM_PREFIX)
    return {k[n:]: v for k, v in props.items()
            if isinstance(k, str) and k.startswith(UPSTREAM_PREFIX) and len(k) > n}


def install_gateway(server, config, props, acl_authorizer=None):
    """A started :class:`Gateway` for ``server`` when the properties set
    ``kchannel.upstream.bootstrap.servers``, else None.  ``acl_authorizer``
    (``authorizer.class.name``): every forwarded request is checked against
    its ACLs, per resource."""
    up = upstream_configs(props)
    if not str(up.get("bootstrap.servers") or "").strip():
        return None

    def value(key, default):
        v = config.get(key) if config is not None else None
        return default if v is None else v

    allowed = {}
    for l in server.listeners:
        text = None
        if config is not None:
            text = config.listener_configs(l.name).get("kchannel.gateway.allowed.principals")
        if text is None:
            text = props.get(f"listener.name.{l.name.lower()}.kchannel.gateway.allowed.principals",
                             props.get("kchannel.gateway.allowed.principals"))
        if isinstance(text, str):
            text = [t for t in text.split(",") if t.strip()]
        if text:
            allowed[l.name] = text
    authorizer = None
    cls = value("kchannel.gateway.authorizer.class", None)
    if cls:
        klass = resolve_class(cls) if isinstance(cls, str) else cls
        authorizer = klass()
        if hasattr(authorizer, "configure"):
            authorizer.configure(dict(props))
    elif allowed:
        authorizer = AllowListAuthorizer(allowed)
    gateway = Gateway(server, up,
                      node_id_base=int(value("kchannel.gateway.node.id.base", 0)),
                      max_queued_requests=int(value("kchannel.gateway.max.queued.requests",
                                                    DEFAULT_MAX_QUEUED)),
                      authorizer=authorizer,
                      upstream_connections=value("kchannel.gateway.upstream.connections",
                                                 "per-client"),
                      request_authorizer=(RequestAuthorizer(acl_authorizer)
                                          if acl_authorizer is not None else None),
                      max_queued_bytes=int(value("kchannel.gateway.max.queued.bytes",
                                                 DEFAULT_MAX_QUEUED_BYTES)),
                      total_max_queued_bytes=int(value(
                          "kchannel.gateway.total.max.queued.bytes",
                          DEFAULT_TOTAL_MAX_QUEUED_BYTES)),
                      shared_fetch_max_wait_ms=int(value(
                          "kchannel.gateway.shared.fetch.max.wait.ms",
                          DEFAULT_SHARED_FETCH_MAX_WAIT_MS)))
    try:
        gateway.start()
    except BaseException:
        gateway.close()      # (its log filter and upstream client go with it)
        raise
    return gateway
