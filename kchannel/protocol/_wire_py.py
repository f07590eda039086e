"""Kafka wire primitives, pure-Python twin of ``kchannel._cwire``.

Both twins expose exactly the same names with the same behaviour:

* ``Reader(buf, offset=0, end=None)`` reads primitives from ``buf`` starting at
  ``offset``; ``.pos`` is the next offset to read, ``.end`` the limit.
* ``Writer()`` appends primitives; ``.getvalue()`` returns the bytes.
* ``encode_unsigned_varint``, ``encode_varint``, ``encode_varlong``,
  ``size_of_unsigned_varint``.
* Request/response headers, the per-request work of every server and client
  (``kchannel.protocol.headers`` wraps them): ``parse_request_header(payload,
  flexible_from)`` -> ``(api_key, api_version, correlation_id, client_id,
  header_version, body_offset)``; ``encode_request_header(api_key,
  api_version, correlation_id, client_id, header_version)``;
  ``encode_response_header(correlation_id, header_version)``;
  ``decode_response_header(payload, header_version)`` -> ``(correlation_id,
  body_offset)``.  ``flexible_from`` maps an API key to the first version
  whose request header is v2 (``api_keys.REQUEST_FLEXIBLE_FROM``).

Readers are the attack surface of a server: every one of them raises
``kchannel.errors.InvalidRequestError`` on truncation or invalid lengths and
never ``IndexError``/``struct.error``.  Every length is checked against the
bytes that are really left *before* anything of that length is allocated, so a
hostile length such as 2**31-1 costs nothing.

Writers raise ``ValueError`` for values that cannot be represented (integer out
of range, string longer than 32767 UTF-8 bytes, null in a non-nullable field):
those are programming errors on our side, not peer errors.

Strings are decoded as Java's ``new String(bytes, UTF_8)`` does, replacing
malformed sequences instead of failing, so a client id Kafka accepts is
accepted here too.
"""
import struct
import uuid as _uuid
from operator import index as _index

from kchannel.errors import InvalidRequestError
from kchannel.protocol.api_keys import ApiKey

