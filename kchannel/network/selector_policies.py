"""The Selector's bookkeeping policies, each in a small class of its own.

Kafka's ``Selector`` keeps its idle expiry in ``IdleExpiryManager`` and its
delayed closes in ``delayedClosingChannels``; kchannel's
:class:`~kchannel.network.selector.Selector` holds one collaborator per
policy, each with the policy's rule and bookkeeping:

* :class:`IdleExpiryManager` -- Kafka's: the connections in least recently
  active order, and the closing of those idle for longer than
  ``connections.max.idle.ms``;
* :class:`DelayedCloses` -- Kafka's ``delayedClosingChannels`` of
  ``DelayedAuthenticationFailureClose``: server channels whose authenticator
  failed, closed ``connection.failed.authentication.delay.ms`` later;
* :class:`SetupDeadlines` -- when each server connection must have completed
  its TLS handshake and authentication
  (``kchannel.connection.setup.timeout.ms``);
* :class:`WriteScheduler` -- when the sends made outside ``poll`` are
  written (at once, or coalesced before the next poll waits) and what such
  writes leave for the next poll to report;
* :class:`LingeringSockets` -- server sockets closed after a response the
  peer must still read, drained until the peer's EOF before their close.

* :func:`next_timeout` -- how long a poll may wait given the policies' next
  deadlines.

They hold ids and deadlines (ms, passed in), never a channel; only
:class:`LingeringSockets` holds sockets (those that are channels no more).
A policy that closes channels is handed the Selector for the call (as a
Kafka inner class reaches its Selector) and uses only its channel lookup
(``channel(id)``), its close (``_close_channel(ch, notify, flush)``) and,
for a delayed close, its OS registrations (``_os.unregister(id)``) and
``_buffered`` set: the OS selector, the results and the metrics stay the
Selector's.
"""
import bisect
import collections
import heapq
import selectors
import socket
import time as _time

from .. import errors
from ..log import get_logger
from .channel import ChannelState, State

# The selector's own logger: these closes are the selector's.
log = get_logger("kchannel.network.selector")

__all__ = ["IdleExpiryManager", "DelayedCloses", "SetupDeadlines", "WriteScheduler",
           "LingeringSockets", "next_timeout"]


# Wall time one poll may spend closing idle-expired connections (see
# IdleExpiryManager.expire).
IDLE_CLOSE_BUDGET_S = 0.010


def next_timeout(timeout_ms, now, *schedules):
    """``timeout_ms`` (None or negative: no limit) shortened to the earliest
    ``next_due()`` of ``schedules`` (delayed closes, lingering sockets,
    setup deadlines)."""
    for schedule in schedules:
        due = schedule.next_due()
        if due is not None:
            wait = max(0, due - now)
            timeout_ms = (wait if timeout_ms is None or timeout_ms < 0
                          else min(timeout_ms, wait))
    return timeout_ms


class IdleExpiryManager:
    """Kafka's ``Selector.IdleExpiryManager``: the connections in least
    recently active order and the closing of those idle for longer than
    ``connections.max.idle.ms`` (None or negative: never)."""

    __slots__ = ("connections_max_idle_ms", "_lru", "next_check_ms", "backlog")

    def __init__(self, connections_max_idle_ms):
        self.connections_max_idle_ms = connections_max_idle_ms
        self._lru = collections.OrderedDict()   # id -> last activity ms (LRU)
        self.next_check_ms = 0
        self.backlog = False     # expired connections left for the next poll

    def set_max_idle_ms(self, value):
        # The next check was scheduled under the old setting: due now.
        self.connections_max_idle_ms = value
        self.next_check_ms = 0

    def update(self, id, now):
        """``id`` was active at ``now``."""
        if self.connections_max_idle_ms is None or self.connections_max_idle_ms < 0:
            return
        lru = self._lru
        if id in lru:
            lru.move_to_end(id)
        lru[id] = now

    def remove(self, id):
        self._lru.pop(id, None)

    def expire(self, now, sel):
        """Close the connections of ``sel`` (the Selector) idle too long
        (oldest first, state EXPIRED), within ``IDLE_CLOSE_BUDGET_S``; sets
        ``backlog`` when more are due than the budget allowed."""
        max_idle = self.connections_max_idle_ms
        if max_idle is None or max_idle < 0 or not self._lru or now < self.next_check_ms:
            return
        lru = self._lru
        # Kafka's Selector closes at most one expired connection per poll
        # (maybeCloseOldestConnection), so thousands that expire together
        # take thousands of polls.  Here each poll closes expired
        # connections for up to IDLE_CLOSE_BUDGET_S and, when more are due,
        # makes the next poll not wait: all of them close within seconds
        # while no poll is held up for long (benchmarks/scale.py).
        deadline = _time.perf_counter() + IDLE_CLOSE_BUDGET_S
        closed = 0
        self.backlog = False
        while lru:
            id, last = next(iter(lru.items()))
            if now - last <= max_idle:
                self.next_check_ms = last + max_idle
                return
            if closed and not closed & 7 and _time.perf_counter() > deadline:
                self.backlog = True
                return
            lru.popitem(last=False)
            ch = sel.channel(id)
            if ch is not None:
                log.debug("About to close the idle connection from %s due to being idle for "
                          "%d millis", id, now - last)
                ch.state = ChannelState.EXPIRED
                sel._close_channel(ch, notify=True, flush=False)
                closed += 1
        self.next_check_ms = now + max_idle


