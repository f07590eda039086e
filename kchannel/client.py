"""Kafka protocol clients over the kchannel Selector.

* :class:`NetworkClient` -- many connections, non-blocking (Kafka's
  ``NetworkClient`` in miniature): ``connect(node_id, host, port)``,
  ``send(node_id, api_key, body, version=None) -> correlation id``,
  ``poll(timeout_ms) -> [ClientResponse]``.  Each connection negotiates
  ApiVersions as soon as it is authenticated (falling back as Kafka clients
  do when the broker answers UNSUPPORTED_VERSION) and is ``is_ready()`` after.
* :class:`KafkaClient` -- blocking, one broker at a time:
  ``KafkaClient(configs).connect()`` then ``request(api_key, body)``.

Both use the same channel builders as the server, so ``security.protocol``
PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL behave identically.  An
authentication failure surfaces at once as the ``AuthenticationError``
subclass the authenticator raised (non-retriable; no retry loop).
"""
import collections
import enum
import logging

from . import __version__, errors
from .network.channel import State
from .network.channel_builder import create_channel_builder
from .network.selector import Selector
from .protocol import messages
from .protocol.api_versions import choose_api_versions_version
from .protocol.errors import Errors, exception_for
from .protocol.headers import RequestHeader, decode_response, encode_request
from .utils import now_ms

log = logging.getLogger("kchannel.client")

__all__ = ["KafkaClient", "NetworkClient", "ClientResponse", "ConnectionState",
           "RequestTimeoutError", "CLIENT_SOFTWARE_NAME"]

CLIENT_SOFTWARE_NAME = "kchannel"
_API_VERSIONS = messages.API_VERSIONS.api_key

# Client-side defaults (Kafka's CommonClientConfigs).
_DEFAULTS = {
    "security.protocol": "PLAINTEXT",
    "request.timeout.ms": 30000,
    "socket.connection.setup.timeout.ms": 10000,
    "connections.max.idle.ms": 540000,
    "client.id": "",
    "send.buffer.bytes": 131072,
    "receive.buffer.bytes": 65536,
}


class RequestTimeoutError(errors.KChannelError, TimeoutError):
    """A request or connection setup did not complete in time (Kafka's
    TimeoutException).  Retriable."""

    retriable = True


class ConnectionState(enum.Enum):
    """Kafka's ConnectionState names."""
    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
    READY = "READY"
    AUTHENTICATION_FAILED = "AUTHENTICATION_FAILED"


class ClientResponse:
    """One completed (or failed) request: ``body`` is the decoded response
    dict, or None with ``exception`` set when the connection failed first."""

    __slots__ = ("node_id", "api_key", "api_version", "correlation_id", "body",
                 "exception", "request_time_ms", "receive_time_ms")

    def __init__(self, node_id, api_key, api_version, correlation_id, body=None,
                 exception=None, request_time_ms=0, receive_time_ms=0):
        self.node_id = node_id
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.body = body
        self.exception = exception
        self.request_time_ms = request_time_ms
        self.receive_time_ms = receive_time_ms

    @property
    def disconnected(self):
        return self.exception is not None

    def __repr__(self):
        return (f"ClientResponse(node={self.node_id!r}, api_key={self.api_key}, "
                f"v{self.api_version}, corr={self.correlation_id}, "
                f"{'error=' + repr(self.exception) if self.exception else 'ok'})")


class _Node:
    __slots__ = ("id", "host", "port", "state", "in_flight", "api_versions",
                 "api_versions_body", "api_versions_version", "exception", "connect_start_ms")

    def __init__(self, id, host, port, now):
        self.id = id
        self.host = host
        self.port = port
        self.state = ConnectionState.CONNECTING
        self.in_flight = collections.OrderedDict()   # corr -> (api_key, version, sent_ms, internal)
        self.api_versions = None          # {api_key: (min, max)} from the broker
        self.api_versions_body = None
        self.api_versions_version = None
        self.exception = None
        self.connect_start_ms = now


def client_configs(configs):
    """Normalise client configs: ClientConfig (aliases, typing) when
    available, with Kafka's defaults for what the network layer needs."""
    configs = dict(configs or {})
    values = configs
    try:
        from .config import ClientConfig
    except ImportError:
        ClientConfig = None
    if ClientConfig is not None:
        cc = ClientConfig(configs)
        values = dict(cc.values())
    out = dict(_DEFAULTS)
    out.update({k: v for k, v in values.items() if v is not None})
    return out


