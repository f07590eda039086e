"""The configuration table: every server and client key kchannel reads.

One row per key (two rows when Kafka's server and client defaults differ,
e.g. ``connections.max.idle.ms``): Kafka name, type, default, validator,
importance, scope (``server``/``client``/``both``), condensed Kafka doc text,
and whether the key is kchannel-specific.  :data:`SERVER_CONFIG_DEF` and
:data:`CLIENT_CONFIG_DEF` are views of the table.

Parsing mirrors ``org.apache.kafka.common.config.ConfigDef.parseType``:
strings are trimmed (passwords too), lists split on ``\\s*,\\s*``, numbers
must fit their Java type, and failures raise ``ConfigError`` with Kafka's
``Invalid value X for configuration KEY: REASON`` text.

Key stores: Kafka's ``ssl.keystore.type``/``ssl.truststore.type`` default is
``JKS`` and stays so here.  kchannel reads PKCS12 and PEM.  As Java's
``keystore.type.compat`` lets a ``JKS``-typed store be a PKCS12 file, a
``JKS``-typed location holding PKCS12 is accepted (and handed to the TLS
layer as ``PKCS12``); a real JKS file (magic ``FEEDFEED``) is refused with a
message naming the key and the ``keytool`` conversion.
"""
import enum
import importlib
import re
from dataclasses import dataclass

from kchannel.config.listeners import SECURITY_PROTOCOLS, parse_cluster_nodes
from kchannel.config.types import Password
from kchannel.errors import ConfigError

__all__ = [
    "Type", "Importance", "ConfigKey", "ConfigDef", "NO_DEFAULT", "TABLE",
    "SERVER_CONFIG_DEF", "CLIENT_CONFIG_DEF", "Range", "ValidString",
    "CaseInsensitiveValidString", "ValidList", "SECURITY_PROTOCOLS",
    "KAFKA_BUILTIN_CLASSES", "resolve_class", "invalid", "java_list_str", "parse_ip_overrides",
]


class Type(enum.Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"

    def __str__(self):
        return self.value


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"

    def __str__(self):
        return self.value


class _NoDefault:
    def __repr__(self):
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()

def java_str(value):
    """``String.valueOf`` of a parsed value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return java_list_str(value)
    return str(value)


def java_list_str(values):
    """Java ``List.toString``: ``[a, b]``."""
    return "[" + ", ".join(java_str(v) for v in values) + "]"


def invalid(name, value, reason=None):
    """Kafka's ``ConfigException(name, value, message)``."""
    msg = f"Invalid value {java_str(value)} for configuration {name}"
    if reason:
        msg += f": {reason}"
    return ConfigError(msg, key=name, value=value)


# ---------------------------------------------------------------- validators
class Range:
    def __init__(self, min=None, max=None):
        self.min, self.max = min, max

    @classmethod
    def at_least(cls, n):
        return cls(n, None)

    @classmethod
    def between(cls, a, b):
        return cls(a, b)

    def __call__(self, name, value):
        if value is None:
            raise invalid(name, None, "Value must be non-null")
        if self.min is not None and value < self.min:
            raise invalid(name, value, f"Value must be at least {java_str(self.min)}")
        if self.max is not None and value > self.max:
            raise invalid(name, value, f"Value must be no more than {java_str(self.max)}")

    def __str__(self):
        if self.max is None:
            return f"[{self.min},...]"
        if self.min is None:
            return f"[...,{self.max}]"
        return f"[{self.min},...,{self.max}]"


class ValidString:
    def __init__(self, *valid):
        self.valid = list(valid)

    def __call__(self, name, value):
        if value not in self.valid:
            raise invalid(name, value, "String must be one of: " + ", ".join(self.valid))

    def __str__(self):
        return java_list_str(self.valid)


class CaseInsensitiveValidString:
    def __init__(self, *valid):
        self.valid = list(valid)
        self._upper = {v.upper() for v in valid}

    def __call__(self, name, value):
        if value is None or value.upper() not in self._upper:
            raise invalid(name, value, "String must be one of (case insensitive): " + ", ".join(self.valid))

    def __str__(self):
        return "(case insensitive) " + java_list_str(self.valid)


class ValidList:
    """Every list element must be one of ``valid`` (Kafka's ``ValidList``)."""

    def __init__(self, *valid):
        self.valid = list(valid)

    def __call__(self, name, value):
        for v in value or ():
            if v not in self.valid:
                raise invalid(name, v, "String must be one of: " + ", ".join(self.valid))

    def __str__(self):
        return java_list_str(self.valid)


class NonEmptyString:
    def __call__(self, name, value):
        if value is not None and value.strip() == "":
            raise invalid(name, value, "String must be non-empty")

    def __str__(self):
        return "non-empty string"


class _ClusterNodes:
    """``kchannel.cluster.nodes`` entries: ``node.id@LISTENER://host:port``."""

    def __call__(self, name, value):
        try:
            parse_cluster_nodes(value)
        except ValueError as exc:
            raise invalid(name, value, str(exc)) from None

    def __str__(self):
        return "node.id@LISTENER://host:port,..."


_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]*\Z")


def parse_ip_overrides(value, name="max.connections.per.ip.overrides"):
    """``max.connections.per.ip.overrides`` -> ``{host: max connections}``.

    Kafka's parsing (``Csv.parseCsvMap``: entries split on commas, each at
    its last colon, so IPv6 literals work) and checks (``KafkaConfig``: counts
    are integers, hosts have valid characters)."""
    out = {}
    text = (value or "").strip()
    if not text:
        return out
    for entry in _COMMA.split(text):
        host, sep, count = entry.rpartition(":")
        host, count = host.strip(), count.strip()
        if not sep or not _INT_RE.match(count) or not -2 ** 31 <= int(count) < 2 ** 31:
            raise ConfigError(f"Error parsing configuration property '{name}': entry '{entry}' "
                              "is not host:count with an integer count", key=name, value=value)
        out[host] = int(count)
    bad = [h for h in out if not _VALID_HOST.match(h)]
    if bad:
        raise ConfigError(f"{name} contains invalid addresses : {','.join(bad)}",
                          key=name, value=value)
    return out


