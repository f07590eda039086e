# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kafka wire primitives, compiled twin of ``kchannel.protocol._wire_py``.

Same names, same behaviour, same exceptions as the pure twin (see its
docstring): readers raise ``InvalidRequestError`` on truncation or invalid
lengths and check every length against the bytes really left before
allocating; writers raise ``ValueError`` for unrepresentable values.

Memory safety rests on one invariant: ``0 <= _pos <= _end <= len(buf)``.
Every read goes through ``_take``, which checks the length against
``_end - _pos``; the ``pos``/``end`` setters refuse values that would break
the invariant.
"""
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize,
                                PyByteArray_Resize)
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.object cimport PyObject_GenericSetAttr

import uuid as _uuid
from operator import index as _index

from kchannel.errors import InvalidRequestError

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

cdef Py_ssize_t _MAX_STRING = 0x7FFF
cdef object _UUID = _uuid.UUID
cdef object _SAFE_UNKNOWN = _uuid.SafeUUID.unknown
# Spelled out at run time: the literal -2**63 makes C compilers warn.
cdef int64_t _I64_MIN = -0x7FFFFFFFFFFFFFFF
_I64_MIN -= 1


cdef object _underflow(object need, Py_ssize_t pos, Py_ssize_t left):
    return InvalidRequestError(
        f"Buffer underflow: needed {need} bytes at offset {pos}, {left} remaining")


cdef inline uint16_t _be16(const unsigned char* p) noexcept:
    return (<uint16_t>p[0] << 8) | p[1]


cdef inline uint32_t _be32(const unsigned char* p) noexcept:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
            | (<uint32_t>p[2] << 8) | p[3])


cdef inline void _store_be32(unsigned char* p, uint32_t v) noexcept:
    p[0] = v >> 24
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline uint64_t _be64(const unsigned char* p) noexcept:
    return (<uint64_t>_be32(p) << 32) | _be32(p + 4)


cdef class Reader:
    """Bounds-checked cursor over an immutable buffer.

    Reads ``bytes`` in place, and any other buffer too (received frames are
    read-only memoryviews of the receive memory): it holds a buffer view of
    it for its lifetime instead of copying it, so decoding a multi-megabyte
    fetch response allocates and copies nothing.  (The pure twin copies a
    non-``bytes`` buffer once.)  The buffer must not change while a Reader
    reads it; received frames never do."""

    cdef readonly object buf
    cdef const unsigned char* _p
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _end
    cdef Py_ssize_t _len
    cdef Py_buffer _view
    cdef bint _has_view

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False

    def __init__(self, buf, offset=0, end=None):
        cdef Py_ssize_t n
        if self._has_view:          # __init__ called twice
            PyBuffer_Release(&self._view)
            self._has_view = False
        if type(buf) is bytes:
            n = PyBytes_GET_SIZE(buf)
            self._p = <const unsigned char*>PyBytes_AS_STRING(buf)
        else:
            PyObject_GetBuffer(buf, &self._view, PyBUF_SIMPLE)
            self._has_view = True
            n = self._view.len
            self._p = <const unsigned char*>self._view.buf
        cdef Py_ssize_t e
        if end is None or end > n:
            e = n
        else:
            e = end
        if offset < 0 or offset > e:
            raise InvalidRequestError(f"Invalid offset {offset} for buffer of {e} bytes")
        self.buf = buf
        self._len = n
        self._pos = offset
        self._end = e

    @property
    def pos(self):
        return self._pos

    @pos.setter
    def pos(self, Py_ssize_t value):
        if value < 0 or value > self._end:
            raise ValueError(f"position {value} outside 0..{self._end}")
        self._pos = value

    @property
    def end(self):
        return self._end

    @end.setter
    def end(self, Py_ssize_t value):
        if value < self._pos or value > self._len:
            raise ValueError(f"end {value} outside {self._pos}..{self._len}")
        self._end = value

    def remaining(self):
        return self._end - self._pos

    cdef inline Py_ssize_t _take(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t p = self._pos
        if n > self._end - p:
            raise _underflow(n, p, self._end - p)
        self._pos = p + n
        return p

    # -- fixed-width integers --------------------------------------------
    def read_int8(self):
        return <int8_t>self._p[self._take(1)]

    def read_int16(self):
        return <int16_t>_be16(self._p + self._take(2))

    def read_int32(self):
        return <int32_t>_be32(self._p + self._take(4))

    def read_int64(self):
        return <int64_t>_be64(self._p + self._take(8))

    def read_uint16(self):
        return _be16(self._p + self._take(2))

    def read_uint32(self):
        return _be32(self._p + self._take(4))

    def read_boolean(self):
        return self._p[self._take(1)] != 0

    def read_float64(self):
        cdef uint64_t bits = _be64(self._p + self._take(8))
        cdef double d
        memcpy(&d, &bits, 8)
        return d

    def read_uuid(self):
        cdef const unsigned char* p = self._p + self._take(16)
        # What uuid.UUID(bytes=...) builds (its two slots set as its
        # __init__ sets them), without its argument parsing: a third of the
        # time, and a Metadata or Fetch response has one per topic.
        u = _UUID.__new__(_UUID)
        PyObject_GenericSetAttr(u, "int", (<object>_be64(p) << 64) | <object>_be64(p + 8))
        PyObject_GenericSetAttr(u, "is_safe", _SAFE_UNKNOWN)
        return u

    # -- variable-length integers -----------------------------------------
    cdef uint64_t _uvarint(self) except? 0xFFFFFFFFFFFFFFFF:
        cdef Py_ssize_t p = self._pos
        cdef Py_ssize_t end = self._end
        cdef uint64_t value = 0
        cdef int shift = 0
        cdef uint8_t b
        while True:
            if p >= end:
                raise _underflow(1, p, 0)
            b = self._p[p]
            p += 1
            value |= (<uint64_t>(b & 0x7F)) << shift
            if not (b & 0x80):
                break
            shift += 7
            if shift >= 35:
                raise InvalidRequestError(
                    "Varint is too long, most significant bit in the 5th byte is set")
        if value > 0xFFFFFFFF:
            raise InvalidRequestError("Varint is too long, value does not fit in 32 bits")
        self._pos = p
        return value

    def read_unsigned_varint(self):
        return self._uvarint()

    def read_varint(self):
        cdef uint64_t v = self._uvarint()
        return <int64_t>(v >> 1) ^ -<int64_t>(v & 1)

    def read_varlong(self):
        cdef Py_ssize_t p = self._pos
        cdef Py_ssize_t end = self._end
        cdef uint64_t value = 0
        cdef int shift = 0
        cdef uint8_t b
        while True:
            if p >= end:
                raise _underflow(1, p, 0)
            b = self._p[p]
            p += 1
            if shift == 63 and (b & 0x7E):
                # Bits beyond the 64th: the pure twin reports the same.
                if b & 0x80:
                    raise InvalidRequestError(
                        "Varlong is too long, most significant bit in the 10th byte is set")
                raise InvalidRequestError("Varlong is too long, value does not fit in 64 bits")
            value |= (<uint64_t>(b & 0x7F)) << shift
            if not (b & 0x80):
                break
            shift += 7
            if shift >= 70:
                raise InvalidRequestError(
                    "Varlong is too long, most significant bit in the 10th byte is set")
        self._pos = p
        return <int64_t>(value >> 1) ^ -<int64_t>(value & 1)

    # -- strings ------------------------------------------------------------
    cdef inline object _str(self, Py_ssize_t n):
        cdef Py_ssize_t p = self._take(n)
        return PyUnicode_DecodeUTF8(<const char*>self._p + p, n, "replace")

    def read_nullable_string(self):
        cdef int16_t n = <int16_t>_be16(self._p + self._take(2))
        if n < 0:
            if n == -1:
                return None
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    def read_string(self):
        cdef int16_t n = <int16_t>_be16(self._p + self._take(2))
        if n < 0:
            if n == -1:
                raise InvalidRequestError("Non-nullable string field was serialized as null")
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    def read_compact_nullable_string(self):
        cdef int64_t n = <int64_t>self._uvarint() - 1
        if n < 0:
            return None
        if n > _MAX_STRING:
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    def read_compact_string(self):
        cdef int64_t n = <int64_t>self._uvarint() - 1
        if n < 0:
            raise InvalidRequestError("Non-nullable string field was serialized as null")
        if n > _MAX_STRING:
            raise InvalidRequestError(f"String field had invalid length {n}")
        return self._str(n)

    # -- bytes ----------------------------------------------------------------
    cdef inline object _raw(self, int64_t n):
        if n < 0:
            raise InvalidRequestError(f"Invalid length {n}")
        cdef Py_ssize_t p = self._take(n)
        return PyBytes_FromStringAndSize(<const char*>self._p + p, n)

    def read_raw(self, n):
        # Compared as Python ints first: any n, however large, fails closed.
        if n < 0:
            raise InvalidRequestError(f"Invalid length {n}")
        if n > self._end - self._pos:
            raise _underflow(n, self._pos, self._end - self._pos)
        return self._raw(n)

    def skip(self, n):
        if n < 0:
            raise InvalidRequestError(f"Invalid length {n}")
        if n > self._end - self._pos:
            raise _underflow(n, self._pos, self._end - self._pos)
        self._take(n)

    def read_nullable_bytes(self):
        cdef int32_t n = <int32_t>_be32(self._p + self._take(4))
        if n < 0:
            if n == -1:
                return None
            raise InvalidRequestError(f"Bytes field had invalid length {n}")
        return self._raw(n)

    def read_bytes(self):
        cdef int32_t n = <int32_t>_be32(self._p + self._take(4))
        if n < 0:
            if n == -1:
                raise InvalidRequestError("Non-nullable bytes field was serialized as null")
            raise InvalidRequestError(f"Bytes field had invalid length {n}")
        return self._raw(n)

    def read_compact_nullable_bytes(self):
        cdef int64_t n = <int64_t>self._uvarint() - 1
        if n < 0:
            return None
        return self._raw(n)

    def read_compact_bytes(self):
        cdef int64_t n = <int64_t>self._uvarint() - 1
        if n < 0:
            raise InvalidRequestError("Non-nullable bytes field was serialized as null")
        return self._raw(n)

    # Records fields: read-only views of the frame (see the pure twin).
    def read_nullable_records(self):
        cdef int32_t n = <int32_t>_be32(self._p + self._take(4))
        cdef Py_ssize_t p
        if n < 0:
            if n == -1:
                return None
            raise InvalidRequestError(f"Bytes field had invalid length {n}")
        p = self._take(n)
        return memoryview(self.buf)[p:p + n]

    def read_compact_nullable_records(self):
        cdef int64_t n = <int64_t>self._uvarint() - 1
        cdef Py_ssize_t p
        if n < 0:
            return None
        p = self._take(n)
        return memoryview(self.buf)[p:p + n]

    # -- arrays ---------------------------------------------------------------
    def read_array_length(self, int64_t min_element_size=1):
        cdef int32_t n = <int32_t>_be32(self._p + self._take(4))
        if n < 0:
            if n == -1:
                return -1
            raise InvalidRequestError(f"Array field had invalid length {n}")
        if <int64_t>n * min_element_size > self._end - self._pos:
            raise InvalidRequestError(
                f"Array length {n} exceeds the {self._end - self._pos} remaining bytes")
        return n

    def read_compact_array_length(self, int64_t min_element_size=1):
        cdef int64_t n = <int64_t>self._uvarint() - 1
        if n < 0:
            return -1
        if n * min_element_size > self._end - self._pos:
            raise InvalidRequestError(
                f"Array length {n} exceeds the {self._end - self._pos} remaining bytes")
        return n

    # -- tagged fields --------------------------------------------------------
    def read_tag_header(self):
        cdef uint64_t tag = self._uvarint()
        cdef uint64_t size = self._uvarint()
        if <int64_t>size > self._end - self._pos:
            raise _underflow(size, self._pos, self._end - self._pos)
        return tag, size

    def read_tagged_fields(self):
        cdef uint64_t count = self._uvarint()
        cdef uint64_t i, tag, size
        if <int64_t>count * 2 > self._end - self._pos:
            raise InvalidRequestError(
                f"Tagged field count {count} exceeds the {self._end - self._pos} remaining bytes")
        out = []
        for i in range(count):
            tag = self._uvarint()
            size = self._uvarint()
            if <int64_t>size > self._end - self._pos:
                raise _underflow(size, self._pos, self._end - self._pos)
            out.append((tag, self._raw(size)))
        return out


cdef object _range_error(str kind, object value):
    return ValueError(f"{value!r} does not fit in {kind}")


cdef int64_t _as_int(object v, int64_t lo, int64_t hi, str kind) except? -1:
    cdef int64_t x
    if type(v) is not int:
        try:
            v = _index(v)
        except TypeError:
            raise _range_error(kind, v) from None
    try:
        x = v
    except OverflowError:
        raise _range_error(kind, v) from None
    if x < lo or x > hi:
        raise _range_error(kind, v)
    return x


cdef class Writer:
    """Append-only encoder."""

    cdef bytearray _buf
    cdef Py_ssize_t _len

    def __init__(self):
        # The C call, not bytearray(64): a Writer is built per message.
        self._buf = PyByteArray_FromStringAndSize(NULL, 64)
        self._len = 0

    def getvalue(self):
        return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self._buf), self._len)

    def __len__(self):
        return self._len

    cdef inline unsigned char* _reserve(self, Py_ssize_t n) except NULL:
        cdef Py_ssize_t cap = len(self._buf)
        cdef Py_ssize_t need = self._len + n
        if need > cap:
            while cap < need:
                cap *= 2
            PyByteArray_Resize(self._buf, cap)
        cdef unsigned char* p = <unsigned char*>PyByteArray_AS_STRING(self._buf) + self._len
        self._len = need
        return p

    cdef inline void _put16(self, uint16_t v) except *:
        cdef unsigned char* p = self._reserve(2)
        p[0] = v >> 8
        p[1] = v & 0xFF

    cdef inline void _put32(self, uint32_t v) except *:
        _store_be32(self._reserve(4), v)

    cdef inline void _put64(self, uint64_t v) except *:
        self._put32(<uint32_t>(v >> 32))
        self._put32(<uint32_t>(v & 0xFFFFFFFF))

    cdef inline void _put_uvarint(self, uint64_t v) except *:
        cdef unsigned char tmp[10]
        cdef int n = 0
        while v >= 0x80:
            tmp[n] = (v & 0x7F) | 0x80
            v >>= 7
            n += 1
        tmp[n] = <unsigned char>v
        n += 1
        memcpy(self._reserve(n), tmp, n)

    cdef inline void _put_raw(self, const char* data, Py_ssize_t n) except *:
        if n:
            memcpy(self._reserve(n), data, n)

    def write_int8(self, v):
        self._reserve(1)[0] = <uint8_t><int8_t>_as_int(v, -0x80, 0x7F, "int8")

    def write_int16(self, v):
        self._put16(<uint16_t><int16_t>_as_int(v, -0x8000, 0x7FFF, "int16"))

    def write_int32(self, v):
        self._put32(<uint32_t><int32_t>_as_int(v, -0x80000000, 0x7FFFFFFF, "int32"))

    def write_int64(self, v):
        self._put64(<uint64_t>_as_int(v, _I64_MIN, 0x7FFFFFFFFFFFFFFF, "int64"))

    def write_uint16(self, v):
        self._put16(<uint16_t>_as_int(v, 0, 0xFFFF, "uint16"))

    def write_uint32(self, v):
        self._put32(<uint32_t>_as_int(v, 0, 0xFFFFFFFF, "uint32"))

    def write_boolean(self, v):
        self._reserve(1)[0] = 1 if v else 0

    def write_float64(self, v):
        cdef double d
        cdef uint64_t bits
        try:
            d = v
        except TypeError:
            raise _range_error("float64", v) from None
        memcpy(&bits, &d, 8)
        self._put64(bits)

    def write_uuid(self, v):
        cdef bytes b = _uuid_bytes(v)
        self._put_raw(PyBytes_AS_STRING(b), 16)

    def write_unsigned_varint(self, v):
        self._put_uvarint(<uint64_t>_as_int(v, 0, 0xFFFFFFFF, "unsigned varint"))

    def write_varint(self, v):
        cdef int64_t x = _as_int(v, -0x80000000, 0x7FFFFFFF, "varint")
        self._put_uvarint(<uint32_t>((x << 1) ^ (x >> 31)))

    def write_varlong(self, v):
        cdef int64_t x = _as_int(v, _I64_MIN, 0x7FFFFFFFFFFFFFFF, "varlong")
        self._put_uvarint((<uint64_t>x << 1) ^ <uint64_t>(x >> 63))

    def write_raw(self, data):
        if type(data) is bytes:
            self._put_raw(PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
            return
        b = bytes(data)
        self._put_raw(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    cdef bytes _utf8(self, s):
        if not isinstance(s, str):
            raise ValueError(f"expected a string, got {type(s).__name__}")
        cdef bytes b = (<str>s).encode("utf-8")
        if PyBytes_GET_SIZE(b) > _MAX_STRING:
            raise ValueError(f"string of {len(b)} bytes is too long to be serialized")
        return b

    def write_string(self, s):
        if s is None:
            raise ValueError("null value for a non-nullable string")
        cdef bytes b = self._utf8(s)
        self._put16(<uint16_t>PyBytes_GET_SIZE(b))
        self._put_raw(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    def write_nullable_string(self, s):
        if s is None:
            self._put16(0xFFFF)
            return
        self.write_string(s)

    def write_compact_string(self, s):
        if s is None:
            raise ValueError("null value for a non-nullable string")
        cdef bytes b = self._utf8(s)
        self._put_uvarint(PyBytes_GET_SIZE(b) + 1)
        self._put_raw(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))

    def write_compact_nullable_string(self, s):
        if s is None:
            self._reserve(1)[0] = 0
            return
        self.write_compact_string(s)

    def write_bytes(self, b):
        if b is None:
            raise ValueError("null value for non-nullable bytes")
        cdef bytes data = _as_bytes(b)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        if n > 0x7FFFFFFF:
            raise _range_error("int32", n)
        self._put32(<uint32_t>n)
        self._put_raw(PyBytes_AS_STRING(data), n)

    def write_nullable_bytes(self, b):
        if b is None:
            self._put32(0xFFFFFFFF)
            return
        self.write_bytes(b)

    def write_compact_bytes(self, b):
        if b is None:
            raise ValueError("null value for non-nullable bytes")
        cdef bytes data = _as_bytes(b)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        if n + 1 > 0xFFFFFFFF:
            raise _range_error("unsigned varint", n + 1)
        self._put_uvarint(n + 1)
        self._put_raw(PyBytes_AS_STRING(data), n)

    def write_compact_nullable_bytes(self, b):
        if b is None:
            self._reserve(1)[0] = 0
            return
        self.write_compact_bytes(b)

    def write_array_length(self, n):
        self._put32(<uint32_t><int32_t>_as_int(n, -0x80000000, 0x7FFFFFFF, "int32"))

    def write_compact_array_length(self, n):
        cdef int64_t x = _as_int(n, -1, 0xFFFFFFFE, "compact array length")
        self._put_uvarint(<uint64_t>(x + 1))

    def write_tagged_fields(self, fields):
        fields = sorted(fields, key=_first)
        self._put_uvarint(<uint64_t>_as_int(len(fields), 0, 0xFFFFFFFF, "unsigned varint"))
        cdef bytes raw
        for tag, data in fields:
            raw = _as_bytes(data)
            self._put_uvarint(<uint64_t>_as_int(tag, 0, 0xFFFFFFFF, "unsigned varint"))
            self._put_uvarint(<uint64_t>_as_int(len(raw), 0, 0xFFFFFFFF, "unsigned varint"))
            self._put_raw(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw))


def _first(item):
    return item[0]


cdef bytes _as_bytes(object b):
    if type(b) is bytes:
        return <bytes>b
    if isinstance(b, (bytes, bytearray, memoryview)):
        return bytes(b)
    raise ValueError(f"expected bytes, got {type(b).__name__}")


cdef bytes _uuid_bytes(object v):
    if isinstance(v, _uuid.UUID):
        return v.bytes
    if isinstance(v, (bytes, bytearray, memoryview)) and len(v) == 16:
        return bytes(v)
    raise ValueError(f"expected a uuid.UUID or 16 bytes, got {v!r}")


cdef bytes _uvarint_bytes(uint64_t v):
    cdef unsigned char tmp[10]
    cdef int n = 0
    while v >= 0x80:
        tmp[n] = (v & 0x7F) | 0x80
        v >>= 7
        n += 1
    tmp[n] = <unsigned char>v
    n += 1
    return PyBytes_FromStringAndSize(<const char*>tmp, n)


def encode_unsigned_varint(v):
    return _uvarint_bytes(<uint64_t>_as_int(v, 0, 0xFFFFFFFF, "unsigned varint"))


def encode_varint(v):
    cdef int64_t x = _as_int(v, -0x80000000, 0x7FFFFFFF, "varint")
    return _uvarint_bytes(<uint32_t>((x << 1) ^ (x >> 31)))


def encode_varlong(v):
    cdef int64_t x = _as_int(v, _I64_MIN, 0x7FFFFFFFFFFFFFFF, "varlong")
    return _uvarint_bytes((<uint64_t>x << 1) ^ <uint64_t>(x >> 63))


def size_of_unsigned_varint(v):
    cdef uint64_t x = <uint64_t>_as_int(v, 0, 0xFFFFFFFF, "unsigned varint")
    cdef int n = 1
    while x >= 0x80:
        x >>= 7
        n += 1
    return n


# ---------------------------------------------------------------------------
# headers (same results and messages as the pure twin's)
# ---------------------------------------------------------------------------
# ApiKey.CONTROLLED_SHUTDOWN: importing kchannel.protocol here would be
# circular (the protocol package loads this twin while it imports).
cdef int _CONTROLLED_SHUTDOWN = 7


cdef Py_ssize_t _skip_tagged_fields(object payload, Py_ssize_t off) except -1:
    cdef Reader r = Reader(payload, off)
    r.read_tagged_fields()
    return r.pos


def parse_request_header(payload, flexible_from):
    """``(api_key, api_version, correlation_id, client_id, header_version,
    body_offset)`` of the request header at the start of ``payload``."""
    cdef Py_buffer view
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        return _parse_request_header(<const unsigned char*>view.buf, view.len, payload,
                                     flexible_from)
    finally:
        PyBuffer_Release(&view)


cdef tuple _parse_request_header(const unsigned char* p, Py_ssize_t n, object payload,
                                 object flexible_from):
    cdef int api_key, api_version, size, hv
    cdef int32_t correlation_id
    cdef Py_ssize_t off, end
    if n < 8:
        raise InvalidRequestError(f"Request header truncated: {n} bytes")
    api_key = <int16_t>_be16(p)
    api_version = <int16_t>_be16(p + 2)
    correlation_id = <int32_t>_be32(p + 4)
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return (api_key, api_version, correlation_id, "", 0, 8)
    if n < 10:
        raise InvalidRequestError(f"Request header truncated: {n} bytes")
    size = <int16_t>_be16(p + 8)
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
        client_id = PyUnicode_DecodeUTF8(<const char*>(p + off), size, "replace")
        off = end
    flex = flexible_from.get(api_key)
    if flex is not None and api_version >= flex:
        if off >= n:
            raise InvalidRequestError("Request header truncated: no tagged fields")
        if p[off] == 0:
            off += 1
        else:
            off = _skip_tagged_fields(payload, off)
        hv = 2
    else:
        hv = 1
    return (api_key, api_version, correlation_id, client_id, hv, off)


def encode_request_header(api_key, api_version, correlation_id, client_id, header_version):
    """The request header bytes (``header_version`` 0, 1 or 2)."""
    cdef Writer w = Writer()
    w._put16(<uint16_t><int16_t>_as_int(api_key, -0x8000, 0x7FFF, "int16"))
    w._put16(<uint16_t><int16_t>_as_int(api_version, -0x8000, 0x7FFF, "int16"))
    w._put32(<uint32_t><int32_t>_as_int(correlation_id, -0x80000000, 0x7FFFFFFF, "int32"))
    if header_version != 0:
        # A classic int16 string in every header version, so that a server
        # can read the header of a request version it does not know.
        w.write_nullable_string(client_id)
        if header_version == 2:
            w._reserve(1)[0] = 0
    return w.getvalue()


def encode_response_header(correlation_id, header_version):
    """The response header bytes (``header_version`` 0 or 1)."""
    cdef unsigned char tmp[5]
    cdef uint32_t c = <uint32_t><int32_t>_as_int(correlation_id, -0x80000000, 0x7FFFFFFF,
                                                 "int32")
    _store_be32(tmp, c)
    tmp[4] = 0
    return PyBytes_FromStringAndSize(<const char*>tmp, 5 if header_version == 1 else 4)


def frame_message(bytes prefix not None, correlation_id, bytes tail not None,
                  bytes data not None):
    """The whole frame of a request or response: its 4-byte size, then
    ``prefix`` (a request header's api key and version; empty for a
    response), the correlation id (int32), ``tail`` (the rest of the header)
    and ``data`` (the body), made in one allocation (the pure twin's join of
    two ``int.to_bytes`` was most of a request's or response's framing).
    Raises ValueError past a frame's 2 GiB."""
    cdef Py_ssize_t lp = PyBytes_GET_SIZE(prefix)
    cdef Py_ssize_t lt = PyBytes_GET_SIZE(tail)
    cdef Py_ssize_t ld = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t n = lp + 4 + lt + ld
    if n > 0x7FFFFFFF:
        raise ValueError(f"frame payload too large ({n} bytes)")
    cdef uint32_t c = <uint32_t><int32_t>_as_int(correlation_id, -0x80000000, 0x7FFFFFFF,
                                                 "int32")
    out = PyBytes_FromStringAndSize(NULL, n + 4)
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
    _store_be32(p, <uint32_t>n)
    p += 4
    if lp:
        memcpy(p, PyBytes_AS_STRING(prefix), lp)
        p += lp
    _store_be32(p, c)
    p += 4
    if lt:
        memcpy(p, PyBytes_AS_STRING(tail), lt)
        p += lt
    if ld:
        memcpy(p, PyBytes_AS_STRING(data), ld)
    return out


def decode_response_header(payload, header_version):
    """``(correlation_id, body_offset)`` of a response header."""
    cdef Py_buffer view
    cdef int32_t correlation_id
    cdef Py_ssize_t n
    cdef const unsigned char* p
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        p = <const unsigned char*>view.buf
        if n < 4:
            raise InvalidRequestError(f"Response header truncated: {n} bytes")
        correlation_id = <int32_t>_be32(p)
        if header_version == 1:
            if n > 4 and p[4] == 0:
                return (correlation_id, 5)
            return (correlation_id, _skip_tagged_fields(payload, 4))
        return (correlation_id, 4)
    finally:
        PyBuffer_Release(&view)
