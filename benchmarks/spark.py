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


# -- the JVM yardstick: Spark's own Kafka source (--jvm) ------------------------
JVM_SPARK = "4.2.0"
JVM_VENV = os.environ.get("KCHANNEL_SPARK_JVM_VENV", "/tmp/kchannel-spark420")
JVM_JARS = os.environ.get("KCHANNEL_SPARK_JVM_JARS", "/tmp/kchannel-spark420-jars")
# What the connector adds to the pyspark wheel's jars (scala-library, slf4j,
# lz4, snappy and spark-tags are in the wheel already, at Spark's versions).
JVM_JAR_PREFIXES = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_",
                    "kafka-clients-", "commons-pool2-")


def prepare_jvm_environment():
    """The pyspark 4.2.0 venv (kchannel installed editable from this
    checkout) and the connector's jars from Maven Central, each made once
    when missing.  Returns (venv python, [jars])."""
    import subprocess
    python = os.path.join(JVM_VENV, "bin", "python")
    if not os.path.exists(python):
        print(f"creating {JVM_VENV} (pyspark=={JVM_SPARK}, kchannel editable)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", JVM_VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", f"pyspark=={JVM_SPARK}",
                        "pyarrow", "-e", ROOT], check=True)
    jars = sorted(os.path.join(JVM_JARS, j) for j in (os.listdir(JVM_JARS)
                  if os.path.isdir(JVM_JARS) else ()) if j.startswith(JVM_JAR_PREFIXES))
    if len(jars) < len(JVM_JAR_PREFIXES):
        print(f"fetching spark-sql-kafka-0-10_2.13:{JVM_SPARK} into {JVM_JARS}", flush=True)
        subprocess.run(["mvn", "-q", "-f", os.path.join(ROOT, "benchmarks",
                                                       "spark-kafka-pom.xml"),
                        "dependency:copy-dependencies", "-DincludeScope=runtime",
                        f"-DoutputDirectory={JVM_JARS}"], check=True)
        jars = sorted(os.path.join(JVM_JARS, j) for j in os.listdir(JVM_JARS)
                      if j.startswith(JVM_JAR_PREFIXES))
    return python, jars


def _cpu_s(pid):
    """CPU seconds of ``pid`` (user + system) and of its descendants (live,
    and the reaped children they waited for)."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(p):
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                data = f.read()
        except OSError:
            return None
        fields = data[data.rindex(b")") + 2:].split()
        return int(fields[1]), [int(x) for x in fields[11:15]]    # ppid, ut st cut cst
    stats = {int(e): stat(e) for e in os.listdir("/proc") if e.isdigit()}
    stats = {p: s for p, s in stats.items() if s is not None}
    kids, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c, (ppid, _) in stats.items():
            if ppid == p:
                kids.append(c)
                todo.append(c)
    own = sum(stats[pid][1][:2]) / tick if pid in stats else 0.0
    python = sum(sum(stats[c][1]) for c in kids if c in stats) / tick
    return own, python


def _executor_pids(app_id):
    """The executor JVMs of application ``app_id`` on a standalone cluster."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and \
                app_id.encode() in cmd:
            out.append(int(e))
    return sorted(out)


def _spark_jvm_pid():
    """The driver JVM this Python process started (the local[2] executor)."""
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as f:
                data = f.read()
            with open(f"/proc/{e}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(data[data.rindex(b")") + 2:].split()[1]) == os.getpid() and \
                b"SparkSubmit" in cmd:
            return int(e)
    raise RuntimeError("no Spark driver JVM under this process")


