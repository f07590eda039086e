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
import errno
import socket
import threading

from .. import errors
from .broker import assemble
from .cluster import register_cluster_handlers
from ..config import ServerConfig
from ..config.listeners import (DEFAULT_SECURITY_PROTOCOL_MAP, Endpoint, format_address,
                               parse_security_protocol_map)
from ..config.definitions import parse_ip_overrides
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
from ..network.connection_quotas import ConnectionQuotas
from ..network.selector import MAX_ACCEPTS_PER_POLL, Selector
from ..protocol import messages
from ..protocol.api_versions import api_versions_fallback
from ..protocol.headers import parse_request_header, response_encoder
from ..security.channel_builders import create_channel_builder
from ..utils import now_ms
from ..log import get_logger

log = get_logger("kchannel.server")

__all__ = ["Server", "Listener"]

_SASL_HANDSHAKE = messages.SASL_HANDSHAKE.api_key

# Requests handed over per connection per poll (Selector.max_receives_per_channel).
MAX_RECEIVES_PER_CHANNEL = 64

# Kafka's max.connections default (Int.MaxValue): no limit.
_UNLIMITED = 2147483647

# accept() failing for lack of file descriptors or kernel memory: no
# listener is watched for a back-off (doubling from the first to the last
# value while it keeps failing), since the listening sockets stay readable
# and retrying at once would spin; connections wait in the listen backlog.
ACCEPT_BACKOFF_MS = (100, 1000)
_ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# At most one log line about failing accepts per interval (a peer can
# trigger them at will); the next one says how many were not logged.
ACCEPT_ERROR_LOG_INTERVAL_MS = 10000

class Listener:
    """One listener: ``name`` (e.g. "CLIENT"), ``host`` ("" = all
    interfaces), ``port`` (0 = ephemeral), ``security_protocol`` and its
    effective ``configs`` dict.  After binding, ``bound_port`` is the real
    port."""

    def __init__(self, name, host, port, security_protocol=None, configs=None):
        self.name = str(name).upper()
        self.host = host or ""
        self.port = int(port)
        self.security_protocol = (security_protocol or self.name).upper()
        self.configs = dict(configs or {})
        self.sock = None
        self.bound_port = None
        self.channel_builder = None
        # True when the configs were given with the listener (keyword API)
        # rather than taken from the server properties.
        self.explicit_configs = False
        # max.connections of this listener (listener prefix, else the
        # broker-wide value); protected: the inter-broker listener, which the
        # broker-wide limit does not hold back; accepting: False while a
        # limit is reached; paused_until: ms until which accepting is held
        # back (accept back-off); the listening socket is watched (watched)
        # only while accepting and not paused.
        self.max_connections = _UNLIMITED
        self.protected = False
        self.accepting = True
        self.paused_until = None
        self.watched = False
        # max.connection.creation.rate of this listener; a connection
        # accepted over the rate waits here (parked) while the listener's
        # acceptor is throttled; kchannel.connection.setup.timeout.ms.
        self.max_connection_creation_rate = _UNLIMITED
        self.parked = None
        self.setup_timeout_ms = 0
        # Gateway: the upstream node whose connections arrive on this port
        # (None: a configured listener); such a port shares its listener's
        # name and channel builder (shared_builder: not closed with it).
        self.upstream_node = None
        self.shared_builder = False

    # Endpoint-style aliases
    @property
    def listener_name(self):
        return self.name

    def __repr__(self):
        return (f"Listener({self.name}://{self.host}:{self.bound_port or self.port}, "
                f"{self.security_protocol})")


