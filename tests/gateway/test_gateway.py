"""The gateway (issue 9) in front of a real upstream: a kchannel server on
127.0.0.1 (answers ApiVersions, Metadata, DescribeCluster, DescribeClientQuotas
and whatever a test registers), so every path runs over real sockets in a
second: endpoint rewriting, ApiVersions intersection, correlation ids and
order of pipelined requests (forwarded and local mixed), authentication
before anything reaches upstream, the allow-list, backpressure, an upstream
that dies.  The client libraries against Tansu and Apache Kafka are in
tests/interop/test_interop_gateway.py."""
import socket
import struct
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchannel import errors
from kchannel.client import KafkaClient
from kchannel.config import ServerConfig
from kchannel.server.gateway_types import LOCAL_API_KEYS, _acks, _waits_ms
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.protocol.headers import (RequestHeader, decode_response, encode_request,
                                      parse_request_header)
from kchannel.server import Server

from tests.fixtures.raw_client import request as raw_request
from tests.fixtures.peers import run_kchannel, write_properties
from tests.fixtures.waiting import wait_until

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


class Upstream:
    """A kchannel server standing for the upstream cluster (node 7)."""

    def __init__(self, port=0):
        self.server = Server(listeners=[f"PLAINTEXT://127.0.0.1:{port}"], node_id=7)
        self.seen = []
        self.hold = threading.Event()

        def quotas(ctx):
            # What the upstream saw: the gateway's principal, the client's id.
            self.seen.append((str(ctx.principal), ctx.client_id))
            if self.hold.is_set():
                return None          # never answers: a stuck upstream
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "entries": []}

        self.server.register_handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, quotas)
        self.server.start()
        self.port = self.server.bound_port("PLAINTEXT")

    def stop(self):
        self.server.shutdown()


@pytest.fixture
def upstream():
    u = Upstream()
    yield u
    u.stop()


def upstream_gateway_props(upstream, **extra):
    jaas = f'{PLAIN} required user_alice="alice-secret" user_bob="bob-secret";'
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "kchannel.scram.credential.store": "memory",
        "kchannel.upstream.bootstrap.servers": f"127.0.0.1:{upstream.port}",
        "kchannel.upstream.request.timeout.ms": "3000",
    }
    props.update(extra)
    return props


def gw_sasl_client(gw, user="alice", password=None, **extra):
    c = KafkaClient({"bootstrap.servers": gw.bootstrap("SASL_PLAINTEXT"),
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                     "sasl.jaas.config": f'{PLAIN} required username="{user}" '
                                         f'password="{password or user + "-secret"}";',
                     "request.timeout.ms": 5000, **extra})
    return c


def node_port(gw, listener):
    ports = [l.bound_port for l in gw.server.listeners
             if l.name == listener and l.upstream_node == 7]
    assert len(ports) == 1
    return ports[0]


def test_metadata_and_describe_cluster_name_the_gateway(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream))
    with gw_sasl_client(gw) as c:
        c.connect()
        md = c.request(ApiKey.METADATA, {"topics": None})
        assert [(b["node_id"], b["host"], b["port"]) for b in md["brokers"]] == \
            [(7, "127.0.0.1", node_port(gw, "SASL_PLAINTEXT"))]
        assert md["cluster_id"] == upstream.server.cluster_id
        dc = c.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False})
        assert [(b["broker_id"], b["port"]) for b in dc["brokers"]] == \
            [(7, node_port(gw, "SASL_PLAINTEXT"))]
    # The other listener has its own port for node 7, advertised to its clients.
    with KafkaClient({"bootstrap.servers": gw.bootstrap("PLAINTEXT")}) as c:
        c.connect()
        md = c.request(ApiKey.METADATA, {"topics": None})
        assert [b["port"] for b in md["brokers"]] == [node_port(gw, "PLAINTEXT")]
        # ... on which the same node is reached
        c2 = KafkaClient({"bootstrap.servers": f"127.0.0.1:{node_port(gw, 'PLAINTEXT')}"})
        with c2:
            c2.connect()
            assert c2.request(ApiKey.METADATA, {"topics": []})["brokers"][0]["node_id"] == 7


