"""Named listeners (KIP-103) in Metadata and DescribeCluster, other nodes
from ``kchannel.cluster.nodes``, and inter-broker client connections.

Kafka's rules (KafkaApis + MetadataCache.getAliveBrokerNodes(listenerName)):
every node is listed at its endpoint for the listener the request came in
on; a node without that listener is left out; DescribeCluster's controller
id is -1 when the controller is not among the listed nodes; cluster
authorized operations only when asked for (Int.MinValue otherwise); endpoint
type checks per version.
"""
import pytest

from kchannel.client import KafkaClient
from kchannel.server.cluster import (CLUSTER_AUTHORIZED_OPERATIONS_OMITTED, CLUSTER_SUPPORTED_OPERATIONS,
                              connect_inter_broker, handle_describe_cluster, parse_cluster_nodes,
                              register_cluster_handlers)
from kchannel.config import ServerConfig
from kchannel.errors import ConfigError, SaslAuthenticationError, SslAuthenticationError
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.server import Server

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"

CLUSTER_PROPS = {
    "node.id": "1",
    "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,REPLICATION://127.0.0.1:0",
    "advertised.listeners": ("INTERNAL://broker1.internal:9092,EXTERNAL://kafka1.example.com:19093,"
                             "REPLICATION://broker1.replication:9094"),
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT",
    "inter.broker.listener.name": "REPLICATION",
    "broker.rack": "rack-a",
    "kchannel.cluster.id": "Some-Cluster-Id_000001",
    # node 2 has every listener, node 3 no EXTERNAL one, node 0 only EXTERNAL.
    "kchannel.cluster.nodes": ("2@INTERNAL://broker2.internal:9092,"
                               "2@EXTERNAL://kafka2.example.com:19093,"
                               "2@REPLICATION://broker2.replication:9094,"
                               "3@INTERNAL://broker3.internal:9092,"
                               "3@REPLICATION://broker3.replication:9094,"
                               "0@EXTERNAL://kafka0.example.com:19093"),
}


@pytest.fixture(scope="module")
def cluster_server():
    s = Server(dict(CLUSTER_PROPS))
    s.start()
    yield s
    s.shutdown()


def listener_client(server, listener, **configs):
    c = KafkaClient({"request.timeout.ms": 5000, **configs})
    return c.connect("127.0.0.1", server.bound_port(listener))


def brokers(body):
    return [(b["node_id"] if "node_id" in b else b["broker_id"], b["host"], b["port"],
             b.get("rack"))
            for b in body["brokers"]]


EXPECTED = {
    "INTERNAL": [(1, "broker1.internal", 9092, "rack-a"), (2, "broker2.internal", 9092, None),
                 (3, "broker3.internal", 9092, None)],
    "EXTERNAL": [(0, "kafka0.example.com", 19093, None), (1, "kafka1.example.com", 19093, "rack-a"),
                 (2, "kafka2.example.com", 19093, None)],
    "REPLICATION": [(1, "broker1.replication", 9094, "rack-a"),
                    (2, "broker2.replication", 9094, None),
                    (3, "broker3.replication", 9094, None)],
}


@pytest.mark.parametrize("listener", sorted(EXPECTED))
@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_lists_nodes_at_the_request_listener(cluster_server, listener, version):
    with listener_client(cluster_server, listener) as c:
        body = c.request(ApiKey.DESCRIBE_CLUSTER, {}, version=version)
    assert body["error_code"] == 0 and body["error_message"] is None
    assert brokers(body) == EXPECTED[listener]
    assert body["cluster_id"] == "Some-Cluster-Id_000001"
    assert body["controller_id"] == 1
    assert body["cluster_authorized_operations"] == CLUSTER_AUTHORIZED_OPERATIONS_OMITTED
    if version >= 1:
        assert body["endpoint_type"] == 1


