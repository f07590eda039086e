"""KafkaChannel, AuthIO and the authenticator contract, with small custom
authenticators over real sockets (no SASL involved)."""
import select
import socket

import pytest

from kchannel.errors import AuthenticationError
from kchannel.framing import FrameDecoder, encode_frame
from kchannel.network.authenticator import Authenticator, DefaultAuthenticator
from kchannel.network.channel import ChannelState, KafkaChannel, State
from kchannel.network.channel_builder import ChannelBuilder, _plaintext_transport
from kchannel.network.ops import OP_NONE, OP_READ, OP_WRITE
from kchannel.network.selector import Selector
from kchannel.principal import ANONYMOUS, KafkaPrincipal

from tests.fixtures.selectors import listening_selector


class TokenAuthenticator(Authenticator):
    """Server side: expects one frame ``token:<name>``; answers ``ok`` and is
    complete, or answers ``denied`` and fails (the answer is deferred to
    handle_authentication_failure, like Kafka's SASL failure response)."""

    def __init__(self):
        self._done = False
        self._principal = None
        self._io = None
        self.failure_handled = False

    def authenticate(self, io, now):
        self._io = io
        frame = io.read_frame()
        if frame is None:
            return OP_READ
        if not frame.startswith(b"token:"):
            raise AuthenticationError("Authentication failed: bad token")
        name = frame[6:].decode()
        if name == "mallory":
            raise AuthenticationError("Authentication failed: denied")
        io.write_frame(b"ok")
        io.flush()
        self._principal = KafkaPrincipal("User", name)
        self._done = True
        return OP_NONE

    def handle_authentication_failure(self):
        self.failure_handled = True
        self._io.write_frame(b"denied")

    def complete(self):
        return self._done

    def principal(self):
        return self._principal or ANONYMOUS


class TokenChannelBuilder(ChannelBuilder):
    security_protocol = "PLAINTEXT"

    def build_channel(self, channel_id, sock, mode=None, peer_host=None, peer_port=None,
                      listener_name=None, max_receive_size=None, remote_address=None):
        return self._channel(channel_id, _plaintext_transport(sock), TokenAuthenticator,
                             mode, listener_name, max_receive_size, remote_address)


@pytest.fixture
def token_server():
    with listening_selector(TokenChannelBuilder("server"), 16,
                            failed_authentication_delay_ms=1000) as served:
        yield served


def read_frame(sock):
    dec = FrameDecoder()
    while True:
        f = dec.next_frame()
        if f is not None:
            return f
        data = sock.recv(4096)
        if not data:
            return None
        dec.feed(data)


def test_channel_state_names_and_equality():
    names = [s.name for s in State]
    assert names == ["NOT_CONNECTED", "AUTHENTICATE", "READY", "EXPIRED", "FAILED_SEND",
                     "FAILED_RECEIVE", "LOCAL_CLOSE", "AUTHENTICATION_FAILED"]
    exc = AuthenticationError("nope")
    st = ChannelState(State.AUTHENTICATION_FAILED, exc, "1.2.3.4:5")
    assert st == ChannelState.AUTHENTICATION_FAILED
    assert st == State.AUTHENTICATION_FAILED
    assert st != ChannelState.READY
    assert st.exception is exc and st.remote_address == "1.2.3.4:5"
    assert "AUTHENTICATION_FAILED" in repr(st) and "nope" in repr(st)


def test_frames_pipelined_behind_authentication_are_not_lost(token_server):
    sel, addr, ids, clock = token_server
    c = socket.create_connection(addr)
    c.settimeout(10)
    # token and two requests in ONE write: the authenticator's read pulls
    # them all off the socket; the data phase must still see both requests
    c.sendall(encode_frame(b"token:alice") + encode_frame(b"req-1") + encode_frame(b"req-2"))
    got = []
    for _ in range(200):
        sel.poll(10)
        got += sel.completed_receives
        if len(got) == 2:
            break
    assert got == [(ids[0], b"req-1"), (ids[0], b"req-2")]
    ch = sel.channel(ids[0])
    assert ch.state == ChannelState.READY
    assert ch.principal() == KafkaPrincipal("User", "alice")
    assert read_frame(c) == b"ok"
    assert sel.metrics.snapshot()["successful-authentication-total"] == 1
    c.close()


