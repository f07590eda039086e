"""``format("kchannel")`` on a Spark standalone cluster (tests/fixtures/
spark_cluster.py: Master, two 1-core Workers, executors in JVMs of their
own with their own Python workers) against the session's Apache Kafka
broker: batch and streaming reads and writes, delegation tokens as the
executors' only credential (checked in the executors' processes), an
executor killed mid-stream, a Worker added mid-stream after a token
renewal, logins counted by a ``kchannel serve`` gateway, exactly-once
streaming writes through an executor kill and a replayed micro-batch, and
the example pipeline submitted to the cluster.

One cluster serves the module; the streaming tests share queries where a
second one would only repeat the first (the suite runs on two cores)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.tokens.admin import DelegationTokenAdmin
from tests.fixtures.peers import PLAIN_LOGIN_MODULE as PLAIN, InProcessServer, plain_gateway_props
from tests.fixtures.records import consume_confluent, create_topic, produce_confluent, topic_name
from tests.fixtures.spark_cluster import cmdline, descendants, environ

# (timeout: the first test also starts the cluster, four JVMs on two shared cores)
pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka, pytest.mark.timeout(600)]

BASE_TS = 1_700_000_000_000


def driver_options(kafka_broker, renewers):
    """The driver's SASL_SSL SCRAM-SHA-512 login as ``kafka.`` options, with
    delegation tokens for the executors (a renewer of its own: a token no
    other test caches)."""
    options = {f"kafka.{k}": v for k, v in
               kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512").items()}
    options["kchannel.delegationToken"] = "true"
    options["kchannel.delegationToken.renewers"] = renewers
    return options


def secrets_of(kafka_broker):
    """What must never reach an executor: the driver's password and JAAS line."""
    driver = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    jaas = driver["sasl.jaas.config"].encode()
    password = jaas.split(b'password="')[1].split(b'"')[0]
    assert len(password) >= 8
    return [password, jaas]


def stats_by_pid(session, n=12):
    rows = session.read.format("kchannel_stats").option("numPartitions", str(n)).load().collect()
    return {r["pid"]: r.asDict() for r in rows}


def executor_of(cluster, pid):
    """The executor id whose JVM ``pid`` descends from, or None (driver)."""
    for epid, eid, _ in cluster.executors():
        if pid in descendants(epid):
            return eid
    return None


def topic_values(bootstrap, topic, partitions):
    """Every value in ``topic`` (up to its end offsets now)."""
    from kchannel import Consumer
    from kchannel.client.metadata import TopicPartition
    with Consumer({"bootstrap.servers": bootstrap}) as c:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    n = sum(ends.values())
    rows = consume_confluent(bootstrap, topic, partitions, n)
    assert len(rows) == n
    return [v for _, _, _, v, _, _ in rows]