def test_api_versions_are_the_intersection(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream))
    with gw_sasl_client(gw) as c:
        c.connect()
        offered = c.api_versions
    up = KafkaClient({"bootstrap.servers": f"127.0.0.1:{upstream.port}"})
    with up:
        up.connect()
        upstream_versions = up.api_versions
    forwarded = {k for k in offered if k not in LOCAL_API_KEYS}
    # everything forwarded is something the upstream serves, within its range
    assert forwarded and forwarded <= set(upstream_versions)
    for k in forwarded:
        assert upstream_versions[k][0] <= offered[k][0] <= offered[k][1] <= upstream_versions[k][1]
    # the upstream has no Produce: neither does the gateway
    assert ApiKey.PRODUCE not in offered
    # the gateway's own: SCRAM administration
    assert ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS in offered


def _read_frame(sock):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data
    return exactly(struct.unpack(">i", exactly(4))[0])


@pytest.mark.parametrize("max_queued", [100, 2])
def test_pipelined_requests_keep_their_order_and_ids(upstream, kchannel_inprocess_server,
                                                     max_queued):
    # With max.queued.requests 2 the client is muted and unmuted all along:
    # the frames read ahead while muted are served later, in order.
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream, **{
        "kchannel.gateway.max.queued.requests": str(max_queued)}))
    plan = []   # (api_key, version, corr): forwarded and local requests mixed
    for i in range(30):
        if i % 3 == 1:
            plan.append((ApiKey.API_VERSIONS, 3, 1000 + i))      # answered by the gateway
        elif i % 3 == 2:
            plan.append((ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, 1000 + i))   # raw frame forwarded
        else:
            plan.append((ApiKey.METADATA, 12, 1000 + i))          # forwarded, rewritten
    bodies = {ApiKey.API_VERSIONS: {"client_software_name": "t", "client_software_version": "1"},
              ApiKey.DESCRIBE_CLIENT_QUOTAS: {"components": [], "strict": False},
              ApiKey.METADATA: {"topics": None, "allow_auto_topic_creation": False,
                                "include_topic_authorized_operations": False}}
    with socket.create_connection(("127.0.0.1", gw.port("PLAINTEXT")), timeout=10) as s:
        s.sendall(b"".join(raw_request(k, v, corr, bodies[k], "pipeliner") for k, v, corr in plan))
        for k, v, corr in plan:
            got_corr, body = decode_response(_read_frame(s), k, v)
            assert got_corr == corr
            if k == ApiKey.METADATA:
                assert body["brokers"][0]["port"] == node_port(gw, "PLAINTEXT")
            else:
                assert body["error_code"] == 0
    assert ("User:ANONYMOUS", "pipeliner") in upstream.seen


def test_unauthenticated_client_reaches_nothing_upstream(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream))
    sent = gw.server.metrics.metric("request-total", group="kchannel-upstream-metrics")
    c = gw_sasl_client(gw, "alice", "wrong")
    with pytest.raises(errors.AuthenticationError):
        c.connect()
    c.close()
    assert gw.server.metrics.metric("request-total", group="kchannel-upstream-metrics") == sent
    assert upstream.seen == []


def test_allow_list_refuses_with_kafka_error_codes(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream, **{
        "listener.name.sasl_plaintext.kchannel.gateway.allowed.principals": "User:alice"}))
    with gw_sasl_client(gw, "bob") as c:
        c.connect()
        md = c.request(ApiKey.METADATA, {"topics": [{"name": "t1"}]})
        assert md["brokers"] == []
        assert [(t["name"], t["error_code"]) for t in md["topics"]] == \
            [("t1", Errors.TOPIC_AUTHORIZATION_FAILED)]
        dc = c.request(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False})
        assert dc["error_code"] == Errors.CLUSTER_AUTHORIZATION_FAILED
        q = c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False})
        assert q["error_code"] == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert upstream.seen == []
    with gw_sasl_client(gw, "alice") as c:
        c.connect()
        assert c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS,
                         {"components": [], "strict": False})["error_code"] == 0
    # The upstream sees the gateway's principal, not alice's.
    assert [p for p, _ in upstream.seen] == ["User:ANONYMOUS"]
    # The other listener has no list: anyone authenticated goes through.
    with KafkaClient({"bootstrap.servers": gw.bootstrap("PLAINTEXT")}) as c:
        c.connect()
        assert c.request(ApiKey.DESCRIBE_CLUSTER,
                         {"include_cluster_authorized_operations": False})["error_code"] == 0


