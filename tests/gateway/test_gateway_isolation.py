"""The gateway in front of a shared cluster (issue 23): what one allowed
client can do to the others, and configurations that must not start.

The upstream is the session's Apache Kafka broker (tests/fixtures/kafka.py,
its PLAINTEXT listener); the gateway runs in this process
(``build_server``, as ``kchannel serve``).  Each finding of the issue is a
test here:

* a Fetch asking to wait 2^31-1 ms for 1 MiB of an empty partition, sent and
  abandoned, stops no one's produce (per-client upstream connections; with
  shared ones the wait is capped by kchannel.gateway.shared.fetch.max.wait.ms);
* a client pipelining 100 Fetches and never reading holds a bounded amount of
  the gateway's memory, which returns when it goes;
* an acks=0 Produce to a missing partition and a truncated frame close their
  own client only, in both upstream modes;
* allow-lists that cannot apply, unknown kchannel keys and node ports that
  collide with a listener stop ``kchannel serve`` and fail
  ``kchannel config validate``;
* 20,000 delegation tokens and a Describe flood leave other clients'
  Metadata fast; the allow-list and a per-owner limit hold for token APIs.
"""
import socket
import statistics
import struct
import threading
import time
import uuid

import pytest

from kchannel.client import KafkaClient
from kchannel.principal import KafkaPrincipal
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.protocol.headers import RequestHeader, encode_request
from kchannel.protocol.records.batch import encode_batch
from kchannel.utils import now_ms

from tests.fixtures.raw_client import request as raw_request
from tests.fixtures.peers import free_ports, run_kchannel, write_properties
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.interop]

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
# client.id of the requests written by hand
CLIENT_ID = "isolation-test"


def gateway_props(kafka_broker, **extra):
    plain = f"{PLAIN} required " + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";"
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
        "kchannel.scram.credential.store": "memory",
        "kchannel.upstream.bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT"),
    }
    props.update(extra)
    return props


def create_topic(kafka_broker, partitions=1):
    from confluent_kafka.admin import AdminClient, NewTopic
    name = f"iso-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT")})
    for f in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                           replication_factor=1)]).values():
        f.result(30)
    # CreateTopics answers once the controller has the topic; the broker
    # learns it a moment later, and a Metadata request before that says
    # UNKNOWN_TOPIC_OR_PARTITION (which the tests below count as a failure).
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(topic=name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 for p in md.partitions.values()):
            return name
        assert time.monotonic() < deadline, f"topic {name} not in the broker's metadata after 30 s"
        time.sleep(0.05)


def fetch_body(topic, max_wait_ms, min_bytes, max_bytes=50 << 20):
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def produce_body(topic, partition, acks):
    batch = encode_batch([(now_ms(), None, b"poison", [])])
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": batch}]}]}