@pytest.mark.parametrize("listener", sorted(EXPECTED))
@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_metadata_lists_nodes_at_the_request_listener(cluster_server, listener, version):
    with listener_client(cluster_server, listener) as c:
        body = c.request(ApiKey.METADATA, {"topics": []}, version=version)
    expected = EXPECTED[listener]
    if version == 0:
        expected = [e[:3] + (None,) for e in expected]       # no rack before v1
    assert brokers(body) == expected
    if version >= 1:
        assert body["controller_id"] == 1
    if version >= 2:
        assert body["cluster_id"] == "Some-Cluster-Id_000001"


def test_cluster_authorized_operations_when_requested(cluster_server):
    # No authorizer: every operation Kafka supports on CLUSTER (CREATE,
    # ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    # IDEMPOTENT_WRITE as a 32-bit field).
    assert CLUSTER_SUPPORTED_OPERATIONS == 0b1111110100000
    with listener_client(cluster_server, "INTERNAL") as c:
        body = c.request(ApiKey.DESCRIBE_CLUSTER,
                         {"include_cluster_authorized_operations": True})
    assert body["cluster_authorized_operations"] == CLUSTER_SUPPORTED_OPERATIONS


@pytest.mark.parametrize("endpoint_type, error, message", [
    (2, Errors.MISMATCHED_ENDPOINT_TYPE,
     "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
     "CONTROLLER"),
    (0, Errors.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 0"),
    (7, Errors.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7"),
])
def test_describe_cluster_endpoint_type(cluster_server, endpoint_type, error, message):
    with listener_client(cluster_server, "INTERNAL") as c:
        body = c.request(ApiKey.DESCRIBE_CLUSTER, {"endpoint_type": endpoint_type}, version=1)
        assert body["error_code"] == error
        assert body["error_message"] == message
        assert body["brokers"] == [] and body["controller_id"] == -1
        # The connection stays usable.
        assert c.request(ApiKey.DESCRIBE_CLUSTER, {}, version=1)["error_code"] == 0


def test_listener_not_advertised_leaves_this_node_out():
    # PRIVATE is bound but not advertised: it is no endpoint of this node, so
    # requests on it see only the other nodes that have it (Kafka registers
    # advertised listeners only), and DescribeCluster's controller is -1.
    s = Server({"node.id": "5", "listeners": "PUBLIC://127.0.0.1:0,PRIVATE://127.0.0.1:0",
                "advertised.listeners": "PUBLIC://public.example:9092",
                "listener.security.protocol.map": "PUBLIC:PLAINTEXT,PRIVATE:PLAINTEXT",
                "inter.broker.listener.name": "PUBLIC",
                "kchannel.cluster.nodes": "6@PRIVATE://six.private:9093"})
    s.start()
    try:
        with listener_client(s, "PRIVATE") as c:
            d = c.request(ApiKey.DESCRIBE_CLUSTER, {})
            m = c.request(ApiKey.METADATA, {"topics": []})
        assert brokers(d) == [(6, "six.private", 9093, None)]
        assert d["controller_id"] == -1
        assert brokers(m) == [(6, "six.private", 9093, None)]
        with listener_client(s, "PUBLIC") as c:
            assert brokers(c.request(ApiKey.DESCRIBE_CLUSTER, {})) == [
                (5, "public.example", 9092, None)]
    finally:
        s.shutdown()


def test_single_node_without_cluster_nodes():
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=4)
    s.start()
    try:
        with listener_client(s, "PLAINTEXT") as c:
            assert c.api_versions[ApiKey.DESCRIBE_CLUSTER] == (0, 1)
            body = c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert brokers(body) == [(4, "127.0.0.1", s.bound_port("PLAINTEXT"), None)]
        assert body["cluster_id"] == s.cluster_id and body["controller_id"] == 4
    finally:
        s.shutdown()


def test_registered_handler_replaces_builtin():
    # An application's own DescribeCluster handler still wins, and can
    # delegate to the built-in one.
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=4)
    seen = []

    def mine(ctx):
        seen.append(str(ctx.principal))
        return handle_describe_cluster(ctx)
    s.register_handler(ApiKey.DESCRIBE_CLUSTER, mine)
    s.start()
    try:
        with listener_client(s, "PLAINTEXT") as c:
            assert c.request(ApiKey.DESCRIBE_CLUSTER, {})["brokers"][0]["broker_id"] == 4
        assert seen == ["User:ANONYMOUS"]
    finally:
        s.shutdown()