def describe_tokens(kafka_broker, renewer):
    with KafkaClient(kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")) as c:
        c.connect()
        return [t for t in DelegationTokenAdmin(c).describe()
                if renewer in t.token_info.renewers_as_string]


def test_batch_read_and_write_with_only_the_token_on_executors(spark_cluster, kafka_broker):
    """A batch read and a batch write on the cluster with the driver's
    SCRAM login and a delegation token for the executors: every record
    arrives; every executor JVM and every Python worker under it (their
    /proc environ and cmdline) holds neither the driver's password nor its
    JAAS line, and the Python workers that read logged in with the token."""
    session = spark_cluster.session
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("cl-batch-in"), partitions=4)
    target = create_topic(plain, topic_name("cl-batch-out"), partitions=4)
    records = [(b"k%d" % i, b"v%d" % i, [], BASE_TS + i) for i in range(400)]
    produce_confluent(plain, source, records, "none")
    options = driver_options(kafka_broker, "User:cluster-batch")

    df = session.read.format("kchannel").options(**options).option("subscribe", source) \
        .option("minPartitions", "8").load()
    rows = df.selectExpr("key", "upper(cast(value as string)) as value").collect()
    assert sorted(bytes(r["key"]) for r in rows) == sorted(k for k, _, _, _ in records)
    df.selectExpr("key", "upper(cast(value as string)) as value").write.format("kchannel") \
        .options(**options).option("topic", target).mode("append").save()
    got = consume_confluent(plain, target, 4, 400)
    assert sorted(v for _, _, _, v, _, _ in got) == sorted(v.upper() for _, v, _, _ in records)

    # (the read and the write each plan in a driver-side Python worker of
    # their own, each with its token cache: one or two tokens)
    ids = {t.token_info.token_id for t in describe_tokens(kafka_broker, "User:cluster-batch")}
    assert ids
    stats = stats_by_pid(session)
    on_executors = {pid: s for pid, s in stats.items() if executor_of(spark_cluster, pid)}
    assert {executor_of(spark_cluster, pid) for pid in on_executors} == \
        {eid for _, eid, _ in spark_cluster.executors()}
    used = [s for s in on_executors.values() if s["authentications"]]
    assert used and all(s["token_ids"] and set(s["token_ids"].split(",")) <= ids
                        for s in used), stats

    secrets = secrets_of(kafka_broker)
    checked = 0
    for epid, eid, _ in spark_cluster.executors():
        procs = descendants(epid)
        assert any(b"pyspark.daemon" in b" ".join(cmdline(p)) for p in procs), \
            f"executor {eid} has no Python worker"
        for pid in procs:
            blob = b"\0".join(environ(pid) + cmdline(pid))
            assert blob, f"cannot read /proc/{pid}"
            for secret in secrets:
                assert secret not in blob, f"executor {eid} process {pid} holds a driver secret"
            assert b"kafka.sasl" not in blob
            checked += 1
    assert checked >= 4     # 2 executor JVMs, each with a daemon and a worker


def test_streaming_survives_a_killed_executor_and_restarts_from_its_checkpoint(
        spark_cluster, kafka_broker, tmp_path):
    """A streaming read-transform-write query on the cluster: an executor
    JVM is SIGKILLed mid-stream; Spark replaces it and retries its tasks;
    the output holds every input record at least once; the query, stopped
    and started again on its checkpoint, continues where it stopped."""
    session = spark_cluster.session
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("cl-stream-in"), partitions=2)
    target = create_topic(plain, topic_name("cl-stream-out"), partitions=2)
    ckpt = str(tmp_path / "ckpt")

    def start():
        return (session.readStream.format("kchannel")
                .option("kafka.bootstrap.servers", plain).option("subscribe", source)
                .option("startingOffsets", "earliest").option("minPartitions", "4").load()
                .selectExpr("key", "upper(cast(value as string)) as value")
                .writeStream.format("kchannel").option("kafka.bootstrap.servers", plain)
                .option("topic", target).option("checkpointLocation", ckpt)
                .trigger(processingTime="500 milliseconds").start())

    def wave(w, n=100):
        recs = [(b"k%d" % i, b"w%d-%d" % (w, i), [], BASE_TS + i) for i in range(n)]
        produce_confluent(plain, source, recs, "none")
        return [v.upper() for _, v, _, _ in recs]

    want = []
    q = start()
    try:
        want += wave(0)
        q.processAllAvailable()
        before = spark_cluster.executors()
        victim = before[0]
        want += wave(1)
        os.kill(victim[0], signal.SIGKILL)      # while wave 1 is being processed
        want += wave(2)
        q.processAllAvailable()
        want += wave(3)
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    after = spark_cluster.wait_executors(2)
    assert victim[1] not in {eid for _, eid, _ in after}    # replaced by a new executor
    got = topic_values(plain, target, 2)
    assert set(got) == set(want)        # at least once: every record, maybe twice

    # The same query again, on its checkpoint: it continues where it stopped
    # (nothing before wave 4 is written again).
    n_before = len(got)
    q = start()
    try:
        want4 = wave(4)
        q.processAllAvailable()
    finally:
        q.stop()
    got = topic_values(plain, target, 2)
    assert sorted(v for v in got if v.startswith(b"W4-")) == sorted(want4)
    assert len(got) == n_before + len(want4)


