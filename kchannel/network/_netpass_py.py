"""The network layer's methods run once per poll and channel: a channel's
data-phase read (``read_frames``) and the state the selector asks of it
after serving it (``settle_state``), the plaintext transport's read and
writes (``receive_into``, ``write``, ``write_vectored``), and the selector's
metrics of one poll (``record_poll``).

``KafkaChannel``, ``PlaintextTransportLayer`` and ``SelectorMetrics`` take
these functions as their methods (their first parameter: the channel, the
transport, the metrics), as ``ChannelSendQueue`` takes the ``sendqueue``
twin's.  Their callers are the compiled selector loop (``netloop``) and, per
request, the producer's Sender: compiled, they make no interpreted frame
of their own (five per Produce request of ``kchannel.aio.AIOProducer``).

This module is a twin (see ``kchannel._impl``): the same source is compiled
by Cython in pure-Python mode as ``kchannel.network._cnetpass``
(``_cnetpass.pxd`` beside it).  It imports nothing from the channel, the
transport or the selector (they import it).
"""
from .. import errors
from ..errors import ChannelConnectionError
from .channel_state import _NOT_MUTED

__all__ = ["connection_error", "read_frames", "settle_state", "receive_into", "write", "write_vectored", "record_poll"]


def connection_error(exc, what):
    """Translate an OSError from a socket call into ChannelConnectionError."""
    err = ChannelConnectionError(f"{what}: {exc.strerror or exc}")
    err.errno = getattr(exc, "errno", None)
    return err


def read_frames(ch, max_frames=1, max_bytes=1048576):
    """Data phase read: at most ``max_frames`` complete payloads, reading
    at most ``max_bytes`` from the transport (fairness bound).

    Returns ``(frames, bytes_read)``; the frames are read-only
    memoryviews of the decoder's receive memory (never changed
    afterwards; see ``kchannel.framing``).  Raises
    ``InvalidReceiveError`` for a bad size prefix (once the frames
    before it have been returned) and ``ChannelConnectionError`` at EOF
    once every complete frame has been returned.
    """
    frames = []
    bytes_read = 0
    drained = False
    stash = ch._stash
    decoder = ch.decoder
    if (not stash and ch._invalid is None and not ch._eof and max_frames > 0
            and max_bytes > 0 and decoder.buffered < 4):
        # The usual case, nothing kept from an earlier read: the loop
        # below would read once (its first pass), take the complete
        # frames out (its second) and stop on a drained socket (its
        # third).  The same steps, written out: each pass of the loop
        # cost as much as the read itself (a request or response read
        # per connection per poll: a server's, a gateway's both ways).
        t = ch.transport
        try:
            n = t.receive_into(decoder)
        except errors.ChannelConnectionError:
            ch._eof = True
            n = 0
        if n == 0:
            if ch._eof:
                raise errors.ChannelConnectionError(
                    f"Connection with {ch.socket_description()} closed by peer")
            return frames, 0
        bytes_read = n
        drained = t.drained
        if drained and decoder.buffered >= 4:
            try:
                got = decoder.frames()
            except errors.InvalidReceiveError as exc:
                got = exc.frames
                exc.frames = []
                if not got:
                    raise
                ch._invalid = exc
            if got:
                if len(got) > max_frames:
                    stash.extend(got[max_frames:])
                    return got[:max_frames], bytes_read
                if ch._invalid is not None or not decoder.buffered:
                    # (the loop's next pass stops there)
                    return got, bytes_read
                frames = got      # (a list of its own) the loop goes on
    while True:
        if stash:
            take = max_frames - len(frames)
            frames.extend(stash[:take])
            del stash[:take]
        room = max_frames - len(frames)
        if room <= 0:
            break
        if ch._invalid is not None:
            if frames:
                break
            exc, ch._invalid = ch._invalid, None
            raise exc
        # Every complete frame at once (one C loop in the compiled
        # decoder); what exceeds max_frames waits in the stash.  (Fewer
        # than 4 bytes hold no frame nor size prefix to reject: no call.)
        if decoder.buffered >= 4:
            try:
                got = decoder.frames()
            except errors.InvalidReceiveError as exc:
                got = exc.frames
                exc.frames = []
                if not got and not frames:
                    raise
                ch._invalid = exc
            if got:
                if len(got) > room:
                    frames.extend(got[:room])
                    stash.extend(got[room:])
                    break
                frames.extend(got)
                continue
        if (bytes_read >= max_bytes or ch._eof or ch._invalid is not None
                or (drained and not decoder.buffered)):
            break
        # ch._fill(max_bytes - bytes_read, once=True), inlined: one read
        try:
            n = ch.transport.receive_into(decoder)
        except errors.ChannelConnectionError:
            ch._eof = True
            n = 0
        bytes_read += n
        if n == 0:
            break
        # A short read emptied the socket: when it also ended on a frame
        # boundary, the loop takes out what it completed and does not
        # read again (that would only return EAGAIN; what arrives later
        # raises a readiness event).  Mid-frame it reads on: the rest of
        # a large frame is usually arriving while this one is handled,
        # and stopping would cost a poll per read.
        drained = ch.transport.drained
    if not frames and ch._eof:
        raise errors.ChannelConnectionError(
            f"Connection with {ch.socket_description()} closed by peer")
    return frames, bytes_read


