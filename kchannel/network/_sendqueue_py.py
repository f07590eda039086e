"""The hot half of a channel's send queue: queuing a frame, writing the queue
(one write or one gather write for everything queued), retiring what was
written.

:class:`kchannel.network.channel_sends.ChannelSendQueue` (a base class of
``KafkaChannel``) takes ``set_send``, ``write_sends``, ``gather`` and
``retire`` from here as its methods (``ch`` is the channel); the rest of
the queue (authentication frames, flush during authentication) stays there.

Each queued send is a :class:`QueuedSend` (named fields instead of the
positional list it was).

This module is a twin (see ``kchannel._impl``): the same source is compiled
by Cython in pure-Python mode as ``kchannel.network._csendqueue``, where
``_csendqueue.pxd`` makes ``QueuedSend`` an extension type with C fields
and these functions C functions (with their Python wrappers, which bind as
methods: ``ch``, their first parameter, is the channel) reading them directly: a send queued and written makes no
interpreted call of its own.  Pure Python runs the same code, ``QueuedSend``
a ``__slots__`` class.  It imports nothing from the channel or the selector
(they import it).
"""
import collections
import struct

from ..framing import encode_frame

__all__ = ["QueuedSend", "set_send", "write_sends", "gather", "retire", "COALESCE_BELOW",
           "COALESCE_MAX", "SEPARATE_FROM", "SEPARATE_FROM_UNGATHERED", "HEAD_JOIN",
           "GATHER_MAX", "GATHER_MAX_BUFFERS"]

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
# (``ChannelSendQueue._send_queue``): about 40 ns per send that finds the
# queue empty.
_NO_SENDS = ()
_deque = collections.deque
# The compiled twin joins a frame's leading and trailing parts in C
# (_c_join, see _csendqueue.pxd): one bytes object allocated and the parts
# copied into it, instead of a tuple slice and b"".join (~650 instructions
# per Produce request).  The pure twin never reads that name.
_C_JOIN = __name__.endswith("._csendqueue")


class QueuedSend:
    """One frame queued on a channel: ``data``, what is left to write (the
    frame as queued, a memoryview once partly written); ``size``, the frame
    size reported once it is completely written; ``report``, False for an
    authentication frame (not reported as a completed send); ``head``, the
    bytes still to be written before ``data`` when the payload was queued
    without being copied into a frame (its 4-byte size prefix, or every
    byte of a frame queued as parts before its large part), else None;
    ``tail``, the bytes of a frame queued as parts that follow ``data``
    (written after it), else None."""

    __slots__ = ("data", "size", "report", "head", "tail")

    def __init__(self, data, size, report, head=None, tail=None):
        self.data = data
        self.size = size
        self.report = report
        self.head = head
        self.tail = tail

    def __repr__(self):
        return (f"QueuedSend({len(self.data)} bytes left of {self.size}, "
                f"report={self.report}, head={self.head is not None}, "
                f"tail={self.tail is not None})")


def _new_send(data, size, report, head, tail=None):
    # QueuedSend(...) without its __init__'s frame (pure twin) or argument
    # parsing (compiled twin): one per request and per response.
    e = QueuedSend.__new__(QueuedSend)
    e.data = data
    e.size = size
    e.report = report
    e.head = head
    e.tail = tail
    return e


