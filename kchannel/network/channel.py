"""One Kafka connection: transport + authenticator + framing + send queue.

Mirrors ``org.apache.kafka.common.network.KafkaChannel`` and ``ChannelState``.

Lifecycle: ``NOT_CONNECTED`` -> (``finish_connect``) -> ``AUTHENTICATE`` ->
(``prepare`` until the transport handshake and the authenticator complete)
-> ``READY``.  The selector records the state a channel was in when it was
closed (``EXPIRED`` for idle expiry, ``LOCAL_CLOSE`` for an explicit close,
``FAILED_SEND`` / ``FAILED_RECEIVE`` for I/O faults, ``AUTHENTICATION_FAILED``
carrying the exception).

The channel owns the connection's single :class:`FrameDecoder`; the
authenticator reads frames through :class:`AuthIO` from that same decoder, so
anything the peer pipelined behind its last authentication frame is still
there for the data phase.

Receives: the transport reads straight into the decoder's memory
(``transport.receive_into(decoder)``: plaintext ``recv_into``, TLS
``SSLObject.read`` into it) and data-phase frames are handed out as
read-only memoryviews of that memory (see ``kchannel._framing_py`` for who
owns what); the authenticator's reads get ``bytes``.
"""
import weakref

from .. import errors
from ..utils import now_ms
from ..framing import FrameDecoder, encode_frame
from .ops import OP_NONE, OP_READ, OP_WRITE
from ..log import get_logger
from .. import _impl
# The states and the send queue live in modules of their own; their names
# are still exported from here.
from .channel_state import (  # noqa: F401 - re-exported
    _MUTE_TRANSITIONS, _NOT_MUTED, ChannelMuteEvent, ChannelMuteState, ChannelState, State)
from .channel_sends import (  # noqa: F401 - re-exported
    _MAX_PAYLOAD, _NO_SENDS, _SIZE, COALESCE_BELOW, COALESCE_MAX, GATHER_MAX,
    GATHER_MAX_BUFFERS, HEAD_JOIN, SEPARATE_FROM, SEPARATE_FROM_UNGATHERED, ChannelSendQueue)

log = get_logger("kchannel.network.channel")

# The read path run per poll and channel (compiled when built); see
# kchannel.network._netpass_py.
_netpass = _impl.load_twin("netpass")

__all__ = ["State", "ChannelState", "ChannelMuteState", "ChannelMuteEvent", "AuthIO",
           "KafkaChannel",
           "DEFAULT_MAX_RECEIVE_SIZE", "READ_CHUNK"]

DEFAULT_MAX_RECEIVE_SIZE = 104857600      # socket.request.max.bytes
READ_CHUNK = 65536
# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS: a connection may
# not start a server re-authentication more than once a second (DoS guard).
MIN_REAUTH_INTERVAL_MS = 1000


