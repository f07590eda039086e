"""A frame queued as parts (``set_send(parts, True)``) over a transport that
writes buffer lists: the parts before its large ``bytes`` part become the
entry's ``head`` and those after it its ``tail``, each exactly the
concatenation of those parts (the compiled twin joins them in C, falling
back to ``b"".join`` for parts that are not ``bytes``); the whole frame is
written unchanged.  Every shape the producer and other callers hand over:
no part before the large one, one, several, empty ones, bytearray and
memoryview parts, one part after it or several."""
import socket

import pytest

from kchannel.network.authenticator import DefaultAuthenticator
from kchannel.network.channel import KafkaChannel
from kchannel.network.channel_builder import _plaintext_transport
from kchannel.network.channel_sends import SEPARATE_FROM
from kchannel.network.ops import OP_NONE

_BIG = bytes(range(256)) * (SEPARATE_FROM // 256 + 2)

_SHAPES = [
    ((), ()),
    ((b"\x00\x00\x40\x10",), ()),
    ((b"\x00\x00\x40\x10",), (b"\x00",)),
    ((b"\x00\x00\x40\x10", b"hdr"), (b"\x00\x00\x00",)),
    ((b"\x00\x00\x40\x10", b"", b"hdr", b"x" * 300), (b"\x00", b"", b"tail")),
    ((b"", b""), (b"",)),
    ((b"size", bytearray(b"array"), b"more"), (memoryview(b"view"), b"end")),
    ((memoryview(b"only-a-view"),), (bytearray(b"ba"),)),
    ((b"a", b"b", b"c", b"d", b"e", b"f"), (b"g", b"h")),
]


@pytest.mark.parametrize("before,after", _SHAPES)
def test_parts_around_the_large_part_join_exactly(before, after):
    a, b = socket.socketpair()
    try:
        ch = KafkaChannel("x", _plaintext_transport(a), lambda: DefaultAuthenticator(),
                          mode="client")
        ch.mark_connected()
        assert ch.prepare(0) == OP_NONE
        parts = before + (_BIG,) + after
        frame = b"".join(parts)
        assert ch.set_send(parts, True) is False
        (e,) = ch._sends
        head = b"".join(before)
        tail = b"".join(after)
        assert e.data is _BIG
        assert e.head == (head or None) and (e.head is None or type(e.head) is bytes)
        assert e.tail == (tail or None) and (e.tail is None or type(e.tail) is bytes)
        assert (e.size, e.report) == (len(frame), True)
        bufs, total, count = ch._gather()
        assert b"".join(bytes(x) for x in bufs) == frame
        assert (total, count) == (len(frame), 1)
        # written unchanged
        assert ch.write_sends() == [len(frame)]
        got = b""
        while len(got) < len(frame):
            got += b.recv(1 << 20)
        assert got == frame
        ch.close()
    finally:
        a.close()
        b.close()
