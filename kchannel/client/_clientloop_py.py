"""The per-request hot path of :class:`kchannel.client.NetworkClient`.

``NetworkClient`` derives from :class:`ClientLoop`, which holds what runs
for every request and every response: ``send`` (encode, queue, track in
flight), ``poll`` (one selector poll and the handing out of what it
completed) and the correlation of each response with its request.  The
rest (connections, backoff, ApiVersions, timeouts, failures) stays in
``network_client.py`` and is called through ``self``.  :class:`ClientResponse`
and :class:`NodeStats`, made once per response and updated per request,
live here too.

This module is a twin (see ``kchannel._impl``): the same source is compiled
by Cython in pure-Python mode as ``kchannel.client._cclientloop``, where
``_cclientloop.pxd`` makes the three classes extension types whose fields
are C fields (a response object is made without a Python ``__init__``
frame, the in-flight map and counters are read without attribute lookups).
Pure Python runs the same code with ``__slots__``.
"""
import collections
import struct
import time as _time

from .. import _impl, errors
from ..log import get_logger
from ..network.channel import State
from ..protocol import messages
from ..protocol.headers import request_encoder, request_header_parts
from ..utils import now_ms
from .connection_state import ConnectionState

# NetworkClient's logger: these methods are NetworkClient's.
log = get_logger("kchannel.client")

__all__ = ["ClientLoop", "ClientResponse", "InFlight", "NodeState", "NodeStats", "RTT_SAMPLES",
           "complete_responses", "cluster_poll"]
# ClusterClient's logger, for complete_responses (its poll's loop)
_cluster_log = get_logger("kchannel.cluster_client")

_API_VERSIONS = messages.API_VERSIONS.api_key
# The marker of a request forwarded by send_raw (its response is not decoded).
_RAW = "raw"
_DISCONNECTED = ConnectionState.DISCONNECTED
_AUTHENTICATION_FAILED = ConnectionState.AUTHENTICATION_FAILED
# A frame's size prefix, its header's first four bytes (API key and
# version) and the correlation id, packed in one call per request.
_SIZE_HEAD_CORR = struct.Struct(">i4si")
_I32 = struct.Struct(">i")
# Their methods bound once: a call per request/response of a module
# global, not a method lookup on the Struct (~200 instructions) each time.
_pack_size_head_corr = _SIZE_HEAD_CORR.pack
_unpack_i32 = _I32.unpack_from
# The compiled twin packs a request's size prefix, header head and
# correlation id and reads a response's correlation id in C
# (_c_size_head_corr, _c_corr: see _cclientloop.pxd), not through the
# Struct methods (~350 and ~400 instructions per request and response).
# The pure twin never reads those names.
_C_WIRE = __name__.endswith("._cclientloop")
# (_c_corr's answer for a payload it cannot read in place: out of int32)
_CORR_UNREAD = 1 << 40
# (read per request: an Enum member read from its class is a metaclass
# __getattr__ call, ~850 instructions compiled)
_READY = ConnectionState.READY
_wall_time = _time.time
# The selector's base class (the netloop twin in use): _send calls its
# send as a C call once compiled (see _cclientloop.pxd); any other
# selector (a test's stand-in) through its attribute.
_SelectorLoop = _impl.load_twin("netloop").SelectorLoop


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


def complete_responses(responses, start, callbacks, stop_key):
    """``ClusterClient.poll``'s hand-out of ``responses`` from index
    ``start`` on: each one's callback (``callbacks.pop((node id,
    correlation id))``, responses without one skipped) called in order, an
    error it raises logged; returns the index of the first response whose
    key is ``stop_key`` (the cluster client's Metadata request, which it
    handles itself before calling this again from the next index), -1 at
    the end.  A response per Produce request: the loop in the interpreter
    cost more than the callback it calls."""
    n = len(responses)
    i = start
    while i < n:
        resp = responses[i]
        key = (resp.node_id, resp.correlation_id)
        if key == stop_key:
            return i
        cb = callbacks.pop(key, None)
        if cb is not None:
            try:
                cb(resp)
            except Exception:
                _cluster_log.exception("Uncaught error in request completion for %r", resp)
        i += 1
    return -1