def test_stuck_upstream_mutes_then_disconnects(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream, **{
        "kchannel.gateway.max.queued.requests": "4"}))
    upstream.hold.set()
    body = {"components": [], "strict": False}
    with socket.create_connection(("127.0.0.1", gw.port("PLAINTEXT")), timeout=20) as s:
        s.sendall(b"".join(raw_request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, i, body, "pipeliner")
                           for i in range(10)))
        # The upstream never answers: after request.timeout.ms (3 s) the
        # gateway drops the upstream connection and the client's with it.
        with pytest.raises(ConnectionError):
            _read_frame(s)
    # Only max.queued.requests of the 10 were read and forwarded.
    assert len(upstream.seen) == 4


def test_upstream_gone_disconnects_clients_then_back(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream))
    c = gw_sasl_client(gw)
    with c:
        c.connect()
        c.request(ApiKey.METADATA, {"topics": []})
        upstream.stop()
        with pytest.raises((errors.ChannelConnectionError, errors.KChannelError)):
            c.request(ApiKey.METADATA, {"topics": []})
        # The upstream is back on its address: the client reconnects to the
        # gateway and the gateway to it.
        back = Upstream(upstream.port)
        try:
            body = c.request(ApiKey.METADATA, {"topics": []})
            assert body["cluster_id"] == back.server.cluster_id
        finally:
            back.stop()


def test_request_metrics_have_kafka_names(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream))
    with gw_sasl_client(gw) as c:
        c.connect()
        for _ in range(3):
            c.request(ApiKey.METADATA, {"topics": []})
        m = gw.server.metrics
        # the gateway's own (start-up, metadata) and the client's own
        assert m.metric("connection-count", group="kchannel-upstream-metrics") == 2
    assert m.metric("RequestsPerSec", group="RequestMetrics", tags={"request": "Metadata"}) > 0
    assert m.metric("TotalTimeMs", group="RequestMetrics", tags={"request": "Metadata"}) >= 0


def test_config_validate_and_describe(tmp_path):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0",
             "kchannel.upstream.bootstrap.servers": "127.0.0.1:9092",
             "kchannel.upstream.security.protocol": "SASL_SSL",
             "kchannel.upstream.sasl.mechanism": "SCRAM-SHA-512",
             "kchannel.upstream.sasl.jaas.config":
                 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                 'username="gw" password="gw-secret";'}
    cfg = ServerConfig(props)
    assert cfg.upstream.security_protocol == "SASL_SSL"
    assert not cfg.unused
    path = write_properties(str(tmp_path / "server.properties"), props)
    r = run_kchannel("config", "describe", "--config", path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kchannel.upstream.sasl.mechanism" in r.stdout and "gw-secret" not in r.stdout
    bad = dict(props, **{"kchannel.upstream.security.protocol": "BOGUS"})
    path = write_properties(str(tmp_path / "bad.properties"), bad)
    r = run_kchannel("config", "validate", "--config", path)
    assert r.returncode == 1
    assert "kchannel.upstream." in r.stdout and "BOGUS" in r.stdout


def test_per_client_upstream_connections(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream, **{
        "kchannel.gateway.upstream.connections": "per-client"}))
    m = gw.server.metrics

    def upstream_connections():
        return m.metric("connection-count", group="kchannel-upstream-metrics")
    start = upstream_connections()          # the gateway's own, from start-up
    # What each upstream connection carries, in order: the gateway opens a
    # client's own connection with its ApiVersions, as a Kafka client does,
    # then forwards the client's frames unchanged (its client id too).
    first = {}
    handler = upstream.server.handlers.get(ApiKey.API_VERSIONS)
    quotas = upstream.server.handlers.get(ApiKey.DESCRIBE_CLIENT_QUOTAS)

    def api_versions(ctx):
        first.setdefault(ctx.channel_id, (ctx.header.client_id,
                                          ctx.body.get("client_software_name")))
        return handler.fn(ctx)

    def describe_quotas(ctx):
        first.setdefault(ctx.channel_id, "DescribeClientQuotas first")
        return quotas.fn(ctx)
    upstream.server.register_handler(ApiKey.API_VERSIONS, api_versions, handler.min_version,
                                     handler.max_version)
    upstream.server.register_handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, describe_quotas,
                                     quotas.min_version, quotas.max_version)
    clients = [gw_sasl_client(gw, **{"client.id": f"app-{i}"}) for i in range(2)]
    for c in clients:
        c.connect()
        c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False})
    assert upstream_connections() == start + 2
    assert sorted(first.values()) == [("kchannel-gateway", "kchannel")] * 2
    assert upstream.seen[-2:] == [("User:ANONYMOUS", "app-0"), ("User:ANONYMOUS", "app-1")]
    for c in clients:
        c.close()
    wait_until(lambda: upstream_connections() == start, "the upstream connections closed")
    assert upstream_connections() == start


