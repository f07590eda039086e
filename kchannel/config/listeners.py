"""Named listeners (KIP-103): ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

Parsing and validation follow Kafka's ``SocketServerConfigs.listenerListToEndPoints``,
``CoreUtils.listenerListToEndPoints`` and ``KafkaConfig`` with the same
messages:

* an entry is ``NAME://host:port``; the name is upper-cased (``ListenerName.normalised``);
  an empty host means the wildcard address (stored as ``None``); IPv6 hosts
  are written in brackets; port 0 picks an ephemeral port;
* every listener name must be a key of ``listener.security.protocol.map``;
* listener names must be distinct; ports must be distinct except for one IPv4
  and one IPv6 literal sharing a port (port 0 is exempt);
* ``advertised.listeners`` may repeat ports, must not use ``0.0.0.0``, must
  name only listeners from ``listeners`` and defaults to ``listeners``.
"""
import ipaddress
import re
from dataclasses import dataclass

from kchannel.errors import ConfigError

__all__ = [
    "Endpoint", "parse_listeners", "parse_security_protocol_map", "validate_listeners",
    "validate_advertised_listeners", "format_address", "config_prefix", "mechanism_config_prefix",
    "normalise_listener_name", "DEFAULT_SECURITY_PROTOCOL_MAP", "parse_csv_list",
    "SECURITY_PROTOCOLS", "ClusterNode", "parse_cluster_nodes", "CLUSTER_NODES_CONFIG",
]

# Kafka's SecurityProtocol names.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

CLUSTER_NODES_CONFIG = "kchannel.cluster.nodes"

_URI_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_CSV_SPLIT = re.compile(r"\s*,\s*")

DEFAULT_SECURITY_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}


@dataclass(frozen=True)
class Endpoint:
    """One listener: ``listener_name`` (upper case), ``host`` (None = all
    interfaces), ``port`` (0 = ephemeral), ``security_protocol``."""
    listener_name: str
    host: object
    port: int
    security_protocol: str

    @property
    def connection_string(self):
        """Kafka's ``EndPoint.connectionString``: ``NAME://host:port``."""
        hostport = f":{self.port}" if self.host is None else format_address(self.host, self.port)
        return f"{self.listener_name}://{hostport}"

    @property
    def bind_host(self):
        """Host to bind: the wildcard address when ``host`` is None."""
        return "" if self.host is None else self.host

    @property
    def config_prefix(self):
        return config_prefix(self.listener_name)

    def __str__(self):
        return self.connection_string


def format_address(host, port):
    """``Utils.formatAddress``: brackets around IPv6 literals."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def config_prefix(listener_name):
    """``ListenerName.configPrefix``: ``listener.name.<lower>.``."""
    return f"listener.name.{listener_name.lower()}."


def mechanism_config_prefix(listener_name, mechanism):
    """``ListenerName.saslMechanismConfigPrefix``."""
    return f"{config_prefix(listener_name)}{mechanism.lower()}."


def normalise_listener_name(value):
    if value is None or value.strip() == "":
        raise ConfigError("The provided listener name is null or empty string")
    return value.upper()


def parse_csv_list(text):
    """``Csv.parseCsvList``: split on commas, drop empty items."""
    if not text:
        return []
    return [v for v in _CSV_SPLIT.split(text) if v]


def parse_security_protocol_map(text, key="listener.security.protocol.map"):
    """``Csv.parseCsvMap`` + ``SecurityProtocol.forName`` checks.

    Splits at the last ``:`` of each pair.  Later duplicates win, as in
    Kafka's ``HashMap``.
    """
    result = {}
    if text is None or text == "":
        return result
    items = re.split(r"\s*,\s*", text)
    while items and items[-1] == "":
        items.pop()  # Java's String.split drops trailing empty strings
    for item in items:
        lio = item.rfind(":")
        if lio < 0:
            raise ConfigError(f"Error parsing configuration property '{key}': "
                              f"begin 0, end -1, length {len(item)}", key=key, value=text)
        name = item[:lio].strip()
        proto = item[lio + 1:].strip()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid security protocol `{proto}` defined in {key}", key=key, value=text)
        result[normalise_listener_name(name)] = proto
    return result


def parse_listeners(text, protocol_map, key="listeners"):
    """Parse a listener list into ``[Endpoint]`` (no cross-entry checks).

    Errors carry Kafka's wording, e.g. ``Error creating broker listeners from
    'X': Unable to parse Y to a broker endpoint``.
    """
    text = "" if text is None else text
    endpoints = []
    try:
        for entry in parse_csv_list(text.strip()):
            m = _URI_RE.fullmatch(entry)  # Java Matcher.matches(): whole entry
            if not m:
                raise ConfigError(f"Unable to parse {entry} to a broker endpoint")
            name = normalise_listener_name(m.group(1))
            host = m.group(2) or None
            port = int(m.group(3))
            if not -2 ** 31 <= port < 2 ** 31:
                raise ConfigError(f'For input string: "{m.group(3)}"')
            proto = protocol_map.get(name)
            if proto is None:
                raise ConfigError(f"No security protocol defined for listener {name}")
            endpoints.append(Endpoint(name, host, port, proto))
    except ConfigError as exc:
        raise ConfigError(f"Error creating broker listeners from '{text}': {exc}", key=key, value=text) from None
    return endpoints


def _is_ip(host):
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _is_v4(host):
    try:
        return ipaddress.ip_address(host).version == 4
    except ValueError:
        return False


def _is_v6(host):
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def validate_listeners(endpoints, text, require_distinct_ports=True, key="listeners"):
    """``CoreUtils.listenerListToEndPoints``'s ``validate``."""
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"requirement failed: Each listener must have a different name, listeners: {text}",
                          key=key, value=text)
    by_port = {}
    for e in endpoints:
        if e.port != 0:  # port 0 (ephemeral) may repeat
            by_port.setdefault(e.port, []).append(e)
    for port, eps in by_port.items():
        if len(eps) < 2:
            continue
        with_ip = [e for e in eps if e.host is not None and _is_ip(e.host)]
        without_ip = [e for e in eps if not (e.host is not None and _is_ip(e.host))]
        if require_distinct_ports and len(without_ip) > 1:
            raise ConfigError(f"requirement failed: Each listener must have a different port, listeners: {text}",
                              key=key, value=text)
        if not with_ip or not require_distinct_ports:
            continue
        if len(with_ip) == 2:
            a, b = with_ip[0].host, with_ip[1].host
            msg = ("If you have two listeners on the same port then one needs to be IPv4 and the other IPv6, "
                   f"listeners: {text}, port: {port}")
            if not ((_is_v4(a) and _is_v6(b)) or (_is_v6(a) and _is_v4(b))):
                raise ConfigError("requirement failed: " + msg, key=key, value=text)
            if without_ip:
                raise ConfigError(msg, key=key, value=text)
        elif len(with_ip) > 2:
            raise ConfigError("Each listener must have a different port unless exactly one listener has an IPv4 "
                              f"address and the other IPv6 address, listeners: {text}, port: {port}",
                              key=key, value=text)