def cluster_poll(cc, timeout_ms, now=None):
    """``ClusterClient.poll``, its method (``cc``: the cluster client):
    metadata upkeep, I/O for up to ``timeout_ms``, then the callbacks of
    the completed requests.  Here, not in ``cluster_client``, to be
    compiled: it runs once per poll (per Produce request of a producer),
    its caller the compiled Sender."""
    client = cc.client
    now = cc.time() if now is None else now
    md = cc.metadata
    if not md.need_full_update and not md.failed_attempts:
        # Metadata.time_to_next_update's usual case (no update asked
        # for, the last one succeeded), inline: run once per poll, its
        # three calls and _maybe_update_metadata's cost more than the
        # comparisons.
        wait = md.last_successful_refresh_ms + md.metadata_max_age_ms
        backoff_due = md.last_refresh_ms + md.refresh_backoff_ms
        if backoff_due > wait:
            wait = backoff_due
        wait -= now
        if wait <= 0:
            wait = cc._maybe_update_metadata(now)
    else:
        wait = cc._maybe_update_metadata(now)
    if wait < timeout_ms:
        timeout_ms = wait
    if timeout_ms < 0:
        timeout_ms = 0
    disconnects = client.disconnects
    responses = client.poll(timeout_ms)
    # (the clock as the poll's wait ended, read by the selector: no
    # second read here)
    now = client.selector.poll_time_ms
    if client.disconnects != disconnects:
        # Kafka's DefaultMetadataUpdater.handleServerDisconnect: a lost or
        # refused connection may mean stale metadata (a dead leader or
        # coordinator), so refresh it (the retry back-off paces this).
        cc.metadata.request_update()
    # Each response's callback in order (the clientloop twin's loop);
    # the Metadata response, where it comes, handled here.
    if responses:
        i = complete_responses(responses, 0, cc._callbacks, cc._metadata_in_flight)
        while i >= 0:
            cc._metadata_in_flight = None
            cc._handle_metadata(responses[i], now)
            i = complete_responses(responses, i + 1, cc._callbacks, None)
    # (the count of nodes keeping an authentication error is never below
    # their number: zero means none, without a call per poll)
    if client.authentication_exceptions:
        cc._check_fatal()
    return responses


class InFlight:
    """One request in flight on a node (the values of ``_Node.in_flight``,
    keyed by correlation id, oldest first): its ``api_key`` and
    ``version``, when it was sent (``sent_ms``) and ``internal``: True for
    the client's own ApiVersions request (answered to no caller), False for
    a caller's request, ``"raw"`` for a frame forwarded by ``send_raw``
    (its response is handed over undecoded)."""

    __slots__ = ("api_key", "version", "sent_ms", "internal")

    def __init__(self, api_key, version, sent_ms, internal):
        self.api_key = api_key
        self.version = version
        self.sent_ms = sent_ms
        self.internal = internal

    def __repr__(self):
        return (f"InFlight(api_key={self.api_key}, v{self.version}, "
                f"sent_ms={self.sent_ms}, internal={self.internal!r})")


# Round-trip times kept per node for the statistics callback (the latest).
RTT_SAMPLES = 1024


class NodeStats:
    """What a node's connections did, for librdkafka-style statistics
    (``stats_cb``): requests sent and bytes (``tx``/``txbytes``), responses
    and bytes (``rx``/``rxbytes``), connections started and lost
    (``connects``/``disconnects``), requests that timed out
    (``req_timeouts``), the latest round-trip times in ms (``rtts``) and
    when the connection state last changed (``state_ms``).  Kept across
    the node's connections."""

    __slots__ = ("tx", "txbytes", "rx", "rxbytes", "connects", "disconnects",
                 "req_timeouts", "rtts", "state_ms")

    def __init__(self, now):
        self.tx = self.txbytes = self.rx = self.rxbytes = 0
        self.connects = self.disconnects = self.req_timeouts = 0
        self.rtts = collections.deque(maxlen=RTT_SAMPLES)
        self.state_ms = now


class NodeState:
    """The base class of ``network_client._Node``: the fields of a node the
    per-request path reads (``_send``: ``id``, ``in_flight``, ``stats``;
    ``_handle_response``: the same; the Sender: ``state``, ``in_flight``,
    ``api_versions``), C fields of the compiled twin (``_cclientloop.pxd``):
    a typed read there is a load instead of a generic slot lookup through
    the type (~150-250 instructions each, ~10 per Produce request).
    ``_Node.__init__`` sets them; its other fields stay its own slots."""

    __slots__ = ("id", "state", "in_flight", "api_versions", "stats")

    def __init__(self):
        # (_Node.__init__ sets the fields; nothing to do here)
        pass