def _parts_send(ch, parts):
    """The QueuedSend of a whole frame given as a tuple of parts (their
    concatenation is the frame, size prefix included): over a transport
    that writes buffer lists, the first ``bytes`` part of at least
    SEPARATE_FROM bytes (a producer's record batch in its Produce request)
    is queued as it is, the parts before it joined as ``head`` and those
    after it as ``tail``: the batch is written from its own memory instead
    of being copied into a frame (and again into a gather write).  Else
    the parts are joined into one frame."""
    if ch._write_vectored is not None:
        i = 0
        separate = SEPARATE_FROM       # (a C integer compiled: no object compared per part)
        for part in parts:
            if type(part) is bytes and len(part) >= separate:
                n = len(parts)
                # (the usual frame has one part after the batch, the tagged
                # fields: taken as it is, no slice and join)
                if _C_JOIN:
                    head = _c_join(parts, 0, i)
                    tail = parts[i + 1] if n == i + 2 and type(parts[i + 1]) is bytes \
                        else _c_join(parts, i + 1, n)
                else:
                    head = b"".join(parts[:i])
                    tail = parts[i + 1] if n == i + 2 and type(parts[i + 1]) is bytes \
                        else b"".join(parts[i + 1:])
                # (the bytes themselves, not a memoryview of them: a
                # gather write takes bytes as they are, and retire makes a
                # view only of what a partial write leaves; this path is
                # taken only over a transport that writes buffer lists)
                return _new_send(part, len(head) + len(part) + len(tail), True,
                                 head if head else None, tail if tail else None)
            i += 1
    data = b"".join(parts)
    return _new_send(data, len(data), True, None)


def set_send(ch, payload, already_framed=False):
    """Queue one frame (``payload`` without size prefix unless
    ``already_framed``).  Unlike Kafka's single in-flight Send, sends
    queue up behind each other; each is reported once fully written.

    A large ``bytes`` payload (immutable, so it can be kept as it is) is
    not copied into a frame when the transport writes buffer lists.  A
    ``tuple`` payload is a whole frame as parts (``bytes`` whose
    concatenation is the frame, size prefix included; see _parts_send).

    Returns True when sends were already queued (this one waits behind
    them), False when it is the only one: the selector's question
    before queuing, answered without a call of its own."""
    sends = ch._sends
    if type(payload) is tuple:
        # a whole frame as parts (already framed: see _parts_send)
        e = _parts_send(ch, payload)
    elif (not already_framed and type(payload) is bytes and len(payload) <= _MAX_PAYLOAD
            and len(payload) >= (SEPARATE_FROM if ch._write_vectored is not None
                                 else SEPARATE_FROM_UNGATHERED)):
        n = len(payload)
        e = _new_send(memoryview(payload), n + 4, True, _SIZE.pack(n))
    else:
        data = payload if already_framed else encode_frame(payload)
        # The frame is queued as it is: a memoryview is made only if a write
        # takes part of it (retire), not for every request.
        e = _new_send(data, len(data), True, None)
    if sends is _NO_SENDS:
        ch._sends = _deque((e,))
        return False
    had = len(sends) > 0
    sends.append(e)
    return had


