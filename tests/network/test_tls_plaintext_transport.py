"""PlaintextTransportLayer over real 127.0.0.1 sockets."""
import errno
import os
import selectors
import socket
import time

import pytest

from kchannel.errors import ChannelConnectionError
from kchannel.network.ops import OP_READ, OP_WRITE
from kchannel.network.transport import PlaintextTransportLayer

DEADLINE_S = 20.0


@pytest.fixture
def listener():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    yield ls
    ls.close()


def pair(listener):
    c = socket.create_connection(listener.getsockname())
    s, _ = listener.accept()
    return PlaintextTransportLayer(c), PlaintextTransportLayer(s)


def wait_readable(t, timeout=1.0):
    sel = selectors.DefaultSelector()
    sel.register(t.socket, selectors.EVENT_READ)
    sel.select(timeout)
    sel.close()


def test_nonblocking_connect_and_finish_connect(listener):
    sock = socket.socket()
    sock.setblocking(False)
    rc = sock.connect_ex(listener.getsockname())
    assert rc in (0, errno.EINPROGRESS)
    t = PlaintextTransportLayer(sock)
    t.interest_ops = OP_WRITE  # what a selector registers for a pending connect
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_WRITE)
    deadline = time.monotonic() + DEADLINE_S
    while not t.finish_connect():
        assert time.monotonic() < deadline
        sel.select(0.5)
    sel.close()
    assert t.interest_ops == OP_READ
    assert t.is_connected()
    assert t.peer_address == listener.getsockname()
    assert t.ready() and t.handshake() == 0
    server, _ = listener.accept()
    server.close()
    t.close()


def test_connection_refused():
    # A port that nobody listens on: bind, note it, close.
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    addr = probe.getsockname()
    probe.close()
    sock = socket.socket()
    sock.setblocking(False)
    sock.connect_ex(addr)
    t = PlaintextTransportLayer(sock)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_WRITE)
    deadline = time.monotonic() + DEADLINE_S
    with pytest.raises(ChannelConnectionError) as err:
        while not t.finish_connect():
            assert time.monotonic() < deadline
            sel.select(0.5)
    sel.close()
    assert str(err.value) == "Connection refused"
    assert err.value.errno == errno.ECONNREFUSED
    assert err.value.retriable
    t.close()


def test_read_write_roundtrip(listener):
    a, b = pair(listener)
    try:
        assert a.read() == b""   # nothing yet: not an error
        payload = os.urandom(5 * 1024 * 1024)
        sent = 0
        got = bytearray()
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(payload):
            assert time.monotonic() < deadline
            if sent < len(payload):
                sent += a.write(memoryview(payload)[sent:])
            assert not a.has_pending_writes() and a.flush()
            if b.read_into(got.extend) == 0:
                wait_readable(b, 0.1)
        assert bytes(got) == payload
        assert not b.has_bytes_buffered()
    finally:
        a.close()
        b.close()


def test_read_with_max_bytes(listener):
    a, b = pair(listener)
    try:
        a.write(b"abcdef")
        wait_readable(b)
        assert b.read(4) == b"abcd"
        assert b.read(100) == b"ef"
    finally:
        a.close()
        b.close()


def test_eof_raises_after_data(listener):
    a, b = pair(listener)
    a.write(b"last")
    a.close()
    got = bytearray()
    deadline = time.monotonic() + DEADLINE_S
    with pytest.raises(ChannelConnectionError, match="EOF"):
        while True:
            assert time.monotonic() < deadline
            if b.read_into(got.extend) == 0:
                wait_readable(b, 0.1)
    assert bytes(got) == b"last"
    # Sticky.
    with pytest.raises(ChannelConnectionError):
        b.read()
    b.close()


def test_write_to_reset_connection_raises_connection_error(listener):
    a, b = pair(listener)
    # Unread data + close = RST to the writer.
    a.write(b"unread")
    wait_readable(b)
    b.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    b.close()
    deadline = time.monotonic() + DEADLINE_S
    with pytest.raises(ChannelConnectionError):
        while True:
            assert time.monotonic() < deadline
            a.write(b"x" * 65536)
            wait_readable(a, 0.05)
    a.close()


def test_write_after_close_raises(listener):
    a, b = pair(listener)
    a.close()
    with pytest.raises(ChannelConnectionError):
        a.write(b"x")
    b.close()


def test_plaintext_has_no_peer_identity(listener):
    a, b = pair(listener)
    try:
        assert a.peer_certificate_der() is None and a.peer_subject_dn() is None
        a.remove_interest_ops(OP_READ)
        assert a.is_mute()
        a.add_interest_ops(OP_READ)
        assert not a.is_mute()
        a.disconnect()
        assert a.interest_ops == 0
    finally:
        a.close()
        b.close()
