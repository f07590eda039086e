# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, infer_types=True
"""Kafka size-prefixed framing, compiled twin of ``kchannel._framing_py``.

Same interface and behaviour as the pure-Python module, whose docstring
holds the theory of operation: the transport receives straight into the
decoder's memory (``writable()`` / ``commit(n)``) and complete frames are
handed out as read-only memoryview slices of it, never copied, except
frames shorter than ``COPY_BELOW`` bytes, which are ``bytes`` copies.  The
differences are internal: chunks are ``_Chunk`` objects (malloc'ed memory
that exports itself read-only only), ``frames()`` walks a chunk in a C loop,
and ``feed()`` copies with memcpy.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.memoryview cimport PyMemoryView_FromObject
from libc.string cimport memcpy, memmove

from kchannel.errors import InvalidReceiveError

__all__ = ["DEFAULT_MAX_SIZE", "COPY_BELOW", "encode_frame", "encode_frames", "FrameDecoder"]

# Kafka's socket.request.max.bytes default (100 MiB).
DEFAULT_MAX_SIZE = 104857600

cdef Py_ssize_t _MAX_PAYLOAD = 0x7FFFFFFF
# Chunk sizes: see the pure twin (same constants, same meaning).
cdef Py_ssize_t _FIRST_CAP = 4096
cdef Py_ssize_t _MAX_CHUNK = 262144
cdef Py_ssize_t _MIN_REGION = 4096
cdef long long _DIRECT_MIN = 32768
cdef Py_ssize_t _RELEASE_AT_MOST = 16384
cdef Py_ssize_t _AFTER_BIG_REGION = 16384
# Frames shorter than this are handed out as bytes copies (see the pure twin).
COPY_BELOW = 2048
cdef Py_ssize_t _COPY_BELOW = COPY_BELOW


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


# Freed chunks of exactly _MAX_CHUNK bytes are kept for reuse, up to
# _POOL_MAX of them per process (at most 2 MiB): a bulk receiver goes
# through one such chunk per 256 KiB, and handing each back to malloc makes
# glibc return it to the kernel (it is above the mmap / trim thresholds), so
# the next one costs 64 page faults.  Only touched with the GIL held
# (__cinit__ / __dealloc__), so no lock.
DEF _POOL_MAX = 8
cdef unsigned char *_pool[_POOL_MAX]
cdef int _pool_n = 0

# The same for the buffers of large frames (received into memory of their
# own, sized to the frame; see _start_big): a bulk receiver of 1 MiB frames
# frees and allocates one per frame, and glibc sometimes gives each back to
# the kernel (trim and mmap thresholds move with what was freed before), so
# that every frame then costs 256 page faults -- about a fifth of the CPU of
# a 1 MiB PLAINTEXT transfer in the runs where it happened.  _BIG_SLOTS
# freed buffers are kept, each at most _BIG_POOL_MAX bytes, and one is
# reused for a frame of at least 3/4 of its size (an exporter hands out
# exactly the frame's bytes, all of them received before the frame is
# handed out, so nothing a buffer held before can be seen).
DEF _BIG_SLOTS = 2
cdef Py_ssize_t _BIG_POOL_MAX = 16 * 1048576
cdef unsigned char *_big_pool[_BIG_SLOTS]
cdef Py_ssize_t _big_pool_size[_BIG_SLOTS]


cdef unsigned char *_big_take(Py_ssize_t need, Py_ssize_t *size):
    """A pooled buffer of at least ``need`` bytes (its size in ``size``), or NULL."""
    cdef int i
    cdef unsigned char *buf
    for i in range(_BIG_SLOTS):
        if (_big_pool[i] != NULL and _big_pool_size[i] >= need
                and need >= _big_pool_size[i] - _big_pool_size[i] // 4):
            buf = _big_pool[i]
            size[0] = _big_pool_size[i]
            _big_pool[i] = NULL
            _big_pool_size[i] = 0
            return buf
    return NULL


cdef void _big_give(unsigned char *buf, Py_ssize_t size):
    """Keep ``buf`` for reuse (replacing the smallest pooled one when the
    slots are full) or free it."""
    cdef int i, smallest = 0
    if size > _BIG_POOL_MAX:
        PyMem_Free(buf)
        return
    for i in range(_BIG_SLOTS):
        if _big_pool[i] == NULL:
            _big_pool[i] = buf
            _big_pool_size[i] = size
            return
        if _big_pool_size[i] < _big_pool_size[smallest]:
            smallest = i
    if _big_pool_size[smallest] < size:
        PyMem_Free(_big_pool[smallest])
        _big_pool[smallest] = buf
        _big_pool_size[smallest] = size
    else:
        PyMem_Free(buf)


cdef class _Chunk:
    """Receive memory: ``cap`` malloc'ed bytes that live as long as the
    decoder or any memoryview handed out of them.

    The buffer protocol exports it read-only only (a writable request raises
    BufferError): consumers, and anyone reaching it through a slice's
    ``.obj``, can never write into it.  Only the decoder writes, through raw
    pointers or a ``_Region`` of its not-yet-handed-out part.  No one else
    sees the chunk: frames are exported by ``_Frame`` objects covering their
    own bytes only, so bytes of the chunk outside a frame (other frames,
    what malloc or the pool held before) are out of every consumer's reach.
    """
    cdef unsigned char *buf
    cdef Py_ssize_t cap         # the bytes exported (and used)
    cdef Py_ssize_t alloc       # the bytes allocated (a pooled buffer may be larger)

    def __cinit__(self, Py_ssize_t cap):
        global _pool_n
        self.alloc = cap
        if cap == _MAX_CHUNK and _pool_n > 0:
            _pool_n -= 1
            self.buf = _pool[_pool_n]
        else:
            self.buf = NULL
            if cap > _MAX_CHUNK:
                self.buf = _big_take(cap, &self.alloc)
            if self.buf == NULL:
                self.alloc = cap
                self.buf = <unsigned char *>PyMem_Malloc(cap if cap > 0 else 1)
                if self.buf == NULL:
                    raise MemoryError()
        self.cap = cap

    def __dealloc__(self):
        global _pool_n
        if self.buf == NULL:
            return
        if self.cap == _MAX_CHUNK and _pool_n < _POOL_MAX:
            _pool[_pool_n] = self.buf
            _pool_n += 1
        elif self.alloc > _MAX_CHUNK:
            _big_give(self.buf, self.alloc)
        else:
            PyMem_Free(self.buf)
        self.buf = NULL

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.buf, self.cap, 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef class _Frame:
    """The exporter of one handed-out small frame: the read-only bytes
    ``[off, off + size)`` of its chunk and nothing else.  A frame's
    memoryview has this object as ``.obj``, so whoever holds a frame cannot
    reach the rest of the chunk through it: not the connection's other
    frames (SASL exchanges were read through the same chunk), and not what
    the memory held before (pooled chunks go from one connection to the
    next and are not cleared: clearing 256 KiB per chunk would cost about a
    sixth of a bulk receive).  It keeps its chunk alive."""
    cdef _Chunk chunk
    cdef Py_ssize_t off
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.chunk.buf + self.off, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef class _Region:
    """The writable window of a chunk given to the transport by
    ``FrameDecoder.writable()``: bytes no frame has been handed out of.  It
    keeps its chunk alive; the decoder releases the memoryview over it at
    ``commit()`` so it cannot be written through afterwards."""
    cdef _Chunk chunk
    cdef Py_ssize_t off
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer *view, int flags):
        PyBuffer_FillInfo(view, self, self.chunk.buf + self.off, self.size, 0, flags)

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef class FrameDecoder:
    """Incremental decoder of Kafka size-prefixed frames.

    ``max_size`` may be changed at any time (SASL lowers it before
    authentication and restores it afterwards).  It applies to every frame
    whose size prefix has not been validated yet; a frame whose prefix was
    already accepted keeps being received, as Kafka's ``NetworkReceive``
    keeps its size once read.

    Frames shorter than ``COPY_BELOW`` bytes come out as ``bytes``; larger
    ones as read-only memoryviews that share the decoder's receive memory
    and never change afterwards (see the pure twin).
    """

    cdef _Chunk _chunk          # small-frame chunk being received into, or None
    cdef unsigned char *_buf    # _chunk.buf, or NULL
    cdef Py_ssize_t _cap        # _chunk.cap, or 0
    cdef bint _shared           # a slice of _chunk was handed out: bytes before
                                # _end may be in consumers' hands, never move them
    cdef Py_ssize_t _start      # first unconsumed byte of _chunk
    cdef Py_ssize_t _end        # one past the last received byte of _chunk
    cdef long long _need        # validated payload size of the head frame, or -1
    cdef long long _max_size
    cdef _Chunk _big            # large head frame being received in place, or None
    cdef Py_ssize_t _big_fill   # payload bytes of _big received so far
    cdef object _wview          # memoryview given out by writable(), until commit
    cdef bint _wbig             # ... and whether it points into _big
    cdef Py_ssize_t _wsize      # ... and its length
    cdef Py_ssize_t _hint       # size of the next chunk (adapts to receive sizes)
    cdef bint _after_big        # the last frame set up was large (see _region)

    def __cinit__(self, *args, **kwargs):
        self._chunk = None
        self._buf = NULL
        self._cap = 0
        self._shared = False
        self._start = 0
        self._end = 0
        self._need = -1
        self._max_size = DEFAULT_MAX_SIZE
        self._big = None
        self._big_fill = 0
        self._wview = None
        self._wbig = False
        self._wsize = 0
        self._hint = _FIRST_CAP
        self._after_big = False

    def __init__(self, max_size=DEFAULT_MAX_SIZE):
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

    # -- chunk management ---------------------------------------------------
    cdef void _drop_chunk(self) noexcept:
        # Forget the chunk: slices handed out keep it alive (it is freed
        # with the last of them); the decoder never touches it again.
        self._chunk = None
        self._buf = NULL
        self._cap = 0
        self._shared = False
        self._start = 0
        self._end = 0

    cdef int _new_chunk(self, Py_ssize_t size) except -1:
        """Move the unconsumed bytes (an incomplete tail frame, never a
        handed-out one) to a fresh chunk of at least ``size`` bytes."""
        cdef Py_ssize_t live = self._end - self._start
        cdef _Chunk c
        if size < self._hint:
            size = self._hint
        c = _Chunk(size)
        if live:
            memcpy(c.buf, self._buf + self._start, live)
        self._drop_chunk()
        self._chunk = c
        self._buf = c.buf
        self._cap = size
        self._end = live
        return 0

    cdef void _emptied(self) noexcept:
        """The chunk holds no unconsumed byte: free it if small (an idle
        connection holds no receive memory), else keep receiving into it."""
        if self._chunk is None or self._start != self._end:
            return
        if (self._cap <= _RELEASE_AT_MOST or self._hint <= _RELEASE_AT_MOST
                or (self._shared and self._cap - self._end < _MIN_REGION)):
            self._drop_chunk()
        elif not self._shared:
            # Nothing of it was handed out: reuse it from the front.
            self._start = 0
            self._end = 0

    cdef int _room(self) except -1:
        """Make sure the chunk has room after ``_end`` worth a receive, and
        room for all of a validated small head frame (a frame is handed out
        as one slice, so it must be contiguous)."""
        cdef Py_ssize_t live = self._end - self._start
        cdef Py_ssize_t want = live + _MIN_REGION
        cdef long long need = self._need
        if need >= 0 and 4 + <Py_ssize_t>need > want:
            want = 4 + <Py_ssize_t>need
        if self._chunk is None:
            return self._new_chunk(want)
        if need >= 0:
            if self._start + 4 + <Py_ssize_t>need <= self._cap and self._end < self._cap:
                return 0
        elif self._cap - self._end >= _MIN_REGION:
            return 0
        if not self._shared and self._cap >= want:
            # No byte of this chunk was handed out, so moving the tail to
            # the front changes nothing anyone can see.
            memmove(self._buf, self._buf + self._start, live)
            self._start = 0
            self._end = live
            return 0
        # Slices of this chunk may be alive: never write where they point.
        # The tail (an incomplete frame) is copied to a fresh chunk.
        return self._new_chunk(want)

    cdef int _start_big(self, long long need) except -1:
        """The head frame is large and incomplete: receive it into its own
        buffer of exactly its size (Kafka's NetworkReceive)."""
        cdef Py_ssize_t have = self._end - self._start - 4
        cdef _Chunk big = _Chunk(<Py_ssize_t>need)
        memcpy(big.buf, self._buf + self._start + 4, have)
        self._big = big
        self._big_fill = have
        self._after_big = True
        self._start = self._end
        self._emptied()
        return 0

    cdef Py_ssize_t _region(self, unsigned char **ptr) except -1:
        """Where the next received bytes go: sets ``ptr``, returns the size
        (> 0).  Never a byte of a handed-out frame."""
        cdef long long size
        if self._wview is not None:
            self._commit(0)
        if self._big is not None and self._big_fill < self._need:
            self._wbig = True
            ptr[0] = self._big.buf + self._big_fill
            return <Py_ssize_t>self._need - self._big_fill
        if self._need < 0 and self._big is None and self._end - self._start >= 4:
            # Peek at the head frame's size so that a large frame is
            # received into its own buffer before more of it lands in the
            # chunk.  An invalid size is left for frames() to raise.
            size = _read_size(self._buf + self._start)
            if 0 <= size <= self._max_size:
                self._need = size
                if size >= _DIRECT_MIN and self._end - self._start - 4 < size:
                    self._start_big(size)
                    self._wbig = True
                    ptr[0] = self._big.buf + self._big_fill
                    return <Py_ssize_t>size - self._big_fill
        self._room()
        self._wbig = False
        ptr[0] = self._buf + self._end
        if self._after_big and self._cap - self._end > _AFTER_BIG_REGION:
            # After a large frame, receive little into the chunk until the
            # next size prefix is seen: if that frame is large too, only
            # what arrived with its prefix is copied into its own buffer.
            return _AFTER_BIG_REGION
        return self._cap - self._end

    cdef int _commit(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t size = self._wsize
        if self._wview is not None:
            # The transport may not keep writing through it.
            self._wview.release()
            self._wview = None
        if n < 0 or n > size:
            raise ValueError(f"commit({n}) outside the writable region of {size} bytes")
        if size == 0:
            return 0
        self._wsize = 0
        if self._wbig:
            self._big_fill += n
        else:
            self._end += n
        # The next chunk's size follows the receive sizes: doubling while
        # receives fill what they are offered, decaying when they do not.
        if n >= size:
            self._hint = 2 * (size if size > self._hint else self._hint)
        else:
            self._hint = (self._hint + 2 * n) // 2
        if self._hint > _MAX_CHUNK:
            self._hint = _MAX_CHUNK
        elif self._hint < _FIRST_CAP:
            self._hint = _FIRST_CAP
        if n == 0 and not self._wbig:
            # A receive that found nothing (TLS: no whole record yet) into a
            # chunk set up for it: an idle connection keeps no receive memory.
            self._emptied()
        return 0

    def writable(self):
        """A writable memoryview of where the next received bytes go
        (``sock.recv_into`` / ``SSLObject.read`` into it), then
        ``commit(n)``.  Valid only until ``commit``; never empty."""
        cdef unsigned char *ptr
        cdef Py_ssize_t size = self._region(&ptr)
        cdef _Region r = _Region.__new__(_Region)
        if self._wbig:
            r.chunk = self._big
            r.off = ptr - self._big.buf
        else:
            r.chunk = self._chunk
            r.off = ptr - self._buf
        r.size = size
        self._wsize = size
        self._wview = memoryview(r)
        return self._wview

    def commit(self, n):
        """``n`` bytes were written at the start of the last ``writable()``
        view; that view is released."""
        self._commit(n)

    def feed(self, data):
        """Append received bytes (any bytes-like object); copies them."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self._append(<const unsigned char *>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    cdef int _append(self, const unsigned char *src, Py_ssize_t n) except -1:
        cdef unsigned char *ptr
        cdef Py_ssize_t room
        while n > 0:
            room = self._region(&ptr)
            self._wsize = room
            if room > n:
                room = n
            memcpy(ptr, src, room)
            self._commit(room)
            src += room
            n -= room
        return 0

    # -- frames -------------------------------------------------------------
    cdef inline long long _head_size(self) except -2:
        """Validated payload size of the head frame, or -1 if its size
        prefix is not complete yet."""
        cdef long long need = self._need
        if need >= 0:
            return need
        if self._end - self._start < 4:
            return -1
        need = _read_size(self._buf + self._start)
        if need < 0 or need > self._max_size:
            raise _invalid(need, self._max_size)
        self._need = need
        if need >= _DIRECT_MIN and self._end - self._start - 4 < need:
            self._start_big(need)
        return need

    cdef object _take_big(self):
        # Complete: the decoder never writes into it again, hand it out.
        cdef object out = memoryview(self._big)
        self._big = None
        self._big_fill = 0
        self._need = -1
        return out

    cdef inline object _slice(self, Py_ssize_t pos, Py_ssize_t n):
        # A small frame is copied out as bytes: cheaper than a view (one
        # object instead of an exporter and a memoryview) and the chunk
        # stays the decoder's own.  A larger one is a read-only view of the
        # chunk, exported by a _Frame that covers only this frame's bytes
        # (see _Frame); from then on the decoder never writes at or before
        # these bytes in this chunk (_shared).
        cdef _Frame f
        self._after_big = False
        if n < _COPY_BELOW:
            return PyBytes_FromStringAndSize(<char *>self._buf + pos, n)
        f = _Frame.__new__(_Frame)
        f.chunk = self._chunk
        f.off = pos
        f.size = n
        self._shared = True
        return PyMemoryView_FromObject(f)

    def next_frame(self):
        """Return the next complete payload (``bytes`` below ``COPY_BELOW``,
        else a read-only memoryview), or None.

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
                self._emptied()
            return None
        out = self._slice(self._start + 4, <Py_ssize_t>need)
        self._start += 4 + <Py_ssize_t>need
        self._need = -1
        if self._start == self._end and self._wview is None:
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
                self._emptied()
                return out
            if self._big is not None:
                if self._big_fill < need:
                    return out
                out.append(self._take_big())
                continue
            # Small frames: walk the chunk in C.
            pos = self._start
            end = self._end
            buf = self._buf
            max_size = self._max_size
            while end - pos - 4 >= need:
                out.append(self._slice(pos + 4, <Py_ssize_t>need))
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
            if need < 0:
                self._emptied()
            return out

    def __repr__(self):
        return (f"{type(self).__name__}(max_size={self._max_size}, "
                f"buffered={self.buffered})")