def write_sends(ch, max_bytes=4194304):
    """Write queued sends.  Returns the list of completed send sizes
    (only data-phase sends).  Raises on socket errors."""
    t = ch.transport
    sends = ch._sends
    if len(sends) == 1 and not ch._accepted:
        # One frame queued (a request or response at depth 1): the loop
        # below, unrolled for it.
        entry = sends[0]
        mv = entry.data
        if entry.head is None and entry.tail is None and len(mv) <= max_bytes:
            ch._mid_write = True
            n = t.write(mv)
            if n == len(mv) and (not t.holds_bytes or t.flush()):
                ch._mid_write = False
                ch._sends = _NO_SENDS
                return [entry.size] if entry.report else []
            if n == len(mv):
                # written, the transport still holding bytes (TLS):
                # accepted, reported once they are flushed
                retire(ch, n)
                return []
            retire(ch, n)
            t.flush()
            return []
    written = 0
    writev = ch._write_vectored
    while sends and written < max_bytes:
        entry = sends[0]
        mv = entry.data
        ch._mid_write = True
        if writev is not None and (len(sends) > 1 or entry.head is not None
                                   or entry.tail is not None):
            # One gather write (sendmsg) of several frames: size
            # prefixes and large payloads as they are, runs of small
            # frames joined.
            bufs, total, count = gather(ch)
            n = writev(bufs) if len(bufs) > 1 else t.write(bufs[0])
            if n == total and count == len(sends):
                # All of the queue went out (the usual case of a
                # pipelining client or a batch of responses): retired
                # in one pass instead of entry by entry.
                accepted = ch._accepted
                for entry in sends:
                    if entry.report:
                        accepted.append(entry.size)
                sends.clear()
                written += n
                break
        elif entry.head is not None:
            # A separately queued large payload over a transport without
            # gather writes: its size prefix joined to the payload's
            # first bytes (one TLS record), the rest next time round.
            data = b"".join((entry.head, mv[:HEAD_JOIN]))
            total = len(data)
            n = t.write(data)
        elif len(mv) < COALESCE_BELOW and len(sends) > 1:
            # Coalesce queued frames into one write: a syscall (and for
            # TLS an SSL write and a flush) costs far more than copying
            # 16 KiB.
            parts = []
            total = 0
            for entry in sends:
                if (total + len(entry.data) > COALESCE_MAX and parts) or entry.head is not None:
                    # (a separately queued payload goes with its prefix)
                    break
                parts.append(entry.data)
                total += len(entry.data)
            n = t.write(b"".join(parts))
        else:
            total = len(mv)
            n = t.write(mv)
        written += n
        retire(ch, n)
        if n < total:
            break
    pending = t.holds_bytes and not t.flush()
    # (``sends`` is still the channel's queue: nothing above replaces it)
    if not sends and not pending:
        ch._mid_write = False
        # Everything is written: the queue goes (see _NO_SENDS), so an
        # idle connection holds none; the next send makes one again.
        ch._sends = _NO_SENDS
        done = ch._accepted
        ch._accepted = []
        return done
    return []


def gather(ch):
    """Buffers for one gather write from the front of the send queue,
    their total size and the number of queued sends they cover."""
    bufs = []
    run = []
    run_bytes = 0
    total = 0
    count = 0
    # (the limits as locals: C integers compiled, no module global read
    # and boxed for each comparison, four per queued send)
    coalesce_below = COALESCE_BELOW
    coalesce_max = COALESCE_MAX
    gather_max = GATHER_MAX
    gather_max_buffers = GATHER_MAX_BUFFERS
    for e in ch._sends:
        mv = e.data
        head = e.head
        tail = e.tail
        ln = len(mv)
        if head is not None:
            ln += len(head)
        if tail is not None:
            ln += len(tail)
        if total and total + ln > gather_max:
            break
        total += ln
        count += 1
        if head is None and tail is None and ln < coalesce_below:
            run.append(mv)
            run_bytes += ln
            if run_bytes < coalesce_max:
                continue
        if run:
            bufs.append(run[0] if len(run) == 1 else b"".join(run))
            run = []
            run_bytes = 0
        if ln and (head is not None or tail is not None or ln >= coalesce_below):
            if head is not None:
                bufs.append(head)
            bufs.append(mv)
            if tail is not None:
                bufs.append(tail)
        if len(bufs) >= gather_max_buffers:
            break
    if run:
        bufs.append(run[0] if len(run) == 1 else b"".join(run))
    return bufs, total, count


def retire(ch, n):
    """Drop ``n`` written bytes from the front of the send queue; fully
    written data-phase sends become accepted."""
    sends = ch._sends
    while sends:
        e = sends[0]
        head = e.head
        if head is not None:
            hl = len(head)
            if n < hl:
                if n:
                    e.head = head[n:]
                return
            n -= hl
            e.head = None
        data = e.data
        ln = len(data)
        if n < ln:
            if n:
                # the rest, without copying it
                e.data = (data if type(data) is memoryview else memoryview(data))[n:]
            return
        n -= ln
        tail = e.tail
        if tail is not None:
            if n < len(tail):
                # the payload written, not all of its tail: what is left of
                # the tail becomes the entry's data
                e.data = memoryview(tail)[n:]
                e.tail = None
                return
            n -= len(tail)
        sends.popleft()
        if e.report:
            ch._accepted.append(e.size)
