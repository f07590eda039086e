"""``format("kchannel")`` on a real local Spark (``local[2]``) against Apache
Kafka: batch reads of records confluent-kafka wrote (every column, offsets
JSON / timestamps / assign / pattern), batch writes read back by
confluent-kafka, executors logging in with a delegation token the driver
obtained over SASL_SSL SCRAM, and many tasks sharing a few authenticated
connections per worker."""
import json
import os
import re
import time

import pytest

from tests.fixtures.records import (consume_confluent, consume_kafka_python, create_topic,
                                    expected_rows, produce_confluent, sample, topic_name)
from tests.fixtures.waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka, pytest.mark.timeout(600)]

# Recent timestamps: records older than the broker's retention (7 days) may be
# deleted while a test reads them.
BASE_TS = (int(time.time()) - 3600) * 1000


def rows_of(df):
    out = []
    for r in df.collect():
        headers = [(h["key"], h["value"]) for h in (r["headers"] or [])] \
            if "headers" in r else None
        ts = r["timestamp"]
        out.append((r["partition"], r["offset"], r["key"], r["value"], headers,
                    int(ts.timestamp() * 1000), r["topic"], r["timestampType"]))
    return sorted(out)


def as_bytes(v):
    return None if v is None else bytes(v)


def normalise(rows):
    return sorted((p, o, as_bytes(k), as_bytes(v), [(hk, as_bytes(hv)) for hk, hv in h], ts)
                  for p, o, k, v, h, ts, *_ in rows)


