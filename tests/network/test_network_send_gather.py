"""Sends over the plaintext transport: large ``bytes`` payloads are queued as
size prefix + payload and written with gather writes (no copy), small frames
are joined; over TLS, payloads from SEPARATE_FROM_UNGATHERED up are queued the
same way and written as prefix + first bytes, then the rest.  Whatever the
mix, sizes and partial writes, the peer receives exactly the frames sent, in
order, and each send is reported once with its frame size."""
import pytest

from kchannel.network.channel import SEPARATE_FROM, SEPARATE_FROM_UNGATHERED
from tests.fixtures.selectors import selector_pair


def _payloads():
    sizes = [0, 1, 100, SEPARATE_FROM - 1, SEPARATE_FROM, SEPARATE_FROM + 1, 16384, 65535,
             65536, 70000, SEPARATE_FROM_UNGATHERED - 1, SEPARATE_FROM_UNGATHERED, 300000,
             1048576 + 3, 100, 5]
    out = []
    for i, n in enumerate(sizes):
        out.append(bytes((i + j) % 251 for j in range(min(n, 251))) * (n // 251)
                   + bytes(n % 251))
    # mutable and view payloads are copied into their frame, never shared
    out.append(bytearray(b"m" * 20000))
    out.append(memoryview(b"v" * 30000)[5:])
    return out


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
@pytest.mark.parametrize("sndbuf", [None, 4096])
def test_mixed_sizes_arrive_intact_and_in_order(sndbuf, protocol, request):
    pki = request.getfixturevalue("pki") if protocol == "SSL" else None
    server, client, ls = selector_pair(64, sndbuf, protocol, pki)
    try:
        payloads = _payloads() * 3
        expected = [bytes(p) for p in payloads]
        for p in payloads:
            client.send("c", p)
        _assert_delivered_in_order(client, server, expected)
    finally:
        client.close()
        server.close()
        ls.close()


def _assert_delivered_in_order(client, server, expected):
    """Poll both ends until every frame sent arrived; each must arrive
    intact and in order, and be reported sent once with its frame size."""
    got, sent = [], []
    for _ in range(5000):
        client.poll(1)
        sent.extend(size for cid, size in client.completed_sends)
        server.poll(1)
        got.extend(p for _, p in server.completed_receives)
        if len(got) == len(expected) and len(sent) == len(expected):
            break
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"frame {i} differs"
    assert sent == [len(p) + 4 for p in expected]
    assert not server.disconnected and not client.disconnected


def _frame_parts(payload, i):
    """``payload``'s frame as a tuple of parts (the size prefix, then the
    payload cut in pieces: around a large middle part, at its start or end,
    into two large parts, or small parts only)."""
    p = bytes(payload)
    n = len(p)
    cuts = [(7, n - 3), (0, n - 1), (5, n), (9, n // 2, n - 2), (1, 2, 3)][i % 5]
    pieces = [p[a:b] for a, b in zip((0,) + cuts, cuts + (n,))]
    return (n.to_bytes(4, "big"),) + tuple(pieces)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
@pytest.mark.parametrize("sndbuf", [None, 4096])
def test_frames_as_parts_arrive_intact_and_in_order(sndbuf, protocol, request):
    # Whole frames handed over as parts (as the network client hands a
    # Produce request with its record batch), between ordinary sends: over
    # plaintext the large part is written from its own memory (gather
    # writes, partial ones with a small send buffer), over TLS the parts
    # are joined; either way the peer gets the frames as sent, in order,
    # each reported once with its frame size.
    pki = request.getfixturevalue("pki") if protocol == "SSL" else None
    server, client, ls = selector_pair(64, sndbuf, protocol, pki)
    try:
        payloads = _payloads() * 2
        expected = [bytes(p) for p in payloads]
        for i, p in enumerate(payloads):
            if i % 2 and len(p) >= 10:
                client.send("c", _frame_parts(p, i), True)
            else:
                client.send("c", p)
        _assert_delivered_in_order(client, server, expected)
    finally:
        client.close()
        server.close()
        ls.close()


def test_mutating_a_bytearray_after_send_does_not_change_the_frame():
    server, client, ls = selector_pair(64, 4096)
    try:
        buf = bytearray(b"a" * 50000)
        client.send("c", buf)
        buf[:] = b"b" * 50000
        got = []
        for _ in range(2000):
            client.poll(1)
            server.poll(1)
            got.extend(p for _, p in server.completed_receives)
            if got:
                break
        assert got == [b"a" * 50000]
    finally:
        client.close()
        server.close()
        ls.close()
