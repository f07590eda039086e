"""Kafka's murmur2 key hash, pure-Python twin of ``kchannel._cpartitioner``.

``murmur2(data)`` is ``org.apache.kafka.common.utils.Utils.murmur2`` (a
signed 32-bit int); ``partition_for_key(key, n)`` is the default
partitioner's ``toPositive(murmur2(key)) % n``, so a key lands on the same
partition as with the Java client (and librdkafka's ``murmur2_random``).
"""

__all__ = ["murmur2", "partition_for_key"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data):
    data = bytes(data)
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[n4 + 2] << 16
        if rest >= 2:
            h ^= data[n4 + 1] << 8
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key, num_partitions):
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
