"""Idempotence completed (issue 25 item 3): KIP-360's epoch bump after a
sequence gap, and the split of batches Apache Kafka rejects with
MESSAGE_TOO_LARGE.  The books (``ProducerSequences`` and the accumulator's
renumbering) first, without a broker; then against the session's Apache
Kafka, every record read back."""
import pytest

from kchannel import Producer
from kchannel.client.metadata import TopicPartition
from kchannel.errors import KafkaError
from kchannel.producer.accumulator import QueuedRecord, RecordAccumulator, record_body_size
from kchannel.producer.idempotence import MAX_EPOCH, ProducerSequences
from kchannel.protocol import records as R
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from tests.fixtures.records import consume_confluent, topic_name

TP = TopicPartition("t", 0)


def _accumulator():
    return RecordAccumulator(batch_size=1000, linger_ms=0, retry_backoff_ms=0,
                             retry_backoff_max_ms=0, delivery_timeout_ms=120_000,
                             buffer_memory=1 << 20, time=lambda: 0)


def _append(acc, tp, n, size=100):
    futures = []
    for i in range(n):
        value = b"%d-" % i + b"v" * size
        record = QueuedRecord(0, None, value, ())
        f, _, _ = acc.append(tp, record, record_body_size(None, value, ()), None, 0,
                             len(value), 1000)
        futures.append(f)
    return futures


def test_epoch_bump_renumbers_waiting_batches_from_zero():
    acc = _accumulator()
    seqs = ProducerSequences()
    seqs.set_producer_id(7, 3)
    _append(acc, TP, 30)                   # three batches of 9-10 records
    dq = acc.batches[TP]
    first, second = dq.popleft(), dq.popleft()
    assert seqs.assign(TP, first, [])
    # a broker with no state for the epoch takes any sequence: one batch in
    # flight until the first is written
    assert not seqs.assign(TP, second, [first])
    seqs.acked(first)
    assert seqs.assign(TP, second, [])
    assert (first.base_sequence, second.base_sequence) == (0, first.record_count)
    # the second failed OUT_OF_ORDER_SEQUENCE_NUMBER while being the next one
    assert seqs.is_next_sequence(TP, second.base_sequence)
    acc.reenqueue(second, 0)
    seqs.request_epoch_bump(TP)
    assert not seqs.assign(TP, dq[-1], [])  # nothing new while the bump is pending
    assert seqs.bump_epoch(acc.restart_sequences)
    assert (seqs.producer_id, seqs.producer_epoch) == (7, 4)
    assert dq[0] is second and (second.producer_epoch, second.base_sequence) == (4, 0)
    assert second.encoded is None
    third = dq[1]
    assert not third.has_sequence()
    assert seqs.assign(TP, third, [])
    assert (third.producer_epoch, third.base_sequence) == (4, second.record_count)


def test_new_epoch_waits_for_batches_in_flight_under_the_old_one():
    acc = _accumulator()
    seqs = ProducerSequences()
    seqs.set_producer_id(7, 0)
    other = TopicPartition("t", 1)
    _append(acc, TP, 1)
    _append(acc, other, 20)
    b_other = acc.batches[other].popleft()
    assert seqs.assign(other, b_other, [])
    seqs.request_epoch_bump(TP)
    assert seqs.bump_epoch(acc.restart_sequences)
    # the other partition's next batch waits for its old-epoch batch in flight
    nxt = acc.batches[other][0]
    assert not seqs.assign(other, nxt, [b_other])
    assert seqs.assign(other, nxt, [])
    assert (nxt.producer_epoch, nxt.base_sequence) == (1, 0)


def test_new_epoch_after_a_written_batch_pipelines_from_sequence_zero():
    """Once a batch of the producer id was written to the partition, the
    broker takes a new epoch only from sequence 0: the epoch's batches go
    together (each transaction's under transaction version 2), while a
    partition never written to, or a new producer id, keeps one batch in
    flight until the first is written, unless the broker checks first
    sequences itself (transaction version 2)."""
    acc = _accumulator()
    seqs = ProducerSequences()
    seqs.set_producer_id(7, 0)
    other = TopicPartition("t", 1)
    _append(acc, TP, 50)                   # five batches of 9-10 records
    _append(acc, other, 20)
    b1 = acc.batches[TP].popleft()
    assert seqs.assign(TP, b1, [])
    seqs.acked(b1)
    seqs.set_producer_id(7, 1)             # EndTxn v5's bumped epoch
    b2, b3 = acc.batches[TP].popleft(), acc.batches[TP].popleft()
    assert seqs.assign(TP, b2, [])
    assert seqs.assign(TP, b3, [b2])        # not held back behind b2
    assert [(b.producer_epoch, b.base_sequence) for b in (b2, b3)] == \
        [(1, 0), (1, b2.record_count)]
    # nothing of the epoch acknowledged yet: b2 is still the next one
    assert seqs.is_next_sequence(TP, 0) and not seqs.is_next_sequence(TP, b3.base_sequence)
    seqs.acked(b2)
    assert seqs.is_next_sequence(TP, b3.base_sequence)
    # never written to under this producer id: the first batch goes alone
    o1, o2 = acc.batches[other].popleft(), acc.batches[other].popleft()
    assert seqs.assign(other, o1, [])
    assert not seqs.assign(other, o2, [o1])
    # a new producer id (fenced, epoch exhausted): the broker may hold no state
    seqs.set_producer_id(8, 0)
    b4, b5 = acc.batches[TP].popleft(), acc.batches[TP].popleft()
    assert seqs.assign(TP, b4, [])
    assert not seqs.assign(TP, b5, [b4])
    # transaction version 2: the broker checks the first sequence itself
    seqs.first_sequence_checked = True
    assert seqs.assign(TP, b5, [b4])
    assert b5.base_sequence == b4.record_count


