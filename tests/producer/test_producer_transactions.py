"""Transactions of kchannel.Producer against Apache Kafka itself (the
session's ``kafka_broker``, transaction.version 2): committed records are
visible to read_committed consumers (kchannel's, confluent-kafka's and
Java's console consumer), aborted ones never; offsets sent to a transaction
are committed only with it; a second producer with the same
transactional.id fences the first; Java's transactional producer and
kchannel read each other's transactions."""
import time

import pytest

from kchannel import Consumer, Producer
from kchannel.client import KafkaClient
from kchannel.client.metadata import TopicPartition
from kchannel.errors import IllegalStateError, ProducerFencedError, TransactionAbortedError
from kchannel.producer.transaction_manager import State
from tests.fixtures.records import create_topic, topic_name
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.interop]

END = b"end"


def _read_committed_kchannel(bootstrap, topic, partitions, until=END):
    """Every value of ``topic`` a read_committed kchannel consumer sees, up
    to the record ``until`` (the last transaction of a test)."""
    values = []
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "isolation.level": "read_committed"}) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.time() + 30
        while until not in values and time.time() < deadline:
            values.extend(r.value for r in c.poll(0.5))
    return values


def _read_committed_confluent(bootstrap, topic, partitions, until=END):
    from confluent_kafka import Consumer as CConsumer
    from confluent_kafka import TopicPartition as CTP
    c = CConsumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{topic}",
                   "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([CTP(topic, p, 0) for p in range(partitions)])
    values = []
    deadline = time.time() + 30
    try:
        while until not in values and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                values.append(m.value())
    finally:
        c.close()
    return values


def _producer(bootstrap, tid, **extra):
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                     "linger.ms": 5, **extra})


