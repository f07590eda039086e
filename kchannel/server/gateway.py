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

Modules: :class:`Gateway` is here, with its parts in ``gateway_types``
(constants, per-client and per-request state, request fields read without
decoding), ``gateway_login`` (start-up, upstream login), ``gateway_upstreams``
(per-client upstream connections), ``gateway_routing`` (the shared
client's upstream connections: routing, connecting, requests waiting),
``gateway_responses`` (responses back to clients in order, flow control,
request metrics), ``gateway_endpoints`` (node ports in responses) and
``gateway_authz`` (authorization).
"""
import collections

from .. import errors
from ..client.network_client import NetworkClient, _parse_bootstrap
from ..config.definitions import resolve_class
from ..log import get_logger
from ..network.channel import State
from ..protocol import messages
from ..protocol.api_keys import API_NAMES, API_VALID_VERSIONS, ApiKey
from ..protocol.errors import Errors
from ..protocol.headers import encode_response
from ..security.authorizer.requests import RequestAuthorizer
from .gateway_types import (_acks_offset, AllowListAuthorizer, DEFAULT_MAX_QUEUED,
                            DEFAULT_MAX_QUEUED_BYTES, DEFAULT_SHARED_FETCH_MAX_WAIT_MS,
                            DEFAULT_TOTAL_MAX_QUEUED_BYTES, _Downstream, _Fd, _FETCH,
                            _fetch_max_wait_offset, GatewayRequest, _int,
                            JOIN_GROUP_TIMEOUT_LAPSE_MS, KAFKA_BROKER_API_KEYS, LOCAL_API_KEYS,
                            NOT_FORWARDED, _PRODUCE, REWRITTEN_API_KEYS, _Slot, TIMER_MS,
                            TOKEN_API_KEYS, UPSTREAM_PREFIX, _UpstreamLoginLogFilter,
                            VERSION_CAPS, _WAITING, _waits_ms)
from .gateway_authz import _Authorization
from .gateway_endpoints import _Endpoints
from .gateway_login import _UpstreamLogin
from .gateway_responses import _Responses
from .gateway_routing import _Routing
from .gateway_upstreams import _OwnUpstreams

log = get_logger("kchannel.gateway")

# (int(ApiKey.JOIN_GROUP) was read per forwarded Produce: an enum lookup and a call)
_JOIN_GROUP = int(ApiKey.JOIN_GROUP)

__all__ = ["Gateway", "GatewayRequest", "AllowListAuthorizer", "UPSTREAM_PREFIX",
           "LOCAL_API_KEYS", "install_gateway"]


class Gateway(_UpstreamLogin, _OwnUpstreams, _Endpoints, _Authorization, _Routing,
              _Responses):
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
        # its ACL store's change counter, read per request by the
        # per-connection cache of decisions (see _authorize_request); None:
        # no request authorizer, nothing cached
        self._acl_version = (request_authorizer.acl_version
                             if request_authorizer is not None else None)
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
                    if key == _JOIN_GROUP else self.request_timeout_ms + wait
        except IndexError:
            pass     # a malformed request on its own connection: the upstream says so
        except Exception as exc:  # noqa: BLE001 - whatever the codec raises on bad bytes
            log.info("Closing connection %s from %s: invalid %s v%d request: %s", cid,
                     ch.socket_description(), API_NAMES.get(key, str(key)), version, exc)
            self._fail_downstream(ds, errors.InvalidRequestError(str(exc)))
            return True
        slot.timeout_ms = timeout_ms
        n = len(frame)
        if expect:
            if not slot.silent:
                ds.queue.append(slot)
            slot.req_bytes = n
            ds.req_bytes += n
        else:
            # acks=0: counted until written upstream (see _check_draining)
            ds.unacked_bytes += n
            self._draining.add(ds)
        self.queued_bytes += n
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