@pytest.fixture(scope="module")
def written(kafka_broker):
    """A 3-partition topic with sample records written by confluent-kafka."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("spark-read"), partitions=3)
    records = sample(30, base_ts=BASE_TS)
    mds = produce_confluent(plain, topic, records, "lz4")
    return plain, topic, expected_rows(records, mds)


def read(spark, bootstrap, **options):
    r = spark.read.format("kchannel").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_every_column(spark, written):
    plain, topic, expected = written
    df = read(spark, plain, subscribe=topic, includeHeaders="true")
    assert [f.simpleString() for f in df.schema.fields] == [
        "key:binary", "value:binary", "topic:string", "partition:int", "offset:bigint",
        "timestamp:timestamp", "timestampType:int",
        "headers:array<struct<key:string,value:binary>>"]
    rows = rows_of(df)
    assert normalise(rows) == expected
    assert {r[6] for r in rows} == {topic} and {r[7] for r in rows} == {0}
    # Without includeHeaders there is no headers column.
    assert "headers" not in read(spark, plain, subscribe=topic).columns


def test_batch_read_offsets_json_timestamps_assign_pattern(spark, written):
    plain, topic, expected = written
    counts = {p: sum(1 for r in expected if r[0] == p) for p in range(3)}
    assert all(counts.values())
    start = {topic: {"0": 1, "1": -2, "2": counts[2]}}
    end = {topic: {"0": -1, "1": counts[1] - 1, "2": -1}}
    df = read(spark, plain, assign=json.dumps({topic: [0, 1, 2]}),
              startingOffsets=json.dumps(start), endingOffsets=json.dumps(end),
              includeHeaders="true")
    want = [r for r in expected if (r[0] == 0 and r[1] >= 1) or
            (r[0] == 1 and r[1] < counts[1] - 1)]
    assert normalise(rows_of(df)) == want
    # the earliest offset at or after a timestamp, in every partition
    cut = BASE_TS + 15_000
    df = read(spark, plain, subscribePattern=topic[:-8] + ".*", startingTimestamp=str(cut),
              includeHeaders="true")
    assert normalise(rows_of(df)) == [r for r in expected if r[5] >= cut]
    # minPartitions splits the offset ranges in proportion to their sizes,
    # each into round(size / total * minPartitions) parts as Spark's
    # KafkaOffsetRangeCalculator does (Math.round: half up), so the count is
    # about minPartitions (three thirds of 10 give 9), never fewer ranges.
    df = read(spark, plain, subscribe=topic, minPartitions="10")
    total = sum(counts.values())
    assert df.rdd.getNumPartitions() == sum(
        max(int(c / total * 10 + 0.5), 1) for c in counts.values())
    assert df.count() == len(expected)


def test_wrong_options_fail_at_planning(spark, written):
    plain, topic, _ = written
    cases = [
        ({"subscribe": topic, "assign": json.dumps({topic: [0]})}, "Only one of"),
        ({"assign": "{not json"}, "Expected e.g."),
        ({"subscribe": topic, "startingOffsets": "latest"}, "can't be latest"),
        ({"subscribe": topic, "kafka.auto.offset.reset": "earliest"}, "not supported"),
        ({"subscribe": topic, "startingOffsets": json.dumps({topic: {"0": 0}})},
         "must specify all TopicPartitions"),
        ({"assign": json.dumps({topic: [7]})}, "does not exist"),
        ({"assign": json.dumps({"kchannel-no-such-topic": [0]})},
         "Cannot read topic kchannel-no-such-topic"),
        ({"subscribe": "kchannel-no-such-topic"},
         "Cannot read topic kchannel-no-such-topic"),
        ({}, "One of the following options must be specified"),
    ]
    for options, message in cases:
        with pytest.raises(Exception, match=message):
            read(spark, plain, **options).collect()


def test_batch_write_read_back_by_confluent(spark, kafka_broker):
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField,
                                   StructType)
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("spark-write"), partitions=3)
    schema = StructType([
        StructField("key", StringType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())])))])
    data = [(None if i % 4 == 0 else f"k{i}", b"v%d" % i, i % 3,
             [("h", b"x%d" % i)] if i % 2 else []) for i in range(40)]
    df = spark.createDataFrame(data, schema).repartition(4)
    df.write.format("kchannel").option("kafka.bootstrap.servers", plain) \
        .option("topic", topic).mode("append").save()
    want = sorted(((p, None if k is None else k.encode(), v, h) for k, v, p, h in data),
                  key=lambda r: r[2])
    got = consume_confluent(plain, topic, 3, len(data))
    assert sorted(((p, k, v, h) for p, _, k, v, h, _ in got), key=lambda r: r[2]) == want
    # and kafka-python reads the same
    got = consume_kafka_python(plain, topic, 3, len(data))
    assert sorted(((p, k, v, h) for p, _, k, v, h, _ in got), key=lambda r: r[2]) == want
    # the topic column when there is no topic option
    df2 = spark.createDataFrame([(topic, "late")], "topic string, value string")
    df2.write.format("kchannel").option("kafka.bootstrap.servers", plain).mode("append").save()
    got = consume_confluent(plain, topic, 3, len(data) + 1)
    assert b"late" in [v for _, _, _, v, _, _ in got]


def token_options(kafka_broker):
    """The driver's SASL_SSL SCRAM-SHA-512 login as ``kafka.`` options, with
    delegation tokens for the executors."""
    options = {f"kafka.{k}": v for k, v in
               kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512").items()}
    options["kchannel.delegationToken"] = "true"
    return options


def test_executors_read_with_a_delegation_token(spark, kafka_broker, written):
    """The driver obtains a token with its SCRAM password; what Spark ships
    to executors holds the token and not the password; the read over
    SASL_SSL gives every record."""
    # pyspark's own copy: what Spark really pickles with, and no extra package.
    from pyspark import cloudpickle
    from pyspark.sql.types import StructType

    from kchannel.spark.source import KChannelDataSource
    _, topic, expected = written
    options = token_options(kafka_broker)
    password = kafka_broker.users["admin"]
    assert password in options["kafka.sasl.jaas.config"]

    source = KChannelDataSource(dict(options, subscribe=topic))
    reader = source.reader(StructType.fromDDL(source.schema()))
    shipped = cloudpickle.dumps((source, reader, reader.partitions()))
    assert password.encode() not in shipped and b"admin-secret" not in shipped
    jaas = reader.executor_configs["sasl.jaas.config"]
    assert 'tokenauth="true"' in jaas and password not in jaas
    # the streaming reader too: planned on the driver, shipped without the password
    stream = source.streamReader(StructType.fromDDL(source.schema()))
    first = stream.initialOffset()
    end = stream.latestOffset(first, stream.getDefaultReadLimit())
    shipped = cloudpickle.dumps((source, stream, stream.partitions(first, end)))
    assert password.encode() not in shipped and b"admin-secret" not in shipped
    assert password not in json.dumps(end)
    stream.stop()

    r = spark.read.format("kchannel")
    for k, v in options.items():
        r = r.option(k, v)
    df = r.option("subscribe", topic).option("includeHeaders", "true").load()
    assert normalise(rows_of(df)) == expected


def worker_stats(spark):
    """{pid: connection_stats()} of the Python workers: the kchannel_stats
    source's reads run in the same worker pool as the kchannel source's."""
    rows = spark.read.format("kchannel_stats").option("numPartitions", "16").load().collect()
    # (the counters only: token_ids is text)
    return {r["pid"]: {k: v for k, v in r.asDict().items() if k != "token_ids"} for r in rows}


def test_many_tasks_share_few_authenticated_connections(spark, kafka_broker):
    """200 offset ranges (200 tasks) over SASL_SSL with a token: each Python
    worker logs in once per connection it keeps (bootstrap + broker), not
    once per task; counted by the clients' successful-authentication-total
    in every worker process."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("spark-reuse"), partitions=4)
    records = [(b"k%d" % i, b"v%d" % i, [], BASE_TS + i) for i in range(400)]
    produce_confluent(plain, topic, records, "none")
    options = token_options(kafka_broker)
    r = spark.read.format("kchannel")
    for k, v in options.items():
        r = r.option(k, v)
    df = r.option("subscribe", topic).option("minPartitions", "200").load()
    assert df.rdd.getNumPartitions() >= 200
    before = worker_stats(spark)
    assert sorted(bytes(v) for (v,) in df.select("value").collect()) == \
        sorted(v for _, v, _, _ in records)
    after = worker_stats(spark)
    delta = {pid: {k: v - before.get(pid, {}).get(k, 0) for k, v in s.items()}
             for pid, s in after.items()}
    readers = [s for s in delta.values() if s["tasks"]]
    tasks = sum(s["tasks"] for s in readers)
    logins = sum(s["authentications"] for s in readers)
    consumers = sum(s["consumers_created"] for s in readers)
    print(f"workers={len(after)} reading workers={len(readers)} tasks={tasks} "
          f"consumers created={consumers} authentications={logins}")
    assert tasks >= 200
    # The 200 tasks logged in at most once per connection a worker keeps
    # (bootstrap and the broker), not once per task; a worker whose cached
    # consumer for this token was created by the previous test logs in 0 times.
    assert logins <= 2 * len(readers)
    # ...and created at most one consumer per worker for these 200 tasks.
    assert consumers <= len(readers)
    # Since the session started (other Spark tests of the session included),
    # every client a worker created (a consumer or producer per
    # configuration, not per task) logged in a bounded number of times:
    # bootstrap, broker, and a metadata connection re-opened at most once.
    total_logins = sum(after[pid]["authentications"] for pid in after)
    total_clients = sum(after[pid]["consumers_created"] + after[pid]["producers_created"]
                        for pid in after)
    print(f"since start: clients={total_clients} authentications={total_logins}")
    assert 0 < total_logins <= 3 * total_clients


