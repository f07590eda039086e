"""Kafka's non-blocking multi-connection Selector, on Python's ``selectors``.

Single-threaded: every method except :meth:`Selector.wakeup` must be called
from the thread that calls :meth:`Selector.poll`.

One ``poll(timeout_ms)``:

1. clears the previous results;
2. waits in ``select`` -- no longer than ``timeout_ms``, not at all when a
   channel already holds data no readiness event will announce (decrypted TLS
   bytes, frames read ahead) or a connect completed immediately, and no longer
   than the next delayed authentication-failure close;
3. services each ready channel once: finish connect, ``prepare()`` (TLS
   handshake + authenticator) until READY, then at most
   ``max_receives_per_channel`` complete receives and a bounded number of
   bytes read, then writes.  Bounded work per channel per poll is what keeps
   one flooding peer from starving thousands of others;
4. carries out due delayed closes, closes server connections that missed
   their setup deadline (:meth:`Selector.set_setup_deadline`, kchannel's
   ``kchannel.connection.setup.timeout.ms``) and connections idle for longer
   than ``connections.max.idle.ms`` (least recently active first, Kafka's
   IdleExpiryManager).

A closed channel lets go of its buffers at once (``KafkaChannel.close``), and
nothing it leaves behind (its ``ChannelState`` and exception) refers back to
it, so its memory returns by reference counting alone.

Server-side closes that follow a response the peer must still read (the
authentication-failure response, an explicit :meth:`Selector.close`) are
*lingering*: the socket is half-closed (FIN after the bytes already written)
and what the peer still sends is read and discarded until its EOF, for at
most ``linger_ms``; only then is the socket closed.  Closing a socket with
unread input makes the kernel send RST instead of FIN and drop whatever it
had not transmitted yet, and a peer's kernel may discard received bytes its
application has not read when the reset arrives -- the peer would see
"connection reset" instead of the response.  Lingering sockets are no longer
channels (not counted, not reported) and never delay other work.

Receives per channel per poll: Kafka's Selector hands over one complete
receive per channel per poll (``max_receives_per_channel=1``, this class's
default).  ``kchannel.server.Server`` and ``kchannel.client.NetworkClient``
take up to 64: a Python poll costs tens of microseconds, so one request per
poll caps a pipelining connection far below what the socket carries.  This
deviation keeps what the rule is for:

* fairness: the bytes read from one channel per poll stay bounded by
  ``max_read_per_channel``; only frames already read (or sent together by
  the peer) are handed over together, so a flooding peer still gets no more
  socket reads than any other;
* order and one-at-a-time processing: the frames of one channel are handed
  over in order and the server handles them synchronously, one after the
  other, as a broker handles one request per connection at a time; a request
  that closes the connection ends its batch, and what follows a SaslHandshake
  that starts a re-authentication, or a request after which the channel is
  muted, is put back unread (``KafkaChannel.unread``) for the authenticator
  or a later poll (see ``Server.poll``);
* responses: a server's responses to one batch are written together (one
  write instead of one per response) once the batch is handled
  (:meth:`Selector.flush_sends`, else at the start of the next poll), in
  request order; a connection closed for a bad request still gets the
  responses to the requests before it first (:meth:`Selector.write_queued`).

Sends: a server's response to a lone request is written at once
(write-through); any other send made outside :meth:`Selector.poll` (a
client's requests, the responses to a batch) is queued and written by the
next poll *before* it waits, together with every send made until then.
Kafka also writes a client's sends in ``poll``; doing it before the wait
instead of on the OP_WRITE event saves the event's epoll registration and
a select wake-up per round trip.  What the socket does not take waits for
OP_WRITE as in Kafka.

Results: ``completed_receives`` (list of ``(id, payload)``; each payload is
a read-only memoryview of the connection's receive memory, received there
without copies and never changed afterwards -- ``bytes(payload)`` to keep a
small one for long without keeping its receive chunk, see
``kchannel.framing``),
``completed_sends`` (list of ``(id, size)``), ``connected`` (ids),
``disconnected`` (dict id -> :class:`ChannelState`; failures carry the
exception).  A failure on one channel closes only that channel, is logged once
(authentication failures at WARNING) and is reported in ``disconnected``.
An explicit :meth:`close` is not reported (as in Kafka).
"""
import errno
import logging
import os
import selectors
import socket
import time as _time

