"""The per-poll hot path of :class:`kchannel.network.selector.Selector`.

``Selector`` derives from :class:`SelectorLoop`, which holds what runs for
every poll and every send: ``poll`` itself (the wait, the readiness events,
each ready channel's read and write), the flush of queued sends before the
wait, the write-through of a send, and the settling of a channel's interest
afterwards.  Everything else (connections, closes, authentication, metrics
definitions, the policies) stays in ``selector.py``; the methods here call it
through ``self`` as before, so a subclass or a test still overrides any of
them.

This module is a twin (see ``kchannel._impl``): the same source is compiled
by Cython in pure-Python mode as ``kchannel.network._cnetloop``, where
``_cnetloop.pxd`` makes ``SelectorLoop`` an extension type whose hot state
(the channel map, the buffered/muted/backlogged sets, the per-poll results)
are C fields: the compiled loop reads them without attribute lookups.  The
class keeps a ``__dict__``, so every other attribute of a ``Selector`` lives
where it always did.  Pure Python runs the same code as a plain class.
"""
import math
import selectors
import select
import time as _time

from .. import _impl, errors
from ..log import get_logger
from ..utils import now_ms
from .authenticator import Authenticator
from .channel import ChannelMuteState, ChannelState
from .ops import OP_NONE, OP_READ, OP_WRITE
from .selector_policies import _Linger, next_timeout

# ChannelSendQueue.set_send and .write_sends are these functions of the
# send queue twin, as methods: called as functions here (the per-request
# send and flush), no attribute lookup on the channel (a __dict__ instance:
# a type lookup and an instance dict miss) nor bound method per call.
_sendqueue = _impl.load_twin("sendqueue")
_set_send = _sendqueue.set_send
_write_sends = _sendqueue.write_sends

# The selector's own logger: these methods are the selector's.
log = get_logger("kchannel.network.selector")

__all__ = ["SelectorLoop", "MAX_WRITE_PER_CHANNEL_PER_POLL"]

# Bytes written to one channel in one poll.
MAX_WRITE_PER_CHANNEL_PER_POLL = 4194304

_EVENT_READ = selectors.EVENT_READ
_NOT_MUTED = ChannelMuteState.NOT_MUTED
_EVENT_WRITE = selectors.EVENT_WRITE
_NOT_EPOLLIN = ~getattr(select, "EPOLLIN", 0)
_NOT_EPOLLOUT = ~getattr(select, "EPOLLOUT", 0)
# An authenticator class that keeps this base's client_session_reauth_ms
# never re-authenticates: its channel's maybe_begin_client_reauthentication
# (two calls per write) is not asked.
_NO_CLIENT_REAUTH = Authenticator.client_session_reauth_ms
_wall_time = _time.time


# In the methods below, ``ch._ready_for is ch.authenticator or ch.ready()``
# is ``ch.ready()`` with its first test inlined (true for every READY
# channel: ready() caches the authenticator it found complete), and
# ``ch._sends`` is ``ch.has_send()``: asked several times per request, a
# call each was a good part of the interpreted work of a round trip.


class _Listener:
    __slots__ = ("sock", "on_acceptable")

    def __init__(self, sock, on_acceptable):
        self.sock = sock
        self.on_acceptable = on_acceptable


class _Wakeup:
    __slots__ = ()


_WAKEUP = _Wakeup()


