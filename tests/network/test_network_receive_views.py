"""The receive path hands frames out as read-only views of the decoder's
memory, over real 127.0.0.1 sockets: PLAINTEXT through the Selector (the
transport ``recv_into``s the decoder's writable region), TLS through the
transport with both pump twins (records decrypted straight into it).

What is asserted: frames kept by the caller never change while more data is
received; large frames arrive in their own exactly-sized buffer; the
authenticators still get ``bytes``.
"""
import socket
import struct
import time

import pytest

from kchannel.framing import encode_frame, encode_frames
from kchannel.network.channel_builder import PlaintextChannelBuilder
from kchannel.network.ops import OP_READ, OP_WRITE
from kchannel.network.selector import Selector
from kchannel.network.transport import PlaintextTransportLayer
from tests.fixtures.tls import (DEADLINE_S, close_all, handshake, listener,  # noqa: F401
                                make_pair, tcp_pair, wait)


class Pair:
    def __init__(self, batch):
        self.server = Selector(PlaintextChannelBuilder("server"), max_receives_per_channel=batch)
        self.client = Selector(PlaintextChannelBuilder("client"), max_receives_per_channel=batch)
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.server.add_listener(self.lsock, self._accept)
        self.accepted = []
        self.received = []

    def _accept(self):
        s, _ = self.lsock.accept()
        self.accepted.append(f"s{len(self.accepted)}")
        self.server.register(self.accepted[-1], s)

    def poll(self):
        self.client.poll(5)
        self.server.poll(5)
        self.received += [p for _, p in self.server.completed_receives]

    def poll_until(self, cond):
        deadline = time.monotonic() + DEADLINE_S
        while not cond():
            assert time.monotonic() < deadline, "condition not reached"
            self.poll()

    def close(self):
        self.client.close()
        self.server.close()
        self.lsock.close()


@pytest.fixture(params=[1, 64], ids=["kafka-rule", "batch64"])
def pair(request):
    p = Pair(request.param)
    p.client.connect("c", p.lsock.getsockname())
    p.poll_until(lambda: p.client.is_channel_ready("c") and p.accepted)
    yield p
    p.close()


def test_kept_frames_never_change_while_more_arrives(pair):
    sizes = [1, 100, 5000, 16384, 0, 40000, 3, 16384, 70000, 200] * 20
    payloads = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    for p in payloads:
        pair.client.send("c", p)
    pair.poll_until(lambda: len(pair.received) == len(payloads))
    # Every frame was kept while the rest arrived into the same decoder.
    assert [bytes(r) for r in pair.received] == payloads
    # (frames below COPY_BELOW are bytes copies, the rest read-only views)
    assert all(type(r) is bytes if len(r) < 2048 else type(r) is memoryview and r.readonly
               for r in pair.received)
    # More traffic after all of them: still unchanged.
    for p in payloads[:50]:
        pair.client.send("c", p[::-1])
    pair.poll_until(lambda: len(pair.received) == len(payloads) + 50)
    assert [bytes(r) for r in pair.received[:len(payloads)]] == payloads


def test_large_frame_arrives_in_its_own_exact_buffer(pair):
    big = bytes(range(256)) * 4096                  # 1 MiB
    pair.client.send("c", big)
    pair.client.send("c", b"small")
    pair.poll_until(lambda: len(pair.received) == 2)
    frame, small = pair.received
    assert frame == big and small == b"small"
    # the payload's memory is exactly the payload: received in place
    assert memoryview(frame.obj).nbytes == len(big)


