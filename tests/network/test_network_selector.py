"""Selector / KafkaChannel over real 127.0.0.1 sockets (PLAINTEXT).

Both ends are kchannel Selectors driven from the test thread, so every step is
deterministic: nothing sleeps, nothing is timed.
"""
import os
import socket
import struct

import pytest

from kchannel.errors import ChannelConnectionError, InvalidReceiveError
from kchannel.framing import encode_frame
from kchannel.network.channel import ChannelState, State
from kchannel.network.channel_builder import PlaintextChannelBuilder
from kchannel.security.channel_builders import create_channel_builder
from kchannel.network.selector import Selector
from tests.fixtures.clocks import Clock


class Pair:
    """A server Selector with a listening socket and a client Selector."""

    def __init__(self, server_kwargs=None, client_kwargs=None):
        self.server = Selector(PlaintextChannelBuilder("server"), **(server_kwargs or {}))
        self.client = Selector(PlaintextChannelBuilder("client"), **(client_kwargs or {}))
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(2048)
        self.address = self.lsock.getsockname()
        self.accepted = []
        self.server.add_listener(self.lsock, self._accept)
        self.server_receives = []
        self.client_receives = []
        self.server_disconnected = {}
        self.client_disconnected = {}
        self.client_connected = []

    def _accept(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except BlockingIOError:
                return
            cid = f"s{len(self.accepted)}"
            self.accepted.append(cid)
            self.server.register(cid, s)

    def poll(self, timeout_ms=0):
        self.client.poll(timeout_ms)
        self.client_receives += self.client.completed_receives
        self.client_disconnected.update(self.client.disconnected)
        self.client_connected += self.client.connected
        self.server.poll(timeout_ms)
        self.server_receives += self.server.completed_receives
        self.server_disconnected.update(self.server.disconnected)

    def poll_until(self, cond, max_polls=2000, timeout_ms=20):
        for _ in range(max_polls):
            if cond():
                return
            self.poll(timeout_ms)
        assert cond(), "condition not reached"

    def close(self):
        self.client.close()
        self.server.close()
        self.lsock.close()


@pytest.fixture
def pair():
    p = Pair()
    yield p
    p.close()


def raw_connect(address):
    s = socket.create_connection(address)
    s.settimeout(10)
    return s


def test_round_trip(pair):
    pair.client.connect("c", pair.address)
    pair.poll_until(lambda: "c" in pair.client_connected and pair.accepted)
    assert pair.client.channel("c").state == ChannelState.READY
    pair.client.send("c", b"ping")
    pair.poll_until(lambda: pair.server_receives)
    sid, payload = pair.server_receives[0]
    assert payload == b"ping"
    pair.server.send(sid, b"pong" * 1000)
    pair.poll_until(lambda: pair.client_receives)
    assert pair.client_receives == [("c", b"pong" * 1000)]


def test_connect_refused_reports_not_connected():
    """Kafka: SelectorTest.testConnectionRefused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()     # nothing listens there now
    sel = Selector(PlaintextChannelBuilder("client"))
    try:
        sel.connect("x", ("127.0.0.1", port))
        disconnected = {}
        for _ in range(100):
            sel.poll(20)
            disconnected.update(sel.disconnected)
            if disconnected:
                break
        assert disconnected["x"] == State.NOT_CONNECTED
        assert isinstance(disconnected["x"].exception, ChannelConnectionError)
        assert sel.channel("x") is None
    finally:
        sel.close()


class ImmediatelyConnectingSelector(Selector):
    """Kafka: SelectorTest.ImmediatelyConnectingSelector.  Connects in
    blocking mode, so ``connect()`` takes the "connected immediately" path
    that a non-blocking connect on loopback practically never takes."""

    def _do_connect(self, sock, sockaddr):
        sock.setblocking(True)
        try:
            return super()._do_connect(sock, sockaddr)
        finally:
            sock.setblocking(False)


def _assert_selector_empty(sel):
    assert len(sel) == 0
    assert not sel._immediately_connected
    assert not sel._fd_ops


@pytest.mark.parametrize("close_after_first_poll", [True, False])
def test_immediately_connected_cleaned(pair, close_after_first_poll):
    """Kafka: SelectorTest.testImmediatelyConnectedCleaned.  The channel is
    not registered for a readiness event; the next poll finishes it (the
    selector's "connected immediately" branch), and close() before or after
    that leaves nothing behind."""
    sel = ImmediatelyConnectingSelector(PlaintextChannelBuilder("client"))
    try:
        sel.connect("0", pair.address)
        assert sel._immediately_connected == {"0"}
        assert "0" not in sel._fd_ops
        if close_after_first_poll:
            sel.poll(0)
            assert sel.connected == ["0"]
            assert not sel._immediately_connected
            assert sel.channel("0").state == ChannelState.READY
        sel.close("0")
        _assert_selector_empty(sel)
    finally:
        sel.close()


def test_immediately_connected_channel_carries_requests(pair):
    """Kafka: none (SelectorTest only checks the clean-up); the channel the
    immediate path finished sends and receives like any other."""
    pair.client.close()
    pair.client = ImmediatelyConnectingSelector(PlaintextChannelBuilder("client"))
    pair.client.connect("c", pair.address)
    assert pair.client._immediately_connected == {"c"}
    pair.poll_until(lambda: "c" in pair.client_connected and pair.accepted)
    pair.client.send("c", b"ping")
    pair.poll_until(lambda: pair.server_receives)
    sid, payload = pair.server_receives[0]
    assert payload == b"ping"
    pair.server.send(sid, b"pong")
    pair.poll_until(lambda: pair.client_receives)
    assert pair.client_receives == [("c", b"pong")]
    assert pair.client_connected == ["c"]


def test_connect_exception_leaves_nothing_behind(pair):
    """Kafka: SelectorTest.testConnectException.  A failure after the
    socket connected (here: building the channel) closes the socket and
    leaves no channel and no immediately-connected entry."""
    opened = []

    class FailingBuilder(PlaintextChannelBuilder):
        def build_channel(self, id, sock, **kwargs):
            opened.append(sock)
            raise OSError("Test exception")

    sel = ImmediatelyConnectingSelector(FailingBuilder("client"))
    try:
        for id in ("0", "1"):
            with pytest.raises(OSError, match="Test exception"):
                sel.connect(id, pair.address)
            assert sel.channel(id) is None
            _assert_selector_empty(sel)
        assert [s.fileno() for s in opened] == [-1, -1]
    finally:
        sel.close()


def test_duplicate_connection_id_rejected(pair):
    """Kafka: SelectorTest.testExistingConnectionId."""
    pair.client.connect("c", pair.address)
    with pytest.raises(Exception, match="already a connection"):
        pair.client.connect("c", pair.address)


def test_large_send_partial_writes_complete_once(pair):
    """Kafka: SelectorTest.testSendLargeRequest."""
    pair.client.connect("c", pair.address)
    pair.poll_until(lambda: pair.client.is_channel_ready("c"))
    big = bytes(range(256)) * (24 * 4096)          # 24 MiB: many partial writes
    pair.client.send("c", big)
    sends = []

    def done():
        sends.extend(pair.client.completed_sends)
        return pair.server_receives

    # (done() already collected the last poll's completed sends: the send
    # may complete in the very poll that delivers the receive)
    pair.poll_until(done, max_polls=5000, timeout_ms=5)
    assert pair.server_receives[0][1] == big
    assert sends == [("c", len(big) + 4)]


def test_many_sends_queue_in_order(pair):
    """Kafka: SelectorTest.testNormalOperation (one connection)."""
    pair.client.connect("c", pair.address)
    pair.poll_until(lambda: pair.client.is_channel_ready("c"))
    for i in range(500):
        pair.client.send("c", struct.pack(">i", i))
    pair.poll_until(lambda: len(pair.server_receives) == 500, max_polls=5000, timeout_ms=0)
    assert [struct.unpack(">i", p)[0] for _, p in pair.server_receives] == list(range(500))


def test_one_receive_per_channel_per_poll_and_no_starvation(pair):
    """A peer that floods must not delay a quiet peer: each channel gets at
    most one completed receive per poll (Kafka's rule)."""
    flood = raw_connect(pair.address)
    quiet = raw_connect(pair.address)
    pair.poll_until(lambda: len(pair.accepted) == 2)
    flood_id, quiet_id = pair.accepted
    flood.sendall(b"".join(encode_frame(b"x" * 10) for _ in range(3000)))
    quiet.sendall(encode_frame(b"quiet"))
    got_quiet_at = None
    polls = 0
    per_poll_counts = []
    while got_quiet_at is None or polls < got_quiet_at + 3:
        pair.server.poll(20)
        polls += 1
        ids = [cid for cid, _ in pair.server.completed_receives]
        per_poll_counts.append(ids)
        if quiet_id in ids and got_quiet_at is None:
            got_quiet_at = polls
        assert polls < 100
    for ids in per_poll_counts:
        assert len(ids) == len(set(ids))      # at most one per channel per poll
    flood_delivered = sum(ids.count(flood_id) for ids in per_poll_counts)
    assert got_quiet_at <= 3
    assert flood_delivered < 3000             # the flood was not drained first
    flood.close()
    quiet.close()


def test_read_ahead_frames_survive_mute_and_are_delivered_without_new_data(pair):
    """Kafka: SslSelectorTest.testBytesBufferedChannelAfterMute (frames read ahead stand for TLS's
    buffered bytes)."""
    raw = raw_connect(pair.address)
    pair.poll_until(lambda: pair.accepted)
    sid = pair.accepted[0]
    raw.sendall(encode_frame(b"one") + encode_frame(b"two") + encode_frame(b"three"))
    pair.poll_until(lambda: pair.server_receives)
    assert pair.server_receives == [(sid, b"one")]
    pair.server.mute(sid)
    assert pair.server.is_muted(sid)
    for _ in range(5):
        pair.server.poll(0)
        assert pair.server.completed_receives == []
    pair.server.unmute(sid)
    got = []
    for _ in range(5):
        pair.server.poll(0)          # no new bytes arrive: buffered path only
        got += pair.server.completed_receives
    assert got == [(sid, b"two"), (sid, b"three")]
    raw.close()


def test_mute_stops_reading_socket(pair):
    """Kafka: SelectorTest.testMute."""
    raw = raw_connect(pair.address)
    pair.poll_until(lambda: pair.accepted)
    sid = pair.accepted[0]
    pair.server.mute(sid)
    raw.sendall(encode_frame(b"hello"))
    for _ in range(5):
        pair.server.poll(10)
        assert pair.server.completed_receives == []
    pair.server.unmute(sid)
    pair.poll_until(lambda: pair.server_receives)
    assert pair.server_receives == [(sid, b"hello")]
    raw.close()


def test_response_written_through_to_a_muted_channel_leaves_it_unread(pair):
    # A server answering a lone request writes the response at once; over
    # plaintext the selector then skips re-deriving the channel's interest
    # (nothing was pending, nothing is): a mute made before the response
    # must still hold, and an unmute after it must read again.
    raw = raw_connect(pair.address)
    pair.poll_until(lambda: pair.accepted)
    sid = pair.accepted[0]
    raw.sendall(encode_frame(b"req1"))
    pair.poll_until(lambda: pair.server_receives)
    pair.server.mute(sid)
    pair.server.send(sid, b"resp1")
    assert raw.recv(64) == encode_frame(b"resp1")
    raw.sendall(encode_frame(b"req2"))
    sends = []
    for _ in range(5):
        pair.server.poll(10)
        assert pair.server.completed_receives == []
        sends += pair.server.completed_sends
    assert sends == [(sid, 9)]      # resp1 with its size prefix, reported once
    pair.server.unmute(sid)
    pair.server.send(sid, b"resp2")
    assert raw.recv(64) == encode_frame(b"resp2")
    pair.poll_until(lambda: len(pair.server_receives) == 2)
    assert pair.server_receives[1] == (sid, b"req2")
    raw.close()


@pytest.mark.parametrize("junk,exc", [
    (b"\xff\xff\xff\xff", "Invalid receive (size = -1)"),
    (struct.pack(">i", 104857601), "Invalid receive (size = 104857601 larger than 104857600)"),
    (b"GET / HTTP/1.1\r\n\r\n", "larger than"),
])
def test_bad_size_closes_only_that_channel(pair, junk, exc):
    pair.client.connect("good", pair.address)
    pair.poll_until(lambda: pair.client.is_channel_ready("good") and pair.accepted)
    good_sid = pair.accepted[0]
    bad = raw_connect(pair.address)
    pair.poll_until(lambda: len(pair.accepted) == 2)
    bad_sid = pair.accepted[1]
    bad.sendall(junk)
    pair.poll_until(lambda: bad_sid in pair.server_disconnected)
    state = pair.server_disconnected[bad_sid]
    assert state == State.FAILED_RECEIVE
    assert isinstance(state.exception, InvalidReceiveError)
    assert exc in str(state.exception)
    assert bad.recv(10) == b""             # closed by the server
    pair.client.send("good", b"still here")
    pair.poll_until(lambda: pair.server_receives)
    assert pair.server_receives == [(good_sid, b"still here")]
    assert good_sid not in pair.server_disconnected
    bad.close()


def test_peer_close_mid_frame_reports_disconnect(pair):
    """Kafka: SelectorTest.testPartialReceiveGracefulClose."""
    raw = raw_connect(pair.address)
    pair.poll_until(lambda: pair.accepted)
    sid = pair.accepted[0]
    raw.sendall(struct.pack(">i", 100) + b"0123456789")
    raw.close()
    pair.poll_until(lambda: sid in pair.server_disconnected)
    assert pair.server_receives == []
    assert pair.server.channel(sid) is None


def test_frames_sent_before_eof_are_delivered(pair):
    """Kafka: SelectorTest.testGracefulClose."""
    raw = raw_connect(pair.address)
    pair.poll_until(lambda: pair.accepted)
    sid = pair.accepted[0]
    raw.sendall(encode_frame(b"a") + encode_frame(b"b"))
    raw.shutdown(socket.SHUT_WR)
    pair.poll_until(lambda: sid in pair.server_disconnected)
    assert [p for _, p in pair.server_receives] == [b"a", b"b"]
    raw.close()


def test_idle_expiry_with_injected_time():
    """Kafka: SelectorTest.testCloseOldestConnection."""
    clock = Clock()
    p = Pair(server_kwargs={"time": clock, "connections_max_idle_ms": 10_000})
    try:
        a = raw_connect(p.address)
        b = raw_connect(p.address)
        p.poll_until(lambda: len(p.accepted) == 2)
        sa, sb = p.accepted
        clock.now += 6_000
        b.sendall(encode_frame(b"keepalive"))          # b active at +6s
        p.poll_until(lambda: p.server_receives)
        clock.now += 5_000                              # a idle 11s, b idle 5s
        p.server.poll(0)
        assert p.server.disconnected == {sa: State.EXPIRED}
        assert p.server.channel(sb) is not None
        assert a.recv(10) == b""
        clock.now += 5_001                              # b idle > 10s now
        p.server.poll(0)
        assert p.server.disconnected == {sb: State.EXPIRED}
        assert len(p.server) == 0
        a.close()
        b.close()
    finally:
        p.close()


def test_lowering_connections_max_idle_ms_applies_at_the_next_poll():
    clock = Clock()
    p = Pair(server_kwargs={"time": clock, "connections_max_idle_ms": 86_400_000})
    try:
        a = raw_connect(p.address)
        p.poll_until(lambda: len(p.accepted) == 1)
        p.server.poll(0)         # the next idle check is now a day out
        clock.now += 2_000
        p.server.connections_max_idle_ms = 1_000
        p.server.poll(0)
        assert p.server.disconnected == {p.accepted[0]: State.EXPIRED}
        a.close()
    finally:
        p.close()


def test_mass_idle_expiry_is_spread_over_polls_that_do_not_wait(monkeypatch):
    """Many connections expiring together: each poll closes them for at
    most IDLE_CLOSE_BUDGET_S (0 here: 8 per poll) and the next poll does
    not wait for its timeout while more are due."""
    import time
    from kchannel.network import selector_policies
    monkeypatch.setattr(selector_policies, "IDLE_CLOSE_BUDGET_S", 0.0)
    clock = Clock()
    p = Pair(server_kwargs={"time": clock, "connections_max_idle_ms": 10_000})
    socks = []
    try:
        for _ in range(40):
            socks.append(raw_connect(p.address))
        p.poll_until(lambda: len(p.accepted) == 40)
        clock.now += 10_001
        closed, polls = 0, 0
        while len(p.server):
            t0 = time.monotonic()
            # (the first poll finds them expired only after its select; a
            # poll that waited would take its 60 s timeout, a bound no
            # loaded machine's pause reaches)
            p.server.poll(60_000 if polls else 0)
            assert time.monotonic() - t0 < 30, "a poll waited with expired connections left"
            n = len(p.server.disconnected)
            assert set(p.server.disconnected.values()) <= {State.EXPIRED}
            assert 0 < n <= 8
            closed += n
            polls += 1
        assert closed == 40 and polls == 5
        assert all(s.recv(10) == b"" for s in socks)
    finally:
        for s in socks:
            s.close()
        p.close()


def test_explicit_close_is_not_reported(pair):
    pair.client.connect("c", pair.address)
    pair.poll_until(lambda: pair.client.is_channel_ready("c"))
    pair.client.close("c")
    pair.client.poll(0)
    assert pair.client.disconnected == {}
    assert pair.client.channel("c") is None
    sid = pair.accepted[0]
    pair.poll_until(lambda: sid in pair.server_disconnected)


def test_fifteen_hundred_connections_round_trip():
    """Kafka: SelectorTest.testOutboundConnectionsCountInConnectionCreationMetric,
    testInboundConnectionsCountInConnectionCreationMetric (at scale)."""
    n = 1500
    p = Pair()
    try:
        for i in range(n):
            p.client.connect(i, p.address)
        p.poll_until(lambda: len(p.client_connected) == n and len(p.accepted) == n,
                     max_polls=5000, timeout_ms=5)
        for i in range(n):
            p.client.send(i, struct.pack(">i", i))

        def echo():
            for sid, payload in p.server.completed_receives:
                p.server.send(sid, payload)
            return len(p.client_receives) == n

        p.poll_until(echo, max_polls=5000, timeout_ms=5)
        assert sorted(i for i, _ in p.client_receives) == list(range(n))
        assert all(struct.unpack(">i", payload)[0] == i for i, payload in p.client_receives)
        snap = p.server.metrics.snapshot()
        assert snap["connection-count"] == n
        assert snap["connection-creation-total"] == n
        assert snap["response-total"] == n       # receives, Kafka's naming
        assert snap["request-total"] == n        # sends
    finally:
        p.close()


def test_metrics_names_and_counts(pair):
    """Kafka: SelectorTest.testPartialSendAndReceiveReflectedInMetrics (byte, request and response
    totals)."""
    pair.client.connect("c", pair.address)
    pair.poll_until(lambda: pair.client.is_channel_ready("c") and pair.accepted)
    pair.client.send("c", b"12345")
    pair.poll_until(lambda: pair.server_receives)
    snap = pair.server.metrics.snapshot()
    for name in [
        "connection-count", "connection-creation-rate", "connection-creation-total",
        "connection-close-rate", "connection-close-total", "network-io-rate",
        "network-io-total", "incoming-byte-rate", "incoming-byte-total",
        "outgoing-byte-rate", "outgoing-byte-total", "request-rate", "request-total",
        "response-rate", "response-total", "request-size-avg", "request-size-max",
        "select-rate", "select-total", "io-wait-time-ns-avg", "io-wait-ratio",
        "io-time-ns-avg", "io-ratio", "successful-authentication-rate",
        "successful-authentication-total", "failed-authentication-rate",
        "failed-authentication-total", "successful-reauthentication-rate",
        "successful-reauthentication-total", "failed-reauthentication-rate",
        "failed-reauthentication-total", "reauthentication-latency-max",
        "reauthentication-latency-avg", "expired-connections-killed-count",
        "successful-authentication-no-reauth-total",
    ]:
        assert name in snap, name
    assert snap["connection-count"] == 1
    assert snap["incoming-byte-total"] == 9
    assert snap["response-total"] == 1
    assert snap["successful-authentication-total"] == 1
    assert snap["successful-authentication-no-reauth-total"] == 1
    assert snap["select-total"] >= 1
    client = pair.client.metrics.snapshot()
    assert client["outgoing-byte-total"] == 9
    assert client["request-size-max"] == 9
    assert client["request-total"] == 1
    pair.client.close("c")
    pair.poll_until(lambda: pair.server_disconnected)
    assert pair.server.metrics.snapshot()["connection-close-total"] == 1
    assert pair.server.metrics.snapshot()["connection-count"] == 0


def test_metric_group_names():
    sel = Selector(PlaintextChannelBuilder("server"), metric_group_prefix="socket-server")
    try:
        groups = {mn.group for mn in sel.metrics.metrics()}
        assert groups == {"socket-server-metrics"}
    finally:
        sel.close()


# A broken wakeup would block poll(-1) forever: the per-test time limit
# (pytest-timeout) turns that hang into a failure with a traceback.
@pytest.mark.timeout(60)
def test_wakeup_interrupts_blocking_poll():
    import threading
    sel = Selector(PlaintextChannelBuilder("server"))
    try:
        t = threading.Timer(0.05, sel.wakeup)
        t.start()
        sel.poll(-1)            # would block forever without the wakeup
        t.join()
    finally:
        sel.close()


def test_broken_wakeup_fails_by_timeout_instead_of_hanging(tmp_path):
    """The test above with a wakeup that does nothing, in a child pytest with
    a 2 s limit: it must fail with pytest-timeout's report, not hang."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    (tmp_path / "test_hang.py").write_text(
        "import threading\n"
        "from kchannel.network.channel_builder import PlaintextChannelBuilder\n"
        "from kchannel.network.selector import Selector\n"
        "def test_hang():\n"
        "    sel = Selector(PlaintextChannelBuilder('server'))\n"
        "    sel.wakeup = lambda: None\n"
        "    threading.Timer(0.05, sel.wakeup).start()\n"
        "    sel.poll(-1)\n")
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--timeout=2", "test_hang.py"], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Timeout" in r.stdout and "1 failed" in r.stdout, r.stdout


def test_create_channel_builder_rejects_unknown_protocol():
    from kchannel.errors import ConfigError
    with pytest.raises(ConfigError, match="security.protocol"):
        create_channel_builder("TLS", "client", {})


def test_last_read_ahead_frame_is_delivered_after_unmute(pair):
    """Kafka: SslSelectorTest.testBytesBufferedChannelAfterMute (the last read-ahead frame)."""
    raw = raw_connect(pair.address)
    pair.poll_until(lambda: pair.accepted)
    sid = pair.accepted[0]
    raw.sendall(encode_frame(b"one") + encode_frame(b"two"))
    pair.poll_until(lambda: pair.server_receives)
    assert pair.server_receives == [(sid, b"one")]
    pair.server.mute(sid)
    pair.server.poll(0)
    pair.server.unmute(sid)
    got = []
    for _ in range(5):
        pair.server.poll(0)          # no new bytes: only read-ahead is left
        got += pair.server.completed_receives
    assert got == [(sid, b"two")]
    raw.close()


def test_poll_blocks_when_only_muted_channels_hold_data(pair):
    """No busy loop: a muted channel with read-ahead frames, an idle ready
    channel and nothing to write make poll wait in select for its timeout
    (measured by the selector's own io-wait metric)."""
    raw = raw_connect(pair.address)
    pair.client.connect("idle", pair.address)
    pair.poll_until(lambda: len(pair.accepted) == 2 and pair.client.is_channel_ready("idle"))
    sid = pair.accepted[0]
    raw.sendall(encode_frame(b"one") + encode_frame(b"two") + encode_frame(b"three"))
    pair.poll_until(lambda: pair.server_receives)
    pair.server.mute(sid)
    pair.server.poll(0)
    before = pair.server.metrics.snapshot()
    for _ in range(3):
        pair.server.poll(40)
        assert pair.server.completed_receives == []
    after = pair.server.metrics.snapshot()
    assert after["select-total"] - before["select-total"] == 3
    # each of the 3 selects waited (epoll rounds its timeout up, never down)
    assert after["io-wait-time-ns-total"] - before["io-wait-time-ns-total"] >= 3 * 35e6
    raw.close()


def test_register_takes_the_accepted_address_or_looks_it_up():
    """Server._admit hands register() the address accept() returned (no
    getpeername() per connection); without one the socket is asked."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    sel = Selector(PlaintextChannelBuilder("server"))
    clients = []
    try:
        for cid, given in (("given", True), ("looked-up", False)):
            c = socket.create_connection(ls.getsockname())
            clients.append(c)
            s, addr = ls.accept()
            if given:
                sel.register(cid, s, remote_address=addr)
            else:
                sel.register(cid, s)
            assert sel.channel(cid).remote_address == addr == c.getsockname()
    finally:
        sel.close()
        for c in clients:
            c.close()
        ls.close()


def test_connect_keeps_resolved_addresses_not_failures(monkeypatch):
    """A host name is resolved once per RESOLVE_CACHE_TTL_S (as the JVM's
    InetAddress cache does for Kafka's clients), not per connection; a
    failed lookup is not kept."""
    from kchannel.network import selector as selector_module
    monkeypatch.setattr(selector_module, "_resolved", {})
    calls = []
    real = socket.getaddrinfo

    def counting(host, *args, **kw):
        calls.append(host)
        if host == "no-such-host.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", counting)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    port = ls.getsockname()[1]
    sel = Selector(PlaintextChannelBuilder("client"))
    try:
        for i in range(3):
            sel.connect(i, ("localhost", port))
        assert calls == ["localhost"]
        for i in range(2):
            with pytest.raises(ChannelConnectionError, match="Can't resolve address"):
                sel.connect(f"bad{i}", ("no-such-host.invalid", port))
        assert calls == ["localhost"] + ["no-such-host.invalid"] * 2
        monkeypatch.setattr(selector_module, "RESOLVE_CACHE_TTL_S", 0.0)
        selector_module._resolved.clear()
        sel.connect(3, ("localhost", port))
        sel.connect(4, ("localhost", port))
        assert calls.count("localhost") == 3     # expired at once: looked up each time
    finally:
        sel.close()
        ls.close()
