"""Connection fan-out of a 200-task Spark job, counted by the server: a
``kchannel serve`` gateway (in process, its metrics read directly) in front
of Apache Kafka, and ``local[2]`` Spark reading and writing through it over
SASL_PLAINTEXT.  However many tasks run, the gateway sees at most one
authenticated connection per Python worker per broker address it uses
(the bootstrap address and the one broker the gateway advertises), plus the
driver's own connections for planning."""
import pytest

from tests.fixtures.peers import PLAIN_LOGIN_MODULE as PLAIN, InProcessServer, plain_gateway_props
from tests.fixtures.records import create_topic, produce_confluent, topic_name

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka, pytest.mark.timeout(600)]



@pytest.fixture
def gateway(kafka_broker, tmp_path):
    up = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    gw = InProcessServer(plain_gateway_props(up, tmp_path / "data"))
    yield gw
    gw.stop()


def _options(gw):
    return {"kafka.bootstrap.servers": gw.bootstrap("SASL_PLAINTEXT"),
            "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config":
                f'{PLAIN} required username="alice" password="alice-secret";'}


def _logins(gw):
    m = gw.server.metrics
    return (int(m.metric("successful-authentication-total")),
            int(m.metric("connection-creation-total")))


def _workers(spark):
    rows = spark.read.format("kchannel_stats").option("numPartitions", "16").load().collect()
    return {r["pid"] for r in rows}


def test_200_task_read_and_write_open_few_connections(spark, kafka_broker, gateway):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("fanout-in"), partitions=4)
    target = create_topic(plain, topic_name("fanout-out"), partitions=4)
    import time
    base = int(time.time() * 1000)
    records = [(b"k%d" % i, b"v%d" % i, [], base + i) for i in range(2000)]
    produce_confluent(plain, source, records, "none")
    opts = _options(gateway)

    logins0, conns0 = _logins(gateway)
    df = spark.read.format("kchannel").options(**opts).option("subscribe", source) \
        .option("minPartitions", "200").load()
    tasks = df.rdd.getNumPartitions()
    planned_logins, _ = _logins(gateway)
    assert tasks >= 200
    # the read: 200 tasks
    rows = df.select("key", "value").collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(v for _, v, _, _ in records)
    read_logins, read_conns = _logins(gateway)
    # the write: 200 tasks through the same gateway
    df.select("key", "value").repartition(200).write.format("kchannel").options(**opts) \
        .option("topic", target).mode("append").save()
    write_logins, write_conns = _logins(gateway)
    workers = _workers(spark)
    brokers = 1     # the gateway advertises one node for Kafka's one broker
    print(f"tasks={tasks} python workers={len(workers)}: authenticated connections "
          f"planning={planned_logins - logins0} read={read_logins - planned_logins} "
          f"write={write_logins - read_logins} (connections created "
          f"{read_conns - conns0} / {write_conns - read_conns})")
    # Each worker: one bootstrap (metadata) connection and one to the
    # broker, for its consumer and again for its producer.
    per_client = len(workers) * (1 + brokers)
    assert read_logins - planned_logins <= per_client
    assert write_logins - read_logins <= per_client
    # Planning on the driver: a handful of connections (metadata, offsets).
    assert planned_logins - logins0 <= 4
    # Every connection the job opened authenticated (no login per task).
    assert write_conns - conns0 <= (write_logins - logins0) + 2