class ClientLoop:
    """The hot path of :class:`kchannel.client.NetworkClient` (its base
    class; see the module docstring).  Not used on its own:
    ``NetworkClient.__init__`` sets up the state these methods use."""

    # The state read per request: slots here, C fields of the compiled twin
    # (_cclientloop.pxd declares the same names); __dict__ holds the rest.
    __slots__ = ("__dict__", "__weakref__",
                 "_nodes", "_pending", "selector", "_sent_without_response",
                 "_request_timeouts", "_request_encoders", "_request_heads",
                 "_response_decoders",
                 "_body_decoders", "_next_corr",
                 "_next_request_deadline_ms", "_next_setup_deadline_ms", "request_timeout_ms",
                 "time")

    def __init__(self):
        # (NetworkClient.__init__ sets the state up; nothing to do here)
        pass

    # ----------------------------------------------------------------- send
    def send(self, node_id, api_key, body, version=None, expect_response=True,
             timeout_ms=None):
        """Send a request; returns its correlation id.  ``version`` defaults
        to the highest both sides support.  ``expect_response=False`` is for
        a request the broker does not answer (Produce with acks=0): it is not
        tracked in flight and no ClientResponse follows.  ``timeout_ms``
        overrides ``request.timeout.ms`` for this request (Kafka gives
        JoinGroup the rebalance timeout)."""
        node = self._nodes.get(node_id)
        if node is None or node.state is not _READY:
            raise errors.KChannelError(f"Node {node_id} is not ready")
        if version is None:
            version = self.choose_version(node_id, api_key)
        # (int() only of what is not an int already: the Sender's key and
        # version are, and int() of an int is still a call)
        if type(api_key) is not int:
            api_key = int(api_key)
        if type(version) is not int:
            version = int(version)
        corr = self._send(node, api_key, version, body, internal=False,
                          expect_response=expect_response)
        if timeout_ms is not None and expect_response:
            self._request_timeouts[(node_id, corr)] = int(timeout_ms)
            # (its own timeout may be shorter than request.timeout.ms)
            self._request_sent(node.in_flight[corr].sent_ms, int(timeout_ms))
        return corr

    def _send(self, node, api_key, version, body, internal, expect_response=True):
        corr = self._next_corr          # self._corr(), inlined (once per request)
        self._next_corr = (corr + 1) & 0x7FFFFFFF
        stats = node.stats
        if type(body) is tuple:
            # A body given as parts (a producer's request with its record
            # batch): the frame as parts, size prefix, header and the
            # body's parts, which the send queue writes without copying the
            # batch into a frame.  The header's fixed bytes come from a
            # cache: no encoder call per request (what request_encoder's
            # framed parts path returns, written here).
            hdr = self._request_heads.get((api_key << 16) | version)
            if hdr is None:
                hdr = self._request_heads[(api_key << 16) | version] = request_header_parts(
                    api_key, version, self.client_id)
            head, tail = hdr
            n = len(head) + 4 + len(tail)
            for part in body:
                n += len(part)
            if n > 0x7FFFFFFF:
                raise ValueError(f"frame payload too large ({n} bytes)")
            if _C_WIRE:
                first = _c_size_head_corr(n, head, corr)
                if first is None:
                    first = _pack_size_head_corr(n, head, corr)
            else:
                first = _pack_size_head_corr(n, head, corr)
            frame = (first, tail) + body
            stats.tx += 1
            stats.txbytes += n + 4
        else:
            encode = self._request_encoders.get((api_key << 16) | version)
            if encode is None:
                encode = self._request_encoders[(api_key << 16) | version] = request_encoder(
                    api_key, version, self.client_id, framed=True, parts=True)
            frame = encode(corr, body)
            stats.tx += 1
            stats.txbytes += len(frame)
        sel = self.selector
        if isinstance(sel, _SelectorLoop):
            # (a C call of the compiled selector's cpdef send: no bound
            # method made nor arguments parsed per request)
            loop = sel
            loop.send(node.id, frame, True)
        else:
            sel.send(node.id, frame, True)
        if expect_response:
            t = self.time     # self.time(), the default clock's call inlined
            sent = int(_wall_time() * 1000) if t is now_ms else t()
            # InFlight(api_key, version, sent, internal) without the
            # __init__ call: the compiled twin makes it as cheaply as a tuple
            entry = InFlight.__new__(InFlight)
            entry.api_key = api_key
            entry.version = version
            entry.sent_ms = sent
            entry.internal = internal
            node.in_flight[corr] = entry
            # ("> timeout" expires it: one millisecond after)
            deadline = sent + self.request_timeout_ms + 1
            if deadline < self._next_request_deadline_ms:
                self._next_request_deadline_ms = deadline
        else:
            self._sent_without_response = True
        return corr

    # ----------------------------------------------------------------- poll
    def poll(self, timeout_ms):
        """Do I/O; returns the ClientResponses completed by it."""
        out, self._pending = self._pending, []
        if out:
            timeout_ms = 0
        sel = self.selector
        # The selector may wait after writing this poll's requests unless
        # one of them expects no response (its completed send is its
        # result, reported by this poll without delay).
        wait = not self._sent_without_response
        self._sent_without_response = False
        # (wait_after_flush positionally: no keyword names per poll)
        sel.poll(timeout_ms, wait)
        now = sel.poll_time_ms      # (the same clock, read as the wait ended)
        for nid in sel.connected:
            node = self._nodes.get(nid)
            if node is not None:
                node.transport_connected = True
                log.debug("Completed connection to node %s", nid)
        receives = sel.completed_receives
        if receives:
            nodes = self._nodes
            for nid, payload in receives:
                node = nodes.get(nid)
                if node is None:
                    continue
                st = node.state       # node.state.is_disconnected(), inlined
                if st is _DISCONNECTED or st is _AUTHENTICATION_FAILED:
                    # (a protocol failure earlier in this poll's batch closed it)
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
                log.error("Connection to node %s (%s:%s) failed authentication due to: %s",
                          nid, node.host, node.port, exc)
                if self._authentication_failed_callback is not None:
                    self._authentication_failed_callback(nid, exc)
            else:
                st = ConnectionState.DISCONNECTED
                if exc is None:
                    exc = errors.ChannelConnectionError(
                        f"Connection to node {nid} ({node.host}:{node.port}) was "
                        f"disconnected ({state.name})")
            self._fail_node(nid, exc, st, out)
        # Channels that became ready: start ApiVersions negotiation.  The
        # selector names them, so a storm of connections is not looked
        # through after every poll (that was O(nodes) per poll).
        for nid in sel.newly_ready:
            node = self._nodes.get(nid)
            if (node is not None and node.state is ConnectionState.CONNECTING
                    and sel.is_channel_ready(nid)):
                self._channel_ready(node)
        if now >= self._next_setup_deadline_ms:
            self._expire_connection_setups(now, out)
        if now >= self._next_request_deadline_ms:
            self._expire_requests(now, out)
        return out

    def _decode_response(self, api_key, version, payload):
        """The body of a response frame (correlation id first); raises
        KChannelError when it does not decode."""
        decode = self._response_decoders.get((api_key << 16) | version)
        if decode is None:
            decode = self._new_response_decoder(api_key, version)
        return decode(payload)

    def _handle_response(self, node, payload, now, out):
        if len(payload) < 4:
            self._protocol_failure(node, errors.InvalidRequestError(
                f"Response of {len(payload)} bytes has no correlation id"), out)
            return
        if _C_WIRE:
            corr = _c_corr(payload)
            if corr == _CORR_UNREAD:
                corr = _unpack_i32(payload)[0]
        else:
            corr = _unpack_i32(payload)[0]
        in_flight = node.in_flight
        if not in_flight:
            self._protocol_failure(node, errors.InvalidRequestError(
                f"Received a response (correlation id {corr}) with no request in flight"), out)
            return
        # The oldest request in flight (its first key), taken out only when
        # it matches: on a mismatch it stays in front and the failure
        # reports it with the rest.  (Iteration, a subscript and a del: C
        # slots of the OrderedDict, no popitem(last=False) method call with
        # a keyword nor a (key, value) tuple per response.)
        for expected in in_flight:
            break
        if corr != expected:
            self._protocol_failure(node, errors.InvalidRequestError(
                f"Correlation id for response ({corr}) does not match request ({expected})"), out)
            return
        entry = in_flight[expected]
        del in_flight[expected]
        api_key = entry.api_key
        version = entry.version
        sent = entry.sent_ms
        internal = entry.internal
        stats = node.stats
        stats.rx += 1
        stats.rxbytes += len(payload) + 4       # (the size prefix included, as sent)
        stats.rtts.append(now - sent)
        if self._request_timeouts:
            self._request_timeouts.pop((node.id, corr), None)
        if internal is _RAW:
            out.append(ClientResponse(node.id, api_key, version, corr, payload, None, sent, now))
            return
        if internal and api_key == _API_VERSIONS:
            # (decoded there only when the bytes differ from the last answer)
            self._handle_api_versions_payload(node, version, payload, out)
            return
        try:
            key = (api_key << 16) | version
            # (the usual header-v0 response: its body decoder straight,
            # the correlation id checked above; see _new_response_decoder)
            decode = self._body_decoders.get(key)
            if decode is not None:
                body = decode(payload, 4)
            else:
                decode = self._response_decoders.get(key)
                if decode is None:
                    decode = self._new_response_decoder(api_key, version)
                body = decode(payload)
        except errors.KChannelError as exc:
            self._protocol_failure(node, exc, out)
            return
        # ClientResponse(node.id, api_key, version, corr, body, None, sent,
        # now) without the call with eight arguments (as InFlight in _send)
        resp = ClientResponse.__new__(ClientResponse)
        resp.node_id = node.id
        resp.api_key = api_key
        resp.api_version = version
        resp.correlation_id = corr
        resp.body = body
        resp.exception = None
        resp.request_time_ms = sent
        resp.receive_time_ms = now
        out.append(resp)
