"""Kafka size-prefixed framing, pure-Python twin of ``kchannel._cframing``.

A Kafka frame is a 4-byte signed big-endian length followed by that many
bytes (Kafka's ``NetworkReceive`` / ``NetworkSend``).  The decoder is sans-I/O:
bytes go in either by ``writable()`` + ``commit(n)`` (the transport receives
straight into the decoder's memory: ``n = sock.recv_into(d.writable());
d.commit(n)``) or by ``feed(data)`` (a copy); whole payloads come out of
``next_frame()`` / ``frames()``.

The size prefix is attacker-controlled and arrives before authentication, so
it is checked against ``max_size`` as soon as its 4 bytes are in and before
anything of that size is allocated; a bad size raises ``InvalidReceiveError``
with Kafka's message, and the connection is expected to be closed.

Memory ownership (the part that must not go wrong)
--------------------------------------------------
Frames shorter than ``COPY_BELOW`` (2 KiB) are handed out as ``bytes``
copies: for a small frame a copy costs less than a view (one object instead
of an exporter and a memoryview), keeps no receive memory alive, and leaves
the chunk the decoder's own (it is reused from the front).  Larger frames
are handed out as **read-only memoryview slices of the receive memory, not
copies**, and a slice must never see its bytes change.  So:

* Small frames are received into a *chunk*.  The decoder writes into a chunk
  only after ``_end`` (``writable()`` exposes exactly ``[_end, cap)``), and
  every frame handed out lies before ``_start <= _end``: no write ever lands
  on a handed-out byte.
* Once a slice of a chunk was handed out (``_shared``), the chunk is never
  compacted or reused from the front.  When it is full, or an incomplete
  head frame does not fit in what is left, a fresh chunk is started and only
  the incomplete tail (less than one small frame) is copied into it.  The
  old chunk belongs to the slices from then on and is freed with the last of
  them.  A chunk nothing was handed out of is compacted in place instead.
* Large frames (``_DIRECT_MIN`` and up) are received into their own buffer
  of exactly their size once their prefix is validated (as Kafka's
  ``NetworkReceive`` allocates its payload buffer): ``writable()`` then
  exposes the rest of that frame, so its bytes are written once, by the
  socket read (or TLS decryption), and handed out whole.
* The writable memoryview is released by ``commit()``: a transport that
  kept it could not write through it into handed-out bytes later.

Trade-off: a slice (a frame of ``COPY_BELOW`` bytes or more) keeps its whole
chunk alive.  Chunk sizes follow the
receive sizes (``_hint``: from ``_FIRST_CAP`` doubling up to ``_MAX_CHUNK``
while receives fill what they are offered, decaying otherwise), so a
connection with small request/response traffic uses small chunks and one
kept small frame pins a few KiB; on a bulk connection one kept frame can pin
up to ``_MAX_CHUNK`` (256 KiB) -- frames of ``_DIRECT_MIN`` and up never
share their buffer.  Copying every frame would avoid that at the price of a
copy per byte; a consumer that keeps a small frame for long should keep
``bytes(frame)`` instead.

Idle connections: a chunk emptied (every byte consumed) is dropped when it is
small (``_RELEASE_AT_MOST``) or the traffic is (``_hint``), so an idle
connection between requests holds no receive memory; a bulk connection keeps
one chunk of at most ``_MAX_CHUNK``.  "Emptied" is noticed when a frame
taken out was the chunk's last byte (``next_frame``), when ``frames()`` finds
nothing more, and when a receive committed nothing into it (``commit(0)``:
a TLS read that found no whole record set up a chunk for nothing).
"""
import struct

from .errors import InvalidReceiveError

__all__ = ["DEFAULT_MAX_SIZE", "COPY_BELOW", "encode_frame", "encode_frames", "FrameDecoder"]

# Kafka's socket.request.max.bytes default (100 MiB).
DEFAULT_MAX_SIZE = 104857600
_MAX_PAYLOAD = 0x7FFFFFFF

_SIZE = struct.Struct(">i")
_pack_size = _SIZE.pack
_unpack_size = _SIZE.unpack_from