class DelayedCloses:
    """Kafka's ``delayedClosingChannels``: ids of server channels whose
    authentication failed, each closed once its delay is over (meanwhile it
    is neither read nor written, and sends to it are dropped).

    ``ids`` is the set of delayed channel ids (the Selector's hot path asks
    ``id in delayed.ids``); ``delay_ms`` is
    ``connection.failed.authentication.delay.ms`` (0: close at once)."""

    __slots__ = ("delay_ms", "ids", "_heap", "_seq")

    def __init__(self, delay_ms=0):
        self.delay_ms = delay_ms
        self.ids = set()
        self._heap = []          # (due ms, seq, id)
        self._seq = 0

    def __len__(self):
        return len(self._heap)

    def applies_to(self, ch):
        """Kafka's maybeDelayCloseOnAuthenticationFailure: a server channel
        with a positive delay; clients close at once (Kafka gives client
        selectors no delay; one selector here may hold both kinds)."""
        return ch.mode == "server" and self.delay_ms > 0

    def add(self, id, now):
        self._seq += 1
        heapq.heappush(self._heap, (now + self.delay_ms, self._seq, id))
        self.ids.add(id)

    def remove(self, id):
        """``id`` closed some other way before its delay was over."""
        if id in self.ids:
            self.ids.discard(id)
            self._heap = [d for d in self._heap if d[2] != id]
            heapq.heapify(self._heap)

    def next_due(self):
        """The earliest due time (ms), or None."""
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now):
        """The ids whose delay is over at ``now``, earliest first."""
        heap = self._heap
        due = []
        while heap and heap[0][0] <= now:
            id = heapq.heappop(heap)[2]
            self.ids.discard(id)
            due.append(id)
        return due

    def close_or_delay(self, sel, ch, now):
        """Kafka's maybeDelayCloseOnAuthenticationFailure: close ``ch``, whose
        authenticator failed, now or (:meth:`applies_to`) once the delay is
        over."""
        if self.applies_to(ch):
            # Kafka's DelayedAuthenticationFailureClose: not read, written
            # nor expired meanwhile
            self.add(ch.id, now)
            sel._idle_expiry.remove(ch.id)
            sel._buffered.discard(ch.id)
            sel._os.unregister(ch.id)
        else:
            self.close_now(sel, ch)

    @staticmethod
    def close_now(sel, ch):
        """Kafka's handleCloseOnAuthenticationFailure: the authenticator's
        deferred error response first, then the close."""
        try:
            ch.complete_close_on_authentication_failure()
        except Exception:
            log.debug("Error sending authentication failure response to %s", ch.id,
                      exc_info=True)
        sel._close_channel(ch, notify=True, flush=True)

    def close_due(self, sel, now):
        """Close the channels of ``sel`` whose delay is over at ``now``."""
        for id in self.pop_due(now):
            ch = sel.channel(id)
            if ch is not None:
                self.close_now(sel, ch)


class SetupDeadlines:
    """When each server connection must be READY by (TLS handshake and
    authentication completed); entries of connections that made it are
    dropped when due."""

    __slots__ = ("entries", "_seq")

    def __init__(self):
        # (deadline ms, seq, id), a heap; empty when there is nothing to
        # watch (the selector tests it once per poll without a call)
        self.entries = []
        self._seq = 0

    def __len__(self):
        return len(self.entries)

    def add(self, id, deadline_ms):
        self._seq += 1
        heapq.heappush(self.entries, (deadline_ms, self._seq, id))

    def next_due(self):
        return self.entries[0][0] if self.entries else None

    def pop_due(self, now):
        """The ids whose deadline has passed at ``now``, earliest first."""
        heap = self.entries
        due = []
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        return due

    def expire(self, sel, now):
        """Close the connections of ``sel`` that missed their deadline
        (reported in ``disconnected`` as EXPIRED with the reason); one that
        authenticated, or that awaits its delayed close, is left alone."""
        for id in self.pop_due(now):
            ch = sel.channel(id)
            if (ch is None or ch.successful_authentications > 0 or ch.ready()
                    or id in sel._delayed.ids):
                continue
            exc = errors.ChannelConnectionError(
                f"Connection from {ch.socket_description()} did not complete its TLS handshake "
                f"and authentication in time (kchannel.connection.setup.timeout.ms)")
            log.info("Closing connection %s: %s", id, exc)
            ch.state = ChannelState(State.EXPIRED, exc, ch.socket_description())
            sel._close_channel(ch, notify=True, flush=False)


