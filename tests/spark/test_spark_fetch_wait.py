"""The PySpark source against brokers that answer nothing to a 0 ms fetch
wait (issue 22).  Its executors used ``fetch.max.wait.ms=0``, to which Tansu
(and librdkafka against Tansu) answers with no records even when the range
holds data, so a read against Tansu failed after
``kafkaConsumer.pollTimeoutMs`` (120 s by default) with "some data may have
been lost".  Reads now wait up to 10 ms, which costs nothing on Kafka (it
answers as soon as data exists).

The same read runs against Tansu and Apache Kafka: first the driver's
planning and an executor's read called directly (what Spark runs, without
its JVM), then, marked slow, a real ``spark.read.format("kchannel")``.
``kafkaConsumer.pollTimeoutMs`` is 8 s, so the old behaviour fails in 8 s
rather than 120.
"""
import pytest

from kchannel import Producer
from tests.fixtures.records import create_topic, topic_name
from tests.fixtures.spark import require_spark

pytestmark = pytest.mark.interop

VALUES = [b"v%d" % i for i in range(5)]
POLL_TIMEOUT_MS = "8000"


@pytest.fixture(params=["tansu", pytest.param("kafka", marks=pytest.mark.kafka)])
def bootstrap(request):
    if request.param == "tansu":
        return request.getfixturevalue("tansu").bootstrap
    return request.getfixturevalue("kafka_broker").bootstrap("PLAINTEXT")


def topic_with_records(bootstrap):
    topic = create_topic(bootstrap, topic_name("spark-wait"), partitions=1)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for value in VALUES:
            # One batch per record: Tansu answers ListOffsets LATEST with
            # the last batch's base offset + 1 (README, Limitations).
            producer.send(topic, value).get(30)
    return topic


def schema():
    from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType,
                                   StructField, StructType, TimestampType)
    return StructType([   # KChannelDataSource.schema(), without a JVM to parse it
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("topic", StringType()), StructField("partition", IntegerType()),
        StructField("offset", LongType()), StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType())])


def test_executor_read(bootstrap):
    require_spark()
    from kchannel.spark import workers
    from kchannel.spark.source import KChannelDataSource
    topic = topic_with_records(bootstrap)
    source = KChannelDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                 "kafkaConsumer.pollTimeoutMs": POLL_TIMEOUT_MS})
    reader = source.reader(schema())     # the driver's planning
    (part,) = reader.partitions()
    assert (part.start, part.end) == (0, len(VALUES))
    try:
        values = [v for batch in reader.read(part)     # what an executor runs
                  for v in batch.column(1).to_pylist()]
    finally:
        workers.close_all()
    assert values == VALUES


@pytest.mark.slow
def test_pyspark_read(spark, bootstrap):
    topic = topic_with_records(bootstrap)
    df = (spark.read.format("kchannel").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("kafkaConsumer.pollTimeoutMs", POLL_TIMEOUT_MS)
          .load())
    rows = sorted((r["offset"], bytes(r["value"])) for r in df.collect())
    assert rows == list(enumerate(VALUES))
