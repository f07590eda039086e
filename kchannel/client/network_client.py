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

Per-node connection bookkeeping follows Kafka's ``ClusterConnectionStates``:

* every failed or lost connection starts a reconnect backoff
  (``reconnect.backoff.ms`` doubling per consecutive failure up to
  ``reconnect.backoff.max.ms``, +/-20% jitter, Kafka's ExponentialBackoff),
  reset once a connection becomes READY.  While a node is blacked out
  :meth:`NetworkClient.connect` opens no socket (``can_connect``,
  ``is_blacked_out``, ``connection_delay``);
* an authentication failure leaves the node AUTHENTICATION_FAILED with the
  error kept (``authentication_exception``) until a later connection to it is
  READY; during the blackout that follows, ``KafkaClient.connect`` raises the
  kept error without touching the network;
* the connection setup timeout (``socket.connection.setup.timeout.ms``)
  doubles per consecutive failure to establish the TCP connection, up to
  ``socket.connection.setup.timeout.max.ms``, with the same jitter.
"""
import collections
import math
import random as _random

from .. import __version__, errors
from ..config import ClientConfig
from ..network.selector import Selector
from ..protocol import messages
from ..protocol.api_versions import choose_api_versions_version
from ..protocol.errors import Errors, exception_for
from ..protocol.headers import response_decoder
from ..security.channel_builders import create_channel_builder
from ..utils import now_ms
from ..log import get_logger
from .. import _impl
from .connection_state import ConnectionState

# The per-request hot path (NetworkClient's base class) and the objects it
# makes, a compiled twin when built.
_clientloop = _impl.load_twin("clientloop")
ClientLoop = _clientloop.ClientLoop
ClientResponse = _clientloop.ClientResponse
InFlight = _clientloop.InFlight
NodeStats = _clientloop.NodeStats
NodeState = _clientloop.NodeState
RTT_SAMPLES = _clientloop.RTT_SAMPLES
complete_responses = _clientloop.complete_responses
# in_flight marker of a request sent by send_raw (response handed over undecoded).
_RAW = _clientloop._RAW

log = get_logger("kchannel.client")

__all__ = ["KafkaClient", "NetworkClient", "ClientResponse", "ConnectionState",
           "ExponentialBackoff", "RequestTimeoutError", "CLIENT_SOFTWARE_NAME"]

CLIENT_SOFTWARE_NAME = "kchannel"
_API_VERSIONS = messages.API_VERSIONS.api_key

# Client-side defaults (Kafka's CommonClientConfigs).
_DEFAULTS = {
    "security.protocol": "PLAINTEXT",
    "request.timeout.ms": 30000,
    "socket.connection.setup.timeout.ms": 10000,
    "socket.connection.setup.timeout.max.ms": 30000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "connections.max.idle.ms": 540000,
    "client.id": "",
    "send.buffer.bytes": 131072,
    "receive.buffer.bytes": 65536,
}


class RequestTimeoutError(errors.KChannelError, TimeoutError):
    """A request or connection setup did not complete in time (Kafka's
    TimeoutException).  Retriable."""

    retriable = True


# ClusterConnectionStates' constants.
RECONNECT_BACKOFF_EXP_BASE = 2
RECONNECT_BACKOFF_JITTER = 0.2
CONNECTION_SETUP_TIMEOUT_EXP_BASE = 2
CONNECTION_SETUP_TIMEOUT_JITTER = 0.2
# Responses handed over per connection per poll (Selector.max_receives_per_channel).
MAX_RECEIVES_PER_CHANNEL = 64
# Kafka's Long.MAX_VALUE: "wait until something else wakes the client up".
_NO_DELAY_LIMIT = 2 ** 63 - 1


class ExponentialBackoff:
    """Kafka's ExponentialBackoff::

        backoff(attempts) = random(1 - jitter, 1 + jitter)
                            * initial * multiplier ** attempts

    with the exponent capped where ``initial * multiplier ** exp`` reaches
    ``max_interval`` and the jittered value never above ``max_interval``.
    ``max_interval <= initial`` gives a constant ``min(initial, max)`` without
    jitter.  Values are whole milliseconds, truncated as Java's ``(long)``.
    ``random``: a ``random.Random`` (tests may seed one).
    """

    __slots__ = ("initial_interval", "multiplier", "max_interval", "jitter", "exp_max",
                 "_random")

    def __init__(self, initial_interval, multiplier, max_interval, jitter, random=None):
        initial_interval = int(initial_interval)
        max_interval = int(max_interval)
        self.initial_interval = min(max_interval, initial_interval)
        self.multiplier = int(multiplier)
        self.max_interval = max_interval
        self.jitter = float(jitter)
        self.exp_max = (math.log(max_interval / max(initial_interval, 1)) / math.log(multiplier)
                        if max_interval > initial_interval else 0.0)
        self._random = random if random is not None else _random.Random()

    def backoff(self, attempts):
        if self.exp_max == 0:
            return self.initial_interval
        exp = min(attempts, self.exp_max)
        term = self.initial_interval * self.multiplier ** exp
        # Java's Double.MIN_NORMAL: a zero jitter draws no random number.
        factor = (1.0 if self.jitter < 2.2250738585072014e-308 else
                  self._random.uniform(1 - self.jitter, 1 + self.jitter))
        return min(int(factor * term), self.max_interval)

    def __repr__(self):
        return (f"ExponentialBackoff(multiplier={self.multiplier}, exp_max={self.exp_max}, "
                f"initial_interval={self.initial_interval}, jitter={self.jitter})")


class _Node(NodeState):
    """One node's connection and its ClusterConnectionStates entry (kept
    across connections, so the backoff survives a failure).  ``id``,
    ``state``, ``in_flight``, ``api_versions`` and ``stats`` are
    :class:`NodeState`'s (C fields, compiled: the per-request path reads
    them)."""

    __slots__ = ("host", "port",
                 "api_versions_body", "api_versions_version", "exception",
                 "authentication_exception", "last_connect_attempt_ms", "failed_attempts",
                 "reconnect_backoff_ms", "failed_connect_attempts",
                 "connection_setup_timeout_ms", "transport_connected")

    def __init__(self, id, host, port, now, reconnect_backoff_ms, connection_setup_timeout_ms):
        self.id = id
        self.host = host
        self.port = port
        self.state = ConnectionState.CONNECTING
        self.in_flight = collections.OrderedDict()   # corr -> InFlight, oldest first
        self.api_versions = None          # {api_key: (min, max)} from the broker
        self.api_versions_body = None
        self.api_versions_version = None
        self.exception = None             # why the last connection ended
        # Kafka's authenticationException(node): kept until a connection to
        # the node is READY again, whatever happens in between.
        self.authentication_exception = None
        self.last_connect_attempt_ms = now
        self.failed_attempts = 0
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.failed_connect_attempts = 0
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        # TCP connection established (the end of Kafka's CONNECTING state).
        self.transport_connected = False
        self.stats = NodeStats(now)


def client_configs(configs):
    """Normalise client configs: ClientConfig (aliases, typing), with
    Kafka's defaults for what the network layer needs."""
    configs = dict(configs or {})
    raw = configs
    values = dict(ClientConfig(configs).values())
    out = dict(_DEFAULTS)
    out.update({k: v for k, v in values.items() if v is not None})
    # CommonClientConfigs.postProcessReconnectBackoffConfigs: a base backoff
    # set without a maximum disables the exponential growth.
    if "reconnect.backoff.ms" in raw and "reconnect.backoff.max.ms" not in raw:
        log.warning("Disabling exponential reconnect backoff because reconnect.backoff.ms is "
                    "set, but reconnect.backoff.max.ms is not.")
        out["reconnect.backoff.max.ms"] = out["reconnect.backoff.ms"]
    return out


