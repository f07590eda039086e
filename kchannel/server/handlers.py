"""Request handlers: what the :class:`kchannel.server.Server` does with a request.

A handler is ``fn(ctx: RequestContext) -> dict | None``: it gets the decoded
request and returns the response body as a dict (the server encodes it with the
request's API version and correlation id), or None to send no response (as a
Kafka broker for Produce with acks=0).

:class:`HandlerRegistry` maps API keys to handlers and version ranges.  The
built-ins are :func:`handle_api_versions` (KIP-511 fallback for unknown
versions is done by the server from the header alone) and
:func:`handle_metadata` (this node only, no topics).
"""
import base64
import re
import uuid
from dataclasses import dataclass

from ..protocol import messages
from ..protocol.errors import Errors
from ..log import get_logger

log = get_logger("kchannel.handlers")

__all__ = ["Session", "RequestContext", "Handler", "HandlerRegistry",
           "handle_api_versions", "handle_metadata", "handle_sasl_after_authentication",
           "handle_describe_client_quotas",
           "random_cluster_id", "SASL_API_KEYS"]

SASL_API_KEYS = (messages.SASL_HANDSHAKE.api_key, messages.SASL_AUTHENTICATE.api_key)

# Kafka's ApiVersionsRequest.isValid(): client software name/version pattern.
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


@dataclass(frozen=True)
class Session:
    """Kafka's RequestChannel.Session: who is asking and from where."""
    principal: object
    client_address: object


class RequestContext:
    """Everything a handler knows about one request.

    ``header`` (:class:`kchannel.protocol.headers.RequestHeader`), ``body``
    (decoded request dict), ``principal`` (``KafkaPrincipal``),
    ``listener_name``, ``security_protocol``, ``channel_id`` (Kafka's
    connection id ``local-remote-index``), ``client_address`` ((host, port)),
    ``session`` (:class:`Session`), ``server`` (the Server), ``now`` (epoch ms
    when the request was dispatched).
    """
    # One is built per request: a slotted class with a written-out __init__
    # (no dataclass __init__ machinery), and the Session made only when a
    # handler asks for it (most never do).
    __slots__ = ("header", "body", "principal", "listener_name", "security_protocol",
                 "channel_id", "client_address", "_session", "server", "now")
    _FIELDS = ("header", "body", "principal", "listener_name", "security_protocol",
               "channel_id", "client_address", "session", "now")

    def __init__(self, header, body, principal, listener_name, security_protocol,
                 channel_id, client_address, session=None, server=None, now=0):
        self.header = header
        self.body = body
        self.principal = principal
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.channel_id = channel_id
        self.client_address = client_address
        self._session = session
        self.server = server
        self.now = now

    @property
    def session(self):
        s = self._session
        if s is None:
            s = self._session = Session(self.principal, self.client_address)
        return s

    @session.setter
    def session(self, value):
        self._session = value

    def __repr__(self):
        return "RequestContext(%s)" % ", ".join(
            f"{k}={getattr(self, k)!r}" for k in self._FIELDS)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self._FIELDS + ("server",))

    __hash__ = None

    @property
    def api_key(self):
        return self.header.api_key

    @property
    def api_version(self):
        return self.header.api_version

    @property
    def correlation_id(self):
        return self.header.correlation_id

    @property
    def client_id(self):
        return self.header.client_id


@dataclass
class Handler:
    api_key: int
    fn: object
    min_version: int
    max_version: int