@pytest.mark.parametrize("key,versions,body,expected", [
    (ApiKey.JOIN_GROUP, range(0, 1), {"group_id": "g", "session_timeout_ms": 10000,
                                      "protocol_type": "consumer", "protocols": []}, 10000),
    (ApiKey.JOIN_GROUP, range(1, 10), {"group_id": "g", "session_timeout_ms": 10000,
                                       "rebalance_timeout_ms": 60000, "member_id": "",
                                       "protocol_type": "consumer", "protocols": []}, 60000),
    (ApiKey.FETCH, range(4, 16), {"replica_id": -1, "max_wait_ms": 777, "min_bytes": 1,
                                  "topics": []}, 777),
    (ApiKey.PRODUCE, range(3, 12), {"transactional_id": "tx", "acks": -1,
                                    "timeout_ms": 1234, "topic_data": []}, 1234),
    (ApiKey.PRODUCE, range(3, 12), {"transactional_id": None, "acks": 0,
                                    "timeout_ms": 99, "topic_data": []}, 99),
    # a transactional id of 200 bytes: a two-byte compact length
    (ApiKey.PRODUCE, range(3, 12), {"transactional_id": "t" * 200, "acks": 1,
                                    "timeout_ms": 4321, "topic_data": []}, 4321),
])
def test_waits_and_acks_read_from_the_raw_request(key, versions, body, expected):
    # The gateway never decodes a forwarded request; these few fields it
    # reads in place must come out right at every version.
    for v in versions:
        payload = encode_request(RequestHeader(key, v, 1, "c"), body)
        _, off = parse_request_header(payload)
        assert _waits_ms(key, v, payload, off) == expected, v
        if key == ApiKey.PRODUCE:
            assert _acks(payload, off, v) == body["acks"], v


@pytest.fixture(scope="module", params=["per-client", "shared"])
def fuzz_gateway(request, tmp_path_factory):
    from tests.fixtures.peers import InProcessServer
    u = Upstream()
    props = upstream_gateway_props(u, **{
        "log.dirs": str(tmp_path_factory.mktemp("fuzzgw") / "data"),
        "kchannel.gateway.upstream.connections": request.param})
    gw = InProcessServer(props)
    yield gw
    gw.stop()
    u.stop()


@settings(max_examples=40, deadline=None)
@given(api_key=st.sampled_from([int(k) for k in (
           ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.DESCRIBE_CLIENT_QUOTAS,
           ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR, ApiKey.PRODUCE, ApiKey.FETCH,
           ApiKey.SASL_HANDSHAKE, ApiKey.CREATE_DELEGATION_TOKEN)]),
       version=st.integers(-2, 20), body=st.binary(max_size=120))
