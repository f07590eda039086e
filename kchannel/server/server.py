"""A single-threaded Kafka-protocol server (Kafka's SocketServer + a tiny API layer).

:class:`Server` binds one or more listeners (KIP-103 named listeners, each with
its security protocol and its own configs), accepts connections, runs each
through TLS and authentication (``KafkaChannel.prepare`` in the
:class:`~kchannel.network.selector.Selector`), parses each request header and
dispatches the request to the handler registered for its API key.

Built-in handlers: ApiVersions (every registered API's range; an ApiVersions
request of an unknown version gets Kafka's v0 UNSUPPORTED_VERSION fallback and
the connection stays usable), Metadata and DescribeCluster (this node and
any peers from ``kchannel.cluster.nodes``, each at its endpoint for the
listener the request came in on; nodes without that listener are left out;
no topics).  A request for an
API key without a handler, or a version outside the handler's range, closes
the connection, as a Kafka broker does.

Quick start::

    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    server.register_handler(ApiKey.FIND_COORDINATOR, my_fn)
    server.start()                       # background thread
    port = server.bound_port("PLAINTEXT")
    ...
    server.shutdown()

Connections are limited as Kafka's ConnectionQuotas limits them
(``max.connections``, ``max.connections.per.ip`` and its overrides,
``max.connection.creation.rate``, broker-wide and per listener), and
optionally by ``kchannel.connection.setup.timeout.ms``.  When accept() runs
out of file descriptors, every listener pauses for a back-off instead of
retrying at once.

A :class:`kchannel.gateway.Gateway` (``kchannel serve`` with
``kchannel.upstream.bootstrap.servers``) sets ``server.gateway``: it then
takes every authenticated request first (``intercept``), adds the upstream's
APIs to ApiVersions (``api_ranges``) and polls its upstream connections after
each poll; ``add_node_listener`` binds its per-node ports.

``Server(config)`` also takes a ``kchannel.config.ServerConfig`` or a dict of
server properties (``listeners``, ``advertised.listeners``,
``listener.security.protocol.map``, ``listener.name.<l>.<key>`` ...).
``Server.from_properties(props)`` is the whole broker ``kchannel serve`` runs
(SCRAM, delegation token and ACL APIs with their stores, the gateway), built
by :func:`kchannel.server.broker.assemble`; its ``shutdown()`` also
closes those stores.
"""
import socket
import threading

from .. import errors
from .broker import assemble
from .cluster import register_cluster_handlers
from .handlers import (
    SASL_API_KEYS,
    Handler,
    HandlerRegistry,
    RequestContext,
    handle_api_versions,
    handle_metadata,
    handle_sasl_after_authentication,
    random_cluster_id,
)
from ..metrics import Metrics
from ..network.authenticator import Authenticator
from ..network.channel_state import ChannelMuteState
from ..network.selector import Selector
from ..protocol import messages
from ..protocol.api_versions import api_versions_fallback
from ..protocol.api_keys import REQUEST_FLEXIBLE_FROM
from ..protocol.headers import RequestHeader, response_encoder
from ..protocol.wire import parse_request_header as _parse_request_header
from ..security.channel_builders import create_channel_builder
from ..utils import now_ms
from ..log import get_logger
from .server_accept import ACCEPT_BACKOFF_MS, _ConnectionAdmission
from .server_listeners import Listener, _cfg_get, _server_config

log = get_logger("kchannel.server")

__all__ = ["Server", "Listener"]

_SASL_HANDSHAKE = messages.SASL_HANDSHAKE.api_key
_API_VERSIONS = messages.API_VERSIONS.api_key
_NOT_MUTED = ChannelMuteState.NOT_MUTED
# An authenticator class that keeps this base hook never expires a session
# (see _process_request).
_NO_SESSION_EXPIRY = Authenticator.server_session_expiration_ms

# Requests handed over per connection per poll (Selector.max_receives_per_channel).
MAX_RECEIVES_PER_CHANNEL = 64