def test_register_cluster_handlers_with_explicit_nodes():
    s = Server(listeners=["PLAINTEXT://127.0.0.1:0"], node_id=4)
    register_cluster_handlers(s, "9@PLAINTEXT://nine:1")
    s.start()
    try:
        with listener_client(s, "PLAINTEXT") as c:
            assert [b["node_id"] for b in c.request(ApiKey.METADATA, {"topics": []})["brokers"]] \
                == [4, 9]
    finally:
        s.shutdown()


# ---------------------------------------------------------------- bad nodes
def test_parse_cluster_nodes():
    nodes = parse_cluster_nodes("2@A://h2:1, 1@B://[::1]:2,2@B://h2:3")
    assert [(n.node_id, n.endpoints) for n in nodes] == [
        (1, (("B", "::1", 2),)), (2, (("A", "h2", 1), ("B", "h2", 3)))]
    assert parse_cluster_nodes("") == []


@pytest.mark.parametrize("value, reason", [
    ("2PLAINTEXT://h:1", "'2PLAINTEXT://h:1' is not node.id@LISTENER://host:port (no '@')"),
    ("x@PLAINTEXT://h:1",
     "'x@PLAINTEXT://h:1' is not node.id@LISTENER://host:port (node id 'x' is not a number)"),
    ("-1@PLAINTEXT://h:1",
     "'-1@PLAINTEXT://h:1' is not node.id@LISTENER://host:port (node id must be >= 0)"),
    ("2@PLAINTEXT://:1",
     "'2@PLAINTEXT://:1' is not node.id@LISTENER://host:port (a routable host is required)"),
    ("2@PLAINTEXT://0.0.0.0:1",
     "'2@PLAINTEXT://0.0.0.0:1' is not node.id@LISTENER://host:port (a routable host is required)"),
    ("2@PLAINTEXT://h:0",
     "'2@PLAINTEXT://h:0' is not node.id@LISTENER://host:port (port 0 is not 1-65535)"),
    ("2@PLAINTEXT://h",
     "'2@PLAINTEXT://h' is not node.id@LISTENER://host:port (Error creating broker listeners from "
     "'PLAINTEXT://h': Unable to parse PLAINTEXT://h to a broker endpoint)"),
    ("2@PLAINTEXT://h:1,2@PLAINTEXT://g:2", "node 2 has listener PLAINTEXT more than once"),
])
def test_bad_cluster_nodes_are_config_errors(value, reason):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "kchannel.cluster.nodes": value}
    errors = ServerConfig.validate(props)
    assert [str(e) for e in errors] == [
        f"Invalid value [{value.replace(',', ', ')}] for configuration kchannel.cluster.nodes: "
        f"{reason}"]
    with pytest.raises(ConfigError) as exc:
        Server(props)
    assert str(exc.value) == str(errors[0])


def test_cluster_nodes_listener_must_be_in_protocol_map():
    props = {"listeners": "PLAINTEXT://127.0.0.1:0",
             "kchannel.cluster.nodes": "2@PLAINTXT://h:1"}
    with pytest.raises(ConfigError) as exc:
        Server(props)
    assert str(exc.value) == (
        "Invalid value 2@PLAINTXT://h:1 for configuration kchannel.cluster.nodes: listener "
        "PLAINTXT of node 2 is not defined in listener.security.protocol.map")


def test_cluster_nodes_must_not_list_this_node():
    props = {"node.id": "2", "listeners": "PLAINTEXT://127.0.0.1:0",
             "kchannel.cluster.nodes": "2@PLAINTEXT://h:1"}
    with pytest.raises(ConfigError) as exc:
        Server(props)
    assert "it lists node 2, which is this node (node.id)" in str(exc.value)