def committed_values(bootstrap, topic, partitions):
    """Every value in ``topic`` as read_committed readers see it, read by
    kchannel and by confluent-kafka (librdkafka) to the partitions' ends."""
    from confluent_kafka import Consumer as CKConsumer, KafkaError, TopicPartition as CKTp

    from kchannel import Consumer
    from kchannel.client.metadata import TopicPartition
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ours = []
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed",
                   "auto.offset.reset": "earliest"}) as c:
        ends = c.end_offsets(tps)
        c.assign(tps)
        deadline = time.monotonic() + 60
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "kchannel never reached the end offsets"
            ours.extend(r.value for r in c.poll(0.5))
    theirs = []
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": "kchannel-test",
                    "enable.auto.commit": False, "isolation.level": "read_committed",
                    "enable.partition.eof": True})
    c.assign([CKTp(topic, p, 0) for p in range(partitions)])
    at_end = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, "confluent-kafka never reached the ends"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                continue
            theirs.append(m.value())
    finally:
        c.close()
    assert sorted(ours) == sorted(theirs)
    return ours


def test_exactly_once_streaming_write_through_a_killed_executor_and_a_replayed_batch(
        spark_cluster, kafka_broker, tmp_path):
    """``kchannel.exactlyOnce``: a streaming read-transform-write query
    whose executor is SIGKILLed mid-stream, then stopped and restarted after
    its last commit log entry was removed (what a driver that dies between
    its tasks' commits and its checkpoint's commit leaves behind: Spark runs
    that micro-batch again).  Read with read_committed, by kchannel and
    confluent-kafka, the output holds every input record exactly once."""
    session = spark_cluster.session
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("eos-in"), partitions=2)
    target = create_topic(plain, topic_name("eos-out"), partitions=2)
    ckpt = tmp_path / "ckpt"

    def start():
        return (session.readStream.format("kchannel")
                .option("kafka.bootstrap.servers", plain).option("subscribe", source)
                .option("startingOffsets", "earliest").option("minPartitions", "4").load()
                .selectExpr("key", "upper(cast(value as string)) as value")
                .writeStream.format("kchannel").option("kafka.bootstrap.servers", plain)
                .option("topic", target).option("kchannel.exactlyOnce", "true")
                .option("checkpointLocation", str(ckpt))
                .trigger(processingTime="500 milliseconds").start())

    def wave(w, n=100):
        recs = [(b"k%d" % i, b"e%d-%d" % (w, i), [], BASE_TS + i) for i in range(n)]
        produce_confluent(plain, source, recs, "none")
        return [v.upper() for _, v, _, _ in recs]

    want = []
    q = start()
    try:
        want += wave(0)
        q.processAllAvailable()
        victim = spark_cluster.executors()[0]
        want += wave(1)
        os.kill(victim[0], signal.SIGKILL)      # while wave 1 is being written
        want += wave(2)
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    spark_cluster.wait_executors(2)
    # The driver "died" after the last micro-batch's transactions committed
    # but before its commit log entry: the restarted query runs it again.
    commits = ckpt / "commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    (commits / str(last)).unlink()
    crc = commits / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    q = start()
    try:
        want += wave(3)
        q.processAllAvailable()
        assert q.exception() is None
        replayed = [p for p in q.recentProgress if p["batchId"] == last]
    finally:
        q.stop()
    assert replayed and replayed[0]["numInputRows"] > 0, q.recentProgress
    got = committed_values(plain, target, 2)
    assert len(got) == len(set(got)), "a record was written twice"
    assert sorted(got) == sorted(want)