def jvm_child(args):
    """In the pyspark 4.2.0 venv: format("kafka") vs format("kchannel"),
    write, read and a groupBy after the read, for each security setting the
    parent passed; prints one JSON line of results."""
    import json

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import kchannel.spark
    with open(args.jvm_child, encoding="utf-8") as f:
        job = json.load(f)
    builder = (SparkSession.builder.master(args.master).appName("kchannel-bench-jvm")
               .config("spark.jars", ",".join(job["jars"]))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    cluster = args.master.startswith("spark://")
    if cluster:
        # Executors in JVMs of their own (the Workers'), each 1 core; their
        # Python is this venv's, kchannel from this checkout.
        builder = (builder.config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.executor.memory", "768m")
                   .config("spark.executor.cores", "1")
                   .config("spark.pyspark.python", sys.executable)
                   .config("spark.executorEnv.PYTHONPATH", ROOT))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    kchannel.spark.register(spark)
    if cluster:
        app = spark.sparkContext.applicationId
        deadline = time.monotonic() + 120
        while len(_executor_pids(app)) < args.executors:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {args.executors} executors for {app}")
            time.sleep(0.5)
        pids = _executor_pids(app)
        print(f"{len(pids)} executors: {pids}", flush=True)
    else:
        pids = [_spark_jvm_pid()]       # local: the driver JVM is the executor
    n, parts = args.records, args.partitions
    value = "x" * args.size
    out = []
    try:
        for case in job["cases"]:
            opts = {f"kafka.{k}": v for k, v in case["configs"].items()}
            data = spark.range(n, numPartitions=parts).selectExpr(
                "cast(cast(id as string) as binary) as key",
                f"cast(concat(cast(id as string), '{value}') as binary) as value")
            small = data.limit(max(1000, n // 20))
            res = {"case": case["label"]}

            def cpu():
                per = [_cpu_s(p) for p in pids]
                return sum(j for j, _ in per), sum(py for _, py in per)

            def measure(fn):
                # CPU seconds of the executors (their JVMs, their Python
                # workers), summed over the executors
                c0 = cpu()
                t0 = time.perf_counter()
                got = fn()
                wall = time.perf_counter() - t0
                c1 = cpu()
                return wall, c1[0] - c0[0], c1[1] - c0[1], got

            # write: a warm-up each (classes, workers, clients), then timed
            topics = case["write_topics"]
            for fmt in ("kafka", "kchannel"):
                small.write.format(fmt).options(**opts).option("topic", topics["warm"]) \
                    .mode("append").save()
            for fmt in ("kafka", "kchannel"):
                wall, jcpu, pcpu, _ = measure(
                    lambda: data.write.format(fmt).options(**opts)
                    .option("topic", topics[fmt]).mode("append").save())
                res[f"write_{fmt}"] = (n / wall, jcpu, pcpu)
            # read the JVM sink's topic with both sources, then a groupBy
            src = topics["kafka"]

            def read(fmt):
                return spark.read.format(fmt).options(**opts).option("subscribe", src).load()

            def count(fmt):
                return tuple(read(fmt).select(F.count("*"), F.sum(F.length("value")))
                             .collect()[0])

            def group(fmt):
                return sorted(tuple(r) for r in read(fmt).groupBy(
                    F.substring(F.col("value").cast("string"), 1, 2).alias("k"))
                    .count().collect())
            for fmt in ("kafka", "kchannel"):
                count(fmt)      # warm-up
            results = {}
            for fmt in ("kafka", "kchannel"):
                wall, jcpu, pcpu, got = measure(lambda: count(fmt))
                res[f"read_{fmt}"] = (n / wall, jcpu, pcpu)
                results[fmt] = got
                wall, jcpu, pcpu, got = measure(lambda: group(fmt))
                res[f"group_{fmt}"] = (n / wall, jcpu, pcpu)
                results[fmt + "-group"] = got
            assert results["kafka"] == results["kchannel"] and results["kafka"][0] == n, results
            assert results["kafka-group"] == results["kchannel-group"]
            out.append(res)
            for op in ("write", "read", "group"):
                j, k = res[f"{op}_kafka"], res[f"{op}_kchannel"]
                print(f"{case['label']} {op}: format(\"kafka\") {j[0] / 1e3:.0f} k rec/s "
                      f"(CPU s: JVM {j[1]:.1f}, Python {j[2]:.1f}); format(\"kchannel\") "
                      f"{k[0] / 1e3:.0f} k rec/s (CPU s: JVM {k[1]:.1f}, Python {k[2]:.1f}): "
                      f"{k[0] / j[0]:.2f}x", flush=True)
    finally:
        spark.stop()
    print("RESULTS " + json.dumps(out), flush=True)


def jvm_main(args):
    """Start Apache Kafka here, run :func:`jvm_child` in the pyspark 4.2.0
    venv against it (PLAINTEXT and SASL_SSL SCRAM-SHA-512), report."""
    import json
    import subprocess

    from tests.fixtures.certs import make_pki
    from tests.fixtures.kafka import kafka_unavailable_reason, start_kafka_broker
    from tests.fixtures.records import create_topic
    reason = kafka_unavailable_reason()
    if reason:
        sys.exit(f"benchmarks/spark.py needs Apache Kafka: {reason}")
    python, jars = prepare_jvm_environment()
    tmp = tempfile.mkdtemp(prefix="kchannel-bench-spark-jvm-")
    cluster = None
    if args.cluster:
        # A standalone cluster of the venv's pyspark (the JVM connector is
        # built for it): Master and --executors 1-core Workers.
        import subprocess
        from tests.fixtures.spark_cluster import SparkCluster
        home = subprocess.run([python, "-c", "import os, pyspark; "
                               "print(os.path.dirname(pyspark.__file__))"],
                              check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
        os.makedirs(os.path.join(tmp, "cluster"))
        cluster = SparkCluster(os.path.join(tmp, "cluster"), pyspark_home=home, python=python)
        cluster.start(workers=args.executors, connect=False)
        args.master = cluster.master_url
        print(f"standalone cluster {cluster.master_url} ({home})", flush=True)
    os.makedirs(os.path.join(tmp, "pki"))
    os.makedirs(os.path.join(tmp, "kafka"))
    pki = make_pki(os.path.join(tmp, "pki"))
    broker = start_kafka_broker(os.path.join(tmp, "kafka"), pki)
    try:
        plain = broker.bootstrap("PLAINTEXT")
        cases = []
        for label, configs in (("PLAINTEXT", {"bootstrap.servers": plain}),
                               ("SASL_SSL SCRAM-SHA-512",
                                broker.client_configs("SASL_SSL", "SCRAM-SHA-512"))):
            if label not in args.jvm_cases:
                continue
            topics = {k: create_topic(plain, f"bench-jvm-{k}-{uuid.uuid4().hex[:6]}",
                                      partitions=args.partitions)
                      for k in ("warm", "kafka", "kchannel")}
            cases.append({"label": label, "configs": configs, "write_topics": topics})
        job = os.path.join(tmp, "job.json")
        with open(job, "w", encoding="utf-8") as f:
            json.dump({"jars": jars, "cases": cases}, f)
        env = dict(os.environ, PYTHONPATH=ROOT, PYSPARK_PYTHON=python,
                   PYSPARK_DRIVER_PYTHON=python)
        proc = subprocess.run([python, os.path.abspath(__file__), "--jvm-child", job,
                               "--records", str(args.records), "--size", str(args.size),
                               "--partitions", str(args.partitions), "--master", args.master,
                               "--executors", str(args.executors)],
                              env=env, stdout=subprocess.PIPE, text=True)
        lines = proc.stdout.splitlines()
        for line in lines:
            if not line.startswith("RESULTS "):
                print(line)
        if proc.returncode:
            sys.exit(f"the pyspark {JVM_SPARK} run failed (exit {proc.returncode})")
        results = json.loads([l for l in lines if l.startswith("RESULTS ")][-1][8:])
    finally:
        if cluster is not None:
            cluster.stop()
        broker.stop()
        broker.oauth.close()
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    where = (f"standalone cluster (Master + {args.executors} 1-core Workers)" if args.cluster
             else f"`{args.master}`")
    from _results import row
    for res in results:
        ratios = {op: res[f"{op}_kchannel"][0] / res[f"{op}_kafka"][0]
                  for op in ("write", "read", "group")}
        text = "; ".join(
            f"{op} {res[f'{op}_kchannel'][0] / 1e3:.0f} k vs {res[f'{op}_kafka'][0] / 1e3:.0f} k "
            f"rec/s ({ratios[op]:.2f}x; executors' CPU s kchannel JVM "
            f"{res[f'{op}_kchannel'][1]:.1f} + Python {res[f'{op}_kchannel'][2]:.1f}, kafka JVM "
            f"{res[f'{op}_kafka'][1]:.1f} + Python {res[f'{op}_kafka'][2]:.1f})"
            for op in ("write", "read", "group"))
        print(f"{res['case']}: {text}")
        row(f"PySpark {JVM_SPARK} {where}, {args.records} x {args.size} B records, "
            f"{res['case']}: `format(\"kchannel\")` vs Spark's JVM `format(\"kafka\")` "
            "(spark-sql-kafka-0-10), write, read (count) and groupBy count after the read "
            "(`spark.py --jvm`)", text, ">= 0.5x read and write",
            min(ratios["write"], ratios["read"]) >= 0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=400000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--jvm", action="store_true",
                    help=f"compare with Spark's own Kafka source in a pyspark {JVM_SPARK} "
                         f"venv ({JVM_VENV}, made when missing)")
    ap.add_argument("--jvm-cases", default="PLAINTEXT,SASL_SSL SCRAM-SHA-512",
                    help="with --jvm: the security settings to measure (comma-separated)")
    ap.add_argument("--master", default="local[2]", help="with --jvm: Spark's master URL")
    ap.add_argument("--cluster", action="store_true",
                    help="with --jvm: start a standalone cluster of the pyspark 4.2.0 venv "
                         "(Master and --executors 1-core Workers) and run there")
    ap.add_argument("--executors", type=int, default=2,
                    help="with --jvm --cluster: Workers, one 1-core executor each")
    ap.add_argument("--jvm-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.jvm_child:
        return jvm_child(args)
    if args.jvm:
        args.jvm_cases = [c.strip() for c in args.jvm_cases.split(",")]
        return jvm_main(args)

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
