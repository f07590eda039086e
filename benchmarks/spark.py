"""Records/s read and written by ``format("kchannel")`` against a baseline
of kafka-python 3 inside ``mapPartitions`` on the same data and the same
Spark session (``local[2]``), one Apache Kafka broker, one run.

    python benchmarks/spark.py [--records 400000] [--size 100] [--partitions 4]

Needs what the Spark tests need (pyspark, pyarrow, Java 17) and the Apache
Kafka jars (``.ci/install``).  Each side runs once to warm up (Python
workers, cached clients, JIT) and is then timed once; the ratio is what to
read, absolute figures on a shared machine swing.  The baseline is what a
PySpark user writes without kchannel: each task opens a kafka-python
consumer (assign, seek, poll to the end offset) or producer (send, flush)
for its partition of the data.
"""
import argparse
import os
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def kafka_python_read(bootstrap, topic, ranges):
    """mapPartitions body: the records of one (partition, start, end) range."""
    def read(it):
        from kafka import KafkaConsumer, TopicPartition
        for part, start, end in it:
            c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                              max_partition_fetch_bytes=1 << 20)
            tp = TopicPartition(topic, part)
            c.assign([tp])
            c.seek(tp, start)
            n = size = 0
            pos = start
            while pos < end:
                for msgs in c.poll(1000, max_records=10000).values():
                    for m in msgs:
                        if m.offset >= end:
                            break
                        n += 1
                        size += len(m.value)
                        pos = m.offset + 1
            c.close()
            yield (n, size)
    return read


def kafka_python_write(bootstrap, topic):
    def write(rows):
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5,
                          batch_size=1000000)
        n = 0
        for key, value in rows:
            p.send(topic, key=key, value=value)
            n += 1
        p.flush()
        p.close()
        yield n
    return write


PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def fanout(spark, broker, topic, tmp, ranges, tasks=200):
    """Authenticated connections a cold 200-task read opens, counted by a
    kchannel serve gateway (SASL_PLAINTEXT PLAIN) in front of the broker:
    kchannel's per-worker cache vs kafka-python opening a consumer per task."""
    from tests.fixtures.peers import InProcessServer, plain_gateway_props
    props = plain_gateway_props({"bootstrap.servers": broker.bootstrap("PLAINTEXT")},
                                os.path.join(tmp, "gateway"))
    gw = InProcessServer(props)
    try:
        address = gw.bootstrap("SASL_PLAINTEXT")
        metrics = gw.server.metrics

        def logins():
            return int(metrics.metric("successful-authentication-total"))

        # Split the ranges into `tasks` pieces, as minPartitions does.
        pieces = []
        for part, start, end in ranges:
            k = max(1, tasks // len(ranges))
            step = max(1, (end - start + k - 1) // k)
            pieces += [(part, s, min(end, s + step)) for s in range(start, end, step)]
        before = logins()
        t0 = time.perf_counter()
        spark.read.format("kchannel").option("kafka.bootstrap.servers", address) \
            .option("kafka.security.protocol", "SASL_PLAINTEXT") \
            .option("kafka.sasl.mechanism", "PLAIN") \
            .option("kafka.sasl.jaas.config",
                    f'{PLAIN} required username="alice" password="alice-secret";') \
            .option("subscribe", topic).option("minPartitions", str(tasks)).load().count()
        kc = (logins() - before, time.perf_counter() - t0)

        def read(it):
            from kafka import KafkaConsumer, TopicPartition
            for part, start, end in it:
                c = KafkaConsumer(bootstrap_servers=address, security_protocol="SASL_PLAINTEXT",
                                  sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                  sasl_plain_password="alice-secret", enable_auto_commit=False)
                tp = TopicPartition(topic, part)
                c.assign([tp])
                c.seek(tp, start)
                pos = start
                while pos < end:
                    for msgs in c.poll(1000).values():
                        pos = max(pos, msgs[-1].offset + 1)
                c.close()
                yield 1
        before = logins()
        t0 = time.perf_counter()
        spark.sparkContext.parallelize(pieces, len(pieces)).mapPartitions(read).count()
        kp = (logins() - before, time.perf_counter() - t0)
        # What one login costs each client against this gateway, timed
        # sequentially: the seconds the job spent authenticating are about
        # its logins times that.
        kc_login, kp_login = _login_seconds(address)
        print(f"cold {len(pieces)}-task read through a gateway: kchannel (per-worker cache) "
              f"{kc[0]} authenticated connections, {kc[1]:.1f} s job, ~{kc[0] * kc_login:.2f} s "
              f"authenticating ({kc_login * 1000:.1f} ms per login); kafka-python per task "
              f"{kp[0]} authenticated connections, {kp[1]:.1f} s job, "
              f"~{kp[0] * kp_login:.2f} s authenticating ({kp_login * 1000:.1f} ms per login)",
              flush=True)
        from _results import row
        row(f"PySpark `local[2]` cold {len(pieces)}-task read through a `kchannel serve` "
            "gateway: authenticated connections counted by the gateway, seconds spent "
            "authenticating (logins x the median login) and job time",
            f"kchannel (per-worker cache) {kc[0]} connections, ~{kc[0] * kc_login:.2f} s, "
            f"{kc[1]:.1f} s job; kafka-python consumer per task {kp[0]} connections, "
            f"~{kp[0] * kp_login:.2f} s, {kp[1]:.1f} s job")
    finally:
        gw.stop()


def _login_seconds(address, n=21):
    """Median wall seconds of one authenticated connection and its first
    Metadata request (TCP, SASL PLAIN, ApiVersions, Metadata), kchannel's
    and kafka-python's (its admin client's bootstrap), the two alternating."""
    import statistics

    from kafka import KafkaAdminClient

    from kchannel.client import KafkaClient
    kc_cfg = {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN",
              "sasl.jaas.config": f'{PLAIN} required username="alice" password="alice-secret";'}
    kc, kp = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        with KafkaClient(dict(kc_cfg)) as c:
            c.connect()
            c.request(3, {"topics": [], "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False})
        kc.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        a = KafkaAdminClient(bootstrap_servers=address, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret")
        a.close()
        kp.append(time.perf_counter() - t0)
    return statistics.median(kc), statistics.median(kp)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()

    from tests.fixtures.certs import make_pki
    from tests.fixtures.kafka import kafka_unavailable_reason, start_kafka_broker
    from tests.fixtures.records import create_topic
    reason = kafka_unavailable_reason()
    if reason:
        sys.exit(f"benchmarks/spark.py needs Apache Kafka: {reason}")
    tmp = tempfile.mkdtemp(prefix="kchannel-bench-spark-")
    os.makedirs(os.path.join(tmp, "pki"))
    os.makedirs(os.path.join(tmp, "kafka"))
    pki = make_pki(os.path.join(tmp, "pki"))
    broker = start_kafka_broker(os.path.join(tmp, "kafka"), pki)
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kchannel.spark
    spark = (SparkSession.builder.master("local[2]").appName("kchannel-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kchannel.spark.register(spark)
    bootstrap = broker.bootstrap("PLAINTEXT")
    try:
        n, parts = args.records, args.partitions
        value = "x" * args.size
        src = create_topic(bootstrap, f"bench-src-{uuid.uuid4().hex[:6]}", partitions=parts)
        data = spark.range(n, numPartitions=parts).selectExpr(
            "cast(cast(id as string) as binary) as key",
            f"cast(concat(cast(id as string), '{value}') as binary) as value")

        # -- write ------------------------------------------------------------
        results = {}
        for name in ("warm-up", "kchannel", "warm-up-kp", "kafka-python"):
            topic = create_topic(bootstrap, f"bench-w-{uuid.uuid4().hex[:6]}",
                                 partitions=parts)
            if name in ("warm-up", "kchannel"):
                wall, _ = timed(lambda: data.write.format("kchannel")
                                .option("kafka.bootstrap.servers", bootstrap)
                                .option("topic", topic).mode("append").save())
            else:
                wall, _ = timed(lambda: sum(data.rdd.map(lambda r: (r[0], r[1]))
                                            .mapPartitions(kafka_python_write(bootstrap, topic))
                                            .collect()))
            results[name] = wall
        data.write.format("kchannel").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", src).mode("append").save()
        w_kc, w_kp = n / results["kchannel"], n / results["kafka-python"]
        print(f"write {n} x {args.size} B: kchannel {w_kc / 1e3:.0f} k rec/s, "
              f"kafka-python in mapPartitions {w_kp / 1e3:.0f} k rec/s: {w_kc / w_kp:.2f}x",
              flush=True)

        # -- read -------------------------------------------------------------
        from kchannel import Consumer
        from kchannel.client.metadata import TopicPartition
        with Consumer({"bootstrap.servers": bootstrap}) as c:
            ends = c.end_offsets([TopicPartition(src, p) for p in range(parts)])
        ranges = [(tp.partition, 0, e) for tp, e in ends.items()]

        def kc_read():
            df = spark.read.format("kchannel").option("kafka.bootstrap.servers", bootstrap) \
                .option("subscribe", src).load()
            return df.select(F.count("*"), F.sum(F.length("value"))).collect()[0]

        def kp_read():
            rows = spark.sparkContext.parallelize(ranges, len(ranges)).mapPartitions(
                kafka_python_read(bootstrap, src, ranges)).collect()
            return (sum(r[0] for r in rows), sum(r[1] for r in rows))

        kc_read()
        r_kc_wall, got_kc = timed(kc_read)
        kp_read()
        r_kp_wall, got_kp = timed(kp_read)
        assert tuple(got_kc) == tuple(got_kp) and got_kc[0] == n, (got_kc, got_kp)
        r_kc, r_kp = n / r_kc_wall, n / r_kp_wall
        print(f"read {n} x {args.size} B: kchannel {r_kc / 1e3:.0f} k rec/s, "
              f"kafka-python in mapPartitions {r_kp / 1e3:.0f} k rec/s: {r_kc / r_kp:.2f}x",
              flush=True)
        from _results import row
        row(f"PySpark `local[2]`, {n} x {args.size} B records, `format(\"kchannel\")` vs "
            "kafka-python 3 in `mapPartitions` (`spark.py`, one Apache Kafka broker)",
            f"write {w_kc / 1e3:.0f} k vs {w_kp / 1e3:.0f} k rec/s ({w_kc / w_kp:.2f}x); read "
            f"{r_kc / 1e3:.0f} k vs {r_kp / 1e3:.0f} k rec/s ({r_kc / r_kp:.2f}x)",
            ">= 3x both", min(w_kc / w_kp, r_kc / r_kp) >= 3)

        # -- connection fan-out: a cold 200-task read through a gateway -------
        fanout(spark, broker, src, tmp, ranges)
    finally:
        spark.stop()
        broker.stop()
        broker.oauth.close()


if __name__ == "__main__":
    main()
