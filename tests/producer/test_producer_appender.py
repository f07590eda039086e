"""The producer's per-record path (``Appender``, both twins) against a real
broker (Tansu), read back by confluent-kafka.

Records that take the fast path (bytes or no key, bytes value) are
interleaved with records that take the full path (headers, an explicit
partition or timestamp, a callback on a new batch, a sticky partition due
to move on), so both paths append to the same batches.  Whatever path a
record took, its future and its callback report the partition and offset
confluent-kafka reads it at, per-partition order is send order, keyed
records land where Java's partitioner puts them, and null-key records
stick to one partition for ``batch.size`` bytes and then move on."""
import time

import pytest

from kchannel import Producer
from kchannel.producer.partitioner import partition_for_key
from tests.fixtures.records import consume_confluent, create_topic, topic_name

pytestmark = pytest.mark.interop

PARTITIONS = 4


def _records(n):
    """(kind, send kwargs) in a mix that crosses both paths often."""
    out = []
    for i in range(n):
        v = b"v%05d" % i + b"." * (i % 50)
        m = i % 7
        if m == 0:
            out.append(("keyed", dict(value=v, key=b"key-%d" % (i % 13))))
        elif m == 1:
            out.append(("headers", dict(value=v, headers=[("h", b"%d" % i)])))
        elif m == 2:
            out.append(("partition", dict(value=v, partition=i % PARTITIONS)))
        elif m == 3:
            out.append(("timestamp", dict(value=v, timestamp_ms=1_700_000_000_000 + i)))
        elif m == 4:
            out.append(("null-value", dict(value=None, key=b"tomb-%d" % i)))
        else:
            out.append(("sticky", dict(value=v)))
    return out


def test_both_paths_agree_with_what_the_broker_stored(tansu, impl):
    twin, kind = impl.appender, impl.kind
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-{kind}"),
                         partitions=PARTITIONS)
    sends = _records(3000)
    called = {}
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 20,
                   "batch.size": 2048}) as p:
        # Use the twin under test for this producer's per-record path.
        p._appender = twin.Appender(p.append_path)
        p.send = p._appender.send
        futures = []
        for i, (what, kw) in enumerate(sends):
            cb = None
            if i % 5 == 0:
                cb = (lambda i: lambda md, exc: called.setdefault(i, []).append((md, exc)))(i)
            futures.append(p.send(topic, callback=cb, **kw))
        p.flush()
        mds = [f.get(30) for f in futures]
    rows = consume_confluent(tansu.bootstrap, topic, PARTITIONS, len(sends))
    stored = {(r[0], r[1]): r for r in rows}
    assert len(stored) == len(sends)
    last = {}
    used_by_sticky = set()
    for i, ((what, kw), md) in enumerate(zip(sends, mds)):
        part, off, key, value, headers, ts = stored[(md.partition, md.offset)]
        assert (key, value) == (kw.get("key"), kw["value"]), (i, what)
        assert headers == [tuple(h) for h in kw.get("headers", [])]
        assert md.timestamp == ts
        if what == "timestamp":
            assert ts == kw["timestamp_ms"]
        if what == "partition":
            assert part == kw["partition"]
        if kw.get("key") is not None:
            assert part == partition_for_key(kw["key"], PARTITIONS)
        if what == "sticky":
            used_by_sticky.add(part)
        assert md.serialized_value_size == (len(kw["value"]) if kw["value"] is not None
                                            else -1)
        # Per partition, offsets grow in send order.
        assert off > last.get(part, -1), (i, what)
        last[part] = off
    # ~16 KB of null-key records with batch.size 2048: the sticky
    # partition moved on several times.
    assert len(used_by_sticky) > 1
    assert sorted(called) == [i for i in range(len(sends)) if i % 5 == 0]
    for i, got in called.items():
        assert len(got) == 1
        md, exc = got[0]
        assert exc is None and (md.partition, md.offset) == (mds[i].partition, mds[i].offset)


def test_closed_producer_and_serializers_take_the_full_path(tansu, impl):
    twin, kind = impl.appender, impl.kind
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-closed-{kind}"))
    p = Producer({"bootstrap.servers": tansu.bootstrap},
                 value_serializer=lambda v: v.encode())
    p._appender = twin.Appender(p.append_path)
    p.send = p._appender.send
    md = p.send(topic, value="text").get(30)
    assert md.serialized_value_size == 4
    p.send(topic, value="more")          # into the open batch, serializer still called
    p.close()
    from kchannel import errors
    with pytest.raises(errors.KChannelError, match="after producer has been closed"):
        p.send(topic, value="late")


