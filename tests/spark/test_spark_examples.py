"""``examples/spark/pipeline.py`` run as a user runs it (its own process and
Spark session) against Apache Kafka's SASL_SSL SCRAM-SHA-512 listener with a
delegation token for the executors; confluent-kafka checks the output."""
import os
import subprocess
import sys
import time

import pytest

from kchannel.config.properties import format_properties
from tests.fixtures.records import consume_confluent, create_topic, produce_confluent, topic_name
from tests.fixtures.spark import PIPELINE, ROOT, readme_command, require_spark

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.kafka, pytest.mark.timeout(600)]


@pytest.fixture
def need_spark():
    require_spark()


def run_pipeline(*args):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, PIPELINE, *args], capture_output=True, text=True,
                          env=env, timeout=240)


def test_pipeline_batch_with_a_delegation_token(need_spark, kafka_broker,
                                                              tmp_path):
    plain = kafka_broker.bootstrap("PLAINTEXT")
    source = create_topic(plain, topic_name("pipe-in"), partitions=2)
    batch_out = create_topic(plain, topic_name("pipe-out"), partitions=2)
    now = int(time.time() * 1000)
    records = [(b"k%d" % i, b"value %d" % i, [("n", b"%d" % i)], now + i) for i in range(25)]
    produce_confluent(plain, source, records, "none")
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512")
    bootstrap = configs.pop("bootstrap.servers")
    props = tmp_path / "client.properties"
    props.write_text(format_properties(configs), encoding="latin-1")
    src = {(k, v): p for p, _, k, v, _, _ in consume_confluent(plain, source, 2, 25)}
    want = sorted((src[(k, v)], k, v.upper(), h) for k, v, h, _ in records)

    # The README's command, with this broker, file and topics.
    subst = {"broker:9093": bootstrap, "client.properties": str(props), "events": source,
             "events-upper": batch_out}
    out = run_pipeline(*[subst.get(a, a) for a in readme_command()])
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"wrote 25 records from {source} to {batch_out}" in out.stdout
    got = consume_confluent(plain, batch_out, 2, 25)
    assert sorted((p, k, v, h) for p, _, k, v, h, _ in got) == want
    # (--streaming runs on the standalone cluster, with --exactly-once:
    # tests/spark/test_spark_cluster.py)


def test_pipeline_usage_and_failure_exit_codes(need_spark, kafka_broker, tmp_path):
    out = run_pipeline("--input-topic", "a")
    assert out.returncode == 2 and "--bootstrap-server" in out.stderr
    # a wrong password: the driver's login fails, exit 1 with the broker's reason
    configs = kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-512", password="wrong")
    bootstrap = configs.pop("bootstrap.servers")
    props = tmp_path / "bad.properties"
    props.write_text(format_properties(configs), encoding="latin-1")
    out = run_pipeline("--bootstrap-server", bootstrap, "--command-config", str(props),
                       "--input-topic", "a", "--output-topic", "b", "--delegation-token")
    assert out.returncode == 1, out.stderr[-3000:]
    assert "pipeline failed" in out.stderr and "Authentication failed" in out.stderr