def _listener_spec(obj):
    """``(entry text, security protocol or None, configs or None)`` of one
    listener given to the keyword API: ``NAME://host:port`` text (parsed by
    the configuration layer, as in ``listeners``), or a :class:`Listener`,
    an ``Endpoint``, a dict (name, host, port, security_protocol, configs) or
    a ``(name, host, port[, protocol[, configs]])`` tuple."""
    if isinstance(obj, str):
        return obj, None, None
    if isinstance(obj, dict):
        name = obj.get("name") or obj.get("listener_name")
        host, port = obj.get("host", ""), obj.get("port", 0)
        protocol, configs = obj.get("security_protocol"), obj.get("configs")
    elif isinstance(obj, (tuple, list)):
        name, host, port, protocol, configs = (tuple(obj) + (None, None))[:5]
    elif isinstance(obj, Listener):
        name, host, port = obj.name, obj.host, obj.port
        protocol, configs = obj.security_protocol, obj.configs
    elif isinstance(obj, Endpoint):
        name, host, port = obj.listener_name, obj.host, obj.port
        protocol, configs = obj.security_protocol, None
    else:
        raise TypeError(f"Unsupported listener {obj!r}: give NAME://host:port text, a Listener, "
                        "an Endpoint, a dict or a (name, host, port[, protocol[, configs]]) tuple")
    name = str(name).upper()
    address = f":{port}" if not host else format_address(host, port)
    return f"{name}://{address}", (protocol or name).upper(), configs or None


def _listener_props(value, protocol_map, configs):
    """The ``listeners`` / ``advertised.listeners`` property for the
    keyword API's ``value``: Kafka's comma-separated text as is, or the
    entries of a list joined.  Protocols of listeners given as objects go to
    ``protocol_map``; their configs to ``configs``."""
    if isinstance(value, str):
        return value
    entries = []
    for obj in value:
        text, protocol, listener_configs = _listener_spec(obj)
        entries.append(text)
        if protocol is not None:
            name = text.partition("://")[0]
            protocol_map[name] = protocol
            if listener_configs is not None:
                configs[name] = dict(listener_configs)
    return ",".join(entries)


def _server_config(config, listeners, advertised_listeners, node_id, rack,
                   connections_max_idle_ms, failed_authentication_delay_ms,
                   socket_request_max_bytes):
    """``(ServerConfig, {listener name: configs given with it})``: ``config``
    (a ``ServerConfig`` or a dict of properties) with the keyword arguments
    applied as the properties they stand for, validated as one."""
    overrides = {}
    listener_configs = {}
    if isinstance(config, ServerConfig):
        protocol_map = dict(config.listener_security_protocol_map)
    else:
        props = dict(config or {})
        if config is None and listeners is None:
            listeners = ["PLAINTEXT://127.0.0.1:0"]
        text = props.get("listener.security.protocol.map")
        protocol_map = (parse_security_protocol_map(text) if text is not None
                        else dict(DEFAULT_SECURITY_PROTOCOL_MAP))
    known_map = dict(protocol_map)
    if listeners is not None:
        overrides["listeners"] = _listener_props(listeners, protocol_map, listener_configs)
    if advertised_listeners is not None:
        overrides["advertised.listeners"] = _listener_props(advertised_listeners, protocol_map, {})
    if protocol_map != known_map:
        overrides["listener.security.protocol.map"] = ",".join(
            f"{name}:{protocol}" for name, protocol in protocol_map.items())
    if node_id is not None:
        # node.id and broker.id are synonyms that must agree.
        overrides["node.id"] = overrides["broker.id"] = node_id
    for key, value in (("broker.rack", rack),
                       ("connections.max.idle.ms", connections_max_idle_ms),
                       ("connection.failed.authentication.delay.ms",
                        failed_authentication_delay_ms),
                       ("socket.request.max.bytes", socket_request_max_bytes)):
        if value is not None:
            overrides[key] = value
    if isinstance(config, ServerConfig):
        return (config.with_overrides(overrides) if overrides else config), listener_configs
    props.update(overrides)
    if config is not None:
        return ServerConfig(props), listener_configs
    # Keyword API alone: its listeners and settings are checked as the
    # properties they stand for.  What it does not write (key stores, JAAS,
    # the inter-broker listener) is not checked here: the jaas/listener
    # configs arguments reach the channel builders, which check them.
    problems = []
    built = ServerConfig(props, _errors=problems)
    for problem in problems:
        if problem.key in overrides:
            raise problem
    return built, listener_configs


def _listener_value(l, props, key, default):
    """``key`` for listener ``l``: its listener-prefixed value, else the
    broker-wide ``default``."""
    value = l.configs.get(key) if l.configs else None
    if value is None and props is not None:
        value = props.get(f"listener.name.{l.name.lower()}.{key}")
    return value if value is not None else default


def _cfg_get(config, props, key, default):
    try:
        v = config.get(key)
    except KeyError:         # not a key Kafka defines: the raw property alone
        v = None
    if v is not None:
        return v
    if props is not None and props.get(key) is not None:
        return props[key]
    return default