class WriteScheduler:
    """When the sends made outside ``Selector.poll`` are written, and what
    those writes leave for the next poll to report.

    * ``batched``: ids of channels that delivered several receives in this
      poll (their responses are coalesced instead of written through);
    * ``to_flush``: channels with sends written by the next poll before it
      waits (or by ``Selector.flush_sends``);
    * ``deferred_sends``: ``(channel, sizes)`` completed by writes outside
      poll, and ``deferred_failures``: id -> exception such a write raised,
      both reported by the next poll.
    """

    __slots__ = ("batched", "to_flush", "deferred_sends", "deferred_failures")

    def __init__(self):
        self.batched = set()
        self.to_flush = []
        self.deferred_sends = []
        self.deferred_failures = {}

    def write_through_allowed(self, ch):
        """Server side only: a server answers one request per channel per
        poll, so writing at once loses nothing, while clients pipelining
        requests gain from coalescing them into one write at the start of
        the next poll (and must let a due re-authentication go first).  A
        channel that delivered several requests in this poll gets its
        responses coalesced into one write there too."""
        return ch.mode == "server" and not ch.disconnected and ch.id not in self.batched

    def has_pending(self):
        """Something the next poll writes or reports without an OS event."""
        return bool(self.deferred_failures or self.deferred_sends or self.to_flush)

    def take_flush(self):
        flush, self.to_flush = self.to_flush, []
        return flush

    def take_deferred_sends(self):
        sends, self.deferred_sends = self.deferred_sends, []
        return sends

    def take_deferred_failures(self):
        failures, self.deferred_failures = self.deferred_failures, {}
        return failures


# Lingering close (server side): how many bytes a half-closed socket discards
# at most before it is closed anyway.
MAX_LINGER_BYTES = 1048576


class _Linger:
    """A half-closed socket being drained before its close."""
    __slots__ = ("sock", "deadline", "discarded")

    def __init__(self, sock, deadline):
        self.sock = sock
        self.deadline = deadline
        self.discarded = 0


def _deadline(entry):
    return entry.deadline


class LingeringSockets:
    """Server-side closes that follow a response the peer must still read:
    each socket is half-closed (FIN after the bytes already written) and
    what the peer still sends is read and dropped until its EOF, until its
    deadline at most; only then is it closed (see the
    ``kchannel.network.selector`` module docstring).  These sockets are no
    longer channels: the only sockets a policy holds.  Registered with the
    Selector's OS selector, their events carry their :class:`_Linger` entry
    for :meth:`on_readable`.  ``linger_ms``: how long at most (the
    Selector's ``linger_ms``; 0 or None: closes are not lingered)."""

    __slots__ = ("_sel", "entries", "linger_ms")

    def __init__(self, os_selector, linger_ms=0):
        self._sel = os_selector
        self.entries = []        # _Linger entries, by deadline
        self.linger_ms = linger_ms

    def __len__(self):
        return len(self.entries)

    def __getitem__(self, i):
        return self.entries[i]

    def start(self, sock, deadline):
        """Half-close ``sock`` and drain it until the peer's EOF (or
        ``deadline``, ms) before closing it."""
        entry = _Linger(sock, deadline)
        try:
            # FIN goes out after every byte already handed to the kernel.
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._end(entry)   # already reset or not connected
            return
        if self._discard_input(entry):
            self._end(entry)
            return
        try:
            self._sel.register(sock, selectors.EVENT_READ, entry)
        except (ValueError, KeyError, OSError):
            self._end(entry)
            return
        bisect.insort(self.entries, entry, key=_deadline)

    def on_readable(self, entry):
        if self._discard_input(entry):
            self._end(entry)
            self.entries.remove(entry)

    def next_due(self):
        return self.entries[0].deadline if self.entries else None

    def expire(self, now):
        """Close the sockets whose deadline has passed."""
        entries = self.entries
        n = 0
        while n < len(entries) and entries[n].deadline <= now:
            entry = entries[n]
            # whatever arrived meanwhile is dropped first, so the close
            # itself does not turn into a reset when the peer was just slow
            self._discard_input(entry)
            self._end(entry)
            n += 1
        if n:
            del entries[:n]

    def close_all(self):
        for entry in self.entries:
            self._end(entry)
        self.entries = []

    @staticmethod
    def _discard_input(entry):
        """Read and drop what the peer sent; True when the socket is done
        (EOF, error, or too much input)."""
        sock = entry.sock
        try:
            for _ in range(16):
                data = sock.recv(65536)
                if not data:
                    return True
                entry.discarded += len(data)
                if entry.discarded > MAX_LINGER_BYTES:
                    return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return False

    def _end(self, entry):
        try:
            self._sel.unregister(entry.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            entry.sock.close()
        except OSError:
            pass