class NetworkClient(ClientLoop):
    """Non-blocking multi-connection client (see module docstring).

    ``configs``: client configs (``security.protocol``, ``ssl.*``,
    ``sasl.*``, ``client.id``, ``request.timeout.ms``,
    ``reconnect.backoff.ms`` ...).  ``sasl_kwargs`` are handed to the SASL
    channel builder.  ``time``: ms clock (tests).  ``random``: a
    ``random.Random`` for the backoff jitter (tests).
    ``max_receives_per_channel`` (64): responses taken from one connection
    per poll when requests are pipelined (1: Kafka's one per poll).
    ``authentication_failed(node_id, exc)``: called from :meth:`poll` when a
    connection fails authentication (Kafka's NetworkClient hands the error to
    its metadata updater so that callers waiting for metadata get it).
    ``os_selector``: handed to the :class:`Selector` (an event loop's,
    ``kchannel.aio``).
    """

    def __init__(self, configs=None, *, channel_builder=None, metrics=None, time=None,
                 sasl_kwargs=None, negotiate_api_versions=True, metric_group_prefix="client",
                 random=None, max_receives_per_channel=MAX_RECEIVES_PER_CHANNEL,
                 authentication_failed=None, os_selector=None):
        self.configs = client_configs(configs)
        self._authentication_failed_callback = authentication_failed
        self.time = time or now_ms
        # request encoders (they hold the client id) and response decoders,
        # per (api_key << 16 | version)
        self._request_encoders = {}
        # (head, tail) of the request header per the same key, for a body
        # given as parts (see ClientLoop._send)
        self._request_heads = {}
        self._response_decoders = {}
        # the body decoders ((payload, 4) -> body) of header-v0 responses
        # decoded by the schema (no caller's own decoder), per the same key:
        # _handle_response calls them without the decoder's wrapper
        self._body_decoders = {}
        # {api_key: make(version, generic decoder) -> decoder}: a caller's
        # own decoder for its hot response (the producer's Produce), made
        # once per version in use (see add_response_decoder).
        self.response_decoder_factories = {}
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
            receive_buffer_size=int(self.configs.get("receive.buffer.bytes", -1)),
            max_receives_per_channel=max_receives_per_channel, os_selector=os_selector)
        self.metrics = self.selector.metrics
        self.request_timeout_ms = int(self.configs["request.timeout.ms"])
        # Configured base values; each node's current ones are in its state.
        self.connection_setup_timeout_ms = int(self.configs["socket.connection.setup.timeout.ms"])
        self.connection_setup_timeout_max_ms = int(
            self.configs["socket.connection.setup.timeout.max.ms"])
        self.reconnect_backoff_ms = int(self.configs["reconnect.backoff.ms"])
        self.reconnect_backoff_max_ms = int(self.configs["reconnect.backoff.max.ms"])
        if self.connection_setup_timeout_ms > self.connection_setup_timeout_max_ms:
            log.warning("Configuration 'socket.connection.setup.timeout.ms' with value '%d' is "
                        "greater than configuration 'socket.connection.setup.timeout.max.ms' "
                        "with value '%d'. A static connection setup timeout with value '%d' "
                        "will be applied.", self.connection_setup_timeout_ms,
                        self.connection_setup_timeout_max_ms,
                        self.connection_setup_timeout_max_ms)
        rng = random if random is not None else _random.Random()
        self.reconnect_backoff = ExponentialBackoff(
            self.reconnect_backoff_ms, RECONNECT_BACKOFF_EXP_BASE,
            self.reconnect_backoff_max_ms, RECONNECT_BACKOFF_JITTER, rng)
        self.connection_setup_timeout = ExponentialBackoff(
            self.connection_setup_timeout_ms, CONNECTION_SETUP_TIMEOUT_EXP_BASE,
            self.connection_setup_timeout_max_ms, CONNECTION_SETUP_TIMEOUT_JITTER, rng)
        self.negotiate_api_versions = negotiate_api_versions
        self._nodes = {}
        # (body, {api_key: (min, max)}) of the last ApiVersions response,
        # shared by the nodes that get an equal one.
        self._shared_api_versions = None
        # No connecting node's setup timeout expires before this (ms): poll()
        # looks through the nodes only then (a lower bound: a node starting
        # to connect lowers it, none of the deadlines it covers moves
        # earlier).
        self._next_setup_deadline_ms = _NO_DELAY_LIMIT
        self._next_corr = 0
        self._pending = []        # ClientResponses produced outside poll (failures)
        # A request expecting no response was sent since the last poll: that
        # poll must not wait after writing it (see poll).
        self._sent_without_response = False
        self._request_timeouts = {}   # (node, corr) -> ms, for requests with their own
        # No request in flight times out before this (ms): poll() looks
        # through the nodes' oldest requests only then.  A lower bound, as
        # _next_setup_deadline_ms: a request sent lowers it, none that
        # completes moves a deadline it covers earlier.
        self._next_request_deadline_ms = _NO_DELAY_LIMIT
        # Connections lost or failed so far (a ClusterClient refreshes its
        # metadata when this moves).
        self.disconnects = 0
        # Nodes keeping an authentication_exception (never fewer than there
        # are: a ClusterClient looks for whose only when this is not 0,
        # without a call per poll).
        self.authentication_exceptions = 0
        # {api_key: (the api_versions map it was chosen for, version)}: the
        # usual request's choose_version (nodes that got the same ApiVersions
        # answer share one map) without the ranges compared again.
        self._chosen_versions = {}

    def add_response_decoder(self, api_key, make):
        """Decode ``api_key``'s responses with ``make(version, generic)``,
        a function ``payload -> body`` (a faster path for the usual
        response) that returns either what ``generic`` (the schema codec's
        decoder of that version) returns or an object of the caller's own
        carrying exactly the same information: whoever registers it is the
        only reader of those bodies (the Sender's Produce responses: a
        ``ProduceResult`` or the codec's dict, see
        ``kchannel.producer._senderloop_py.ProduceResponseDecoder``)."""
        self.response_decoder_factories[api_key] = make
        for key in [k for k in self._response_decoders if k >> 16 == api_key]:
            del self._response_decoders[key]
            self._body_decoders.pop(key, None)

    def _new_response_decoder(self, api_key, version):
        decode = response_decoder(api_key, version)
        make = self.response_decoder_factories.get(api_key)
        if make is not None:
            decode = make(version, decode)
        else:
            body = getattr(decode, "body_decoder", None)
            if body is not None:
                self._body_decoders[(api_key << 16) | version] = body
        self._response_decoders[(api_key << 16) | version] = decode
        return decode

    @staticmethod
    def _client_jaas(configs):
        try:
            return ClientConfig(dict(configs or {})).jaas()
        except Exception:
            return None

    # ---------------------------------------------------------------- nodes
    def connect(self, node_id, host, port):
        """Start connecting ``node_id`` unless it is connected, connecting or
        blacked out (Kafka's ``NetworkClient.ready``).

        Returns True when a connection is ready or being set up, False when
        the node is still in its reconnect backoff: then no socket is opened
        and ``connection_state``/``connection_exception`` keep reporting the
        failure that started the backoff.  Raises ``ChannelConnectionError``
        when the connect fails at once (the backoff starts all the same)."""
        now = self.time()
        node = self._nodes.get(node_id)
        if node is not None and not node.state.is_disconnected():
            return True
        if not self.can_connect(node_id, now):
            log.debug("Not connecting to node %s: reconnect backoff for another %d ms",
                      node_id, self.connection_delay(node_id, now))
            return False
        node = self._connecting(node_id, host, int(port), now)
        try:
            self.selector.connect(node_id, (host, int(port)))
        except errors.KChannelError as exc:
            log.warning("Error connecting to node %s (%s:%s): %s", node_id, host, port, exc)
            node.exception = exc
            self._disconnected(node, now)
            raise
        return True

    def connection_state(self, node_id):
        node = self._nodes.get(node_id)
        return node.state if node is not None else ConnectionState.DISCONNECTED

    def connection_exception(self, node_id):
        """Why the node's last connection ended (None if it did not)."""
        node = self._nodes.get(node_id)
        return node.exception if node is not None else None

    def authentication_exception(self, node_id):
        """The ``AuthenticationError`` of the node's last failed authentication,
        kept until a connection to it is READY again (Kafka's
        ``authenticationException(node)``), else None."""
        node = self._nodes.get(node_id)
        return node.authentication_exception if node is not None else None

    def has_authentication_exception(self):
        """Whether any node keeps an ``authentication_exception`` (a cheap
        test before looking for whose: callers run it once per poll)."""
        for node in self._nodes.values():
            if node.authentication_exception is not None:
                return True
        return False

    def connection_failed(self, node_id):
        """The node's connection failed and it is disconnected (Kafka's
        ``connectionFailed``)."""
        node = self._nodes.get(node_id)
        return node is not None and node.state.is_disconnected()

    def can_connect(self, node_id, now=None):
        """A new connection to ``node_id`` may be started now: it is
        disconnected (or unknown) and its reconnect backoff has elapsed."""
        node = self._nodes.get(node_id)
        if node is None:
            return True
        now = self.time() if now is None else now
        return (node.state.is_disconnected()
                and now - node.last_connect_attempt_ms >= node.reconnect_backoff_ms)

    def is_blacked_out(self, node_id, now=None):
        """Disconnected from ``node_id`` and not allowed to reconnect yet."""
        node = self._nodes.get(node_id)
        if node is None:
            return False
        now = self.time() if now is None else now
        return (node.state.is_disconnected()
                and now - node.last_connect_attempt_ms < node.reconnect_backoff_ms)

    def connection_delay(self, node_id, now=None):
        """Milliseconds to wait before ``node_id`` can be used (Kafka's
        ``connectionDelay``): the rest of the reconnect backoff when
        disconnected, the node's connection setup timeout while connecting,
        a practically infinite delay when connected."""
        node = self._nodes.get(node_id)
        if node is None:
            return 0
        now = self.time() if now is None else now
        if node.state is ConnectionState.CONNECTING:
            return node.connection_setup_timeout_ms
        if node.state.is_disconnected():
            return max(node.reconnect_backoff_ms - (now - node.last_connect_attempt_ms), 0)
        return _NO_DELAY_LIMIT

    def reconnect_backoff_for(self, node_id):
        """The node's current reconnect backoff (ms)."""
        node = self._nodes.get(node_id)
        return node.reconnect_backoff_ms if node is not None else 0

    def connection_setup_timeout_for(self, node_id):
        """The node's current connection setup timeout (ms)."""
        node = self._nodes.get(node_id)
        return (node.connection_setup_timeout_ms if node is not None
                else self.connection_setup_timeout.backoff(0))

    # Kafka's ClusterConnectionStates transitions.
    def _connecting(self, node_id, host, port, now):
        node = self._nodes.get(node_id)
        if node is not None and node.host == host:
            node.port = port
            node.state = ConnectionState.CONNECTING
            node.last_connect_attempt_ms = now
            node.exception = None
            node.transport_connected = False
            node.api_versions = node.api_versions_body = node.api_versions_version = None
        else:
            if node is not None:
                log.info("Hostname for node %s changed from %s to %s.", node_id, node.host,
                         host)
                if node.authentication_exception is not None:
                    self.authentication_exceptions -= 1
            node = _Node(node_id, host, port, now, self.reconnect_backoff.backoff(0),
                         self.connection_setup_timeout.backoff(0))
            self._nodes[node_id] = node
        node.stats.connects += 1
        node.stats.state_ms = now
        # (poll() looks for setup timeouts from then on; "> timeout", as
        # there, so one millisecond after)
        deadline = now + node.connection_setup_timeout_ms + 1
        if deadline < self._next_setup_deadline_ms:
            self._next_setup_deadline_ms = deadline
        return node

    def _disconnected(self, node, now):
        node.last_connect_attempt_ms = now
        self._update_reconnect_backoff(node)
        if node.state is ConnectionState.CONNECTING and not node.transport_connected:
            # The TCP connection itself failed or timed out (Kafka's
            # CONNECTING state): give the next attempt longer.
            node.failed_connect_attempts += 1
            node.connection_setup_timeout_ms = self.connection_setup_timeout.backoff(
                node.failed_connect_attempts)
        else:
            self._reset_connection_setup_timeout(node)
        node.state = ConnectionState.DISCONNECTED
        node.stats.state_ms = now

    def _authentication_failed(self, node, now, exc):
        # Kafka's processDisconnection calls disconnected() and then
        # authenticationFailed(): each advances the backoff, so an
        # authentication failure backs off one step further than a lost
        # connection.
        if node.authentication_exception is None:
            self.authentication_exceptions += 1
        node.authentication_exception = exc
        node.state = ConnectionState.AUTHENTICATION_FAILED
        node.last_connect_attempt_ms = now
        self._update_reconnect_backoff(node)

    def _ready(self, node):
        node.state = ConnectionState.READY
        node.stats.state_ms = self.time()
        if node.authentication_exception is not None:
            self.authentication_exceptions -= 1
        node.authentication_exception = None
        node.failed_attempts = 0
        node.reconnect_backoff_ms = self.reconnect_backoff.backoff(0)
        self._reset_connection_setup_timeout(node)

    def _update_reconnect_backoff(self, node):
        node.reconnect_backoff_ms = self.reconnect_backoff.backoff(node.failed_attempts)
        node.failed_attempts += 1

    def _reset_connection_setup_timeout(self, node):
        node.failed_connect_attempts = 0
        node.connection_setup_timeout_ms = self.connection_setup_timeout.backoff(0)

    def is_ready(self, node_id):
        node = self._nodes.get(node_id)
        return node is not None and node.state is ConnectionState.READY

    def api_versions(self, node_id):
        """``{api_key: (min, max)}`` the broker announced, or None."""
        node = self._nodes.get(node_id)
        return node.api_versions if node is not None else None

    def api_versions_response(self, node_id):
        """The broker's ApiVersions response body (for broker-api-versions).
        Nodes that gave the same answer share one body: read it, do not
        change it."""
        node = self._nodes.get(node_id)
        return node.api_versions_body if node is not None else None

    def choose_version(self, node_id, api_key):
        """Highest version of ``api_key`` both sides support."""
        node = self._nodes.get(node_id)
        if node is not None:
            versions = node.api_versions
            chosen = self._chosen_versions.get(api_key)
            # (the map is held by the cache: "is" cannot match a new one)
            if chosen is not None and chosen[0] is versions and versions is not None:
                return chosen[1]
        api = messages.API.get(api_key)
        if api is None:
            raise errors.UnsupportedVersionError(f"Unsupported API key {api_key}")
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
        self._chosen_versions[api_key] = (node.api_versions, hi)
        return hi

    def close(self, node_id=None):
        """Close one connection (``node_id``) or everything.

        As Kafka's ``close(node)``, closing a node forgets its connection
        history: no reconnect backoff follows and a kept authentication
        error is dropped (use :meth:`disconnect` to keep the backoff)."""
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
        node = self._nodes.get(node_id)
        if node is None:
            return
        if not node.state.is_disconnected():
            self._fail_node(node_id, errors.ChannelConnectionError("Connection closed"),
                            ConnectionState.DISCONNECTED)
        node.state = ConnectionState.DISCONNECTED
        if node.authentication_exception is not None:
            self.authentication_exceptions -= 1
        node.authentication_exception = None
        node.failed_attempts = 0
        node.reconnect_backoff_ms = 0
        self._reset_connection_setup_timeout(node)

    def remove(self, node_id):
        """Close the connection to ``node_id`` (as :meth:`close`) and forget
        the node entirely: for connections that will not be used again (a
        gateway's per-client upstream connection whose client left)."""
        self.close(node_id)
        self._nodes.pop(node_id, None)
        for key in [k for k in self._request_timeouts if k[0] == node_id]:
            del self._request_timeouts[key]

    def disconnect(self, node_id):
        """Close the connection to ``node_id`` as a failure would (Kafka's
        ``disconnect(node)``): in-flight requests complete as disconnected
        in the next :meth:`poll` and the reconnect backoff starts."""
        node = self._nodes.get(node_id)
        if node is None or node.state.is_disconnected():
            return
        log.info("Client requested disconnect from node %s", node_id)
        self.selector.close(node_id)
        self._fail_node(node_id, errors.ChannelConnectionError(
            f"Connection to node {node_id} ({node.host}:{node.port}) was closed by the client"),
            ConnectionState.DISCONNECTED)

    @property
    def client_id(self):
        return self._client_id

    @client_id.setter
    def client_id(self, value):
        self._client_id = value
        self._request_encoders.clear()
        self._request_heads.clear()

    # ----------------------------------------------------------------- send
    def _corr(self):
        c = self._next_corr
        self._next_corr = (c + 1) & 0x7FFFFFFF
        return c

    # send and _send: ClientLoop (kchannel.client._clientloop_py)
    def _request_sent(self, sent, timeout_ms):
        deadline = sent + timeout_ms + 1
        if deadline < self._next_request_deadline_ms:
            self._next_request_deadline_ms = deadline

    def send_raw(self, node_id, payload, expect_response=True, timeout_ms=None):
        """Send an already-encoded request frame (a gateway forwarding a
        client's request): only the correlation id in its header (bytes 4-8)
        is replaced by this client's.  Returns that correlation id.  Its
        response comes back from :meth:`poll` as a ClientResponse whose
        ``body`` is the raw response frame (header included, correlation id
        not swapped back).  ``expect_response=False`` (Produce with acks=0)
        sends it without waiting for an answer; ``timeout_ms`` replaces
        ``request.timeout.ms`` for this request (a JoinGroup waits for the
        rebalance)."""
        node = self._nodes.get(node_id)
        if node is None or node.state is not ConnectionState.READY:
            raise errors.KChannelError(f"Node {node_id} is not ready")
        corr = self._corr()
        frame = payload if isinstance(payload, bytearray) else bytearray(payload)
        frame[4:8] = corr.to_bytes(4, "big", signed=True)
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        version = int.from_bytes(frame[2:4], "big", signed=True)
        node.stats.tx += 1
        node.stats.txbytes += len(frame)
        self.selector.send(node.id, frame)
        if expect_response:
            sent = self.time()
            node.in_flight[corr] = InFlight(api_key, version, sent, _RAW)
            if timeout_ms is not None:
                self._request_timeouts[(node_id, corr)] = int(timeout_ms)
            self._request_sent(sent, self.request_timeout_ms if timeout_ms is None
                               else int(timeout_ms))
        else:
            self._sent_without_response = True
        return corr

    def has_pending_io(self):
        """Work that the next :meth:`poll` does without waiting for the OS:
        failures to report, data already read or connections completed."""
        return bool(self._pending) or self.selector.has_pending_io()

    def in_flight_count(self, node_id=None):
        if node_id is not None:
            node = self._nodes.get(node_id)
            return len(node.in_flight) if node else 0
        return sum(len(n.in_flight) for n in self._nodes.values())

    # ----------------------------------------------------------------- poll
    # poll: ClientLoop (kchannel.client._clientloop_py)
    def _channel_ready(self, node):
        if self.negotiate_api_versions:
            node.state = ConnectionState.CHECKING_API_VERSIONS
            self._send_api_versions(node, messages.API_VERSIONS.max_version)
        else:
            self._ready(node)

    def _expire_connection_setups(self, now, out):
        """Close the connecting nodes whose connection setup timeout has
        passed; the earliest deadline left is when to look again."""
        sel = self.selector
        earliest = _NO_DELAY_LIMIT
        for node in list(self._nodes.values()):
            if node.state is not ConnectionState.CONNECTING:
                continue
            if sel.is_channel_ready(node.id):
                # (ready but not named in a poll's newly_ready: a channel
                # is never left waiting on that)
                self._channel_ready(node)
            elif now - node.last_connect_attempt_ms > node.connection_setup_timeout_ms:
                log.info("Disconnecting from node %s due to socket connection setup "
                         "timeout. The timeout value is %d ms.", node.id,
                         node.connection_setup_timeout_ms)
                sel.close(node.id)
                self._fail_node(node.id, RequestTimeoutError(
                    f"Connection to node {node.id} ({node.host}:{node.port}) was not "
                    f"established within {node.connection_setup_timeout_ms} ms"),
                    ConnectionState.DISCONNECTED, out)
            else:
                deadline = node.last_connect_attempt_ms + node.connection_setup_timeout_ms + 1
                if deadline < earliest:
                    earliest = deadline
        self._next_setup_deadline_ms = earliest

    def _send_api_versions(self, node, version):
        body = {"client_software_name": CLIENT_SOFTWARE_NAME,
                "client_software_version": __version__}
        node.api_versions_version = version
        self._send(node, _API_VERSIONS, version, body, internal=True)

    # _handle_response: ClientLoop (kchannel.client._clientloop_py)
    def _handle_api_versions_payload(self, node, version, payload, out):
        """The response to this client's own ApiVersions request, as
        received (correlation id first)."""
        # Every connection to a cluster (and each of a storm's many
        # connections to one broker) usually gets the same answer byte for
        # byte: the body and map decoded for the last answer are reused.
        # Decoding its ~60 entries was a tenth of the client's CPU per
        # connection (SASL_SSL, TLS handshake included).
        raw = bytes(payload[4:])
        shared = self._shared_api_versions
        if shared is not None and shared[2] == version and shared[3] == raw:
            node.api_versions = shared[1]
            node.api_versions_body = shared[0]
            self._ready(node)
            log.debug("Node %s is ready; ApiVersions v%d", node.id, version)
            return
        try:
            body = self._decode_response(_API_VERSIONS, version, payload)
        except errors.KChannelError as exc:
            self._protocol_failure(node, exc, out)
            return
        self._handle_api_versions_response(node, version, body, out, raw)

    def _handle_api_versions_response(self, node, version, body, out, raw=None):
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
        shared = self._shared_api_versions
        if shared is not None and shared[0] == body:
            # Every connection to a cluster (and each of a client's many
            # connections to one broker) usually gets the same answer: the
            # nodes share one body and one map (~3 KB per node otherwise).
            # Neither is ever changed in place.
            body, versions = shared[0], shared[1]
        else:
            versions = {e["api_key"]: (e["min_version"], e["max_version"])
                        for e in body.get("api_keys") or ()}
        # (body, map, version and bytes it was decoded from)
        self._shared_api_versions = (body, versions, version, raw)
        node.api_versions = versions
        node.api_versions_body = body
        self._ready(node)
        log.debug("Node %s is ready; ApiVersions v%d", node.id, version)

    def _protocol_failure(self, node, exc, out):
        log.warning("Closing connection to node %s: %s", node.id, exc)
        self.selector.close(node.id)
        self._fail_node(node.id, exc, ConnectionState.DISCONNECTED, out)

    def _fail_node(self, node_id, exc, state, out=None):
        node = self._nodes.get(node_id)
        if node is None:
            return
        now = self.time()
        if not node.state.is_disconnected():
            self.disconnects += 1
            node.stats.disconnects += 1
            if node.state is ConnectionState.READY and isinstance(exc, RequestTimeoutError):
                node.stats.req_timeouts += 1
            self._disconnected(node, now)
            if state is ConnectionState.AUTHENTICATION_FAILED:
                self._authentication_failed(node, now, exc)
        node.exception = exc
        target = out if out is not None else self._pending
        for corr, entry in node.in_flight.items():
            self._request_timeouts.pop((node_id, corr), None)
            if entry.internal is not True:
                target.append(ClientResponse(node_id, entry.api_key, entry.version, corr, None,
                                             exc, entry.sent_ms, self.time()))
        node.in_flight.clear()

    def _expire_requests(self, now, out):
        """Fail the nodes whose oldest request in flight has timed out; the
        earliest deadline left is when to look again."""
        earliest = _NO_DELAY_LIMIT
        for node in list(self._nodes.values()):
            if not node.in_flight:
                continue
            corr, oldest = next(iter(node.in_flight.items()))
            timeout = self._request_timeouts.get((node.id, corr), self.request_timeout_ms)
            if now - oldest.sent_ms <= timeout:
                # Requests behind the oldest may have shorter timeouts of
                # their own: the bound covers the earliest of any.
                for c, entry in node.in_flight.items():
                    deadline = entry.sent_ms + self._request_timeouts.get(
                        (node.id, c), self.request_timeout_ms) + 1
                    if deadline < earliest:
                        earliest = deadline
                    if not self._request_timeouts:
                        break     # all the same timeout: the oldest is the earliest
            else:
                exc = RequestTimeoutError(
                    f"Request {corr} to node {node.id} timed out after {timeout} ms")
                log.info("Disconnecting from node %s due to request timeout.", node.id)
                self.selector.close(node.id)
                self._fail_node(node.id, exc, ConnectionState.DISCONNECTED, out)
        self._next_request_deadline_ms = earliest


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

    Each address is a node of the underlying :class:`NetworkClient`, so its
    reconnect backoff holds across calls:

    * an authentication failure is raised at once and ends ``connect``: the
      remaining ``bootstrap.servers`` are not tried (as in Kafka, where the
      failure is fatal to the metadata bootstrap and fails the admin call
      instead of moving on to another broker).  Until the node's backoff has
      elapsed, ``connect`` raises the same error again without opening a
      socket; afterwards it connects anew;
    * after any other failure ``connect`` waits out what is left of that
      address's backoff (at most ``reconnect.backoff.max.ms``, bounded by
      the timeout) before connecting again.
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
        node_id = f"{addr[0]}:{addr[1]}"
        prev = self.node_id
        # A connection that is still open is closed; a failed one is left
        # alone so that its backoff (and kept authentication error) holds.
        if prev is not None and not net.connection_state(prev).is_disconnected():
            net.close(prev)
        self.node_id = node_id
        self.address = addr
        start = net.time()
        if net.is_blacked_out(node_id, start):
            self._blacked_out(node_id, addr, start, timeout_ms)
        net.connect(node_id, addr[0], addr[1])
        timeout_ms = (net.connection_setup_timeout_for(node_id) + net.request_timeout_ms
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
                net.disconnect(node_id)
                raise RequestTimeoutError(
                    f"Timed out after {timeout_ms} ms connecting to {addr[0]}:{addr[1]}")
            net.poll(min(remaining, 100))

    def _blacked_out(self, node_id, addr, now, timeout_ms):
        """``node_id`` is in its reconnect backoff: raise a kept authentication
        error at once, otherwise wait out the backoff once."""
        net = self.network
        if net.connection_state(node_id) is ConnectionState.AUTHENTICATION_FAILED:
            exc = net.authentication_exception(node_id)
            if exc is not None:
                log.debug("Node %s failed authentication; not reconnecting for another %d ms",
                          node_id, net.connection_delay(node_id, now))
                raise exc
        delay = net.connection_delay(node_id, now)
        limit = (net.connection_setup_timeout_for(node_id) + net.request_timeout_ms
                 if timeout_ms is None else timeout_ms)
        if delay <= limit:
            # Nothing else to do meanwhile: the selector's wait is the sleep.
            net.poll(delay)
        now = net.time()
        if net.is_blacked_out(node_id, now):
            raise errors.ChannelConnectionError(
                f"Connection to {addr[0]}:{addr[1]} is in reconnect backoff for another "
                f"{net.connection_delay(node_id, now)} ms after: "
                f"{net.connection_exception(node_id)}")

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
                net.disconnect(self.node_id)
                raise RequestTimeoutError(f"Request timed out after {timeout_ms} ms")

    def close(self):
        self.network.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
