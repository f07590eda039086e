"""A channel's send queue: what :class:`~kchannel.network.channel.KafkaChannel`
does with the frames queued on it (data-phase sends and authentication
frames), coalesced, gathered or written whole, and the sizes of the sends
completed.

``ChannelSendQueue`` is a base class of ``KafkaChannel``, whose
``__init__`` sets up the state these methods use (``transport``,
``_sends``, ``_accepted``, ``_mid_write`` ...).  Moved out of ``channel.py``
unchanged; ``kchannel.network.channel`` still exports every name.
"""
import collections
import struct

from ..framing import encode_frame

__all__ = ["ChannelSendQueue", "COALESCE_BELOW", "COALESCE_MAX", "SEPARATE_FROM",
           "SEPARATE_FROM_UNGATHERED", "HEAD_JOIN", "GATHER_MAX", "GATHER_MAX_BUFFERS"]

# write_sends joins queued sends smaller than COALESCE_BELOW into writes of
# up to COALESCE_MAX bytes.
COALESCE_BELOW = 65536
COALESCE_MAX = 262144
# Over a transport that writes buffer lists (plaintext ``sendmsg``), a
# ``bytes`` payload of at least SEPARATE_FROM bytes is queued as its 4-byte
# size prefix plus the payload itself, and written without being copied into
# one frame; one gather write takes at most GATHER_MAX bytes in at most
# GATHER_MAX_BUFFERS buffers.  Smaller frames are still joined (a copy of a
# few KiB costs less than an extra buffer in the list).
SEPARATE_FROM = 8192
# Over other transports (TLS: an SSLObject encrypts contiguous data), a
# ``bytes`` payload of at least SEPARATE_FROM_UNGATHERED bytes is queued the
# same way; its size prefix is written joined to the first HEAD_JOIN bytes of
# the payload (one copy of that much instead of the whole payload) and the
# rest of the payload as it is.
SEPARATE_FROM_UNGATHERED = 131072
HEAD_JOIN = 16380
GATHER_MAX = 1048576
GATHER_MAX_BUFFERS = 128
_SIZE = struct.Struct(">i")
_MAX_PAYLOAD = 0x7FFFFFFF
# The send queue of a channel with nothing queued: an empty deque costs about
# 700 bytes (its first block is allocated up front), which an idle connection
# -- most of a server's -- need not hold.  write_sends() lets the queue go once
# everything is written; reading _NO_SENDS (truth, len, iteration) works as
# for an empty deque, and whatever appends first swaps a deque in
# (``_send_queue``): about 40 ns per send that finds the queue empty.
_NO_SENDS = ()