def test_failed_authentication_close_is_delayed_and_sends_deferred_response(token_server):
    """Kafka: SaslAuthenticatorFailurePositiveDelayTest.testInvalidPasswordSaslPlain (at the
    channel and selector)."""
    sel, addr, ids, clock = token_server
    bad = socket.create_connection(addr)
    bad.settimeout(10)
    good = socket.create_connection(addr)
    good.settimeout(10)
    bad.sendall(encode_frame(b"token:mallory"))
    for _ in range(100):
        sel.poll(10)
        if sel.metrics.snapshot()["failed-authentication-total"] == 1:
            break
    assert len(ids) >= 1
    bad_id = ids[0]
    auth = sel.channel(bad_id).authenticator
    assert not auth.failure_handled            # delayed: nothing sent yet
    # the delay does not hold anybody else up
    good.sendall(encode_frame(b"token:bob") + encode_frame(b"hello"))
    got = []
    for _ in range(100):
        sel.poll(10)
        got += sel.completed_receives
        assert bad_id not in sel.disconnected
        if got:
            break
    assert got[0][1] == b"hello"
    clock.now += 1000
    sel.poll(0)
    assert sel.disconnected[bad_id] == State.AUTHENTICATION_FAILED
    assert "denied" in str(sel.disconnected[bad_id].exception)
    assert auth.failure_handled
    assert read_frame(bad) == b"denied"         # the deferred failure response
    assert read_frame(bad) is None              # then the close
    bad.close()
    good.close()


def test_authentication_failure_without_delay_closes_at_once():
    """Kafka: SaslAuthenticatorFailureNoDelayTest.testInvalidPasswordSaslPlain (at the channel and
    selector)."""
    sel = Selector(TokenChannelBuilder("server"), failed_authentication_delay_ms=0)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    try:
        c = socket.create_connection(lsock.getsockname())
        c.settimeout(10)
        s, _ = lsock.accept()
        sel.register("x", s)
        c.sendall(encode_frame(b"nonsense"))
        for _ in range(100):
            sel.poll(10)
            if sel.disconnected:
                break
        assert sel.disconnected["x"] == State.AUTHENTICATION_FAILED
        assert read_frame(c) == b"denied"
        assert read_frame(c) is None
        c.close()
    finally:
        sel.close()
        lsock.close()


def test_default_authenticator_plaintext_principal():
    a = DefaultAuthenticator("PLAINTEXT")
    assert not a.complete()

    class IO:
        transport = None
        client_address = ("127.0.0.1", 1)
        listener_name = "PLAINTEXT"

    assert a.authenticate(IO(), 0) == OP_NONE
    assert a.complete()
    assert a.principal() == ANONYMOUS
    # no re-authentication for PLAINTEXT/SSL
    assert a.server_session_expiration_ms() is None
    assert a.client_session_reauth_ms() is None
    assert a.get_and_clear_responses_received_during_reauthentication() == []


def test_channel_reauthentication_hooks_are_noops_for_default_authenticator():
    a, b = socket.socketpair()
    try:
        ch = KafkaChannel("x", _plaintext_transport(a), lambda: DefaultAuthenticator(),
                          mode="server")
        ch.mark_connected()
        assert ch.prepare(0) == OP_NONE
        assert ch.ready() and ch.state == ChannelState.READY
        assert ch.maybe_begin_server_reauthentication(b"anything", 0) is False
        assert ch.server_authentication_session_expired(10**15) is False
        assert ch.maybe_begin_client_reauthentication(10**15) is False
        assert ch.get_and_clear_responses_received_during_reauthentication() == []
        ch.mute()
        assert ch.is_muted()
        assert ch.unmute() and not ch.is_muted()
        ch.set_send(b"abc")
        assert ch.write() is True
        assert read_frame(b) == b"abc"
        b.sendall(encode_frame(b"x") + encode_frame(b"y"))
        b.settimeout(10)
        frames = []
        for _ in range(100):
            select.select([a], [], [], 1)
            frames += ch.read(max_frames=5)
            if len(frames) == 2:
                break
        assert frames == [b"x", b"y"]
        ch.close()
    finally:
        a.close()
        b.close()


