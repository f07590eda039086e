"""Accepting connections for a :class:`kchannel.server.server.Server`:
Kafka's ConnectionQuotas (``max.connections``, ``max.connections.per.ip``,
``max.connection.creation.rate``), setup deadlines and the back-off when
accept() runs out of file descriptors."""
import errno
import socket

from .. import errors
from ..config.definitions import parse_ip_overrides
from ..log import get_logger
from ..network.connection_quotas import ConnectionQuotas
from ..network.selector import MAX_ACCEPTS_PER_POLL
from .server_listeners import _UNLIMITED, _cfg_get, _listener_value

log = get_logger("kchannel.server")

# accept() failing for lack of file descriptors or kernel memory: no
# listener is watched for a back-off (doubling from the first to the last
# value while it keeps failing), since the listening sockets stay readable
# and retrying at once would spin; connections wait in the listen backlog.
ACCEPT_BACKOFF_MS = (100, 1000)
_ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# At most one log line about failing accepts per interval (a peer can
# trigger them at will); the next one says how many were not logged.
ACCEPT_ERROR_LOG_INTERVAL_MS = 10000


class _ConnectionAdmission:
    """Connection limits and the acceptor of each listener (a mixin of
    :class:`kchannel.server.server.Server`)."""

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