def validate_advertised_listeners(advertised, listeners, controller_listener_names=()):
    """KafkaConfig's checks on the advertised broker listeners."""
    ctrl = set(controller_listener_names)
    broker_adv = [e for e in advertised if e.listener_name not in ctrl]
    adv_names = {e.listener_name for e in broker_adv}
    listener_names = {e.listener_name for e in listeners}
    if not adv_names <= listener_names:
        raise ConfigError(
            "requirement failed: advertised.listeners listener names must be equal to or a subset of the ones "
            f"defined in listeners. Found {','.join(sorted(adv_names))}. The valid options based on the current "
            f"configuration are {','.join(sorted(listener_names))}", key="advertised.listeners")
    if any(e.host == "0.0.0.0" for e in advertised):
        raise ConfigError("requirement failed: advertised.listeners cannot use the nonroutable meta-address "
                          "0.0.0.0. Use a routable IP address.", key="advertised.listeners")


# ------------------------------------------------------- kchannel.cluster.nodes
@dataclass(frozen=True)
class ClusterNode:
    """Another broker: ``node_id``, ``endpoints`` {listener name: (host,
    port)}, ``rack`` (None)."""
    node_id: int
    endpoints: tuple          # ((listener_name, host, port), ...)
    rack: object = None

    def endpoint(self, listener_name):
        for name, host, port in self.endpoints:
            if name == listener_name:
                return host, port
        return None

    @property
    def listener_names(self):
        return [e[0] for e in self.endpoints]


def _entry_error(entry, reason):
    return ValueError(f"'{entry}' is not node.id@LISTENER://host:port ({reason})")


def parse_cluster_nodes(value, protocol_map=None):
    """``kchannel.cluster.nodes`` -> ``[ClusterNode]`` sorted by id.

    ``value``: the comma-separated text or a list of entries.  Raises
    ``ValueError`` with the reason for a malformed entry; with
    ``protocol_map`` also for a listener name it does not define (a typo
    would otherwise silently drop the node from every answer)."""
    if value is None:
        return []
    items = parse_csv_list(value.strip()) if isinstance(value, str) else \
        [str(v).strip() for v in value if str(v).strip()]
    nodes = {}
    for entry in items:
        node_text, sep, listener_text = entry.partition("@")
        if not sep:
            raise _entry_error(entry, "no '@'")
        try:
            node_id = int(node_text.strip())
        except ValueError:
            raise _entry_error(entry, f"node id '{node_text}' is not a number") from None
        if node_id < 0:
            raise _entry_error(entry, "node id must be >= 0")
        # Listener syntax as in listeners; any name is accepted here, the
        # protocol map check is separate so its message can name the node.
        try:
            ep = parse_listeners(listener_text.strip(), _AnyProtocol(), CLUSTER_NODES_CONFIG)
        except ConfigError as exc:
            raise _entry_error(entry, str(exc)) from None
        if len(ep) != 1:
            raise _entry_error(entry, "exactly one listener per entry")
        ep = ep[0]
        if ep.host is None or ep.host in ("0.0.0.0", "::"):
            raise _entry_error(entry, "a routable host is required")
        if not 0 < ep.port <= 65535:
            raise _entry_error(entry, f"port {ep.port} is not 1-65535")
        if protocol_map is not None and ep.listener_name not in protocol_map:
            raise ValueError(f"listener {ep.listener_name} of node {node_id} is not defined in "
                             f"listener.security.protocol.map")
        eps = nodes.setdefault(node_id, [])
        if any(e[0] == ep.listener_name for e in eps):
            raise ValueError(f"node {node_id} has listener {ep.listener_name} more than once")
        eps.append((ep.listener_name, ep.host, ep.port))
    return [ClusterNode(i, tuple(eps)) for i, eps in sorted(nodes.items())]


class _AnyProtocol(dict):
    """A protocol map that knows every listener name (syntax-only parse)."""

    def get(self, key, default=None):
        return "PLAINTEXT"