def test_idle_ready_channel_holds_no_send_queue_or_receive_memory():
    # What an idle authenticated connection keeps: no receive chunk, no send
    # queue (the queue goes once everything is written and comes back with
    # the next send), in the order and with the results as before.
    import tracemalloc
    a, b = socket.socketpair()
    try:
        ch = KafkaChannel("x", _plaintext_transport(a), lambda: DefaultAuthenticator(),
                          mode="server")
        ch.mark_connected()
        assert ch.prepare(0) == OP_NONE
        b.settimeout(10)
        ch.set_send(b"one")
        ch.set_send(b"two")
        assert ch.write() is True
        assert ch.take_accepted() == [7, 7]
        dec = FrameDecoder()
        got = []
        while len(got) < 2:
            dec.feed(b.recv(4096))
            got += dec.frames()
        assert got == [b"one", b"two"]
        b.sendall(encode_frame(b"req"))
        select.select([a], [], [], 5)
        assert ch.read(max_frames=5) == [b"req"]
        # (an empty read first: the compiled read path caches, once per
        # process, the code object of the traceback its caught EAGAIN
        # gets; not the channel's memory)
        assert ch.read(max_frames=5) == []
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            ch.set_send(b"three")
            assert ch.write() is True
            assert ch.read(max_frames=5) == []
            after, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert after - before < 512
        assert not ch.has_send() and not ch.has_pending_writes()
        assert read_frame(b) == b"three"
        ch.close()
    finally:
        a.close()
        b.close()


def test_mute_state_machine_as_kafka():
    from kchannel.network.channel import ChannelMuteEvent as E, ChannelMuteState as M
    a, b = socket.socketpair()
    try:
        ch = KafkaChannel("x", _plaintext_transport(a), lambda: DefaultAuthenticator())
        with pytest.raises(ValueError):
            ch.handle_channel_mute_event(E.REQUEST_RECEIVED)     # not muted
        ch.mute()
        ch.handle_channel_mute_event(E.REQUEST_RECEIVED)
        assert ch.mute_state is M.MUTED_AND_RESPONSE_PENDING
        assert ch.unmute() is False                             # only MUTED unmutes
        ch.handle_channel_mute_event(E.THROTTLE_STARTED)
        assert ch.mute_state is M.MUTED_AND_THROTTLED_AND_RESPONSE_PENDING
        ch.handle_channel_mute_event(E.RESPONSE_SENT)
        assert ch.mute_state is M.MUTED_AND_THROTTLED
        ch.handle_channel_mute_event(E.THROTTLE_ENDED)
        assert ch.mute_state is M.MUTED
        assert ch.unmute() is True and not ch.is_muted()
    finally:
        a.close()
        b.close()


class _BigTokenClient(Authenticator):
    """Client side: sends one large frame, then waits for ``ok``."""

    def __init__(self, payload):
        self.payload = payload
        self._sent = False
        self._done = False

    def authenticate(self, io, now):
        if not self._sent:
            io.write_frame(self.payload)
            self._sent = True
        if not io.flush():
            return OP_WRITE
        frame = io.read_frame()
        if frame is None:
            return OP_READ
        assert frame == b"ok"
        self._done = True
        return OP_NONE

    def complete(self):
        return self._done

    def principal(self):
        return ANONYMOUS


@pytest.mark.parametrize("mode", ["client", "server"])
def test_authentication_frame_the_socket_takes_only_part_of(mode):
    """An authentication frame written with nothing queued goes to the
    transport at once; what the socket does not take waits in the queue as a
    partly written frame, keeps the channel asking for OP_WRITE, and goes out
    whole and in order once the peer reads."""
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    a.setblocking(False)
    payload = bytes(range(256)) * 4096          # 1 MiB: more than the socket takes
    auth = _BigTokenClient(payload)
    ch = KafkaChannel("n", _plaintext_transport(a), lambda: auth, mode=mode)
    try:
        ch.mark_connected()
        assert ch.prepare(0) & OP_WRITE
        assert ch._has_pending_auth_writes() and ch.interest_ops() & OP_WRITE
        got = bytearray()
        b.settimeout(10)
        while len(got) < len(payload) + 4:
            select.select([b], [], [], 10)
            got += b.recv(1 << 20)
            ops = ch.prepare(0)
        assert bytes(got) == encode_frame(payload)
        assert ops == OP_READ and not ch._has_pending_auth_writes()
        b.sendall(encode_frame(b"ok"))
        for _ in range(100):
            select.select([a], [], [], 10)
            if ch.prepare(0) == OP_NONE:
                break
        assert ch.ready() and auth.complete()
    finally:
        a.close()
        b.close()