def closed_within(sock, seconds):
    """True when the peer closes ``sock`` within ``seconds`` (what it sends
    meanwhile is read and dropped)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def rss_bytes():
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def upstream_connections(gw):
    return gw.server.metrics.metric("connection-count", group="kchannel-upstream-metrics")


# ------------------------------------------------------------------ freeze
@pytest.mark.parametrize("mode", ["per-client", "shared"])
def test_abandoned_long_poll_stops_no_ones_produce(kafka_broker, kchannel_inprocess_server,
                                                    mode):
    from confluent_kafka import Producer
    empty, busy = create_topic(kafka_broker), create_topic(kafka_broker)
    gw = kchannel_inprocess_server(gateway_props(kafka_broker, **{
        "kchannel.gateway.upstream.connections": mode}))
    attacker = socket.create_connection(("127.0.0.1", gw.port("PLAINTEXT")), timeout=10)
    try:
        # 2^31-1 ms for 1 MiB that never comes: the broker holds it, and
        # with it every later request of its upstream connection.
        attacker.sendall(raw_request(ApiKey.FETCH, 12, 1, fetch_body(empty, 2**31 - 1, 1 << 20),
                                     CLIENT_ID))
        time.sleep(0.5)
        p = Producer({"bootstrap.servers": gw.bootstrap("PLAINTEXT"), "acks": "all",
                      "message.timeout.ms": 20000, "linger.ms": 0})
        delivered, failed = [], []
        for i in range(50):
            p.produce(busy, value=b"v%d" % i, on_delivery=lambda err, msg: (
                failed if err is not None else delivered).append(err or msg.offset()))
            p.poll(0)
        assert p.flush(20) == 0
        assert failed == []
        assert sorted(delivered) == list(range(50))
    finally:
        attacker.close()


# ------------------------------------------------------------------ memory
@pytest.mark.parametrize("bound_key", ["kchannel.gateway.max.queued.bytes",
                                       "kchannel.gateway.total.max.queued.bytes"])
def test_unread_pipelined_fetches_keep_gateway_memory_bounded(kafka_broker,
                                                              kchannel_inprocess_server,
                                                              bound_key):
    from confluent_kafka import Producer
    topic = create_topic(kafka_broker)
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT"),
                  "linger.ms": 5})
    for i in range(40):
        p.produce(topic, value=bytes([i]) * (100 << 10))
    assert p.flush(30) == 0        # 4 MiB: every Fetch below gets all of it
    bound = 4 << 20
    gw = kchannel_inprocess_server(gateway_props(kafka_broker, **{bound_key: str(bound)}))
    gateway = gw.server.gateway
    start_connections = upstream_connections(gw)
    base = rss_bytes()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", gw.port("PLAINTEXT")))
    # 100 x 4 MiB of responses if the gateway took them all
    s.sendall(b"".join(raw_request(ApiKey.FETCH, 12, i, fetch_body(topic, 0, 1, 8 << 20), CLIENT_ID)
                       for i in range(100)))
    peak_rss = peak_held = 0
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        peak_rss = max(peak_rss, rss_bytes() - base)
        peak_held = max(peak_held, getattr(gateway, "queued_bytes", 0))
        time.sleep(0.05)
    assert peak_rss < 120 << 20, peak_rss
    # what the gateway counts: its bound, plus the response that crossed it
    assert peak_held < bound + (5 << 20), peak_held
    def others_served():
        with KafkaClient({"bootstrap.servers": gw.bootstrap("PLAINTEXT")}) as c:
            c.connect()
            md = c.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
            assert md["topics"][0]["error_code"] == 0
    if bound_key == "kchannel.gateway.max.queued.bytes":
        others_served()       # meanwhile (over the total bound no one is read)
    s.close()
    # Memory and upstream connections return when the client goes.
    wait_until(lambda: not (gateway.downstreams or gateway.queued_bytes),
               "the gone client's memory released")
    assert not gateway.downstreams and gateway.queued_bytes == 0
    assert upstream_connections(gw) == start_connections
    others_served()



def test_written_responses_leave_no_bytes_counted_while_the_client_stays(
        kafka_broker, kchannel_inprocess_server):
    """Bytes count against a client until written to it: once all its
    responses are written the gateway holds nothing for it, though it stays
    connected (a count left behind would in time mute it for good)."""
    topic = create_topic(kafka_broker)
    gw = kchannel_inprocess_server(gateway_props(kafka_broker))
    gateway = gw.server.gateway
    s = socket.create_connection(("127.0.0.1", gw.port("PLAINTEXT")), timeout=10)
    try:
        for rounds in (1, 20):            # one at a time, then pipelined
            s.sendall(b"".join(raw_request(ApiKey.PRODUCE, 9, i, produce_body(topic, 0, 1), CLIENT_ID)
                               for i in range(rounds)))
            for i in range(rounds):
                size = struct.unpack(">i", _recv_exactly(s, 4))[0]
                assert struct.unpack(">i", _recv_exactly(s, size)[:4])[0] == i
            wait_until(lambda: not gateway.queued_bytes, "the written responses uncounted",
                       interval_s=0.01)
            assert gateway.queued_bytes == 0
            assert len(gateway.downstreams) == 1
        # the responses written straight from the upstream poll (one in
        # flight) are timed like the others: arrival to response, in ms
        m, tags = gw.server.metrics, {"request": "Produce"}
        assert m.metric("RequestsPerSec", group="RequestMetrics", tags=tags) > 0
        assert 0 <= m.metric("TotalTimeMs-max", group="RequestMetrics", tags=tags) < 10000
    finally:
        s.close()


def _recv_exactly(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


# ------------------------------------------------------------------ poison
@pytest.mark.parametrize("mode", ["per-client", "shared"])
@pytest.mark.parametrize("poison", ["acks0-missing-partition", "truncated-frame"])
def test_poison_request_closes_only_its_own_client(kafka_broker, kchannel_inprocess_server,
                                                   mode, poison):
    topic = create_topic(kafka_broker)
    gw = kchannel_inprocess_server(gateway_props(kafka_broker, **{
        "kchannel.gateway.upstream.connections": mode}))
    stop = threading.Event()
    failures, counts = [], []

    def victim():
        n = 0
        try:
            with KafkaClient({"bootstrap.servers": gw.bootstrap("PLAINTEXT"),
                              "request.timeout.ms": 10000}) as c:
                c.connect()
                while not stop.is_set():
                    md = c.request(ApiKey.METADATA, {"topics": [{"name": topic}]})
                    assert md["topics"][0]["error_code"] == 0
                    n += 1
        except Exception as exc:  # noqa: BLE001 - collected, asserted below
            failures.append(exc)
        counts.append(n)

    threads = [threading.Thread(target=victim) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    attacker = socket.create_connection(("127.0.0.1", gw.port("PLAINTEXT")), timeout=10)
    try:
        if poison == "acks0-missing-partition":
            attacker.sendall(raw_request(ApiKey.PRODUCE, 9, 1, produce_body(topic, 99, 0),
                                         CLIENT_ID))
        else:
            whole = raw_request(ApiKey.PRODUCE, 9, 1, produce_body(topic, 0, 1), CLIENT_ID)[4:]
            cut = whole[:-12]
            attacker.sendall(struct.pack(">i", len(cut)) + cut)
        assert closed_within(attacker, 10), "the poisoning client was not disconnected"
        time.sleep(1)
    finally:
        attacker.close()
        stop.set()
        for t in threads:
            t.join(20)
    assert failures == []
    assert len(counts) == 3 and min(counts) > 0


# ------------------------------------------------------------ configuration
def _base_props(upstream):
    return {
        "listeners": "EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "EXTERNAL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "EXTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config":
            f'{PLAIN} required user_alice="alice-secret";',
        "kchannel.scram.credential.store": "memory",
        "kchannel.upstream.bootstrap.servers": upstream,
    }


def _good_props():
    good = _base_props("127.0.0.1:9")
    good["listener.name.external.kchannel.gateway.allowed.principals"] = "User:alice"
    return good


def test_allow_list_on_its_listener_is_valid(tmp_path):
    # (what each case below changes one key of)
    path = write_properties(str(tmp_path / "good.properties"), _good_props())
    r = run_kchannel("config", "validate", "--config", path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("key,value,says", [
    # the README's own prefix on a listener called EXTERNAL
    ("listener.name.sasl_ssl.kchannel.gateway.allowed.principals", "User:alice",
     "names no listener"),
    ("listener.name.EXTERNAL.kchannel.gateway.allowed.principals", "User:alice",
     "listener prefixes are lower case"),
    ("kchannel.gateway.allowed.principal", "User:alice", "Unknown configuration"),
    ("listener.name.external.kchannel.gateway.alowed.principals", "User:alice",
     "Unknown configuration"),
    ("kchannel.gateway.allowed.principals", "alice", "is not a principal"),
    ("kchannel.upstream.bootstrap.servers", "", "there is no gateway"),
])
def test_misconfigured_allow_lists_are_refused(tmp_path, key, value, says):
    bad = dict(_good_props(), **{key: value})
    path = write_properties(str(tmp_path / "bad.properties"), bad)
    r = run_kchannel("config", "validate", "--config", path)
    assert r.returncode == 1, r.stdout + r.stderr
    named = key if key != "kchannel.upstream.bootstrap.servers" else \
        "listener.name.external.kchannel.gateway.allowed.principals"
    assert named in r.stdout and says in r.stdout, r.stdout
    # ... and kchannel serve does not start with it, naming the key
    bad["log.dirs"] = str(tmp_path / "data")
    path = write_properties(str(tmp_path / "serve.properties"), bad)
    r = run_kchannel("serve", "--config", path, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Cannot start: " in r.stderr and named in r.stderr and says in r.stderr, r.stderr
    assert "Awaiting socket connections" not in r.stdout + r.stderr


def test_kchannel_serve_refuses_a_misspelled_key(tmp_path):
    props = _base_props("127.0.0.1:9")
    props["kchannel.gateway.max.queued.byte"] = "1024"
    path = write_properties(str(tmp_path / "server.properties"), props)
    r = run_kchannel("serve", "--config", path, timeout=60)
    assert r.returncode == 1
    assert "kchannel.gateway.max.queued.byte" in r.stderr + r.stdout


@pytest.mark.parametrize("workers", ["1", "2"])
def test_node_port_colliding_with_a_listener_is_refused_at_start(kafka_broker, tmp_path,
                                                                 workers):
    # Upstream node 1 on listener A is served at A's port + 1: listener B's
    # (with 2 workers, SO_REUSEPORT would bind it anyway).
    for attempt in range(3):
        port = free_ports(2, consecutive=True)[0]
        run_dir = tmp_path / str(attempt)
        run_dir.mkdir()
        out = _serve_with_node_port_on_listener_b(kafka_broker, run_dir, workers, port)
        # Another test's listener may still take the probed port first: then
        # the bind fails before the check; that says nothing, so try again.
        if f"{port + 1}: Address already in use" not in out:
            break
    assert f"= {port + 1}" in out and "listener B" in out, out


def test_node_ports_colliding_with_each_other_are_refused():
    """Node ports of two listeners that land on each other (listener A's
    upstream node 2 and listener B's node 0 both at A's port + 3) are
    refused as a node port on a listener is; the session's one-broker
    upstream cannot show it end to end, so the check that kchannel serve
    runs at start (_probe_response(at_start=True)) is asked directly."""
    from types import SimpleNamespace
    from kchannel.server.gateway_endpoints import _Endpoints

    def listener(name, port):
        return SimpleNamespace(name=name, host="127.0.0.1", port=port, upstream_node=None)
    gw = SimpleNamespace(server=SimpleNamespace(listeners=[listener("A", 9100),
                                                           listener("B", 9102)]),
                         node_listeners={}, node_id_base=0)
    problem = _Endpoints._node_port_collision(gw, [0, 2])
    assert problem is not None and "= 9103" in problem and "listener B" in problem \
        and "upstream node 2 on listener A" in problem, problem
    # the same nodes with room between the listeners: nothing to refuse
    gw.server.listeners[1].port = 9110
    assert _Endpoints._node_port_collision(gw, [0, 2]) is None


def _serve_with_node_port_on_listener_b(kafka_broker, tmp_path, workers, port):
    props = {
        "listeners": f"A://127.0.0.1:{port},B://127.0.0.1:{port + 1}",
        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:PLAINTEXT",
        "inter.broker.listener.name": "B",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.a.plain.sasl.jaas.config":
            f'{PLAIN} required user_alice="alice-secret";',
        "kchannel.gateway.node.id.base": str(kafka_broker.node_id),
        "kchannel.upstream.bootstrap.servers": kafka_broker.bootstrap("PLAINTEXT"),
        "log.dirs": str(tmp_path / "data"),
        "num.network.threads": workers,
    }
    path = write_properties(str(tmp_path / "server.properties"), props)
    r = run_kchannel("serve", "--config", path, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    return r.stdout + r.stderr


# ------------------------------------------------------------------ tokens
def user_client(gw, user):
    return KafkaClient({"bootstrap.servers": gw.bootstrap("SASL_PLAINTEXT"),
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.jaas.config": f'{PLAIN} required username="{user}" '
                                            f'password="{USERS[user]}";',
                        "request.timeout.ms": 30000})


CREATE = {"owner_principal_type": None, "owner_principal_name": None, "renewers": [],
          "max_lifetime_ms": -1}


def test_token_flood_leaves_others_metadata_fast(kafka_broker, kchannel_inprocess_server):
    gw = kchannel_inprocess_server(gateway_props(kafka_broker, **{
        "delegation.token.secret.key": "gateway-token-secret",
        "kchannel.delegation.token.store": "memory"}))
    manager = gw.server.token_manager
    now = now_ms()
    for i in range(20000):
        assert manager.create_token(KafkaPrincipal("User", f"owner{i % 25}"),
                                    now=now).error is Errors.NONE
    stop = threading.Event()
    floods, failures = [], []

    def flood():
        n = 0
        try:
            with user_client(gw, "bob") as c:
                c.connect()
                while not stop.is_set():
                    r = c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": None})
                    assert r["error_code"] == 0 and r["tokens"] == []
                    n += 1
        except Exception as exc:  # noqa: BLE001
            failures.append(exc)
        floods.append(n)

    threads = [threading.Thread(target=flood) for _ in range(4)]
    for t in threads:
        t.start()
    latencies = []
    try:
        with user_client(gw, "alice") as c:
            c.connect()
            c.request(ApiKey.METADATA, {"topics": []})
            for _ in range(60):
                t0 = time.perf_counter()
                c.request(ApiKey.METADATA, {"topics": []})
                latencies.append(time.perf_counter() - t0)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert failures == []
    assert sum(floods) >= 100, floods
    assert statistics.median(latencies) < 0.050, statistics.median(latencies)


def test_token_apis_obey_the_allow_list_and_the_owner_limit(kafka_broker,
                                                            kchannel_inprocess_server):
    gw = kchannel_inprocess_server(gateway_props(kafka_broker, **{
        "delegation.token.secret.key": "gateway-token-secret",
        "kchannel.delegation.token.store": "memory",
        "kchannel.delegation.token.max.tokens.per.owner": "2",
        "listener.name.sasl_plaintext.kchannel.gateway.allowed.principals": "User:alice"}))
    manager = gw.server.token_manager
    with user_client(gw, "bob") as c:
        c.connect()
        for key, body in ((ApiKey.CREATE_DELEGATION_TOKEN, CREATE),
                          (ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": None})):
            assert c.request(key, body)["error_code"] == \
                Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert manager.tokens() == []
    with user_client(gw, "alice") as c:
        c.connect()
        made = [c.request(ApiKey.CREATE_DELEGATION_TOKEN, CREATE) for _ in range(3)]
        assert [m["error_code"] for m in made] == [0, 0, Errors.POLICY_VIOLATION]
        described = c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": None})
        assert sorted(t["token_id"] for t in described["tokens"]) == \
            sorted(m["token_id"] for m in made[:2])
    # Another owner's tokens are not counted against alice's, nor shown to her.
    other = manager.create_token(KafkaPrincipal("User", "carol"), now=now_ms())
    assert other.error is Errors.NONE
    with user_client(gw, "alice") as c:
        c.connect()
        described = c.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, {"owners": None})
        assert other.token_id not in [t["token_id"] for t in described["tokens"]]
