"""kchannel.Consumer against a broker that sends bad record batches: a
kchannel Server whose Metadata, ListOffsets and Fetch handlers serve one
partition with whatever bytes the test chooses.  A corrupt batch raises
CorruptRecordError from poll, a partial trailing batch is ignored (Kafka's
behaviour), and any bytes either decode or fail closed."""
import struct
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel import Consumer
from kchannel.errors import CorruptRecordError
from kchannel.protocol import records as R
from kchannel.protocol.api_keys import ApiKey
from kchannel.server import Server

TOPIC = "hostile"


class Broker:
    def __init__(self):
        self.records = b""
        self.lock = threading.Lock()
        self.server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
        self.server.register_handler(ApiKey.METADATA, self.metadata)
        self.server.register_handler(ApiKey.LIST_OFFSETS, self.list_offsets)
        self.server.register_handler(ApiKey.FETCH, self.fetch, max_version=12)
        self.server.start()
        self.port = self.server.bound_port("PLAINTEXT")

    def metadata(self, ctx):
        return {"brokers": [{"node_id": self.server.node_id, "host": "127.0.0.1",
                             "port": self.port, "rack": None}],
                "cluster_id": "hostile", "controller_id": self.server.node_id,
                "topics": [{"error_code": 0, "name": TOPIC, "is_internal": False,
                            "partitions": [{"error_code": 0, "partition_index": 0,
                                            "leader_id": self.server.node_id,
                                            "leader_epoch": 0,
                                            "replica_nodes": [self.server.node_id],
                                            "isr_nodes": [self.server.node_id],
                                            "offline_replicas": []}]}]}

    def list_offsets(self, ctx):
        return {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 0,
             "leader_epoch": 0}]}]}

    def fetch(self, ctx):
        with self.lock:
            records = self.records
        return {"error_code": 0, "session_id": 0, "responses": [
            {"topic": TOPIC, "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 100,
                 "last_stable_offset": 100, "log_start_offset": 0,
                 "aborted_transactions": None, "preferred_read_replica": -1,
                 "records": records}]}]}

    def close(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    yield b
    b.close()


@pytest.fixture(scope="module")
def consumer(broker):
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                  "auto.offset.reset": "earliest", "fetch.max.wait.ms": 10})
    c.assign([(TOPIC, 0)])
    yield c
    c.close()


def _poll_once(consumer, records, broker, tries=20):
    with broker.lock:
        broker.records = records
    consumer.seek((TOPIC, 0), 0)
    for _ in range(tries):
        got = consumer.poll(0.05)
        if got:
            return got
    return []


def test_corrupt_crc_raises_from_poll(broker, consumer):
    raw = bytearray(R.encode_batch([(1, b"k", b"value", [])]))
    raw[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="stored crc"):
        _poll_once(consumer, bytes(raw), broker)


def test_records_before_a_corrupt_batch_are_returned_then_poll_raises(broker, consumer):
    # As Kafka's consumer: what decoded before the corrupt batch is handed
    # out (the position moves past it), the error comes with the next poll.
    first = R.encode_batch([(1, None, b"a", []), (2, None, b"b", [])])
    bad = bytearray(R.encode_batch([(3, None, b"c", [])], base_offset=2))
    bad[-1] ^= 0xFF
    got = _poll_once(consumer, first + bytes(bad), broker)
    assert [r.value for r in got] == [b"a", b"b"]
    assert consumer.position((TOPIC, 0)) == 2
    with pytest.raises(CorruptRecordError, match="stored crc"):
        consumer.poll(0)


def test_partial_trailing_batch_is_ignored(broker, consumer):
    first = R.encode_batch([(1, None, b"a", []), (2, None, b"b", [])])
    second = R.encode_batch([(3, None, b"c", [])], base_offset=2)
    got = _poll_once(consumer, first + second[:len(second) // 2], broker)
    assert [r.value for r in got] == [b"a", b"b"]
    assert consumer.position((TOPIC, 0)) == 2


@pytest.mark.parametrize("compression", [R.CompressionType.NONE, R.CompressionType.GZIP])
def test_position_after_a_batch_compaction_shortened_is_its_next_offset(
        broker, consumer, compression):
    # Kafka's log cleaner keeps a v2 batch's last offset (4 here) when it
    # removes its last records (2-4): as Kafka's consumer, the position
    # after the fetch is the batch's next offset, not 2 (from which the
    # next fetch would get the same batch, and nothing, for good).
    raw = bytearray(R.encode_batch([(1, b"a", b"a", []), (2, b"b", b"b", [])],
                                   compression=compression))
    raw[23:27] = struct.pack(">i", 4)
    raw[17:21] = struct.pack(">I", R.crc32c(bytes(raw[21:])))
    got = _poll_once(consumer, bytes(raw), broker)
    assert [r.offset for r in got] == [0, 1]
    assert consumer.position((TOPIC, 0)) == 5


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.binary(max_size=120), pos=st.integers(0, 10 ** 6), byte=st.integers(0, 255),
       mutate=st.booleans())
def test_any_fetched_bytes_fail_closed(broker, consumer, data, pos, byte, mutate):
    if mutate:
        raw = bytearray(R.encode_batch([(5, b"k", b"v" * 20, [("h", b"x")])] * 3,
                                       compression=R.CompressionType.GZIP))
        raw[pos % len(raw)] = byte
        data = bytes(raw)
    try:
        got = _poll_once(consumer, data, broker, tries=2)
    except CorruptRecordError:
        return
    assert isinstance(got, list)
