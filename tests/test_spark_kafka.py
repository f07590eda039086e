"""``format("kchannel")`` on a real local Spark (``local[2]``) against Apache
Kafka: batch reads of records confluent-kafka wrote (every column, offsets
JSON / timestamps / assign / pattern), batch writes read back by
confluent-kafka, executors logging in with a delegation token the driver
obtained over SASL_SSL SCRAM, and many tasks sharing a few authenticated
connections per worker."""
import json

import pytest

from tests.fixtures.records import (consume_confluent, create_topic, expected_rows,
                                    produce_confluent, sample, topic_name)

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka]

BASE_TS = 1_700_000_000_000


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
    # minPartitions splits the offset ranges
    df = read(spark, plain, subscribe=topic, minPartitions="10")
    assert df.rdd.getNumPartitions() >= 10
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
    got = consume_confluent(plain, topic, 3, len(data))
    assert sorted(((p, k, v, h) for p, _, k, v, h, _ in got), key=lambda r: r[2]) == sorted(
        ((p, None if k is None else k.encode(), v, h) for k, v, p, h in data),
        key=lambda r: r[2])
    # the topic column when there is no topic option
    df2 = spark.createDataFrame([(topic, "late")], "topic string, value string")
    df2.write.format("kchannel").option("kafka.bootstrap.servers", plain).mode("append").save()
    got = consume_confluent(plain, topic, 3, len(data) + 1)
    assert b"late" in [v for _, _, _, v, _, _ in got]