# The first chunk of a connection (and the smallest): a peer that sent a few
# bytes holds a few KiB, not a bulk-sized chunk.
_FIRST_CAP = 4096
# The largest chunk: what one receive reads at most into small-frame memory,
# and what one kept small frame can pin at most.
_MAX_CHUNK = 262144
# A receive is offered at least this much room (else a new chunk starts).
_MIN_REGION = 4096
# Frames this large get their own exactly-sized buffer.
_DIRECT_MIN = 32768
# An emptied chunk no larger than this is dropped (the next receive allocates
# again): an idle connection between requests holds no receive memory.
# Chunks this small come from malloc's heap, so allocating per receive is
# cheap.
_RELEASE_AT_MOST = 16384
# After a large frame, receives into the chunk are offered at most this much
# until the next size prefix is seen: if that frame is large too, only what
# arrived with its prefix is copied into its own buffer.
_AFTER_BIG_REGION = 16384
# Frames shorter than this are handed out as bytes copies (see above).
COPY_BELOW = 2048


def encode_frame(payload):
    """Return ``payload`` (any bytes-like) prefixed with its 4-byte size."""
    n = len(payload) if not isinstance(payload, memoryview) else payload.nbytes
    if n > _MAX_PAYLOAD:
        raise ValueError(f"frame payload too large ({n} bytes)")
    return b"".join((_pack_size(n), payload))


def encode_frames(payloads):
    """Return the concatenated frames of every payload in ``payloads``."""
    parts = []
    append = parts.append
    for payload in payloads:
        n = len(payload) if not isinstance(payload, memoryview) else payload.nbytes
        if n > _MAX_PAYLOAD:
            raise ValueError(f"frame payload too large ({n} bytes)")
        append(_pack_size(n))
        append(payload)
    return b"".join(parts)


def _invalid(size, max_size):
    if size < 0:
        return InvalidReceiveError(f"Invalid receive (size = {size})")
    return InvalidReceiveError(f"Invalid receive (size = {size} larger than {max_size})")