class Server:
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

    # ------------------------------------------------------ connection limits
    def _init_connection_limits(self, config, props):
        """Kafka's ConnectionQuotas for ``max.connections``: broker-wide and
        per listener (``listener.name.<l>.max.connections``, defaulting to
        the broker-wide value).  When a limit is reached Kafka's acceptor
        blocks until a connection closes, leaving new connections in the
        listen backlog; kchannel stops watching that listening socket
        instead.  The inter-broker listener is not held back by the
        broker-wide limit when there are other listeners (Kafka then also
        closes the least recently used connection of another listener;
        kchannel does not)."""
        self.max_connections = int(_cfg_get(config, props, "max.connections", _UNLIMITED))
        inter_broker = config.inter_broker_listener_name
        if inter_broker is None and props is not None:
            inter_broker = props.get("inter.broker.listener.name")
        inter_broker = str(inter_broker).upper() if inter_broker else None
        for l in self.listeners:
            l.max_connections = int(_listener_value(l, props, "max.connections",
                                                    self.max_connections))
            l.protected = l.name == inter_broker and len(self.listeners) > 1
        self._limited = (self.max_connections < _UNLIMITED
                         or any(l.max_connections < _UNLIMITED for l in self.listeners))

    def _init_connection_quotas(self, config, props):
        """Kafka's ConnectionQuotas for ``max.connections.per.ip`` (with its
        overrides) and ``max.connection.creation.rate`` (broker-wide and per
        listener), see :mod:`kchannel.network.connection_quotas`; and,
        beyond Kafka, ``kchannel.connection.setup.timeout.ms`` per
        listener."""
        overrides = {}
        text = _cfg_get(config, props, "max.connections.per.ip.overrides", "")
        for host, count in parse_ip_overrides(text).items():
            # Kafka: InetAddress.getByName, the name's first address
            try:
                address = socket.getaddrinfo(host, None, 0, socket.SOCK_STREAM)[0][4][0]
            except OSError as exc:
                raise errors.ConfigError(
                    f"max.connections.per.ip.overrides: cannot resolve {host}: {exc}",
                    key="max.connections.per.ip.overrides", value=text) from None
            overrides[address] = count
        broker_rate = int(_cfg_get(config, props, "max.connection.creation.rate", _UNLIMITED))
        self.connection_quotas = ConnectionQuotas(
            self.metrics,
            max_connections_per_ip=int(_cfg_get(config, props, "max.connections.per.ip",
                                                _UNLIMITED)),
            overrides=overrides,
            max_connection_creation_rate=broker_rate,
            quota_window_size_seconds=int(_cfg_get(config, props, "quota.window.size.seconds",
                                                   1)),
            quota_window_num=int(_cfg_get(config, props, "quota.window.num", 11)))
        broker_setup = int(_cfg_get(config, props, "kchannel.connection.setup.timeout.ms", 0))
        for l in self.listeners:
            l.max_connection_creation_rate = int(_listener_value(
                l, props, "max.connection.creation.rate", broker_rate))
            self.connection_quotas.add_listener(l.name, l.max_connection_creation_rate)
            l.setup_timeout_ms = int(_listener_value(
                l, props, "kchannel.connection.setup.timeout.ms", broker_setup))
        self.selector.on_close = self._connection_closed

    def _connection_closed(self, ch):
        self.connection_quotas.dec(ch.id)
        self.connection_upstream_node.pop(ch.id, None)
        if self.gateway is not None:
            self.gateway.connection_closed(ch.id)

    def _connection_counts(self):
        counts = {}
        for ch in self.selector.channels():
            counts[ch.listener_name] = counts.get(ch.listener_name, 0) + 1
        return counts

    def _slot_available(self, l, counts):
        if counts.get(l.name, 0) >= l.max_connections:
            return False
        if l.protected:
            return True
        return sum(counts.values()) < self.max_connections

    def _watch(self, l, watch):
        """Start or stop watching ``l``'s listening socket."""
        if watch == l.watched or l.sock is None:
            return
        if watch:
            self.selector.add_listener(l.sock, lambda l=l: self._accept(l))
        else:
            self.selector.remove_listener(l.sock)
        l.watched = watch

    def _pause_accepting(self, l):
        if l.accepting and l.sock is not None:
            l.accepting = False
            self._watch(l, False)
            log.info("[SocketServer listener=%s] Connection limit reached (max.connections "
                     "%d on the listener, %d on the broker); new connections wait until one "
                     "closes", l.name, l.max_connections, self.max_connections)

    def _resume_accepting(self):
        """Watch again the listeners whose limit is no longer reached."""
        counts = None
        for l in self.listeners:
            if l.accepting or l.sock is None:
                continue
            if counts is None:
                counts = self._connection_counts()
            if self._slot_available(l, counts):
                l.accepting = True
                if l.paused_until is None:
                    self._watch(l, True)
                log.debug("[SocketServer listener=%s] Accepting connections again", l.name)

    def _pause_until(self, l, until):
        l.paused_until = until if l.paused_until is None else max(l.paused_until, until)
        self._paused = True
        self._watch(l, False)

    def _end_pauses(self, now):
        """Watch again the listeners whose pause is over; the poll timeout
        (ms) until the next one ends, or None."""
        nxt = None
        for l in self.listeners:
            until = l.paused_until
            if until is None:
                continue
            if now >= until:
                l.paused_until = None
                if l.parked is not None:
                    (sock, addr), l.parked = l.parked, None
                    self._admit(l, sock, addr, now)
                if l.accepting:
                    self._watch(l, True)
            elif nxt is None or until < nxt:
                nxt = until
        self._paused = nxt is not None
        return None if nxt is None else nxt - now

    def _accept_failed(self, l, exc):
        """accept() raised ``exc`` (not EAGAIN).  Out of file descriptors or
        kernel memory, every listener pauses for a back-off; the log line is
        rate limited either way."""
        now = self.time()
        paused = ""
        if exc.errno in _ACCEPT_RESOURCE_ERRORS:
            backoff = self._accept_backoff_ms
            self._accept_backoff_ms = min(backoff * 2, ACCEPT_BACKOFF_MS[1])
            for other in self.listeners:
                self._pause_until(other, now + backoff)
            paused = f"; not accepting connections on any listener for {backoff} ms"
        self._accept_errors += 1
        if now < self._accept_error_log_at:
            return
        more = self._accept_errors - 1
        self._accept_errors = 0
        self._accept_error_log_at = now + ACCEPT_ERROR_LOG_INTERVAL_MS
        log.warning("[SocketServer listener=%s] Error accepting connection: %s%s%s", l.name,
                    exc, paused, f" ({more} more accept errors since the last report)"
                    if more else "")

    def _accept(self, l):
        counts = self._connection_counts() if self._limited else None
        for _ in range(MAX_ACCEPTS_PER_POLL):
            if counts is not None and not self._slot_available(l, counts):
                self._pause_accepting(l)
                return
            try:
                sock, addr = l.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._accept_failed(l, exc)
                return
            self._accept_backoff_ms = ACCEPT_BACKOFF_MS[0]
            now = self.time()
            throttle = self.connection_quotas.record_connection(l.name, l.protected, now)
            if throttle > 0:
                # Kafka's acceptor blocks for the throttle time with this
                # connection in hand; here the listener is not watched
                # meanwhile and the connection waits, parked.
                log.debug("[SocketServer listener=%s] Connection creation rate over its quota; "
                          "throttling the acceptor for %d ms", l.name, throttle)
                l.parked = (sock, addr)
                self._pause_until(l, now + throttle)
                return
            if self._admit(l, sock, addr, now) and counts is not None:
                counts[l.name] = counts.get(l.name, 0) + 1

    def _admit(self, l, sock, addr, now):
        """Take on an accepted connection: closed at once when its address
        already has its max.connections.per.ip, else registered.  True when
        registered."""
        self._conn_index += 1
        try:
            local = sock.getsockname()
            cid = f"{local[0]}:{local[1]}-{addr[0]}:{addr[1]}-{self._conn_index}"
        except OSError as exc:
            cid = None
            log.debug("Connection from %s on %s failed before registration: %s",
                      addr, l.name, exc)
        if cid is not None:
            limit = self.connection_quotas.inc(cid, addr[0])
            if limit is not None:
                log.info("[SocketServer listener=%s] Rejected connection from %s, address "
                         "already has the configured maximum of %d connections.",
                         l.name, addr[0], limit)
            else:
                try:
                    self.selector.register(cid, sock, l.channel_builder, l.name,
                                           remote_address=addr)
                    if l.upstream_node is not None:
                        self.connection_upstream_node[cid] = l.upstream_node
                    if l.setup_timeout_ms > 0 and l.security_protocol != "PLAINTEXT":
                        # (a PLAINTEXT connection has nothing to complete)
                        self.selector.set_setup_deadline(cid, now + l.setup_timeout_ms)
                    return True
                except Exception as exc:  # a broken socket must not stop accepting
                    self.connection_quotas.dec(cid)
                    log.warning("Failed to register connection from %s on %s: %s",
                                addr, l.name, exc)
        try:
            sock.close()
        except OSError:
            pass
        return False

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
            self._process_request(cid, payload)
            receives = ()
        for i, (cid, payload) in enumerate(receives):
            if held and cid in held:
                continue
            ch = sel.channel(cid)
            if ch is None:
                continue      # closed by an earlier request of its batch
            if not ch.ready() or ch.is_muted():
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
            header, off = parse_request_header(payload)
        except errors.InvalidRequestError as exc:
            log.info("Closing connection %s from %s: invalid request header: %s",
                     cid, ch.socket_description(), exc)
            self._fail(cid, exc)
            return
        # the time the poll read it (the selector's clock, the server's):
        # one clock read less per request
        now = sel.poll_time_ms
        if header.api_key == _SASL_HANDSHAKE:
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
        # ch.server_authentication_session_expired(now), one call less
        expiry = ch.authenticator.server_session_expiration_ms()
        if expiry is not None and now - expiry > 0:
            log.debug("Disconnecting expired channel: %s : %s", ch, header)
            sel.write_queued(cid)
            sel.close(cid)
            sel.record_expired_connection_killed()
            return
        if (self.gateway is not None and not local
                and self.gateway.intercept(ch, header, payload, off, now)):
            return      # forwarded upstream, or queued behind what was
        handler = self.handlers.get(header.api_key)
        api = messages.API.get(header.api_key)
        v = header.api_version
        if header.api_key == messages.API_VERSIONS.api_key:
            lo, hi = ((handler.min_version, handler.max_version) if handler is not None
                      else (0, -1))
            if not (lo <= v <= hi):
                # KIP-511: answer from the header alone with a v0 body listing
                # our ApiVersions range; the connection stays usable.
                log.debug("ApiVersions v%d from %s is not supported; sending v0 "
                          "UNSUPPORTED_VERSION", v, cid)
                sel.send(cid, api_versions_fallback(
                    header.correlation_id,
                    handler.min_version if handler else api.min_version,
                    handler.max_version if handler else api.max_version))
                return
        if handler is None and header.api_key in SASL_API_KEYS and api is not None \
                and api.min_version <= v <= api.max_version:
            # Listed in ApiVersions on every listener and answered as
            # Kafka's KafkaApis does outside SASL authentication.
            handler = Handler(header.api_key, handle_sasl_after_authentication,
                              api.min_version, api.max_version)
        if handler is None or api is None:
            exc = errors.UnsupportedVersionError(
                f"Unsupported API key {header.api_key}")
            log.info("Closing connection %s from %s: no handler for API key %d (version %d)",
                     cid, ch.socket_description(), header.api_key, v)
            self._fail(cid, exc)
            return
        if not (handler.min_version <= v <= handler.max_version):
            exc = errors.UnsupportedVersionError(
                f"{api.name} version {v} is not supported "
                f"(supported: {handler.min_version}-{handler.max_version})")
            log.info("Closing connection %s from %s: %s", cid, ch.socket_description(), exc)
            self._fail(cid, exc)
            return
        try:
            body = api.request.decode(payload, v, off)
        except errors.KChannelError as exc:
            log.info("Closing connection %s from %s: invalid %s v%d request: %s",
                     cid, ch.socket_description(), api.name, v, exc)
            self._fail(cid, exc)
            return
        principal = ch.authenticator.principal()     # ch.principal()
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
            encode = self._response_encoders.get((header.api_key << 16) | v)
            if encode is None:
                encode = self._response_encoders[(header.api_key << 16) | v] = \
                    response_encoder(header.api_key, v, framed=True)
            out = encode(header.correlation_id, response)
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