def test_exhausted_epoch_resets_the_producer_id():
    seqs = ProducerSequences()
    seqs.set_producer_id(7, MAX_EPOCH)
    seqs.request_epoch_bump(TP)
    assert not seqs.bump_epoch(lambda *a: 0)
    assert not seqs.has_producer_id() and TP in seqs.bump_partitions


def test_split_keeps_order_sequences_and_per_record_results():
    acc = _accumulator()
    acc.batch_size = 100_000
    got = []
    futures = []
    for i in range(40):
        value = b"r%d" % i
        record = QueuedRecord(0, None, value, ())
        f, _, _ = acc.append(TP, record, record_body_size(None, value, ()),
                             lambda md, exc, i=i: got.append((i, md, exc)), 0, len(value), 1000)
        futures.append(f)
    big = acc.batches[TP].popleft()
    big.producer_id, big.producer_epoch, big.base_sequence = 7, 0, 100
    n = acc.split_and_reenqueue(big, 0)
    parts = list(acc.batches[TP])
    # at most half the rejected batch each: two or three parts, in order
    assert n == len(parts) >= 2
    assert all(p.estimated_size <= big.estimated_size // 2 for p in parts)
    assert [r for p in parts for r in p.records] == big.records
    counts = [p.record_count for p in parts]
    assert [p.base_sequence for p in parts] == [100 + sum(counts[:i]) for i in range(n)]
    assert acc.incomplete == set(parts)
    parts[0].complete(500, -1)
    assert not futures[0].done()
    exc = KafkaError(10, "MESSAGE_TOO_LARGE", "too large")
    for part in parts[1:]:
        part.complete(None, None, exc)
    k = counts[0]
    assert [f.get(0).offset for f in futures[:k]] == list(range(500, 500 + k))
    assert all(f.exception() is exc for f in futures[k:])
    with pytest.raises(KafkaError):
        futures[39].get(0)
    assert [i for i, _, _ in got] == list(range(40))
    assert [md.offset for _, md, _ in got[:k]] == list(range(500, 500 + k))
    assert all(e is exc and md is None for _, md, e in got[k:])


# -- against Apache Kafka -------------------------------------------------------

def _topic(bootstrap, prefix, **configs):
    from confluent_kafka.admin import AdminClient, NewTopic
    name = topic_name(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
    return name


@pytest.mark.kafka
def test_sequence_gap_bumps_the_epoch_and_nothing_is_lost(kafka_broker):
    """A record over the topic's max.message.bytes fails after being sent
    with a sequence: the records after it would all fail
    OUT_OF_ORDER_SEQUENCE_NUMBER without a new epoch."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = _topic(plain, "gap", **{"max.message.bytes": "2000"})
    cfg = {"bootstrap.servers": plain, "enable.idempotence": True, "linger.ms": 0,
           "batch.size": 1000, "acks": "all"}
    with Producer(cfg) as p:
        first = p.send(topic, value=b"first").get(30)
        epoch = p._sender.producer_epoch
        big = p.send(topic, value=b"x" * 3000)
        rest = [p.send(topic, value=b"after-%d-" % i + b"y" * 100) for i in range(30)]
        p.flush(60)
        with pytest.raises(KafkaError) as info:
            big.get(0)
        assert info.value.name == "MESSAGE_TOO_LARGE"
        offsets = [f.get(0).offset for f in rest]
        assert p._sender.producer_epoch > epoch
        # and the new epoch keeps working
        last = p.send(topic, value=b"last").get(30)
    assert first.offset == 0 and offsets == list(range(1, 31)) and last.offset == 31
    rows = consume_confluent(plain, topic, 1, 32)
    assert [r[3] for r in rows] == [b"first"] + [b"after-%d-" % i + b"y" * 100
                                                 for i in range(30)] + [b"last"]


@pytest.mark.kafka
@pytest.mark.parametrize("idempotence", [True, False])
def test_batch_rejected_as_too_large_is_split(kafka_broker, idempotence):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = _topic(plain, "split", **{"max.message.bytes": "2000"})
    n = 300
    values = [b"%03d-" % i + b"z" * 100 for i in range(n)]
    acked = []
    cfg = {"bootstrap.servers": plain, "enable.idempotence": idempotence,
           "linger.ms": 100, "batch.size": 16384}
    if not idempotence:
        cfg["max.in.flight.requests.per.connection"] = 1
    with Producer(cfg) as p:
        futures = [p.send(topic, value=v, callback=lambda md, exc: acked.append((md, exc)))
                   for v in values]
        p.flush(60)
        offsets = [f.get(0).offset for f in futures]
        splits = [v for mn, v in p.metrics().items()
                  if mn.group == "producer-metrics" and mn.name == "batch-split-total"]
    assert offsets == list(range(n))
    assert [md.offset for md, exc in acked] == list(range(n))
    assert splits and splits[0] > 0
    rows = consume_confluent(plain, topic, 1, n)
    assert [r[3] for r in rows] == values


# -- a broker that loses the producer's state ------------------------------------

class _ForgetfulBroker:
    """A kchannel Server keeping one partition's log with Kafka's sequence
    checks as brokers before KIP-360 made them (Apache Kafka 4.x accepts any
    sequence once it lost a producer's state, so it never answers
    UNKNOWN_PRODUCER_ID): an unknown producer id is taken only at sequence
    0, else UNKNOWN_PRODUCER_ID.  ``forget()`` drops the producer state, as
    retention deleting the producer's last records did."""

    TOPIC = "forgetful"

    def __init__(self):
        from kchannel.server import Server
        self.log = []                    # (producer epoch, value)
        self.state = {}                  # producer id -> (epoch, last sequence)
        self.answers = []                # error codes of the Produce answers
        self._forget = False
        self.server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
        self.server.register_handler(ApiKey.METADATA, self.metadata)
        self.server.register_handler(ApiKey.INIT_PRODUCER_ID, self.init_producer_id)
        self.server.register_handler(ApiKey.PRODUCE, self.produce, max_version=9)
        self.server.start()
        self.port = self.server.bound_port("PLAINTEXT")

    def forget(self):
        self._forget = True

    def metadata(self, ctx):
        node = self.server.node_id
        return {"brokers": [{"node_id": node, "host": "127.0.0.1", "port": self.port,
                             "rack": None}],
                "cluster_id": "forgetful", "controller_id": node,
                "topics": [{"error_code": 0, "name": self.TOPIC, "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": 0,
                                            "leader_id": node, "leader_epoch": 0,
                                            "replica_nodes": [node], "isr_nodes": [node],
                                            "offline_replicas": []}]}]}

    def init_producer_id(self, ctx):
        return {"error_code": 0, "producer_id": 4242, "producer_epoch": 0}

    def _append(self, raw):
        batch = next(iter(R.iter_batches(raw)))
        pid, epoch, seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        values = [r[3] for r in batch.records()]
        if self._forget:
            self.state.pop(pid, None)
            self._forget = False
        known = self.state.get(pid)
        if known is None:
            if seq != 0:
                return Errors.UNKNOWN_PRODUCER_ID, -1
        elif epoch < known[0]:
            return Errors.INVALID_PRODUCER_EPOCH, -1
        elif epoch > known[0]:
            if seq != 0:
                return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        elif seq <= known[1]:
            return Errors.DUPLICATE_SEQUENCE_NUMBER, -1
        elif seq != known[1] + 1:
            return Errors.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
        self.state[pid] = (epoch, seq + len(values) - 1)
        base = len(self.log)
        self.log.extend((epoch, v) for v in values)
        return 0, base

    def produce(self, ctx):
        out = []
        for topic in ctx.body["topic_data"]:
            parts = []
            for p in topic["partition_data"]:
                code, base = self._append(p["records"])
                self.answers.append(code)
                parts.append({"index": p["index"], "error_code": code, "base_offset": base,
                              "log_append_time_ms": -1, "log_start_offset": 0,
                              "record_errors": [], "error_message": None})
            out.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": out, "throttle_time_ms": 0}

    def close(self):
        self.server.shutdown()


def test_unknown_producer_id_bumps_the_epoch():
    broker = _ForgetfulBroker()
    try:
        with Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 0,
                       "enable.idempotence": True, "retry.backoff.ms": 10}) as p:
            first = [p.send(broker.TOPIC, value=b"%d" % i).get(10).offset for i in range(5)]
            assert p._sender.producer_epoch == 0
            broker.forget()
            rest = [p.send(broker.TOPIC, value=b"%d" % i) for i in range(5, 15)]
            p.flush(10)
            offsets = first + [f.get(0).offset for f in rest]
            assert p._sender.producer_epoch == 1
    finally:
        broker.close()
    assert Errors.UNKNOWN_PRODUCER_ID in broker.answers
    assert offsets == list(range(15))
    assert [v for _, v in broker.log] == [b"%d" % i for i in range(15)]
    assert [e for e, _ in broker.log] == [0] * 5 + [1] * 10
