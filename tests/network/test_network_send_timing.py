"""When sends reach the socket, over real 127.0.0.1 connections.

* A client's sends made between polls are written by the next poll before
  it waits: one ``poll`` both writes a request and returns its response
  (no poll spent on the OP_WRITE event alone), and sends pipelined between
  polls all go out in it.
* A server answers in the poll that read the requests: a lone request by
  write-through, a batch of pipelined requests with one write per
  connection once the batch is handled (``Selector.flush_sends``); the
  client gets every response without the server polling again.
"""
import socket
import threading

import pytest

from kchannel.client import NetworkClient
from kchannel.framing import FrameDecoder, encode_frame
from kchannel.network.selector import Selector
from kchannel.protocol.api_keys import ApiKey
from kchannel.protocol.headers import RequestHeader, decode_response, encode_request
from kchannel.security.channel_builders import create_channel_builder
from kchannel.server import Server


class EchoPeer:
    """A plain-socket peer answering each frame with ``b"re:" + frame``."""

    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.port = self.ls.getsockname()[1]
        self.frames = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        conn, _ = self.ls.accept()
        dec = FrameDecoder()
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                dec.feed(data)
                out = []
                for f in dec.frames():
                    self.frames.append(bytes(f))
                    out.append(encode_frame(b"re:" + bytes(f)))
                conn.sendall(b"".join(out))

    def close(self):
        self.ls.close()
        self.thread.join(5)


def _connected_selector(port):
    sel = Selector(create_channel_builder("PLAINTEXT", "client", {}, None),
                   connections_max_idle_ms=-1)
    sel.connect("c", ("127.0.0.1", port))
    for _ in range(500):
        sel.poll(10)
        if sel.is_channel_ready("c"):
            return sel
    raise AssertionError("no connection")


def test_client_request_and_response_in_one_poll():
    peer = EchoPeer()
    sel = _connected_selector(peer.port)
    try:
        for i in range(20):
            sel.send("c", b"req-%d" % i)
            # The poll writes the request before it waits, so the wait
            # ends with the response (not with the socket being writable);
            # waiting after a completed send is what a NetworkClient asks
            # for when its requests all await responses.
            sel.poll(5000, wait_after_flush=True)
            assert sel.completed_sends == [("c", len(b"req-%d" % i) + 4)]
            assert [p for _, p in sel.completed_receives] == [b"re:req-%d" % i]
        assert sel.metrics.metric("request-total") == 20
        assert sel.metrics.metric("response-total") == 20
        assert sel.metrics.metric("outgoing-byte-total") == sum(
            len(b"req-%d" % i) + 4 for i in range(20))
    finally:
        sel.close()
        peer.close()


def test_a_poll_whose_writes_completed_sends_does_not_wait():
    """Kafka's poll returns at once after a send (the socket is writable):
    a poll that wrote queued sends has results and returns without waiting
    for its timeout, unless told it may (``wait_after_flush``).  Bulk
    senders depend on it: their next sends wait for this poll.  The peer
    here never answers, so nothing else would end the wait."""
    import time
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    sel = _connected_selector(ls.getsockname()[1])
    conn, _ = ls.accept()
    try:
        for _ in range(3):
            sel.send("c", b"x" * 16384)
            t0 = time.monotonic()
            sel.poll(60000)
            # (a hang detector, not a speed target: without the rule this
            # poll sleeps for its whole 60 s timeout)
            assert time.monotonic() - t0 < 30
            assert sel.completed_sends == [("c", 16388)]
        # Opted in, the poll that wrote may wait (here: its whole timeout).
        sel.send("c", b"y")
        t0 = time.monotonic()
        sel.poll(300, wait_after_flush=True)
        assert time.monotonic() - t0 >= 0.25
        assert sel.completed_sends == [("c", 5)]
    finally:
        sel.close()
        conn.close()
        ls.close()


def test_client_sends_between_polls_go_out_with_the_next_poll():
    peer = EchoPeer()
    sel = _connected_selector(peer.port)
    try:
        payloads = [b"p%d" % i for i in range(50)]
        for p in payloads:
            sel.send("c", p)
        # Nothing is written outside poll (Kafka's NetworkClient.send).
        assert sel.channel("c").has_send()
        assert sel.has_pending_io()
        sel.poll(0)
        assert [size for _, size in sel.completed_sends] == [len(p) + 4 for p in payloads]
        got = []
        for _ in range(200):
            got.extend(p for _, p in sel.completed_receives)
            if len(got) == len(payloads):
                break
            sel.poll(50)
        assert got == [b"re:" + p for p in payloads]
        assert peer.frames == payloads
    finally:
        sel.close()
        peer.close()


def _request(corr):
    return encode_frame(encode_request(RequestHeader(int(ApiKey.METADATA), 1, corr, "t"),
                                       {"topics": []}))


@pytest.mark.parametrize("n", [1, 5])
def test_server_answers_in_the_poll_that_read_the_requests(n):
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    handled = []
    body = {"brokers": [], "controller_id": 0, "topics": []}

    def handle(ctx):
        handled.append(ctx.header.correlation_id)
        return body

    server.register_handler(ApiKey.METADATA, handle)
    sock = socket.create_connection(("127.0.0.1", server.bound_port("PLAINTEXT")), timeout=5)
    try:
        for _ in range(200):           # accept
            server.poll(10)
            if len(server.selector):
                break
        sock.sendall(b"".join(_request(i) for i in range(n)))
        for _ in range(200):
            server.poll(50)
            if handled:
                break
        # all of them in one poll (pipelined batch), answered before any
        # further server poll
        assert handled == list(range(n))
        dec = FrameDecoder()
        frames = []
        while len(frames) < n:
            data = sock.recv(65536)
            assert data, "server closed"
            dec.feed(data)
            frames.extend(dec.frames())
        assert [decode_response(f, int(ApiKey.METADATA), 1)[0] for f in frames] == \
            list(range(n))
    finally:
        sock.close()
        server.shutdown()


def test_network_client_round_trips_one_poll_each():
    server = Server(listeners=["PLAINTEXT://127.0.0.1:0"], connections_max_idle_ms=-1)
    server.register_handler(ApiKey.METADATA,
                            lambda ctx: {"brokers": [], "controller_id": 0, "topics": []})
    server.start()
    net = NetworkClient({"client.id": "t"})
    try:
        net.connect(0, "127.0.0.1", server.bound_port("PLAINTEXT"))
        for _ in range(500):
            if net.is_ready(0):
                break
            net.poll(10)
        assert net.is_ready(0)
        for i in range(10):
            corr = net.send(0, ApiKey.METADATA, {"topics": []}, 1)
            responses = net.poll(5000)
            assert [(r.correlation_id, r.exception) for r in responses] == [(corr, None)]
    finally:
        net.close()
        server.shutdown()