def test_commit_and_abort_seen_by_read_committed_consumers(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("txn"), partitions=2)
    # A long linger: the record sent just before an abort below is still
    # buffered then (commit_transaction and flush send at once regardless).
    with _producer(plain, f"tx-{topic}", **{"linger.ms": 2000}) as p:
        with pytest.raises(IllegalStateError, match="initTransactions"):
            p.send(topic, b"x")
        p.init_transactions(30)
        assert p._txn.state is State.READY
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(topic, b"x")
        epochs = []
        during_commit = []

        def send_while_committing(metadata, exc):
            # The network thread acknowledges this record while
            # commit_transaction waits: no record may join the transaction
            # now (the check is per batch, the batches are closed).
            try:
                during_commit.append(p.send(topic, b"late", partition=0))
            except IllegalStateError as e:
                during_commit.append(e)
        for label, commit in ((b"a", True), (b"b", False), (b"c", True), (b"d", False)):
            p.begin_transaction()
            futures = [p.send(topic, label + b"%d" % i, key=b"%d" % i,
                              callback=send_while_committing if label == b"a" and i == 0
                              else None) for i in range(6)]
            if commit:
                p.commit_transaction(30)
                assert all(f.get(0).offset >= 0 for f in futures)
                # The topic's metadata is known now: the fast path refuses
                # it too (the partition check when its batch opens).
                with pytest.raises(IllegalStateError, match="begin_transaction"):
                    p.send(topic, b"x", partition=0)
            else:
                p.flush(30)    # written to the log, then aborted
                p.abort_transaction(30)
            epochs.append(p._sender.producer_epoch)
        # An abort before the records were sent fails them.
        p.begin_transaction()
        unsent = p.send(topic, b"never", partition=0)
        p.abort_transaction(30)
        with pytest.raises(TransactionAbortedError):
            unsent.get(10)
        p.begin_transaction()
        p.send(topic, END, partition=1)
        p.commit_transaction(30)
        assert len(during_commit) == 1 and isinstance(during_commit[0], IllegalStateError), \
            during_commit
        if p._txn.transaction_v2:
            # KIP-890: every EndTxn bumps the epoch.
            assert epochs == sorted(set(epochs))
    expected = sorted([b"a%d" % i for i in range(6)] + [b"c%d" % i for i in range(6)] + [END])
    assert sorted(_read_committed_kchannel(plain, topic, 2)) == expected
    assert sorted(_read_committed_confluent(plain, topic, 2)) == expected
    # read_uncommitted sees the aborted records too (not the unsent one)
    with Consumer({"bootstrap.servers": plain, "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition(topic, p) for p in range(2)])
        values = []
        deadline = time.time() + 30
        while len(values) < 25 and time.time() < deadline:
            values.extend(r.value for r in c.poll(0.5))
    assert sorted(values) == sorted(expected + [b"b%d" % i for i in range(6)]
                                    + [b"d%d" % i for i in range(6)])


# KIP-848: the group metadata carries the member epoch, which TxnOffsetCommit checks.
@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_consume_transform_produce_commits_offsets_with_the_transaction(kafka_broker,
                                                                         group_protocol):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("ctp-in"), partitions=2)
    sink = create_topic(plain, topic_name("ctp-out"), partitions=2)
    group = f"g-{source}"
    with Producer({"bootstrap.servers": plain}) as p:
        for i in range(20):
            p.send(source, b"%d" % i, key=b"%d" % i)
    tps = [TopicPartition(source, 0), TopicPartition(source, 1)]
    consumer = Consumer({"bootstrap.servers": plain, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "group.protocol": group_protocol})
    producer = _producer(plain, f"ctp-{source}")
    try:
        consumer.subscribe([source])
        producer.init_transactions(30)
        batch = []
        deadline = time.time() + 30
        while len(batch) < 20 and time.time() < deadline:
            batch.extend(consumer.poll(0.5))
        assert len(batch) == 20
        metadata = consumer.group_metadata()
        assert metadata.group_id == group and metadata.generation_id >= 1 and metadata.member_id
        offsets = {}
        for r in batch:
            offsets[TopicPartition(r.topic, r.partition)] = r.offset + 1
        # Aborted: neither the output nor the offsets.
        producer.begin_transaction()
        for r in batch:
            producer.send(sink, b"out-" + r.value, key=r.key)
        producer.send_offsets_to_transaction(offsets, metadata)
        producer.abort_transaction(30)
        assert consumer.committed(tps) == {tp: None for tp in tps}
        # Committed: both.
        producer.begin_transaction()
        for r in batch:
            producer.send(sink, b"out-" + r.value, key=r.key)
        producer.send(sink, END, partition=0)
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction(30)
        committed = consumer.committed(tps)
        assert {tp: om.offset for tp, om in committed.items()} == offsets
        # Kafka's KafkaProducerMetrics: the time spent in each call, in ns.
        names = {"flush-time-ns-total", "metadata-wait-time-ns-total",
                 *(f"txn-{w}-time-ns-total" for w in
                   ("init", "begin", "send-offsets", "commit", "abort"))}
        spent = {m.name: v for m, v in producer.metrics().items()
                 if m.group == "producer-metrics" and m.name in names}
        assert set(spent) == names
        # (no flush() called; the sink's metadata was waited for by the first send)
        assert spent.pop("flush-time-ns-total") == 0
        assert all(v > 0 for v in spent.values()), spent
        producer.flush(10)
        assert producer.metrics()[next(m for m in producer.metrics()
                                       if m.name == "flush-time-ns-total")] > 0
    finally:
        producer.close()
        consumer.close()
    out = _read_committed_kchannel(plain, sink, 2)
    assert sorted(out) == sorted([b"out-%d" % i for i in range(20)] + [END])


def test_zombie_producer_is_fenced(kafka_broker):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("fence"), partitions=1)
    tid = f"zombie-{topic}"
    zombie = _producer(plain, tid)
    try:
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie")
        zombie.flush(30)
        with _producer(plain, tid) as successor:
            # Fences the zombie and aborts its open transaction.
            successor.init_transactions(30)
            # Its EndTxn answers PRODUCER_FENCED.
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction(30)
            assert zombie._txn.state is State.FATAL_ERROR
            with pytest.raises(ProducerFencedError):
                zombie.begin_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.send(topic, b"late")
            successor.begin_transaction()
            successor.send(topic, END)
            successor.commit_transaction(30)
    finally:
        zombie.close(5)
    assert _read_committed_kchannel(plain, topic, 1) == [END]


