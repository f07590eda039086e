"""Listeners of a :class:`kchannel.server.server.Server` and the server
properties it is built from: :class:`Listener`, the listener forms the
keyword API takes, and the ``ServerConfig`` those keywords stand for."""
from ..config import ServerConfig
from ..config.listeners import (DEFAULT_SECURITY_PROTOCOL_MAP, Endpoint, format_address,
                               parse_security_protocol_map)

# Kafka's max.connections default (Int.MaxValue): no limit.
_UNLIMITED = 2147483647


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