def test_plaintext_receive_into_over_a_raw_socket(impl):
    """The transport + decoder twins without the Selector: frames split at
    odd places by the sender, all kept, none changes."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname())
    s, _ = ls.accept()
    t = PlaintextTransportLayer(s)
    d = impl.framing.FrameDecoder()
    payloads = [bytes([i]) * (i * 613 % 45000) for i in range(120)]
    stream = encode_frames(payloads)
    got = []
    try:
        pos = 0
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(payloads):
            assert time.monotonic() < deadline
            if pos < len(stream):
                c.sendall(stream[pos:pos + 7777])
                pos += 7777
            while t.receive_into(d):
                got.extend(d.frames())
        assert [bytes(g) for g in got] == payloads
        c.sendall(struct.pack(">i", -5))
        deadline = time.monotonic() + DEADLINE_S
        while d.buffered < 4:
            assert time.monotonic() < deadline
            t.receive_into(d)
        with pytest.raises(Exception, match="Invalid receive"):
            d.frames()
        assert [bytes(g) for g in got] == payloads
    finally:
        c.close()
        t.close()
        ls.close()


def _tls_receive(ct, st, d, data, frames_wanted):
    """Send ``data`` over ``ct``; receive on ``st`` into decoder ``d``."""
    got = []
    sent = 0
    view = memoryview(data)
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < frames_wanted:
        assert time.monotonic() < deadline, f"stalled with {len(got)} frames"
        if sent < len(data):
            sent += ct.write(view[sent:sent + 100000])
        elif ct.has_pending_writes():
            ct.flush()
        while st.receive_into(d):
            got.extend(d.frames())
        got.extend(d.frames())
        if len(got) < frames_wanted and not st.has_bytes_buffered():
            waits = [(st, OP_READ)]
            if ct.has_pending_writes() or sent < len(data):
                waits.append((ct, OP_WRITE))
            wait(waits, 0.2)
    return got


def test_tls_records_decrypted_into_the_decoder(pki, listener, impl):  # noqa: F811
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    try:
        handshake(ct, st)
        d = impl.framing.FrameDecoder()
        payloads = [bytes([i]) * (i * 977 % 40000) for i in range(80)]
        kept = _tls_receive(ct, st, d, encode_frames(payloads), len(payloads))
        assert kept == payloads
        big = bytes(range(256)) * 2048                     # 512 KiB
        more = _tls_receive(ct, st, d, encode_frames([big, b"x"]), 2)
        assert more == [big, b"x"]
        assert memoryview(more[0].obj).nbytes == len(big)   # decrypted in place
        assert [bytes(k) for k in kept] == payloads          # untouched
        assert all(type(k) is bytes if len(k) < impl.framing.COPY_BELOW else k.readonly
                   for k in kept + more)
    finally:
        close_all(ct, st)


def test_tls_decrypt_into_commits_what_arrived_before_eof(pki, listener, impl):  # noqa: F811
    ct, st = make_pair(listener, impl, pki.server_configs(), pki.client_configs())
    try:
        handshake(ct, st)
        d = impl.framing.FrameDecoder()
        ct.write(encode_frame(b"last words") + b"\x00\x00")
        ct.flush()
        ct.close()
        got = []
        deadline = time.monotonic() + DEADLINE_S
        with pytest.raises(Exception):
            while True:
                assert time.monotonic() < deadline
                if not st.receive_into(d):
                    wait([(st, OP_READ)], 0.2)
                got.extend(d.frames())
        got.extend(d.frames())
        assert got == [b"last words"] and d.has_partial()
    finally:
        close_all(ct, st)


def test_authenticator_reads_get_bytes():
    from kchannel.network.channel import KafkaChannel  # noqa: F401 - API used below
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname())
    s, _ = ls.accept()
    try:
        sel = Selector(PlaintextChannelBuilder("server"))
        sel.register("x", s)
        ch = sel.channel("x")
        c.sendall(encode_frames([b"auth-1", b"auth-2"]))
        deadline = time.monotonic() + DEADLINE_S
        frames = []
        while len(frames) < 2:
            assert time.monotonic() < deadline
            f = ch._read_one_frame()
            if f is None:
                time.sleep(0.01)
                continue
            frames.append(f)
        assert frames == [b"auth-1", b"auth-2"] and all(type(f) is bytes for f in frames)
        sel.close()
    finally:
        c.close()
        ls.close()


class _CountingSocket(socket.socket):
    """A real kernel socket whose recv_into calls are counted."""
    calls = 0

    def recv_into(self, *args):
        type(self).calls += 1
        return super().recv_into(*args)


def _counted_server(batch):
    """A server Selector with one registered connection whose socket counts
    its reads, and the raw peer socket."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    peer = socket.create_connection(lsock.getsockname())
    accepted, _ = lsock.accept()
    lsock.close()
    counted = _CountingSocket(fileno=accepted.detach())
    sel = Selector(PlaintextChannelBuilder("server"), max_receives_per_channel=batch)
    sel.register("c", counted)
    return sel, peer


def _receives_until(sel, cond):
    deadline = time.monotonic() + DEADLINE_S
    got = []
    while not cond(got):
        assert time.monotonic() < deadline, "condition not reached"
        sel.poll(5)
        got += [p for _, p in sel.completed_receives]
        got += [("closed", cid) for cid in sel.disconnected]
    return got


@pytest.mark.parametrize("batch", [1, 64])
def test_a_short_read_is_the_last_read_of_the_poll(batch):
    """A read that got less than it was offered emptied the socket: the
    channel does not read again in that poll (it would only get EAGAIN)."""
    sel, peer = _counted_server(batch)
    try:
        _CountingSocket.calls = 0
        peer.sendall(encode_frame(b"x" * 100))
        got = _receives_until(sel, lambda g: g)
        assert [bytes(f) for f in got] == [b"x" * 100]
        # One read for the frame; the poll after it found nothing to read.
        assert _CountingSocket.calls == 1
        # Several frames in one segment: one read, all handed over (64) or
        # one per poll with the rest kept (Kafka's rule), still one read.
        _CountingSocket.calls = 0
        peer.sendall(encode_frames([b"a", b"b", b"c"]))
        got = _receives_until(sel, lambda g: len(g) == 3)
        assert [bytes(f) for f in got] == [b"a", b"b", b"c"]
        assert _CountingSocket.calls == 1
    finally:
        sel.close()
        peer.close()


def test_eof_right_behind_the_data_is_still_reported():
    """The peer sends a frame and closes: the frame is delivered, and the EOF
    (no longer read in the same poll as the data) is reported by a later
    poll."""
    sel, peer = _counted_server(64)
    try:
        peer.sendall(encode_frame(b"last words"))
        peer.close()
        got = _receives_until(sel, lambda g: ("closed", "c") in g)
        assert [bytes(f) for f in got if not isinstance(f, tuple)] == [b"last words"]
    finally:
        sel.close()