def readme_snippet(name):
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    m = re.search(rf"<!-- snippet: {name} -->\n```\w*\n(.*?)^```", readme, re.S | re.M)
    assert m, f"README has no <!-- snippet: {name} --> block"
    return m.group(1)


def test_readme_example(spark, kafka_broker):
    """README "PySpark": read over SASL_SSL with a token, upper-case, write
    to another topic; confluent-kafka reads the result."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("events"), partitions=2)
    target = create_topic(plain, topic_name("events-upper"), partitions=2)
    produce_confluent(plain, source, [(None, b"v%d" % i, [], BASE_TS + i) for i in range(10)],
                      "none")
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    code = (readme_snippet("spark-example")
            .replace('"broker:9093"', repr(configs["bootstrap.servers"]))
            .replace('"broker:9092"', repr(plain))
            .replace('"/etc/kchannel/ca.pem"', repr(configs["ssl.truststore.location"]))
            .replace('"events-upper"', repr(target))
            .replace('"events"', repr(source)))
    exec(compile(code, "README.md", "exec"),
         {"spark": spark, "jaas": configs["sasl.jaas.config"]})
    got = consume_confluent(plain, target, 2, 10)
    assert sorted(v for _, _, _, v, _, _ in got) == sorted(b"V%d" % i for i in range(10))


def test_streaming_micro_batches_rate_limit_new_partitions_and_restart(spark, kafka_broker,
                                                                     tmp_path):
    """A streaming query reads what confluent-kafka wrote in micro-batches of
    at most maxOffsetsPerTrigger offsets, picks up records produced later and
    a partition added later, and a restart from its checkpoint reads only
    what came after (no duplicate, no loss)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions
    plain = kafka_broker.bootstrap("PLAINTEXT")
    topic = create_topic(plain, topic_name("spark-stream"), partitions=3)

    def records(lo, hi):
        return [(b"k%d" % i, b"v%d" % i, [], BASE_TS + i) for i in range(lo, hi)]

    produce_confluent(plain, topic, records(0, 30), "none")
    batches = {}

    def collect(df, batch_id):
        batches[batch_id] = [(r["partition"], r["offset"], bytes(r["value"]))
                             for r in df.collect()]

    def start(trigger):
        stream = (spark.readStream.format("kchannel")
                  .option("kafka.bootstrap.servers", plain).option("subscribe", topic)
                  .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "12")
                  .load())
        return (stream.writeStream.foreachBatch(collect)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(**trigger).start())

    def values():
        return sorted(v for rows in batches.values() for _, _, v in rows)

    q = start({"processingTime": "500 milliseconds"})
    try:
        q.processAllAvailable()
        assert values() == sorted(b"v%d" % i for i in range(30))
        first = set(batches)
        produce_confluent(plain, topic, records(30, 45), "none")
        # a partition added while the query runs is read from its start
        admin = AdminClient({"bootstrap.servers": plain})
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        # (Kafka answers once the controller committed the growth; the broker
        # learns of partition 3 when it replays the record: a producer asking
        # before then would fail its record as "unknown partition")
        wait_until(lambda: (lambda t: t is not None and t.error is None and
                            len(t.partitions) == 4 and
                            all(q.leader >= 0 for q in t.partitions.values()))(
            admin.list_topics(topic, timeout=10).topics.get(topic)),
            "the fourth partition led")
        p = Producer({"bootstrap.servers": plain})
        for i in range(45, 50):
            p.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=3)
        assert p.flush(30) == 0
        q.processAllAvailable()
        assert set(batches) > first
        assert values() == sorted(b"v%d" % i for i in range(50))
        assert [(pt, o) for pt, o, v in sorted(r for rows in batches.values() for r in rows)
                if pt == 3] == [(3, 0), (3, 1), (3, 2), (3, 3), (3, 4)]
        progress = [(p["batchId"], p["numInputRows"]) for p in q.recentProgress]
    finally:
        q.stop()
    sizes = {b: len(rows) for b, rows in batches.items()}
    print("micro-batch sizes", sorted(sizes.items()), "progress", progress)
    assert max(sizes.values()) <= 12 and sum(sizes.values()) == 50
    # 30 records at start, at most 12 per trigger: at least 3 non-empty micro-batches
    assert len([n for n in sizes.values() if n]) >= 3 + 1
    assert all(n == sizes[b] for b, n in progress if b in sizes)

    # Restart from the checkpoint: only the records produced since, still in
    # micro-batches of at most 12 (availableNow keeps the rate limit).
    produce_confluent(plain, topic, records(50, 75), "none")
    seen = set(batches)
    q = start({"availableNow": True})
    q.awaitTermination(60)
    q.stop()
    new = {b: rows for b, rows in batches.items() if b not in seen}
    print("after restart", sorted((b, len(rows)) for b, rows in new.items()))
    assert sorted(v for rows in new.values() for _, _, v in rows) == \
        sorted(b"v%d" % i for i in range(50, 75))
    assert min(new) > max(seen) and len([1 for rows in new.values() if rows]) >= 3
    assert all(len(rows) <= 12 for rows in new.values())
    assert values() == sorted(b"v%d" % i for i in range(75))


