"""Every record shape on the producer's per-record fast path (``Appender``,
both twins), against Apache Kafka itself (the session's ``kafka_broker``).

* Each shape (plain, key, explicit partition, headers, timestamp, callback,
  and their combinations) builds, on the fast path, what the full path
  (``doSend``; forced here by identity serializers, which send every record
  there) builds for the same records: per partition the same encoded bytes
  once the clock-given timestamps are aligned, every batch with its exact
  encoded size tracked (where a batch ends depends on it).  The fast
  path is checked to be the one taken.
* Interleaved shapes on one partition, with small batches (the fast path
  opens most of them) and records that must take the full path mixed in,
  keep send order: futures, callbacks and the offsets Kafka stored agree.
"""
import time

import pytest

from kchannel import Producer
from kchannel.producer.partitioner import partition_for_key
from kchannel.protocol.records import encode_batch
from tests.fixtures.records import consume_confluent, create_topic, topic_name

pytestmark = [pytest.mark.interop, pytest.mark.kafka]

TS = 1_700_000_000_000


# Header tuples an application keeps as constants: sent as one list object
# again and again, or as new lists of the same tuples (the appender then
# reuses the tuple it made last, see _appender_py).
_HT = (("trace", b"abc"), ("n\u00e9", None), ("z", b""))
_REUSED = [_HT[0], _HT[1]]


def _cb(log, i):
    return lambda md, exc: log.append((i, md, exc))


