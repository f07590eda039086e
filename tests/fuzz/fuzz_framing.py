#!/usr/bin/env python3
"""Fuzz target: the frame decoder (``FrameDecoder``), both twins at once.

The input drives one sequence of operations (feed a chunk, receive a chunk
through ``writable()`` + ``commit()`` as the transports do, ``next_frame``,
``frames``, change ``max_size``, ``has_partial``, ``buffered``) on the pure
twin and, when built, the compiled one.  Crashes: an exception other than
``InvalidReceiveError``; the twins disagreeing on any result, error message
or ``.frames`` of an error; a returned frame that is not ``bytes`` (below
``COPY_BELOW``) or a read-only memoryview (from it on) holding, with its
size prefix, the next bytes of what was fed
(nothing lost, reordered or made up); a frame returned earlier whose bytes
changed since (frames are views of the receive memory, which must never be
written under them); ``buffered`` not equal to what was fed minus what was
returned.
"""
import importlib
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402,F401  (puts the repository on sys.path)

import atheris  # noqa: E402

with atheris.instrument_imports(include=["kchannel"]):
    from kchannel import _framing_py
    from kchannel.errors import InvalidReceiveError

TWINS = [_framing_py]
try:
    TWINS.append(importlib.import_module("kchannel._cframing"))
except ImportError:
    if os.environ.get("KCHANNEL_REQUIRE_EXTENSIONS") == "1":
        raise

FEED, NEXT_FRAME, FRAMES, SET_MAX_SIZE, HAS_PARTIAL, RECEIVE = range(6)
COPY_BELOW = _framing_py.COPY_BELOW
assert all(t.COPY_BELOW == COPY_BELOW for t in TWINS)


def _outcome(fn):
    try:
        return ("ok", fn())
    except InvalidReceiveError as exc:
        return ("error", str(exc), getattr(exc, "frames", None))


def _receive(d, chunk):
    """What a transport does: fill the decoder's writable region(s)."""
    pos = 0
    while pos < len(chunk):
        region = d.writable()
        n = min(len(region), len(chunk) - pos)
        region[:n] = chunk[pos:pos + n]
        d.commit(n)
        pos += n


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    # Mostly small limits (so that size prefixes are often valid), sometimes
    # past the twins' 32 KiB own-buffer path for large frames.
    max_size = fdp.ConsumeIntInRange(0, 64) if fdp.ConsumeBool() \
        else fdp.ConsumeIntInRange(0, 70000)
    decoders = [twin.FrameDecoder(max_size) for twin in TWINS]
    stream = bytearray()
    consumed = 0
    kept = []       # (frame, its bytes when handed out)
    for _ in range(fdp.ConsumeIntInRange(1, 24)):
        op = fdp.ConsumeIntInRange(0, 5)
        if op == FEED or op == RECEIVE:
            chunk = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256))
            stream += chunk
            put = (lambda d: d.feed(chunk)) if op == FEED else (lambda d: _receive(d, chunk))
            outcomes = [_outcome(lambda d=d: put(d)) for d in decoders]
        elif op == NEXT_FRAME:
            outcomes = [_outcome(d.next_frame) for d in decoders]
        elif op == FRAMES:
            outcomes = [_outcome(d.frames) for d in decoders]
        elif op == SET_MAX_SIZE:
            value = fdp.ConsumeIntInRange(0, 70000)

            def set_max(d, value=value):
                d.max_size = value
                return d.max_size
            outcomes = [_outcome(lambda d=d: set_max(d)) for d in decoders]
        else:
            outcomes = [_outcome(d.has_partial) for d in decoders]
        first = outcomes[0]
        for other in outcomes[1:]:
            assert other == first, (op, first, other)
        if first[0] == "error":
            got = first[2] or []     # .frames is set by frames() only
        elif op == NEXT_FRAME:
            got = [] if first[1] is None else [first[1]]
        elif op == FRAMES:
            got = first[1]
        else:
            got = []
        for frame in got:
            if len(frame) < COPY_BELOW:
                assert type(frame) is bytes, type(frame)
            else:
                assert isinstance(frame, memoryview) and frame.readonly, type(frame)
            expected = struct.pack(">i", len(frame)) + frame
            assert stream[consumed:consumed + len(expected)] == expected, \
                "a frame that is not the next bytes fed"
            consumed += len(expected)
            kept.append((frame, bytes(frame)))
        for frame, was in kept:
            assert frame == was, "a frame handed out earlier changed"
        for d in decoders:
            assert d.buffered == len(stream) - consumed, (d.buffered, len(stream), consumed)
        if first[0] == "error":
            return      # the connection is closed: nothing more is read


if __name__ == "__main__":
    _harness.run(test_one_input)