class _IpOverrides:
    def __call__(self, name, value):
        parse_ip_overrides(value, name)

    def __str__(self):
        return "host:count,..."


class _StoreType:
    """kchannel reads PKCS12 and PEM; JKS is accepted as a *declared* type
    (Kafka's default) and checked against the file's content later."""

    VALID = ("JKS", "PKCS12", "PEM")

    def __call__(self, name, value):
        if value is None:
            return
        if value.upper() not in self.VALID:
            raise invalid(name, value, "kchannel supports key store types PKCS12 and PEM "
                                       "(JKS only when the file is actually PKCS12)")

    def __str__(self):
        return "[PKCS12, PEM, JKS (PKCS12 content only)]"


# ------------------------------------------------------------------ classes
# Kafka's own implementation classes that may appear in pasted configs; they
# select kchannel's built-in equivalent (resolve_class returns None).
KAFKA_BUILTIN_CLASSES = frozenset({
    "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory",
    "org.apache.kafka.common.security.authenticator.DefaultLogin",
    "org.apache.kafka.common.security.kerberos.KerberosLogin",
    "org.apache.kafka.common.security.oauthbearer.internals.OAuthBearerRefreshingLogin",
    "org.apache.kafka.common.security.plain.internals.PlainServerCallbackHandler",
    "org.apache.kafka.common.security.scram.internals.ScramServerCallbackHandler",
    "org.apache.kafka.common.security.authenticator.SaslServerCallbackHandler",
    "org.apache.kafka.common.security.authenticator.SaslClientCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
})


def resolve_class(value):
    """Python class for a CLASS value; None for Kafka's built-in class names
    (use kchannel's equivalent) and for None.  Raises ``ImportError``."""
    if value is None or isinstance(value, type):
        return value
    if value in KAFKA_BUILTIN_CLASSES:
        return None
    module_name, _, attr = value.rpartition(".")
    if not module_name:
        raise ImportError(value)
    try:
        return getattr(importlib.import_module(module_name), attr)
    except AttributeError as exc:
        raise ImportError(value) from exc


# ------------------------------------------------------------------ parsing
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_COMMA = re.compile(r"\s*,\s*")
_LIMITS = {Type.INT: 2 ** 31, Type.SHORT: 2 ** 15, Type.LONG: 2 ** 63}
_TYPE_WORDS = {Type.INT: "a 32-bit integer", Type.SHORT: "a 16-bit integer (short)",
               Type.LONG: "a 64-bit integer (long)"}


def _class_name(value):
    return type(value).__module__ + "." + type(value).__qualname__


def parse_type(name, value, type_):
    """``ConfigDef.parseType``: raw value (str or typed) -> typed value."""
    if value is None:
        return None
    trimmed = value.strip() if isinstance(value, str) else None
    if type_ is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if trimmed is not None:
            if trimmed.lower() == "true":
                return True
            if trimmed.lower() == "false":
                return False
        raise invalid(name, value, "Expected value to be either true or false")
    if type_ is Type.PASSWORD:
        if isinstance(value, Password):
            return value
        if trimmed is not None:
            return Password(trimmed)
        # The value is the secret (or carries it, e.g. a list holding it):
        # name only its type so the error text never shows it.
        raise invalid(name, Password(value),
                      f"Expected value to be a string, but it was a {_class_name(value)}")
    if type_ is Type.STRING:
        if trimmed is not None:
            return trimmed
        raise invalid(name, value, f"Expected value to be a string, but it was a {_class_name(value)}")
    if type_ in (Type.INT, Type.SHORT, Type.LONG):
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif trimmed is not None:
            if not _INT_RE.match(trimmed):
                raise invalid(name, value, f"Not a number of type {type_}")
            n = int(trimmed)
        else:
            raise invalid(name, value, f"Expected value to be {_TYPE_WORDS[type_]}, "
                                       f"but it was a {_class_name(value)}")
        lim = _LIMITS[type_]
        if not -lim <= n < lim:
            raise invalid(name, value, f"Not a number of type {type_}")
        return n
    if type_ is Type.DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if trimmed is not None:
            try:
                return float(trimmed)
            except ValueError:
                raise invalid(name, value, f"Not a number of type {type_}") from None
        raise invalid(name, value, f"Expected value to be a double, but it was a {_class_name(value)}")
    if type_ is Type.LIST:
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
        if trimmed is not None:
            return [] if trimmed == "" else _COMMA.split(trimmed)
        raise invalid(name, value, "Expected a comma separated list.")
    if type_ is Type.CLASS:
        if isinstance(value, type):
            return value
        if trimmed is not None:
            try:
                resolve_class(trimmed)
            except ImportError:
                raise invalid(name, value, f"Class {value} could not be found.") from None
            return trimmed
        raise invalid(name, value, "Expected a Class instance or class name.")
    raise AssertionError(type_)


# -------------------------------------------------------------------- table
@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: Type
    default: object
    validator: object
    importance: Importance
    doc: str
    scope: str = "both"          # "server", "client" or "both"
    kchannel_specific: bool = False
    # False: Kafka's key is accepted and validated but kchannel does nothing
    # with it; setting it logs a WARNING at config load (warn_unsupported).
    supported: bool = True

    @property
    def has_default(self):
        return self.default is not NO_DEFAULT

    def parse(self, raw, name=None):
        """Parse and validate ``raw``; ``name`` is the key as written (it may
        carry a listener prefix) and appears in error messages."""
        name = name or self.name
        value = parse_type(name, raw, self.type)
        if self.validator is not None and value is not None:
            self.validator(name, value)
        return value

    def default_value(self):
        if not self.has_default:
            return None
        value = parse_type(self.name, self.default, self.type)
        if isinstance(value, list):
            value = list(value)
        return value