class NetworkClient:
    """Non-blocking multi-connection client (see module docstring).

    ``configs``: client configs (``security.protocol``, ``ssl.*``,
    ``sasl.*``, ``client.id``, ``request.timeout.ms`` ...).  ``sasl_kwargs``
    are handed to the SASL channel builder.  ``time``: ms clock (tests).
    """

    def __init__(self, configs=None, *, channel_builder=None, metrics=None, time=None,
                 sasl_kwargs=None, negotiate_api_versions=True, metric_group_prefix="client"):
        self.configs = client_configs(configs)
        self.time = time or now_ms
        self.client_id = self.configs.get("client.id") or ""
        self.security_protocol = str(self.configs.get("security.protocol")).upper()
        if channel_builder is None:
            kw = dict(sasl_kwargs or {})
            if self.security_protocol.startswith("SASL_"):
                jaas = kw.get("jaas")
                if jaas is None:
                    jaas = self._client_jaas(configs)
                    if jaas is not None:
                        kw["jaas"] = jaas
            channel_builder = create_channel_builder(self.security_protocol, "client",
                                                     self.configs, None, **kw)
        self.channel_builder = channel_builder
        self.selector = Selector(
            channel_builder, metrics, int(self.configs["connections.max.idle.ms"]),
            time=self.time, metric_group_prefix=metric_group_prefix,
            max_receive_size=0x7FFFFFFF,
            send_buffer_size=int(self.configs.get("send.buffer.bytes", -1)),
            receive_buffer_size=int(self.configs.get("receive.buffer.bytes", -1)))
        self.metrics = self.selector.metrics
        self.request_timeout_ms = int(self.configs["request.timeout.ms"])
        self.connection_setup_timeout_ms = int(self.configs["socket.connection.setup.timeout.ms"])
        self.negotiate_api_versions = negotiate_api_versions
        self._nodes = {}
        self._next_corr = 0
        self._pending = []        # ClientResponses produced outside poll (failures)

    @staticmethod
    def _client_jaas(configs):
        try:
            from .config import ClientConfig
        except ImportError:
            return None
        try:
            return ClientConfig(dict(configs or {})).jaas()
        except Exception:
            return None

    # ---------------------------------------------------------------- nodes
    def connect(self, node_id, host, port):
        """Start connecting ``node_id`` (no-op if already connected or
        connecting)."""
        node = self._nodes.get(node_id)
        if node is not None and node.state not in (ConnectionState.DISCONNECTED,
                                                   ConnectionState.AUTHENTICATION_FAILED):
            return
        node = _Node(node_id, host, int(port), self.time())
        self._nodes[node_id] = node
        try:
            self.selector.connect(node_id, (host, int(port)))
        except errors.KChannelError as exc:
            node.state = ConnectionState.DISCONNECTED
            node.exception = exc
            raise

    def connection_state(self, node_id):
        node = self._nodes.get(node_id)
        return node.state if node is not None else ConnectionState.DISCONNECTED

    def connection_exception(self, node_id):
        node = self._nodes.get(node_id)
        return node.exception if node is not None else None

    def is_ready(self, node_id):
        node = self._nodes.get(node_id)
        return node is not None and node.state is ConnectionState.READY

    def api_versions(self, node_id):
        """``{api_key: (min, max)}`` the broker announced, or None."""
        node = self._nodes.get(node_id)
        return node.api_versions if node is not None else None

    def api_versions_response(self, node_id):
        """The broker's ApiVersions response body (for broker-api-versions)."""
        node = self._nodes.get(node_id)
        return node.api_versions_body if node is not None else None

    def choose_version(self, node_id, api_key):
        """Highest version of ``api_key`` both sides support."""
        api = messages.API.get(api_key)
        if api is None:
            raise errors.UnsupportedVersionError(f"Unsupported API key {api_key}")
        node = self._nodes.get(node_id)
        if node is None or node.api_versions is None:
            return api.max_version
        rng = node.api_versions.get(int(api_key))
        if rng is None:
            raise errors.UnsupportedVersionError(
                f"The node does not support {api.name}")
        lo, hi = max(api.min_version, rng[0]), min(api.max_version, rng[1])
        if lo > hi:
            raise errors.UnsupportedVersionError(
                f"The node does not support {api.name} in a version kchannel supports "
                f"(node: {rng[0]}-{rng[1]}, kchannel: {api.min_version}-{api.max_version})")
        return hi

    def close(self, node_id=None):
        """Close one connection (``node_id``) or everything."""
        if node_id is None:
            for nid in list(self._nodes):
                self._fail_node(nid, errors.ChannelConnectionError("Client closed"),
                                ConnectionState.DISCONNECTED)
            self.selector.close()
            try:
                self.channel_builder.close()
            except Exception:
                pass
            return
        self.selector.close(node_id)
        self._fail_node(node_id, errors.ChannelConnectionError("Connection closed"),
                        ConnectionState.DISCONNECTED)

    # ----------------------------------------------------------------- send
    def _corr(self):
        c = self._next_corr
        self._next_corr = (c + 1) & 0x7FFFFFFF
        return c

    def send(self, node_id, api_key, body, version=None):
        """Send a request; returns its correlation id.  ``version`` defaults
        to the highest both sides support."""
        node = self._nodes.get(node_id)
        if node is None or node.state is not ConnectionState.READY:
            raise errors.KChannelError(f"Node {node_id} is not ready")
        if version is None:
            version = self.choose_version(node_id, api_key)
        return self._send(node, int(api_key), int(version), body, internal=False)

    def _send(self, node, api_key, version, body, internal):
        corr = self._corr()
        payload = encode_request(RequestHeader(api_key, version, corr, self.client_id), body)
        self.selector.send(node.id, payload)
        node.in_flight[corr] = (api_key, version, self.time(), internal)
        return corr

    def in_flight_count(self, node_id=None):
        if node_id is not None:
            node = self._nodes.get(node_id)
            return len(node.in_flight) if node else 0
        return sum(len(n.in_flight) for n in self._nodes.values())

    # ----------------------------------------------------------------- poll
    def poll(self, timeout_ms):
        """Do I/O; returns the ClientResponses completed by it."""
        out, self._pending = self._pending, []
        if out:
            timeout_ms = 0
        sel = self.selector
        sel.poll(timeout_ms)
        now = self.time()
        for nid in sel.connected:
            node = self._nodes.get(nid)
            if node is not None:
                log.debug("Completed connection to node %s", nid)
        for nid, payload in sel.completed_receives:
            node = self._nodes.get(nid)
            if node is None:
                continue
            self._handle_response(node, payload, now, out)
        for nid, state in sel.disconnected.items():
            node = self._nodes.get(nid)
            if node is None:
                continue
            exc = state.exception
            if state == State.AUTHENTICATION_FAILED:
                st = ConnectionState.AUTHENTICATION_FAILED
                if exc is None:
                    exc = errors.AuthenticationError(
                        f"Authentication failed with node {nid}")
            else:
                st = ConnectionState.DISCONNECTED
                if exc is None:
                    exc = errors.ChannelConnectionError(
                        f"Connection to node {nid} ({node.host}:{node.port}) was "
                        f"disconnected ({state.name})")
            self._fail_node(nid, exc, st, out)
        # Channels that became ready: start ApiVersions negotiation.
        for node in list(self._nodes.values()):
            if node.state is ConnectionState.CONNECTING:
                if sel.is_channel_ready(node.id):
                    if self.negotiate_api_versions:
                        node.state = ConnectionState.CHECKING_API_VERSIONS
                        self._send_api_versions(node, messages.API_VERSIONS.max_version)
                    else:
                        node.state = ConnectionState.READY
                elif now - node.connect_start_ms > self.connection_setup_timeout_ms:
                    sel.close(node.id)
                    self._fail_node(node.id, RequestTimeoutError(
                        f"Connection to node {node.id} ({node.host}:{node.port}) was not "
                        f"established within {self.connection_setup_timeout_ms} ms"),
                        ConnectionState.DISCONNECTED, out)
        self._expire_requests(now, out)
        return out

    def _send_api_versions(self, node, version):
        body = {"client_software_name": CLIENT_SOFTWARE_NAME,
                "client_software_version": __version__}
        node.api_versions_version = version
        self._send(node, _API_VERSIONS, version, body, internal=True)

    def _handle_response(self, node, payload, now, out):
        if len(payload) < 4:
            self._protocol_failure(node, errors.InvalidRequestError(
                f"Response of {len(payload)} bytes has no correlation id"), out)
            return
        corr = int.from_bytes(payload[:4], "big", signed=True)
        if not node.in_flight:
            self._protocol_failure(node, errors.InvalidRequestError(
                f"Received a response (correlation id {corr}) with no request in flight"), out)
            return
        expected, (api_key, version, sent, internal) = next(iter(node.in_flight.items()))
        if corr != expected:
            self._protocol_failure(node, errors.InvalidRequestError(
                f"Correlation id for response ({corr}) does not match request ({expected})"), out)
            return
        del node.in_flight[corr]
        try:
            _, body = decode_response(payload, api_key, version)
        except errors.KChannelError as exc:
            self._protocol_failure(node, exc, out)
            return
        if internal and api_key == _API_VERSIONS:
            self._handle_api_versions_response(node, version, body, out)
            return
        out.append(ClientResponse(node.id, api_key, version, corr, body, None, sent, now))

    def _handle_api_versions_response(self, node, version, body, out):
        code = body.get("error_code", 0)
        if code == Errors.UNSUPPORTED_VERSION:
            retry = choose_api_versions_version(body)
            if retry is not None and retry < version:
                log.debug("Node %s does not support ApiVersions v%d; retrying with v%d",
                          node.id, version, retry)
                self._send_api_versions(node, retry)
                return
        if code != 0:
            exc = exception_for(code)
            self.selector.close(node.id)
            self._fail_node(node.id, exc, ConnectionState.DISCONNECTED, out)
            return
        node.api_versions = {e["api_key"]: (e["min_version"], e["max_version"])
                             for e in body.get("api_keys") or ()}
        node.api_versions_body = body
        node.state = ConnectionState.READY
        log.debug("Node %s is ready; ApiVersions v%d", node.id, version)

    def _protocol_failure(self, node, exc, out):
        log.warning("Closing connection to node %s: %s", node.id, exc)
        self.selector.close(node.id)
        self._fail_node(node.id, exc, ConnectionState.DISCONNECTED, out)

    def _fail_node(self, node_id, exc, state, out=None):
        node = self._nodes.get(node_id)
        if node is None:
            return
        node.state = state
        node.exception = exc
        target = out if out is not None else self._pending
        for corr, (api_key, version, sent, internal) in node.in_flight.items():
            if not internal:
                target.append(ClientResponse(node_id, api_key, version, corr, None, exc, sent,
                                             self.time()))
        node.in_flight.clear()

    def _expire_requests(self, now, out):
        for node in list(self._nodes.values()):
            if not node.in_flight:
                continue
            corr, (api_key, version, sent, internal) = next(iter(node.in_flight.items()))
            if now - sent > self.request_timeout_ms:
                exc = RequestTimeoutError(
                    f"Request {corr} to node {node.id} timed out after "
                    f"{self.request_timeout_ms} ms")
                log.info("Disconnecting from node %s due to request timeout.", node.id)
                self.selector.close(node.id)
                self._fail_node(node.id, exc, ConnectionState.DISCONNECTED, out)