# ------------------------------------------------------------- inter-broker
def replication_props(pki, node_id, **extra):
    """INTERNAL (PLAINTEXT) for clients and REPLICATION (SSL, client
    certificates required) between brokers; the broker's own certificate
    is both its server and its inter-broker client identity."""
    props = {
        "node.id": str(node_id),
        "listeners": "INTERNAL://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,REPLICATION:SSL",
        "inter.broker.listener.name": "REPLICATION",
        "listener.name.replication.ssl.keystore.type": "PEM",
        "listener.name.replication.ssl.keystore.location": pki.server.keystore_pem_path,
        "listener.name.replication.ssl.truststore.type": "PEM",
        "listener.name.replication.ssl.truststore.location": pki.ca.cert_path,
        "listener.name.replication.ssl.client.auth": "required",
    }
    props.update(extra)
    return props


class Recording:
    """A server whose DescribeCluster handler records each principal."""

    def __init__(self, props):
        self.server = Server(props)
        self.principals = []

        def describe(ctx):
            self.principals.append((ctx.listener_name, str(ctx.principal)))
            return handle_describe_cluster(ctx)
        self.server.register_handler(ApiKey.DESCRIBE_CLUSTER, describe)
        self.server.start()

    def close(self):
        self.server.shutdown()


def test_inter_broker_client_configs_ssl(pki):
    config = ServerConfig(replication_props(pki, 1, **{
        "ssl.endpoint.identification.algorithm": "",
        "listener.name.internal.ssl.keystore.location": "/not/used"}))
    configs = config.inter_broker_client_configs()
    assert configs["security.protocol"] == "SSL"
    assert configs["ssl.keystore.location"] == pki.server.keystore_pem_path
    assert configs["ssl.truststore.location"] == pki.ca.cert_path
    assert configs["ssl.endpoint.identification.algorithm"] == ""
    assert "ssl.client.auth" not in configs          # a server-only key
    assert "sasl.mechanism" not in configs and "sasl.jaas.config" not in configs


def test_inter_broker_ssl_connection_authenticated_by_certificate(pki):
    target = Recording(replication_props(pki, 2))
    source = Server(replication_props(pki, 1))
    try:
        port = target.server.bound_port("REPLICATION")
        with connect_inter_broker(source, "127.0.0.1", port) as c:
            body = c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert body["brokers"][0]["broker_id"] == 2
        assert target.principals == [("REPLICATION", f"User:{pki.server.dn}")]
        assert pki.server.dn == "CN=localhost"
        # Without the certificate the same listener refuses the connection.
        refused = {"security.protocol": "SSL", **pki.client_configs(keystore=None),
                   "request.timeout.ms": 5000}
        with pytest.raises(SslAuthenticationError):
            KafkaClient(refused).connect("127.0.0.1", port)
        assert len(target.principals) == 1
    finally:
        source.shutdown()
        target.close()


def test_inter_broker_ssl_with_broker_wide_keys_and_listener_override(pki):
    # Broker-wide ssl.* keys apply to the inter-broker client unless the
    # listener prefix overrides them (an untrusted keystore broker-wide,
    # the trusted one listener-prefixed).
    props = replication_props(pki, 1, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.untrusted_server.keystore_pem_path,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca.cert_path})
    del props["listener.name.replication.ssl.truststore.location"]
    del props["listener.name.replication.ssl.truststore.type"]
    configs = ServerConfig(props).inter_broker_client_configs()
    assert configs["ssl.keystore.location"] == pki.server.keystore_pem_path
    assert configs["ssl.truststore.location"] == pki.ca.cert_path
    target = Recording(replication_props(pki, 2))
    try:
        with connect_inter_broker(ServerConfig(props), "127.0.0.1",
                                  target.server.bound_port("REPLICATION")) as c:
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert target.principals == [("REPLICATION", "User:CN=localhost")]
    finally:
        target.close()


