"""``delivery.timeout.ms`` for batches still waiting in the accumulator:
the ready() scan tells the Sender whether any partition's oldest batch is
due (``expiry_due``), whatever its leader's state, and ``expired_batches``
then takes exactly those (Kafka's ``RecordAccumulator.expiredBatches``)."""
from kchannel.client.metadata import Cluster, PartitionInfo, TopicPartition
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator

TIMEOUT = 1000


def test_ready_scan_flags_expired_batches_with_and_without_a_leader():
    clock = [0]
    acc = RecordAccumulator(1024, 5, 100, 1000, TIMEOUT, 1 << 20, lambda: clock[0])
    with_leader, without = TopicPartition("t", 0), TopicPartition("t", 1)
    cluster = Cluster(nodes={1: ("localhost", 9092, None)},
                      partitions=[PartitionInfo("t", 0, 1), PartitionInfo("t", 1, -1)])
    acc.append(without, QueuedRecord(0, None, b"a", ()), 3, None, -1, 1, 0)
    clock[0] = 400
    acc.append(with_leader, QueuedRecord(400, None, b"b", ()), 3, None, -1, 1, 0)
    acc.ready(cluster, TIMEOUT - 1)
    assert acc.expiry_due is False
    assert acc.expired_batches(TIMEOUT - 1) == []
    # The leaderless partition's batch is due first (unknown leader: the
    # scan's early exit comes after the expiry check).
    ready, _, unknown = acc.ready(cluster, TIMEOUT)
    assert (ready, unknown, acc.expiry_due) == ({1}, {"t"}, True)
    assert [b.tp for b in acc.expired_batches(TIMEOUT)] == [without]
    acc.ready(cluster, TIMEOUT)
    assert acc.expiry_due is False
    acc.ready(cluster, 400 + TIMEOUT)
    assert acc.expiry_due is True
    assert [b.tp for b in acc.expired_batches(400 + TIMEOUT)] == [with_leader]