class ChannelSendQueue:
    """The send half of :class:`~kchannel.network.channel.KafkaChannel` (see
    the module docstring)."""

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
            if not entry[2]:
                return True
        return bool(self.transport.has_pending_writes())

    def has_pending_writes(self):
        if self._sends:
            return True
        t = self.transport
        return t.holds_bytes and bool(t.has_pending_writes())

    def set_send(self, payload, already_framed=False):
        """Queue one frame (``payload`` without size prefix unless
        ``already_framed``).  Unlike Kafka's single in-flight Send, sends
        queue up behind each other; each is reported once fully written.

        A large ``bytes`` payload (immutable, so it can be kept as it is) is
        not copied into a frame when the transport writes buffer lists.

        Returns True when sends were already queued (this one waits behind
        them), False when it is the only one: the selector's question
        before queuing, answered without a call of its own."""
        sends = self._sends
        if (not already_framed and type(payload) is bytes and len(payload) <= _MAX_PAYLOAD
                and len(payload) >= (SEPARATE_FROM if self._write_vectored is not None
                                     else SEPARATE_FROM_UNGATHERED)):
            n = len(payload)
            self._send_queue().append([memoryview(payload), n + 4, True, _SIZE.pack(n)])
            return bool(sends)
        data = payload if already_framed else encode_frame(payload)
        # _enqueue(data, report=True), inlined: one send per request.  The
        # frame is queued as it is: a memoryview is made only if a write
        # takes part of it (_retire), not for every request.
        if sends is _NO_SENDS:
            self._sends = collections.deque(([data, len(data), True, None],))
            return False
        had = bool(sends)
        sends.append([data, len(data), True, None])
        return had

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
                    ([memoryview(data)[n:], len(data), False, None],))
            return
        sends = self._sends
        if self.mode == "server":
            sends.append([memoryview(data), len(data), False, None])
            return
        pos = 0
        for i, entry in enumerate(self._sends):
            if not entry[2]:
                pos = i + 1
        if pos == 0 and self._mid_write and sends:
            pos = 1
        sends.insert(pos, [memoryview(data), len(data), False, None])

    def _enqueue(self, data, report, size=None):
        self._send_queue().append([memoryview(data), size if size is not None else len(data),
                                   report, None])

    def write(self, max_bytes=4194304):
        """Write queued sends; True when nothing is left to write.  Completed
        data-phase sends are kept for :meth:`take_accepted`."""
        done = self.write_sends(max_bytes)
        if done:
            self._accepted[:0] = done
        return not self.has_pending_writes()

    def write_sends(self, max_bytes=4194304):
        """Write queued sends.  Returns the list of completed send sizes
        (only data-phase sends).  Raises on socket errors."""
        t = self.transport
        sends = self._sends
        if len(sends) == 1 and not self._accepted:
            # One frame queued (a request or response at depth 1): the loop
            # below, unrolled for it.
            entry = sends[0]
            mv = entry[0]
            if entry[3] is None and len(mv) <= max_bytes:
                self._mid_write = True
                n = t.write(mv)
                if n == len(mv) and (not t.holds_bytes or t.flush()):
                    self._mid_write = False
                    self._sends = _NO_SENDS
                    return [entry[1]] if entry[2] else []
                if n == len(mv):
                    # written, the transport still holding bytes (TLS):
                    # accepted, reported once they are flushed
                    self._retire(n)
                    return []
                self._retire(n)
                t.flush()
                return []
        written = 0
        writev = self._write_vectored
        while sends and written < max_bytes:
            entry = sends[0]
            mv = entry[0]
            self._mid_write = True
            if writev is not None and (len(sends) > 1 or entry[3] is not None):
                # One gather write (sendmsg) of several frames: size
                # prefixes and large payloads as they are, runs of small
                # frames joined.
                bufs, total, count = self._gather()
                n = writev(bufs) if len(bufs) > 1 else t.write(bufs[0])
                if n == total and count == len(sends):
                    # All of the queue went out (the usual case of a
                    # pipelining client or a batch of responses): retired
                    # in one pass instead of entry by entry.
                    self._accepted.extend([e[1] for e in sends if e[2]])
                    sends.clear()
                    written += n
                    break
            elif entry[3] is not None:
                # A separately queued large payload over a transport without
                # gather writes: its size prefix joined to the payload's
                # first bytes (one TLS record), the rest next time round.
                data = b"".join((entry[3], mv[:HEAD_JOIN]))
                total = len(data)
                n = t.write(data)
            elif len(mv) < COALESCE_BELOW and len(sends) > 1:
                # Coalesce queued frames into one write: a syscall (and for
                # TLS an SSL write and a flush) costs far more than copying
                # 16 KiB.
                parts = []
                total = 0
                for e in sends:
                    if (total + len(e[0]) > COALESCE_MAX and parts) or e[3] is not None:
                        # (a separately queued payload goes with its prefix)
                        break
                    parts.append(e[0])
                    total += len(e[0])
                n = t.write(b"".join(parts))
            else:
                total = len(mv)
                n = t.write(mv)
            written += n
            self._retire(n)
            if n < total:
                break
        pending = t.holds_bytes and not t.flush()
        if not self._sends and not pending:
            self._mid_write = False
            # Everything is written: the queue goes (see _NO_SENDS), so an
            # idle connection holds none; the next send makes one again.
            self._sends = _NO_SENDS
            done, self._accepted = self._accepted, []
            return done
        return []

    def _gather(self):
        """Buffers for one gather write from the front of the send queue,
        their total size and the number of queued sends they cover."""
        bufs = []
        run = []
        run_bytes = 0
        total = 0
        count = 0
        for e in self._sends:
            mv = e[0]
            head = e[3]
            ln = len(mv) if head is None else len(mv) + len(head)
            if total and total + ln > GATHER_MAX:
                break
            total += ln
            count += 1
            if head is None and ln < COALESCE_BELOW:
                run.append(mv)
                run_bytes += ln
                if run_bytes < COALESCE_MAX:
                    continue
            if run:
                bufs.append(run[0] if len(run) == 1 else b"".join(run))
                run = []
                run_bytes = 0
            if ln and (head is not None or ln >= COALESCE_BELOW):
                if head is not None:
                    bufs.append(head)
                bufs.append(mv)
            if len(bufs) >= GATHER_MAX_BUFFERS:
                break
        if run:
            bufs.append(run[0] if len(run) == 1 else b"".join(run))
        return bufs, total, count

    def _retire(self, n):
        """Drop ``n`` written bytes from the front of the send queue; fully
        written data-phase sends become accepted."""
        sends = self._sends
        while sends:
            e = sends[0]
            head = e[3]
            if head is not None:
                hl = len(head)
                if n < hl:
                    if n:
                        e[3] = head[n:]
                    return
                n -= hl
                e[3] = None
            data = e[0]
            ln = len(data)
            if n < ln:
                if n:
                    # the rest, without copying it
                    e[0] = (data if type(data) is memoryview else memoryview(data))[n:]
                return
            n -= ln
            sends.popleft()
            if e[2]:
                self._accepted.append(e[1])

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
            if not entry[2]:
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
