"""The Sender's usual Produce response (one topic, one partition, no record
errors, no message) comes from its decoder as a ProduceResult, not the
codec's dict (see ProduceResponseDecoder): the Sender reads from it what
it read from the dict.  Against a kchannel Server answering Produce with
scripted partition answers in that shape: a retriable error code retried,
a fatal one failing the batch with Kafka's error, the log append time and
the throttle time (its metric) taken, and a request of two partitions
answered for one: the other batch failed as not answered."""
import threading

import pytest

from kchannel import Producer
from kchannel.protocol import messages
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.errors import Errors
from kchannel.server import Server
from kchannel.producer import sender as sender_module


def _scripted_server(answers, partitions=1):
    """A Server leading ``partitions`` partitions of topic "t", answering
    each Produce with ``answers.pop(0)(index) -> (code, append time,
    throttle)`` for the request's first partition only; the requests'
    partition lists in a list."""
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    got = []
    lock = threading.Lock()
    offsets = {}

    def metadata(ctx):
        node = server.node_id
        return {"brokers": [{"node_id": node, "host": "127.0.0.1",
                             "port": server.bound_port("PLAINTEXT"), "rack": None}],
                "cluster_id": "one", "controller_id": node,
                "topics": [{"error_code": 0, "name": "t", "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": i,
                                            "leader_id": node, "leader_epoch": 0,
                                            "replica_nodes": [node], "isr_nodes": [node],
                                            "offline_replicas": []}
                                           for i in range(partitions)]}]}

    def produce(ctx):
        with lock:
            [topic] = ctx.body["topic_data"]
            parts = topic["partition_data"]
            got.append(sorted(p["index"] for p in parts))
            p = min(parts, key=lambda p: p["index"])
            code, append, throttle = answers.pop(0) if answers else (0, -1, 0)
            n = int.from_bytes(bytes(p["records"][57:61]), "big")
            base = offsets.get(p["index"], 0)
            if code == 0:
                offsets[p["index"]] = base + n
            return {"responses": [{"name": "t", "partition_responses": [
                {"index": p["index"], "error_code": code, "base_offset": base if code == 0 else -1,
                 "log_append_time_ms": append, "log_start_offset": 0, "record_errors": [],
                 "error_message": None}]}], "throttle_time_ms": throttle}
    server.register_handler(ApiKey.METADATA, metadata)
    server.register_handler(ApiKey.PRODUCE, produce)
    server.start()
    return server, got


def _one_in_flight(server, **extra):
    conf = {"bootstrap.servers": f"127.0.0.1:{server.bound_port('PLAINTEXT')}",
            "acks": "1", "enable.idempotence": "false", "linger.ms": 0,
            "max.in.flight.requests.per.connection": 1, "retry.backoff.ms": 1}
    conf.update(extra)
    return Producer(conf)


def _uses_produce_result(p):
    # (the active twin's decoder, the one returning ProduceResults)
    decoders = [d for k, d in p._client.client._response_decoders.items()
                if k >> 16 == messages.PRODUCE.api_key]
    return decoders and all(isinstance(d, sender_module._senderloop.ProduceResponseDecoder)
                            for d in decoders)


def test_error_codes_append_time_and_throttle_from_the_result():
    server, got = _scripted_server([(Errors.NOT_LEADER_OR_FOLLOWER, -1, 0),
                           (0, 1_700_000_000_123, 7),
                           (Errors.INVALID_RECORD, -1, 0)])
    p = _one_in_flight(server)
    try:
        md = p.send("t", b"a").get(10)          # retried once, then appended
        assert (md.offset, md.timestamp) == (0, 1_700_000_000_123)
        with pytest.raises(Exception, match=r"^INVALID_RECORD \(87\): This record has failed"):
            p.send("t", b"b").get(10)           # not retriable
        assert p.send("t", b"c").get(10).offset == 1
        throttle = [v for k, v in p.metrics().items()
                    if getattr(k, "name", None) == "produce-throttle-time-max"]
        assert throttle and throttle[0] == 7
        assert _uses_produce_result(p)
    finally:
        p.close(10)
        server.shutdown()
    assert len(got) == 4


def test_a_partition_not_answered_fails_its_batch():
    # Two partitions in one request, the answer names only the first
    # (in the usual one-partition shape): the other batch fails.
    server, got = _scripted_server([], partitions=2)
    p = _one_in_flight(server, **{"linger.ms": 200, "retries": 0})
    try:
        f0 = p.send("t", b"x", partition=0)
        f1 = p.send("t", b"y", partition=1)
        p.flush(10)
        assert f0.get(10).offset == 0
        with pytest.raises(Exception, match="did not include partition t-1"):
            f1.get(10)
        assert _uses_produce_result(p)
    finally:
        p.close(10)
        server.shutdown()
    assert got[0] == [0, 1]


def test_the_one_batch_of_a_request_is_matched_by_topic_and_partition():
    # A request of one batch, answered (ProduceResult) for its partition or
    # for another partition or topic: only its own completes it; any other
    # answer leaves it unanswered (failed here, no retries).
    from kchannel.client import ClientResponse
    from kchannel.client.metadata import TopicPartition
    from kchannel.protocol.records import QueuedRecord

    p = Producer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 600000, "retries": 0,
                  "enable.idempotence": "false", "acks": "1",
                  "reconnect.backoff.ms": 100000, "reconnect.backoff.max.ms": 100000})
    try:
        s, acc = p._sender, p.accumulator
        result_type = sender_module._senderloop.ProduceResult

        def answer(name, index):
            tp = TopicPartition("t", 3)
            future = acc.append(tp, QueuedRecord(0, None, b"v", ()), 9, None, -1, 1, 1000)[0]
            with acc.lock:
                batch = acc.batches[tp].popleft()
            resp = ClientResponse(1, messages.PRODUCE.api_key, 9, 1, body=result_type(
                9, name, index, 0, 42, -1, 0, 0), request_time_ms=1, receive_time_ms=2)
            s._handle_produce_response(resp, {tp: batch})
            return future

        assert answer("t", 3).get(5).offset == 42
        for name, index in (("t", 4), ("u", 3)):
            with pytest.raises(Exception, match="did not include partition t-3"):
                answer(name, index).get(5)
    finally:
        p.close(0)
