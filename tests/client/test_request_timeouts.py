"""Request timeouts of NetworkClient (Kafka's request.timeout.ms, and a
request's own timeout): a request the broker never answers fails with
RequestTimeoutError once its deadline has passed, not before, also when
poll() only looks for expired requests from the earliest deadline on."""
import time

import pytest

from kchannel.client import NetworkClient
from kchannel.client.network_client import RequestTimeoutError
from kchannel.protocol.api_keys import ApiKey
from kchannel.server import Server

DEADLINE_S = 30.0     # (a bound on waiting, not a speed target)


@pytest.fixture
def silent_server():
    """A Server whose Metadata handler never answers (returns None)."""
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"])
    server.register_handler(ApiKey.METADATA, lambda ctx: None)
    server.start()
    yield server
    server.shutdown()


def _ready_client(server, clock, timeout_ms):
    net = NetworkClient({"request.timeout.ms": timeout_ms}, time=lambda: clock[0])
    net.connect(0, "127.0.0.1", server.bound_port("PLAINTEXT"))
    deadline = time.monotonic() + DEADLINE_S
    while not net.is_ready(0):
        assert time.monotonic() < deadline
        net.poll(10)
    return net


def _poll_at(net, clock, now):
    clock[0] = now
    return net.poll(0)


def test_unanswered_requests_time_out_at_their_deadlines(silent_server):
    clock = [1_000_000]
    net = _ready_client(silent_server, clock, 5000)
    try:
        start = clock[0]
        slow = net.send(0, ApiKey.METADATA, {"topics": []}, 1)
        # behind it, one with its own (shorter) timeout: as Kafka, only a
        # node's oldest request is looked at
        net.send(0, ApiKey.METADATA, {"topics": []}, 1, timeout_ms=100)
        assert _poll_at(net, clock, start + 4999) == []
        assert _poll_at(net, clock, start + 5000) == []
        assert net.in_flight_count(0) == 2
        out = _poll_at(net, clock, start + 5001)
        assert [r.correlation_id for r in out][0] == slow
        assert len(out) == 2
        assert all(isinstance(r.exception, RequestTimeoutError) for r in out)
        assert "timed out after 5000 ms" in str(out[0].exception)
        assert net.in_flight_count(0) == 0
    finally:
        net.close()


def test_own_timeout_of_the_oldest_request(silent_server):
    clock = [2_000_000]
    net = _ready_client(silent_server, clock, 30000)
    try:
        start = clock[0]
        net.send(0, ApiKey.METADATA, {"topics": []}, 1, timeout_ms=250)
        assert _poll_at(net, clock, start + 250) == []
        out = _poll_at(net, clock, start + 251)
        assert len(out) == 1 and isinstance(out[0].exception, RequestTimeoutError)
        assert "timed out after 250 ms" in str(out[0].exception)
    finally:
        net.close()


def test_answered_requests_leave_later_ones_their_deadline(silent_server):
    """A request answered in time moves nothing: the next one still times
    out at its own deadline (the bound poll() keeps is only a lower one)."""
    clock = [3_000_000]
    net = _ready_client(silent_server, clock, 1000)
    try:
        silent_server.register_handler(
            ApiKey.METADATA, lambda ctx: {"brokers": [], "controller_id": 0, "topics": []})
        start = clock[0]
        net.send(0, ApiKey.METADATA, {"topics": []}, 1)
        deadline = time.monotonic() + DEADLINE_S
        out = []
        while not out:
            assert time.monotonic() < deadline
            out = net.poll(10)
        assert out[0].exception is None
        silent_server.register_handler(ApiKey.METADATA, lambda ctx: None)
        clock[0] = start + 600
        net.send(0, ApiKey.METADATA, {"topics": []}, 1)
        assert _poll_at(net, clock, start + 1001) == []     # the first one's deadline
        assert _poll_at(net, clock, start + 1600) == []
        out = _poll_at(net, clock, start + 1601)
        assert len(out) == 1 and isinstance(out[0].exception, RequestTimeoutError)
    finally:
        net.close()