def test_streaming_offsets_and_data_loss_on_the_driver(spark, written):
    """The stream reader's driver side against Apache Kafka, without a
    query: initial offsets for earliest / latest / JSON, offsets that went
    backwards and partitions that disappeared are data loss, skipped with
    failOnDataLoss=false."""
    from pyspark.sql.types import StructType

    from kchannel.spark.source import KChannelDataSource
    plain, topic, expected = written
    ends = {str(p): sum(1 for r in expected if r[0] == p) for p in range(3)}

    def reader(**options):
        source = KChannelDataSource(dict({"kafka.bootstrap.servers": plain,
                                          "subscribe": topic}, **options))
        return source.streamReader(StructType.fromDDL(source.schema()))

    r = reader()
    assert r.initialOffset() == {topic: ends}          # streaming default: latest
    assert reader(startingOffsets="earliest").initialOffset() == \
        {topic: {"0": 0, "1": 0, "2": 0}}
    assert reader(startingOffsets=json.dumps({topic: {"0": 1, "1": -2, "2": -1}})) \
        .initialOffset() == {topic: {"0": 1, "1": 0, "2": ends["2"]}}
    assert r.latestOffset({topic: ends}, r.getDefaultReadLimit()) == {topic: ends}
    assert r.partitions({topic: ends}, {topic: ends}) == []

    behind = {topic: dict(ends, **{"0": ends["0"] + 5})}
    with pytest.raises(Exception, match="offset was changed from"):
        r.partitions(behind, {topic: ends})
    gone = {topic: dict(ends, **{"9": 0})}
    with pytest.raises(Exception, match=f"Set\\({topic}-9\\) are gone"):
        r.latestOffset(gone, r.getDefaultReadLimit())
    r.stop()

    lenient = reader(failOnDataLoss="false")
    start = {topic: dict(ends, **{"0": ends["0"] + 5, "1": 0})}
    assert [(p.partition, p.start, p.end) for p in lenient.partitions(start, {topic: ends})] \
        == [(1, 0, int(ends["1"]))]
    assert lenient.latestOffset(gone, lenient.getDefaultReadLimit()) == {topic: ends}
    lenient.stop()


