"""murmur2 and the key partitioner: Kafka's own test vectors (UtilsTest),
both twins, and agreement with kafka-python's Java-compatible murmur2."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.client.metadata import Cluster, PartitionInfo
from kchannel.producer.partitioner import StickyPartitioner

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize("data,expected", JAVA_VECTORS)
def test_murmur2_java_vectors(impl, data, expected):
    assert impl.partitioner.murmur2(data) == expected
    assert impl.partitioner.murmur2(bytearray(data)) == expected


def test_partition_for_key(impl):
    # toPositive(murmur2) % n
    assert impl.partitioner.partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    with pytest.raises(ValueError):
        impl.partitioner.partition_for_key(b"x", 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=64), n=st.integers(1, 1000))
def test_twins_agree_with_each_other_and_kafka_python(impl_pair, data, n):
    pure, compiled = impl_pair
    h = pure.partitioner.murmur2(data)
    assert compiled.partitioner.murmur2(data) == h
    assert -2 ** 31 <= h < 2 ** 31
    kp = pytest.importorskip("kafka.partitioner.default")
    # kafka-python returns the same 32 bits unsigned
    assert kp.murmur2(data) == h & 0xFFFFFFFF
    assert compiled.partitioner.partition_for_key(data, n) == \
        pure.partitioner.partition_for_key(data, n)


def _cluster(partitions, leaders):
    return Cluster(nodes={1: ("h", 1, None)}, partitions=[
        PartitionInfo("t", p, leaders.get(p, 1)) for p in range(partitions)])


def test_sticky_partition_moves_after_a_batch():
    cluster = _cluster(4, {})
    sp = StickyPartitioner(100)
    first = sp.partition("t", cluster)
    sp.update("t", first, 60, cluster)
    assert sp.partition("t", cluster) == first
    sp.update("t", first, 60, cluster)
    second = sp.partition("t", cluster)
    assert second != first


def test_sticky_partition_prefers_available_leaders():
    cluster = _cluster(3, {0: -1, 2: -1})
    sp = StickyPartitioner(10)
    for _ in range(20):
        p = sp.partition("t", cluster)
        assert p == 1
        sp.update("t", p, 10, cluster)