class Server(_ConnectionAdmission):
    """Kafka-protocol server.  See the module docstring.

    A server is always built from a ``ServerConfig``: ``config`` is one, or a
    dict of server properties it is built from; the keyword arguments
    stand for properties (named below) and win over ``config``, and the
    result is validated as a whole, so a listener written either way is
    parsed by the one listener parser (``kchannel.config.listeners``) and
    fails with Kafka's ``ConfigError`` messages.  Without ``config`` only
    what the keywords write is checked: key stores and JAAS given through
    ``listener_configs``/``jaas`` are checked by the channel builders.

    Parameters (all optional):

    * ``config``: ``kchannel.config.ServerConfig``, or a dict of server
      properties.
    * ``listeners`` (``listeners``; default ``PLAINTEXT://127.0.0.1:0``
      without ``config``): Kafka's comma-separated text, or a list of
      ``"NAME://host:port"`` strings, :class:`Listener` objects, dicts (name,
      host, port, security_protocol, configs) or ``(name, host, port[,
      protocol[, configs]])`` tuples; the protocols of the latter forms are
      added to ``listener.security.protocol.map``.
    * ``advertised_listeners`` (``advertised.listeners``): same forms;
      host/port reported by Metadata.
    * ``listener_configs``: ``{listener name: configs dict}``: that
      listener's effective configs as given (also the ``configs`` of a
      listener given as a dict or tuple), instead of those derived from the
      properties.
    * ``node_id`` (``node.id``, default 0), ``cluster_id`` (default:
      ``kchannel.cluster.id``, else a random 22-char base64 UUID, stable for
      this Server), ``rack`` (``broker.rack``).
    * ``connections_max_idle_ms`` (``connections.max.idle.ms``, 600000),
      ``failed_authentication_delay_ms``
      (``connection.failed.authentication.delay.ms``, 100),
      ``socket_request_max_bytes`` (``socket.request.max.bytes``, 104857600).
    * ``jaas``, ``callbacks``, ``token_manager``, ``sasl_kwargs``: handed to
      the SASL channel builder of SASL listeners.
    * ``time``: ms clock (tests); ``metrics``: a ``kchannel.metrics.Metrics``.
    * ``max_receives_per_channel`` (64): requests taken from one connection
      per poll when a client pipelines them (see :meth:`poll`); 1 is Kafka's
      one request per connection per poll.
    * ``reuse_port``: bind the listeners with ``SO_REUSEPORT`` (Linux), so
      several server processes share each listening port and the kernel
      spreads the connections over them (``kchannel serve`` with
      ``num.network.threads`` > 1).
    """

    def __init__(self, config=None, *, listeners=None, advertised_listeners=None,
                 listener_configs=None, node_id=None, cluster_id=None, rack=None,
                 connections_max_idle_ms=None, failed_authentication_delay_ms=None,
                 socket_request_max_bytes=None, jaas=None, callbacks=None,
                 token_manager=None, sasl_kwargs=None, time=None, metrics=None,
                 register_builtins=True, max_receives_per_channel=MAX_RECEIVES_PER_CHANNEL,
                 reuse_port=False):
        self.reuse_port = reuse_port
        # Properties the caller wrote (a ServerConfig or a dict) also feed the
        # SASL builders of listeners whose configs were given explicitly.
        self._config_given = config is not None
        config, given_configs = _server_config(
            config, listeners, advertised_listeners, node_id, rack, connections_max_idle_ms,
            failed_authentication_delay_ms, socket_request_max_bytes)
        props = config.originals
        self.config = config
        self._props = props
        self.time = time or now_ms
        self.node_id = config.node_id
        self.cluster_id = cluster_id or config.cluster_id or random_cluster_id()
        self.rack = config.get("broker.rack")
        self.jaas = jaas
        self.callbacks = callbacks
        self.token_manager = token_manager
        self.sasl_kwargs = dict(sasl_kwargs or {})

        given_configs.update({str(k).upper(): v for k, v in (listener_configs or {}).items()})
        self.listeners = []
        for ep in config.listeners:
            l = Listener(ep.listener_name, ep.host, ep.port, ep.security_protocol)
            # Configs given with a listener are its effective configs as
            # given; the others come from the properties.
            l.explicit_configs = ep.listener_name in given_configs
            l.configs = (dict(given_configs[ep.listener_name]) if l.explicit_configs
                         else dict(config.listener_configs(ep.listener_name)))
            self.listeners.append(l)
        self.advertised = {ep.listener_name: ep for ep in config.advertised_listeners}

        self.connections_max_idle_ms = int(config.connections_max_idle_ms)
        self.failed_authentication_delay_ms = int(config.failed_authentication_delay_ms)
        self.socket_request_max_bytes = int(config.socket_request_max_bytes)

        # SocketServer: SO_SNDBUF / SO_RCVBUF of the broker's sockets (-1 = the
        # OS default).  The receive buffer is set on the listening socket
        # before bind, so accepted connections inherit it from their first
        # segment (TCP window scaling is negotiated then).
        self.socket_send_buffer_bytes = int(_cfg_get(config, props, "socket.send.buffer.bytes",
                                                     102400))
        self.socket_receive_buffer_bytes = int(_cfg_get(config, props,
                                                        "socket.receive.buffer.bytes", 102400))
        self._init_connection_limits(config, props)

        self.metrics = metrics if metrics is not None else Metrics(time=self.time)
        self.selector = Selector(
            None, self.metrics, self.connections_max_idle_ms, time=self.time,
            metric_group_prefix="socket-server",
            failed_authentication_delay_ms=self.failed_authentication_delay_ms,
            max_receive_size=self.socket_request_max_bytes,
            max_receives_per_channel=max_receives_per_channel,
            send_buffer_size=self.socket_send_buffer_bytes,
            receive_buffer_size=self.socket_receive_buffer_bytes)
        self._init_connection_quotas(config, props)
        self._held = set()      # ids whose rest of this poll's batch went back unread
        self.handlers = HandlerRegistry()
        # response encoders per (api_key << 16 | version)
        self._response_encoders = {}
        # request body decoders (the schema's generated function) per
        # (api_key << 16 | version), valid versions only
        self._request_decoders = {}
        # (ApiVersions version, listener) -> (handlers.generation, encoded body)
        self._api_versions_bytes = {}
        # Set by register_cluster_handlers (kchannel.server.cluster.ClusterView).
        self.cluster_view = None
        if register_builtins:
            self.handlers.register(messages.API_VERSIONS.api_key, handle_api_versions)
            self.handlers.register(messages.METADATA.api_key, handle_metadata)
            # Metadata/DescribeCluster per listener over every known node.
            register_cluster_handlers(self)
        self._conn_index = 0
        # Gateway (kchannel.gateway.Gateway) in front of an upstream cluster,
        # or None; connection id -> upstream node of the port it came in on.
        self.gateway = None
        self.connection_upstream_node = {}
        self._paused = False                 # some listener has paused_until set
        self._accept_backoff_ms = ACCEPT_BACKOFF_MS[0]
        self._accept_errors = 0              # accept errors not logged yet
        self._accept_error_log_at = 0        # ms from which the next may be logged
        self._stop = threading.Event()
        self._thread = None
        self._closed = False
        self._lock = threading.Lock()
        # Called once after the listeners and connections are closed: the
        # stores and gateway a broker assembly (from_properties) opened.
        self._closers = []
        try:
            for l in self.listeners:
                self._bind(l)
        except BaseException:
            self._close_listeners()
            raise

    @classmethod
    def from_properties(cls, props, jaas_text=None, *, jaas_file_name=None, reuse_port=False):
        """The broker ``kchannel serve`` runs for the server properties
        ``props`` (a dict; ``jaas_text``: a JAAS file's text, as
        ``--jaas-config``): this Server with the SCRAM credential, delegation
        token, ACL and DescribeClientQuotas APIs and their stores, and the
        gateway with ``kchannel.upstream.bootstrap.servers``.  ``shutdown()``
        closes the stores and the gateway too."""
        server, closers = assemble(cls, props, jaas_text, jaas_file_name, reuse_port=reuse_port)
        server._closers.extend(closers)
        return server

    # ------------------------------------------------------------- listeners
    def _bind(self, l):
        if l.channel_builder is None:
            l.channel_builder = self._channel_builder(l)
        family = socket.AF_INET6 if ":" in l.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if self.socket_receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF,
                                self.socket_receive_buffer_bytes)
            sock.bind((l.host, l.port))
            sock.listen(int(l.configs.get("socket.listen.backlog.size", 50) or 50) * 20)
        except OSError as exc:
            sock.close()
            raise errors.ChannelConnectionError(
                f"Socket server failed to bind to {l.host}:{l.port}: {exc.strerror or exc}.")
        l.sock = sock
        l.bound_port = sock.getsockname()[1]
        self._watch(l, True)
        if l.upstream_node is not None:
            log.info("[Gateway listener=%s, securityProtocol=%s] Upstream node %s served on %s:%d.",
                     l.name, l.security_protocol, l.upstream_node, l.host or "0.0.0.0",
                     l.bound_port)
            return
        log.info("[SocketServer listener=%s, securityProtocol=%s] "
                 "Awaiting socket connections on %s:%d.", l.name, l.security_protocol,
                 l.host or "0.0.0.0", l.bound_port)

    def _channel_builder(self, l):
        kw = {}
        if l.security_protocol.startswith("SASL_"):
            kw = dict(self.sasl_kwargs)
            kw.setdefault("api_versions_supplier",
                          lambda version, name=l.name: self.api_versions_body_bytes(version,
                                                                                    name))
            if self.jaas is not None:
                kw.setdefault("jaas", self.jaas)
            if self.callbacks is not None:
                kw.setdefault("callbacks", self.callbacks)
            if self.token_manager is not None:
                kw.setdefault("token_manager", self.token_manager)
            if self._config_given or not l.explicit_configs:
                kw.setdefault("server_config", self.config)
        return create_channel_builder(l.security_protocol, "server", l.configs, l.name, **kw)


    def add_node_listener(self, listener_name, node_id, port):
        """Bind one more port for ``listener_name`` whose connections a
        gateway sends to upstream node ``node_id`` (same name, security
        protocol, configs and channel builder as the listener).  Returns the
        new :class:`Listener` (``bound_port`` set); raises
        ``ChannelConnectionError`` when the port cannot be bound."""
        parent = self._listener(listener_name)
        l = Listener(parent.name, parent.host, port, parent.security_protocol, parent.configs)
        l.upstream_node = node_id
        l.channel_builder = parent.channel_builder
        l.shared_builder = True
        l.max_connections = parent.max_connections
        l.protected = parent.protected
        l.max_connection_creation_rate = parent.max_connection_creation_rate
        l.setup_timeout_ms = parent.setup_timeout_ms
        self._bind(l)
        self.listeners.append(l)
        return l

    def bound_port(self, listener_name):
        """The real port a listener is bound to (useful with port 0)."""
        return self._listener(listener_name).bound_port

    def listener(self, listener_name):
        return self._listener(listener_name)

    def _listener(self, name):
        name = str(name).upper()
        for l in self.listeners:
            if l.name == name:
                return l
        raise KeyError(f"No listener named {name}")

    def advertised_endpoint(self, listener_name):
        """(host, port) clients should use for ``listener_name``: the
        advertised listener of that name, else the bound one.  An empty host
        becomes this machine's name; port 0 becomes the bound port."""
        l = self._listener(listener_name)
        ep = self.advertised.get(l.name)
        host = ep.host if ep is not None else l.host
        port = ep.port if ep is not None else l.bound_port
        if not host or host in ("0.0.0.0", "::"):
            host = socket.getfqdn()
        if not port:
            port = l.bound_port
        return host, int(port)

    # --------------------------------------------------------------- handlers
    def register_handler(self, api_key, fn, min_version=None, max_version=None):
        """Serve ``api_key`` with ``fn(ctx: RequestContext) -> dict | None``
        for versions ``min_version``..``max_version`` (default: every version
        the codec supports).  Replaces an earlier handler (built-ins too)."""
        self.handlers.register(api_key, fn, min_version, max_version)

    def unregister_handler(self, api_key):
        self.handlers.unregister(api_key)

    def api_versions_body(self, version, listener_name=None):
        """The ApiVersions response body this server sends on
        ``listener_name`` (also used by the SASL authenticator before
        authentication).  As a Kafka broker, SaslHandshake and
        SaslAuthenticate are listed on every listener, whatever its security
        protocol: outside SASL authentication they are answered
        ILLEGAL_SASL_STATE."""
        ranges = {k: (lo, hi) for k, lo, hi in self.handlers.ranges()}
        for k in SASL_API_KEYS:
            if k not in ranges:
                api = messages.API[k]
                ranges[k] = (api.min_version, api.max_version)
        if self.gateway is not None:
            ranges = self.gateway.api_ranges(ranges)
        return {
            "error_code": 0,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in sorted(ranges.items())],
            "throttle_time_ms": 0,
            "supported_features": [],
            "finalized_features_epoch": -1,
            "finalized_features": [],
            "zk_migration_ready": False,
        }

    def api_versions_body_bytes(self, version, listener_name=None):
        """:meth:`api_versions_body` encoded at ``version`` (response
        encoders take it as the body).  Every connection gets the same
        answer, twice (the SASL authenticator's, then the client's own
        request): encoding its ~60 entries each time was a sizeable part of
        a SASL connection's cost to the server.  Kept until a handler is
        (un)registered; not kept in front of a gateway, whose ranges follow
        its upstream's."""
        gen = self.handlers.generation
        if self.gateway is None:
            hit = self._api_versions_bytes.get((version, listener_name))
            if hit is not None and hit[0] == gen:
                return hit[1]
        data = bytes(messages.API_VERSIONS.response.encode(
            self.api_versions_body(version, listener_name), version))
        if self.gateway is None:
            self._api_versions_bytes[(version, listener_name)] = (gen, data)
        return data

    # ------------------------------------------------------------------ loop
    def poll(self, timeout_ms=300):
        """One iteration: network I/O then request dispatch.

        A connection may deliver several pipelined requests in one poll (up
        to ``max_receives_per_channel``).  They are handled one after the
        other, in order, exactly as if each had come in its own poll, which
        a Kafka broker's one-request-at-a-time rule guarantees:

        * a request that closes the connection (bad header, unsupported
          API or version, handler error, expired session) ends the batch:
          the responses to the requests before it are written first, the
          requests behind it are never handled;
        * a SaslHandshake that starts a re-authentication (KIP-368) puts
          the requests behind it back in front of the connection's unread
          input before the re-authentication begins, so the authenticator
          reads them as it would read them off the socket (its token, and
          after it the data-phase requests once the connection is READY
          again);
        * a connection that is muted or not READY after a request (for
          instance by its handler) gets the rest of its batch back the same
          way, to be handled when it may read again.
        """
        sel = self.selector
        held = self._held
        if held:
            held.clear()
        gateway = self.gateway
        if gateway is not None:
            timeout_ms = gateway.poll_timeout(timeout_ms)
        if self._paused:
            wait = self._end_pauses(self.time())
            if wait is not None and (timeout_ms is None or timeout_ms < 0 or wait < timeout_ms):
                timeout_ms = wait
        sel.poll(timeout_ms)
        if self._limited:
            self._resume_accepting()
        if self._paused:
            self._end_pauses(self.time())
        receives = sel.completed_receives
        if len(receives) == 1:
            cid, payload = receives[0]
            # (the channel looked up here: Selector.channel's call saved)
            ch = sel._channels.get(cid)
            if ch is not None:
                self._process_request(cid, payload, ch=ch)
            receives = ()
        # (sel.channel(cid), ch.ready() and ch.is_muted() inlined: three
        # calls per pipelined request, as many as the rest of its dispatch
        # in the network layer)
        channels = sel._channels
        for i, (cid, payload) in enumerate(receives):
            if held and cid in held:
                continue
            ch = channels.get(cid)
            if ch is None:
                continue      # closed by an earlier request of its batch
            if ((ch._ready_for is not ch.authenticator and not ch.ready())
                    or ch.mute_state is not _NOT_MUTED):
                self._hold_back(ch, receives, i)
                continue
            self._process_request(cid, payload, receives, i, ch=ch)
        # Responses to a batch of pipelined requests were queued (one write
        # per channel): write them now rather than at the next poll.
        sel.flush_sends()
        if gateway is not None:
            gateway.after_poll()
            sel.flush_sends()     # answers from upstream to batched channels

    def _hold_back(self, ch, receives, start):
        """Put ``ch``'s frames of ``receives[start:]`` back in front of its
        unread input, in order (see :meth:`poll`)."""
        cid = ch.id
        if cid in self._held:
            return
        self._held.add(cid)
        frames = [p for c, p in receives[start:] if c == cid]
        if frames:
            ch.unread(frames)
            self.selector.update_interest(cid)

    def _fail(self, cid, exc):
        # Responses to the requests before this one (same batch) go out
        # first, as far as the socket takes them now: a broker would have
        # sent them before reading the failing request.
        sel = self.selector
        sel.write_queued(cid)
        sel.fail(cid, exc)

    def _process_request(self, cid, payload, batch=None, index=0, local=False, ch=None):
        sel = self.selector
        if ch is None:
            ch = sel.channel(cid)
            if ch is None:
                return
        try:
            # (headers.parse_request_header, its call saved: the wire
            # twin's parse and the header built here)
            api_key, v, corr, client_id, hv, off = _parse_request_header(
                payload, REQUEST_FLEXIBLE_FROM)
        except errors.InvalidRequestError as exc:
            log.info("Closing connection %s from %s: invalid request header: %s",
                     cid, ch.socket_description(), exc)
            self._fail(cid, exc)
            return
        header = RequestHeader(api_key, v, corr, client_id, hv)
        # the time the poll read it (the selector's clock, the server's):
        # one clock read less per request
        now = sel.poll_time_ms
        if api_key == _SASL_HANDSHAKE:
            if batch is not None:
                # Whatever the client pipelined behind its SaslHandshake is
                # the re-authentication's to read (when one begins; else it
                # is handled by the next poll, still in order).
                self._hold_back(ch, batch, index + 1)
            try:
                if ch.maybe_begin_server_reauthentication(payload, now):
                    log.debug("Begin re-authentication: %s", ch)
                    sel.reauthentication_begun(cid)
                    return
            except errors.AuthenticationError as exc:
                sel.handle_failure(cid, exc)
                return
            except Exception as exc:
                sel.handle_failure(cid, exc)
                return
        # ch.server_authentication_session_expired(now), one call less; an
        # authenticator class keeping the base's no-expiry hook (PLAINTEXT,
        # SSL) is not asked at all
        auth = ch.authenticator
        expiry = (None if type(auth).server_session_expiration_ms is _NO_SESSION_EXPIRY
                  else auth.server_session_expiration_ms())
        if expiry is not None and now - expiry > 0:
            log.debug("Disconnecting expired channel: %s : %s", ch, header)
            sel.write_queued(cid)
            sel.close(cid)
            sel.record_expired_connection_killed()
            return
        if (self.gateway is not None and not local
                and self.gateway.intercept(ch, header, payload, off, now)):
            return      # forwarded upstream, or queued behind what was
        handler = self.handlers.get(api_key)
        api = messages.API.get(api_key)
        if api_key == _API_VERSIONS:
            lo, hi = ((handler.min_version, handler.max_version) if handler is not None
                      else (0, -1))
            if not (lo <= v <= hi):
                # KIP-511: answer from the header alone with a v0 body listing
                # our ApiVersions range; the connection stays usable.
                log.debug("ApiVersions v%d from %s is not supported; sending v0 "
                          "UNSUPPORTED_VERSION", v, cid)
                sel.send(cid, api_versions_fallback(
                    corr,
                    handler.min_version if handler else api.min_version,
                    handler.max_version if handler else api.max_version))
                return
        if handler is None and api_key in SASL_API_KEYS and api is not None \
                and api.min_version <= v <= api.max_version:
            # Listed in ApiVersions on every listener and answered as
            # Kafka's KafkaApis does outside SASL authentication.
            handler = Handler(api_key, handle_sasl_after_authentication,
                              api.min_version, api.max_version)
        if handler is None or api is None:
            exc = errors.UnsupportedVersionError(
                f"Unsupported API key {api_key}")
            log.info("Closing connection %s from %s: no handler for API key %d (version %d)",
                     cid, ch.socket_description(), api_key, v)
            self._fail(cid, exc)
            return
        if not (handler.min_version <= v <= handler.max_version):
            exc = errors.UnsupportedVersionError(
                f"{api.name} version {v} is not supported "
                f"(supported: {handler.min_version}-{handler.max_version})")
            log.info("Closing connection %s from %s: %s", cid, ch.socket_description(), exc)
            self._fail(cid, exc)
            return
        key = (api_key << 16) | v
        try:
            # (api.request.decode(payload, v, off), its call saved: the
            # generated decoder of the version straight from this cache)
            decode = self._request_decoders.get(key)
            if decode is None:
                decode = self._request_decoders[key] = api.request._message_function(
                    v, "decode")
            body = decode(payload, off)
        except errors.KChannelError as exc:
            log.info("Closing connection %s from %s: invalid %s v%d request: %s",
                     cid, ch.socket_description(), api.name, v, exc)
            self._fail(cid, exc)
            return
        principal = auth.principal()     # ch.principal()
        ctx = RequestContext(header, body, principal, ch.listener_name, ch.security_protocol,
                             cid, ch.remote_address, None, self, now)
        try:
            response = handler.fn(ctx)
        except Exception as exc:  # noqa: BLE001 - a handler bug closes one connection
            log.error("Error processing %s v%d request from %s (%s); closing connection",
                      api.name, v, cid, principal, exc_info=True)
            self._fail(cid, exc)
            return
        if response is None:
            return
        try:
            encode = self._response_encoders.get(key)
            if encode is None:
                encode = self._response_encoders[key] = response_encoder(api_key, v, framed=True)
            out = encode(corr, response)
        except Exception as exc:  # noqa: BLE001
            log.error("Could not encode %s v%d response for %s; closing connection",
                      api.name, v, cid, exc_info=True)
            self._fail(cid, exc)
            return
        sel.send(cid, out, True)

    def serve_forever(self, poll_timeout_ms=300):
        """Run the loop in this thread until :meth:`shutdown`."""
        try:
            while not self._stop.is_set():
                self.poll(poll_timeout_ms)
        finally:
            self._close()

    def start(self):
        """Run :meth:`serve_forever` in a daemon thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("Server already started")
        self._thread = threading.Thread(target=self.serve_forever, name="kchannel-server",
                                        daemon=True)
        self._thread.start()
        return self

    def shutdown(self, timeout=10.0):
        """Stop the loop, close every connection and listener."""
        self._stop.set()
        if self._thread is not None:
            self.selector.wakeup()
            if self._thread is not threading.current_thread():
                self._thread.join(timeout)
        else:
            self._close()

    close = shutdown

    def _close_listeners(self):
        for l in self.listeners:
            if l.sock is not None:
                self.selector.remove_listener(l.sock)
                try:
                    l.sock.close()
                except OSError:
                    pass
                l.sock = None
                l.watched = False
            if l.parked is not None:
                try:
                    l.parked[0].close()
                except OSError:
                    pass
                l.parked = None
            if l.channel_builder is not None and not l.shared_builder:
                try:
                    l.channel_builder.close()
                except Exception:
                    pass

    def _close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._close_listeners()
        self.selector.close()
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - close the others still
                log.warning("Server (node %d): closing %r failed: %s", self.node_id, close, exc)
        log.info("Server (node %d) shut down", self.node_id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