H, M, L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
S, I, SH, LG, B, LI, P, C, D = (Type.STRING, Type.INT, Type.SHORT, Type.LONG, Type.BOOLEAN,
                                Type.LIST, Type.PASSWORD, Type.CLASS, Type.DOUBLE)
_atl = Range.at_least

_SSL_CLIENT_AUTH = ValidString("required", "requested", "none")

# authorizer.class.name values naming kchannel's built-in authorizer (Kafka's
# StandardAuthorizer semantics): Kafka's class names and kchannel's own path.
AUTHORIZER_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "kchannel.security.authorizer.StandardAuthorizer",
    "kchannel.security.authorizer.standard.StandardAuthorizer",
)


class _AuthorizerClass:
    """Empty (no authorizer) or a name of the built-in authorizer: any other
    class stops the server (a misconfigured authorizer fails closed)."""

    def __call__(self, name, value):
        if str(value or "").strip() and str(value).strip() not in AUTHORIZER_CLASS_NAMES:
            raise invalid(name, value, "kchannel has one built-in authorizer, with Kafka's "
                          "StandardAuthorizer semantics: use "
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")

    def __str__(self):
        return java_list_str(list(AUTHORIZER_CLASS_NAMES))

# (name, type, default, validator, importance, scope, doc[, kchannel_specific])
_ROWS = [
    # ---- broker identity and listeners (KafkaConfig / SocketServerConfigs)
    ("node.id", I, -1, None, H, "server",
     "The node ID associated with the roles this process is playing. Same value as broker.id when both are set."),
    ("broker.id", I, -1, None, H, "server",
     "The broker id for this server. Kept equal to node.id (Kafka: 'You must set node.id to the same value as broker.id')."),
    ("process.roles", LI, "", ValidList("broker", "controller"), H, "server",
     "The roles that this process plays: 'broker', 'controller', or 'broker,controller'."),
    ("controller.listener.names", LI, "", None, H, "server",
     "A comma-separated list of the names of the listeners used by the controller."),
    ("listeners", S, "PLAINTEXT://:9092", None, H, "server",
     "Listener List - Comma-separated list of URIs we will listen on and the listener names. If the listener "
     "name is not a security protocol, listener.security.protocol.map must also be set. Listener names and port "
     "numbers must be unique unless one listener is an IPv4 address and the other an IPv6 address (for the same "
     "port). Specify hostname as 0.0.0.0 to bind to all interfaces. Leave hostname empty to bind to default "
     "interface. Examples: PLAINTEXT://myhost:9092,SSL://:9091 CLIENT://0.0.0.0:9092,REPLICATION://localhost:9093"),
    ("advertised.listeners", S, None, None, H, "server",
     "Listeners to publish for clients to use, if different than the listeners config property. If this is not "
     "set, the value for listeners will be used. Unlike listeners, it is not valid to advertise the 0.0.0.0 "
     "meta-address. Also unlike listeners, there can be duplicated ports in this property."),
    ("listener.security.protocol.map", S,
     "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None, L, "server",
     "Map between listener names and security protocols, e.g. INTERNAL:SSL,EXTERNAL:SSL. Each listener name "
     "should only appear once in the map. Security settings can be set per listener with the prefix "
     "listener.name.<listener name lower case>. (e.g. listener.name.internal.ssl.keystore.location); if the "
     "prefixed config is not set, the generic config is used."),
    ("inter.broker.listener.name", S, None, None, M, "server",
     "Name of listener used for communication between brokers. If this is unset, the listener name is defined "
     "by security.inter.broker.protocol. It is an error to set this and security.inter.broker.protocol at the "
     "same time."),
    ("security.inter.broker.protocol", S, "PLAINTEXT", ValidString(*SECURITY_PROTOCOLS), M, "server",
     "Security protocol used to communicate between brokers. It is an error to set this and "
     "inter.broker.listener.name at the same time."),
    ("control.plane.listener.name", S, None, None, H, "server",
     "Name of listener used for communication between controller and brokers (ZooKeeper mode)."),
    ("socket.request.max.bytes", I, 104857600, _atl(1), H, "server",
     "The maximum number of bytes in a socket request"),
    ("socket.send.buffer.bytes", I, 102400, None, H, "server",
     "The SO_SNDBUF buffer of the socket server sockets. If the value is -1, the OS default will be used."),
    ("socket.receive.buffer.bytes", I, 102400, None, H, "server",
     "The SO_RCVBUF buffer of the socket server sockets. If the value is -1, the OS default will be used."),
    ("socket.listen.backlog.size", I, 50, _atl(1), M, "server",
     "The maximum number of pending connections on the socket."),
    ("num.network.threads", I, 1, _atl(1), H, "server",
     "The number of threads that the server uses for receiving requests from the network and sending "
     "responses to the network. kchannel serve starts that many worker processes sharing each listener "
     "(SO_REUSEPORT; Linux only, one process elsewhere); Kafka's default is 3, kchannel's 1."),
    ("max.connections", I, 2147483647, _atl(0), M, "server",
     "The maximum number of connections we allow in the broker at any time. Listener-level limits may be set "
     "with the listener prefix, e.g. listener.name.internal.max.connections."),
    ("max.connections.per.ip", I, 2147483647, _atl(0), M, "server",
     "The maximum number of connections we allow from each ip address. This can be set to 0 if there are "
     "overrides configured using max.connections.per.ip.overrides property. New connections from the ip address "
     "are dropped if the limit is reached."),
    ("max.connections.per.ip.overrides", S, "", _IpOverrides(), M, "server",
     "A comma-separated list of per-ip or hostname overrides to the default maximum number of connections. "
     "An example value is \"hostName:100,127.0.0.1:200\""),
    ("max.connection.creation.rate", I, 2147483647, _atl(0), M, "server",
     "The maximum connection creation rate we allow in the broker at any time. Listener-level limits may also "
     "be configured by prefixing the config name with the listener prefix, for example, "
     "listener.name.internal.max.connection.creation.rate. New connections will be throttled if either the "
     "listener or the broker limit is reached, with the exception of inter-broker listener. Connections on the "
     "inter-broker listener will be throttled only when the listener-level rate limit is reached."),
    ("quota.window.num", I, 11, _atl(1), L, "server",
     "The number of samples to retain in memory for client quotas. kchannel uses it for the connection "
     "creation rate quotas."),
    ("quota.window.size.seconds", I, 1, _atl(1), L, "server",
     "The time span of each sample for client quotas. kchannel uses it for the connection creation rate "
     "quotas."),
    ("connections.max.idle.ms", LG, 600000, None, M, "server",
     "Idle connections timeout: the server socket processor threads close the connections that idle more than this"),
    ("connections.max.idle.ms", LG, 540000, None, M, "client",
     "Close idle connections after the number of milliseconds specified by this config."),
    ("connection.failed.authentication.delay.ms", I, 100, _atl(0), L, "server",
     "Connection close delay on failed authentication: the time (in milliseconds) by which connection close "
     "will be delayed on authentication failure. Must be less than connections.max.idle.ms."),
    ("connections.max.reauth.ms", LG, 0, None, M, "server",
     "When explicitly set to a positive number (the default is 0, not a positive number), a session lifetime "
     "that will not exceed the configured value will be communicated to v2.2.0 or later clients when they "
     "authenticate. The broker disconnects any such connection that is not re-authenticated within the session "
     "lifetime and is then used for any purpose other than re-authentication. Names can optionally be prefixed "
     "with listener prefix and SASL mechanism name in lower-case, e.g. "
     "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=3600000"),
    ("sasl.server.max.receive.size", I, 524288, None, M, "server",
     "The maximum receive size allowed before and during initial SASL authentication. Default 512KB."),
    ("principal.builder.class", C,
     "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", None, M, "server",
     "The fully qualified name of a class implementing KafkaPrincipalBuilder, used to build the KafkaPrincipal "
     "used during authorization. In kchannel: a Python dotted path 'package.module.Class', or Kafka's default "
     "class name for the built-in builder."),
    ("broker.rack", S, None, None, M, "server",
     "Rack of the broker, reported in Metadata responses."),
    ("log.dirs", S, None, None, H, "server",
     "A comma-separated list of the directories where the log data is stored. If not set, log.dir is used. "
     "kchannel keeps its SQLite stores (SCRAM credentials, delegation tokens, cluster id) in the first one."),
    ("log.dir", S, "/tmp/kafka-logs", None, H, "server",
     "The directory in which the log data is kept (supplemental for log.dirs property)"),
    ("super.users", S, "", None, M, "server",
     "List of super users: principals allowed every operation, separated by semicolons "
     "(e.g. User:admin;User:ops). kchannel consults it for the SCRAM credential APIs (only super users may "
     "describe or alter credentials) and delegation-token permissions."),
    ("authorizer.class.name", S, "", _AuthorizerClass(), L, "server",
     "The fully qualified name of a class that implements org.apache.kafka.server.authorizer.Authorizer "
     "interface, which is used by the broker for authorization. kchannel: "
     "org.apache.kafka.metadata.authorizer.StandardAuthorizer (also kafka.security.authorizer.AclAuthorizer) "
     "selects its built-in authorizer with StandardAuthorizer semantics, checked on every request a gateway "
     "forwards and on CreateAcls/DescribeAcls/DeleteAcls; any other name stops the server. Empty: no ACLs."),
    ("allow.everyone.if.no.acl.found", B, False, None, M, "server",
     "With authorizer.class.name: allow a request on a resource that no ACL applies to (default false: "
     "denied, as Kafka's StandardAuthorizer)."),
    ("kchannel.acl.store", S, "sqlite", ValidString("sqlite", "memory", "zookeeper"), L, "server",
     "kchannel-specific: where the authorizer's ACLs live: 'sqlite' (acls.db in the first log directory, "
     "shared by the worker processes of num.network.threads), 'memory' (this process only) or 'zookeeper' "
     "(zookeeper.connect).", True),
    ("zookeeper.connect", S, None, None, H, "server",
     "ZooKeeper connection string (host:port[,host:port][/chroot]); used by kchannel's ZooKeeper delegation "
     "token store."),
    ("zookeeper.session.timeout.ms", I, 18000, None, H, "server", "Zookeeper session timeout"),

    # ---- delegation tokens (DelegationTokenManagerConfigs)
    ("delegation.token.secret.key", P, None, None, M, "server",
     "Secret key to generate and verify delegation tokens. The same key must be configured across all the "
     "brokers. If the key is not set or set to empty string, brokers will disable the delegation token support."),
    ("delegation.token.master.key", P, None, None, M, "server",
     "DEPRECATED: an alias for delegation.token.secret.key (used only when that is unset)."),
    ("delegation.token.max.lifetime.ms", LG, 604800000, _atl(1), M, "server",
     "The token has a maximum lifetime beyond which it cannot be renewed anymore. Default value 7 days."),
    ("delegation.token.expiry.time.ms", LG, 86400000, _atl(1), M, "server",
     "The token validity time in milliseconds before the token needs to be renewed. Default value 1 day."),
    ("delegation.token.expiry.check.interval.ms", LG, 3600000, _atl(1), L, "server",
     "Scan interval to remove expired delegation tokens."),

    # ---- client (CommonClientConfigs / AdminClientConfig)
    ("bootstrap.servers", LI, "", None, H, "client",
     "A list of host/port pairs used to establish the initial connection to the Kafka cluster, in the form "
     "host1:port1,host2:port2,...."),
    ("client.id", S, "", None, M, "client",
     "An id string to pass to the server when making requests, to track the source of requests beyond just ip/port."),
    ("security.protocol", S, "PLAINTEXT", CaseInsensitiveValidString(*SECURITY_PROTOCOLS), M, "client",
     "Protocol used to communicate with brokers. Valid values are: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."),
    ("request.timeout.ms", I, 30000, _atl(0), M, "client",
     "The maximum amount of time the client will wait for the response of a request."),
    ("reconnect.backoff.ms", LG, 50, _atl(0), L, "client",
     "The base amount of time to wait before attempting to reconnect to a given host."),
    ("reconnect.backoff.max.ms", LG, 1000, _atl(0), L, "client",
     "The maximum amount of time in milliseconds to wait when reconnecting to a broker that has repeatedly "
     "failed to connect."),
    ("socket.connection.setup.timeout.ms", LG, 10000, None, M, "client",
     "The amount of time the client will wait for the socket connection to be established."),
    ("socket.connection.setup.timeout.max.ms", LG, 30000, None, M, "client",
     "The maximum amount of time the client will wait for the socket connection to be established."),
    ("send.buffer.bytes", I, 131072, _atl(-1), M, "client",
     "The size of the TCP send buffer (SO_SNDBUF) to use when sending data. -1 = OS default."),
    ("receive.buffer.bytes", I, 65536, _atl(-1), M, "client",
     "The size of the TCP receive buffer (SO_RCVBUF) to use when reading data. -1 = OS default."),
    ("sasl.mechanism", S, "GSSAPI", None, M, "client",
     "SASL mechanism used for client connections. GSSAPI is the default mechanism."),

    # ---- SSL (SslConfigs / BrokerSecurityConfigs)
    ("ssl.protocol", S, "TLSv1.3", None, M, "both",
     "The SSL protocol used to generate the SSLContext. Default 'TLSv1.3'. With the default value for this "
     "config and ssl.enabled.protocols, clients downgrade to 'TLSv1.2' if the server does not support 'TLSv1.3'."),
    ("ssl.provider", S, None, None, M, "both", "The name of the security provider used for SSL connections."),
    ("ssl.cipher.suites", LI, "", None, M, "server",
     "A list of cipher suites. By default all the available cipher suites are supported."),
    ("ssl.cipher.suites", LI, None, None, L, "client",
     "A list of cipher suites. By default all the available cipher suites are supported."),
    ("ssl.enabled.protocols", LI, "TLSv1.2,TLSv1.3", None, M, "both",
     "The list of protocols enabled for SSL connections. Default 'TLSv1.2,TLSv1.3'."),
    ("ssl.keystore.type", S, "JKS", _StoreType(), M, "both",
     "The file format of the key store file. kchannel supports PKCS12 and PEM; Kafka's default JKS is accepted "
     "when the file is actually PKCS12 (as Java's keystore.type.compat allows)."),
    ("ssl.keystore.location", S, None, None, H, "both",
     "The location of the key store file. Optional for client; used for two-way authentication."),
    ("ssl.keystore.password", P, None, None, H, "both",
     "The store password for the key store file. Not supported for PEM format."),
    ("ssl.key.password", P, None, None, H, "both",
     "The password of the private key in the key store file or the PEM key specified in 'ssl.keystore.key'."),
    ("ssl.keystore.key", P, None, None, H, "both",
     "Private key in the format specified by 'ssl.keystore.type' (PEM with PKCS#8 keys). If the key is "
     "encrypted, the key password must be specified using 'ssl.key.password'"),
    ("ssl.keystore.certificate.chain", P, None, None, H, "both",
     "Certificate chain in the format specified by 'ssl.keystore.type' (PEM: a list of X.509 certificates)"),
    ("ssl.truststore.certificates", P, None, None, H, "both",
     "Trusted certificates in the format specified by 'ssl.truststore.type' (PEM X.509 certificates)."),
    ("ssl.truststore.type", S, "JKS", _StoreType(), M, "both",
     "The file format of the trust store file. kchannel supports PKCS12 and PEM (JKS: see ssl.keystore.type)."),
    ("ssl.truststore.location", S, None, None, H, "both", "The location of the trust store file."),
    ("ssl.truststore.password", P, None, None, H, "both",
     "The password for the trust store file. Not supported for PEM format."),
    ("ssl.keymanager.algorithm", S, "SunX509", None, L, "both",
     "The algorithm used by key manager factory for SSL connections (accepted and ignored by kchannel)."),
    ("ssl.trustmanager.algorithm", S, "PKIX", None, L, "both",
     "The algorithm used by trust manager factory for SSL connections (accepted and ignored by kchannel)."),
    ("ssl.endpoint.identification.algorithm", S, "https", None, L, "both",
     "The endpoint identification algorithm to validate server hostname using server certificate. "
     "Empty disables host name verification."),
    ("ssl.secure.random.implementation", S, None, None, L, "both",
     "The SecureRandom PRNG implementation to use for SSL cryptography operations (ignored by kchannel)."),
    ("ssl.engine.factory.class", C, None, None, L, "both",
     "The class providing SSLEngine objects; kchannel accepts only Kafka's DefaultSslEngineFactory or a Python "
     "dotted path."),
    ("ssl.client.auth", S, "none", _SSL_CLIENT_AUTH, M, "server",
     "Configures the broker to request client authentication: required, requested or none. For SASL_SSL "
     "listeners only the listener-prefixed setting applies."),
    ("ssl.principal.mapping.rules", S, "DEFAULT", None, L, "server",
     "A list of rules for mapping from distinguished name from the client certificate to short name. By "
     "default, the distinguished name of the X.500 certificate is the principal."),
    ("ssl.allow.dn.changes", B, False, None, L, "server",
     "Whether changes to the certificate distinguished name are allowed during a dynamic reconfiguration."),
    ("ssl.allow.san.changes", B, False, None, L, "server",
     "Whether changes to the certificate subject alternative names are allowed during a dynamic reconfiguration."),

    # ---- SASL (SaslConfigs / BrokerSecurityConfigs)
    ("sasl.enabled.mechanisms", LI, "GSSAPI", None, M, "server",
     "The list of SASL mechanisms enabled in the Kafka server. Only GSSAPI is enabled by default."),
    ("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", None, M, "server",
     "SASL mechanism used for inter-broker communication. Default is GSSAPI."),
    ("sasl.jaas.config", P, None, None, M, "both",
     "JAAS login context parameters for SASL connections in the format used by JAAS configuration files: "
     "loginModuleClass controlFlag (optionName=optionValue)*;. For brokers, the config must be prefixed with "
     "listener prefix and SASL mechanism name in lower-case, e.g. "
     "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=com.example.ScramLoginModule required;"),
    ("sasl.server.callback.handler.class", C, None, None, M, "server",
     "A SASL server callback handler class. Must be prefixed with listener prefix and SASL mechanism name in "
     "lower-case, e.g. listener.name.sasl_ssl.plain.sasl.server.callback.handler.class=mypkg.PlainHandler"),
    ("sasl.client.callback.handler.class", C, None, None, M, "both",
     "The fully qualified name of a SASL client callback handler class."),
    ("sasl.login.callback.handler.class", C, None, None, M, "both",
     "The fully qualified name of a SASL login callback handler class. For brokers, it must be prefixed with "
     "listener prefix and SASL mechanism name in lower-case."),
    ("sasl.login.class", C, None, None, M, "both",
     "The fully qualified name of a class that implements the Login interface. For brokers, it must be "
     "prefixed with listener prefix and SASL mechanism name in lower-case."),
    ("sasl.kerberos.service.name", S, None, None, M, "both",
     "The Kerberos principal name that Kafka runs as. This can be defined either in Kafka's JAAS config or in "
     "Kafka's config."),
    ("sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit", None, L, "both", "Kerberos kinit command path."),
    ("sasl.kerberos.ticket.renew.window.factor", D, 0.80, None, L, "both",
     "Login thread will sleep until the specified window factor of time from last refresh to ticket's expiry "
     "has been reached, at which time it will try to renew the ticket."),
    ("sasl.kerberos.ticket.renew.jitter", D, 0.05, None, L, "both",
     "Percentage of random jitter added to the renewal time."),
    ("sasl.kerberos.min.time.before.relogin", LG, 60000, None, L, "both",
     "Login thread sleep time between refresh attempts."),
    ("sasl.kerberos.principal.to.local.rules", LI, "DEFAULT", None, M, "server",
     "A list of rules for mapping from principal names to short names. By default, principal names of the "
     "form {username}/{hostname}@{REALM} are mapped to {username}."),
    ("sasl.login.refresh.window.factor", D, 0.80, Range.between(0.5, 1.0), L, "both",
     "Login refresh thread will sleep until the specified window factor relative to the credential's lifetime "
     "has been reached. Legal values are between 0.5 (50%) and 1.0 (100%). Currently applies only to OAUTHBEARER."),
    ("sasl.login.refresh.window.jitter", D, 0.05, Range.between(0.0, 0.25), L, "both",
     "The maximum amount of random jitter relative to the credential's lifetime. Legal values are between 0 "
     "and 0.25 (25%). Currently applies only to OAUTHBEARER."),
    ("sasl.login.refresh.min.period.seconds", SH, 60, Range.between(0, 900), L, "both",
     "The desired minimum time for the login refresh thread to wait before refreshing a credential, in "
     "seconds. Legal values are between 0 and 900. Currently applies only to OAUTHBEARER."),
    ("sasl.login.refresh.buffer.seconds", SH, 300, Range.between(0, 3600), L, "both",
     "The amount of buffer time before credential expiration to maintain when refreshing a credential, in "
     "seconds. Legal values are between 0 and 3600. Currently applies only to OAUTHBEARER."),
    ("sasl.login.connect.timeout.ms", I, None, None, L, "both",
     "The (optional) value in milliseconds for the external authentication provider connection timeout."),
    ("sasl.login.read.timeout.ms", I, None, None, L, "both",
     "The (optional) value in milliseconds for the external authentication provider read timeout."),
    ("sasl.login.retry.backoff.max.ms", LG, 10000, None, L, "both",
     "The (optional) maximum wait between login attempts to the external authentication provider."),
    ("sasl.login.retry.backoff.ms", LG, 100, None, L, "both",
     "The (optional) initial wait between login attempts to the external authentication provider."),
    ("sasl.oauthbearer.scope.claim.name", S, "scope", None, L, "both",
     "The OAuth claim for the scope, often named 'scope'."),
    ("sasl.oauthbearer.sub.claim.name", S, "sub", None, L, "both",
     "The OAuth claim for the subject, often named 'sub'."),
    ("sasl.oauthbearer.token.endpoint.url", S, None, None, M, "both",
     "The URL for the OAuth/OIDC identity provider (token endpoint URL, or a file containing a JWT)."),
    ("sasl.oauthbearer.jwks.endpoint.url", S, None, None, M, "both",
     "The OAuth/OIDC provider URL from which the provider's JWKS can be retrieved (HTTP(S) or file)."),
    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", LG, 3600000, None, L, "both",
     "The (optional) value in milliseconds for the broker to wait between refreshing its JWKS cache."),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", LG, 10000, None, L, "both",
     "The (optional) maximum wait between attempts to retrieve the JWKS."),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", LG, 100, None, L, "both",
     "The (optional) initial wait between JWKS retrieval attempts."),
    ("sasl.oauthbearer.clock.skew.seconds", I, 30, None, L, "both",
     "The (optional) value in seconds to allow for differences between the time of the OAuth/OIDC identity "
     "provider and the broker."),
    ("sasl.oauthbearer.expected.audience", LI, None, None, L, "both",
     "The (optional) comma-delimited list of audiences the JWT's 'aud' claim must match."),
    ("sasl.oauthbearer.expected.issuer", S, None, None, L, "both",
     "The (optional) issuer the JWT's 'iss' claim must match exactly."),
    ("sasl.oauthbearer.header.urlencode", B, False, None, L, "both",
     "Whether the OAuth client URL-encodes client_id and client_secret in the authorization header."),

    # ---- kchannel-specific
    ("java.security.auth.login.config", S, None, None, M, "both",
     "kchannel-specific: path of a JAAS configuration file (the Java system property of that name, accepted as "
     "a config key).", True),
    ("org.apache.kafka.disallowed.login.modules", LI,
     "com.sun.security.auth.module.JndiLoginModule,com.sun.security.auth.module.LdapLoginModule", None, L, "both",
     "kchannel-specific: login modules refused in JAAS configuration (Kafka's system property of that name).",
     True),
    ("enable.ssl.certificate.verification", B, True, None, M, "client",
     "kchannel-specific (librdkafka's name): false disables verification of the broker's certificate chain. "
     "For testing only.", True),
    ("kchannel.sasl.kerberos.domain.name", S, None, None, L, "client",
     "kchannel-specific (kafka-python's sasl_kerberos_domain_name): host name used in the broker's Kerberos "
     "service principal instead of the connected host.", True),
    ("kchannel.cluster.id", S, None, NonEmptyString(), M, "server",
     "kchannel-specific: cluster id reported in Metadata/DescribeCluster responses. If unset it is read from "
     "(or created in) the first log directory.", True),
    ("kchannel.cluster.nodes", LI, "", _ClusterNodes(), M, "server",
     "kchannel-specific: the other brokers of the cluster, for Metadata and DescribeCluster responses, as "
     "node.id@LISTENER://host:port entries (one per node and listener, e.g. "
     "1@INTERNAL://broker1:9092,1@EXTERNAL://kafka1.example.com:9093). A request is answered with every "
     "node that has an endpoint for the listener it came in on (this node at its advertised.listeners); "
     "nodes without that listener are left out, as Kafka's metadata cache does.", True),
    ("kchannel.connection.setup.timeout.ms", LG, 0, _atl(0), M, "server",
     "kchannel-specific: the longest a connection to an SSL, SASL_PLAINTEXT or SASL_SSL listener may take "
     "from its accept to the end of its TLS handshake and authentication; one that has not finished by then is "
     "closed. 0 (the default, as in Kafka) sets no "
     "limit: a client that sends a byte now and then is only closed by connections.max.idle.ms. Listener-level "
     "values may be set with the listener prefix, e.g. "
     "listener.name.external.kchannel.connection.setup.timeout.ms. Re-authentication is not limited by it "
     "(connections.max.reauth.ms bounds a session).", True),
    ("kchannel.scram.credential.store", S, "sqlite", ValidString("sqlite", "memory"), M, "server",
     "kchannel-specific: where SCRAM credentials live: 'sqlite' (file in the first log directory) or 'memory'.",
     True),
    ("kchannel.delegation.token.store", S, "sqlite", ValidString("sqlite", "memory", "zookeeper"), M, "server",
     "kchannel-specific: where delegation tokens live: 'sqlite' (first log directory), 'memory' or "
     "'zookeeper' (zookeeper.connect, Kafka's /delegation_token layout).", True),
    ("kchannel.delegation.token.max.tokens.per.owner", I, 1000, _atl(1), M, "server",
     "kchannel-specific (Kafka sets no limit): the most unexpired delegation tokens one owner may have; "
     "CreateDelegationToken for an owner that has them is answered POLICY_VIOLATION.", True),
    ("kchannel.upstream.bootstrap.servers", LI, "", None, H, "server",
     "kchannel-specific: run as a gateway in front of the Kafka-compatible cluster at these host:port pairs: "
     "requests the server does not answer itself (ApiVersions, SASL, delegation tokens, SCRAM credentials) are "
     "forwarded to it. Every kchannel.upstream.<key> property is the client configuration <key> of the "
     "gateway's upstream connections (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*, "
     "request.timeout.ms ...), validated as a client configuration. Empty (the default): no gateway.", True),
    ("kchannel.gateway.node.id.base", I, 0, _atl(0), M, "server",
     "kchannel-specific: gateway endpoints: upstream node k is served on each listener's port + 1 + "
     "(k - this value), at the listener's advertised host and advertised port + the same offset; the listener's "
     "own port is the bootstrap port (any upstream node). With listener port 0 node ports are ephemeral.", True),
    ("kchannel.gateway.max.queued.requests", I, 100, _atl(1), M, "server",
     "kchannel-specific: a gateway client with this many requests waiting for their responses is not read "
     "until one is answered (backpressure from a slow upstream).", True),
    ("kchannel.gateway.max.queued.bytes", LG, 16777216, _atl(1), M, "server",
     "kchannel-specific: a gateway client connection holding this many bytes in the gateway (requests forwarded "
     "and not answered yet, responses not written to it yet) is not read until they are written, and its own "
     "upstream connections are not read while its unwritten responses reach it: a client that does not read its "
     "responses holds about this much memory (plus one response) and the upstream broker waits on its connection "
     "alone. With shared upstream connections only the client is held back.", True),
    ("kchannel.gateway.total.max.queued.bytes", LG, 536870912, _atl(1), M, "server",
     "kchannel-specific: the bytes all gateway clients together may hold (see kchannel.gateway.max.queued.bytes); "
     "once reached no client is read, nor the upstream connections of clients with responses to write, until "
     "responses are written.", True),
    ("kchannel.gateway.upstream.connections", S, "per-client", ValidString("shared", "per-client"), M, "server",
     "kchannel-specific: 'per-client' (the default): each client connection gets upstream connections of its own "
     "(one login to the upstream per client connection), opened when it first needs one and closed with it, so "
     "that no client's requests delay, break or disconnect another's. 'shared': one upstream connection per "
     "upstream node for every gateway client, for trusted clients only: a broker answers the requests of one "
     "connection one at a time, so a long poll (Fetch max_wait_ms, lowered to "
     "kchannel.gateway.shared.fetch.max.wait.ms), a JoinGroup waiting for a rebalance or a Produce waiting for "
     "its replicas delays every other client's requests to that node. Either way the upstream sees the gateway's "
     "principal.", True),
    ("kchannel.gateway.shared.fetch.max.wait.ms", I, 500, _atl(0), M, "server",
     "kchannel-specific: with kchannel.gateway.upstream.connections=shared, a Fetch asking to wait longer for "
     "data (max_wait_ms) is forwarded with this wait instead (the consumer fetches again): a long poll holds "
     "every request behind it on the shared connection.", True),
    ("kchannel.gateway.allowed.principals", LI, "", None, M, "server",
     "kchannel-specific: principals (Type:name) whose requests the gateway forwards; others are refused with "
     "Kafka's authorization error codes. Empty (the default): every authenticated principal. Usually set per "
     "listener: listener.name.<listener>.kchannel.gateway.allowed.principals.", True),
    ("kchannel.gateway.authorizer.class", C, None, None, L, "server",
     "kchannel-specific: class (module.Name) with authorize(request) -> bool called for every request the "
     "gateway forwards (request: principal, listener_name, api_key, api_version, client_id, client_address); "
     "replaces kchannel.gateway.allowed.principals. An optional configure(props) gets the server properties.",
     True),
    ("kchannel.metrics.file", S, None, NonEmptyString(), L, "server",
     "kchannel-specific (Kafka exports metrics over JMX): kchannel serve writes its metrics to this JSON "
     "file every kchannel.metrics.file.interval.ms and when it stops, replacing the file atomically: "
     "'metrics' holds every metric (group:name{tags}) summed over the worker processes of "
     "num.network.threads (maxima for -max metrics, means for -avg and -ratio ones), 'workers' each "
     "worker's own values. Unset: no file.", True),
    ("kchannel.metrics.file.interval.ms", LG, 10000, _atl(100), L, "server",
     "kchannel-specific: how often kchannel serve rewrites kchannel.metrics.file.", True),
    ("kchannel.metrics.prometheus.listen", S, None, NonEmptyString(), L, "server",
     "kchannel-specific (Kafka is scraped through the Prometheus JMX exporter): HOST:PORT where kchannel "
     "serve answers Prometheus scrapes (GET /metrics, text format 0.0.4) from a thread of its own, with "
     "the metrics of kchannel.metrics.file (summed over the worker processes the same way) named as the "
     "JMX exporter's Kafka rules name them, e.g. kafka_server_socket_server_metrics_connection_count"
     "{listener=...,networkProcessor=...}; values at most a second old. Unset: no endpoint.", True),
    ("kchannel.ssl.session.resumption.enable", B, True, None, L, "both",
     "kchannel-specific (Java's SSLContext always caches sessions): TLS session resumption. A client keeps "
     "the last resumable session per broker host:port and offers it on its next connection there; a server "
     "issues one TLS 1.3 session ticket per full handshake. false: a client never offers a session, a server "
     "issues no tickets. Listener-level values may be set with the listener prefix.", True),
]