def forget_traceback(exc):
    """Drop the tracebacks of ``exc`` and of the exceptions chained to it.

    A failed channel keeps its exception (``ChannelState.exception``) until
    the selector's next poll, and callers may keep it longer; its traceback
    would keep every frame it went through alive, and with them the channel,
    the poll's lists of ready channels and their buffers, all in reference
    cycles that only the cyclic garbage collector breaks.  The type and
    message are what a failure is reported with."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        if exc.__cause__ is not None:
            forget_traceback(exc.__cause__)
        exc = exc.__context__


def _format_address(addr):
    if addr is None:
        return None
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = addr[0]
        return f"[{host}]:{addr[1]}" if ":" in str(host) else f"{host}:{addr[1]}"
    return str(addr)


class AuthIO:
    """What an authenticator may do with its connection.

    * ``read_frame()`` -> next complete frame payload or None.  Reads from
      the transport into the channel's FrameDecoder.  Raises
      ``ChannelConnectionError`` on EOF and ``InvalidReceiveError`` for a bad
      size prefix.
    * ``write_frame(payload)`` queues a size-prefixed frame;
      ``write_raw(data)`` queues bytes as they are; ``flush()`` writes what
      the socket accepts now and returns True when nothing is left.
    * ``set_max_receive_size(n)`` (SASL: 524288 before authentication).
    * ``transport``, ``client_address``, ``listener_name``,
      ``security_protocol``, ``channel_id``, ``mode``.
    """

    __slots__ = ("_ch",)

    def __init__(self, channel):
        # A proxy, not the channel: channel -> AuthIO -> channel would be a
        # reference cycle, and a closed channel (with its decoder buffer, up
        # to sasl.server.max.receive.size before authentication) would wait
        # for the cyclic garbage collector instead of being freed at once.
        self._ch = weakref.proxy(channel)

    @property
    def transport(self):
        return self._ch.transport

    @property
    def client_address(self):
        return self._ch.remote_address

    @property
    def listener_name(self):
        return self._ch.listener_name

    @property
    def security_protocol(self):
        return self._ch.security_protocol

    @property
    def channel_id(self):
        return self._ch.id

    def now(self):
        """Current time in epoch ms from the selector's clock.

        ``prepare(now)`` hands down the time its poll began; within one call
        an authenticator may write a challenge and then read the peer's
        answer to it, which the peer produced *after* that time (an unsecured
        OAUTHBEARER token's ``iat``, say).  Credentials are judged at the
        time their frame was read, as Kafka's validators read the clock when
        they validate.
        """
        return self._ch.clock()

    @property
    def mode(self):
        return self._ch.mode

    def read_frame(self):
        return self._ch._read_one_frame()

    def write_frame(self, payload):
        self._ch._enqueue_auth(encode_frame(payload))

    def write_raw(self, data):
        self._ch._enqueue(bytes(data), report=False)

    def flush(self):
        return self._ch._flush_all()

    def has_pending_writes(self):
        return self._ch.has_pending_writes()

    def set_max_receive_size(self, n):
        self._ch.decoder.max_size = n

    def get_max_receive_size(self):
        return self._ch.decoder.max_size

    @property
    def max_receive_size(self):
        return self._ch.max_receive_size


class KafkaChannel(ChannelSendQueue):
    """A connection: ``transport`` + authenticator + framing + sends.

    ``authenticator_factory()`` creates an authenticator; it is called once
    now and again for each re-authentication (Kafka's authenticatorCreator).
    """

    def __init__(self, id, transport, authenticator_factory,
                 max_receive_size=DEFAULT_MAX_RECEIVE_SIZE, *, mode="server",
                 listener_name=None, security_protocol="PLAINTEXT",
                 remote_address=None, read_chunk=READ_CHUNK):
        self.id = id
        self.transport = transport
        self._authenticator_factory = authenticator_factory
        self.authenticator = authenticator_factory()
        self.max_receive_size = max_receive_size
        self.mode = mode
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.remote_address = remote_address
        self.read_chunk = read_chunk
        self.decoder = FrameDecoder(max_receive_size)
        self.io = AuthIO(self)
        # The owning selector's ms clock (injectable in tests); AuthIO.now()
        # reads it so an authenticator can take the time a frame arrived.
        self.clock = now_ms
        self.state = ChannelState.NOT_CONNECTED
        self.mute_state = ChannelMuteState.NOT_MUTED
        self.successful_authentications = 0
        # ops the transport/authenticator said they wait for (until READY)
        self.prepare_ops = OP_READ
        self._last_reauth_start_ms = None
        self._disconnected = False
        self._eof = False
        # Frames pulled out of the decoder to answer "is a frame complete?"
        # (or put back by unread()), oldest first.  A list: it is almost
        # always empty, and an empty list holds no item memory (a deque
        # allocates a block up front); it never holds more than one read's
        # frames, so taking from its front is cheap.
        self._stash = []
        # An InvalidReceiveError met by decoder.frames() behind complete
        # frames: raised once those frames (stashed) are handed out, as if
        # the frames had been taken one at a time.
        self._invalid = None
        # send queue: deque of QueuedSend (data, size, report, head: see
        # kchannel.network._sendqueue_py).
        # _NO_SENDS while nothing is queued (see _NO_SENDS).
        self._sends = _NO_SENDS
        self._write_vectored = transport.write_vectored
        self._accepted = []       # sizes fully handed to the transport but
                                  # maybe still buffered in it (TLS)
        self._mid_write = False
        # True once authentication frames written in this prepare() pass all
        # went out: the authenticator's next read_frame() looks at buffered
        # input only.  The peer answers what was just sent, so the answer
        # cannot be in the socket yet and a recv would only return EAGAIN
        # (one per SASL round trip on each side); prepare() returns
        # OP_READ and the readiness event brings the answer.
        self._awaiting_answer = False
        # An authentication frame went straight to the transport since the
        # last flush (see _enqueue_auth); flush() then sets _awaiting_answer.
        self._auth_written = False
        # The authenticator ready() found complete over a ready transport
        # (False: not ready yet).  Connection setup asks "ready?" dozens of
        # times per connection; once true it stays true until the
        # authenticator is replaced (re-authentication swaps in a new
        # object, so the identity check fails) or the channel closes.
        self._ready_for = False
        # A TLS transport leaves the last flight of its handshake (the TLS
        # 1.3 client's Finished, the server's session tickets) unsent when
        # the handshake completes, and prepare() sends it together with
        # whatever the authenticator writes next (ApiVersions request or
        # response): one segment and one send() instead of two.
        self._deferred_hs_flush = transport.defer_handshake_flush is not None
        if self._deferred_hs_flush:
            transport.defer_handshake_flush = True

    # -- identity -------------------------------------------------------------
    def __repr__(self):
        return (f"KafkaChannel(id={self.id!r}, state={self.state.name}, "
                f"remote={self.socket_description()})")

    def socket_description(self):
        return _format_address(self.remote_address) or "unknown"

    def fileno(self):
        return self.transport.fileno()

    # -- connection ------------------------------------------------------------
    def finish_connect(self):
        """Complete a non-blocking connect.  True when connected; raises
        ``ChannelConnectionError`` when the connect failed."""
        connected = self.transport.finish_connect()
        if connected:
            self.state = ChannelState.READY if self.ready() else ChannelState.AUTHENTICATE
        return connected

    def mark_connected(self):
        """Accepted or immediately-connected sockets skip finish_connect."""
        self.state = ChannelState.READY if self.ready() else ChannelState.AUTHENTICATE

    # -- preparation -----------------------------------------------------------
    def ready(self):
        auth = self.authenticator
        if auth is self._ready_for:
            return True
        # (the authenticator first: it is the one not complete during the
        # exchange, and the TLS transport is not asked then)
        if auth.complete() and self.transport.ready():
            self._ready_for = auth
            return True
        return False

    def prepare(self, now):
        """Drive the TLS handshake, then the authenticator.

        Returns the readiness ops still needed (0 once READY).  An
        authentication failure makes the state AUTHENTICATION_FAILED with the
        exception; it is raised as is when the TLS handshake failed, wrapped
        in ``DelayedResponseAuthenticationError`` when the authenticator
        failed (its error response goes out at the close, which a server
        delays: Kafka's ``KafkaChannel.prepare``).  Network errors propagate.
        """
        authenticating = False
        ops = OP_NONE
        transport = self.transport
        # a readiness event (or buffered input) brought this call
        self._awaiting_answer = False
        try:
            transport_ready = transport.ready()
            if not transport_ready:
                ops = transport.handshake() or OP_NONE
                transport_ready = transport.ready()
                if transport_ready and self._deferred_hs_flush:
                    try:
                        if not self.authenticator.complete():
                            authenticating = True
                            ops = self.authenticator.authenticate(self.io, now) or OP_NONE
                    except BaseException:
                        # The flight still goes out (best effort: the
                        # authenticator's exception is what counts).
                        try:
                            transport.flush()
                        except Exception:  # noqa: BLE001
                            pass
                        raise
                    # The handshake's last flight, unless the authenticator
                    # wrote a frame: transport.write() then encrypted it
                    # behind the flight and sent both in one send().
                    if transport.has_pending_writes():
                        transport.flush()
                    transport_ready = False     # authenticator already run
            if transport_ready and not self.authenticator.complete():
                authenticating = True
                ops = self.authenticator.authenticate(self.io, now) or OP_NONE
        except errors.AuthenticationError as exc:
            self.state = ChannelState(State.AUTHENTICATION_FAILED, exc,
                                      self.socket_description())
            if authenticating:
                raise errors.DelayedResponseAuthenticationError(exc) from exc
            raise
        # self.ready(), knowing what this call already asked: a transport
        # found ready stays so (a failure raises instead)
        auth = self.authenticator
        if auth.complete() and (transport_ready or transport.ready()):
            self._ready_for = auth
            self.successful_authentications += 1
            self.state = ChannelState.READY
            self.prepare_ops = OP_NONE
            return OP_NONE
        if self._has_pending_auth_writes():
            ops |= OP_WRITE
        if not ops:
            ops = OP_READ
        self.prepare_ops = ops
        return ops

    def principal(self):
        return self.authenticator.principal()

    # -- mute ------------------------------------------------------------------
    def mute(self):
        if self.mute_state is ChannelMuteState.NOT_MUTED:
            self.mute_state = ChannelMuteState.MUTED

    def unmute(self):
        """Kafka's maybeUnmute: only MUTED becomes NOT_MUTED."""
        if self.mute_state is ChannelMuteState.MUTED:
            self.mute_state = ChannelMuteState.NOT_MUTED
        return self.mute_state is ChannelMuteState.NOT_MUTED

    maybe_unmute = unmute

    def handle_channel_mute_event(self, event):
        """Kafka's handleChannelMuteEvent: move through the server's
        response-pending / throttled mute states.  Raises ValueError for a
        transition Kafka does not allow."""
        nxt = _MUTE_TRANSITIONS[event].get(self.mute_state)
        if nxt is None:
            raise ValueError(f"Cannot transition from {self.mute_state.name} for {event.name}")
        self.mute_state = nxt

    def is_muted(self):
        return self.mute_state is not ChannelMuteState.NOT_MUTED

    is_mute = is_muted

    # -- interest ----------------------------------------------------------------
    def interest_ops(self):
        """The readiness events the selector should wait for now."""
        if self._disconnected:
            return OP_NONE
        if self.state is ChannelState.NOT_CONNECTED:
            return OP_WRITE
        # (not self.ready(), its cached case inlined)
        if self._ready_for is not self.authenticator and not self.ready():
            ops = self.prepare_ops or OP_READ
            # Data sends queued behind a re-authentication wait for READY;
            # only authentication bytes (or TLS records) call for OP_WRITE,
            # otherwise an idle writable socket would spin the selector.
            if self._has_pending_auth_writes():
                ops |= OP_WRITE
            return ops
        ops = OP_NONE if self.is_muted() else OP_READ
        if self._sends or self.has_pending_writes():
            ops |= OP_WRITE
        return ops

    settle_state = _netpass.settle_state

    # -- receive -----------------------------------------------------------------
    def has_bytes_buffered(self):
        """True when data is waiting that no readiness event will announce:
        decrypted TLS bytes, or complete frames already in the decoder."""
        t = self.transport
        if t.holds_bytes and t.has_bytes_buffered():
            return True
        return self.has_complete_frame()

    def has_complete_frame(self):
        """True when a whole frame is already buffered (read ahead), or a
        bad size prefix found behind frames already handed out waits to be
        raised."""
        if self._stash or self._invalid is not None:
            return True
        if self.decoder.buffered < 4:
            return False
        # The decoder has no peek: pull the frame out and keep it aside
        # (``_next_buffered_frame`` hands it out first).
        try:
            f = self.decoder.next_frame()
        except errors.InvalidReceiveError:
            return True   # surfaces on the next read
        if f is None:
            return False
        self._stash.append(f)
        return True

    def _next_buffered_frame(self):
        if self._stash:
            return self._stash.pop(0)
        if self._invalid is not None:
            exc, self._invalid = self._invalid, None
            raise exc
        return self.decoder.next_frame()

    def _fill(self, max_bytes, once=False):
        """Read up to about ``max_bytes`` from the transport into the decoder.
        Returns the number of bytes read.  EOF is remembered (``_eof``) and
        raised by the caller once buffered frames are drained.  ``once``: a
        single transport read (``read_frames`` takes the frames out between
        reads, so complete frames are never carried into a new chunk)."""
        total = 0
        decoder = self.decoder
        # Straight into the decoder's memory (no copy).
        receive_into = self.transport.receive_into
        while total < max_bytes and not self._eof:
            try:
                n = receive_into(decoder)
            except errors.ChannelConnectionError:
                self._eof = True
                break
            if not n:
                break
            total += n
            if once:
                break
            # a full decoder frame is enough for this round (fairness); keep
            # reading only while no frame is complete and the peer keeps up
            if decoder.buffered >= 4 and not decoder.has_partial():
                break
        return total

    def _transport_buffered(self):
        return self.transport.has_bytes_buffered()

    def unread(self, frames):
        """Put complete frames taken from :meth:`read_frames` back in front
        of the unread input, in order: the next reads (data phase or the
        authenticator's) return them first, as if never read."""
        self._stash[:0] = frames

    def _read_one_frame(self):
        """AuthIO.read_frame: one frame, reading only if none is buffered."""
        if self._stash:
            frame = self._stash.pop(0)
            # Read ahead under the data phase's limit: the authenticator's
            # (SASL: 524288) applies as if the frame came off the socket now.
            limit = self.decoder.max_size
            if len(frame) > limit:
                raise errors.InvalidReceiveError(
                    f"Invalid receive (size = {len(frame)} larger than {limit})")
            return bytes(frame)
        frame = self._next_buffered_frame()
        if frame is None:
            if self._awaiting_answer:
                # (once: a caller reading again without a readiness event
                # in between reads the socket)
                self._awaiting_answer = False
                if not self._transport_buffered():
                    return None
            self._fill(self.read_chunk)
            frame = self._next_buffered_frame()
            if frame is None:
                if self._eof:
                    raise errors.ChannelConnectionError(
                        f"Connection with {self.socket_description()} closed by peer")
                return None
        # Authenticators get bytes: their frames are small, parsed by code
        # that may keep parts of them, and must not pin receive memory.
        return bytes(frame)

    def read(self, max_frames=1, max_bytes=1048576):
        """Data phase read: a list of at most ``max_frames`` complete payloads
        (see :meth:`read_frames`)."""
        return self.read_frames(max_frames, max_bytes)[0]

    # (the netpass twin's functions as methods: once per poll and
    # channel, compiled when built)
    read_frames = _netpass.read_frames

    def drain_after_eof(self):
        """After EOF: every complete frame still buffered."""
        out = self._stash
        self._stash = []
        try:
            out.extend(self.decoder.frames())
        except errors.InvalidReceiveError:
            pass
        return out

    # -- re-authentication (KIP-368) ---------------------------------------------
    def maybe_begin_server_reauthentication(self, frame, now):
        """Server: ``frame`` is a SaslHandshake request received on a READY
        channel.  Starts re-authentication and returns True when the session
        has an expiry and the last re-authentication began at least a second
        ago; otherwise False (the request is then processed normally)."""
        if not self.ready():
            return False
        if self.authenticator.server_session_expiration_ms() is None:
            return False
        if (self._last_reauth_start_ms is not None
                and now - self._last_reauth_start_ms < MIN_REAUTH_INTERVAL_MS):
            return False
        self._last_reauth_start_ms = now
        self._swap_authenticators_and_begin_reauthentication(frame, now)
        return True

    def maybe_begin_client_reauthentication(self, now):
        """Client: re-authenticate when the session's re-auth time has come,
        the channel is unmuted and no write is in progress."""
        # The session's re-authentication time first: None for every
        # connection without an expiring SASL session (asked on each write).
        at = self.authenticator.client_session_reauth_ms()
        if at is None or now < at:
            return False
        if not self.ready():
            return False
        # Kafka: only a write already in progress (midWrite) holds it back; a
        # queued request waits behind the re-authentication frames.
        if self.is_muted() or self._mid_write:
            return False
        self._swap_authenticators_and_begin_reauthentication(None, now)
        return True

    def _swap_authenticators_and_begin_reauthentication(self, first_frame, now):
        previous = self.authenticator
        # The new authenticator takes over from the old one (it may read the
        # previous session's principal/mechanism and close it).
        self.authenticator = self._authenticator_factory()
        self.state = ChannelState.AUTHENTICATE
        try:
            ops = self.authenticator.reauthenticate(self.io, first_frame, now, previous)
        except errors.AuthenticationError as exc:
            # The authenticator may already have read (and failed) the next
            # token when the peer sent it right behind its SaslHandshake.  It
            # built the error response for it: as in prepare(), the failure
            # is the authenticator's, so the close may be delayed and must
            # send that response first.  (Kafka reads no further than the
            # SaslHandshake here and lets the plain exception close at once.)
            self.state = ChannelState(State.AUTHENTICATION_FAILED, exc,
                                      self.socket_description())
            raise errors.DelayedResponseAuthenticationError(exc) from exc
        self.prepare_ops = ops or OP_READ
        if self.authenticator.complete():
            # finished in one step (possible on the server)
            self.successful_authentications += 1
            self.state = ChannelState.READY
            self.prepare_ops = OP_NONE

    def server_authentication_session_expired(self, now):
        exp = self.authenticator.server_session_expiration_ms()
        return exp is not None and now - exp > 0

    def session_expired(self, now):
        at = self.authenticator.client_session_reauth_ms()
        return at is not None and now > at

    def reauthentication_latency_ms(self):
        return self.authenticator.reauthentication_latency_ms()

    def connected_client_supports_reauthentication(self):
        return self.authenticator.connected_client_supports_reauthentication()

    def get_and_clear_responses_received_during_reauthentication(self):
        auth = self.authenticator
        return list(auth.get_and_clear_responses_received_during_reauthentication() or [])

    # -- failure / close ------------------------------------------------------------
    def complete_close_on_authentication_failure(self):
        """Kafka's completeCloseOnAuthenticationFailure: let the
        authenticator send its deferred failure response, then push it out
        best-effort."""
        try:
            self.authenticator.handle_authentication_failure()
        finally:
            try:
                self._flush_all()
            except Exception:
                pass

    def close(self, flush=False, linger=False):
        """Close the connection; ``flush`` first writes what the socket takes
        now (never blocks).  ``linger=True`` returns the still open socket
        instead of closing it (the selector half-closes it and discards what
        the peer still sends before closing; see ``Selector``); None
        otherwise."""
        if self._disconnected:
            return None
        self._disconnected = True
        self._ready_for = False
        exc = self.state.exception
        if exc is not None:
            forget_traceback(exc)
        if flush:
            try:
                self._flush_all()
            except Exception:
                pass
        try:
            self.authenticator.close()
        except Exception:  # never let a close fail the selector loop
            log.debug("authenticator close failed for %s", self.id, exc_info=True)
        # Buffers go now, whoever still holds the channel: up to a frame
        # being received (sasl.server.max.receive.size before authentication,
        # socket.request.max.bytes after) and responses the peer never read.
        self.decoder = FrameDecoder(self.decoder.max_size)
        self._stash = []
        self._invalid = None
        self._sends = _NO_SENDS
        try:
            if linger:
                return self.transport.close(detach=True)
            self.transport.close()
        except Exception:
            log.debug("transport close failed for %s", self.id, exc_info=True)
        return None

    @property
    def disconnected(self):
        return self._disconnected