class SelectorLoop:
    """The hot path of :class:`kchannel.network.selector.Selector` (its base
    class; see the module docstring).  Not used on its own: ``Selector``'s
    ``__init__`` sets up the state these methods use."""

    # The state the loop reads on every poll: slots here, C fields of the
    # compiled twin (_cnetloop.pxd declares the same names, typed), so both
    # twins lay out and expose the same attributes.  __dict__ holds the
    # rest of a Selector's attributes.
    __slots__ = ("__dict__", "__weakref__",
                 "_channels", "_fd_ops", "_buffered", "_explicitly_muted", "_backlogged",
                 "_immediately_connected", "_writes", "_delayed", "_idle_expiry",
                 "_setup_deadlines", "_lingering", "_epoll", "_fd_to_key", "_os",
                 "sensors", "time", "_closed", "completed_receives", "completed_sends",
                 "connected", "newly_ready", "disconnected", "_poll_bytes_read",
                 "_poll_receives", "_poll_sent", "poll_time_ms", "max_receives_per_channel",
                 "max_read_per_channel")

    def __init__(self):
        # (Selector.__init__ sets the state up; nothing to do here)
        pass

    # ------------------------------------------------------------------- sends
    def send(self, id, payload, already_framed=False):
        """Queue ``payload`` (a frame without its size prefix, unless
        ``already_framed``) on ``id``."""
        ch = self._channels.get(id)
        if ch is None:
            raise errors.KChannelError(
                f"Attempt to retrieve channel for which there is no connection. "
                f"Connection id {id} existing connections {list(self._channels)[:10]}")
        if id in self._delayed.ids:
            return   # closing after an authentication failure: drop silently
        if _set_send(ch, payload, already_framed):
            # Sends already queued: they are written together by the next
            # poll (flushed before it waits, or on OP_WRITE), or wait for a
            # re-authentication to complete; one more changes nothing.
            return
        if ch._ready_for is not ch.authenticator and not ch.ready():
            # (re-)authenticating: data sends wait for READY, interest as
            # the authentication state wants it
            self._sync(ch)
            return
        # (not self._writes.write_through_allowed(ch), inlined: a call and
        # a property read per response)
        if ch.mode != "server" or ch._disconnected or id in self._writes.batched:
            # Written by the next poll() before it waits (_flush_queued), as
            # Kafka writes a NetworkClient's sends in poll(): every send made
            # until then goes out in one write (a client pipelining
            # requests, a server's responses to a batch of requests), and no
            # OP_WRITE registration (two epoll modifications) nor extra
            # select wake-up is spent on a socket that is practically always
            # writable.  What the socket does not take waits for OP_WRITE.
            self._writes.to_flush.append(ch)
            return
        # Write at once instead of registering OP_WRITE and waiting for the
        # next select: the socket is almost always writable, and this saves
        # two epoll modifications and a select per response.  What the
        # socket does not take waits for OP_WRITE as usual; results and
        # failures are reported by the next poll().
        self._write_now(ch, True)

    def _write_now(self, ch, only=False, record=True):
        """Write what the socket takes of ``ch``'s queued sends outside
        poll: failures and completed sends are reported by the next poll,
        send metrics are recorded now (they must not wait for a poll that
        may never come; ``record=False``: the caller records the returned
        sizes itself, see :meth:`flush_sends`).  ``only``: the send just
        queued is the only one (nothing was pending before it)."""
        try:
            done = _write_sends(ch, MAX_WRITE_PER_CHANNEL_PER_POLL)
        except Exception as exc:  # noqa: BLE001 - reported by poll()
            self._writes.deferred_failures[ch.id] = exc
            return None
        if done:
            if record:
                t = self.time     # (self.time(), the default clock's call inlined)
                self.sensors.record_sends(done, int(_wall_time() * 1000) if t is now_ms else t())
            self._writes.deferred_sends.append((ch, done))
            if only and not ch.transport.holds_bytes:
                # It went out and the transport holds nothing: no write was
                # pending before (``only``) nor is now, and a write changes
                # nothing else the last settle decided (interest, backlog,
                # buffered input).
                return done
        self._settle_ready(ch)
        return done

    def flush_sends(self):
        """Write now what the sockets take of the server channels' sends
        queued since the last poll (a server's responses to a batch of
        pipelined requests, coalesced into one write per channel): a server
        calls this once it has handled a poll's requests, so that the
        responses go out in the poll that read the requests instead of
        waiting for the next one.  Client channels are left to
        :meth:`poll`, which first lets a due re-authentication begin.
        Completed sends and failures are reported by the next poll, as for
        the write-through of :meth:`send`."""
        writes = self._writes
        if not writes.to_flush:
            return
        channels = self._channels
        sent = None
        for ch in writes.take_flush():
            if ch.mode != "server":
                writes.to_flush.append(ch)
                continue
            # write_queued(ch.id), inlined, its send metrics recorded once
            # below for every channel (a gateway flushes a response per
            # client of an upstream poll here: recording each on its own
            # was most of a write's interpreted work).  ``only``: the send
            # that put a channel here found its queue empty (see send).
            # (ch.disconnected, ch.ready() and ch.has_send() read inline:
            # three calls per channel)
            id = ch.id
            ch = channels.get(id)
            if (ch is None or id in self._delayed.ids or ch._disconnected
                    or not (ch._ready_for is ch.authenticator or ch.ready()) or not ch._sends):
                continue
            done = self._write_now(ch, True, False)
            if done:
                if sent is None:
                    sent = []
                sent.extend(done)
        if sent:
            t = self.time
            self.sensors.record_sends(sent, int(_wall_time() * 1000) if t is now_ms else t())

    def write_queued(self, id):
        """Write now what the socket takes of ``id``'s queued sends (a server
        does so before closing a connection over a bad request, so that the
        responses to the requests before it, handled in the same poll, are
        not lost).  Completed sends and failures are reported by the next
        poll, as for the write-through of :meth:`send`."""
        ch = self._channels.get(id)
        if (ch is None or id in self._delayed.ids or ch.disconnected or not ch.ready()
                or not ch.has_send()):
            return
        self._write_now(ch)

    # -------------------------------------------------------------------- poll
    def _report_deferred(self, now):
        """Sends completed and failures raised by write-through in
        :meth:`send` since the last poll."""
        writes = self._writes
        if writes.deferred_sends:
            # (writes.take_deferred_sends(), inlined)
            deferred, writes.deferred_sends = writes.deferred_sends, []
            completed = self.completed_sends
            for ch, done in deferred:
                if len(done) == 1:
                    completed.append((ch.id, done[0]))
                else:
                    completed.extend([(ch.id, size) for size in done])
        if writes.deferred_failures:
            for id, exc in writes.take_deferred_failures().items():
                ch = self._channels.get(id)
                if ch is not None:
                    self._handle_channel_error(ch, exc, True, now)

    def poll(self, timeout_ms, wait_after_flush=False):
        """Do I/O for up to ``timeout_ms`` (0 = don't wait, negative = wait
        until something happens).  See the module docstring.

        Sends queued since the last poll are written before it waits.  A
        poll whose writes already completed sends (or closed a connection)
        does not wait for anything else: it has results, as Kafka's poll
        returns at once after a send (the socket is writable).
        ``wait_after_flush=True`` lets it wait anyway, for a caller to whom
        completed sends mean nothing yet (a NetworkClient whose requests all
        await responses: a depth-1 round trip is then one poll)."""
        if self._closed:
            raise errors.KChannelError("Selector is closed")
        # the previous results go
        self.completed_receives = []
        self.completed_sends = []
        self.connected = []
        self.disconnected = {}
        # bytes read, receives and sends completed by this poll (record_poll)
        self._poll_bytes_read = self._poll_receives = 0
        self._poll_sent = None
        if self.newly_ready:
            self.newly_ready = []
        writes = self._writes
        if writes.batched:
            writes.batched.clear()
        # self.time(), the default clock's call inlined
        t = self.time
        now = int(_wall_time() * 1000) if t is now_ms else t()
        if writes.deferred_sends or writes.deferred_failures:
            self._report_deferred(now)
        if writes.to_flush:
            self._flush_queued(now)
            if self.disconnected or (self.completed_sends and not wait_after_flush):
                timeout_ms = 0
        if self._buffered:
            muted = self._explicitly_muted
            channels = self._channels
            ready_buffered = [i for i in self._buffered if i not in muted and i in channels]
        else:
            ready_buffered = ()
        if self._immediately_connected or ready_buffered or writes.deferred_failures:
            timeout_ms = 0
        elif self._delayed.ids or self._lingering.entries or self._setup_deadlines.entries:
            timeout_ms = next_timeout(timeout_ms, now, self._delayed, self._lingering,
                                      self._setup_deadlines)
        if self._idle_expiry.backlog:
            timeout_ms = 0
        timeout = None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000.0

        start_select = _time.perf_counter_ns()
        epoll = self._epoll
        if epoll is not None:
            # selectors.EpollSelector.select, inlined
            fd_to_key = self._fd_to_key
            try:
                ready = epoll.poll(
                    -1 if timeout is None else
                    0 if timeout <= 0 else math.ceil(timeout * 1e3) * 1e-3,
                    len(fd_to_key) or 1)
            except InterruptedError:
                ready = ()
            events = []
            for fd, ev in ready:
                key = fd_to_key.get(fd)
                if key is not None:
                    events.append((key, ((_EVENT_WRITE if ev & _NOT_EPOLLIN else 0)
                                         | (_EVENT_READ if ev & _NOT_EPOLLOUT else 0))
                                   & key.events))
        else:
            events = self._os.sel.select(timeout)
        end_select = _time.perf_counter_ns()
        now = self.poll_time_ms = int(_wall_time() * 1000) if t is now_ms else t()

        channels = self._channels
        if ready_buffered or self._immediately_connected:
            seen = set()
            work = []
        else:
            # the usual case: only readiness events, each channel once
            seen = work = None
        for key, mask in events:
            data = key.data
            if data is _WAKEUP:
                self._os.waker.drain()
                continue
            cls = type(data)
            if cls is _Listener:
                try:
                    data.on_acceptable()
                except Exception:
                    log.exception("Error accepting connections")
                continue
            if cls is _Linger:
                self._lingering.on_readable(data)
                continue
            ch = data
            if channels.get(ch.id) is not ch:
                continue
            if work is None:
                self._poll_channel(ch, mask & _EVENT_READ, mask & _EVENT_WRITE, now)
                continue
            seen.add(ch.id)
            work.append((ch, mask & _EVENT_READ, mask & _EVENT_WRITE))
        if work is not None:
            # Channels with buffered data but no event this time.
            for id in ready_buffered:
                if id not in seen:
                    ch = channels.get(id)
                    if ch is not None:
                        work.append((ch, False, False))
                        seen.add(id)
            for id in list(self._immediately_connected):
                if id not in seen:
                    ch = channels.get(id)
                    if ch is not None:
                        work.append((ch, False, False))
            for ch, readable, writable in work:
                self._poll_channel(ch, readable, writable, now)

        if self._delayed.ids:
            self._delayed.close_due(self, now)
        if self._setup_deadlines.entries:
            self._setup_deadlines.expire(self, now)
        idle = self._idle_expiry
        if (now >= idle.next_check_ms and idle.connections_max_idle_ms is not None
                and idle.connections_max_idle_ms >= 0):
            # (no connection can have expired before next_check_ms)
            idle.expire(now, self)
        if self._lingering.entries:
            self._lingering.expire(now)
        self.sensors.record_poll(end_select - start_select,
                                 _time.perf_counter_ns() - end_select, now,
                                 self._poll_bytes_read, self._poll_receives, self._poll_sent)

    def _flush_queued(self, now):
        """Write the sends queued since the last poll (see :meth:`send`)
        before waiting: the write half of :meth:`_poll_channel`, with the
        same client re-authentication check, back-pressure and error
        handling.  Reads stay with the readiness events (one read pass per
        channel per poll)."""
        writes = self._writes
        flush, writes.to_flush = writes.to_flush, []     # (writes.take_flush())
        channels = self._channels
        for ch in flush:
            id = ch.id
            if channels.get(id) is not ch or id in self._delayed.ids:
                continue
            send_failed = False
            try:
                ready = ch._ready_for is ch.authenticator or ch.ready()
                done = None
                if ready and ch._sends:
                    if (ch.mode == "client"
                            and type(ch.authenticator).client_session_reauth_ms
                            is not _NO_CLIENT_REAUTH
                            and ch.maybe_begin_client_reauthentication(now)):
                        done = False    # (the channel's state changed: settle)
                        ready = ch.ready()
                        if ready:
                            self._on_authenticated(ch, True, now)
                    if ready:
                        send_failed = True
                        written = _write_sends(ch, MAX_WRITE_PER_CHANNEL_PER_POLL)
                        send_failed = False
                        self._record_sends(ch, written, now)
                        if done is None:
                            done = written
                if ready:
                    if done and not ch.transport.holds_bytes:
                        # Everything went out, nothing is held: as in
                        # _write_now, nothing the last settle decided
                        # changed (the channel was queued here by the send
                        # that found its queue empty).
                        continue
                    self._settle_ready(ch)
                else:
                    if ch.mode == "server":
                        self._update_backlog(ch)
                    self._sync(ch)
            except Exception as exc:  # noqa: BLE001 - one channel's failure is contained
                self._handle_channel_error(ch, exc, send_failed, now)

    def _poll_channel(self, ch, readable, writable, now):
        id = ch.id
        if id in self._delayed.ids:
            return
        idle = self._idle_expiry
        max_idle = idle.connections_max_idle_ms
        if max_idle is not None and max_idle >= 0:
            # idle.update(id, now), inlined (once per ready channel per poll)
            lru = idle._lru
            if id in lru:
                lru.move_to_end(id)
            lru[id] = now
        send_failed = False
        try:
            connected_now = False
            if id in self._immediately_connected or ch.state is ChannelState.NOT_CONNECTED:
                self._immediately_connected.discard(id)
                if not ch.finish_connect():
                    self._sync(ch)
                    return
                self.connected.append(id)
                self.sensors.connection_created.record()
                writable = True   # handshake may start writing at once
                readable = True
                connected_now = True

            # ready() is asked again only after what can change it (prepare,
            # a client re-authentication beginning): data-phase reads and
            # writes leave a READY channel READY.
            ready = ch._ready_for is ch.authenticator or ch.ready()
            if not ready:
                was_reauth = ch.successful_authentications > 0
                ch.prepare(now)
                # (ch.ready(): prepare asked it last, which cached a READY
                # channel's authenticator)
                ready = ch._ready_for is ch.authenticator
                if ready:
                    self._on_authenticated(ch, was_reauth, now)
                    self.newly_ready.append(id)
                    # The authenticator took what this readiness event
                    # announced (its last frame): a data-phase read now
                    # would only return EAGAIN.  Input already buffered is
                    # served through _buffered (_settle_ready below); what
                    # arrives later raises a new event.
                    readable = False
            elif connected_now:
                # nothing to set up (PLAINTEXT): READY once connected
                self.newly_ready.append(id)

            if ready:
                # (ch.is_muted(), read off its mute state)
                if ((readable or id in self._buffered) and id not in self._explicitly_muted
                        and ch.mute_state is _NOT_MUTED and id not in self._backlogged):
                    self._attempt_read(ch, now)
                if ch._sends:
                    # Kafka's attemptWrite: queued requests wait behind a
                    # client re-authentication that begins now ...
                    if (ch.mode == "client"
                            and type(ch.authenticator).client_session_reauth_ms
                            is not _NO_CLIENT_REAUTH
                            and ch.maybe_begin_client_reauthentication(now)):
                        ready = ch.ready()
                        if ready:
                            # ... unless the whole exchange completed at
                            # once (the server answered while the
                            # authenticator kept reading).
                            self._on_authenticated(ch, True, now)
                    if ready:
                        send_failed = True
                        self._record_sends(
                            ch, ch.write_sends(MAX_WRITE_PER_CHANNEL_PER_POLL), now)
                        send_failed = False
                else:
                    # TLS may still hold encrypted bytes of an earlier write
                    # (a transport holding no bytes has none); sends an
                    # authenticator's flush completed wait to be reported
                    send_failed = True
                    done = (ch.write_sends() if ch.transport.holds_bytes and ch.has_pending_writes()
                            else ch.take_accepted() if ch._accepted else None)
                    send_failed = False
                    if done:
                        self._record_sends(ch, done, now)
            if ready:
                self._settle_ready(ch)
            else:
                if ch.mode == "server":
                    self._update_backlog(ch)
                # (self._update_buffered(ch), inlined: once per set-up step)
                if (id not in self._explicitly_muted and ch.mute_state is _NOT_MUTED
                        and id not in self._backlogged and not ch._disconnected
                        and ch.has_bytes_buffered()):
                    self._buffered.add(id)
                else:
                    self._buffered.discard(id)
                self._sync(ch)
        except Exception as exc:  # noqa: BLE001 - one channel's failure is contained
            self._handle_channel_error(ch, exc, send_failed, now)

    def _settle_ready(self, ch):
        """After serving the open READY channel ``ch``: ``_update_backlog``
        (server), ``_update_buffered`` and ``_sync`` in one pass, asking the
        channel each question once; the OS registration is touched only
        when the wanted events changed."""
        id = ch.id
        pending, muted, buffered = ch.settle_state()
        backlogged = False
        if ch.mode == "server":
            # see _update_backlog
            if pending:
                backlogged = True
                self._backlogged.add(id)
            elif id in self._backlogged:
                self._backlogged.discard(id)
        if buffered and not backlogged and id not in self._explicitly_muted:
            self._buffered.add(id)
        else:
            self._buffered.discard(id)
        # ch.interest_ops() of a READY channel, less OP_READ when backlogged
        want = OP_NONE if muted or backlogged else OP_READ
        if pending:
            want |= OP_WRITE
        if self._fd_ops.get(id, OP_NONE) != want:
            self._sync(ch)

    def _attempt_read(self, ch, now):
        try:
            frames, nbytes = ch.read_frames(self.max_receives_per_channel,
                                            self.max_read_per_channel)
        except errors.ChannelConnectionError:
            # EOF: hand over whatever complete frames arrived before it
            for payload in ch.drain_after_eof():
                self._add_receive(ch, payload, now)
            raise
        # (recorded by poll, once for every channel: record_poll)
        self._poll_bytes_read += nbytes
        if not frames:
            return
        id = ch.id
        if len(frames) == 1:
            self.completed_receives.append((id, frames[0]))
            self._poll_receives += 1
            return
        self._writes.batched.add(id)
        self.completed_receives.extend([(id, payload) for payload in frames])
        self._poll_receives += len(frames)

    def _record_sends(self, ch, done, now):
        if done:
            id = ch.id
            if len(done) == 1:
                self.completed_sends.append((id, done[0]))
            else:
                self.completed_sends.extend([(id, size) for size in done])
            # (recorded by poll, with the rest of the poll: record_poll;
            # ``done`` is the channel's fresh list, never changed after)
            sent = self._poll_sent
            self._poll_sent = done if sent is None else sent + done