def settle_state(ch):
    """What the selector asks after serving a READY channel, in one
    call: ``(has_pending_writes(), is_muted(), buffered)``, where
    ``buffered`` is ``has_bytes_buffered()`` -- asked only when it can
    matter (not muted, and for a server not held back by pending
    writes), False otherwise."""
    t = ch.transport
    # (a transport that holds no bytes of its own is not asked)
    holds = t.holds_bytes
    pending = bool(ch._sends) or (holds and bool(t.has_pending_writes()))
    if ch.mute_state is not _NOT_MUTED:
        return pending, True, False
    if pending and ch.mode == "server":
        return True, False, False
    # has_bytes_buffered(), inlined
    buffered = ((holds and t.has_bytes_buffered()) or bool(ch._stash)
                or ch._invalid is not None
                or (ch.decoder.buffered >= 4 and ch.has_complete_frame()))
    return pending, False, buffered


def receive_into(t, decoder):
    """One ``recv_into`` straight into the decoder's writable region (a
    large frame's own buffer once its size is known, as Kafka's
    NetworkReceive reads into its payload buffer)."""
    if t._eof:
        raise ChannelConnectionError("Connection closed by peer (EOF)")
    n = 0
    region = decoder.writable()
    room = len(region)      # (commit releases the view)
    try:
        n = t._sock.recv_into(region)
    except (BlockingIOError, InterruptedError):
        t.drained = True
        return 0
    except OSError as exc:
        raise connection_error(exc, "Read failed") from exc
    finally:
        # Always: releases the writable view (see FrameDecoder).
        decoder.commit(n)
    if n == 0:
        t._eof = True
        raise ChannelConnectionError("Connection closed by peer (EOF)")
    # A read shorter than the room offered took everything the socket
    # held: reading again now would only cost an EAGAIN (what arrives
    # later raises a readiness event).  Level-triggered selection makes
    # stopping here safe.
    t.drained = n < room
    return n


def write(t, data):
    """``PlaintextTransportLayer.write``, its method (``t``): one ``send``
    of ``data``; the bytes the socket took (0: not now)."""
    if t._closed:
        raise ChannelConnectionError("Write on a closed transport")
    if not data:
        return 0
    try:
        n = t._sock.send(data)
    except (BlockingIOError, InterruptedError):
        return 0
    except OSError as exc:
        raise connection_error(exc, "Write failed") from exc
    # Plaintext never holds bytes it accepted: what send() did not take
    # stays with the caller.
    return n


def write_vectored(t, buffers):
    """``PlaintextTransportLayer.write_vectored``, its method (``t``):
    ``write`` of the concatenation of ``buffers`` (a list of
    bytes-like) with one gather ``sendmsg``, without joining them:
    returns how many bytes of it the socket took (0: not now)."""
    if t._closed:
        raise ChannelConnectionError("Write on a closed transport")
    try:
        return t._sock.sendmsg(buffers)
    except (BlockingIOError, InterruptedError):
        return 0
    except OSError as exc:
        raise connection_error(exc, "Write failed") from exc


def record_poll(metrics, select_ns, io_ns, now, bytes_read=0, receives=0, sent=None):
    """One poll: ``select_ns`` waiting in select, ``io_ns`` doing I/O,
    ``bytes_read`` read off the sockets, ``receives`` complete receives
    handed over and ``sent`` the sizes of the sends the poll completed
    (the ``bytes_received``, ``responses_received``, ``bytes_sent``,
    ``requests_sent`` and ``bytes_transferred`` sensors: the same values
    as recording them per channel, since every channel of a poll is
    served at the same ``now``), once per poll."""
    if sent:
        if len(sent) == 1:
            metrics.requests_sent.record(sent[0], now)
        else:
            metrics.requests_sent.record_many(sent, now)
    metrics.select_time.record(select_ns, now)
    metrics.io_time.record(io_ns, now)
    if bytes_read:
        # (one event per poll instead of one per channel read: the
        # incoming-byte metrics measure sums only)
        metrics.bytes_received.record(bytes_read, now)
    if receives == 1:
        metrics.responses_received.record(1.0, now)
        metrics.bytes_transferred.record(1.0, now)
    elif receives:
        # (count stats: the values are not read, their number is)
        ones = (1.0,) * receives
        metrics.responses_received.record_many(ones, now)
        metrics.bytes_transferred.record_many(ones, now)