def sasl_ssl_props(pki, node_id, jaas_key_value=None, **extra):
    props = {
        "node.id": str(node_id),
        "listeners": "CLIENTS://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,REPLICATION:SASL_SSL",
        "inter.broker.listener.name": "REPLICATION",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.replication.ssl.keystore.type": "PEM",
        "listener.name.replication.ssl.keystore.location": pki.server.keystore_pem_path,
        "listener.name.replication.ssl.truststore.type": "PEM",
        "listener.name.replication.ssl.truststore.location": pki.ca.cert_path,
    }
    if jaas_key_value is not None:
        props["listener.name.replication.plain.sasl.jaas.config"] = jaas_key_value
    props.update(extra)
    return props


BROKER_JAAS = (f'{PLAIN} required username="broker" password="broker-secret" '
               'user_broker="broker-secret" user_alice="alice-secret";')


def test_inter_broker_sasl_uses_the_listener_server_jaas(pki):
    config = ServerConfig(sasl_ssl_props(pki, 1, BROKER_JAAS))
    configs = config.inter_broker_client_configs()
    assert configs["security.protocol"] == "SASL_SSL"
    assert configs["sasl.mechanism"] == "PLAIN"
    assert "broker-secret" not in repr(configs)            # Password hides it
    target = Recording(sasl_ssl_props(pki, 2, BROKER_JAAS))
    try:
        with connect_inter_broker(config, "127.0.0.1",
                                  target.server.bound_port("REPLICATION")) as c:
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert target.principals == [("REPLICATION", "User:broker")]
    finally:
        target.close()


def test_inter_broker_sasl_from_jaas_file_listener_section(pki):
    # No sasl.jaas.config: the JAAS file's replication.KafkaServer section
    # (before KafkaServer) gives the client login its username/password;
    # the PLAIN login module is picked from a section with several.
    jaas_file = (
        "KafkaServer {\n"
        f'  {PLAIN} required username="wrong" password="wrong" user_wrong="wrong";\n'
        "};\n"
        "replication.KafkaServer {\n"
        '  org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="scram" password="scram";\n'
        f'  {PLAIN} required username="broker" password="broker-secret" '
        'user_broker="broker-secret";\n'
        "};\n")
    config = ServerConfig(sasl_ssl_props(pki, 1), jaas_file)
    target = Recording(sasl_ssl_props(pki, 2, BROKER_JAAS))
    try:
        with connect_inter_broker(config, "127.0.0.1",
                                  target.server.bound_port("REPLICATION")) as c:
            c.request(ApiKey.DESCRIBE_CLUSTER, {})
        assert target.principals == [("REPLICATION", "User:broker")]
        # The target's JAAS does not know the credentials of this one.
        other = ServerConfig(sasl_ssl_props(pki, 3, f'{PLAIN} required username="broker" '
                                            'password="not-it" user_broker="not-it";'))
        with pytest.raises(SaslAuthenticationError):
            connect_inter_broker(other, "127.0.0.1", target.server.bound_port("REPLICATION"))
    finally:
        target.close()


def test_no_inter_broker_jaas_is_a_config_error(pki):
    with pytest.raises(ConfigError) as exc:
        ServerConfig(sasl_ssl_props(pki, 1))
    assert "Could not find a 'KafkaServer' or 'replication.KafkaServer' entry" in str(exc.value)


@pytest.mark.slow
@pytest.mark.interop
@pytest.mark.parametrize("listener", ["INTERNAL", "EXTERNAL"])
def test_librdkafka_sees_every_node_at_its_listener_address(cluster_server, listener):
    # The bootstrap Metadata answer is what librdkafka reports; the other
    # (unreachable) addresses are only learnt, never needed here.
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    admin = admin_mod.AdminClient({
        "bootstrap.servers": f"127.0.0.1:{cluster_server.bound_port(listener)}",
        "log_level": 0, "logger": _SilentLogger()})
    md = admin.list_topics(timeout=10)
    assert sorted((b.id, b.host, b.port) for b in md.brokers.values()) == \
        [e[:3] for e in EXPECTED[listener]]
    assert md.controller_id == 1
    assert md.cluster_id == "Some-Cluster-Id_000001"


class _SilentLogger:
    def log(self, *args):
        pass