class FrameDecoder:
    """Incremental decoder of Kafka size-prefixed frames.

    ``max_size`` may be changed at any time (SASL lowers it before
    authentication and restores it afterwards).  It applies to every frame
    whose size prefix has not been validated yet; a frame whose prefix was
    already accepted keeps being received, as Kafka's ``NetworkReceive``
    keeps its size once read.

    Frames shorter than ``COPY_BELOW`` bytes come out as ``bytes``; larger
    ones as read-only memoryviews that share the decoder's receive memory
    and never change afterwards (see the module docstring).
    """

    __slots__ = ("_chunk", "_view", "_shared", "_start", "_end", "_need", "_max_size",
                 "_big", "_big_fill", "_wview", "_wbig", "_wsize", "_hint", "_after_big")

    def __init__(self, max_size=DEFAULT_MAX_SIZE):
        self._chunk = None      # bytearray receiving small frames, or None
        self._view = None       # read-only memoryview of _chunk (slices' base)
        self._shared = False    # a slice of _chunk was handed out
        self._start = 0         # first unconsumed byte of _chunk
        self._end = 0           # one past the last received byte of _chunk
        self._need = -1         # validated payload size of the head frame, or -1
        self._big = None        # bytearray of a large head frame being received
        self._big_fill = 0      # payload bytes of _big received so far
        self._wview = None      # memoryview given out by writable(), until commit
        self._wbig = False      # ... and whether it points into _big
        self._wsize = 0         # ... and its length
        self._hint = _FIRST_CAP  # size of the next chunk
        self._after_big = False  # the last frame set up was large
        self.max_size = max_size

    @property
    def max_size(self):
        return self._max_size

    @max_size.setter
    def max_size(self, value):
        value = int(value)
        if value < 0:
            raise ValueError(f"max_size must be >= 0, got {value}")
        self._max_size = value

    @property
    def buffered(self):
        """Bytes held (size prefixes included) that no frame returned yet."""
        if self._big is not None:
            return self._end - self._start + 4 + self._big_fill
        return self._end - self._start

    def has_partial(self):
        """True when the buffer ends with an incomplete frame (or a size
        prefix that will be rejected).  Complete frames still waiting to be
        drained do not count."""
        pos = self._start
        end = self._end
        need = self._need
        if self._big is not None:
            if self._big_fill < need:
                return True
            need = -1
        buf = self._chunk
        while pos < end:
            if need < 0:
                if end - pos < 4:
                    return True
                need = _unpack_size(buf, pos)[0]
                if need < 0:
                    return True
            if end - pos - 4 < need:
                return True
            pos += 4 + need
            need = -1
        return False

    # -- chunk management ---------------------------------------------------
    def _drop_chunk(self):
        # Forget the chunk: slices handed out keep it alive (it is freed with
        # the last of them); the decoder never touches it again.
        self._chunk = None
        self._view = None
        self._shared = False
        self._start = 0
        self._end = 0

    def _new_chunk(self, size):
        """Move the unconsumed bytes (an incomplete tail frame, never a
        handed-out one) to a fresh chunk of at least ``size`` bytes."""
        chunk = bytearray(max(size, self._hint))
        live = self._end - self._start
        if live:
            chunk[:live] = memoryview(self._chunk)[self._start:self._end]
        self._drop_chunk()
        self._chunk = chunk
        self._end = live

    def _emptied(self):
        """The chunk holds no unconsumed byte: free it if small (an idle
        connection holds no receive memory), else keep receiving into it."""
        chunk = self._chunk
        if chunk is None or self._start != self._end:
            return
        cap = len(chunk)
        if (cap <= _RELEASE_AT_MOST or self._hint <= _RELEASE_AT_MOST
                or (self._shared and cap - self._end < _MIN_REGION)):
            self._drop_chunk()
        elif not self._shared:
            # Nothing of it was handed out: reuse it from the front.
            self._start = self._end = 0

    def _room(self):
        """Room after ``_end`` worth a receive, and for all of a validated
        small head frame (handed out as one slice: it must be contiguous)."""
        live = self._end - self._start
        want = live + _MIN_REGION
        need = self._need
        if need >= 0 and 4 + need > want:
            want = 4 + need
        chunk = self._chunk
        if chunk is None:
            self._new_chunk(want)
            return
        cap = len(chunk)
        if need >= 0:
            if self._start + 4 + need <= cap and self._end < cap:
                return
        elif cap - self._end >= _MIN_REGION:
            return
        if not self._shared and cap >= want:
            # No byte of this chunk was handed out (and no view of it
            # exists): moving the tail to the front changes nothing visible.
            chunk[:live] = chunk[self._start:self._end]
            self._start = 0
            self._end = live
            return
        # Slices of this chunk may be alive: never write where they point.
        self._new_chunk(want)

    def _start_big(self, need):
        """The head frame is large and incomplete: receive it into its own
        buffer of exactly its size (Kafka's NetworkReceive)."""
        start = self._start + 4
        have = self._end - start
        big = bytearray(need)
        big[:have] = memoryview(self._chunk)[start:self._end]
        self._big = big
        self._big_fill = have
        self._after_big = True
        self._start = self._end
        self._emptied()

    def writable(self):
        """A writable memoryview of where the next received bytes go
        (``sock.recv_into`` / ``SSLObject.read`` into it), then
        ``commit(n)``.  Valid only until ``commit``; never empty."""
        if self._wview is not None:
            self.commit(0)
        big = self._big
        if big is not None and self._big_fill < self._need:
            self._wbig = True
            view = memoryview(big)[self._big_fill:]
        else:
            if (self._need < 0 and big is None and self._end - self._start >= 4):
                # Peek at the head frame's size so that a large frame is
                # received into its own buffer before more of it lands in
                # the chunk.  An invalid size is left for frames() to raise.
                size = _unpack_size(self._chunk, self._start)[0]
                if 0 <= size <= self._max_size:
                    self._need = size
                    if size >= _DIRECT_MIN and self._end - self._start - 4 < size:
                        self._start_big(size)
                        return self.writable()
            self._room()
            self._wbig = False
            end = self._end
            if self._after_big and len(self._chunk) - end > _AFTER_BIG_REGION:
                view = memoryview(self._chunk)[end:end + _AFTER_BIG_REGION]
            else:
                view = memoryview(self._chunk)[end:]
        self._wsize = len(view)
        self._wview = view
        return view

    def commit(self, n):
        """``n`` bytes were written at the start of the last ``writable()``
        view; that view is released."""
        size = self._wsize
        if self._wview is not None:
            # The transport may not keep writing through it (and a live
            # export would keep the bytearray from being compacted).
            self._wview.release()
            self._wview = None
        if n < 0 or n > size:
            raise ValueError(f"commit({n}) outside the writable region of {size} bytes")
        if size == 0:
            return
        self._wsize = 0
        if self._wbig:
            self._big_fill += n
        else:
            self._end += n
        # The next chunk's size follows the receive sizes: doubling while
        # receives fill what they are offered, decaying when they do not.
        if n >= size:
            hint = 2 * max(size, self._hint)
        else:
            hint = (self._hint + 2 * n) // 2
        self._hint = min(_MAX_CHUNK, max(_FIRST_CAP, hint))
        if n == 0 and not self._wbig:
            # A receive that found nothing (TLS: no whole record yet) into a
            # chunk set up for it: an idle connection keeps no receive memory.
            self._emptied()

    def feed(self, data):
        """Append received bytes (any bytes-like object); copies them."""
        with memoryview(data) as src:
            src = src.cast("B") if src.format != "B" or src.ndim != 1 else src
            pos = 0
            n = src.nbytes
            while pos < n:
                view = self.writable()
                take = min(len(view), n - pos)
                view[:take] = src[pos:pos + take]
                self.commit(take)
                pos += take

    # -- frames -------------------------------------------------------------
    def _head_size(self):
        """Validated payload size of the head frame, or -1 if its size
        prefix is not complete yet."""
        need = self._need
        if need >= 0:
            return need
        if self._end - self._start < 4:
            return -1
        need = _unpack_size(self._chunk, self._start)[0]
        if need < 0 or need > self._max_size:
            raise _invalid(need, self._max_size)
        self._need = need
        if need >= _DIRECT_MIN and self._end - self._start - 4 < need:
            self._start_big(need)
        return need

    def _take_big(self):
        # Complete: the decoder never writes into it again, hand it out.
        out = memoryview(self._big).toreadonly()
        self._big = None
        self._big_fill = 0
        self._need = -1
        return out

    def _base(self):
        # Frames are cut from one read-only view of the chunk: small ones
        # copied out of it, larger ones handed out as slices of it (from
        # the first such slice on, the decoder never writes at or before
        # them: _shared).
        view = self._view
        if view is None:
            view = self._view = memoryview(self._chunk).toreadonly()
        self._after_big = False
        return view

    def next_frame(self):
        """Return the next complete payload (``bytes`` below ``COPY_BELOW``,
        else a read-only memoryview), or None.

        Raises ``InvalidReceiveError`` when the next size prefix is negative
        or larger than ``max_size``.
        """
        need = self._head_size()
        if self._big is not None:
            if self._big_fill < need:
                return None
            return self._take_big()
        start = self._start
        if need < 0 or self._end - start - 4 < need:
            if need < 0:
                self._emptied()
            return None
        stop = start + 4 + need
        out = self._base()[start + 4:stop]
        if need < COPY_BELOW:
            out = out.tobytes()
        else:
            self._shared = True
        self._start = stop
        self._need = -1
        if stop == self._end and self._wview is None:
            # The last frame of the chunk (typically an authenticator's last
            # read): nobody may call again for a long time, so the chunk goes
            # now rather than on the next call.
            self._emptied()
        return out

    def frames(self):
        """Drain and return every complete payload (as ``next_frame``), in
        order.

        On an invalid size prefix, the frames decoded before it in this call
        are consumed and attached to the raised ``InvalidReceiveError`` as
        ``.frames`` (always set, possibly empty): the connection is to be
        closed, but what arrived intact before the bad prefix is not lost.
        """
        out = []
        append = out.append
        max_size = self._max_size
        while True:
            try:
                need = self._head_size()
            except InvalidReceiveError as exc:
                exc.frames = out
                raise
            if need < 0:
                self._emptied()
                return out
            if self._big is not None:
                if self._big_fill < need:
                    return out
                append(self._take_big())
                continue
            pos = self._start
            end = self._end
            if end - pos - 4 < need:
                return out
            base = self._base()
            chunk = self._chunk
            while True:
                start = pos + 4
                pos = start + need
                if need < COPY_BELOW:
                    append(base[start:pos].tobytes())
                else:
                    self._shared = True
                    append(base[start:pos])
                if end - pos < 4:
                    need = -1
                    break
                need = _unpack_size(chunk, pos)[0]
                if need < 0 or need > max_size:
                    self._start = pos
                    self._need = -1
                    exc = _invalid(need, max_size)
                    exc.frames = out
                    raise exc
                if need >= _DIRECT_MIN or end - pos - 4 < need:
                    break
            self._start = pos
            if need >= _DIRECT_MIN:
                # Let _head_size() validate it again and set up the direct
                # path if it is incomplete.
                self._need = -1
                continue
            self._need = need
            if need < 0:
                self._emptied()
            return out

    def __repr__(self):
        return (f"{type(self).__name__}(max_size={self._max_size}, "
                f"buffered={self.buffered})")