@pytest.mark.parametrize("buffer_memory", [65536, 1 << 20])
def test_sends_beyond_buffer_memory_wait_and_keep_order(tansu, impl, buffer_memory):
    """More bytes than ``buffer.memory``: appends wait for acknowledged
    batches to free memory (first come first served, each woken once its
    memory is free) and every record lands, in order."""
    twin = impl.appender
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-memory-{impl.kind}"),
                         partitions=1)
    n = 3000
    with Producer({"bootstrap.servers": tansu.bootstrap, "buffer.memory": buffer_memory,
                   "batch.size": 16384, "max.block.ms": 30000}) as p:
        p._appender = twin.Appender(p.append_path)
        p.send = p._appender.send
        futures = [p.send(topic, value=b"%06d" % i + b"." * 1018) for i in range(n)]
        assert p.accumulator.used_memory <= buffer_memory
        p.flush()
        offsets = [f.get(30).offset for f in futures]
    assert offsets == list(range(n))
    rows = consume_confluent(tansu.bootstrap, topic, 1, n)
    assert [r[3][:6] for r in rows] == [b"%06d" % i for i in range(n)]


def test_a_record_sent_to_an_idle_network_thread_wakes_it(tansu, impl):
    """The network thread asleep in its poll (nothing to send: it would sleep
    for minutes) is woken by a record that opens a batch, each time, and
    records sent while it is awake are not left behind either."""
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-wake-{impl.kind}"),
                         partitions=1)
    with Producer({"bootstrap.servers": tansu.bootstrap}) as p:
        p._appender = impl.appender.Appender(p.append_path)
        p.send = p._appender.send
        p.send(topic, b"first").get(10)
        offset = 1
        for burst in (1, 1, 50, 1):
            time.sleep(0.05)        # the thread goes back to sleep
            futures = [p.send(topic, b"%d" % i) for i in range(burst)]
            assert [f.get(10).offset for f in futures] == list(range(offset, offset + burst))
            offset += burst


def test_futures_the_caller_keeps_are_its_own_whatever_it_dropped(tansu, impl):
    """The compiled twin reuses the future it returned last once no one else
    holds it (send() without get() is the common case): a future kept, or
    waited on through a done callback, still reports its own record, and
    records whose futures were dropped are all written, in order."""
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-spare-{impl.kind}"),
                         partitions=1)
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 20}) as p:
        p._appender = impl.appender.Appender(p.append_path)
        p.send = p._appender.send
        p.send(topic, b"first").get(10)     # metadata: what follows takes the fast path
        kept, done = {}, []
        for i in range(1, 301):
            f = p.send(topic, b"%d" % i)
            if i % 3 == 0:
                kept[i] = f
            elif i % 7 == 0:
                f.add_done_callback(lambda fut, i=i: done.append((i, fut.get().offset)))
            del f
        assert len({id(f) for f in kept.values()}) == len(kept)
        assert {i: f.get(10).offset for i, f in kept.items()} == {i: i for i in kept}
        p.flush()
        assert sorted(done) == [(i, i) for i in range(1, 301) if i % 3 and i % 7 == 0]
    rows = consume_confluent(tansu.bootstrap, topic, 1, 301)
    assert [r[3] for r in rows] == [b"first"] + [b"%d" % i for i in range(1, 301)]


def test_run_callbacks_builds_each_records_metadata(impl, caplog):
    """``run_callbacks`` (each twin) against the values a batch's records
    must report: offset base + index (-1 when unknown), the record's own
    timestamp or the log append time, its key and value sizes; metadata a
    callback keeps stays its own (the compiled twin refills one that no
    callback kept, its offset int in place when nothing else holds it), so
    does an offset a callback keeps, and a callback that raises is logged
    while the next ones still run."""
    from kchannel.producer.accumulator import RecordMetadata
    from kchannel.protocol.records import QueuedRecord
    n = 40
    records = [QueuedRecord(1_700_000_000_000 + 3 * i, None, b"v" * i, ()) for i in range(n)]
    sizes = [(i % 5 - 1, i) for i in range(n)]
    for base, append_time in ((500, -1), (-1, -1), (500, 1_800_000_000_000)):
        seen, kept, offsets = [], [], []

        def cb(md, exc, kept=kept, seen=seen, offsets=offsets):
            assert exc is None and type(md) is RecordMetadata
            seen.append((md.topic, md.partition, md.offset, md.timestamp,
                         md.serialized_key_size, md.serialized_value_size))
            if md.offset % 4 == 1 or (base < 0 and len(seen) % 4 == 1):
                kept.append((md, seen[-1]))
            elif base >= 0 and md.offset % 4 == 3:
                offsets.append(md.offset)

        def boom(md, exc):
            raise RuntimeError("callback failed")

        # (by index, None for a record without one; the last records
        # without one are not in the list)
        callbacks = [None if i % 3 == 2 else boom if i == 7 else cb for i in range(n - 3)]
        with caplog.at_level("ERROR", logger="kchannel.producer.accumulator"):
            caplog.clear()
            impl.appender.run_callbacks(callbacks, "t", 3, base, append_time, records, sizes)
        assert [r.getMessage() for r in caplog.records] == [
            "Error executing user-provided callback on message for topic-partition"]
        want = [("t", 3, base + i if base >= 0 else -1,
                 append_time if append_time >= 0 else records[i].timestamp,
                 sizes[i][0], sizes[i][1]) for i in range(n - 3) if i % 3 != 2 and i != 7]
        assert seen == want
        assert kept and len({id(md) for md, _ in kept}) == len(kept)
        assert offsets == [base + i for i in range(n - 3)
                           if base >= 0 and i % 3 != 2 and i != 7 and (base + i) % 4 == 3]
        for md, values in kept:
            assert (md.topic, md.partition, md.offset, md.timestamp, md.serialized_key_size,
                    md.serialized_value_size) == values


