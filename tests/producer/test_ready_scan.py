"""The ready scan and the drain (``RecordAccumulator.ready`` / ``.drain``,
the senderloop twin's ``accumulator_ready`` / ``accumulator_drain``) walk
the partitions with their leaders kept between passes (``leader_scan``:
remade for a new Cluster or a new partition, never a stale leader) and read
the batch's own slots at their offsets once compiled: what they answer is
Kafka's ``RecordAccumulator.ready`` / ``drain`` either way."""
from kchannel.client.metadata import Cluster, PartitionInfo, TopicPartition
from kchannel.producer import accumulator as accumulator_module
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator

LINGER = 5
BATCH = 1024
NODES = {1: ("h", 1, None), 2: ("h", 2, None)}
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _scan_cluster(leaders):
    return Cluster(nodes=NODES, partitions=[PartitionInfo("t", p, leader)
                                            for p, leader in leaders.items()])


def _scan_accumulator(clock):
    return RecordAccumulator(BATCH, LINGER, 100, 1000, 120000, 1 << 20, lambda: clock[0])


def _scan_append(acc, tp, value=b"v"):
    acc.append(tp, QueuedRecord(0, None, value, ()), len(value) + 8, None, -1, len(value), 0)


def test_a_new_cluster_s_leader_is_used_at_once():
    clock = [1000]
    acc = _scan_accumulator(clock)
    _scan_append(acc, T0)
    first = _scan_cluster({0: 1})
    now = 1000 + LINGER
    assert acc.ready(first, now)[0] == {1}
    assert acc.ready(first, now)[0] == {1}
    # The leader moves (a new Metadata response: a new Cluster)
    moved = _scan_cluster({0: 2})
    assert acc.ready(moved, now)[0] == {2}
    assert acc.drain(moved, {1}, 1 << 20, now, None) == {}
    drained = acc.drain(moved, {2}, 1 << 20, now, None)
    assert [b.tp for b in drained[2]] == [T0]
    # ... and back to an unknown leader
    _scan_append(acc, T0)
    ready, _, unknown = acc.ready(_scan_cluster({}), now + LINGER)
    assert (ready, unknown) == (set(), {"t"})


def test_a_partition_first_met_after_a_scan_is_scanned_and_drained():
    clock = [1000]
    acc = _scan_accumulator(clock)
    cluster = _scan_cluster({0: 1, 1: 2})
    _scan_append(acc, T0)
    now = 1000 + LINGER
    assert acc.ready(cluster, now)[0] == {1}
    # a batch for a partition the scans have not met yet
    _scan_append(acc, T1)
    assert acc.ready(cluster, now)[0] == {1, 2}
    drained = acc.drain(cluster, {1, 2}, 1 << 20, now, None)
    assert {node: [b.tp for b in batches] for node, batches in drained.items()} == \
        {1: [T0], 2: [T1]}
    # nothing left, both partitions' deques now empty
    assert acc.ready(cluster, now) == (set(), 2 ** 31 - 1, frozenset())


def test_the_leaders_are_kept_between_scans_of_one_cluster():
    # (the cost: no leaders.get(tp) per partition and scan while neither
    # the cluster nor the partitions change)
    clock = [1000]
    acc = _scan_accumulator(clock)
    cluster = _scan_cluster({0: 1, 1: 2})
    _scan_append(acc, T0)
    acc.ready(cluster, 1000)
    kept = acc._scan
    assert kept == [(T0, acc.batches[T0], 1)]
    acc.ready(cluster, 1001)
    acc.drain(cluster, {1}, 1 << 20, 1000 + LINGER, None)
    assert acc._scan is kept
    _scan_append(acc, T1)
    acc.ready(cluster, 1002)
    assert acc._scan == [(T0, acc.batches[T0], 1), (T1, acc.batches[T1], 2)]
    other = _scan_cluster({0: 2, 1: 2})
    acc.ready(other, 1002)
    assert [leader for _, _, leader in acc._scan] == [2, 2]


def test_linger_size_and_the_drain_s_writes_read_the_batch_itself():
    clock = [1000]
    acc = _scan_accumulator(clock)
    cluster = _scan_cluster({0: 1, 1: 2})
    _scan_append(acc, T0)
    # lingering: not ready, the check due when linger.ms is over
    assert acc.ready(cluster, 1002)[:2] == (set(), LINGER - 2)
    assert acc.ready(cluster, 1000 + LINGER)[0] == {1}
    # a full batch is ready before linger.ms (estimated size >= batch.size)
    _scan_append(acc, T1, b"x" * (BATCH - 40))
    full = acc.batches[T1][0]
    assert full.estimated_size >= BATCH and len(acc.batches[T1]) == 1
    assert acc.ready(cluster, 1001)[0] == {2}
    # a closed one too (a retried batch, say: never appended to again)
    acc.batches[T1].popleft()
    _scan_append(acc, T1)
    acc.batches[T1][0].closed = True
    assert acc.ready(cluster, 1001)[0] == {2}
    # the drain marks what it took: closed, drained now
    batch = acc.batches[T0][0]
    drained = acc.drain(cluster, {1}, 1 << 20, 1234, None)
    assert drained[1] == [batch]
    assert (batch.closed, batch.drained_ms) == (True, 1234)
    # memory exhausted (an append waits): every partition is ready at once
    _scan_append(acc, T0)
    acc.waiters = 1
    try:
        assert acc.ready(cluster, 1001)[0] == {1, 2}
    finally:
        acc.waiters = 0


def test_the_drain_s_request_size_counts_each_batch_s_estimate():
    clock = [1000]
    acc = _scan_accumulator(clock)
    two = Cluster(nodes=NODES, partitions=[PartitionInfo("t", 0, 1), PartitionInfo("t", 1, 1)])
    _scan_append(acc, T0, b"x" * 400)
    _scan_append(acc, T1, b"y" * 400)
    a, b = acc.batches[T0][0], acc.batches[T1][0]
    # one request holds the first batch only when both would exceed max_size
    drained = acc.drain(two, {1}, a.estimated_size + b.estimated_size - 1, 1000, None)
    assert len(drained[1]) == 1
    rest = acc.drain(two, {1}, a.estimated_size + b.estimated_size, 1000, None)
    assert len(drained[1]) + len(rest[1]) == 2
    assert {x.tp for x in drained[1] + rest[1]} == {T0, T1}


def test_the_twin_reads_a_subclass_s_batches_by_attribute():
    # a batch whose type is not the one whose slot offsets were read (here
    # a subclass: its slots are its base's) is read through its attributes
    class Batch(accumulator_module.ProducerBatch):
        __slots__ = ("extra",)

    clock = [1000]
    acc = _scan_accumulator(clock)
    cluster = _scan_cluster({0: 1})
    _scan_append(acc, T0)              # the accumulator's own batch type first
    acc.ready(cluster, 1000)
    acc.batches[T0].popleft()
    odd = Batch(T0, 1000, 0)
    odd.estimated_size = BATCH
    acc.batches[T0].append(odd)
    assert acc.ready(cluster, 1001)[0] == {1}
    drained = acc.drain(cluster, {1}, 1 << 20, 1001, None)
    assert drained[1] == [odd] and odd.closed and odd.drained_ms == 1001