def test_streaming_write_kchannel_to_kchannel_read_by_confluent(spark, kafka_broker, tmp_path):
    """readStream.format("kchannel") -> writeStream.format("kchannel"): the
    records produced before and after the query started arrive in the
    target topic with the same keys, values, headers and partitions, as
    confluent-kafka reads them; a restart from the checkpoint writes only
    what came after (the micro-batches already committed are not redone)."""
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("spark-ws-in"), partitions=2)
    target = create_topic(plain, topic_name("spark-ws-out"), partitions=2)

    def records(lo, hi):
        return [(b"k%d" % i, b"v%d" % i, [("h", b"x%d" % i)] if i % 2 else [], BASE_TS + i)
                for i in range(lo, hi)]

    produce_confluent(plain, source, records(0, 20), "none")

    def start(trigger):
        stream = (spark.readStream.format("kchannel")
                  .option("kafka.bootstrap.servers", plain).option("subscribe", source)
                  .option("startingOffsets", "earliest").option("includeHeaders", "true")
                  .load())
        return (stream.selectExpr("key", "value", "headers", "partition")
                .writeStream.format("kchannel")
                .option("kafka.bootstrap.servers", plain).option("topic", target)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(**trigger).start())

    def expect(lo, hi):
        src = {(k, v): p for p, _, k, v, _, _ in consume_confluent(plain, source, 2, hi)}
        return sorted((src[(k, v)], k, v, h) for k, v, h, _ in records(lo, hi))

    q = start({"processingTime": "500 milliseconds"})
    try:
        q.processAllAvailable()
        produce_confluent(plain, source, records(20, 35), "none")
        q.processAllAvailable()
    finally:
        q.stop()
    got = consume_confluent(plain, target, 2, 35)
    assert sorted((p, k, v, h) for p, _, k, v, h, _ in got) == expect(0, 35)

    produce_confluent(plain, source, records(35, 45), "none")
    q = start({"availableNow": True})
    q.awaitTermination(60)
    q.stop()
    got = consume_confluent(plain, target, 2, 45)
    assert len(got) == 45     # nothing written twice
    assert sorted((p, k, v, h) for p, _, k, v, h, _ in got) == expect(0, 45)
