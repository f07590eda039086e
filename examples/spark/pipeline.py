"""A PySpark pipeline on kchannel: read a Kafka topic, transform each
record, write another topic, with executors logging in with a delegation
token the driver obtained with its own credentials.

    python examples/spark/pipeline.py --bootstrap-server broker:9093 \\
        --command-config client.properties --input-topic events \\
        --output-topic events-upper [--delegation-token] [--master local[2]] \\
        [--conf spark.key=value ...] [--streaming --checkpoint DIR [--exactly-once]]

``client.properties`` is a Kafka client configuration as the Java tools take
it (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.truststore.*``...); every key becomes a ``kafka.`` option of the
``kchannel`` data source.  The transform upper-cases the value and keeps
key, headers and partition.  Batch by default (the whole input topic, from
earliest to latest); ``--streaming`` runs a streaming query that writes
what is in the input topic now and stops (``trigger(availableNow=True)``),
resuming from ``--checkpoint`` next time; with ``--exactly-once`` it writes
each micro-batch in Kafka transactions (``kchannel.exactlyOnce``), so a
run killed and started again writes no record twice for read_committed
readers.  ``--master`` and ``--conf`` are spark-submit's: on a standalone
cluster, ``--master spark://host:7077`` and, where kchannel is not
installed on the executors' Python, ``--conf
spark.executorEnv.PYTHONPATH=/path/to/kchannel-checkout``.

Exit status 0 when the output was written, 1 on failure, 2 on bad usage.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))   # a checkout: import kchannel


def kafka_options(args):
    from kchannel.config.properties import load_properties
    options = {"kafka.bootstrap.servers": args.bootstrap_server}
    if args.command_config:
        for k, v in load_properties(args.command_config).items():
            options[f"kafka.{k}"] = v
    if args.delegation_token:
        options["kchannel.delegationToken"] = "true"
    return options


def run(spark, args):
    options = kafka_options(args)
    reader = spark.readStream if args.streaming else spark.read
    reader = reader.format("kchannel").options(**options) \
        .option("subscribe", args.input_topic).option("includeHeaders", "true") \
        .option("startingOffsets", "earliest")
    upper = reader.load().selectExpr("key", "upper(cast(value as string)) as value",
                                     "headers", "partition")
    if args.streaming:
        q = (upper.writeStream.format("kchannel").options(**options)
             .option("topic", args.output_topic)
             .option("kchannel.exactlyOnce", str(args.exactly_once).lower())
             .option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        rows = sum(p["numInputRows"] for p in q.recentProgress)
    else:
        rows = upper.count()
        upper.write.format("kchannel").options(**options) \
            .option("topic", args.output_topic).mode("append").save()
    print(f"wrote {rows} records from {args.input_topic} to {args.output_topic}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--command-config", help="Kafka client properties file")
    ap.add_argument("--input-topic", required=True)
    ap.add_argument("--output-topic", required=True)
    ap.add_argument("--delegation-token", action="store_true",
                    help="executors log in with a delegation token the driver obtains")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark configuration property (as spark-submit's --conf)")
    ap.add_argument("--streaming", action="store_true")
    ap.add_argument("--checkpoint", help="checkpoint directory (with --streaming)")
    ap.add_argument("--exactly-once", action="store_true",
                    help="transactional streaming writes (kchannel.exactlyOnce)")
    args = ap.parse_args(argv)
    if args.streaming and not args.checkpoint:
        ap.error("--streaming needs --checkpoint")
    if args.exactly_once and not args.streaming:
        ap.error("--exactly-once needs --streaming")
    confs = []
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--conf {item}: expected KEY=VALUE")
        confs.append((key, value))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kchannel.spark
    builder = (SparkSession.builder.master(args.master).appName("kchannel-pipeline")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in confs:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kchannel.spark.register(spark)
    try:
        run(spark, args)
    except Exception as exc:    # a failed job: say why, exit 1
        print(f"pipeline failed: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
