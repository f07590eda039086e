"""A request's frame head and a response's correlation id (both twins; the
compiled one packs and reads them in C): the first part of a request sent
as parts is exactly ``struct.pack(">i4si", size, api key + version,
correlation id)`` through the correlation id's wrap at 2**31, and a
response's correlation id is read as a signed int32 from bytes, a
memoryview, a bytearray (a
non-contiguous view refused, as struct refuses it)."""
import struct

import pytest

from kchannel import errors
from kchannel.client import network_client
from kchannel.client.connection_state import ConnectionState


class _Selector:
    def __init__(self):
        self.sent = []
        self.closed = []
        self.completed_receives = []
        self.connected = []
        self.newly_ready = []
        self.disconnected = {}
        self.poll_time_ms = 0

    def send(self, id, frame, already_framed=False):
        self.sent.append((id, frame))

    def poll(self, timeout_ms, wait_after_flush=True):
        pass

    def close(self, id):
        self.closed.append(id)


def _ready_loop_client():
    net = network_client.NetworkClient({"bootstrap.servers": "127.0.0.1:1",
                                        "client.id": "corr-test"})
    node = network_client._Node(7, "127.0.0.1", 1, 0, 0, 10000)
    node.state = ConnectionState.READY
    net._nodes[7] = node
    real = net.selector
    net.selector = _Selector()
    return net, node, real


def test_request_head_packed_through_the_correlation_wrap():
    net, node, real = _ready_loop_client()
    try:
        net._next_corr = 0x7FFFFFFE
        body = (b"body-head", b"x" * 100, b"\x00")
        corrs = [net._send(node, 0, 9, body, False) for _ in range(3)]
        assert corrs == [0x7FFFFFFE, 0x7FFFFFFF, 0]
        assert net._next_corr == 1
        for corr, (nid, frame) in zip(corrs, net.selector.sent):
            assert nid == 7 and type(frame) is tuple
            joined = b"".join(frame)
            size = len(joined) - 4
            assert frame[0] == struct.pack(">i4si", size, struct.pack(">hh", 0, 9), corr)
            assert struct.unpack_from(">i", joined)[0] == size
            # the rest: the header's tail (client id...) then the body as given
            assert frame[-3:] == body
        # the node's counters (C integers compiled): requests and bytes with
        # their size prefixes
        sizes = [len(b"".join(frame)) for _, frame in net.selector.sent]
        assert (node.stats.tx, node.stats.txbytes) == (3, sum(sizes))
        assert type(node.stats.tx) is int and type(node.stats.txbytes) is int
    finally:
        net.selector = real
        net.close()


def _mismatch(payload):
    net, node, real = _ready_loop_client()
    try:
        c1 = net._send(node, 18, 3, (b"a" * 10,), "raw")
        sel = net.selector
        sel.completed_receives = [(7, payload)]
        sel.poll_time_ms = net.time()
        out = net.poll(0)
        assert [r.correlation_id for r in out] == [c1]
        return str(out[0].exception), c1
    finally:
        net.selector = real
        net.close()


def test_response_correlation_id_read_signed_from_every_payload_type():
    raw = struct.pack(">i", -2) + b"rest"
    for payload in (raw, memoryview(raw), memoryview(bytearray(raw)).toreadonly(),
                    bytearray(raw)):
        msg, c1 = _mismatch(payload)
        assert msg == f"Correlation id for response (-2) does not match request ({c1})"
    big = struct.pack(">i", 0x7FFFFFFF) + b"rest"
    msg, c1 = _mismatch(memoryview(big))
    assert msg == f"Correlation id for response (2147483647) does not match request ({c1})"
    # a non-contiguous view (the selector never hands one over): refused
    # as struct refuses it, in both twins
    with pytest.raises(BufferError):
        _mismatch(memoryview(b"\x00?\x00?\x00?\x05?xx")[::2])


def test_matching_response_from_a_view_completes():
    net, node, real = _ready_loop_client()
    try:
        c1 = net._send(node, 18, 3, (b"a" * 10,), "raw")
        payload = memoryview(bytearray(struct.pack(">i", c1) + b"ok")).toreadonly()
        sel = net.selector
        sel.completed_receives = [(7, payload)]
        sel.poll_time_ms = net.time()
        out = net.poll(0)
        assert [(r.correlation_id, bytes(r.body), r.exception) for r in out] == [
            (c1, struct.pack(">i", c1) + b"ok", None)]
        assert type(out[0].correlation_id) is int
    finally:
        net.selector = real
        net.close()