def test_close_aborts_the_open_transaction(kafka_broker):
    """Without the abort, the open transaction would hold read_committed
    consumers at its first offset for transaction.timeout.ms (60 s)."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("txn-close"), partitions=1)
    p = _producer(plain, f"open-{topic}")
    p.init_transactions(30)
    p.begin_transaction()
    p.send(topic, b"open")
    p.flush(30)
    p.close()
    with _producer(plain, f"next-{topic}") as q:
        q.init_transactions(30)
        q.begin_transaction()
        q.send(topic, END)
        q.commit_transaction(30)
    assert _read_committed_kchannel(plain, topic, 1) == [END]


def _kchannel_transactions(bootstrap, topic, txns):
    """Write ``txns`` ([(value, commit)]) with a new transactional
    producer; returns whether it used transaction version 2."""
    with _producer(bootstrap, f"kch-{topic}-{len(txns)}") as p:
        p.init_transactions(30)
        for value, commit in txns:
            p.begin_transaction()
            p.send(topic, value)
            if commit:
                p.commit_transaction(30)
            else:
                p.flush(30)
                p.abort_transaction(30)
        return p._txn.transaction_v2


_FEATURES = "org.apache.kafka.tools.FeatureCommand"


def _finalized_transaction_version(bootstrap):
    """The transaction.version a new connection's ApiVersions reports
    finalized (what a producer reads it from)."""
    with KafkaClient({"bootstrap.servers": bootstrap}) as client:
        client.connect()
        for f in client.api_versions_response.get("finalized_features") or ():
            if f["name"] == "transaction.version":
                return f["max_version_level"]
    return 0


def _wait_for_transaction_version(bootstrap, level):
    """UpdateFeatures is answered once the controller has committed the
    new level; the broker answering ApiVersions replays it a moment later
    (KRaft): wait until it reports ``level``."""
    wait_until(lambda: _finalized_transaction_version(bootstrap) == level,
               f"the broker to replay transaction.version={level}")


@pytest.mark.slow
def test_java_and_kchannel_read_each_others_transactions(kafka_broker, kafka_java):
    """Under transaction version 2 (the broker's default), then version 1
    (the feature downgraded for the test, restored after): Java's
    transactional producer and console consumer and kchannel read each
    other's committed transactions only; under version 1 kchannel's offsets
    go with the commit, not with the abort."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    from_java = create_topic(plain, topic_name("txn-java"), partitions=1)
    from_kchannel = create_topic(plain, topic_name("txn-kch"), partitions=1)
    assert _kchannel_transactions(plain, from_kchannel, [(b"k1", True), (b"k2", False),
                                                         (b"k3", True)])

    def features(*args):
        return {"op": "tool", "main": _FEATURES, "args": ["--bootstrap-server", plain, *args]}
    try:
        first = kafka_java.probe([
            {"id": "produce", "op": "transactions", "config": {"bootstrap.servers": plain},
             "topic": from_java, "transactionalId": f"java-{from_java}",
             "txns": [[True, ["j1", "j2"]], [False, ["j3"]], [True, ["end"]]]},
            dict(features("downgrade", "--feature", "transaction.version=1"), id="tv1"),
        ])
        assert first["tv1"]["ok"] and first["tv1"].get("exit", 0) == 0, first["tv1"]
        _wait_for_transaction_version(plain, 1)
        # Version 1: AddPartitionsToTxn, Produce v11, EndTxn v4.
        assert not _kchannel_transactions(plain, from_kchannel, [(b"k4", True), (b"k5", False),
                                                                 (b"k6", True)])
        # and AddOffsetsToTxn then TxnOffsetCommit v4 for offsets.
        group, tp = f"g1-{from_java}", TopicPartition(from_java, 0)
        with _producer(plain, f"offsets-{from_java}") as p:
            p.init_transactions(30)
            for offset, commit in ((2, True), (5, False)):
                p.begin_transaction()
                p.send_offsets_to_transaction({tp: offset}, group)   # a group id string
                if commit:
                    p.commit_transaction(30)
                else:
                    p.abort_transaction(30)
            assert not p._txn.transaction_v2
        with Consumer({"bootstrap.servers": plain, "group.id": group}) as c:
            assert c.committed([tp])[tp].offset == 2
    finally:
        second = kafka_java.probe([
            dict(features("upgrade", "--feature", "transaction.version=2"), id="tv2"),
            # (its first poll joins a group and fetches within the timeout:
            # a wait bound a loaded machine's JVM must not miss)
            {"id": "consume", "op": "tool",
             "main": "org.apache.kafka.tools.consumer.ConsoleConsumer",
             "args": ["--bootstrap-server", plain, "--topic", from_kchannel, "--from-beginning",
                      "--isolation-level", "read_committed", "--timeout-ms", "15000",
                      "--max-messages", "5"]},
        ])
        assert second["tv2"]["ok"] and second["tv2"].get("exit", 0) == 0, second["tv2"]
        # (the session broker's later tests expect version 2 again)
        _wait_for_transaction_version(plain, 2)
    assert first["produce"]["ok"], first["produce"]
    assert first["produce"]["count"] == 4
    # Java's consumer: the committed records, then nothing before its timeout.
    assert second["consume"]["stdout"].split() == ["k1", "k3", "k4", "k6"], second["consume"]
    assert _read_committed_kchannel(plain, from_java, 1) == [b"j1", b"j2", b"end"]


def test_a_transaction_takes_about_one_sender_pass_per_request(kafka_broker):
    """Every pass of the Sender's loop costs CPU (a ready() scan, a poll,
    the transaction manager's turn): a committed transaction of several
    batches takes about a pass per request it sends (its Produce requests
    and EndTxn, a response ending each poll), not a busy loop while its
    batches wait for the first one of the epoch (every transaction's under
    transaction version 2) or its EndTxn waits for their responses."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("txn-passes"), partitions=1)
    counts = {"passes": 0, "requests": 0}
    # Kafka's defaults (batch.size 16384): about seven batches a transaction.
    with Producer({"bootstrap.servers": plain, "transactional.id": f"passes-{topic}"}) as p:
        p.init_transactions(30)
        # (every request, the Sender's Produce requests included, goes
        # through the network client's send)
        sender, client = p._sender, p._client.client
        run_once, send = sender.run_once, client.send

        def counted_run_once():
            counts["passes"] += 1
            return run_once()

        def counted_send(*args, **kwargs):
            counts["requests"] += 1
            return send(*args, **kwargs)
        sender.run_once, client.send = counted_run_once, counted_send
        value = b"x" * 100
        for _ in range(5):
            p.begin_transaction()
            for _ in range(1000):
                p.send(topic, value)
            p.commit_transaction(30)
        assert p._txn.transaction_v2
        # the broker checks each transaction's first sequences: no batch
        # waits for the first one's acknowledgement
        assert sender.sequences.first_sequence_checked
        sender.run_once, client.send = run_once, send
    assert counts["requests"] >= 5 * 7, counts
    assert counts["passes"] <= 3 * counts["requests"], counts


def test_a_transactional_result_times_out_then_releases_every_waiter():
    """Kafka's TransactionalRequestResult: a wait that times out raises
    and leaves the operation going; once the Sender completes it, a second
    call, several threads at once, and later calls all return (or raise
    its error)."""
    import threading
    from kchannel.client import RequestTimeoutError
    from kchannel.producer.transaction_manager import TransactionalRequestResult

    result = TransactionalRequestResult("commitTransaction")
    began = time.monotonic()
    with pytest.raises(RequestTimeoutError, match="awaiting commitTransaction"):
        result.wait(0.05)
    assert time.monotonic() - began >= 0.04
    assert not result.is_completed
    returned = []
    waiters = [threading.Thread(target=lambda: (result.wait(5), returned.append(1)))
               for _ in range(3)]
    for t in waiters:
        t.start()
    result.done()
    result.done()         # a second completion keeps the first
    for t in waiters:
        t.join(5)
    assert returned == [1, 1, 1]
    result.wait(0)
    result.wait()
    assert result.is_successful

    failed = TransactionalRequestResult("abortTransaction")
    failed.fail(TransactionAbortedError("aborted"))
    for _ in range(2):
        with pytest.raises(TransactionAbortedError):
            failed.wait(1)
    assert failed.is_completed and not failed.is_successful
