"""Kafka size-prefixed framing, pure-Python twin of ``kchannel._cframing``.

A Kafka frame is a 4-byte signed big-endian length followed by that many
bytes (Kafka's ``NetworkReceive`` / ``NetworkSend``).  The decoder is sans-I/O:
bytes go in with ``feed()``, whole payloads come out of ``next_frame()`` /
``frames()``.

The size prefix is attacker-controlled and arrives before authentication, so
it is checked against ``max_size`` as soon as its 4 bytes are in and before
anything of that size is allocated; a bad size raises ``InvalidReceiveError``
with Kafka's message, and the connection is expected to be closed.

Buffering: one ``bytearray`` plus a read offset.  Consumed bytes are not
deleted frame by frame (that would copy the tail each time, O(n^2) for many
small frames); the consumed prefix is dropped lazily, only once it is at least
half of the buffer, so each byte is moved at most a constant number of times.
"""
import struct

from .errors import InvalidReceiveError

__all__ = ["DEFAULT_MAX_SIZE", "encode_frame", "encode_frames", "FrameDecoder"]

# Kafka's socket.request.max.bytes default (100 MiB).
DEFAULT_MAX_SIZE = 104857600
_MAX_PAYLOAD = 0x7FFFFFFF

_SIZE = struct.Struct(">i")
_pack_size = _SIZE.pack
_unpack_size = _SIZE.unpack_from

# Do not bother compacting small buffers: the copy would cost more than the
# memory it frees.
_COMPACT_MIN = 65536

# From this payload size on, one memoryview copy beats bytearray slice + bytes
# copy, and batching frames into one bytes object stops paying off.
_BIG = 8192


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
    already accepted by an earlier ``next_frame()`` / ``frames()`` call keeps
    being received, as Kafka's ``NetworkReceive`` keeps its size once read.
    """

    __slots__ = ("_buf", "_pos", "_need", "_max_size")

    def __init__(self, max_size=DEFAULT_MAX_SIZE):
        self._buf = bytearray()
        self._pos = 0           # start of unconsumed data in _buf
        self._need = -1         # validated payload size of the head frame, or -1
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
        return len(self._buf) - self._pos

    def has_partial(self):
        """True when the buffer ends with an incomplete frame (or a size
        prefix that will be rejected).  Complete frames still waiting to be
        drained do not count."""
        buf = self._buf
        pos = self._pos
        end = len(buf)
        need = self._need
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

    def feed(self, data):
        """Append received bytes (any bytes-like object)."""
        buf = self._buf
        pos = self._pos
        if pos:
            if pos == len(buf):
                # Everything consumed: drop it all without copying anything.
                del buf[:]
                self._pos = 0
            elif pos >= _COMPACT_MIN and pos * 2 >= len(buf):
                del buf[:pos]
                self._pos = 0
        buf += data

    def _head_size(self, buf, pos, avail):
        """Validated payload size of the frame at ``pos``, or -1 if its size
        prefix is not complete yet."""
        need = self._need
        if need >= 0:
            return need
        if avail < 4:
            return -1
        need = _unpack_size(buf, pos)[0]
        if need < 0 or need > self._max_size:
            raise _invalid(need, self._max_size)
        self._need = need
        return need

    def next_frame(self):
        """Return the next complete payload as ``bytes``, or None.

        Raises ``InvalidReceiveError`` when the next size prefix is negative
        or larger than ``max_size``.
        """
        buf = self._buf
        pos = self._pos
        avail = len(buf) - pos
        need = self._head_size(buf, pos, avail)
        if need < 0 or avail - 4 < need:
            return None
        start = pos + 4
        end = start + need
        self._pos = end
        self._need = -1
        if need >= _BIG:
            with memoryview(buf) as view:
                return view[start:end].tobytes()
        return bytes(buf[start:end])

    def frames(self):
        """Drain and return every complete payload, in order.

        On an invalid size prefix, the frames decoded before it in this call
        are consumed and attached to the raised ``InvalidReceiveError`` as
        ``.frames`` (always set, possibly empty): the connection is to be
        closed, but what arrived intact before the bad prefix is not lost.
        """
        buf = self._buf
        pos = self._pos
        end = len(buf)
        try:
            need = self._head_size(buf, pos, end - pos)
        except InvalidReceiveError as exc:
            exc.frames = []
            raise
        if need < 0 or end - pos - 4 < need:
            return []
        if need >= _BIG:
            return self._frames_one_by_one()
        max_size = self._max_size
        out = []
        append = out.append
        # One conversion to bytes for the whole batch, then slicing bytes
        # (a single allocation per frame instead of bytearray slice + copy).
        base = pos
        data = bytes(buf[pos:])
        pos = 0
        end -= base
        while True:
            start = pos + 4
            stop = start + need
            append(data[start:stop])
            pos = stop
            if end - pos < 4:
                need = -1
                break
            need = _unpack_size(data, pos)[0]
            if need < 0 or need > max_size:
                self._pos = base + pos
                self._need = -1
                exc = _invalid(need, max_size)
                exc.frames = out
                raise exc
            if end - pos - 4 < need:
                break
        self._pos = base + pos
        self._need = need
        return out

    def _frames_one_by_one(self):
        out = []
        next_frame = self.next_frame
        while True:
            try:
                frame = next_frame()
            except InvalidReceiveError as exc:
                exc.frames = out
                raise
            if frame is None:
                return out
            out.append(frame)

    def __repr__(self):
        return (f"{type(self).__name__}(max_size={self._max_size}, "
                f"buffered={self.buffered})")
