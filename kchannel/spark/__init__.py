"""PySpark on kchannel: Spark's Kafka source and sink as a Python data
source, ``format("kchannel")``.

>>> import kchannel.spark
>>> kchannel.spark.register(spark)
>>> df = (spark.read.format("kchannel")
...       .option("kafka.bootstrap.servers", "broker:9092")
...       .option("subscribe", "events").load())

Options and columns are those of Spark's Kafka source
(``spark-sql-kafka-0-10``), which the pip ``pyspark`` does not ship:

* read: ``kafka.bootstrap.servers``; one of ``subscribe`` (comma list),
  ``subscribePattern`` (a regex over every non-internal topic) or
  ``assign`` (``{"t":[0,1]}``); ``startingOffsets`` (``earliest``, default)
  and ``endingOffsets`` (``latest``, default) or per-partition JSON
  (``{"t":{"0":23,"1":-2}}``, -2 earliest, -1 latest);
  ``startingTimestamp`` / ``startingOffsetsByTimestamp`` /
  ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (ms, earliest offset
  at or after; win over the offsets) with
  ``startingOffsetsByTimestampStrategy`` (``error`` / ``latest``);
  ``minPartitions``, ``maxRecordsPerPartition``, ``includeHeaders``,
  ``failOnDataLoss`` (default true), ``kafkaConsumer.pollTimeoutMs``.
  Columns: key binary, value binary, topic string, partition int, offset
  long, timestamp timestamp, timestampType int (0 CreateTime, 1
  LogAppendTime) and, with includeHeaders, headers
  array<struct<key:string,value:binary>>.  Offsets are resolved when the
  query is planned; one Spark partition per offset range; executors yield
  Arrow batches.
* streaming read (``spark.readStream.format("kchannel")``): the same
  options, ``startingOffsets`` defaulting to ``latest``, no
  ``endingOffsets``; offsets in Spark's Kafka JSON form, checkpointed by
  Spark; ``maxOffsetsPerTrigger`` split over the partitions as Spark's
  ``rateLimit``; ``trigger(availableNow=True)``; partitions added later are
  read from their start; executors read each micro-batch's ranges as a
  batch read's.
* write: ``topic`` option (wins) or a ``topic`` column; ``value`` (string
  or binary, required), ``key``, ``partition`` and ``headers`` columns.
  One producer per Python worker, shared by its tasks and flushed at the end
  of each task.  At-least-once: a task fails if any of its records failed
  and Spark's retry writes them again; an aborted job leaves what was
  already acknowledged in Kafka (no retraction).
* streaming write with ``kchannel.exactlyOnce`` = ``true``: each task
  writes its part of a micro-batch in a Kafka transaction of its own
  (transactional id ``<prefix>-<partition id>``, prefix
  ``kchannel.transactionalIdPrefix`` or ``kchannel-<query id>``) that also
  commits the micro-batch id as an offset of a group named like the
  transactional id; a retried or replayed task that finds its micro-batch
  committed writes nothing, so read_committed readers see every record once
  (:func:`kchannel.spark.workers.write_exactly_once`).
* every ``kafka.``-prefixed option goes to the kchannel client with the
  prefix dropped (``kafka.security.protocol``, ``kafka.sasl.jaas.config``,
  ``kafka.ssl.truststore.location``...); Spark's refused keys
  (``kafka.auto.offset.reset``, deserializers, ``enable.auto.commit``,
  ``interceptor.classes``) are refused here too.
* ``kchannel.delegationToken`` = ``true``: the driver logs in with the
  ``kafka.sasl.*`` credentials, obtains a delegation token
  (CreateDelegationToken; ``kchannel.delegationToken.renewers``,
  ``kchannel.delegationToken.maxLifetimeMs``) and the executors log in with
  the token only (SCRAM ``tokenauth``,
  ``kchannel.delegationToken.mechanism``, default SCRAM-SHA-512, Spark's
  ``spark.kafka.clusters.*.sasl.token.mechanism`` default).  The driver's
  ``kafka.sasl.*`` options are removed from everything shipped to
  executors.

Connection reuse: each Python worker keeps its clients in a module-level
cache keyed by configuration (:mod:`kchannel.spark.workers`), so the tasks
of a job share a few authenticated connections;
:func:`connection_stats` reports a worker's tasks, clients and logins, and
``spark.read.format("kchannel_stats").load()`` collects it from the workers
that run the source's reads.

Only :mod:`kchannel.spark.source` imports pyspark, and only when the data
source is used.
"""

import importlib

from kchannel.spark import workers

__all__ = ["register", "connection_stats", "KChannelDataSource"]


def _source():
    # pyspark is imported only when the data source is used.
    return importlib.import_module("kchannel.spark.source")


def register(spark):
    """Register the ``kchannel`` data source with ``spark`` (a SparkSession)."""
    source = _source()
    spark.dataSource.register(source.KChannelDataSource)
    spark.dataSource.register(source.KChannelStatsDataSource)
    return source.KChannelDataSource


def connection_stats():
    """This Python process's client cache (see :mod:`kchannel.spark.workers`)."""
    return workers.connection_stats()


def __getattr__(name):
    if name == "KChannelDataSource":
        return _source().KChannelDataSource
    raise AttributeError(name)
