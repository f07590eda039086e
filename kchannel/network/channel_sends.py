"""A channel's send queue: what :class:`~kchannel.network.channel.KafkaChannel`
does with the frames queued on it (data-phase sends and authentication
frames), coalesced, gathered or written whole, and the sizes of the sends
completed.

``ChannelSendQueue`` is a base class of ``KafkaChannel``, whose
``__init__`` sets up the state these methods use (``transport``,
``_sends``, ``_accepted``, ``_mid_write`` ...).  Each queued send is a
:class:`QueuedSend`; queuing a data frame and writing the queue are the
``sendqueue`` twin's functions (kchannel.network._sendqueue_py, compiled
where built), taken as methods here.  ``kchannel.network.channel`` still
exports every name.
"""
import collections

from .. import _impl

__all__ = ["ChannelSendQueue", "QueuedSend", "COALESCE_BELOW", "COALESCE_MAX", "SEPARATE_FROM",
           "SEPARATE_FROM_UNGATHERED", "HEAD_JOIN", "GATHER_MAX", "GATHER_MAX_BUFFERS"]

# The hot half of the queue (queuing a frame, writing and retiring the
# queue) and its limits live in the ``sendqueue`` twin (compiled where
# built); see kchannel.network._sendqueue_py.
_sendqueue = _impl.load_twin("sendqueue")
QueuedSend = _sendqueue.QueuedSend
COALESCE_BELOW = _sendqueue.COALESCE_BELOW
COALESCE_MAX = _sendqueue.COALESCE_MAX
SEPARATE_FROM = _sendqueue.SEPARATE_FROM
SEPARATE_FROM_UNGATHERED = _sendqueue.SEPARATE_FROM_UNGATHERED
HEAD_JOIN = _sendqueue.HEAD_JOIN
GATHER_MAX = _sendqueue.GATHER_MAX
GATHER_MAX_BUFFERS = _sendqueue.GATHER_MAX_BUFFERS
_SIZE = _sendqueue._SIZE
_MAX_PAYLOAD = _sendqueue._MAX_PAYLOAD
# The send queue of a channel with nothing queued (see the twin's _NO_SENDS).
_NO_SENDS = _sendqueue._NO_SENDS


class ChannelSendQueue:
    """The send half of :class:`~kchannel.network.channel.KafkaChannel` (see
    the module docstring)."""

    # (the twin's functions as methods: their first parameter, ``ch``, is
    # the channel)
    set_send = _sendqueue.set_send
    write_sends = _sendqueue.write_sends
    _gather = _sendqueue.gather
    _retire = _sendqueue.retire

    def has_send(self):
        return bool(self._sends)

    def _has_pending_auth_writes(self):
        """Bytes that must go out before authentication can progress:
        authentication frames, the rest of a partially written send, or
        transport-buffered (TLS) bytes."""
        sends = self._sends
        if sends is _NO_SENDS:
            t = self.transport
            return t.holds_bytes and bool(t.has_pending_writes())
        if self._mid_write and sends:
            return True
        for entry in sends:
            if not entry.report:
                return True
        return bool(self.transport.has_pending_writes())

    def has_pending_writes(self):
        if self._sends:
            return True
        t = self.transport
        return t.holds_bytes and bool(t.has_pending_writes())

    def _send_queue(self):
        """The send queue, made if there is none (see ``_NO_SENDS``)."""
        sends = self._sends
        if sends is _NO_SENDS:
            sends = self._sends = collections.deque()
        return sends

    def _enqueue_auth(self, data):
        """Queue an authentication frame.

        Server side: behind everything queued (responses to requests that
        came before the SaslHandshake starting a re-authentication go out
        first, as a broker sends them before reading the next request).
        Client side: ahead of data-phase sends that have not started (during
        re-authentication the channel is not READY, and Kafka does not write
        application sends until it is), but behind earlier authentication
        frames and a partially written send."""
        if self._sends is _NO_SENDS:
            # Nothing queued (connection set-up, where every frame is an
            # authentication frame): the frame goes straight to the
            # transport, with no queue entry.  What it does not take now is
            # queued as a partly written frame for flush().
            n = self.transport.write(data)
            self._auth_written = True
            if n < len(data):
                self._mid_write = True
                self._sends = collections.deque(
                    (QueuedSend(memoryview(data)[n:], len(data), False),))
            return
        sends = self._sends
        if self.mode == "server":
            sends.append(QueuedSend(memoryview(data), len(data), False))
            return
        pos = 0
        for i, entry in enumerate(self._sends):
            if not entry.report:
                pos = i + 1
        if pos == 0 and self._mid_write and sends:
            pos = 1
        sends.insert(pos, QueuedSend(memoryview(data), len(data), False))

    def _enqueue(self, data, report, size=None):
        self._send_queue().append(QueuedSend(
            memoryview(data), size if size is not None else len(data), report))

    def write(self, max_bytes=4194304):
        """Write queued sends; True when nothing is left to write.  Completed
        data-phase sends are kept for :meth:`take_accepted`."""
        done = self.write_sends(max_bytes)
        if done:
            self._accepted[:0] = done
        return not self.has_pending_writes()

    def _flush_all(self):
        """AuthIO.flush: write queued authentication frames now.  Data-phase
        sends queued behind them (a request made before re-authentication
        began) stay queued until the channel is READY again, as in Kafka.
        Returns True when no authentication bytes are left to write."""
        if self._sends is _NO_SENDS:
            # Nothing queued: the frames written straight through
            # (_enqueue_auth) may still be held by the transport (TLS).
            t = self.transport
            if t.holds_bytes:
                t.flush()
                if t.has_pending_writes():
                    return False
            if self._auth_written:
                self._auth_written = False
                self._awaiting_answer = True
            return True
        keep = 0
        for i, entry in enumerate(self._sends):
            if not entry.report:
                keep = i + 1
        # authentication frames to write, or written straight through
        wrote = keep > 0 or self._auth_written
        self._auth_written = False
        if keep == 0 and self._mid_write and self._sends:
            keep = 1          # finish a partially written send first
        held = []
        while len(self._sends) > keep:
            held.append(self._sends.pop())
        try:
            if self._sends:
                done = self.write_sends()
                if done:
                    self._accepted[:0] = done
            else:
                self.transport.flush()
            if self._sends:
                return False
            flushed = not self.transport.has_pending_writes()
            if flushed and wrote:
                self._awaiting_answer = True
            return flushed
        finally:
            if held:
                # (write_sends() may have let the emptied queue go)
                sends = self._send_queue()
                while held:
                    sends.append(held.pop())

    def take_accepted(self):
        """The sizes of the sends completed since they were last taken (an
        empty list, not to be changed, when there are none)."""
        done = self._accepted
        if done:
            self._accepted = []
        return done
