"""benchmarks/records_clients.py's request floor: the Produce requests it
times are the ones kchannel's producer would send (same batches, byte for
byte), its loop keeps no more than max.in.flight requests out and notices a
response with an error, and a small run against a broker stores every
record it claims.  Speed is not asserted (the script prints the ratios)."""
import os
import socket
import struct
import sys
import threading
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
try:
    import records_clients
finally:
    sys.path.pop(0)

from kchannel.producer.accumulator import ProducerBatch, record_body_size  # noqa: E402
from kchannel.protocol import messages  # noqa: E402
from kchannel.protocol.headers import decode_request, response_encoder  # noqa: E402
from kchannel.protocol.records import QueuedRecord  # noqa: E402
from kchannel.protocol.records.batch import encode_plain_batch, iter_batches  # noqa: E402

PRODUCE = messages.PRODUCE.api_key
TOPIC = "floor-topic"
TS = 1_700_000_000_000


def _accumulated(n, size, batch_size):
    """The batches kchannel's accumulator fills with ``n`` records of
    ``size`` bytes (ProducerBatch.room_for / append, as the appender does),
    encoded as its sender encodes them."""
    value = b"x" * size
    body = record_body_size(None, value, None)
    batches, batch = [], None
    for _ in range(n):
        record = QueuedRecord(TS, None, value, ())
        room = -1 if batch is None else batch.room_for(record, body, batch_size)
        if room < 0:
            batch = ProducerBatch(None, 0, batch_size)
            batches.append(batch)
            room = batch.room_for(record, body, batch_size)
        batch.append(record, room, None, 0, size)
    return [encode_plain_batch(b.records, 0, -1, -1, -1, 0, -1, None, b.estimated_size)
            for b in batches]


@pytest.mark.parametrize("version", [3, 8, 9, 11])
# (1151 bytes: exactly 10 records of 100 B, a batch that fills batch.size to
# the byte)
@pytest.mark.parametrize("size,batch_size,n", [(100, 16384, 400), (1024, 16384, 100),
                                               (1024, 4000, 10), (100, 1000000, 300),
                                               (100, 1151, 25)])
def test_floor_requests_are_the_producers_batches(version, size, batch_size, n):
    frames = records_clients.floor_requests(TOPIC, n, size, batch_size, version,
                                            correlation_id=7, timestamp=TS)
    expected = _accumulated(n, size, batch_size)
    assert [c for _, c in frames] == [
        next(iter_batches(b)).last_offset + 1 for b in expected]
    for k, ((frame, count), batch) in enumerate(zip(frames, expected)):
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        header, body = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id) == (
            PRODUCE, version, 7 + k)
        assert body["acks"] == 1 and body["transactional_id"] is None
        (topic,) = body["topic_data"]
        (part,) = topic["partition_data"]
        assert (topic["name"], part["index"]) == (TOPIC, 0)
        # Byte for byte the batch the producer would send, within batch.size.
        assert bytes(part["records"]) == batch
        assert len(batch) <= batch_size or count == 1
    if batch_size == 1151:
        assert [c for _, c in frames] == [10, 10, 5]
    if size == 1024 and batch_size == 16384:
        # The figure: 15 records of 1 KiB per request at the defaults.
        assert frames[0][1] == 15


def _produce_response(version, correlation_id, code, base_offset):
    encode = response_encoder(PRODUCE, version, framed=True)
    return encode(correlation_id, {"responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": code, "base_offset": base_offset}]}],
        "throttle_time_ms": 0})


class _Broker(threading.Thread):
    """Reads Produce frames from ``sock``; answers the oldest unanswered one
    only once the client has stopped writing for a moment (or 5 are out), so
    a client that pipelined deeper would show it in ``most``."""

    def __init__(self, sock, version, errors=()):
        super().__init__(daemon=True)
        self.sock, self.version, self.errors = sock, version, set(errors)
        self.most = 0
        self.count = 0
        self.failure = None

    def run(self):
        try:
            self._serve()
        except Exception as exc:  # reported by the test
            self.failure = exc

    def _serve(self):
        buf = b""
        waiting = []
        self.sock.settimeout(0.02)
        while True:
            try:
                data = self.sock.recv(1 << 20)
                if not data:
                    return
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                    end = 4 + struct.unpack_from(">i", buf)[0]
                    header, _ = decode_request(buf[4:end])
                    waiting.append(header.correlation_id)
                    buf = buf[end:]
                    self.most = max(self.most, len(waiting))
                if len(waiting) < records_clients.FLOOR_IN_FLIGHT:
                    continue
            except socket.timeout:
                pass
            if waiting:
                corr = waiting.pop(0)
                code = 2 if corr in self.errors else 0
                self.sock.sendall(_produce_response(self.version, corr, code, self.count))
                self.count += 1


@pytest.mark.parametrize("version", [8, 11])
def test_floor_loop_keeps_at_most_five_requests_out(version):
    frames = [f for f, _ in records_clients.floor_requests(TOPIC, 40, 100, 400, version)]
    client, server = socket.socketpair()
    broker = _Broker(server, version)
    broker.start()
    try:
        bad, first, last = records_clients.floor_loop(
            client, frames, records_clients.floor_error_offset(TOPIC, version))
    finally:
        client.close()
        broker.join(5)
        server.close()
    assert broker.failure is None
    assert broker.count == len(frames) == 14
    # Pipelined, but never deeper than max.in.flight.requests.per.connection.
    assert broker.most == records_clients.FLOOR_IN_FLIGHT
    assert (bad, first) == (0, 0)
    # The last response is handed back whole (without its size prefix).
    assert last == _produce_response(version, len(frames), 0, len(frames) - 1)[4:]


@pytest.mark.parametrize("version", [8, 11])
def test_floor_loop_counts_error_responses(version):
    frames = [f for f, _ in records_clients.floor_requests(TOPIC, 30, 100, 400, version)]
    client, server = socket.socketpair()
    broker = _Broker(server, version, errors={3, 9})
    broker.start()
    try:
        bad, first, _ = records_clients.floor_loop(
            client, frames, records_clients.floor_error_offset(TOPIC, version), in_flight=2)
    finally:
        client.close()
        broker.join(5)
        server.close()
    assert (bad, first) == (2, 2)
    assert broker.most == 2


def test_floor_run_stores_every_record(tansu):
    """A tiny run of the floor against a broker: the records are stored (the
    run reads them back), the requests are as many as the batches."""
    topic = f"floor-{uuid.uuid4().hex[:6]}"
    records_clients.create_topic(tansu.bootstrap, topic)
    t0 = time.monotonic()
    out = records_clients.floor_run(tansu.bootstrap, topic, 500, 100, 2048)
    assert time.monotonic() - t0 < 120
    # 2048 bytes hold 18 records of 100 B: 28 requests for 500 records.
    assert (out["records"], out["requests"]) == (18, 28)
    assert len(_accumulated(500, 100, 2048)) == 28
    assert out["cpu"] > 0 and out["utime"] >= 0 and out["stime"] >= 0
    with pytest.raises(RuntimeError, match="not the last request's"):
        # The same topic again: the broker puts the records at offsets
        # 500-999, not where a fresh topic's would be.
        records_clients.floor_run(tansu.bootstrap, topic, 500, 100, 2048)