def _parse_bootstrap(value):
    if value is None:
        return []
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    out = []
    for item in value:
        if isinstance(item, (tuple, list)):
            out.append((item[0], int(item[1])))
            continue
        item = str(item)
        if "://" in item:
            item = item.split("://", 1)[1]
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            out.append((host, int(rest.lstrip(":"))))
        else:
            host, _, port = item.rpartition(":")
            out.append((host, int(port)))
    return out


class KafkaClient:
    """Blocking single-broker client.

    >>> c = KafkaClient({"bootstrap.servers": "127.0.0.1:9092"})
    >>> c.connect()
    >>> c.request(ApiKey.METADATA, {"topics": []})

    ``connect(host=None, port=None)`` connects to the given address or the
    first ``bootstrap.servers`` entry that works, negotiates ApiVersions and
    returns self.  ``api_versions`` is ``{api_key: (min, max)}`` of the
    broker; ``api_versions_response`` its raw ApiVersions body.
    ``request(api_key, body, version=None)`` returns the response body.
    Errors: ``AuthenticationError`` subclasses (no retry),
    ``ChannelConnectionError``, ``RequestTimeoutError``,
    ``UnsupportedVersionError``.
    """

    NODE = "bootstrap"

    def __init__(self, configs=None, **kwargs):
        self.network = NetworkClient(configs, **kwargs)
        self.configs = self.network.configs
        self.bootstrap = _parse_bootstrap(self.configs.get("bootstrap.servers"))
        self.node_id = None
        self.address = None

    @property
    def selector(self):
        return self.network.selector

    @property
    def metrics(self):
        return self.network.metrics

    def connect(self, host=None, port=None, timeout_ms=None):
        if host is not None:
            addresses = [(host, int(port))]
        else:
            addresses = list(self.bootstrap)
            if not addresses:
                raise errors.ConfigError("No bootstrap.servers configured and no address given",
                                         key="bootstrap.servers")
        last = None
        for addr in addresses:
            try:
                self._connect_one(addr, timeout_ms)
                return self
            except errors.AuthenticationError:
                raise
            except errors.KChannelError as exc:
                last = exc
                log.info("Connection to %s:%s failed: %s", addr[0], addr[1], exc)
        raise last

    def _connect_one(self, addr, timeout_ms):
        net = self.network
        if self.node_id is not None:
            net.close(self.node_id)
        node_id = f"{addr[0]}:{addr[1]}"
        self.node_id = node_id
        self.address = addr
        net.connect(node_id, addr[0], addr[1])
        timeout_ms = (net.connection_setup_timeout_ms + net.request_timeout_ms
                      if timeout_ms is None else timeout_ms)
        deadline = net.time() + timeout_ms
        while True:
            st = net.connection_state(node_id)
            if st is ConnectionState.READY:
                return
            if st in (ConnectionState.DISCONNECTED, ConnectionState.AUTHENTICATION_FAILED):
                raise net.connection_exception(node_id) or errors.ChannelConnectionError(
                    f"Connection to {addr[0]}:{addr[1]} failed")
            remaining = deadline - net.time()
            if remaining <= 0:
                net.close(node_id)
                raise RequestTimeoutError(
                    f"Timed out after {timeout_ms} ms connecting to {addr[0]}:{addr[1]}")
            net.poll(min(remaining, 100))

    @property
    def api_versions(self):
        return self.network.api_versions(self.node_id) if self.node_id else None

    @property
    def api_versions_response(self):
        return self.network.api_versions_response(self.node_id) if self.node_id else None

    def is_connected(self):
        return self.node_id is not None and self.network.is_ready(self.node_id)

    def choose_version(self, api_key):
        return self.network.choose_version(self.node_id, api_key)

    def request(self, api_key, body=None, version=None, timeout_ms=None):
        """Send one request and wait for its response body.

        A connection that was closed since the last request (idle expiry,
        broker restart) is re-established once first, as Kafka clients
        reconnect; an authentication failure is never retried."""
        if not self.is_connected():
            if self.node_id is None:
                raise errors.ChannelConnectionError("Not connected")
            exc = self.network.connection_exception(self.node_id)
            if isinstance(exc, errors.AuthenticationError) or self.address is None:
                raise exc or errors.ChannelConnectionError("Not connected")
            log.info("Reconnecting to %s:%s (%s)", self.address[0], self.address[1], exc)
            self._connect_one(self.address, None)
        net = self.network
        corr = net.send(self.node_id, api_key, body or {}, version)
        timeout_ms = net.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = net.time() + timeout_ms
        while True:
            for resp in net.poll(min(max(deadline - net.time(), 0), 100)):
                if resp.node_id == self.node_id and resp.correlation_id == corr:
                    if resp.exception is not None:
                        raise resp.exception
                    return resp.body
            if net.connection_state(self.node_id) is not ConnectionState.READY:
                raise net.connection_exception(self.node_id) or errors.ChannelConnectionError(
                    "Disconnected")
            if net.time() >= deadline:
                net.close(self.node_id)
                raise RequestTimeoutError(f"Request timed out after {timeout_ms} ms")

    def close(self):
        self.network.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