def test_flush_returns_with_every_callback_run(tansu, impl):
    """flush() is woken when the last batch is released, which Kafka's
    order puts after the batch's futures and callbacks: whatever the
    batches in flight, every callback has run and every future is done
    when flush() returns."""
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-flush-{impl.kind}"),
                         partitions=1)
    with Producer({"bootstrap.servers": tansu.bootstrap, "batch.size": 2048}) as p:
        p._appender = impl.appender.Appender(p.append_path)
        p.send = p._appender.send
        p.send(topic, b"first").get(10)
        for round_ in range(5):
            seen = []
            futures = [p.send(topic, b"r%d-%04d" % (round_, i) + b"." * 90,
                              callback=lambda md, exc, i=i: seen.append(i))
                       for i in range(300)]
            p.flush()
            assert len(seen) == 300 and all(f.done() for f in futures)
    rows = consume_confluent(tansu.bootstrap, topic, 1, 1501)
    assert len(rows) == 1501


def test_threads_sending_at_once_each_keep_their_order(tansu, impl):
    """Application threads appending to the same batches while the network
    thread drains them (the compiled twin takes the accumulator's lock only
    when another thread holds it): every record is written once, at the
    offset its future and its callback report, and each thread's records
    in its send order."""
    import threading
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-threads-{impl.kind}"),
                         partitions=1)
    threads, n = 4, 1500
    futures = {t: [] for t in range(threads)}
    called = {}
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 1,
                   "batch.size": 4096}) as p:
        p._appender = impl.appender.Appender(p.append_path)
        p.send = p._appender.send
        p.send(topic, b"first").get(10)     # metadata: what follows takes the fast path

        def run(t):
            for i in range(n):
                cb = None
                if i % 5 == 0:
                    def cb(md, exc, key=(t, i)):
                        called[key] = md.offset if exc is None else exc
                futures[t].append(p.send(topic, b"%d-%05d" % (t, i), callback=cb))

        workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        p.flush()
        offsets = {t: [f.get(10).offset for f in fs] for t, fs in futures.items()}
    assert sorted(o for os_ in offsets.values() for o in os_) == \
        list(range(1, threads * n + 1))
    assert all(os_ == sorted(os_) for os_ in offsets.values())
    assert called == {(t, i): offsets[t][i] for t in range(threads) for i in range(0, n, 5)}
    rows = consume_confluent(tansu.bootstrap, topic, 1, threads * n + 1)
    at = {r[1]: r[3] for r in rows}
    assert all(at[offsets[t][i]] == b"%d-%05d" % (t, i)
               for t in range(threads) for i in range(n))


def test_a_producer_closed_or_failed_after_fast_sends_refuses_the_next(tansu, impl):
    """What ends sending (a fatal error on the network thread, close()) is
    seen by the very next send on the fast path, though the compiled twin
    reads those flags again only when their objects changed."""
    from kchannel import errors
    from kchannel.protocol.errors import Errors
    topic = create_topic(tansu.bootstrap, topic_name(f"appender-fatal-{impl.kind}"),
                         partitions=1)
    p = Producer({"bootstrap.servers": tansu.bootstrap})
    try:
        p._appender = impl.appender.Appender(p.append_path)
        p.send = p._appender.send
        p.send(topic, b"first").get(10)
        for i in range(10):
            p.send(topic, b"%d" % i)
        # As the Sender sets it (e.g. InitProducerId refused).
        p._sender.fatal_error = errors.KafkaError(
            Errors.CLUSTER_AUTHORIZATION_FAILED, "CLUSTER_AUTHORIZATION_FAILED",
            "Cluster authorization failed.")
        with pytest.raises(errors.KafkaError, match="Cluster authorization failed"):
            p.send(topic, b"refused")
        p._sender.fatal_error = None
        assert p.send(topic, b"again").get(10).offset == 11
    finally:
        p.close()
    with pytest.raises(errors.KChannelError, match="after producer has been closed"):
        p.send(topic, b"late")