from .. import errors
from ..metrics import Metrics
from ..utils import now_ms, run_blocking
from .channel import DEFAULT_MAX_RECEIVE_SIZE, ChannelState, State
from .ops import OP_READ
from .os_registrations import OsRegistrations
from .selector_metrics import SelectorMetrics
from .wakeup import LoopDrivenSelector
from .selector_policies import (IDLE_CLOSE_BUDGET_S, MAX_LINGER_BYTES,  # noqa: F401
                                DelayedCloses, IdleExpiryManager, LingeringSockets,
                                SetupDeadlines, WriteScheduler, _Linger)
from ..log import get_logger
from .. import _impl

# The per-poll hot path (Selector's base class), a compiled twin when built.
_netloop = _impl.load_twin("netloop")
SelectorLoop = _netloop.SelectorLoop
# (the write bound lives with the loop that applies it)
MAX_WRITE_PER_CHANNEL_PER_POLL = _netloop.MAX_WRITE_PER_CHANNEL_PER_POLL
_Listener = _netloop._Listener
_WAKEUP = _netloop._WAKEUP

log = get_logger("kchannel.network.selector")

__all__ = ["Selector", "SelectorMetrics", "NO_IDLE_TIMEOUT_MS"]

NO_IDLE_TIMEOUT_MS = -1
# Bytes read from one channel in one poll (fairness bound).
MAX_READ_PER_CHANNEL_PER_POLL = 1048576
# Connections accepted per listener per poll.
MAX_ACCEPTS_PER_POLL = 256
# Lingering close (server side): how long a half-closed socket waits for the
# peer's EOF (MAX_LINGER_BYTES: how many bytes it discards at most).
LINGER_MS = 1000


# Addresses resolved by connect(), kept as the JVM's InetAddress cache keeps
# them for Kafka's clients (networkaddress.cache.ttl: 30 s by default;
# failures are not kept).  A host name costs getaddrinfo a read of
# /etc/hosts (eight syscalls) or a DNS query per connection otherwise, which
# a storm of connections to one broker pays hundreds of times a second.
RESOLVE_CACHE_TTL_S = 30.0
_RESOLVE_CACHE_MAX = 256
_resolved = {}      # (host, port) -> (monotonic expiry, getaddrinfo result)


