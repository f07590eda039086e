"""kchannel's codecs against Apache Kafka's real answers: Metadata with a
real topic (auto-created by the request), DescribeCluster and
FindCoordinator, decoded by kchannel and consistent with each other; and
every ApiVersions version kchannel can send."""
import os
import time

import pytest

from kchannel.client import KafkaClient
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors

pytestmark = [pytest.mark.kafka, pytest.mark.interop]


@pytest.fixture
def client(kafka_broker):
    with KafkaClient(kafka_broker.client_configs("SASL_SSL", "SCRAM-SHA-256")) as c:
        c.connect()
        yield c


def retry(call, done, limit_s=30):
    """``call()`` until ``done(result)`` (Kafka answers LEADER_NOT_AVAILABLE
    / COORDINATOR_NOT_AVAILABLE while it creates a topic)."""
    deadline = time.monotonic() + limit_s
    while True:
        result = call()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_metadata_with_an_auto_created_topic(kafka_broker, client):
    topic = "kc-" + os.urandom(4).hex()
    body = {"topics": [{"name": topic}],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": True}
    md = retry(lambda: client.request(ApiKey.METADATA, body),
               lambda r: r["topics"][0]["error_code"] == 0
               and r["topics"][0]["partitions"]
               and r["topics"][0]["partitions"][0]["leader_id"] == kafka_broker.node_id)
    assert client.choose_version(ApiKey.METADATA) == messages.API[ApiKey.METADATA].max_version
    (t,) = md["topics"]
    assert (t["error_code"], t["name"], t["is_internal"]) == (0, topic, False)
    assert t["topic_id"].int != 0
    # num.partitions=1 and one broker: one partition led and replicated by node 1
    (p,) = t["partitions"]
    assert (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"],
            p["offline_replicas"]) == (0, 1, [1], [1], [])
    assert p["leader_epoch"] >= 0
    # no authorizer: Kafka reports every topic operation as allowed (a bit set)
    assert t["topic_authorized_operations"] > 0

    # Metadata v12 may name a topic by its id alone
    by_id = client.request(ApiKey.METADATA, {"topics": [{"topic_id": t["topic_id"],
                                                         "name": None}]})
    assert [(x["name"], x["error_code"]) for x in by_id["topics"]] == [(topic, 0)]

    unknown = client.request(ApiKey.METADATA, {
        "topics": [{"name": "kc-missing-" + os.urandom(4).hex()}],
        "allow_auto_topic_creation": False})
    assert unknown["topics"][0]["error_code"] == Errors.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_agrees_with_metadata(kafka_broker, client, version):
    dc = client.request(ApiKey.DESCRIBE_CLUSTER, {
        "include_cluster_authorized_operations": True, "endpoint_type": 1}, version=version)
    md = client.request(ApiKey.METADATA, {"topics": []})
    assert (dc["error_code"], dc["cluster_id"], dc["controller_id"]) == (
        0, md["cluster_id"], md["controller_id"])
    assert [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in dc["brokers"]] == [
        (b["node_id"], b["host"], b["port"], b["rack"]) for b in md["brokers"]]
    assert dc["cluster_authorized_operations"] > 0
    if version >= 1:
        assert dc["endpoint_type"] == 1


def test_find_coordinator(kafka_broker, client):
    version = client.choose_version(ApiKey.FIND_COORDINATOR)
    assert version == 6
    group = "kc-group-" + os.urandom(4).hex()
    r = retry(lambda: client.request(ApiKey.FIND_COORDINATOR,
                                     {"key_type": 0, "coordinator_keys": [group]}),
              lambda r: r["coordinators"][0]["error_code"] == 0)
    (c,) = r["coordinators"]
    assert (c["key"], c["error_code"], c["node_id"], c["host"], c["port"]) == (
        group, 0, kafka_broker.node_id, "127.0.0.1", kafka_broker.port("SASL_SSL"))


@pytest.mark.parametrize("version", range(messages.API[ApiKey.API_VERSIONS].max_version + 1))
def test_every_api_versions_version(kafka_broker, client, version):
    r = client.request(ApiKey.API_VERSIONS, {"client_software_name": "kchannel",
                                             "client_software_version": "test"},
                       version=version)
    assert r["error_code"] == 0
    assert {e["api_key"]: (e["min_version"], e["max_version"]) for e in r["api_keys"]} == \
        client.api_versions