class HandlerRegistry:
    """API key -> :class:`Handler`.  Version ranges are clamped to what the
    codec can encode/decode (``kchannel.protocol.messages.API``)."""

    def __init__(self):
        self._handlers = {}
        # Bumped by every change: what is derived from the registered
        # ranges (the server's encoded ApiVersions answer) is kept per value.
        self.generation = 0
        # get(api_key) -> Handler or None: the dict's own bound method (no
        # Python frame per request); the dict is only ever updated in place.
        self.get = self._handlers.get

    def register(self, api_key, fn, min_version=None, max_version=None):
        api_key = int(api_key)
        api = messages.API.get(api_key)
        if api is None:
            raise ValueError(f"API key {api_key} has no schema in kchannel.protocol.messages")
        lo = api.min_version if min_version is None else int(min_version)
        hi = api.max_version if max_version is None else int(max_version)
        if lo < api.min_version or hi > api.max_version or lo > hi:
            raise ValueError(
                f"{api.name} versions {lo}-{hi} outside the supported "
                f"{api.min_version}-{api.max_version}")
        self._handlers[api_key] = Handler(api_key, fn, lo, hi)
        self.generation += 1

    def unregister(self, api_key):
        self._handlers.pop(int(api_key), None)
        self.generation += 1

    def __contains__(self, api_key):
        return api_key in self._handlers

    def ranges(self):
        """``[(api_key, min, max)]`` sorted by key."""
        return sorted((h.api_key, h.min_version, h.max_version)
                      for h in self._handlers.values())


def random_cluster_id():
    """A Kafka-style cluster id: a random UUID in URL-safe base64 without
    padding (22 characters), as ``Uuid.randomUuid().toString()``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def handle_api_versions(ctx):
    """ApiVersions: every registered API with its version range, and the
    SASL APIs on every listener (as a Kafka broker).  An invalid client
    software name/version (v3+) gets INVALID_REQUEST, as Kafka."""
    server = ctx.server
    body = ctx.body or {}
    if ctx.api_version >= 3:
        name = body.get("client_software_name")
        version = body.get("client_software_version")
        if not (name and version and _SOFTWARE_RE.fullmatch(name)
                and _SOFTWARE_RE.fullmatch(version)):
            return {"error_code": int(Errors.INVALID_REQUEST), "api_keys": [],
                    "throttle_time_ms": 0}
    # already encoded (the same bytes for every connection; see
    # Server.api_versions_body_bytes)
    return server.api_versions_body_bytes(ctx.api_version, ctx.listener_name)


def handle_metadata(ctx):
    """Metadata: this node only (host/port of the advertised listener that
    matches the request's listener), rack null, cluster id, controller = this
    node.  Named topics are answered UNKNOWN_TOPIC_OR_PARTITION: this node
    hosts none."""
    server = ctx.server
    host, port = server.advertised_endpoint(ctx.listener_name)
    topics = []
    requested = (ctx.body or {}).get("topics")
    for t in requested or ():
        topics.append({
            "error_code": int(Errors.UNKNOWN_TOPIC_OR_PARTITION),
            "name": t.get("name"),
            "topic_id": t.get("topic_id"),
            "is_internal": False,
            "partitions": [],
        })
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": server.node_id, "host": host, "port": port,
                     "rack": server.rack}],
        "cluster_id": server.cluster_id,
        "controller_id": server.node_id,
        "topics": topics,
    }
    return body


def handle_describe_client_quotas(ctx):
    """DescribeClientQuotas: kchannel enforces no client quotas, so every
    filter matches nothing -- what a Kafka broker without quota configs
    answers.  ``kafka-configs.sh --describe --entity-type users`` asks this
    before it shows a user's SCRAM credentials."""
    # ErrorMessage "": Kafka leaves it at its schema default, not null.
    return {"throttle_time_ms": 0, "error_code": int(Errors.NONE), "error_message": "",
            "entries": []}


def handle_sasl_after_authentication(ctx):
    """SaslHandshake / SaslAuthenticate on a connection that is already
    authenticated (and not re-authenticating): Kafka's KafkaApis answers
    ILLEGAL_SASL_STATE and keeps the connection."""
    if ctx.api_key == messages.SASL_HANDSHAKE.api_key:
        return {"error_code": int(Errors.ILLEGAL_SASL_STATE), "mechanisms": []}
    return {"error_code": int(Errors.ILLEGAL_SASL_STATE),
            "error_message": "SaslAuthenticate request received after successful authentication",
            "auth_bytes": b"", "session_lifetime_ms": 0}
