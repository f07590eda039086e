"""ClientLoop._handle_response's match of a response with the oldest
request in flight (both twins): a matching response takes that request out
and leaves the rest in order; a mismatched correlation id takes nothing out
before the protocol failure, which then reports every request in flight,
oldest first."""
import struct

from kchannel import errors
from tests.fixtures.selectors import ready_node_client


def _poll_receives(net, *payloads):
    sel = net.selector
    sel.completed_receives = [(7, p) for p in payloads]
    sel.poll_time_ms = net.time()
    return net.poll(0)


def test_matching_responses_take_the_oldest_out_in_order():
    net, node, real = ready_node_client()
    try:
        # raw requests: their responses are handed over undecoded
        c1 = net._send(node, 18, 3, (b"a" * 10,), "raw")
        c2 = net._send(node, 18, 3, (b"b" * 10,), "raw")
        c3 = net._send(node, 18, 3, (b"c" * 10,), "raw")
        assert list(node.in_flight) == [c1, c2, c3]
        p1 = struct.pack(">i", c1) + b"one"
        out = _poll_receives(net, p1)
        assert [(r.correlation_id, r.body, r.exception) for r in out] == [(c1, p1, None)]
        assert list(node.in_flight) == [c2, c3]
        p2, p3 = struct.pack(">i", c2) + b"two", struct.pack(">i", c3)
        out = _poll_receives(net, p2, p3)
        assert [(r.correlation_id, r.body) for r in out] == [(c2, p2), (c3, p3)]
        assert not node.in_flight
        assert node.stats.rx == 3
        assert node.stats.rxbytes == len(p1) + len(p2) + len(p3) + 12
        assert net.selector.closed == []
    finally:
        net.selector = real
        net.close()


def test_mismatched_correlation_fails_every_request_oldest_first():
    net, node, real = ready_node_client()
    try:
        c1 = net._send(node, 18, 3, (b"a" * 10,), "raw")
        c2 = net._send(node, 18, 3, (b"b" * 10,), "raw")
        out = _poll_receives(net, struct.pack(">i", c2) + b"early")
        assert [r.correlation_id for r in out] == [c1, c2]
        assert all(r.body is None for r in out)
        exc = out[0].exception
        assert isinstance(exc, errors.InvalidRequestError)
        assert str(exc) == f"Correlation id for response ({c2}) does not match request ({c1})"
        assert out[1].exception is exc
        assert net.selector.closed == [7]
        assert not node.in_flight
        assert node.stats.rx == 0
    finally:
        net.selector = real
        net.close()