def test_any_request_bytes_fail_closed(fuzz_gateway, api_key, version, body):
    # Whatever an authenticated client sends, it gets an answer to its
    # request or its connection closed (never another request's answer,
    # never a hang), and the gateway keeps serving everyone else.
    header = struct.pack(">hhih", api_key, version, 4242, 4) + b"fuzz"
    with socket.create_connection(("127.0.0.1", fuzz_gateway.port("PLAINTEXT")),
                                  timeout=30) as s:
        s.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        try:
            frame = _read_frame(s)
        except (ConnectionError, OSError) as exc:
            assert not isinstance(exc, socket.timeout)
        else:
            assert struct.unpack(">i", frame[:4])[0] == 4242
    with KafkaClient({"bootstrap.servers": fuzz_gateway.bootstrap("PLAINTEXT"),
                      "request.timeout.ms": 10000}) as c:
        c.connect()
        assert c.request(ApiKey.METADATA, {"topics": []})["brokers"][0]["node_id"] == 7


class OnlyMetadata:
    """An authorizer class named by kchannel.gateway.authorizer.class."""

    def configure(self, props):
        self.listener = props["test.authorizer.listener"]

    def authorize(self, request):
        return request.api_key == ApiKey.METADATA or request.listener_name != self.listener


def test_authorizer_class(upstream, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream, **{
        "kchannel.gateway.authorizer.class": "tests.gateway.test_gateway.OnlyMetadata",
        "test.authorizer.listener": "SASL_PLAINTEXT"}))
    with gw_sasl_client(gw) as c:
        c.connect()
        assert c.request(ApiKey.METADATA, {"topics": []})["brokers"]
        assert c.request(ApiKey.DESCRIBE_CLUSTER, {
            "include_cluster_authorized_operations": False})["error_code"] == \
            Errors.CLUSTER_AUTHORIZATION_FAILED
    with KafkaClient({"bootstrap.servers": gw.bootstrap("PLAINTEXT")}) as c:
        c.connect()
        assert c.request(ApiKey.DESCRIBE_CLUSTER, {
            "include_cluster_authorized_operations": False})["error_code"] == 0


def test_acl_changes_apply_to_a_connections_cached_decisions(upstream, kchannel_inprocess_server,
                                                               tmp_path):
    """authorizer.class.name: a Produce forwarded once is forwarded again
    from its connection's cache of decisions, and an ACL deleted or added
    by another process (its own authorizer on the same SQLite store, as
    another worker) applies to the very next request on that connection."""
    from kchannel.protocol.records.batch import encode_batch
    from kchannel.security.authorizer.acl import AclBinding, AclBindingFilter
    from kchannel.security.authorizer.standard import StandardAuthorizer
    from kchannel.security.authorizer.store import SqliteAclStore

    def produce(ctx):
        return {"responses": [
            {"name": t["name"], "partition_responses": [
                {"index": p["index"], "error_code": 0, "base_offset": 0}
                for p in t["partition_data"]]} for t in ctx.body["topic_data"]]}
    upstream.server.register_handler(ApiKey.PRODUCE, produce, 3, 9)
    gw = kchannel_inprocess_server(upstream_gateway_props(upstream, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "log.dirs": str(tmp_path / "data")}))
    other = StandardAuthorizer(SqliteAclStore(gw.server.gateway.request_authorizer
                                              .authorizer.store.path))
    write = AclBinding.of("TOPIC", "orders", "LITERAL", "User:bob", "*", "WRITE", "ALLOW")
    batch = encode_batch([(int(time.time() * 1000), None, b"v", [])])
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
            "topic_data": [{"name": "orders", "partition_data": [
                {"index": 0, "records": batch}]}]}

    def code(c, topic="orders"):
        body["topic_data"][0]["name"] = topic
        resp = c.request(ApiKey.PRODUCE, body, version=9)
        return resp["responses"][0]["partition_responses"][0]["error_code"]
    with gw_sasl_client(gw, "bob") as c:
        c.connect()
        assert code(c) == Errors.TOPIC_AUTHORIZATION_FAILED
        assert other.create_acls([write]) == [None]
        assert [code(c) for _ in range(3)] == [0, 0, 0]      # the last two: cached
        # names that differ from the cached one by their end or length
        assert [code(c, t) for t in ("ordert", "order", "orders2")] == \
            [Errors.TOPIC_AUTHORIZATION_FAILED] * 3
        assert other.delete_acls([AclBindingFilter(name="orders")]) == [[write]]
        assert code(c) == Errors.TOPIC_AUTHORIZATION_FAILED
        assert other.create_acls([write]) == [None]
        assert code(c) == 0
