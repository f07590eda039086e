# Kafka's murmur2 key hash on a byte buffer (Java's Utils.murmur2), inline C
# shared by kchannel._cpartitioner (its murmur2 and partition_for_key) and
# kchannel._cappender (a keyed send's partition, computed in place without
# a call of partition_for_key: its argument parsing and a Python int per
# argument and result cost more than the hash of a short key).
from libc.stdint cimport int32_t, uint32_t


cdef inline int32_t murmur2_ptr(const unsigned char *data, Py_ssize_t length) noexcept:
    cdef uint32_t m = 0x5BD1E995
    # (the seed a C constant: as a Python int literal above int32's range,
    # Cython made the xor a Python operation, ~200 instructions a key)
    cdef uint32_t seed = 0x9747B28C
    cdef uint32_t h = seed ^ <uint32_t>length
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