# Kafka keys accepted (so Kafka configuration files load) that kchannel does
# not implement: Java login classes and callback handlers, the background
# Kerberos/OAuth login refresh threads, the OIDC token endpoint client,
# ZooKeeper-mode control plane, dynamic reconfiguration, JCA engine
# factories.  Setting one logs "... is not supported by kchannel and is
# ignored" once per configuration load.
UNSUPPORTED = frozenset({
    "control.plane.listener.name",
    "sasl.client.callback.handler.class",
    "sasl.login.class",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.header.urlencode",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "ssl.allow.dn.changes",
    "ssl.allow.san.changes",
    "ssl.engine.factory.class",
})


def _build_table(rows):
    out = []
    for row in rows:
        name, type_, default, validator, importance, scope, doc = row[:7]
        kspec = row[7] if len(row) > 7 else False
        out.append(ConfigKey(name, type_, default, validator, importance, doc, scope, kspec,
                             name not in UNSUPPORTED))
    return tuple(out)


TABLE = _build_table(_ROWS)


class ConfigDef:
    """The keys of one scope, with Kafka's parse/validate behaviour."""

    def __init__(self, keys, scope):
        self.scope = scope
        self._keys = {k.name: k for k in keys}

    @classmethod
    def for_scope(cls, scope):
        keys = [k for k in TABLE if k.scope in (scope, "both")]
        return cls(keys, scope)

    def __contains__(self, name):
        return name in self._keys

    def __iter__(self):
        return iter(self._keys.values())

    def __len__(self):
        return len(self._keys)

    def names(self):
        return list(self._keys)

    def get(self, name):
        return self._keys.get(name)

    def key(self, name):
        return self._keys[name]

    def parse_value(self, name, raw, written_name=None):
        return self._keys[name].parse(raw, written_name)

    def parse(self, props, errors=None):
        """Typed values for every key: supplied ones parsed, others default.

        With ``errors`` (a list), failures are appended and the key takes its
        default; without, the first failure raises.
        """
        values = {}
        for key in self._keys.values():
            if key.name in props:
                try:
                    values[key.name] = key.parse(props[key.name])
                except ConfigError as exc:
                    if errors is None:
                        raise
                    errors.append(exc)
                    values[key.name] = key.default_value()
            elif key.has_default:
                values[key.name] = key.default_value()
            else:
                exc = ConfigError(f'Missing required configuration "{key.name}" which has no default value.',
                                  key=key.name)
                if errors is None:
                    raise exc
                errors.append(exc)
        return values


SERVER_CONFIG_DEF = ConfigDef.for_scope("server")
CLIENT_CONFIG_DEF = ConfigDef.for_scope("client")

_UNSUPPORTED_SUFFIXES = tuple("." + name for name in sorted(UNSUPPORTED))


def unsupported_keys(supplied):
    """The keys of ``supplied`` (a dict, keys as written: listener- or
    mechanism-prefixed ones included) that name a key kchannel does not
    support, sorted.  A class key naming one of Kafka's built-in classes is
    not ignored (it selects kchannel's equivalent)."""
    return sorted(k for k, v in supplied.items()
                  if isinstance(k, str) and (k in UNSUPPORTED or k.endswith(_UNSUPPORTED_SUFFIXES))
                  and not (isinstance(v, str) and v.strip() in KAFKA_BUILTIN_CLASSES))


def warn_unsupported(supplied, logger):
    """Log one WARNING per supplied key kchannel ignores (see UNSUPPORTED)."""
    keys = unsupported_keys(supplied)
    for key in keys:
        logger.warning("%s is not supported by kchannel and is ignored", key)
    return keys
