"""The Sender's request of one partition's batch (the usual request at
Kafka's defaults) takes its fields before the partition from the last
request's when the version and topic are the same, and builds them again
when either changes; it sends through the network client directly and
reads the node's Produce version from its ApiVersions map.  Against a
kchannel Server answering Metadata for two topics and every Produce: each
request names the partition of its batch, records and offsets come back
in order, and the Produce version follows the node's (lowered) answer."""
import threading

from kchannel import Producer
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.server import Server

TOPICS = ("alpha", "beta-topic")


def _produce_server(produce_max=None, partitions=1):
    """A Server naming itself leader of ``partitions`` partitions (0, 1...)
    of each of TOPICS and
    answering each Produce with the offsets counted per partition; the
    request bodies and versions it got, as (version, body) in a list."""
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    got = []
    offsets = {}
    lock = threading.Lock()

    def metadata(ctx):
        node = server.node_id
        return {"brokers": [{"node_id": node, "host": "127.0.0.1",
                             "port": server.bound_port("PLAINTEXT"), "rack": None}],
                "cluster_id": "one", "controller_id": node,
                "topics": [{"error_code": 0, "name": t, "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": i,
                                            "leader_id": node, "leader_epoch": 0,
                                            "replica_nodes": [node], "isr_nodes": [node],
                                            "offline_replicas": []}
                                           for i in range(partitions)]} for t in TOPICS]}

    def produce(ctx):
        out = []
        with lock:
            got.append((ctx.header.api_version, ctx.body))
            for topic in ctx.body["topic_data"]:
                parts = []
                for p in topic["partition_data"]:
                    n = int.from_bytes(bytes(p["records"][57:61]), "big")
                    key = (topic["name"], p["index"])
                    base = offsets.get(key, 0)
                    offsets[key] = base + n
                    parts.append({"index": p["index"], "error_code": 0, "base_offset": base,
                                  "log_append_time_ms": -1, "log_start_offset": 0,
                                  "record_errors": [], "error_message": None})
                out.append({"name": topic["name"], "partition_responses": parts})
        return {"responses": out, "throttle_time_ms": 0}
    server.register_handler(ApiKey.METADATA, metadata)
    if produce_max is None:
        server.register_handler(ApiKey.PRODUCE, produce)
    else:
        server.register_handler(ApiKey.PRODUCE, produce, 3, produce_max)
    server.start()
    return server, got


def _one_in_flight_producer(server):
    # One request in flight, no linger: each flushed run is its own request.
    return Producer({"bootstrap.servers": f"127.0.0.1:{server.bound_port('PLAINTEXT')}",
                     "acks": "1", "enable.idempotence": "false", "linger.ms": 0,
                     "max.in.flight.requests.per.connection": 1})


def _exchange(server):
    p = _one_in_flight_producer(server)
    try:
        futures = []
        for i in range(40):
            topic = TOPICS[(i // 3) % 2]    # runs of three records per topic
            futures.append((topic, p.send(topic, b"value-%d" % i)))
            if i % 3 == 2:
                p.flush(10)     # (a run's records, one partition, in their own requests)
        p.flush(10)
        return [(t, f.get(10)) for t, f in futures]
    finally:
        p.close(10)


def _check(got, results):
    for t in TOPICS:
        offsets = [md.offset for topic, md in results if topic == t]
        assert offsets == list(range(len(offsets))), (t, offsets)
        assert all(md.topic == t and md.partition == 0 for topic, md in results if topic == t)
    seen = set()
    for version, body in got:
        assert len(body["topic_data"]) == 1
        topic = body["topic_data"][0]
        assert topic["name"] in TOPICS
        assert [p["index"] for p in topic["partition_data"]] == [0]
        seen.add(topic["name"])
    assert seen == set(TOPICS)
    # both topics alternated: the cached fields were rebuilt for each change
    names = [body["topic_data"][0]["name"] for _, body in got]
    assert sum(a != b for a, b in zip(names, names[1:])) >= 3


def test_one_partition_requests_alternating_topics():
    server, got = _produce_server()
    try:
        results = _exchange(server)
    finally:
        server.shutdown()
    _check(got, results)
    assert {v for v, _ in got} == {messages.PRODUCE.max_version}


def test_the_produce_version_follows_the_nodes_answer():
    server, got = _produce_server(produce_max=8)
    try:
        results = _exchange(server)
    finally:
        server.shutdown()
    _check(got, results)
    assert {v for v, _ in got} == {8}


def test_one_partition_requests_alternating_partitions():
    """The fields kept from the last request end with its partition's
    index: runs of records for partitions 0 and 1 of one topic, each run
    flushed in its own requests, name their own partition every time."""
    server, got = _produce_server(partitions=2)
    try:
        p = _one_in_flight_producer(server)
        try:
            futures = []
            for i in range(30):
                partition = (i // 3) % 2    # runs of three records per partition
                futures.append((partition, p.send(TOPICS[0], b"value-%d" % i,
                                                  partition=partition)))
                if i % 3 == 2:
                    p.flush(10)
            results = [(partition, f.get(10)) for partition, f in futures]
        finally:
            p.close(10)
    finally:
        server.shutdown()
    for partition in (0, 1):
        mds = [md for q, md in results if q == partition]
        assert all(md.partition == partition and md.topic == TOPICS[0] for md in mds)
        # offsets counted by the server per partition named in the request
        assert [md.offset for md in mds] == list(range(len(mds))), (partition, mds)
    indexes = []
    for _, body in got:
        assert [t["name"] for t in body["topic_data"]] == [TOPICS[0]]
        parts = body["topic_data"][0]["partition_data"]
        assert len(parts) == 1
        indexes.append(parts[0]["index"])
    # the partitions alternated from request to request
    assert sum(a != b for a, b in zip(indexes, indexes[1:])) >= 5, indexes