def test_queued_sends_are_named_entries_through_a_partial_write():
    # A channel's queued sends are QueuedSend entries of the active sendqueue
    # twin (issue 21: named, not positional lists): a frame queued whole, a
    # large payload queued as its size prefix + the payload uncopied, and an
    # authentication frame (not reported), retired through a write that the
    # socket takes only part of.
    from kchannel import _impl
    from kchannel.network.channel_sends import SEPARATE_FROM, QueuedSend
    assert QueuedSend is _impl.load_twin("sendqueue").QueuedSend
    a, b = socket.socketpair()
    try:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        ch = KafkaChannel("x", _plaintext_transport(a), lambda: DefaultAuthenticator(),
                          mode="server")
        ch.mark_connected()
        assert ch.prepare(0) == OP_NONE
        big = bytes(range(256)) * (4 * SEPARATE_FROM // 256)
        assert ch.set_send(b"small") is False
        assert ch.set_send(big) is True
        ch._enqueue(b"\x00\x00\x00\x04auth", report=False)
        small, large, auth = ch._sends
        assert all(type(e) is QueuedSend for e in ch._sends)
        assert (bytes(small.data), small.size, small.report, small.head) == (
            encode_frame(b"small"), 9, True, None)
        assert (large.data.obj, large.size, large.report, large.head) == (
            big, len(big) + 4, True, len(big).to_bytes(4, "big"))
        assert (auth.size, auth.report) == (8, False)
        received = bytearray()
        done = []
        partial = False
        b.setblocking(False)
        for _ in range(10000):
            done += ch.write_sends()
            if not ch._sends:
                break
            # what is left of the large payload: the rest of its memory
            e = ch._sends[0]
            if e is large and e.head is None and len(e.data) < len(big):
                assert e.data.obj is big
                partial = True
            try:
                received += b.recv(65536)
            except BlockingIOError:
                select.select([b], [], [], 1)
        assert not ch._sends
        received += b.recv(65536) if select.select([b], [], [], 1)[0] else b""
        while len(received) < 9 + len(big) + 4 + 8:
            select.select([b], [], [], 1)
            received += b.recv(65536)
        assert partial and done == [9, len(big) + 4]
        assert bytes(received) == (encode_frame(b"small") + encode_frame(big)
                                   + b"\x00\x00\x00\x04auth")
        ch.close()
    finally:
        a.close()
        b.close()


def test_frame_queued_as_parts_writes_its_large_part_uncopied_through_partial_writes():
    # A frame handed over as parts (a Produce request: size prefix and
    # header pieces, the record batch, the tagged fields after it) is queued
    # with the batch as its own buffer: the parts before it joined as the
    # entry's head, those after it as its tail.  Retired byte range by byte
    # range (a write ending inside the head, at its end, inside the batch,
    # inside the tail), each gather write offers exactly the frame's bytes
    # not yet written, and the send is reported once, with the frame's size.
    from kchannel.network.channel_sends import SEPARATE_FROM
    a, b = socket.socketpair()
    try:
        ch = KafkaChannel("x", _plaintext_transport(a), lambda: DefaultAuthenticator(),
                          mode="client")
        ch.mark_connected()
        assert ch.prepare(0) == OP_NONE
        batch = bytes(range(256)) * (SEPARATE_FROM // 256 + 3)
        parts = (b"\x00\x00\x00\x00", b"header-", b"part", batch, b"\x00\x01\x02")
        frame = b"".join(parts)
        assert ch.set_send(parts, True) is False
        (e,) = ch._sends
        # (the batch itself, queued: a view of it is made only of what a
        # partial write leaves)
        assert e.data is batch
        assert (e.head, e.tail, e.size, e.report) == (b"\x00\x00\x00\x00header-part",
                                                     b"\x00\x01\x02", len(frame), True)
        written = 0
        for n in (5, 10, len(batch) - 1, 2, 2):
            bufs, total, count = ch._gather()
            assert b"".join(bytes(x) for x in bufs) == frame[written:]
            assert (total, count) == (len(frame) - written, 1)
            # the batch is never copied while any of it is left to write
            assert any(x is batch or type(x) is memoryview and x.obj is batch
                       for x in bufs) == (written < len(frame) - 3)
            ch._retire(n)
            written += n
            assert ch.take_accepted() == ([len(frame)] if written == len(frame) else [])
        assert not ch._sends
        # a frame without a large part, or over a transport without gather
        # writes, is joined into one frame as before
        assert ch.set_send((b"\x00\x00\x00\x02", b"ab"), True) is False
        assert ch._sends[0].data == b"\x00\x00\x00\x02ab" and ch._sends[0].head is None
        ch._sends.clear()
        ch._write_vectored = None
        ch.set_send(parts, True)
        assert ch._sends[0].data == frame and ch._sends[0].head is ch._sends[0].tail is None
        ch.close()
    finally:
        a.close()
        b.close()
