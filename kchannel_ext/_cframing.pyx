# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, infer_types=True
"""Kafka size-prefixed framing, compiled twin of ``kchannel._framing_py``.

Same interface and behaviour as the pure-Python module (see its docstring);
the differences are internal: received bytes live in one malloc'ed buffer with
start/end offsets, and ``frames()`` walks it in a C loop, creating one
``bytes`` object per payload and nothing else.

Large frames (``_DIRECT_MIN`` and up) skip the buffer: once their size prefix
is accepted, the result ``bytes`` object is allocated at its final size (as
Kafka's NetworkReceive allocates its payload buffer) and received bytes are
copied straight into it, so each payload byte is copied once instead of twice.
The object is private to the decoder until it is returned complete.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from libc.string cimport memcpy, memmove

from kchannel.errors import InvalidReceiveError

__all__ = ["DEFAULT_MAX_SIZE", "encode_frame", "encode_frames", "FrameDecoder"]

# Kafka's socket.request.max.bytes default (100 MiB).
DEFAULT_MAX_SIZE = 104857600

cdef Py_ssize_t _MAX_PAYLOAD = 0x7FFFFFFF
# What an emptied buffer shrinks back to once it has grown past
# _SHRINK_ABOVE (one large frame must not pin its memory for the life of the
# connection).
cdef Py_ssize_t _INITIAL_CAP = 65536
# The first allocation: what the first feed needs, at least _FIRST_CAP.  A
# connection that sent a few bytes (thousands of them, from a peer that never
# authenticates) holds a few KiB, not _INITIAL_CAP.
cdef Py_ssize_t _FIRST_CAP = 4096
cdef Py_ssize_t _SHRINK_ABOVE = 1048576
cdef long long _DIRECT_MIN = 32768
# An emptied buffer no larger than this is freed (the next feed allocates
# again): an idle connection between requests, thousands of them on a server
# or a client, holds no receive buffer.  Buffers this small come from
# malloc's heap, so freeing and allocating again per receive is cheap; larger
# ones (mmap'ed) are kept, as freeing them would cost page faults per receive.
cdef Py_ssize_t _RELEASE_AT_MOST = 16384


cdef inline long long _read_size(const unsigned char *p) noexcept nogil:
    # 4-byte signed big-endian, as Java's ByteBuffer.getInt().
    cdef unsigned int u = ((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16)
                           | (<unsigned int>p[2] << 8) | <unsigned int>p[3])
    return <long long>(<int>u)


cdef inline void _write_size(unsigned char *p, Py_ssize_t n) noexcept nogil:
    p[0] = <unsigned char>((n >> 24) & 0xFF)
    p[1] = <unsigned char>((n >> 16) & 0xFF)
    p[2] = <unsigned char>((n >> 8) & 0xFF)
    p[3] = <unsigned char>(n & 0xFF)


cdef object _invalid(long long size, long long max_size):
    if size < 0:
        return InvalidReceiveError(f"Invalid receive (size = {size})")
    return InvalidReceiveError(f"Invalid receive (size = {size} larger than {max_size})")


def encode_frame(payload):
    """Return ``payload`` (any bytes-like) prefixed with its 4-byte size."""
    cdef Py_buffer view
    cdef object out
    cdef unsigned char *dst
    PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
    try:
        if view.len > _MAX_PAYLOAD:
            raise ValueError(f"frame payload too large ({view.len} bytes)")
        out = PyBytes_FromStringAndSize(NULL, view.len + 4)
        dst = <unsigned char *>PyBytes_AS_STRING(out)
        _write_size(dst, view.len)
        memcpy(dst + 4, view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return out


def encode_frames(payloads):
    """Return the concatenated frames of every payload in ``payloads``."""
    cdef Py_buffer view
    cdef Py_ssize_t total = 0
    cdef Py_ssize_t pos = 0
    cdef unsigned char *dst
    cdef object out
    if not isinstance(payloads, (list, tuple)):
        payloads = list(payloads)
    # First pass: sizes, so the result is allocated once.
    for payload in payloads:
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            if view.len > _MAX_PAYLOAD:
                raise ValueError(f"frame payload too large ({view.len} bytes)")
            total += 4 + view.len
        finally:
            PyBuffer_Release(&view)
    out = PyBytes_FromStringAndSize(NULL, total)
    dst = <unsigned char *>PyBytes_AS_STRING(out)
    for payload in payloads:
        PyObject_GetBuffer(payload, &view, PyBUF_SIMPLE)
        try:
            if pos + 4 + view.len > total:
                # A payload grew between the passes (mutable bytearray).
                raise ValueError("payload changed size while being encoded")
            _write_size(dst + pos, view.len)
            memcpy(dst + pos + 4, view.buf, view.len)
            pos += 4 + view.len
        finally:
            PyBuffer_Release(&view)
    if pos != total:
        raise ValueError("payload changed size while being encoded")
    return out


cdef class FrameDecoder:
    """Incremental decoder of Kafka size-prefixed frames.

    ``max_size`` may be changed at any time (SASL lowers it before
    authentication and restores it afterwards).  It applies to every frame
    whose size prefix has not been validated yet; a frame whose prefix was
    already accepted by an earlier ``next_frame()`` / ``frames()`` call keeps
    being received, as Kafka's ``NetworkReceive`` keeps its size once read.
    """

    cdef unsigned char *_buf
    cdef Py_ssize_t _cap
    cdef Py_ssize_t _start      # first unconsumed byte
    cdef Py_ssize_t _end        # one past the last received byte
    cdef long long _need        # validated payload size of the head frame, or -1
    cdef long long _max_size
    cdef object _big           # large head frame being filled in place, or None
    cdef Py_ssize_t _big_fill   # payload bytes of _big received so far

    def __cinit__(self, *args, **kwargs):
        self._big = None
        self._big_fill = 0
        self._buf = NULL
        self._cap = 0
        self._start = 0
        self._end = 0
        self._need = -1
        self._max_size = DEFAULT_MAX_SIZE

    def __init__(self, max_size=DEFAULT_MAX_SIZE):
        self.max_size = max_size

    def __dealloc__(self):
        if self._buf != NULL:
            PyMem_Free(self._buf)
            self._buf = NULL

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
        cdef Py_ssize_t pos = self._start
        cdef Py_ssize_t end = self._end
        cdef long long need = self._need
        if self._big is not None:
            if self._big_fill < need:
                return True
            need = -1
        while pos < end:
            if need < 0:
                if end - pos < 4:
                    return True
                need = _read_size(self._buf + pos)
                if need < 0:
                    return True
            if end - pos - 4 < need:
                return True
            pos += 4 + <Py_ssize_t>need
            need = -1
        return False

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        """Make room for ``extra`` more bytes after ``_end``."""
        cdef Py_ssize_t live = self._end - self._start
        cdef Py_ssize_t cap
        cdef unsigned char *nbuf
        if self._end + extra <= self._cap:
            return 0
        # Slide the live bytes to the front when that frees enough room and
        # moves no more than was consumed (keeps copying amortised O(1)).
        if self._start > 0 and live + extra <= self._cap and self._start >= live:
            memmove(self._buf, self._buf + self._start, live)
            self._start = 0
            self._end = live
            return 0
        cap = self._cap * 2 if self._cap else _FIRST_CAP
        if cap < live + extra:
            cap = live + extra
        if self._start > 0:
            memmove(self._buf, self._buf + self._start, live)
            self._start = 0
            self._end = live
        nbuf = <unsigned char *>PyMem_Realloc(self._buf, cap)
        if nbuf == NULL:
            raise MemoryError()
        self._buf = nbuf
        self._cap = cap
        return 0

    cdef void _reset_if_empty(self) noexcept:
        cdef unsigned char *nbuf
        if self._start != self._end:
            return
        self._start = 0
        self._end = 0
        if self._cap > _SHRINK_ABOVE:
            nbuf = <unsigned char *>PyMem_Realloc(self._buf, _INITIAL_CAP)
            if nbuf != NULL:
                self._buf = nbuf
                self._cap = _INITIAL_CAP

    def feed(self, data):
        """Append received bytes (any bytes-like object)."""
        cdef Py_buffer view
        cdef const unsigned char *src
        cdef Py_ssize_t n
        self._reset_if_empty()
        if type(data) is bytes:
            self._append(<const unsigned char *>PyBytes_AS_STRING(data), len(<bytes>data))
            return
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self._append(<const unsigned char *>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    cdef int _append(self, const unsigned char *src, Py_ssize_t n) except -1:
        cdef Py_ssize_t take
        if self._big is not None and self._big_fill < self._need:
            take = <Py_ssize_t>self._need - self._big_fill
            if take > n:
                take = n
            memcpy(<unsigned char *>PyBytes_AS_STRING(self._big) + self._big_fill, src, take)
            self._big_fill += take
            src += take
            n -= take
        if n:
            self._reserve(n)
            memcpy(self._buf + self._end, src, n)
            self._end += n
        return 0

    cdef inline long long _head_size(self) except -2:
        """Validated payload size of the head frame, or -1 if its size
        prefix is not complete yet."""
        cdef long long need = self._need
        cdef Py_ssize_t have
        if need >= 0:
            return need
        if self._end - self._start < 4:
            return -1
        need = _read_size(self._buf + self._start)
        if need < 0 or need > self._max_size:
            raise _invalid(need, self._max_size)
        have = self._end - self._start - 4
        if need >= _DIRECT_MIN and have < need:
            # Large and incomplete: receive the rest straight into the result.
            self._big = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>need)
            memcpy(<unsigned char *>PyBytes_AS_STRING(self._big),
                   self._buf + self._start + 4, have)
            self._big_fill = have
            self._start = self._end
        else:
            # Make room for all of the frame now rather than growing the
            # buffer step by step while it arrives.
            self._reserve(4 + <Py_ssize_t>need - (self._end - self._start))
        self._need = need
        return need

    cdef object _take_big(self):
        out = self._big
        self._big = None
        self._big_fill = 0
        self._need = -1
        return out

    cdef inline void _release_if_empty(self) noexcept:
        if self._start == self._end and self._big is None and self._buf != NULL \
                and self._cap <= _RELEASE_AT_MOST:
            PyMem_Free(self._buf)
            self._buf = NULL
            self._cap = 0
            self._start = 0
            self._end = 0

    def next_frame(self):
        """Return the next complete payload as ``bytes``, or None.

        Raises ``InvalidReceiveError`` when the next size prefix is negative
        or larger than ``max_size``.
        """
        cdef long long need = self._head_size()
        cdef object out
        if self._big is not None:
            if self._big_fill < need:
                return None
            return self._take_big()
        if need < 0 or self._end - self._start - 4 < need:
            if need < 0:
                self._release_if_empty()
            return None
        out = PyBytes_FromStringAndSize(<char *>self._buf + self._start + 4,
                                        <Py_ssize_t>need)
        self._start += 4 + <Py_ssize_t>need
        self._need = -1
        return out

    def frames(self):
        """Drain and return every complete payload, in order.

        On an invalid size prefix, the frames decoded before it in this call
        are consumed and attached to the raised ``InvalidReceiveError`` as
        ``.frames`` (always set, possibly empty): the connection is to be
        closed, but what arrived intact before the bad prefix is not lost.
        """
        cdef list out = []
        cdef long long need
        cdef long long max_size
        cdef Py_ssize_t pos, end
        cdef const unsigned char *buf
        while True:
            try:
                need = self._head_size()
            except InvalidReceiveError as exc:
                exc.frames = out
                raise
            if need < 0:
                self._release_if_empty()
                return out
            if self._big is not None:
                if self._big_fill < need:
                    return out
                out.append(self._take_big())
                continue
            # Small frames: walk the buffer in C.
            pos = self._start
            end = self._end
            buf = self._buf
            max_size = self._max_size
            while end - pos - 4 >= need:
                out.append(PyBytes_FromStringAndSize(<char *>buf + pos + 4,
                                                     <Py_ssize_t>need))
                pos += 4 + <Py_ssize_t>need
                if end - pos < 4:
                    need = -1
                    break
                need = _read_size(buf + pos)
                if need < 0 or need > max_size:
                    self._start = pos
                    self._need = -1
                    exc = _invalid(need, max_size)
                    exc.frames = out
                    raise exc
                if need >= _DIRECT_MIN:
                    # Let _head_size() set up the direct path for it.
                    need = -2
                    break
            self._start = pos
            if need == -2:
                self._need = -1
                continue
            self._need = need
            if need >= 0:
                # Prefix of a partial frame accepted: reserve its room.
                self._reserve(4 + <Py_ssize_t>need - (end - pos))
            return out

    def __repr__(self):
        return (f"{type(self).__name__}(max_size={self._max_size}, "
                f"buffered={self._end - self._start})")