__all__ = [
    "Reader",
    "Writer",
    "encode_unsigned_varint",
    "encode_varint",
    "encode_varlong",
    "size_of_unsigned_varint",
    "parse_request_header",
    "encode_request_header",
    "encode_response_header",
    "decode_response_header",
    "frame_message",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

# Kafka refuses string lengths above Short.MAX_VALUE in both encodings.
_MAX_STRING = 0x7FFF

_UUID = _uuid.UUID
_SAFE_UNKNOWN = _uuid.SafeUUID.unknown
_object_new = object.__new__
_object_setattr = object.__setattr__
_int_from_bytes = int.from_bytes


def _underflow(need, pos, left):
    return InvalidRequestError(
        f"Buffer underflow: needed {need} bytes at offset {pos}, {left} remaining")


class Reader:
    """Bounds-checked cursor over an immutable buffer."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, offset=0, end=None):
        if not isinstance(buf, bytes):
            buf = bytes(buf)
        n = len(buf)
        if end is None or end > n:
            end = n
        if offset < 0 or offset > end:
            raise InvalidRequestError(f"Invalid offset {offset} for buffer of {end} bytes")
        self.buf = buf
        self.pos = offset
        self.end = end

    def remaining(self):
        return self.end - self.pos

    def _take(self, n):
        # Returns the start offset of n bytes and advances past them.
        p = self.pos
        if n > self.end - p:
            raise _underflow(n, p, self.end - p)
        self.pos = p + n
        return p

    # -- fixed-width integers --------------------------------------------
    def read_int8(self):
        return _I8.unpack_from(self.buf, self._take(1))[0]

    def read_int16(self):
        return _I16.unpack_from(self.buf, self._take(2))[0]

    def read_int32(self):
        return _I32.unpack_from(self.buf, self._take(4))[0]

    def read_int64(self):
        return _I64.unpack_from(self.buf, self._take(8))[0]

    def read_uint16(self):
        return _U16.unpack_from(self.buf, self._take(2))[0]

    def read_uint32(self):
        return _U32.unpack_from(self.buf, self._take(4))[0]

    def read_boolean(self):
        # Kafka: any non-zero byte is true.
        return self.buf[self._take(1)] != 0

    def read_float64(self):
        return _F64.unpack_from(self.buf, self._take(8))[0]

    def read_uuid(self):
        p = self._take(16)
        # What uuid.UUID(bytes=...) builds (its two slots set as its
        # __init__ sets them), without its argument parsing: half the time,
        # and a Metadata or Fetch response has one per topic.
        u = _object_new(_UUID)
        _object_setattr(u, "int", _int_from_bytes(self.buf[p:p + 16], "big"))
        _object_setattr(u, "is_safe", _SAFE_UNKNOWN)
        return u

    # -- variable-length integers -----------------------------------------
    def read_unsigned_varint(self):
        # At most 5 bytes and at most 32 bits, as Kafka's ByteUtils.
        buf = self.buf
        p = self.pos
        end = self.end
        value = 0
        shift = 0
        while True:
            if p >= end:
                raise _underflow(1, p, 0)
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 35:
                raise InvalidRequestError(
                    "Varint is too long, most significant bit in the 5th byte is set")
        if value > 0xFFFFFFFF:
            raise InvalidRequestError("Varint is too long, value does not fit in 32 bits")
        self.pos = p
        return value

    def read_varint(self):
        v = self.read_unsigned_varint()
        return (v >> 1) ^ -(v & 1)

    def read_varlong(self):
        buf = self.buf
        p = self.pos
        end = self.end
        value = 0
        shift = 0
        while True:
            if p >= end:
                raise _underflow(1, p, 0)
            b = buf[p]
            p += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= 70:
                raise InvalidRequestError(
                    "Varlong is too long, most significant bit in the 10th byte is set")
        if value > 0xFFFFFFFFFFFFFFFF:
            raise InvalidRequestError("Varlong is too long, value does not fit in 64 bits")
        self.pos = p
        return (value >> 1) ^ -(value & 1)

    # -- strings ------------------------------------------------------------
    def _str(self, n):
        p = self._take(n)
        return self.buf[p:p + n].decode("utf-8", "replace")

    def read_nullable_string(self):
        n = self.read_int16()
        if n < 0:
            if n == -1:
                return None
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    def read_string(self):
        n = self.read_int16()
        if n < 0:
            if n == -1:
                raise InvalidRequestError("Non-nullable string field was serialized as null")
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    def read_compact_nullable_string(self):
        n = self.read_unsigned_varint() - 1
        if n < 0:
            return None
        if n > _MAX_STRING:
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    def read_compact_string(self):
        n = self.read_unsigned_varint() - 1
        if n < 0:
            raise InvalidRequestError("Non-nullable string field was serialized as null")
        if n > _MAX_STRING:
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    # -- bytes ----------------------------------------------------------------
    def read_raw(self, n):
        if n < 0:
            raise InvalidRequestError(f"Invalid length {n}")
        p = self._take(n)
        return self.buf[p:p + n]

    def skip(self, n):
        if n < 0:
            raise InvalidRequestError(f"Invalid length {n}")
        self._take(n)

    def read_nullable_bytes(self):
        n = self.read_int32()
        if n < 0:
            if n == -1:
                return None
            raise InvalidRequestError(f"Bytes field had invalid length {n}")
        return self.read_raw(n)

    def read_bytes(self):
        n = self.read_int32()
        if n < 0:
            if n == -1:
                raise InvalidRequestError("Non-nullable bytes field was serialized as null")
            raise InvalidRequestError(f"Bytes field had invalid length {n}")
        return self.read_raw(n)

    def read_compact_nullable_bytes(self):
        n = self.read_unsigned_varint() - 1
        if n < 0:
            return None
        return self.read_raw(n)

    def read_compact_bytes(self):
        n = self.read_unsigned_varint() - 1
        if n < 0:
            raise InvalidRequestError("Non-nullable bytes field was serialized as null")
        return self.read_raw(n)

    # Records fields (a fetch response's batches, a produce request's) come
    # out as read-only views of the frame, not copies: they are the bulk of
    # those messages, and what reads them (record batches) takes a view.
    def read_nullable_records(self):
        n = self.read_int32()
        if n < 0:
            if n == -1:
                return None
            raise InvalidRequestError(f"Bytes field had invalid length {n}")
        p = self._take(n)
        return memoryview(self.buf)[p:p + n].toreadonly()

    def read_compact_nullable_records(self):
        n = self.read_unsigned_varint() - 1
        if n < 0:
            return None
        p = self._take(n)
        return memoryview(self.buf)[p:p + n].toreadonly()

    # -- arrays ---------------------------------------------------------------
    def read_array_length(self, min_element_size=1):
        """int32 element count; -1 means null.  The count is checked against
        the remaining bytes (each element needs at least min_element_size)."""
        n = self.read_int32()
        if n < 0:
            if n == -1:
                return -1
            raise InvalidRequestError(f"Array field had invalid length {n}")
        if n * min_element_size > self.end - self.pos:
            raise InvalidRequestError(
                f"Array length {n} exceeds the {self.end - self.pos} remaining bytes")
        return n

    def read_compact_array_length(self, min_element_size=1):
        """Unsigned varint count+1; 0 means null (returned as -1)."""
        n = self.read_unsigned_varint() - 1
        if n < 0:
            return -1
        if n * min_element_size > self.end - self.pos:
            raise InvalidRequestError(
                f"Array length {n} exceeds the {self.end - self.pos} remaining bytes")
        return n

    # -- tagged fields --------------------------------------------------------
    def read_tag_header(self):
        """(tag, size) of the next tagged field; size checked against the
        remaining bytes."""
        tag = self.read_unsigned_varint()
        size = self.read_unsigned_varint()
        if size > self.end - self.pos:
            raise _underflow(size, self.pos, self.end - self.pos)
        return tag, size

    def read_tagged_fields(self):
        """Every tagged field as a list of (tag, raw bytes)."""
        count = self.read_unsigned_varint()
        # Each tagged field takes at least two bytes (tag and size).
        if count * 2 > self.end - self.pos:
            raise InvalidRequestError(
                f"Tagged field count {count} exceeds the {self.end - self.pos} remaining bytes")
        out = []
        for _ in range(count):
            tag, size = self.read_tag_header()
            out.append((tag, self.read_raw(size)))
        return out


def _range_error(kind, value):
    return ValueError(f"{value!r} does not fit in {kind}")


def _int(v, lo, hi, kind):
    # Integers and objects with __index__ (bool, IntEnum); anything else, or an
    # out-of-range value, is a ValueError as in the compiled twin.
    if type(v) is not int:
        try:
            v = _index(v)
        except TypeError:
            raise _range_error(kind, v) from None
    if v < lo or v > hi:
        raise _range_error(kind, v)
    return v


class Writer:
    """Append-only encoder."""

    __slots__ = ("_buf",)

    def __init__(self):
        self._buf = bytearray()

    def getvalue(self):
        return bytes(self._buf)

    def __len__(self):
        return len(self._buf)

    def _pack(self, st, kind, value):
        try:
            self._buf += st.pack(value)
        except struct.error:
            raise _range_error(kind, value) from None

    def write_int8(self, v):
        self._pack(_I8, "int8", v)

    def write_int16(self, v):
        self._pack(_I16, "int16", v)

    def write_int32(self, v):
        self._pack(_I32, "int32", v)

    def write_int64(self, v):
        self._pack(_I64, "int64", v)

    def write_uint16(self, v):
        self._pack(_U16, "uint16", v)

    def write_uint32(self, v):
        self._pack(_U32, "uint32", v)

    def write_boolean(self, v):
        self._buf.append(1 if v else 0)

    def write_float64(self, v):
        self._pack(_F64, "float64", v)

    def write_uuid(self, v):
        self._buf += _uuid_bytes(v)

    def write_unsigned_varint(self, v):
        self._buf += encode_unsigned_varint(v)

    def write_varint(self, v):
        self._buf += encode_varint(v)

    def write_varlong(self, v):
        self._buf += encode_varlong(v)

    def write_raw(self, data):
        self._buf += data

    def _utf8(self, s):
        if not isinstance(s, str):
            raise ValueError(f"expected a string, got {type(s).__name__}")
        b = s.encode("utf-8")
        if len(b) > _MAX_STRING:
            raise ValueError(f"string of {len(b)} bytes is too long to be serialized")
        return b

    def write_string(self, s):
        if s is None:
            raise ValueError("null value for a non-nullable string")
        b = self._utf8(s)
        self._buf += _I16.pack(len(b))
        self._buf += b

    def write_nullable_string(self, s):
        if s is None:
            self._buf += b"\xff\xff"
            return
        self.write_string(s)

    def write_compact_string(self, s):
        if s is None:
            raise ValueError("null value for a non-nullable string")
        b = self._utf8(s)
        self._buf += encode_unsigned_varint(len(b) + 1)
        self._buf += b

    def write_compact_nullable_string(self, s):
        if s is None:
            self._buf.append(0)
            return
        self.write_compact_string(s)

    def write_bytes(self, b):
        if b is None:
            raise ValueError("null value for non-nullable bytes")
        b = _as_bytes(b)
        self._buf += _I32.pack(len(b))
        self._buf += b

    def write_nullable_bytes(self, b):
        if b is None:
            self._buf += b"\xff\xff\xff\xff"
            return
        self.write_bytes(b)

    def write_compact_bytes(self, b):
        if b is None:
            raise ValueError("null value for non-nullable bytes")
        b = _as_bytes(b)
        self._buf += encode_unsigned_varint(len(b) + 1)
        self._buf += b

    def write_compact_nullable_bytes(self, b):
        if b is None:
            self._buf.append(0)
            return
        self.write_compact_bytes(b)

    def write_array_length(self, n):
        """n elements, or -1 for null."""
        self._pack(_I32, "int32", n)

    def write_compact_array_length(self, n):
        """n elements, or -1 for null."""
        n = _int(n, -1, 0xFFFFFFFE, "compact array length")
        self._buf += encode_unsigned_varint(n + 1)

    def write_tagged_fields(self, fields):
        """fields: iterable of (tag, raw bytes), written in ascending tag order."""
        fields = sorted(fields, key=lambda f: f[0])
        self._buf += encode_unsigned_varint(len(fields))
        for tag, raw in fields:
            raw = _as_bytes(raw)
            self._buf += encode_unsigned_varint(tag)
            self._buf += encode_unsigned_varint(len(raw))
            self._buf += raw


def _as_bytes(b):
    if isinstance(b, bytes):
        return b
    if isinstance(b, (bytearray, memoryview)):
        return bytes(b)
    raise ValueError(f"expected bytes, got {type(b).__name__}")


def _uuid_bytes(v):
    if isinstance(v, _uuid.UUID):
        return v.bytes
    if isinstance(v, (bytes, bytearray, memoryview)) and len(v) == 16:
        return bytes(v)
    raise ValueError(f"expected a uuid.UUID or 16 bytes, got {v!r}")


def encode_unsigned_varint(v):
    v = _int(v, 0, 0xFFFFFFFF, "unsigned varint")
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_varint(v):
    v = _int(v, -0x80000000, 0x7FFFFFFF, "varint")
    return encode_unsigned_varint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def encode_varlong(v):
    v = _int(v, -0x8000000000000000, 0x7FFFFFFFFFFFFFFF, "varlong")
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def size_of_unsigned_varint(v):
    v = _int(v, 0, 0xFFFFFFFF, "unsigned varint")
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


# ---------------------------------------------------------------------------
# headers
# ---------------------------------------------------------------------------
_CONTROLLED_SHUTDOWN = int(ApiKey.CONTROLLED_SHUTDOWN)
_HDR = struct.Struct(">hhi")


def _skip_tagged_fields(payload, offset):
    r = Reader(payload, offset)
    r.read_tagged_fields()
    return r.pos


def parse_request_header(payload, flexible_from):
    """``(api_key, api_version, correlation_id, client_id, header_version,
    body_offset)`` of the request header at the start of ``payload``.

    ``client_id`` is None for a null client id, "" for header v0 (which has
    none).  Raises ``InvalidRequestError`` for a truncated or malformed
    header."""
    n = len(payload)
    if n < 8:
        raise InvalidRequestError(f"Request header truncated: {n} bytes")
    api_key, api_version, correlation_id = _HDR.unpack_from(payload, 0)
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return api_key, api_version, correlation_id, "", 0, 8
    if n < 10:
        raise InvalidRequestError(f"Request header truncated: {n} bytes")
    size = _I16.unpack_from(payload, 8)[0]
    off = 10
    if size < 0:
        if size != -1:
            raise InvalidRequestError(f"Invalid client id length {size}")
        client_id = None
    else:
        end = off + size
        if end > n:
            raise InvalidRequestError(
                f"Request header truncated: client id of {size} bytes, {n - off} remaining")
        # As Java's new String(bytes, UTF_8): malformed input is replaced.
        client_id = bytes(payload[off:end]).decode("utf-8", "replace")
        off = end
    flex = flexible_from.get(api_key)
    if flex is not None and api_version >= flex:
        if off >= n:
            raise InvalidRequestError("Request header truncated: no tagged fields")
        if payload[off] == 0:
            # The usual case: an empty tagged-field section, one zero byte.
            off += 1
        else:
            off = _skip_tagged_fields(payload, off)
        return api_key, api_version, correlation_id, client_id, 2, off
    return api_key, api_version, correlation_id, client_id, 1, off


def encode_request_header(api_key, api_version, correlation_id, client_id, header_version):
    """The request header bytes (``header_version`` 0, 1 or 2)."""
    try:
        head = _HDR.pack(api_key, api_version, correlation_id)
    except struct.error:
        # The same ValueError as the compiled twin (and every Writer).
        w = Writer()
        w.write_int16(api_key)
        w.write_int16(api_version)
        w.write_int32(correlation_id)
        head = w.getvalue()
    if header_version == 0:
        return head
    # The client id is a classic int16 string in every header version, so
    # that a server can read the header of a request version it does not know.
    w = Writer()
    w.write_raw(head)
    w.write_nullable_string(client_id)
    if header_version == 2:
        w.write_raw(b"\x00")
    return w.getvalue()


def encode_response_header(correlation_id, header_version):
    """The response header bytes (``header_version`` 0 or 1)."""
    try:
        head = _I32.pack(correlation_id)
    except struct.error:
        w = Writer()
        w.write_int32(correlation_id)
        head = w.getvalue()
    if header_version == 1:
        return head + b"\x00"
    return head


def frame_message(prefix, correlation_id, tail, data):
    """The whole frame of a request or response: its 4-byte size, then
    ``prefix`` (a request header's api key and version; empty for a
    response), the correlation id (int32), ``tail`` (the rest of the header)
    and ``data`` (the body).  Raises ValueError past a frame's 2 GiB."""
    n = len(prefix) + 4 + len(tail) + len(data)
    if n > 0x7FFFFFFF:
        raise ValueError(f"frame payload too large ({n} bytes)")
    return b"".join((n.to_bytes(4, "big"), prefix,
                     correlation_id.to_bytes(4, "big", signed=True), tail, data))


def decode_response_header(payload, header_version):
    """``(correlation_id, body_offset)`` of a response header."""
    if len(payload) < 4:
        raise InvalidRequestError(f"Response header truncated: {len(payload)} bytes")
    correlation_id = _I32.unpack_from(payload, 0)[0]
    if header_version == 1:
        if len(payload) > 4 and payload[4] == 0:
            return correlation_id, 5
        return correlation_id, _skip_tagged_fields(payload, 4)
    return correlation_id, 4