def _is_numeric(host):
    """An IPv4 or IPv6 address, which resolves without a lookup."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except (OSError, ValueError):
            pass
    return False


def _resolve(host, port):
    key = (host, port)
    hit = _resolved.get(key)
    now = _time.monotonic()
    if hit is not None and hit[0] > now:
        return hit[1]
    if _is_numeric(host):
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    else:
        # A host name may need DNS: through the caller's blocking runner,
        # so that on an event loop (kchannel.aio) the lookup runs on the
        # loop's default executor, as loop.getaddrinfo does, instead of
        # holding the loop; a plain call everywhere else.
        infos = run_blocking(socket.getaddrinfo, host, port, 0, socket.SOCK_STREAM)
    if len(_resolved) >= _RESOLVE_CACHE_MAX:
        _resolved.clear()
    _resolved[key] = (now + RESOLVE_CACHE_TTL_S, infos)
    return infos


class ChannelFactory:
    """How the Selector's sockets become channels: the socket options
    (``send_buffer_size``/``receive_buffer_size``: SO_SNDBUF/SO_RCVBUF, -1
    the OS default), the default ``channel_builder`` and the
    ``max_receive_size`` of every channel, whose clock is ``clock``."""

    __slots__ = ("channel_builder", "max_receive_size", "send_buffer_size",
                 "receive_buffer_size", "clock")

    def __init__(self, channel_builder, max_receive_size, send_buffer_size,
                 receive_buffer_size, clock):
        self.channel_builder = channel_builder
        self.max_receive_size = max_receive_size
        self.send_buffer_size = send_buffer_size
        self.receive_buffer_size = receive_buffer_size
        self.clock = clock

    def configure(self, sock, sndbuf=None, rcvbuf=None):
        """Non-blocking, TCP_NODELAY, and the buffer sizes (``sndbuf``,
        ``rcvbuf``: a connection's own, else the selector's)."""
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        sndbuf = self.send_buffer_size if sndbuf is None else sndbuf
        rcvbuf = self.receive_buffer_size if rcvbuf is None else rcvbuf
        if sndbuf is not None and sndbuf > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        if rcvbuf is not None and rcvbuf > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)

    def build(self, id, sock, channel_builder, **kwargs):
        """The channel ``id`` over ``sock`` (``channel_builder``: this
        connection's own, else the default)."""
        builder = channel_builder or self.channel_builder
        ch = builder.build_channel(id, sock, mode=builder.mode,
                                   max_receive_size=self.max_receive_size, **kwargs)
        ch.clock = self.clock
        return ch


class Selector(SelectorLoop):
    """Non-blocking I/O over many Kafka channels.

    ``channel_builder``: default :class:`ChannelBuilder` for :meth:`connect`
    and :meth:`register`.  ``time``: ms clock (injectable for tests).
    ``failed_authentication_delay_ms``: server side, delay closing a channel
    whose authenticator failed (``connection.failed.authentication.delay.ms``;
    0 closes at once).  ``max_receives_per_channel``: complete receives
    handed over per channel per poll; 1 (the default) is Kafka's rule.  More
    lets frames a pipelining peer already sent, and that were read within
    ``max_read_per_channel`` bytes, be handled in one poll instead of one
    poll each; a server then writes the responses to such a channel together
    (:meth:`flush_sends`) instead of one by one.  ``linger_ms``: how long a
    server-side close that follows a response keeps draining the half-closed
    socket (see the module docstring; 0 closes at once).
    ``os_selector``: the ``selectors.BaseSelector`` the sockets are
    registered with (default: a new ``selectors.DefaultSelector``).  A
    :class:`~kchannel.network.wakeup.LoopDrivenSelector` (driven from
    outside, by an event loop's readers and writers: ``kchannel.aio``) has
    its own ``wakeup()``: it replaces the wakeup socket pair, and its
    ``select`` never blocks the loop.
    """

    def __init__(self, channel_builder=None, metrics=None, connections_max_idle_ms=600000, *,
                 time=None, metric_group_prefix="selector", metric_tags=None,
                 failed_authentication_delay_ms=0, max_receive_size=DEFAULT_MAX_RECEIVE_SIZE,
                 send_buffer_size=-1, receive_buffer_size=-1,
                 max_read_per_channel=MAX_READ_PER_CHANNEL_PER_POLL,
                 max_receives_per_channel=1, linger_ms=LINGER_MS, os_selector=None):
        self.time = time or now_ms
        if metrics is None:
            metrics = Metrics(time=self.time)
        # (the registry is the sensors': see the metrics property)
        self.sensors = SelectorMetrics(metrics, metric_group_prefix, metric_tags,
                                       connection_count=lambda: len(self._channels))
        # The policies, one collaborator each (see selector_policies).
        self._idle_expiry = IdleExpiryManager(connections_max_idle_ms)
        self._delayed = DelayedCloses(failed_authentication_delay_ms)
        self._setup_deadlines = SetupDeadlines()
        self._writes = WriteScheduler()
        self._factory = ChannelFactory(channel_builder, max_receive_size, send_buffer_size,
                                       receive_buffer_size, self.time)
        self.max_read_per_channel = max_read_per_channel
        self.max_receives_per_channel = max_receives_per_channel

        sel = os_selector if os_selector is not None else selectors.DefaultSelector()
        # What is registered with the OS selector (channels, listeners, the
        # wake-up pipe unless the event loop driving ``sel`` has its own
        # wakeup: a scheduled callback, no socket pair nor syscall).
        loop_driven = isinstance(sel, LoopDrivenSelector)
        self._os = OsRegistrations(sel, wakeup_pipe=not loop_driven)
        if loop_driven:
            self.wakeup = sel.wakeup
        # The OS registrations' epoll object and fd -> key map (None: poll
        # waits through the OS selector's select()), kept as C fields of the
        # compiled loop, which reads them on every poll (read through
        # self._os instead: +300 instructions per depth-1 round trip on the
        # client, 90,189 against 89,888: benchmarks/rt_cost.py instructions
        # with the cyclic GC off, whose collections otherwise move the count
        # by up to 800 between builds).
        self._epoll = self._os.epoll
        self._fd_to_key = self._os.fd_to_key
        self._channels = {}              # id -> KafkaChannel
        # id -> events registered: the OS registrations' own dict, kept as
        # a typed C field of the compiled loop, which reads it on every
        # settle (read through self._os.ops instead: +324 more, 90,513).
        self._fd_ops = self._os.ops
        self._immediately_connected = set()
        self._buffered = set()           # ids with data no event will announce
        self._explicitly_muted = set()
        # Server channels not read while responses wait to be written (see
        # _update_backlog).
        self._backlogged = set()
        self._closed = False
        # Called with each channel leaving the selector (server connection
        # accounting, e.g. connections per IP).
        self.on_close = None

        self.completed_receives = []
        self.completed_sends = []
        self.connected = []
        self.disconnected = {}
        self._poll_bytes_read = self._poll_receives = 0
        # The clock (``time``) read by the last poll once its wait ended: a
        # caller handling that poll's results needs no reading of its own.
        self.poll_time_ms = self.time()
        # Channels that became READY in the last poll (connected, TLS
        # handshake and authentication done): a NetworkClient starts their
        # ApiVersions exchange without asking every connecting node.
        self.newly_ready = []
        self._lingering = LingeringSockets(sel, linger_ms)

    # ------------------------------------------------------------------ access
    @property
    def metrics(self):
        """The ``Metrics`` registry of the selector's sensors."""
        return self.sensors.metrics

    @property
    def linger_ms(self):
        """How long a server-side close after a response drains the socket
        (the lingering sockets' policy holds it)."""
        return self._lingering.linger_ms

    @linger_ms.setter
    def linger_ms(self, value):
        self._lingering.linger_ms = value

    def channel(self, id):
        """The open channel ``id`` or None."""
        return self._channels.get(id)

    def channels(self):
        return list(self._channels.values())

    def is_channel_ready(self, id):
        ch = self._channels.get(id)
        return ch is not None and ch.ready()

    def __len__(self):
        return len(self._channels)

    def fileno(self):
        """The OS selector's descriptor (epoll): readable whenever one of
        this selector's channels has an event, so another selector can watch
        it (a gateway's server loop waking for its upstream connections)."""
        return self._os.sel.fileno()

    def has_pending_io(self):
        """True when the next :meth:`poll` has work no OS event announces
        (buffered input, connections completed at once, failures and sends
        of write-through to report): poll it without waiting."""
        # (self._writes.has_pending() and an any() over a generator, inlined:
        # a gateway asks once per poll)
        w = self._writes
        return bool(self._immediately_connected or w.deferred_failures or w.deferred_sends
                    or w.to_flush
                    or (self._buffered and not self._buffered <= self._explicitly_muted))

    # ------------------------------------------------------------ connections
    def connect(self, id, address, send_buffer_size=None, receive_buffer_size=None,
                channel_builder=None):
        """Start a non-blocking connection ``id`` to ``address`` = (host, port).

        Completion is reported in ``connected`` (or ``disconnected`` with state
        NOT_CONNECTED when it fails) by a later :meth:`poll`.  Raises
        ``ChannelConnectionError`` when the address cannot be resolved or the
        connect fails at once.
        """
        if id in self._channels:
            raise errors.KChannelError(f"There is already a connection for id {id}")
        if self._closed:
            raise errors.KChannelError("Selector is closed")
        host, port = address[0], int(address[1])
        try:
            infos = _resolve(host, port)
        except socket.gaierror as exc:
            raise errors.ChannelConnectionError(f"Can't resolve address: {host}:{port}: {exc}")
        family, stype, proto, _, sockaddr = infos[0]
        sock = socket.socket(family, stype, proto)
        try:
            self._factory.configure(sock, send_buffer_size, receive_buffer_size)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            try:
                connected = self._do_connect(sock, sockaddr)
            except OSError as exc:
                raise errors.ChannelConnectionError.for_errno(
                    exc.errno, f"Connection to {host}:{port} failed") from None
            ch = self._factory.build(id, sock, channel_builder, peer_host=host, peer_port=port,
                                     remote_address=(host, port))
        except BaseException:
            sock.close()
            raise
        self._channels[id] = ch
        self._idle_expiry.update(id, self.time())
        if connected:
            # As Kafka (interestOps(0)): no readiness event is needed, the
            # next poll() finishes it and registers it with the OS selector.
            self._immediately_connected.add(id)
        else:
            self._sync(ch)
        return ch

    def _do_connect(self, sock, sockaddr):
        """Start connecting the non-blocking ``sock``; True if it connected
        at once, False if the connect is in progress; OSError if it failed.

        Kafka's ``Selector.doConnect``, and like it a hook for tests: on
        loopback a non-blocking connect practically always reports "in
        progress", so the "connected immediately" path runs only when a
        subclass connects in blocking mode (tests/network/test_network_selector.py).
        """
        rc = sock.connect_ex(sockaddr)
        if rc == 0:
            return True
        if rc in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
            return False
        raise OSError(rc, os.strerror(rc))

    def register(self, id, sock, channel_builder=None, listener_name=None,
                 remote_address=None):
        """Adopt an accepted socket as channel ``id`` (server side).
        ``remote_address``: the peer's address as ``accept()`` returned it
        (saves a ``getpeername()``); looked up when not given."""
        if id in self._channels:
            raise errors.KChannelError(f"There is already a connection for id {id}")
        self._factory.configure(sock)
        remote = remote_address
        if remote is None:
            try:
                remote = sock.getpeername()
            except OSError:
                remote = None
        ch = self._factory.build(id, sock, channel_builder, listener_name=listener_name,
                                 remote_address=remote)
        ch.mark_connected()
        self._channels[id] = ch
        self._idle_expiry.update(id, self.time())
        self.sensors.connection_created.record()
        # A freshly accepted channel may already have bytes waiting; the
        # readiness event will announce them.
        self._sync(ch)
        return ch

    def set_setup_deadline(self, id, deadline_ms):
        """Close ``id`` at ``deadline_ms`` unless it has completed its TLS
        handshake and authentication by then (reported in ``disconnected``
        as EXPIRED with the reason)."""
        self._setup_deadlines.add(id, deadline_ms)

    def add_listener(self, sock, on_acceptable):
        """Watch a listening socket; ``on_acceptable()`` is called from
        :meth:`poll` when it is readable (it should accept in a bounded loop and
        :meth:`register` each connection)."""
        self._os.add_listener(sock, on_acceptable)

    def remove_listener(self, sock):
        self._os.remove_listener(sock)

    # ------------------------------------------------------------------- sends
    # send, flush_sends, write_queued: SelectorLoop (kchannel.network._netloop_py)

    # -------------------------------------------------------------------- mute
    def mute(self, id):
        ch = self._channels.get(id)
        if ch is None:
            raise errors.KChannelError(f"No channel with id {id}")
        ch.mute()
        self._explicitly_muted.add(id)
        self._buffered.discard(id)
        self._sync(ch)

    def unmute(self, id):
        ch = self._channels.get(id)
        if ch is None:
            raise errors.KChannelError(f"No channel with id {id}")
        if ch.unmute():
            self._explicitly_muted.discard(id)
            if ch.has_bytes_buffered():
                self._buffered.add(id)
        self._sync(ch)

    def mute_all(self):
        for id in list(self._channels):
            self.mute(id)

    def unmute_all(self):
        for id in list(self._channels):
            self.unmute(id)

    def is_muted(self, id):
        ch = self._channels.get(id)
        return ch is not None and ch.is_muted()

    # ------------------------------------------------------------------- close
    def close(self, id=None):
        """``close(id)``: close one connection locally (state LOCAL_CLOSE, not
        reported in ``disconnected``, as Kafka).  ``close()``: close everything
        (channels, wakeup pipe, OS selector)."""
        if id is not None:
            ch = self._channels.get(id)
            if ch is not None:
                ch.state = ChannelState.LOCAL_CLOSE
                self._close_channel(ch, notify=False, flush=True)
            return
        if self._closed:
            return
        self._closed = True
        for ch in list(self._channels.values()):
            ch.state = ChannelState.LOCAL_CLOSE
            self._close_channel(ch, notify=False, flush=False)
        self._writes.to_flush = []
        self._lingering.close_all()
        self._os.close()

    def wakeup(self):
        """Make a blocked :meth:`poll` return (thread-safe).

        Coalesced as java.nio's ``Selector.wakeup``: while a wakeup byte is
        still unread, further calls write nothing (a producer appending to
        a full batch calls this per record; each write is a syscall and
        each extra return of ``select`` a pass of the poll loop)."""
        self._os.waker.wakeup()

    def record_expired_connection_killed(self):
        self.sensors.expired_connections_killed.record()

    # -------------------------------------------------------------------- poll
    # poll and the per-channel work of a poll: SelectorLoop
    # (kchannel.network._netloop_py)
    def _on_authenticated(self, ch, was_reauth, now):
        if ch.successful_authentications == 1 and not was_reauth:
            self.sensors.successful_authentication.record(1.0, now)
            if not ch.connected_client_supports_reauthentication():
                self.sensors.successful_authentication_no_reauth.record(1.0, now)
            if log.isEnabledFor(logging.DEBUG):
                # (arguments built only when logged: once per connection)
                principal = ch.principal()
                if principal is None or principal.name is None:
                    # A client knows its own principal only when configured
                    # with one (GSSAPI); otherwise the broker decides it.
                    log.debug("Successfully authenticated with %s (channelId=%s)",
                              ch.socket_description(), ch.id)
                else:
                    log.debug("Successfully authenticated with %s (channelId=%s) as %s",
                              ch.socket_description(), ch.id, principal)
        else:
            self.sensors.successful_reauthentication.record(1.0, now)
            latency = ch.reauthentication_latency_ms()
            if latency is not None:
                self.sensors.reauthentication_latency.record(latency, now)
            log.debug("Successfully re-authenticated with %s (channelId=%s)",
                      ch.socket_description(), ch.id)
            if ch.mode == "client":
                for payload in ch.get_and_clear_responses_received_during_reauthentication():
                    self._add_receive(ch, payload, now)

    def _add_receive(self, ch, payload, now):
        self.completed_receives.append((ch.id, payload))
        self.sensors.responses_received.record(1.0, now)
        self.sensors.bytes_transferred.record(1.0, now)

    def _update_backlog(self, ch):
        """Server side: a channel whose responses the socket did not take
        entirely is not read until they are written (Kafka mutes a channel
        from a request until its response is sent).  A client that sends
        requests without reading the responses is then held back by TCP
        instead of making the server queue responses without bound.  Only a
        write that left bytes behind counts: responses merely queued for
        the next poll's coalesced write do not stop reading.  A channel that
        is (re-)authenticating is never held: its authenticator reads and
        writes on its own terms."""
        id = ch.id
        if ch.ready() and ch.has_pending_writes():
            if id not in self._backlogged:
                self._backlogged.add(id)
                self._buffered.discard(id)
        elif id in self._backlogged:
            self._backlogged.discard(id)
            self._update_buffered(ch)

    def _update_buffered(self, ch):
        id = ch.id
        if (id not in self._explicitly_muted and not ch.is_muted()
                and id not in self._backlogged
                and not ch.disconnected and ch.has_bytes_buffered()):
            self._buffered.add(id)
        else:
            self._buffered.discard(id)

    def _handle_channel_error(self, ch, exc, send_failed, now):
        desc = f"{ch.socket_description()} (channelId={ch.id})"
        if isinstance(exc, errors.AuthenticationError):
            # DelayedResponseAuthenticationError: the channel's authenticator
            # failed (KafkaChannel.prepare, or a re-authentication failing
            # as it begins); anything else is the TLS layer's.
            delayed = isinstance(exc, errors.DelayedResponseAuthenticationError)
            cause = exc.__cause__ if delayed and exc.__cause__ is not None else exc
            # An authenticator failing on a channel that authenticated before
            # is a failed re-authentication.  (Kafka counts any failure on
            # such a channel; but a TLS 1.3 client learns of a rejected
            # certificate only from a read after its handshake completed,
            # which is still a failed authentication.)
            reauth = delayed and ch.successful_authentications > 0
            if reauth:
                self.sensors.failed_reauthentication.record(1.0, now)
            else:
                self.sensors.failed_authentication.record(1.0, now)
            mechanism = (cause.mechanism if isinstance(cause, errors.SaslAuthenticationError)
                         else None)
            log.warning("Failed %sauthentication with %s%s (%s)", "re-" if reauth else "",
                        desc, f" using SASL mechanism {mechanism}" if mechanism else "", cause)
            if ch.state != State.AUTHENTICATION_FAILED:
                ch.state = ChannelState(State.AUTHENTICATION_FAILED, cause,
                                        ch.socket_description())
            if delayed:
                self._delayed.close_or_delay(self, ch, now)
            else:
                self._close_channel(ch, notify=True, flush=True)
            return
        if isinstance(exc, errors.ChannelConnectionError) or isinstance(exc, OSError):
            if ch.state is ChannelState.NOT_CONNECTED:
                log.info("Connection to %s could not be established: %s", desc, exc)
                ch.state = ChannelState(State.NOT_CONNECTED, exc, ch.socket_description())
            else:
                log.debug("Connection with %s disconnected: %s", desc, exc)
                st = State.FAILED_SEND if send_failed else State.FAILED_RECEIVE
                if ch.state == State.AUTHENTICATE or ch.state == State.READY:
                    ch.state = ChannelState(st, exc, ch.socket_description())
            self._close_channel(ch, notify=True, flush=False)
            return
        if isinstance(exc, (errors.InvalidReceiveError, errors.InvalidRequestError,
                            errors.KChannelError)):
            log.info("Closing connection with %s: %s: %s", desc, type(exc).__name__, exc)
        else:
            log.warning("Unexpected error from %s; closing connection", desc, exc_info=exc)
        st = State.FAILED_SEND if send_failed else State.FAILED_RECEIVE
        ch.state = ChannelState(st, exc, ch.socket_description())
        self._close_channel(ch, notify=True, flush=False)

    def fail(self, id, exc, state=State.FAILED_RECEIVE):
        """Close ``id`` because its peer sent something unacceptable above the
        framing layer (e.g. an unparsable request header); reported in
        ``disconnected`` with ``exc``."""
        ch = self._channels.get(id)
        if ch is None:
            return
        ch.state = ChannelState(state, exc, ch.socket_description())
        self._close_channel(ch, notify=True, flush=False)

    def handle_failure(self, id, exc):
        """Close ``id`` after ``exc`` raised while the caller worked on it
        (e.g. a server re-authentication that failed at once): same logging,
        metrics, delayed close and ``disconnected`` entry as a failure inside
        :meth:`poll`."""
        ch = self._channels.get(id)
        if ch is not None:
            self._handle_channel_error(ch, exc, False, self.time())

    def reauthentication_begun(self, id):
        """Called after ``channel.maybe_begin_server_reauthentication``
        returned True outside :meth:`poll`: re-derives interest and, when the
        re-authentication already completed, records it."""
        ch = self._channels.get(id)
        if ch is None:
            return
        if ch.ready():
            self._on_authenticated(ch, True, self.time())
        self._update_buffered(ch)
        self._sync(ch)

    def update_interest(self, id):
        """Re-derive ``id``'s readiness interest after its state changed
        outside :meth:`poll` (e.g. re-authentication began)."""
        ch = self._channels.get(id)
        if ch is not None:
            self._update_buffered(ch)
            self._sync(ch)

    # ------------------------------------------------ policies' settings
    @property
    def failed_authentication_delay_ms(self):
        return self._delayed.delay_ms

    @failed_authentication_delay_ms.setter
    def failed_authentication_delay_ms(self, value):
        self._delayed.delay_ms = value

    @property
    def connections_max_idle_ms(self):
        return self._idle_expiry.connections_max_idle_ms

    @connections_max_idle_ms.setter
    def connections_max_idle_ms(self, value):
        self._idle_expiry.set_max_idle_ms(value)

    # -------------------------------------------------------- registration
    def _sync(self, ch):
        """Bring the OS selector registration in line with the channel."""
        id = ch.id
        if self._channels.get(id) is not ch or id in self._delayed.ids:
            return
        want = ch.interest_ops()
        if id in self._backlogged:
            want &= ~OP_READ
        self._os.set_interest(id, ch, want)

    def _close_channel(self, ch, notify, flush):
        id = ch.id
        if self._channels.get(id) is not ch:
            return
        self._os.forget(id)
        del self._channels[id]
        self._immediately_connected.discard(id)
        self._buffered.discard(id)
        self._explicitly_muted.discard(id)
        self._backlogged.discard(id)
        self._idle_expiry.remove(id)
        self._delayed.remove(id)
        linger_ms = self._lingering.linger_ms
        linger = (flush and ch.mode == "server" and linger_ms is not None
                  and linger_ms > 0 and not self._closed)
        sock = ch.close(flush=flush, linger=linger)
        if sock is not None:
            self._lingering.start(sock, self.time() + linger_ms)
        self.sensors.connection_closed.record()
        if self.on_close is not None:
            self.on_close(ch)
        if notify:
            self.disconnected[id] = ch.state
