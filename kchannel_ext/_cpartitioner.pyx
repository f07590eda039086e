# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kafka's murmur2 key hash, compiled twin of
``kchannel.producer._partitioner_py`` (same names, same results)."""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, uint32_t

__all__ = ["murmur2", "partition_for_key"]


cdef int32_t _murmur2_ptr(const unsigned char *data, Py_ssize_t length) noexcept:
    cdef uint32_t m = 0x5BD1E995
    cdef uint32_t h = 0x9747B28C ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, n4 = length & ~3
    cdef int rest = length & 3
    for i in range(0, n4, 4):
        k = (<uint32_t>data[i] | (<uint32_t>data[i + 1] << 8) | (<uint32_t>data[i + 2] << 16)
             | (<uint32_t>data[i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    if rest:
        if rest == 3:
            h ^= <uint32_t>data[n4 + 2] << 16
        if rest >= 2:
            h ^= <uint32_t>data[n4 + 1] << 8
        h ^= data[n4]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


cdef inline int32_t _murmur2(object data) except? -1:
    # bytes read in place: a typed memoryview of a short key cost more than
    # the hash itself (~250 ns of a keyed send's ~1 us).
    if type(data) is not bytes:
        data = bytes(data)
    return _murmur2_ptr(<const unsigned char *>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def murmur2(data):
    return _murmur2(data)


def partition_for_key(key, num_partitions):
    cdef long n = num_partitions
    if n <= 0:
        raise ValueError("num_partitions must be positive")
    return (_murmur2(key) & 0x7FFFFFFF) % n
