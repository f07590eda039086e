# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Kafka's murmur2 key hash, compiled twin of
``kchannel.producer._partitioner_py`` (same names, same results)."""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, uint32_t

from kchannel._murmur2 cimport murmur2_ptr

__all__ = ["murmur2", "partition_for_key"]


cdef inline int32_t _murmur2(object data) except? -1:
    # bytes read in place: a typed memoryview of a short key cost more than
    # the hash itself (~250 ns of a keyed send's ~1 us).
    if type(data) is not bytes:
        data = bytes(data)
    return murmur2_ptr(<const unsigned char *>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def murmur2(data):
    return _murmur2(data)


def partition_for_key(key, num_partitions):
    cdef long n = num_partitions
    if n <= 0:
        raise ValueError("num_partitions must be positive")
    return (_murmur2(key) & 0x7FFFFFFF) % n