SHAPES = {
    "plain": lambda i, log: dict(value=b"p%04d" % i),
    "null-value": lambda i, log: dict(value=None, key=b"tomb"),
    "key": lambda i, log: dict(value=b"k%04d" % i, key=b"key-%d" % (i % 5)),
    "partition": lambda i, log: dict(value=b"n%04d" % i, partition=i % 2),
    "headers": lambda i, log: dict(value=b"h%04d" % i,
                                   headers=[("h", b"%d" % i), ("n\u00e9", None)]),
    "tuple-headers": lambda i, log: dict(value=b"t%04d" % i, headers=(("a", b"1"),)),
    "reused-headers": lambda i, log: dict(value=b"r%04d" % i, headers=_REUSED),
    "same-header-tuples": lambda i, log: dict(value=b"u%04d" % i,
                                              headers=list(_HT[:1 + i % 3 // 2 * 2])),
    "timestamp": lambda i, log: dict(value=b"s%04d" % i, timestamp_ms=TS + i),
    "callback": lambda i, log: dict(value=b"c%04d" % i, callback=_cb(log, i)),
    "all": lambda i, log: dict(value=b"a%04d" % i, key=b"x", partition=1,
                               headers=[("k", b"v")], timestamp_ms=TS - i,
                               callback=_cb(log, i)),
    "key+headers+callback": lambda i, log: dict(value=b"b%04d" % i, key=b"kk%d" % i,
                                                headers=[("h", b"")], callback=_cb(log, i)),
}


def _twin_producer(bootstrap, twin, **configs):
    """A producer whose per-record path is the twin under test; the records
    it hands to the full path are counted (second value)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", **configs})
    calls = []
    slow = p.append_path.send_slow

    def counted(*args):
        calls.append(args)
        return slow(*args)
    p.append_path.send_slow = counted
    p._appender = twin.Appender(p.append_path)
    p.send = p._appender.send
    return p, calls


def _batches(futures):
    """Per partition, the records of each batch the futures were appended
    to, in order (a future's batch is internal: read here only to see the
    batch boundaries; full batches leave for the broker as soon as they are
    full, so the accumulator alone cannot show them)."""
    out = {0: [], 1: []}
    seen = set()
    for f in futures:
        b = f._batch
        if id(b) not in seen:
            seen.add(id(b))
            out[b.tp.partition].append(list(b.records))
    return out


def _aligned(batches, explicit):
    """Per partition, the encoding of all its records in order, every
    timestamp not given by the caller replaced by a fixed one, so both
    paths compare byte for byte.  (Where one batch ends depends on when the
    Sender drains: Kafka's drain takes a partition's open batch as soon as
    another partition of the same leader is ready.)"""
    return {part: encode_batch([(r.timestamp if (r.key, r.value) in explicit else TS, r.key,
                                 r.value, r.headers)
                                for b in bs for r in b])
            for part, bs in batches.items() if bs}


def _check_estimates(futures):
    """Every batch's tracked size is its records' exact encoded size."""
    seen = set()
    for f in futures:
        b = f._batch
        if id(b) in seen:
            continue
        seen.add(id(b))
        assert b.estimated_size == len(encode_batch(b.records))
        assert b.sizes == [(len(r.key) if r.key is not None else -1,
                            len(r.value) if r.value is not None else -1) for r in b.records]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_shape_builds_the_full_paths_batches(kafka_broker, impl, shape):
    twin = impl.appender
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    # One topic per path: the offsets of each are then checked alone.
    topics = {name: create_topic(bootstrap, topic_name(f"shape-{name}-{impl.kind}"),
                                 partitions=2) for name in ("fast", "slow")}
    n = 60
    ident = dict(key_serializer=lambda k: k, value_serializer=lambda v: v)
    # batch.size 1024: the fast path opens several batches itself.
    configs = {"linger.ms": 50, "batch.size": 1024}
    fast, fast_calls = _twin_producer(bootstrap, twin, **configs)
    slow, slow_calls = _twin_producer(bootstrap, twin, **configs, **ident)
    try:
        results = {}
        for name, p, calls in (("fast", fast, fast_calls), ("slow", slow, slow_calls)):
            topic = topics[name]
            p.partitions_for(topic)
            # Both start on partition 0 for records without key or partition.
            p.append_path.partitioner.state[topic] = [0, 0]
            del calls[:]
            log = []
            t0 = int(time.time() * 1000)
            futures = [p.send(topic, **SHAPES[shape](i, log)) for i in range(n)]
            t1 = int(time.time() * 1000)
            p.flush(30)
            results[name] = (futures, log, _batches(futures), calls, t0, t1)
        ffut, flog, fbatches, fcalls, t0, t1 = results["fast"]
        sfut, slog, sbatches, scalls, _, _ = results["slow"]
        assert fcalls == [], "the fast path sent records to the full path"
        assert len(scalls) == n
        sent = [SHAPES[shape](i, []) for i in range(n)]
        explicit = {(kw.get("key"), kw["value"]) for kw in sent if "timestamp_ms" in kw}
        assert sum(len(b) for bs in fbatches.values() for b in bs) == n
        assert _aligned(fbatches, explicit) == _aligned(sbatches, explicit)
        _check_estimates(ffut)
        _check_estimates(sfut)
        for bs in fbatches.values():
            for b in bs:
                for r in b:
                    if (r.key, r.value) not in explicit:
                        assert t0 <= r.timestamp <= t1
        for futures, log in ((ffut, flog), (sfut, slog)):
            mds = [f.get(30) for f in futures]
            for i, (kw, md) in enumerate(zip(sent, mds)):
                if "partition" in kw:
                    assert md.partition == kw["partition"]
                elif kw.get("key") is not None:
                    assert md.partition == partition_for_key(kw["key"], 2)
                if "timestamp_ms" in kw:
                    assert md.timestamp == kw["timestamp_ms"]
                assert md.serialized_value_size == (len(kw["value"]) if kw["value"] is not None
                                                    else -1)
            # Per partition, offsets in send order with no gap.
            for part in (0, 1):
                offs = [md.offset for md in mds if md.partition == part]
                assert offs == list(range(offs[0], offs[0] + len(offs))) if offs else True
            if any("callback" in kw for kw in sent):
                assert sorted(i for i, _, _ in log) == list(range(n))
                for i, md, exc in log:
                    assert exc is None
                    assert (md.partition, md.offset, md.timestamp) == \
                        (mds[i].partition, mds[i].offset, mds[i].timestamp)
            else:
                assert log == []
    finally:
        fast.close()
        slow.close()


def test_headers_list_changed_in_place_between_sends(kafka_broker, impl):
    """One list object sent again and again, its items replaced (not
    mutated: header tuples are immutable) between some sends: each record
    carries the headers it was sent with."""
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name(f"headers-in-place-{impl.kind}"), partitions=1)
    p, calls = _twin_producer(bootstrap, impl.appender, **{"linger.ms": 5})
    headers = [("h", b"0")]
    want = []
    with p:
        p.partitions_for(topic)
        del calls[:]
        for i in range(40):
            if i % 3 == 0:
                headers[0] = ("h", b"%d" % i)
            if i % 10 == 5:
                headers.append(("x", None))
            if i % 10 == 9:
                del headers[1:]
            p.send(topic, b"v", headers=headers)
            want.append(list(headers))
        p.flush(30)
    assert calls == []
    rows = consume_confluent(bootstrap, topic, 1, len(want))
    assert [r[4] for r in rows] == want


def test_interleaved_shapes_on_one_partition_keep_order(kafka_broker, impl):
    twin = impl.appender
    bootstrap = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(bootstrap, topic_name(f"interleaved-{impl.kind}"), partitions=1)
    names = sorted(SHAPES)
    log = []
    sent = []
    p, calls = _twin_producer(bootstrap, twin, **{"linger.ms": 5, "batch.size": 512})
    with p:
        p.partitions_for(topic)
        del calls[:]
        futures = []
        for i in range(600):
            kw = SHAPES[names[i % len(names)]](i, log)
            kw.pop("partition", None)
            if "key" in kw:
                kw["partition"] = 0     # one partition: keys go to it anyway
            if i % 11 == 0:
                # A bytearray value takes the full path (the serializer
                # copies it): both paths append to the same batches.
                kw["value"] = bytearray(b"slow%04d" % i)
            sent.append(kw)
            futures.append(p.send(topic, **kw))
        p.flush(30)
        mds = [f.get(30) for f in futures]
    assert len(calls) == len(range(0, 600, 11))
    assert [md.offset for md in mds] == list(range(mds[0].offset, mds[0].offset + 600))
    assert sorted(i for i, _, _ in log) == [i for i, kw in enumerate(sent) if "callback" in kw]
    # Callbacks of one partition run in offset order.
    assert [md.offset for _, md, _ in log] == sorted(md.offset for _, md, _ in log)
    rows = consume_confluent(bootstrap, topic, 1, len(sent))
    assert len(rows) == len(sent)
    for kw, md, (part, off, key, value, headers, ts) in zip(sent, mds, rows):
        assert (part, off) == (md.partition, md.offset)
        assert (key, value) == (kw.get("key"), bytes(kw["value"]) if kw["value"] is not None
                                else None)
        assert headers == [tuple(h) for h in kw.get("headers", ())]
        assert ts == md.timestamp
        if "timestamp_ms" in kw:
            assert ts == kw["timestamp_ms"]