def test_gateway_counts_logins_per_executor_not_per_task(spark_cluster, kafka_broker,
                                                          tmp_path):
    """A 40-task read and a 40-task write through a ``kchannel serve``
    gateway (SASL_PLAINTEXT PLAIN): the gateway counts at most one login
    per Python worker per broker address it uses (the bootstrap address and
    the one broker the gateway advertises), whatever the number of tasks."""
    session = spark_cluster.session
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("cl-gw-in"), partitions=4)
    target = create_topic(plain, topic_name("cl-gw-out"), partitions=4)
    records = [(b"k%d" % i, b"v%d" % i, [], BASE_TS + i) for i in range(400)]
    produce_confluent(plain, source, records, "none")
    gw = InProcessServer(plain_gateway_props(
        kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512"), tmp_path / "gw"))
    try:
        opts = {"kafka.bootstrap.servers": gw.bootstrap("SASL_PLAINTEXT"),
                "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config":
                    f'{PLAIN} required username="alice" password="alice-secret";'}
        metrics = gw.server.metrics

        def logins():
            return int(metrics.metric("successful-authentication-total"))

        before_plan = logins()
        df = session.read.format("kchannel").options(**opts).option("subscribe", source) \
            .option("minPartitions", "40").load()
        tasks = df.rdd.getNumPartitions()
        before_read = logins()
        rows = df.select("key", "value").collect()
        after_read = logins()
        df.select("key", "value").repartition(40).write.format("kchannel").options(**opts) \
            .option("topic", target).mode("append").save()
        after_write = logins()
    finally:
        gw.stop()
    assert tasks >= 40
    assert sorted(bytes(r["value"]) for r in rows) == sorted(v for _, v, _, _ in records)
    assert len(topic_values(plain, target, 4)) == 400
    stats = stats_by_pid(session)
    executors = {executor_of(spark_cluster, pid) for pid in stats} - {None}
    workers = [pid for pid in stats if executor_of(spark_cluster, pid)]
    brokers = 1     # the gateway advertises one node for Kafka's one broker
    print(f"{tasks} tasks on {len(executors)} executors ({len(workers)} Python workers): "
          f"gateway logins planning={before_read - before_plan} "
          f"read={after_read - before_read} write={after_write - after_read}")
    assert after_read - before_read <= len(workers) * (1 + brokers) < tasks
    assert after_write - after_read <= len(workers) * (1 + brokers)
    assert before_read - before_plan <= 4


def test_worker_added_mid_stream_gets_the_current_token_after_a_renewal(
        spark_cluster, kafka_broker, tmp_path):
    """A streaming query whose driver renews its delegation token in place
    (renewalRatio 0.00005 of the broker's 24 h expiry: after ~4 s): a Worker
    started after the renewal gets an executor, whose Python worker reads
    its share of the micro-batches logging in with the current token."""
    session = spark_cluster.session
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("cl-renew-in"), partitions=3)
    target = create_topic(plain, topic_name("cl-renew-out"), partitions=3)
    renewer = "User:cluster-renewal"
    options = driver_options(kafka_broker, renewer)
    options["kchannel.delegationToken.renewalRatio"] = "0.00005"
    q = (session.readStream.format("kchannel").options(**options).option("subscribe", source)
         .option("startingOffsets", "earliest").option("minPartitions", "6").load()
         .selectExpr("key", "value").writeStream.format("kchannel")
         .option("kafka.bootstrap.servers", plain).option("topic", target)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(processingTime="500 milliseconds").start())
    want = []

    def wave(w, n=60):
        recs = [(b"k%d" % i, b"r%d-%d" % (w, i), [], BASE_TS + i) for i in range(n)]
        produce_confluent(plain, source, recs, "none")
        want.extend(v for _, v, _, _ in recs)
        q.processAllAvailable()
    try:
        wave(0)
        # (Spark builds the stream reader in more than one driver-side Python
        # process, each obtaining a token: the micro-batches use one of them)
        first = {t.token_info.token_id: t.token_info for t in
                 describe_tokens(kafka_broker, renewer)}
        issued = max(i.issue_timestamp for i in first.values())
        # past renewalRatio of its life: the next micro-batch renews it
        time.sleep(max(0.0, (issued + 0.00005 * 86_400_000) / 1000 - time.time() + 1))
        wave(1)
        renewed = [t.token_info for t in describe_tokens(kafka_broker, renewer)
                   if t.token_info.expiry_timestamp
                   > first[t.token_info.token_id].expiry_timestamp]
        assert len(renewed) == 1, "the driver did not renew its token in place"
        info = renewed[0]

        old = {eid for _, eid, _ in spark_cluster.executors()}
        spark_cluster.add_worker()
        (new,) = [e for e in spark_cluster.wait_executors(len(old) + 1) if e[1] not in old]
        for w in range(2, 8):
            wave(w)
            stats = stats_by_pid(session, 18)
            mine = [s for pid, s in stats.items() if pid in descendants(new[0])]
            if any(s["consumers_created"] and s["authentications"] for s in mine):
                break
        assert q.exception() is None
    finally:
        q.stop()
    readers = [s for s in mine if s["consumers_created"]]    # (the sink writes PLAINTEXT)
    assert readers and all(s["token_ids"] == info.token_id for s in readers), (info, mine)
    assert all(s["authentications"] for s in readers), "the new executor never logged in"
    assert sorted(topic_values(plain, target, 3)) == sorted(want)


def test_example_pipeline_submitted_to_the_cluster(spark_cluster, kafka_broker, tmp_path):
    """``examples/spark/pipeline.py`` as an application of its own on the
    cluster: the README's command with ``--master spark://...`` (and the
    executors' ``PYTHONPATH`` as ``--conf``), streaming with
    ``--exactly-once`` and a delegation token for the executors.  The
    output, read with read_committed, is the transformed input exactly
    once.  (Last in the module: it stops the tests' session to free the
    Workers' cores.)"""
    from kchannel.config.properties import format_properties
    from tests.fixtures.spark import PIPELINE, ROOT, readme_command
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("cl-pipe-in"), partitions=2)
    target = create_topic(plain, topic_name("cl-pipe-out"), partitions=2)
    produce_confluent(plain, source, [(b"k%d" % i, b"value %d" % i, [], BASE_TS + i)
                                      for i in range(40)], "none")
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    bootstrap = configs.pop("bootstrap.servers")
    props = tmp_path / "client.properties"
    props.write_text(format_properties(configs), encoding="latin-1")
    subst = {"broker:9093": bootstrap, "client.properties": str(props), "events": source,
             "events-upper": target}
    argv = [subst.get(a, a) for a in readme_command()]
    argv += ["--master", spark_cluster.master_url, "--streaming", "--exactly-once",
             "--checkpoint", str(tmp_path / "ckpt")]
    for key, value in (("spark.executorEnv.PYTHONPATH", ROOT),
                       ("spark.executorEnv.KCHANNEL_NO_EXTENSIONS",
                        os.environ.get("KCHANNEL_NO_EXTENSIONS", "")),
                       ("spark.pyspark.python", sys.executable),
                       ("spark.driver.host", "127.0.0.1"),
                       ("spark.driver.bindAddress", "127.0.0.1"),
                       ("spark.executor.memory", "512m"),
                       ("spark.executor.extraJavaOptions",
                        "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")):
        argv += ["--conf", f"{key}={value}"]
    spark_cluster.release()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, PIPELINE, *argv], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"wrote 40 records from {source} to {target}" in out.stdout
    got = committed_values(plain, target, 2)
    assert sorted(got) == sorted(b"VALUE %d" % i for i in range(40))
