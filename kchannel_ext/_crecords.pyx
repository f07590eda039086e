# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Record-batch hot loops, compiled twin of
``kchannel.protocol.records._records_py``.

Same names, same behaviour and same exceptions as the pure twin (see its
docstring).  Memory safety: every read checks its length against
``end - pos`` first; ``pos <= end <= len(buf)`` always holds.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MIN, INT64_MAX
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.list cimport PyList_New
from cpython.tuple cimport PyTuple_New, PyTuple_GET_SIZE, PyTuple_Check, PyTuple_CheckExact
from cpython.list cimport PyList_CheckExact, PyList_AsTuple
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject, PyTypeObject

cimport cython

from kchannel.errors import CorruptRecordError

__all__ = ["crc32c", "encode_records", "encode_plain_batch", "decode_records", "RecordReader",
           "PartitionReader", "make_records", "track_records", "QueuedRecord"]


# Fields declared in kchannel._crecords.pxd.  Not tracked by the garbage
# collector: the producer fills them with an int, bytes or None and a tuple
# of (str, bytes or None) tuples, which cannot form a reference cycle, and
# a batch holds thousands of them while it waits.
@cython.no_gc
@cython.final
cdef class QueuedRecord:
    """One record waiting in a producer batch: ``timestamp`` (ms, int),
    ``key`` and ``value`` (bytes or None), ``headers`` (a tuple of
    ``(str, bytes or None)`` tuples)."""

    def __init__(self, timestamp, key, value, headers):
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __iter__(self):
        return iter((self.timestamp, self.key, self.value, self.headers))

    def __repr__(self):
        return (f"QueuedRecord(timestamp={self.timestamp!r}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


cdef inline object _timestamp(object record):
    """A record's timestamp: a QueuedRecord's (either twin's), or a tuple's
    first field."""
    if type(record) is QueuedRecord:
        return (<QueuedRecord>record).timestamp
    if isinstance(record, (tuple, list)):
        return record[0]
    return record.timestamp

# -- CRC-32C, slicing-by-8 ---------------------------------------------------

cdef uint32_t _T[8][256]


cdef void _init_tables() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        _T[0][i] = c
    for i in range(256):
        c = _T[0][i]
        for k in range(1, 8):
            c = _T[0][c & 0xFF] ^ (c >> 8)
            _T[k][i] = c


_init_tables()


# x86-64 CPUs with SSE 4.2 compute CRC-32C (the Castagnoli polynomial is the
# one the crc32 instruction implements) 8 bytes per instruction: about 3x the
# table loop below on a 64 KiB batch, which both the producer (once per batch)
# and the consumer (check.crcs, once per batch) pay.  Chosen at run time, so a
# wheel built here still runs on a CPU without SSE 4.2.
#
# One crc32 instruction waits for the previous one's result (3 cycles of
# latency, 1 of throughput), so a single running CRC uses a third of the
# unit.  From 3 blocks of KC_CRC_BLOCK bytes on, three independent CRCs run
# side by side and are joined: the CRC register after A then B is
# shift(reg after A) ^ (reg of B from 0), shift being multiplication by
# x^(8 * len(B)) modulo the polynomial (zlib's crc32_combine), here by 4
# table lookups (kc_shift_tab, for len(B) = KC_CRC_BLOCK).  Nearly 3x on the
# consumer's megabyte batches, where the check was 8% of its CPU.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #define KC_CRC_BLOCK_LOG2 11
    #define KC_CRC_BLOCK (1 << KC_CRC_BLOCK_LOG2)
    #define KC_CRC_SMALL_LOG2 8
    #define KC_CRC_SMALL (1 << KC_CRC_SMALL_LOG2)
    static uint32_t kc_shift_tab[4][256];
    static uint32_t kc_shift_small[4][256];

    /* a * b modulo the Castagnoli polynomial, both reflected (bit 31 is x^0). */
    static uint32_t kc_multmodp(uint32_t a, uint32_t b) {
        uint32_t m = (uint32_t)1 << 31, p = 0;
        for (;;) {
            if (a & m) {
                p ^= b;
                if ((a & (m - 1)) == 0)
                    break;
            }
            m >>= 1;
            b = b & 1 ? (b >> 1) ^ 0x82F63B78u : b >> 1;
        }
        return p;
    }

    static void kc_crc32c_fill_shift(uint32_t tab[4][256], int log2_block) {
        /* x^(8 * block) = x^(2^(log2_block + 3)): square x that often. */
        uint32_t k = (uint32_t)1 << 30;
        int i, j;
        for (i = 0; i < log2_block + 3; i++)
            k = kc_multmodp(k, k);
        for (j = 0; j < 4; j++)
            for (i = 0; i < 256; i++)
                tab[j][i] = kc_multmodp(k, (uint32_t)i << (8 * j));
    }

    static void kc_crc32c_init_shift(void) {
        kc_crc32c_fill_shift(kc_shift_tab, KC_CRC_BLOCK_LOG2);
        kc_crc32c_fill_shift(kc_shift_small, KC_CRC_SMALL_LOG2);
    }

    /* The CRC register after KC_CRC_BLOCK (tab: kc_shift_tab) or
       KC_CRC_SMALL (kc_shift_small) zero bytes more. */
    static inline uint32_t kc_crc32c_shift(uint32_t tab[4][256], uint32_t c) {
        return tab[0][c & 0xFF] ^ tab[1][(c >> 8) & 0xFF]
               ^ tab[2][(c >> 16) & 0xFF] ^ tab[3][c >> 24];
    }

    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <nmmintrin.h>
    /* Three independent CRCs over three consecutive blocks of ``block``
       bytes, joined by shifting (``tab``: the shift table for that block
       size), while 3 * block bytes are left; advances *pp and *pn. */
    __attribute__((target("sse4.2"), always_inline))
    static inline uint64_t kc_crc32c_3way(uint64_t c, const uint8_t **pp, Py_ssize_t *pn,
                                          Py_ssize_t block, uint32_t tab[4][256]) {
        const uint8_t *p = *pp;
        Py_ssize_t n = *pn;
        while (n >= 3 * block) {
            uint64_t c1 = 0, c2 = 0;
            const uint8_t *p1 = p + block, *p2 = p + 2 * block;
            Py_ssize_t i;
            for (i = 0; i < block; i += 8) {
                uint64_t v0, v1, v2;
                memcpy(&v0, p + i, 8);
                memcpy(&v1, p1 + i, 8);
                memcpy(&v2, p2 + i, 8);
                c = _mm_crc32_u64(c, v0);
                c1 = _mm_crc32_u64(c1, v1);
                c2 = _mm_crc32_u64(c2, v2);
            }
            c = kc_crc32c_shift(tab, (uint32_t)c) ^ (uint32_t)c1;
            c = kc_crc32c_shift(tab, (uint32_t)c) ^ (uint32_t)c2;
            p += 3 * block;
            n -= 3 * block;
        }
        *pp = p;
        *pn = n;
        return c;
    }

    __attribute__((target("sse4.2")))
    static uint32_t kc_crc32c_hw(uint32_t crc, const uint8_t *p, Py_ssize_t n) {
        uint64_t c = (uint32_t)~crc;
        while (n && ((uintptr_t)p & 7)) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
        c = kc_crc32c_3way(c, &p, &n, KC_CRC_BLOCK, kc_shift_tab);
        /* The rest (up to 6 KiB: a third of a 16 KiB batch) three ways
           too, in smaller blocks. */
        c = kc_crc32c_3way(c, &p, &n, KC_CRC_SMALL, kc_shift_small);
        while (n >= 8) { uint64_t v; memcpy(&v, p, 8); c = _mm_crc32_u64(c, v); p += 8; n -= 8; }
        while (n) { c = _mm_crc32_u8((uint32_t)c, *p++); n--; }
        return ~(uint32_t)c;
    }
    static int kc_crc32c_hw_available(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("sse4.2");
    }
    #else
    static uint32_t kc_crc32c_hw(uint32_t crc, const uint8_t *p, Py_ssize_t n) {
        (void)p; (void)n; return crc;
    }
    static int kc_crc32c_hw_available(void) { return 0; }
    #endif
    """
    uint32_t kc_crc32c_hw(uint32_t crc, const uint8_t* p, Py_ssize_t n) nogil
    int kc_crc32c_hw_available() nogil
    void kc_crc32c_init_shift() nogil


kc_crc32c_init_shift()
cdef bint _HW = kc_crc32c_hw_available() != 0


cdef uint32_t _crc32c(uint32_t crc, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if _HW:
        return kc_crc32c_hw(crc, p, n)
    return _crc32c_table(crc, p, n)


cdef uint32_t _crc32c_table(uint32_t crc, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t c = ~crc
    cdef uint32_t lo, hi
    while n and (<size_t>p & 7):
        c = _T[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    while n >= 8:
        lo = c ^ (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
                  | (<uint32_t>p[3] << 24))
        hi = (<uint32_t>p[4] | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16)
              | (<uint32_t>p[7] << 24))
        c = (_T[7][lo & 0xFF] ^ _T[6][(lo >> 8) & 0xFF] ^ _T[5][(lo >> 16) & 0xFF]
             ^ _T[4][lo >> 24] ^ _T[3][hi & 0xFF] ^ _T[2][(hi >> 8) & 0xFF]
             ^ _T[1][(hi >> 16) & 0xFF] ^ _T[0][hi >> 24])
        p += 8
        n -= 8
    while n:
        c = _T[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return ~c


def crc32c(data, crc=0):
    cdef const uint8_t[::1] view
    cdef uint32_t start = <uint32_t>(int(crc) & 0xFFFFFFFF)
    if isinstance(data, bytes):
        return _crc32c(start, <const uint8_t*>PyBytes_AS_STRING(data),
                       PyBytes_GET_SIZE(data))
    view = memoryview(data).cast("B")
    if view.shape[0] == 0:
        return start
    return _crc32c(start, &view[0], view.shape[0])


def _crc32c_software(data, crc=0):
    """The table loop alone (the path of CPUs without SSE 4.2), for tests."""
    cdef const uint8_t[::1] view = memoryview(data).cast("B")
    cdef uint32_t start = <uint32_t>(int(crc) & 0xFFFFFFFF)
    if view.shape[0] == 0:
        return start
    return _crc32c_table(start, &view[0], view.shape[0])


def _crc32c_hardware():
    """True if this CPU's crc32 instruction is used."""
    return bool(_HW)


# -- encoding ----------------------------------------------------------------

cdef struct _Buf:
    uint8_t* data
    Py_ssize_t len
    Py_ssize_t cap
    # data is the memory of a bytes object (the result being written in
    # place), not malloc'd: moved to malloc'd memory if it must grow, and
    # never freed here
    bint borrowed


cdef int _reserve(_Buf* b, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = b.len + extra
    cdef Py_ssize_t cap
    cdef uint8_t* nd
    if need <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    while cap < need:
        cap *= 2
    if b.borrowed:
        nd = <uint8_t*>malloc(cap)
        if nd != NULL:
            memcpy(nd, b.data, b.len)
            b.borrowed = False
    else:
        nd = <uint8_t*>realloc(b.data, cap)
    if nd == NULL:
        raise MemoryError()
    b.data = nd
    b.cap = cap
    return 0


cdef inline int _size_uvarint(uint64_t v) noexcept:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline void _put_uvarint(_Buf* b, uint64_t v) noexcept:
    # The caller reserved room.
    while v >= 0x80:
        b.data[b.len] = <uint8_t>((v & 0x7F) | 0x80)
        b.len += 1
        v >>= 7
    b.data[b.len] = <uint8_t>v
    b.len += 1


cdef inline uint64_t _zz32(int64_t v) noexcept:
    return <uint32_t>((<uint32_t>v << 1) ^ <uint32_t>(<int32_t>v >> 31))


cdef inline uint64_t _zz64(int64_t v) noexcept:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef object _as_bytes(object v, str what):
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise ValueError(f"record {what} must be bytes or None, got {type(v).__name__}")


cdef int64_t _int64(object v, str what) except? -1:
    cdef int overflow = 0
    cdef long long r
    if type(v) is int:
        # The common case (every record's timestamp), without int() and
        # two comparisons of Python ints.
        r = PyLong_AsLongLongAndOverflow(v, &overflow)
        if not overflow:
            return <int64_t>r
        raise ValueError(f"{v} does not fit in a {what}")
    v = int(v)
    if not -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"{v} does not fit in a {what}")
    return <int64_t>v


cdef inline Py_ssize_t _field_size(Py_ssize_t n) noexcept:
    # A key or value of n bytes, its length included (n < 0: null).
    return 1 if n < 0 else _size_uvarint(_zz32(n)) + n


cdef inline Py_ssize_t _blob_size(object v) except -1:
    cdef Py_ssize_t n
    if v is None:
        return 1
    n = PyBytes_GET_SIZE(v)
    if n > 0x7FFFFFFF:
        raise ValueError("record field longer than 2**31-1 bytes")
    return _field_size(n)


cdef inline void _put_field(_Buf* b, const char* data, Py_ssize_t n) noexcept:
    # A key or value: its varint length and its n bytes (n < 0: null, the
    # length -1 alone).
    if n < 0:
        b.data[b.len] = 1
        b.len += 1
        return
    _put_uvarint(b, _zz32(n))
    memcpy(b.data + b.len, data, n)
    b.len += n


cdef inline void _put_blob(_Buf* b, object v) noexcept:
    if v is None:
        _put_field(b, NULL, -1)
    else:
        _put_field(b, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL


cdef Py_ssize_t _tuple_headers_size(tuple headers) except -2:
    """The encoded size of ``headers`` (the count excluded) when each is a
    ``(str, bytes or None)`` tuple, as the producer's appender passes them;
    -1 for anything else (the general path's checks and errors then
    apply).  A str's UTF-8 form is read in place (CPython keeps it, and an
    ASCII str is its own), no bytes object per header per record."""
    cdef Py_ssize_t size = 0, n
    cdef object h, k, v
    for h in headers:
        if type(h) is not tuple or PyTuple_GET_SIZE(h) != 2:
            return -1
        k = (<tuple>h)[0]
        v = (<tuple>h)[1]
        if type(k) is not str or (v is not None and type(v) is not bytes):
            return -1
        PyUnicode_AsUTF8AndSize(k, &n)
        if n > 0x7FFFFFFF:
            raise ValueError("record field longer than 2**31-1 bytes")
        size += _size_uvarint(_zz32(n)) + n + _blob_size(v)
    return size


cdef int _put_tuple_headers(_Buf* b, tuple headers) except -1:
    """Write what _tuple_headers_size measured (room reserved)."""
    cdef Py_ssize_t n
    cdef const char* u
    cdef object h
    for h in headers:
        u = PyUnicode_AsUTF8AndSize((<tuple>h)[0], &n)
        _put_uvarint(b, _zz32(n))
        memcpy(b.data + b.len, u, n)
        b.len += n
        _put_blob(b, (<tuple>h)[1])
    return 0


# (the same calls and macros on borrowed pointers: no reference counting
# of a temporary per use, see _write_records' fast path)
cdef extern from "Python.h":
    bint _kc_long_exact "PyLong_CheckExact"(PyObject* o) noexcept
    bint _kc_bytes_exact "PyBytes_CheckExact"(PyObject* o) noexcept
    bint _kc_tuple_exact "PyTuple_CheckExact"(PyObject* o) noexcept
    bint _kc_unicode_exact "PyUnicode_CheckExact"(PyObject* o) noexcept
    Py_ssize_t _kc_tuple_size "PyTuple_GET_SIZE"(PyObject* o) noexcept
    PyObject* _kc_tuple_item "PyTuple_GET_ITEM"(PyObject* o, Py_ssize_t i) noexcept
    Py_ssize_t _kc_bytes_size "PyBytes_GET_SIZE"(PyObject* o) noexcept
    char* _kc_bytes_data "PyBytes_AS_STRING"(PyObject* o) noexcept
    long long _kc_as_longlong "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow) noexcept


# A compact ASCII str's characters are its UTF-8 bytes, stored right after
# its header: read in place, with no call (PyUnicode_AsUTF8AndSize) per header.
cdef extern from *:
    """
    #define kc_ascii_str(o) PyUnicode_IS_COMPACT_ASCII(o)
    #define kc_ascii_data(o) ((const char *)PyUnicode_DATA(o))
    #define kc_ascii_len(o) PyUnicode_GET_LENGTH(o)
    """
    bint kc_ascii_str(PyObject* o) noexcept
    const char* kc_ascii_data(PyObject* o) noexcept
    Py_ssize_t kc_ascii_len(PyObject* o) noexcept


cdef inline Py_ssize_t _fast_headers_size(PyObject* hs) noexcept:
    """The encoded size of a QueuedRecord's non-empty headers tuple, its
    count included, when every header is a ``(str, bytes or None)`` tuple
    whose key is a compact ASCII str (the appenders' tuples, the usual
    header): read through borrowed pointers.  -1 for anything else: the
    general path then writes them (or raises)."""
    cdef Py_ssize_t i, n = _kc_tuple_size(hs), size, kn, vn
    cdef PyObject* h
    cdef PyObject* k
    cdef PyObject* v
    if n > 0x7FFFFFFF:
        return -1
    size = _size_uvarint(_zz32(n))
    for i in range(n):
        h = _kc_tuple_item(hs, i)
        if not _kc_tuple_exact(h) or _kc_tuple_size(h) != 2:
            return -1
        k = _kc_tuple_item(h, 0)
        v = _kc_tuple_item(h, 1)
        if not _kc_unicode_exact(k) or not kc_ascii_str(k):
            return -1
        kn = kc_ascii_len(k)
        if v == <PyObject*>None:
            vn = -1
        elif _kc_bytes_exact(v):
            vn = _kc_bytes_size(v)
        else:
            return -1
        if kn > 0x7FFFFFFF or vn > 0x7FFFFFFF:
            return -1
        size += _field_size(kn) + _field_size(vn)
    return size


cdef inline void _put_fast_headers(_Buf* b, PyObject* hs) noexcept:
    """Write what _fast_headers_size measured (room reserved)."""
    cdef Py_ssize_t i, n = _kc_tuple_size(hs)
    cdef PyObject* h
    cdef PyObject* v
    _put_uvarint(b, _zz32(n))
    for i in range(n):
        h = _kc_tuple_item(hs, i)
        _put_field(b, kc_ascii_data(_kc_tuple_item(h, 0)), kc_ascii_len(_kc_tuple_item(h, 0)))
        v = _kc_tuple_item(h, 1)
        if v == <PyObject*>None:
            _put_field(b, NULL, -1)
        else:
            _put_field(b, _kc_bytes_data(v), _kc_bytes_size(v))


cdef int _write_records(_Buf* b, object records, int64_t base, int64_t* max_ts) except -1:
    """Append the v2 records of ``records`` to ``b``; ``max_ts[0]`` is
    raised to the largest timestamp seen."""
    cdef int64_t ts, ts_delta
    cdef Py_ssize_t delta = 0, size, nh = 0, i
    cdef list hdrs
    cdef bint tuple_headers
    cdef Py_ssize_t hsize
    cdef object key, value, headers, hk, hv, rec, timestamp
    # (the fast path's borrowed fields of a QueuedRecord)
    cdef PyObject* qt
    cdef PyObject* qk
    cdef PyObject* qv
    cdef PyObject* qh
    cdef Py_ssize_t kn, vn, fh
    cdef int overflow
    for rec in records:
        if type(rec) is QueuedRecord:
            # The producer's record (an int timestamp, bytes or None key
            # and value, no headers or the usual ones: see
            # _fast_headers_size), written from its fields as borrowed
            # pointers: no reference taken and dropped per field, no call
            # per field check, one size computed (the general path below
            # cost ~300 instructions per record more; it handles the rest
            # and raises the errors).
            qt = <PyObject*>(<QueuedRecord>rec).timestamp
            qk = <PyObject*>(<QueuedRecord>rec).key
            qv = <PyObject*>(<QueuedRecord>rec).value
            qh = <PyObject*>(<QueuedRecord>rec).headers
            # (fh: the headers' encoded size, count included; 1 for none)
            fh = 1
            if qh != <PyObject*>None and _kc_tuple_exact(qh) and _kc_tuple_size(qh) != 0:
                fh = _fast_headers_size(qh)
            elif qh != <PyObject*>None and not _kc_tuple_exact(qh):
                fh = -1
            if fh > 0 and _kc_long_exact(qt) and (qk == <PyObject*>None or _kc_bytes_exact(qk)) \
                    and (qv == <PyObject*>None or _kc_bytes_exact(qv)) \
                    and delta <= 0x7FFFFFFF:
                overflow = 0
                ts = _kc_as_longlong(qt, &overflow)
                kn = -1 if qk == <PyObject*>None else _kc_bytes_size(qk)
                vn = -1 if qv == <PyObject*>None else _kc_bytes_size(qv)
                if not overflow and kn <= 0x7FFFFFFF and vn <= 0x7FFFFFFF and \
                        not ((base < 0 and ts > base + INT64_MAX) or
                             (base > 0 and ts < base + INT64_MIN)):
                    if ts > max_ts[0]:
                        max_ts[0] = ts
                    ts_delta = ts - base
                    # attributes, timestamp delta, offset delta, key,
                    # value, headers (their count included)
                    size = 1 + _size_uvarint(_zz64(ts_delta)) + _size_uvarint(_zz32(delta))
                    size += _field_size(kn) + _field_size(vn) + fh
                    if size <= 0x7FFFFFFF:
                        _reserve(b, size + 5)
                        _put_uvarint(b, _zz32(size))
                        b.data[b.len] = 0
                        b.len += 1
                        _put_uvarint(b, _zz64(ts_delta))
                        _put_uvarint(b, _zz32(delta))
                        _put_field(b, NULL if kn < 0 else _kc_bytes_data(qk), kn)
                        _put_field(b, NULL if vn < 0 else _kc_bytes_data(qv), vn)
                        if fh == 1:
                            b.data[b.len] = 0
                            b.len += 1
                        else:
                            _put_fast_headers(b, qh)
                        delta += 1
                        continue
            timestamp = (<QueuedRecord>rec).timestamp
            key = (<QueuedRecord>rec).key
            value = (<QueuedRecord>rec).value
            headers = (<QueuedRecord>rec).headers
        elif type(rec) is tuple and PyTuple_GET_SIZE(rec) == 4:
            timestamp = (<tuple>rec)[0]
            key = (<tuple>rec)[1]
            value = (<tuple>rec)[2]
            headers = (<tuple>rec)[3]
        else:
            timestamp, key, value, headers = rec
        if delta > 0x7FFFFFFF:
            raise ValueError(f"{delta} does not fit in a varint")
        key = _as_bytes(key, "key")
        value = _as_bytes(value, "value")
        ts = _int64(timestamp, "varlong")
        # Java's long arithmetic wraps; the pure twin refuses a delta
        # that overflows, and so do we.
        # (In C: with Python int literals this check cost more than the
        # rest of the record.)
        if (base < 0 and ts > base + INT64_MAX) or (base > 0 and ts < base + INT64_MIN):
            raise ValueError(f"{int(timestamp) - base} does not fit in a varlong")
        if ts > max_ts[0]:
            max_ts[0] = ts
        ts_delta = ts - base
        size = 1 + _size_uvarint(_zz64(ts_delta)) + _size_uvarint(_zz32(delta))
        size += _blob_size(key) + _blob_size(value)
        hdrs = None
        hsize = _tuple_headers_size(<tuple>headers) if headers and type(headers) is tuple \
            else -1
        tuple_headers = hsize >= 0
        if tuple_headers:
            nh = PyTuple_GET_SIZE(headers)
            size += hsize + _size_uvarint(_zz32(nh))
        elif headers:
            hdrs = []
            for hk, hv in headers:
                if not isinstance(hk, str):
                    raise ValueError(
                        f"header key must be a str, got {type(hk).__name__}")
                hk = (<str>hk).encode("utf-8")
                hv = _as_bytes(hv, "header value")
                size += _blob_size(hk) + _blob_size(hv)
                hdrs.append(hk)
                hdrs.append(hv)
            nh = len(hdrs) // 2
            size += _size_uvarint(_zz32(nh))
        else:
            size += 1
        if size > 0x7FFFFFFF:
            raise ValueError("record larger than 2**31-1 bytes")
        _reserve(b, size + 5)
        _put_uvarint(b, _zz32(size))
        b.data[b.len] = 0
        b.len += 1
        _put_uvarint(b, _zz64(ts_delta))
        _put_uvarint(b, _zz32(delta))
        _put_blob(b, key)
        _put_blob(b, value)
        if tuple_headers:
            _put_uvarint(b, _zz32(nh))
            _put_tuple_headers(b, <tuple>headers)
        elif hdrs is None:
            b.data[b.len] = 0
            b.len += 1
        else:
            _put_uvarint(b, _zz32(nh))
            for i in range(nh):
                _put_blob(b, hdrs[2 * i])
                _put_blob(b, hdrs[2 * i + 1])
        delta += 1
    return 0


def encode_records(records, base_timestamp):
    cdef _Buf b
    cdef int64_t base = _int64(base_timestamp, "varlong")
    cdef int64_t max_ts = INT64_MIN
    b.data = NULL
    b.len = 0
    b.cap = 0
    b.borrowed = False
    try:
        _write_records(&b, records, base, &max_ts)
        if b.len == 0:
            return b""
        return PyBytes_FromStringAndSize(<char*>b.data, b.len)
    finally:
        free(b.data)


cdef inline void _put_be(uint8_t* p, uint64_t v, int n) noexcept:
    cdef int i
    for i in range(n):
        p[i] = <uint8_t>(v >> (8 * (n - 1 - i)))


# The v2 batch header (batch.py's RECORD_BATCH_OVERHEAD and _CRC_START).
cdef Py_ssize_t _BATCH_HEADER = 61
cdef Py_ssize_t _CRC_FROM = 21


cdef extern from "Python.h":
    PyObject* _kc_bytes_new "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n) except NULL
    int _kc_bytes_resize "_PyBytes_Resize"(PyObject** b, Py_ssize_t n) except -1
    void _kc_xdecref "Py_XDECREF"(PyObject* o)


def encode_plain_batch(records, int attributes, int64_t producer_id, int producer_epoch,
                       int base_sequence, int64_t base_offset=0,
                       int partition_leader_epoch=-1, max_timestamp=None,
                       Py_ssize_t size_hint=0):
    """One uncompressed magic v2 batch of ``records`` (non-empty), header
    and CRC included, in one buffer: the bytes ``batch.encode_batch``
    builds (the producer's path for every batch it sends uncompressed).
    ``max_timestamp`` None: the records' largest; ``size_hint``: the
    expected size (the producer's estimate, an upper bound), so that the
    buffer is allocated once: the batch is written in place into the bytes
    object returned (trimmed to its size at the end, in place), not into a
    buffer then copied into one (~16 KiB per batch at the defaults); only
    a batch outgrowing the hint moves to a buffer of its own."""
    cdef _Buf b
    cdef Py_ssize_t n = len(records)
    cdef int64_t base, max_ts = INT64_MIN
    cdef uint32_t crc
    cdef PyObject* out = NULL
    cdef Py_ssize_t cap
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    if not -0x8000 <= producer_epoch <= 0x7FFF or not -0x8000 <= attributes <= 0x7FFF:
        raise ValueError("producer epoch and attributes are int16")
    base = _int64(_timestamp(records[0]), "varlong")
    # (+ 5: _write_records reserves room for each record's size prefix at
    # its longest, 5 bytes, where the hint counts its actual length: an
    # exact hint must not make the last record move the batch)
    cap = size_hint + 5 if size_hint > _BATCH_HEADER else _BATCH_HEADER + 64 * n
    out = _kc_bytes_new(NULL, cap)
    b.data = <uint8_t*>PyBytes_AS_STRING(<object>out)
    b.len = 0
    b.cap = cap
    b.borrowed = True
    try:
        b.len = _BATCH_HEADER
        _write_records(&b, records, base, &max_ts)
        if max_timestamp is not None:
            max_ts = _int64(max_timestamp, "int64")
        if b.len - 12 > 0x7FFFFFFF:
            raise ValueError("record batch larger than 2**31-1 bytes")
        _put_be(b.data, <uint64_t>base_offset, 8)
        _put_be(b.data + 8, <uint64_t>(b.len - 12), 4)
        _put_be(b.data + 12, <uint64_t><uint32_t>partition_leader_epoch, 4)
        b.data[16] = 2
        _put_be(b.data + 21, <uint64_t><uint16_t>attributes, 2)
        _put_be(b.data + 23, <uint64_t><uint32_t>(n - 1), 4)
        _put_be(b.data + 27, <uint64_t>base, 8)
        _put_be(b.data + 35, <uint64_t>max_ts, 8)
        _put_be(b.data + 43, <uint64_t>producer_id, 8)
        _put_be(b.data + 51, <uint64_t><uint16_t>producer_epoch, 2)
        _put_be(b.data + 53, <uint64_t><uint32_t>base_sequence, 4)
        _put_be(b.data + 57, <uint64_t><uint32_t>n, 4)
        crc = _crc32c(0, b.data + _CRC_FROM, b.len - _CRC_FROM)
        _put_be(b.data + 17, crc, 4)
        if not b.borrowed:
            return PyBytes_FromStringAndSize(<char*>b.data, b.len)
        if b.len != cap:
            _kc_bytes_resize(&out, b.len)     # (sets out to NULL if it fails)
        result = <object>out
        return result
    finally:
        if not b.borrowed:
            free(b.data)
        _kc_xdecref(out)


# -- decoding ----------------------------------------------------------------

cdef extern from "Python.h":
    PyObject* _kc_tp_alloc "PyType_GenericAlloc"(PyTypeObject* t, Py_ssize_t n) except NULL
    void PyTuple_SET_ITEM(object t, Py_ssize_t i, object o)
    void Py_DECREF_raw "Py_DECREF"(PyObject* o)
    void _gc_track "PyObject_GC_Track"(PyObject* o)
    void _gc_untrack "PyObject_GC_UnTrack"(PyObject* o)
    int _gc_is_tracked "PyObject_GC_IsTracked"(PyObject* o)
    int _PyObject_IS_GC "PyObject_IS_GC"(PyObject* o)
    PyObject* _tuple_item "PyTuple_GET_ITEM"(object t, Py_ssize_t i)


# The per-record steps of RecordReader._decode_into in C, inlined into it.
cdef extern from *:
    """
    /* The zigzag varint (or varlong) at p[pos], pos < end, when it takes one
       or two bytes (every record size, delta and length below 8 KiB): the
       bytes it took (its value in *out), else 0 and the caller's general
       decoder (_Cursor) reads it, errors included.  Two bytes hold 14 bits:
       no 32- or 64-bit range check applies. */
    static inline int kc_zz2(const uint8_t *p, Py_ssize_t pos, Py_ssize_t end,
                             int64_t *out) {
        uint64_t v;
        if (pos >= end) return 0;
        v = p[pos];
        if (v < 0x80) { *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1); return 1; }
        if (pos + 1 >= end || p[pos + 1] >= 0x80) return 0;
        v = (v & 0x7F) | ((uint64_t)p[pos + 1] << 7);
        *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        return 2;
    }

    /* A record of a tuple subclass of n items whose instances are the bare
       tuple layout (no __dict__, no __weakref__: checked by kc_bare_tuple_type),
       allocated as PyTuple_New allocates: not tracked by the garbage
       collector and not zeroed (the caller sets every item), unlike
       PyType_GenericAlloc (zeroed, tracked, then untracked by the caller). */
    static inline PyObject *kc_new_bare(PyTypeObject *t, Py_ssize_t n) {
        return (PyObject *)_PyObject_GC_NewVar(t, n);
    }
    /* An empty list, not tracked by the garbage collector: what PyList_New(0)
       then PyObject_GC_UnTrack make, in one step (a record's headers list;
       a poll frees hundreds at once, past the lists' free list, so
       PyList_New allocates them anyway). */
    static inline PyObject *kc_list_untracked(void) {
        PyListObject *op = PyObject_GC_New(PyListObject, &PyList_Type);
        if (op == NULL) return NULL;
        op->ob_item = NULL;
        Py_SET_SIZE(op, 0);
        op->allocated = 0;
        return (PyObject *)op;
    }

    #ifndef Py_TPFLAGS_MANAGED_DICT
    #define Py_TPFLAGS_MANAGED_DICT 0
    #endif
    static int kc_bare_tuple_type(PyTypeObject *t) {
        /* Up to 3.13: 3.14's tuples cache their hash in a field that
           PyTuple_New initialises. */
        return PY_VERSION_HEX < 0x030E0000
            && t->tp_basicsize == PyTuple_Type.tp_basicsize
            && t->tp_itemsize == PyTuple_Type.tp_itemsize
            && t->tp_dictoffset == 0 && t->tp_weaklistoffset == 0
            && !(t->tp_flags & Py_TPFLAGS_MANAGED_DICT)
            && t->tp_alloc == PyType_GenericAlloc;
    }
    """
    int kc_zz2(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, int64_t* out) noexcept nogil
    object kc_list_untracked()
    PyObject* kc_new_bare(PyTypeObject* t, Py_ssize_t n) except NULL
    int kc_bare_tuple_type(PyTypeObject* t) noexcept


# Named records (DecodedRecord, a NamedTuple; the consumer's ConsumerRecord:
# heap-type tuple subclasses) allocated and freed as plain tuples are,
# through the tuple free list: a plain tuple is popped from and pushed back
# to CPython's free list of its length (no pymalloc call, no count towards a
# collection), a subclass's instance went through _PyObject_GC_NewVar and
# subtype_dealloc (its checks for finalizers, slots and weak references,
# then tupledealloc, PyObject_GC_Del and a type decref).  Counted (callgrind,
# 2000 DecodedRecords of 100 B decoded and dropped): 1,740 -> 1,563
# instructions a record with the records built untracked
# (RecordReader._decode), 2,346 -> 1,928 with them tracked as built.
cdef extern from *:
    """
    static void kc_pooled_dealloc(PyObject *op);

    /* The tp_dealloc of a record type installed by kc_pooled_install.  An
       instance of such a type is a tuple in all but its type pointer
       (kc_bare_tuple_type: same size, no __dict__, no weak references, no
       finalizer), so it is handed to tupledealloc as a tuple: its items
       are released and its memory goes to the tuple free list, which
       PyTuple_New (kc_pooled_new) takes it from again.  An instance of a
       subclass (an application's, not installed) arrives here from
       subtype_dealloc, which finds this as the nearest base dealloc other
       than its own, with its __dict__ and weak references already
       cleared: it keeps its type, so tupledealloc frees it with its type's
       tp_free, as before.  Either way the instance's reference to its heap
       type is released here, as a heap type's dealloc must
       (subtype_dealloc leaves that to a heap base's dealloc). */
    static void kc_pooled_dealloc(PyObject *op) {
        PyTypeObject *tp = Py_TYPE(op);
        if (tp->tp_dealloc == kc_pooled_dealloc && Py_SIZE(op) > 0) {
            if (tp->tp_finalize != NULL) {
                /* A __del__ added to the class afterwards: run as
                   subtype_dealloc runs it (the object still tracked), and
                   the memory freed, not kept: the collector's "finalized"
                   mark would stay on it in the free list. */
                if (PyObject_CallFinalizerFromDealloc(op) < 0)
                    return;               /* resurrected */
            }
            else {
                PyObject_GC_UnTrack(op);
                Py_SET_TYPE(op, &PyTuple_Type);
            }
        }
        PyTuple_Type.tp_dealloc(op);
        Py_DECREF(tp);
    }

    /* A Python class whose dealloc is only what a Python class's is
       (subtype_dealloc, that of ``probe``, a bare tuple subclass defined in
       this module) and whose instances are the bare tuple layout. */
    static int kc_plain_tuple_class(PyTypeObject *t, PyTypeObject *probe) {
        return (t->tp_flags & Py_TPFLAGS_HEAPTYPE)
            && (t->tp_dealloc == probe->tp_dealloc || t->tp_dealloc == kc_pooled_dealloc)
            && kc_bare_tuple_type(t)
            && t->tp_finalize == NULL && t->tp_del == NULL
            && t->tp_free == PyObject_GC_Del;
    }

    /* Installs kc_pooled_dealloc on t if t and every class between it and
       tuple are plain tuple classes (kc_plain_tuple_class: nothing of
       theirs runs at deallocation but releasing the items and the type):
       1 if installed (now or before), else 0 (t's records are then
       allocated as any tuple subclass's).  t is kept alive for good. */
    static int kc_pooled_install(PyTypeObject *t, PyTypeObject *probe) {
    #ifdef Py_GIL_DISABLED
        return 0;
    #else
        PyTypeObject *b;
        if (t->tp_dealloc == kc_pooled_dealloc) return 1;
        for (b = t; b != &PyTuple_Type; b = b->tp_base) {
            if (b == NULL || !kc_plain_tuple_class(b, probe)) return 0;
        }
        Py_INCREF(t);
        t->tp_dealloc = kc_pooled_dealloc;
        return 1;
    #endif
    }

    /* A new record of type t (installed) of n (unset) items, not tracked
       by the collector: a tuple from PyTuple_New (the free list), given
       the type. */
    static inline PyObject *kc_pooled_new(PyTypeObject *t, Py_ssize_t n) {
        PyObject *op = PyTuple_New(n);
        if (op == NULL) return NULL;
        PyObject_GC_UnTrack(op);
        Py_INCREF(t);
        Py_SET_TYPE(op, t);
        return op;
    }
    """
    int kc_pooled_install(PyTypeObject* t, PyTypeObject* probe) except -1
    PyObject* kc_pooled_new(PyTypeObject* t, Py_ssize_t n) except NULL


class _PlainTupleProbe(tuple):
    # Its tp_dealloc is what every Python class's is (subtype_dealloc),
    # which C code cannot name: see kc_plain_tuple_class.
    __slots__ = ()


cdef bint _pooled(cls) except -1:
    # cls's records allocated from and freed to the tuple free list
    # (kc_pooled_install), if it is a plain tuple class.
    return kc_pooled_install(<PyTypeObject*>cls, <PyTypeObject*>_PlainTupleProbe) == 1


# The bounds within which C arithmetic on offsets and timestamps cannot
# overflow, as C values: a bare ``(1 << 61)`` is a Python int to Cython, and
# comparing an int64 with it makes a Python int of the int64 first (two per
# record, ~150 instructions).
cdef int64_t _LIM61 = (<int64_t>1) << 61
cdef int64_t _LIM62 = (<int64_t>1) << 62


cdef inline void _set(object t, Py_ssize_t i, object o):
    # PyTuple_SET_ITEM steals a reference.
    Py_INCREF(o)
    PyTuple_SET_ITEM(t, i, o)


cdef inline object _record(cls, topic, partition, offset, timestamp, timestamp_type, key, value,
                    headers, bint untracked=False, bint pooled=False):
    # ``cls`` (a tuple subclass, checked by the callers) of the 9 fields,
    # leader_epoch None: what ``tuple.__new__(cls, fields)`` makes, without
    # the fields tuple.  ``untracked``: not tracked by the garbage collector
    # (see RecordReader._decode).  ``pooled`` (with ``untracked``): cls is
    # installed by _pooled, the record comes from the tuple free list.
    cdef PyObject* raw
    if pooled:
        raw = kc_pooled_new(<PyTypeObject*>cls, 9)
    elif untracked and kc_bare_tuple_type(<PyTypeObject*>cls):
        raw = kc_new_bare(<PyTypeObject*>cls, 9)
    else:
        raw = _kc_tp_alloc(<PyTypeObject*>cls, 9)
        if untracked:
            _gc_untrack(raw)
    cdef object obj = <object>raw
    # The allocator returned a new reference; <object> took one more.
    Py_DECREF_raw(raw)
    _set(obj, 0, topic)
    _set(obj, 1, partition)
    _set(obj, 2, offset)
    _set(obj, 3, timestamp)
    _set(obj, 4, timestamp_type)
    _set(obj, 5, key)
    _set(obj, 6, value)
    _set(obj, 7, headers)
    _set(obj, 8, None)
    return obj


cdef object _DecodedRecord = None
cdef bint _decoded_as_tuple = False


cdef object _decoded_type():
    # Imported on first use: kchannel.protocol.records (the type's package)
    # loads this module while it is being imported itself.
    global _DecodedRecord, _decoded_as_tuple
    if _DecodedRecord is None:
        from kchannel.protocol.records.record import DecodedRecord
        _decoded_as_tuple = _pooled(DecodedRecord)
        _DecodedRecord = DecodedRecord
    return _DecodedRecord


cdef object _decoded(dtype, offset, timestamp, key, value, headers):
    # dtype(offset, timestamp, key, value, headers) (dtype: DecodedRecord),
    # allocated and filled as tuple.__new__ does (see _record), not tracked
    # by the garbage collector: RecordReader._decode tracks it with the
    # call's other records once all are built.  Of the bare tuple layout, it
    # is allocated as PyTuple_New allocates (unzeroed: zeroing an object
    # that is filled at once made decode_records ~1.5x slower).
    cdef PyObject* raw
    cdef object obj
    if _decoded_as_tuple:
        # As a plain tuple, from the tuple free list (see kc_pooled_dealloc).
        raw = kc_pooled_new(<PyTypeObject*>dtype, 5)
    elif kc_bare_tuple_type(<PyTypeObject*>dtype):
        raw = kc_new_bare(<PyTypeObject*>dtype, 5)
    else:
        raw = _kc_tp_alloc(<PyTypeObject*>dtype, 5)
        _gc_untrack(raw)
    obj = <object>raw
    Py_DECREF_raw(raw)
    _set(obj, 0, offset)
    _set(obj, 1, timestamp)
    _set(obj, 2, key)
    _set(obj, 3, value)
    _set(obj, 4, headers)
    return obj


@cython.final
cdef class _Cursor:
    # Final: its methods are called directly (no vtable), so the C compiler
    # can inline the one-byte varints that most record fields are.
    cdef const uint8_t* p
    cdef Py_ssize_t pos
    cdef Py_ssize_t end

    cdef inline uint64_t uvarint(self, int limit_bits) except? 0xFFFFFFFFFFFFFFFF:
        cdef uint64_t value = 0
        cdef int shift = 0
        cdef uint8_t byte
        if self.pos < self.end and self.p[self.pos] < 0x80:
            # One byte: what record sizes below 64, deltas, lengths below
            # 64 and header counts are.
            self.pos += 1
            return self.p[self.pos - 1]
        while True:
            if self.pos >= self.end:
                raise CorruptRecordError("Record is truncated (varint runs past the batch)")
            byte = self.p[self.pos]
            self.pos += 1
            if shift < 64:
                value |= (<uint64_t>(byte & 0x7F)) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift >= limit_bits:
                raise CorruptRecordError("Record has a varint that is too long")
        return value

    # varint, varlong and blob: the one- and two-byte varints that nearly
    # every record field is (kc_zz2) in a few lines the C compiler inlines
    # into the record loop; the general decoder, errors included, in a
    # function of its own.
    cdef inline int64_t varint(self) except? -0x7FFFFFFFFFFFFFFF:
        cdef int64_t out
        cdef int k = kc_zz2(self.p, self.pos, self.end, &out)
        if k:
            self.pos += k
            return out
        return self._varint()

    cdef inline int64_t varlong(self) except? -0x7FFFFFFFFFFFFFFF:
        cdef int64_t out
        cdef int k = kc_zz2(self.p, self.pos, self.end, &out)
        if k:
            self.pos += k
            return out
        return self._varlong()

    cdef inline object blob(self, Py_ssize_t stop, str what):
        cdef int64_t n
        cdef object v
        cdef int k = kc_zz2(self.p, self.pos, self.end, &n)
        if k:
            if 0 <= n <= stop - self.pos - k:
                self.pos += k
                v = PyBytes_FromStringAndSize(<const char*>(self.p + self.pos), n)
                self.pos += n
                return v
            if n == -1:
                self.pos += k
                return None
        return self._blob(stop, what)

    cdef int64_t _varint(self) except? -0x7FFFFFFFFFFFFFFF:
        cdef Py_ssize_t start = self.pos
        cdef uint64_t v = self.uvarint(35)
        # The 5th byte may carry up to 7 bits: more than 32 is invalid.
        if self.pos - start == 5 and self.p[self.pos - 1] > 0x0F:
            raise CorruptRecordError("Record has a varint that does not fit in 32 bits")
        return <int64_t>(v >> 1) ^ -(<int64_t>(v & 1))

    cdef int64_t _varlong(self) except? -0x7FFFFFFFFFFFFFFF:
        cdef Py_ssize_t start = self.pos
        cdef uint64_t v = self.uvarint(70)
        if self.pos - start == 10 and self.p[self.pos - 1] > 0x01:
            raise CorruptRecordError("Record has a varlong that does not fit in 64 bits")
        return <int64_t>(v >> 1) ^ -(<int64_t>(v & 1))

    cdef object _blob(self, Py_ssize_t stop, str what):
        cdef int64_t n = self._varint()
        cdef object v
        if n < 0:
            if n == -1:
                return None
            raise CorruptRecordError(f"Invalid negative {what} size {n}")
        if n > stop - self.pos:
            raise CorruptRecordError(f"Record {what} of {n} bytes runs past the record")
        v = PyBytes_FromStringAndSize(<const char*>(self.p + self.pos), n)
        self.pos += n
        return v


def decode_records(buf, count, base_offset, base_timestamp, log_append_time):
    cdef RecordReader r = RecordReader.__new__(RecordReader)
    r._open(buf, count, base_offset, base_timestamp, log_append_time)
    return r._read(r._remaining)


cdef class RecordReader:
    """See the pure twin: a batch's records decoded ``n`` at a time,
    straight into ``cls`` records (no intermediate tuple per record).

    The consumer decodes only what a poll hands out: records then die young
    (when the application drops the poll's list), instead of a whole batch
    living across polls, surviving the garbage collector's young
    generations and paying for the older ones' passes too."""
    # Any buffer (the consumer hands a memoryview of the fetch response, so
    # a batch is not copied before its records are); the view (or the bytes
    # object) keeps the memory that the cursor points into alive.
    cdef const uint8_t[::1] _view
    cdef bytes _data
    cdef _Cursor _c
    cdef object _base_off, _base_ts, _log_append_time
    cdef bint _fast
    cdef int64_t _c_base_off, _c_base_ts
    cdef object _cls, _topic, _partition, _ttype
    cdef Py_ssize_t _remaining
    cdef object _error
    cdef bint _checked
    cdef bint _tuple_headers
    cdef bint _pooled         # _cls's records from the tuple free list (_pooled)

    def __init__(self, buf, count, base_offset, base_timestamp, log_append_time, cls, topic,
                 partition, timestamp_type, tuple_headers=False):
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise TypeError("cls must be a tuple subclass")
        self._open(buf, count, base_offset, base_timestamp, log_append_time)
        self._cls = cls
        self._pooled = _pooled(cls)
        self._topic = topic
        self._partition = partition
        self._ttype = timestamp_type
        self._tuple_headers = bool(tuple_headers)

    @property
    def remaining(self):
        """Records not read yet (0 after an error)."""
        return self._remaining

    def read(self, n):
        """The next (up to) ``n`` records, as a list."""
        return self._read(n)

    def read_into(self, list out, n):
        """See the pure twin: the next (up to) ``n`` records appended to
        ``out``, left untracked by the garbage collector until
        ``track_records(out, start)``; returns how many."""
        return self._read_into(out, n)

    cdef int _open(self, buf, count, base_offset, base_timestamp,
                   log_append_time) except -1:
        cdef _Cursor c = _Cursor()
        c.pos = 0
        if type(buf) is bytes:
            self._data = <bytes>buf
            c.p = <const uint8_t*>PyBytes_AS_STRING(self._data)
            c.end = PyBytes_GET_SIZE(self._data)
        else:
            self._view = memoryview(buf).cast("B")
            c.end = self._view.shape[0]
            c.p = &self._view[0] if c.end else <const uint8_t*>b""
        self._c = c
        if count < 0:
            raise CorruptRecordError(f"Found invalid record count {count} in the record batch")
        if count > c.end // 7 + 1:
            raise CorruptRecordError(
                f"Found invalid record count {count} in a batch of {c.end} bytes")
        self._remaining = count
        self._base_off = int(base_offset)
        self._base_ts = int(base_timestamp)
        self._log_append_time = log_append_time
        # C arithmetic when the sums cannot overflow (always, for real
        # batches: the base values come from an int64 header); Python ints
        # otherwise.
        self._fast = (-(1 << 62) <= self._base_off <= (1 << 62)) and \
            (-(1 << 62) <= self._base_ts <= (1 << 62))
        self._c_base_off = self._base_off if self._fast else 0
        self._c_base_ts = self._base_ts if self._fast else 0
        self._error = None
        self._checked = False
        return 0

    cdef int _open_raw(self, const uint8_t* p, Py_ssize_t size, int64_t count,
                       int64_t base_offset, int64_t base_timestamp, object log_append_time,
                       object timestamp_type) except -1:
        # As _open, on memory that the caller (PartitionReader) keeps alive,
        # reusing this reader and its cursor for the next batch.
        cdef _Cursor c = self._c
        if c is None:
            c = self._c = _Cursor()
        c.p = p
        c.pos = 0
        c.end = size
        self._remaining = 0
        if count < 0:
            raise CorruptRecordError(f"Found invalid record count {count} in the record batch")
        if count > size // 7 + 1:
            raise CorruptRecordError(
                f"Found invalid record count {count} in a batch of {size} bytes")
        self._remaining = count
        self._base_off = base_offset
        self._base_ts = base_timestamp
        self._log_append_time = log_append_time
        self._fast = (-_LIM62 <= base_offset <= _LIM62) and \
            (-_LIM62 <= base_timestamp <= _LIM62)
        self._c_base_off = base_offset if self._fast else 0
        self._c_base_ts = base_timestamp if self._fast else 0
        self._error = None
        self._checked = False
        self._ttype = timestamp_type
        return 0

    cdef Py_ssize_t _read_into(self, list out, Py_ssize_t n) except -1:
        # As _read, into the caller's list and without tracking: a caller
        # that gathers several batches' records into one list (the
        # consumer's poll) tracks them all once it is done, so that a
        # collection set off by a later batch's allocations does not find
        # the earlier ones tracked, alive and young (and promote them).
        cdef Py_ssize_t start = len(out)
        if self._cls is None:
            raise TypeError("read_into needs a reader of cls records")
        if self._error is not None:
            raise self._error
        if n > self._remaining:
            n = self._remaining
        if n < 0:
            n = 0
        try:
            self._decode_into(out, n)
            self._remaining -= n
            if self._remaining == 0 and not self._checked:
                self._checked = True
                if self._c.pos != self._c.end:
                    raise CorruptRecordError(
                        "Incorrect declared batch size, records still remaining in file")
        except CorruptRecordError as exc:
            # Nothing of a failed read is handed out (as _read).
            _track_records(out, start)
            del out[start:]
            self._error = exc
            self._remaining = 0
            raise
        except BaseException:
            _track_records(out, start)
            del out[start:]
            raise
        return n

    cdef list _read(self, Py_ssize_t n):
        if self._error is not None:
            raise self._error
        if n > self._remaining:
            n = self._remaining
        if n < 0:
            n = 0
        try:
            out = self._decode(n)
            self._remaining -= n
            if self._remaining == 0 and not self._checked:
                self._checked = True
                if self._c.pos != self._c.end:
                    raise CorruptRecordError(
                        "Incorrect declared batch size, records still remaining in file")
        except CorruptRecordError as exc:
            # Where the batch went wrong is where it stays wrong.
            self._error = exc
            self._remaining = 0
            raise
        return out

    cdef list _decode(self, Py_ssize_t n):
        # DecodedRecord(offset, timestamp, key, value, headers) if ``_cls`` is
        # None (decode_records), else ``_cls`` records.
        #
        # The records and their headers lists are built untracked by the
        # garbage collector and tracked together when all are built (as C
        # types track an object once it is initialised): a collection that
        # the allocations here set off (one per 700) would otherwise find
        # this call's records alive, as they always are while being built,
        # and move them to the older generations, whose collections they
        # then trigger and slow down; tracked afterwards, they are seen by
        # the next collection only if the application still holds them.
        # Nothing can reach them in between but the list ``out`` (tracked:
        # the collector skips untracked objects in it), and they are
        # tracked before anyone gets them, also when decoding fails.
        #
        # decode_records' DecodedRecords too: with them tracked as built, a
        # 2000-record batch set off ~3 young collections per call that found
        # them alive and promoted them, and so full collections of the whole
        # heap every few calls (the cost then grew with what the
        # application had imported, not with the batch).
        cdef list out = []
        try:
            self._decode_into(out, n)
        finally:
            if self._cls is not None:
                _track_records(out, 0)
            else:
                _track_decoded(out)
        return out

    cdef int _decode_into(self, list out, Py_ssize_t n) except -1:
        cdef _Cursor c = self._c
        cdef int64_t size, ts_delta, offset_delta, nheaders, hsize
        cdef Py_ssize_t start, stop, i, h, saved_end
        cdef object key, value, hk, hv, offset, timestamp
        cdef object log_append_time = self._log_append_time
        cdef object cls = self._cls
        cdef bint fast = self._fast
        cdef bint untracked = cls is not None
        cdef bint as_tuple = untracked and self._tuple_headers
        cdef bint pooled = untracked and self._pooled
        cdef object dtype = None if untracked else _decoded_type()
        cdef object headers
        cdef object pair
        cdef bint same_ts = False
        cdef int64_t last_delta = 0
        timestamp = None
        for i in range(n):
            size = c.varint()
            if size < 0 or size > c.end - c.pos:
                raise CorruptRecordError(
                    f"Invalid record size {size}: {c.end - c.pos} bytes left in the batch")
            start = c.pos
            stop = c.pos + size
            if c.pos >= stop:
                raise CorruptRecordError("Record is empty")
            c.pos += 1
            # Bound the varints of this record by its own size.
            saved_end = c.end
            c.end = stop
            ts_delta = c.varlong()
            offset_delta = c.varint()
            key = c.blob(stop, "key")
            value = c.blob(stop, "value")
            nheaders = c.varint()
            if nheaders < 0:
                raise CorruptRecordError(f"Found invalid number of record headers {nheaders}")
            if nheaders > (stop - c.pos) // 2:
                raise CorruptRecordError(f"Found invalid number of record headers {nheaders}")
            if as_tuple and nheaders == 0:
                headers = ()
            else:
                headers = kc_list_untracked()
            for h in range(nheaders):
                hsize = c.varint()
                if hsize < 0:
                    # (As the pure twin: the size is named unless it is -1,
                    # a null key.)
                    raise CorruptRecordError(
                        "Invalid negative header key size" if hsize == -1
                        else f"Invalid negative header key size {hsize}")
                if hsize > stop - c.pos:
                    raise CorruptRecordError(
                        f"Record header key of {hsize} bytes runs past the record")
                hk = PyUnicode_DecodeUTF8(<const char*>(c.p + c.pos), hsize, "replace")
                c.pos += hsize
                hv = c.blob(stop, "header value")
                pair = (hk, hv)
                if as_tuple:
                    # (str, bytes or None): nothing in it can refer back,
                    # so untracked for good (what the collector itself
                    # does with such a tuple at its first pass).
                    _gc_untrack(<PyObject*>pair)
                (<list>headers).append(pair)
            if as_tuple and nheaders:
                # A tuple of those: as immutable (see _track_records).
                headers = PyList_AsTuple(headers)
                _gc_untrack(<PyObject*>headers)
            c.end = saved_end
            if c.pos != stop:
                raise CorruptRecordError(
                    f"Invalid record size: expected to read {size} bytes in record payload, "
                    f"but instead read {c.pos - start}")
            if fast and -_LIM61 <= ts_delta <= _LIM61:
                if log_append_time is None:
                    # Records of one batch often share a millisecond: the
                    # previous record's int then serves (ints are immutable).
                    if not same_ts or ts_delta != last_delta:
                        timestamp = self._c_base_ts + ts_delta
                        last_delta = ts_delta
                        same_ts = True
                else:
                    timestamp = log_append_time
                offset = self._c_base_off + offset_delta
            else:
                same_ts = False
                if log_append_time is None:
                    timestamp = self._base_ts + ts_delta
                    if not -0x8000000000000000 <= timestamp <= 0x7FFFFFFFFFFFFFFF:
                        raise CorruptRecordError(f"Record timestamp {timestamp} overflows")
                else:
                    timestamp = log_append_time
                offset = self._base_off + offset_delta
            if cls is None:
                out.append(_decoded(dtype, offset, timestamp, key, value, headers))
            else:
                out.append(_record(cls, self._topic, self._partition, offset, timestamp,
                                   self._ttype, key, value, headers, True, pooled))
        return 0


cdef inline int64_t _be64(const uint8_t* p) noexcept:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline uint32_t _be32(const uint8_t* p) noexcept:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef Py_ssize_t _LOG_OVERHEAD = 12
cdef int32_t _MIN_RECORD_OVERHEAD = 14
cdef str _CREATE_TIME = "CreateTime"
cdef str _LOG_APPEND_TIME = "LogAppendTime"


cdef class PartitionReader:
    """See the pure twin: every batch of one partition's fetched records,
    walked and decoded in C, ``read_into(out, n, position)`` at a time.

    The consumer's per-batch work (header, CRC, offsets, control batches,
    a reader per batch) is done here, so that a poll of Kafka's default
    16 KiB batches (about 15 records each at 1 KiB) costs one call per
    partition instead of a dozen Python calls per batch."""
    cdef const uint8_t[::1] _view
    cdef bytes _data
    cdef object _buf
    cdef const uint8_t* _p
    cdef Py_ssize_t _pos, _n
    cdef bint _check_crcs, _read_committed
    cdef RecordReader _reader
    cdef bint _live          # _reader holds records of the current batch
    cdef bint _prefix        # ... and some may lie before the position
    cdef int64_t _position
    cdef object _deferred
    cdef object _special
    cdef int64_t _last_next   # next offset of the last whole plain batch walked, else -1

    def __init__(self, buf, cls, topic, partition, check_crcs=True, read_committed=False,
                 tuple_headers=False):
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise TypeError("cls must be a tuple subclass")
        if type(buf) is bytes:
            self._data = <bytes>buf
            self._buf = buf
            self._p = <const uint8_t*>PyBytes_AS_STRING(self._data)
            self._n = PyBytes_GET_SIZE(self._data)
        else:
            self._buf = memoryview(buf).cast("B")
            self._view = self._buf
            self._n = self._view.shape[0]
            self._p = &self._view[0] if self._n else <const uint8_t*>b""
        self._pos = 0
        self._check_crcs = check_crcs
        self._read_committed = read_committed
        self._reader = RecordReader.__new__(RecordReader)
        self._reader._cls = cls
        self._reader._pooled = _pooled(cls)
        self._reader._topic = topic
        self._reader._partition = partition
        self._reader._tuple_headers = bool(tuple_headers)
        self._live = False
        self._prefix = False
        self._position = 0
        self._deferred = None
        self._special = None
        self._last_next = -1

    @property
    def position(self):
        """See the pure twin: past the last record read, or at the end of
        the records the last whole plain batch's next offset if further."""
        return self._position

    @property
    def special(self):
        """``(start, end)`` in ``buffer`` of the batch the last
        ``read_into`` stopped at for the caller to read, else None."""
        return self._special

    @property
    def buffer(self):
        """The records (bytes, or a memoryview of bytes)."""
        return self._buf

    def read_into(self, list out, Py_ssize_t n, position):
        """See the pure twin."""
        cdef Py_ssize_t start = len(out)
        cdef Py_ssize_t taken = 0
        cdef object exc
        self._position = position
        self._special = None
        if self._deferred is not None:
            exc, self._deferred = self._deferred, None
            raise exc
        try:
            while taken < n:
                if self._live:
                    taken += self._read_batch(out, n - taken)
                elif not self._next_batch(out):
                    # At the end (not a batch left to the caller): Kafka's
                    # nextFetchOffset, the last batch's next offset.
                    if self._special is None and self._last_next > self._position:
                        self._position = self._last_next
                    break
        except CorruptRecordError as exc:
            self._live = False
            if len(out) > start:
                # The records before it are handed out first (as Kafka's
                # consumer does); the next call raises it.
                self._deferred = exc
                return len(out) - start
            raise
        return taken

    cdef Py_ssize_t _read_batch(self, list out, Py_ssize_t n) except -1:
        cdef RecordReader r = self._reader
        cdef Py_ssize_t k
        cdef int64_t offset
        if self._prefix:
            # A seek into the middle of the batch: the records before the
            # position are decoded and dropped (offsets grow in a batch).
            self._prefix = False
            while r._remaining:
                r._read_into(out, 1)
                offset = <int64_t>(<tuple>out[len(out) - 1])[2]
                if offset >= self._position:
                    self._position = offset + 1
                    if r._remaining == 0:
                        self._live = False
                    return 1
                del out[len(out) - 1]
            self._live = False
            return 0
        k = r._read_into(out, n)
        if k:
            self._position = <int64_t>(<tuple>out[len(out) - 1])[2] + 1
        if r._remaining == 0:
            self._live = False
        return k

    cdef bint _next_batch(self, list out) except -1:
        # Opens the next batch's reader (True), or stops at the end (False)
        # or at a batch the caller reads itself (False, _special set).
        cdef const uint8_t* p = self._p
        cdef const uint8_t* b
        cdef Py_ssize_t pos, end, n = self._n
        cdef int32_t size, count, last_delta
        cdef uint8_t magic
        cdef int attributes
        cdef int64_t base_offset, next_offset, producer_id, base_ts, max_ts
        cdef uint32_t stored, computed
        while True:
            pos = self._pos
            if n - pos < _LOG_OVERHEAD:
                return False
            b = p + pos
            size = <int32_t>_be32(b + 8)
            if size < _MIN_RECORD_OVERHEAD:
                self._pos = n
                raise CorruptRecordError(
                    f"Record size {size} is less than the minimum record overhead "
                    f"({_MIN_RECORD_OVERHEAD})")
            if n - pos < 17:
                return False
            magic = b[16]
            if magic > 2:
                self._pos = n
                raise CorruptRecordError(f"Invalid magic found in record: {magic}")
            end = pos + _LOG_OVERHEAD + size
            if end > n:
                return False    # partial trailing batch: normal at the end of a fetch
            if magic == 2 and size + _LOG_OVERHEAD < _BATCH_HEADER:
                self._pos = n
                raise CorruptRecordError(
                    f"Record batch is corrupt (the size of the batch {size + _LOG_OVERHEAD} "
                    f"is less than the minimum {_BATCH_HEADER})")
            self._pos = end
            base_offset = _be64(b)
            attributes = (b[21] << 8) | b[22]
            producer_id = _be64(b + 43)
            if magic != 2 or attributes & 0x07 or \
                    (self._read_committed and producer_id >= 0) or \
                    not (-_LIM62 <= base_offset <= _LIM62):
                # Legacy, compressed, transactional under read_committed
                # (aborted transactions) or absurd offsets: the caller's.
                self._special = (pos, end)
                return False
            if self._check_crcs:
                stored = _be32(b + 17)
                computed = _crc32c(0, b + _CRC_FROM, end - pos - _CRC_FROM)
                if computed != stored:
                    raise CorruptRecordError(
                        f"Record is corrupt (stored crc = {stored}, computed crc = {computed})")
            last_delta = <int32_t>_be32(b + 23)
            next_offset = base_offset + last_delta + 1
            self._last_next = next_offset
            if next_offset <= self._position:
                continue
            if attributes & 0x20:
                # A control batch (transaction marker): skipped.
                if next_offset > self._position:
                    self._position = next_offset
                continue
            base_ts = _be64(b + 27)
            max_ts = _be64(b + 35)
            count = <int32_t>_be32(b + 57)
            if attributes & 0x08:
                self._reader._open_raw(b + _BATCH_HEADER, end - pos - _BATCH_HEADER, count,
                                       base_offset, base_ts, max_ts, _LOG_APPEND_TIME)
            else:
                self._reader._open_raw(b + _BATCH_HEADER, end - pos - _BATCH_HEADER, count,
                                       base_offset, base_ts, None, _CREATE_TIME)
            if not count:
                self._reader._read_into(out, 0)  # checks that the batch holds nothing more
                if next_offset > self._position:
                    self._position = next_offset
                continue
            self._live = True
            self._prefix = base_offset < self._position
            return True


cdef void _track_decoded(list records) noexcept:
    # Track what _decode built untracked for decode_records: each
    # DecodedRecord and its headers list (a record holds a mutable list, so
    # a cycle can pass through it: it stays tracked, as plain tuples were).
    cdef object r
    cdef PyObject* o
    for r in records:
        o = _tuple_item(r, 4)  # borrowed
        if _PyObject_IS_GC(o) and not _gc_is_tracked(o):
            _gc_track(o)
        o = <PyObject*>r
        if not _gc_is_tracked(o):
            _gc_track(o)


cdef void _track_records(list records, Py_ssize_t start) noexcept:
    # Track what _decode built untracked: each record and its headers list
    # (records[start:]; anything else in the list, such as records that
    # deserializers made, is tracked already or left alone).
    #
    # A record whose headers are a tuple (tuple_headers) and whose every
    # field is an object the collector does not track (str, bytes, int,
    # None, those untracked tuples) stays untracked for good: no reference
    # cycle can pass through it, since nothing it holds can refer to
    # anything.  It is the rule CPython applies to plain tuples at their
    # first collection (_PyTuple_MaybeUntrack); a record is a tuple
    # subclass, which the collector never untracks itself, so it would
    # otherwise be traversed (and promoted, while an application holds its
    # poll's list) by every collection.  A field a deserializer made (a
    # dict, any object the collector can track) keeps the record tracked.
    cdef Py_ssize_t i, f
    cdef PyObject* o
    cdef PyObject* h
    cdef PyObject* item
    cdef bint track
    for i in range(start, len(records)):
        o = <PyObject*>records[i]
        if not PyTuple_Check(<object>o) or PyTuple_GET_SIZE(<object>o) != 9:
            continue
        # (Also under a record a deserializer remade: it holds the same
        # headers list.)
        h = _tuple_item(<object>o, 7)  # borrowed
        if PyList_CheckExact(<object>h):
            if not _gc_is_tracked(h):
                _gc_track(h)
            if not _gc_is_tracked(o):
                _gc_track(o)
            continue
        if _gc_is_tracked(o):
            continue
        track = False
        for f in range(9):
            item = _tuple_item(<object>o, f)  # borrowed
            # CPython's _PyObject_GC_MAY_BE_TRACKED: any object the
            # collector can track (a dict it untracked for now may hold a
            # container tomorrow) but an untracked plain tuple.
            if _PyObject_IS_GC(item) and (not PyTuple_CheckExact(<object>item)
                                          or _gc_is_tracked(item)):
                track = True
                break
        if track:
            _gc_track(o)


def track_records(list records, Py_ssize_t start=0):
    """See the pure twin: tracks ``records[start:]`` that ``read_into``
    left untracked."""
    if start < 0:
        start = 0
    _track_records(records, start)


def make_records(cls, records, Py_ssize_t start, Py_ssize_t stop, topic, partition,
                 timestamp_type):
    """See the pure twin: one ``cls`` (a tuple subclass of 9 fields) per
    decoded record of ``records[start:stop]``, allocated and filled as
    CPython's own ``tuple.__new__(cls, ...)`` does, without the intermediate
    tuple."""
    if not (isinstance(cls, type) and issubclass(cls, tuple)):
        raise TypeError("cls must be a tuple subclass")
    cdef list src = records
    cdef Py_ssize_t n = len(src)
    if start < 0:
        start = 0
    if stop > n:
        stop = n
    cdef list out = []
    cdef Py_ssize_t i
    cdef tuple r
    for i in range(start, stop):
        r = <tuple>src[i]
        if len(r) != 5:
            raise ValueError("a decoded record is (offset, timestamp, key, value, headers)")
        out.append(_record(cls, topic, partition, r[0], r[1], timestamp_type, r[2], r[3],
                           r[4]))
    return out
