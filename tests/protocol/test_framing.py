"""Kafka size-prefixed framing (NetworkReceive / NetworkSend semantics), run
against both implementation twins through the ``impl`` fixture, plus a
differential test that feeds both twins the same operations."""
import ctypes
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import InvalidReceiveError

HYPO = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def drain_next(decoder):
    out = []
    while True:
        f = decoder.next_frame()
        if f is None:
            return out
        out.append(f)


# ---------------------------------------------------------------- encoding

def test_encode_frame_is_signed_big_endian_size_then_payload(impl):
    fr = impl.framing
    assert fr.encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert fr.encode_frame(b"") == b"\x00\x00\x00\x00"
    payload = bytes(range(256)) * 300
    assert fr.encode_frame(payload) == struct.pack(">i", 76800) + payload


def test_encode_frame_accepts_any_bytes_like(impl):
    fr = impl.framing
    for payload in (bytearray(b"xyz"), memoryview(b"xyz"), memoryview(b"..xyz")[2:]):
        out = fr.encode_frame(payload)
        assert type(out) is bytes
        assert out == b"\x00\x00\x00\x03xyz"


def test_encode_frames_concatenates(impl):
    fr = impl.framing
    payloads = [b"a", b"", bytearray(b"bc"), b"x" * 70000]
    expected = b"".join(frame(bytes(p)) for p in payloads)
    assert fr.encode_frames(payloads) == expected
    assert fr.encode_frames(tuple(payloads)) == expected
    assert fr.encode_frames(p for p in payloads) == expected
    assert fr.encode_frames([]) == b""


def test_default_max_size_is_kafka_socket_request_max_bytes(impl):
    assert impl.framing.DEFAULT_MAX_SIZE == 104857600
    assert impl.framing.FrameDecoder().max_size == 104857600


# ---------------------------------------------------------------- decoding

PAYLOADS = [b"first", b"", b"\x00\x00\x00\x05", bytes(range(256)) * 5, b"last"]


def test_round_trip_whole_stream(impl):
    fr = impl.framing
    stream = fr.encode_frames(PAYLOADS)
    d = fr.FrameDecoder()
    d.feed(stream)
    assert d.frames() == PAYLOADS
    assert d.frames() == []
    d.feed(stream)
    assert drain_next(d) == PAYLOADS
    assert d.next_frame() is None
    assert d.buffered == 0
    assert not d.has_partial()


def test_frames_are_readonly_views_independent_of_input_buffers(impl):
    """Frames below COPY_BELOW come out as bytes (copies), larger ones as
    read-only views; neither changes when the input buffer does."""
    fr = impl.framing
    assert fr.COPY_BELOW == 2048
    big = b"B" * fr.COPY_BELOW
    data = bytearray(fr.encode_frames([b"hello", b"world", big, b"x" * (fr.COPY_BELOW - 1)]))
    d = fr.FrameDecoder()
    d.feed(data)
    data[4:9] = b"XXXXX"   # the decoder must have copied what it was fed
    data[22:30] = b"XXXXXXXX"
    first = d.next_frame()
    rest = d.frames()
    assert type(first) is bytes and first == b"hello"
    assert rest == [b"world", big, b"x" * (fr.COPY_BELOW - 1)]
    assert [type(f) for f in rest] == [bytes, memoryview, bytes]
    view = rest[1]
    assert view.readonly
    with pytest.raises(TypeError):
        view[0] = 0
    if impl.kind == "compiled":
        # nor through the object behind it (the pure twin's chunk is a
        # bytearray: writing through ``.obj`` is the consumer's doing)
        with pytest.raises((BufferError, TypeError)):
            memoryview(view.obj)[0] = 0


@pytest.mark.parametrize("method", ["next_frame", "frames"])
def test_every_split_point(impl, method):
    fr = impl.framing
    stream = fr.encode_frames(PAYLOADS[:3] + [b"z" * 40])
    for i in range(len(stream) + 1):
        for j in range(i, len(stream) + 1, 7):
            d = fr.FrameDecoder()
            got = []
            for chunk in (stream[:i], stream[i:j], stream[j:]):
                d.feed(chunk)
                got.extend(drain_next(d) if method == "next_frame" else d.frames())
            assert got == PAYLOADS[:3] + [b"z" * 40], (i, j)
            assert d.buffered == 0


def test_byte_at_a_time(impl):
    fr = impl.framing
    stream = fr.encode_frames(PAYLOADS)
    d = fr.FrameDecoder()
    got = []
    for k in range(len(stream)):
        d.feed(stream[k:k + 1])
        got.extend(d.frames())
    assert got == PAYLOADS


def test_feed_accepts_bytes_like(impl):
    fr = impl.framing
    stream = fr.encode_frame(b"payload")
    d = fr.FrameDecoder()
    d.feed(bytearray(stream[:3]))
    d.feed(memoryview(stream)[3:6])
    d.feed(b"")
    d.feed(stream[6:])
    assert d.frames() == [b"payload"]


def test_large_frames_in_socket_sized_chunks(impl):
    fr = impl.framing
    big = bytes(range(251)) * 4200          # ~1 MiB, not a multiple of chunk
    stream = fr.encode_frames([big, b"tail", big])
    d = fr.FrameDecoder()
    got = []
    for k in range(0, len(stream), 65536):
        d.feed(stream[k:k + 65536])
        got.extend(d.frames())
    assert got == [big, b"tail", big]
    assert d.buffered == 0


def test_many_small_frames_interleaved_with_partial_reads(impl):
    fr = impl.framing
    payloads = [bytes([k % 256]) * (k % 37) for k in range(5000)]
    stream = fr.encode_frames(payloads)
    d = fr.FrameDecoder()
    got = []
    step = 1
    k = 0
    while k < len(stream):
        d.feed(stream[k:k + step])
        k += step
        step = step * 3 % 1021 + 1
        got.extend(d.frames())
    assert got == payloads


# ---------------------------------------------------------------- invalid sizes

def test_negative_size_is_rejected_as_soon_as_the_prefix_is_in(impl):
    fr = impl.framing
    d = fr.FrameDecoder()
    d.feed(b"\xff\xff")
    assert d.next_frame() is None          # prefix not complete yet
    d.feed(b"\xff\xff")
    with pytest.raises(InvalidReceiveError) as ei:
        d.next_frame()
    assert str(ei.value) == "Invalid receive (size = -1)"
    with pytest.raises(InvalidReceiveError, match=r"^Invalid receive \(size = -1\)$"):
        d.frames()


def test_min_int_size(impl):
    d = impl.framing.FrameDecoder()
    d.feed(b"\x80\x00\x00\x00rest")
    with pytest.raises(InvalidReceiveError, match=r"^Invalid receive \(size = -2147483648\)$"):
        d.frames()


@pytest.mark.parametrize("method", ["next_frame", "frames"])
def test_oversized_prefix_raises_before_allocating(impl, method):
    fr = impl.framing
    d = fr.FrameDecoder()
    d.feed(b"\x7f\xff\xff\xff")
    tracemalloc.start()
    try:
        with pytest.raises(InvalidReceiveError) as ei:
            getattr(d, method)()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(ei.value) == "Invalid receive (size = 2147483647 larger than 104857600)"
    assert peak < 1 << 20
    # The error is sticky: the bad prefix stays at the head.
    with pytest.raises(InvalidReceiveError):
        d.next_frame()


def test_max_size_boundary(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=10)
    d.feed(fr.encode_frame(b"x" * 10))
    assert d.frames() == [b"x" * 10]
    d.feed(struct.pack(">i", 11))
    with pytest.raises(InvalidReceiveError,
                       match=r"^Invalid receive \(size = 11 larger than 10\)$"):
        d.next_frame()


def test_max_size_zero_allows_only_empty_frames(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=0)
    d.feed(fr.encode_frames([b"", b""]))
    assert d.frames() == [b"", b""]
    d.feed(fr.encode_frame(b"a"))
    with pytest.raises(InvalidReceiveError, match=r"larger than 0\)$"):
        d.frames()


def test_frames_keeps_good_frames_before_a_bad_prefix(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=100)
    d.feed(fr.encode_frames([b"a", b"bb"]) + struct.pack(">i", 101) + b"junk")
    with pytest.raises(InvalidReceiveError) as ei:
        d.frames()
    assert ei.value.frames == [b"a", b"bb"]
    assert d.buffered == 8
    with pytest.raises(InvalidReceiveError):
        d.frames()


def test_next_frame_delivers_good_frames_then_raises(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=100)
    d.feed(fr.encode_frame(b"ok") + b"\xff\xff\xff\xfe")
    assert d.next_frame() == b"ok"
    with pytest.raises(InvalidReceiveError, match=r"^Invalid receive \(size = -2\)$"):
        d.next_frame()


def test_max_size_setter(impl):
    d = impl.framing.FrameDecoder(max_size=5)
    assert d.max_size == 5
    d.max_size = 524288
    assert d.max_size == 524288
    with pytest.raises(ValueError):
        d.max_size = -1
    assert d.max_size == 524288
    with pytest.raises(ValueError):
        impl.framing.FrameDecoder(max_size=-5)


def test_sasl_style_max_size_switch(impl):
    """Pre-authentication limit 524288, then the listener's limit again."""
    fr = impl.framing
    d = fr.FrameDecoder()
    d.max_size = 524288
    d.feed(fr.encode_frame(b"auth"))
    assert d.next_frame() == b"auth"
    big = b"p" * 600000
    stream = fr.encode_frame(big)
    d.feed(stream[:100])       # the next frame's prefix is already buffered...
    d.max_size = 104857600     # ...and is checked against the limit in force now
    d.feed(stream[100:])
    assert d.frames() == [big]
    d.max_size = 524288
    d.feed(stream)
    with pytest.raises(InvalidReceiveError, match=r"size = 600000 larger than 524288"):
        d.frames()


def test_lowering_max_size_keeps_an_already_accepted_frame(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=1000)
    stream = fr.encode_frames([b"q" * 500, b"r" * 500])
    d.feed(stream[:10])
    assert d.next_frame() is None       # prefix of the first frame accepted
    d.max_size = 100
    d.feed(stream[10:])
    assert d.next_frame() == b"q" * 500
    with pytest.raises(InvalidReceiveError, match=r"size = 500 larger than 100"):
        d.next_frame()
    d.max_size = 500
    assert d.frames() == [b"r" * 500]


def test_raising_max_size_accepts_a_previously_rejected_prefix(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=3)
    d.feed(fr.encode_frame(b"four"))
    with pytest.raises(InvalidReceiveError):
        d.next_frame()
    d.max_size = 4
    assert d.next_frame() == b"four"


# ---------------------------------------------------------------- accounting

def test_buffered_and_has_partial(impl):
    fr = impl.framing
    d = fr.FrameDecoder()
    assert d.buffered == 0 and not d.has_partial()
    d.feed(b"\x00\x00")
    assert d.buffered == 2 and d.has_partial()
    d.feed(b"\x00\x03ab")
    assert d.buffered == 6 and d.has_partial()
    assert d.next_frame() is None
    assert d.buffered == 6 and d.has_partial()
    d.feed(b"c")
    # A complete frame waiting to be drained is not a partial frame.
    assert d.buffered == 7 and not d.has_partial()
    d.feed(b"\x00\x00\x00\x00")
    assert d.buffered == 11 and not d.has_partial()
    d.feed(b"\x00")
    assert d.buffered == 12 and d.has_partial()
    assert d.next_frame() == b"abc"
    assert d.buffered == 5 and d.has_partial()
    assert d.frames() == [b""]
    assert d.buffered == 1 and d.has_partial()
    d.feed(b"\x00\x00\x00")
    assert d.buffered == 4 and not d.has_partial()
    assert d.frames() == [b""]
    assert d.buffered == 0 and not d.has_partial()


def test_has_partial_with_a_bad_prefix_does_not_raise(impl):
    d = impl.framing.FrameDecoder(max_size=10)
    d.feed(b"\xff\xff\xff\xff")
    assert d.has_partial()
    d2 = impl.framing.FrameDecoder(max_size=10)
    d2.feed(struct.pack(">i", 50))
    assert d2.has_partial()


def test_buffer_reuse_after_draining(impl):
    fr = impl.framing
    d = fr.FrameDecoder()
    for k in range(200):
        payload = bytes([k]) * (k * 997 % 70000)
        stream = fr.encode_frame(payload)
        d.feed(stream[:5])
        first = d.frames()
        assert first == ([payload] if len(stream) <= 5 else [])
        d.feed(stream[5:])
        assert first + d.frames() == [payload]
        assert d.buffered == 0


def test_repr_shows_no_payload(impl):
    d = impl.framing.FrameDecoder(max_size=77)
    d.feed(b"\x00\x00\x00\x05secret")
    text = repr(d)
    assert "77" in text and "secret" not in text


# ---------------------------------------------------------------- properties

def model(stream, max_size):
    """Reference decoder: (frames before the first error, error message or
    None, bytes left or None after an error)."""
    frames = []
    pos = 0
    while len(stream) - pos >= 4:
        size = struct.unpack_from(">i", stream, pos)[0]
        if size < 0:
            return frames, f"Invalid receive (size = {size})", None
        if size > max_size:
            return frames, f"Invalid receive (size = {size} larger than {max_size})", None
        if len(stream) - pos - 4 < size:
            break
        frames.append(stream[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames, None, len(stream) - pos


def chop(stream, cuts):
    points = sorted({c % (len(stream) + 1) for c in cuts}) if stream else []
    out = []
    prev = 0
    for p in points:
        out.append(stream[prev:p])
        prev = p
    out.append(stream[prev:])
    return out


def run_decoder(fr, chunks, max_size, method):
    d = fr.FrameDecoder(max_size=max_size)
    got = []
    for chunk in chunks:
        d.feed(chunk)
        try:
            if method == "frames":
                got.extend(d.frames())
            else:
                while True:
                    f = d.next_frame()
                    if f is None:
                        break
                    got.append(f)
        except InvalidReceiveError as exc:
            got.extend(getattr(exc, "frames", []))
            # How much was buffered depends on where the stream was cut: the
            # error comes as soon as the bad prefix is in.
            return got, str(exc), None
        except Exception as exc:  # anything else is a bug
            pytest.fail(f"{type(exc).__name__} escaped the decoder: {exc}")
    return got, None, d.buffered


# Mostly-plausible streams: real frames with junk and odd prefixes mixed in.
def _piece():
    return st.one_of(
        st.binary(max_size=40).map(frame),
        st.integers(-2 ** 31, 2 ** 31 - 1).map(lambda n: struct.pack(">i", n)),
        st.binary(max_size=12),
    )


streams = st.one_of(st.binary(max_size=300), st.lists(_piece(), max_size=12).map(b"".join))


@HYPO
@given(stream=streams, cuts=st.lists(st.integers(0, 400), max_size=10),
       max_size=st.one_of(st.just(104857600), st.integers(0, 64)),
       method=st.sampled_from(["frames", "next_frame"]))
def test_any_stream_any_chopping_gives_the_frames_or_invalid_receive(
        impl, stream, cuts, max_size, method):
    fr = impl.framing
    assert run_decoder(fr, chop(stream, cuts), max_size, method) == model(stream, max_size)


@HYPO
@given(payloads=st.lists(st.binary(max_size=600), max_size=20),
       cuts=st.lists(st.integers(0, 20000), max_size=15))
def test_valid_frames_any_chopping_round_trip(impl, payloads, cuts):
    fr = impl.framing
    stream = fr.encode_frames(payloads)
    assert stream == b"".join(frame(p) for p in payloads)
    got, err, left = run_decoder(fr, chop(stream, cuts), 104857600, "frames")
    assert (got, err, left) == (payloads, None, 0)


_ops = st.lists(st.one_of(
    st.tuples(st.just("feed"), streams),
    st.tuples(st.just("next"), st.none()),
    st.tuples(st.just("frames"), st.none()),
    st.tuples(st.just("max"), st.integers(0, 80)),
), max_size=25)


def transcript(fr, ops):
    d = fr.FrameDecoder(max_size=64)
    out = []
    for op, arg in ops:
        try:
            if op == "feed":
                d.feed(arg)
                r = None
            elif op == "next":
                r = d.next_frame()
            elif op == "frames":
                r = d.frames()
            else:
                d.max_size = arg
                r = d.max_size
        except InvalidReceiveError as exc:
            r = ("InvalidReceiveError", str(exc), getattr(exc, "frames", None))
        out.append((op, r, d.buffered, d.has_partial(), d.max_size))
    return out


@HYPO
@given(ops=_ops)
def test_differential_pure_vs_compiled(impl_pair, ops):
    pure, compiled = impl_pair
    compiled_framing = compiled.framing   # skips when not built
    assert transcript(pure.framing, ops) == transcript(compiled_framing, ops)


# Large frames: the compiled twin receives frames from 32 KiB up straight into
# the result object, a separate code path the small-stream properties above
# never reach.
_big_frames = st.lists(
    st.tuples(st.integers(0, 150000), st.integers(0, 255)).map(
        lambda t: bytes([t[1]]) * t[0]),
    min_size=1, max_size=5)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=_big_frames, cuts=st.lists(st.integers(0, 800000), max_size=12),
       junk=st.sampled_from([b"", b"\xff\xff\xff\xff", struct.pack(">i", 200000)]),
       max_size=st.sampled_from([104857600, 140000]),
       method=st.sampled_from(["frames", "next_frame"]))
def test_large_frames_any_chopping(impl, payloads, cuts, junk, max_size, method):
    fr = impl.framing
    stream = fr.encode_frames(payloads) + junk
    assert run_decoder(fr, chop(stream, cuts), max_size, method) == model(stream, max_size)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=_big_frames, cuts=st.lists(st.integers(0, 800000), max_size=12),
       ops=st.lists(st.sampled_from(["next", "frames", "max_low", "max_high", "none"]),
                    min_size=13, max_size=13))
def test_large_frames_differential(impl_pair, payloads, cuts, ops):
    pure, compiled = impl_pair
    compiled_framing = compiled.framing
    stream = pure.framing.encode_frames(payloads)
    script = []
    for chunk, op in zip(chop(stream, cuts), ops):
        script.append(("feed", chunk))
        if op == "max_low":
            script.append(("max", 40000))
        elif op == "max_high":
            script.append(("max", 104857600))
        elif op != "none":
            script.append((op, None))
    script.append(("max", 104857600))
    script.append(("frames", None))

    def play(fr):
        d = fr.FrameDecoder(max_size=104857600)
        out = []
        for op, arg in script:
            try:
                if op == "feed":
                    d.feed(arg)
                    r = None
                elif op == "next":
                    r = d.next_frame()
                elif op == "frames":
                    r = d.frames()
                else:
                    d.max_size = arg
                    r = arg
            except InvalidReceiveError as exc:
                r = ("InvalidReceiveError", str(exc), exc.frames if op == "frames" else None)
            out.append((op, r, d.buffered, d.has_partial()))
        return out

    assert play(pure.framing) == play(compiled_framing)


def test_large_frame_accounting_while_it_arrives(impl):
    fr = impl.framing
    payload = bytes(range(256)) * 400          # 102400 bytes
    stream = fr.encode_frames([payload, b"after"])
    d = fr.FrameDecoder()
    d.feed(stream[:1000])
    assert d.next_frame() is None
    assert d.buffered == 1000 and d.has_partial()
    d.max_size = 10            # already accepted: keeps arriving
    d.feed(stream[1000:102404])
    assert d.buffered == 102404 and not d.has_partial()
    d.feed(stream[102404:102406])
    assert d.buffered == 102406 and d.has_partial()
    d.max_size = 104857600
    assert d.frames() == [payload]
    d.feed(stream[102406:])
    assert d.frames() == [b"after"]
    assert d.buffered == 0 and not d.has_partial()


def test_invalid_prefix_at_head_of_frames_has_empty_frames(impl):
    d = impl.framing.FrameDecoder()
    d.feed(b"\xff\xff\xff\xff")
    with pytest.raises(InvalidReceiveError) as ei:
        d.frames()
    assert ei.value.frames == []


# ------------------------------------------------ receive into the decoder
# writable() / commit(n): the transport receives straight into the decoder's
# memory and frames come out as read-only views of it.  The properties that
# matter: a handed-out view never changes, whatever is received afterwards;
# large frames land in their own exactly-sized buffer; the size check still
# comes before any allocation.

def receive(d, data, most=None):
    """Put ``data`` into ``d`` through writable()/commit(), as a transport
    would (``most``: at most that many bytes per receive)."""
    view = memoryview(data)
    while view:
        region = d.writable()
        assert len(region) > 0 and not region.readonly
        n = min(len(region), len(view), most or len(view))
        region[:n] = view[:n]
        d.commit(n)
        view = view[n:]


def test_views_never_change_after_being_handed_out(impl):
    fr = impl.framing
    d = fr.FrameDecoder()
    kept = []
    sizes = [10, 4000, 3000, 0, 9000, 31000, 100, 5, 20000, 60000, 17] * 8
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = fr.encode_frames(payloads)
    pos = 0
    step = 7
    while pos < len(stream):
        receive(d, stream[pos:pos + step])
        pos += step
        step = step * 3 % 70001 + 1
        kept.extend(d.frames())
        # every view handed out so far still holds its frame
        assert [bytes(k) for k in kept] == payloads[:len(kept)]
    assert [bytes(k) for k in kept] == payloads
    assert all(type(k) is bytes if len(k) < fr.COPY_BELOW else k.readonly for k in kept)


def test_partial_frame_across_chunk_boundaries(impl):
    """Frames straddling the end of a chunk move (only the incomplete tail)
    to a fresh chunk; the views of the old one are untouched."""
    fr = impl.framing
    d = fr.FrameDecoder()
    payloads = [bytes([i]) * 3000 for i in range(12)]     # 3004-byte frames
    stream = fr.encode_frames(payloads)
    out = []
    for i in range(0, len(stream), 1500):
        receive(d, stream[i:i + 1500])
        out.extend(d.frames())
    assert out == payloads
    if impl.kind == "pure":
        chunks = {id(f.obj) for f in out}
        assert 1 < len(chunks) < len(out)       # several frames per chunk
    else:
        # The compiled twin exports each frame through its own object that
        # covers the frame alone (chunks are out of reach by design: see
        # test_a_compiled_frame_reaches_only_its_own_bytes).
        assert [bytes(memoryview(f.obj)) for f in out] == payloads
    assert d.buffered == 0


def test_writable_region_never_overlaps_a_handed_out_view(impl):
    fr = impl.framing
    d = fr.FrameDecoder()
    receive(d, fr.encode_frames([b"a" * 100, b"b" * 100]) + b"\x00\x00")
    first, second = d.frames()
    for _ in range(50):
        region = d.writable()
        region[:] = b"\xee" * len(region)     # scribble on all of it
        d.commit(0)
    assert first == b"a" * 100 and second == b"b" * 100


def test_writable_view_is_released_at_commit(impl):
    d = impl.framing.FrameDecoder()
    region = d.writable()
    d.commit(0)
    with pytest.raises(ValueError):
        region[0] = 1
    with pytest.raises(ValueError):
        d.writable()
        d.commit(10 ** 9)              # more than the region


def test_large_frame_received_into_its_own_exact_buffer(impl):
    fr = impl.framing
    payload = bytes(range(256)) * 1024          # 256 KiB
    stream = fr.encode_frames([payload, b"tail"])
    d = fr.FrameDecoder()
    receive(d, stream[:1000])
    assert d.next_frame() is None
    # From here the transport is offered exactly the rest of the payload:
    region = d.writable()
    assert len(region) == len(payload) - 996
    region[:] = stream[1000:4 + len(payload)]
    d.commit(len(region))
    receive(d, stream[4 + len(payload):])
    tracemalloc.start()
    try:
        got = d.frames()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == [payload, b"tail"]
    assert peak < 16384                       # handed out, not copied
    big = got[0]
    assert big.readonly and memoryview(big.obj).nbytes == len(payload)


def test_large_frame_prefix_checked_before_its_buffer_exists(impl):
    fr = impl.framing
    d = fr.FrameDecoder(max_size=1000)
    receive(d, struct.pack(">i", 50_000_000) + b"xx")
    tracemalloc.start()
    try:
        region = d.writable()             # not the 50 MB frame's buffer
        size = len(region)
        d.commit(0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size < 1 << 20 and peak < 1 << 20
    with pytest.raises(InvalidReceiveError, match="size = 50000000 larger than 1000"):
        d.frames()


def test_idle_decoder_holds_no_chunk_after_small_frames(impl):
    fr = impl.framing
    d = fr.FrameDecoder()
    tracemalloc.start()
    try:
        for _ in range(20):
            receive(d, fr.encode_frame(b"q" * 300))
            frames = d.frames()
            assert frames == [b"q" * 300]
            del frames
        assert d.frames() == []
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current < 2048          # no receive chunk kept


def test_decoder_lets_the_chunk_go_after_its_last_frame_by_next_frame(impl):
    # An authenticator takes frames one at a time with next_frame() and then
    # may never read again (an idle authenticated connection): the emptied
    # chunk goes with the last frame, not on a later call.
    fr = impl.framing
    d = fr.FrameDecoder()
    tracemalloc.start()
    try:
        receive(d, fr.encode_frames([b"a" * 300, b"b" * 300]))
        assert d.next_frame() == b"a" * 300
        assert d.next_frame() == b"b" * 300
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current < 2048          # no receive chunk kept
    receive(d, fr.encode_frame(b"c" * 10))
    assert d.frames() == [b"c" * 10]


def test_decoder_lets_the_chunk_go_after_an_empty_receive(impl):
    # A TLS read sets up a region and may find no whole record: commit(0)
    # leaves no chunk behind.
    fr = impl.framing
    d = fr.FrameDecoder()
    tracemalloc.start()
    try:
        assert len(d.writable()) >= 4096
        d.commit(0)
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert current < 2048
    # An incomplete frame stays where it is.
    receive(d, fr.encode_frame(b"z" * 100)[:50])
    d.writable()
    d.commit(0)
    receive(d, fr.encode_frame(b"z" * 100)[50:])
    assert d.frames() == [b"z" * 100]


@HYPO
@given(payloads=st.lists(st.binary(max_size=9000) | st.sampled_from([b"L" * 40000]),
                         max_size=15),
       cuts=st.lists(st.integers(1, 70000), max_size=20),
       feed=st.lists(st.booleans(), max_size=20))
def test_any_split_gives_the_same_frames_and_views_stay_intact(impl, payloads, cuts, feed):
    fr = impl.framing
    stream = fr.encode_frames(payloads)
    d = fr.FrameDecoder()
    got = []
    pos = 0
    for i, cut in enumerate(cuts + [len(stream)]):
        piece = stream[pos:pos + cut]
        pos += len(piece)
        if i < len(feed) and feed[i]:
            d.feed(piece)
        else:
            receive(d, piece)
        got.extend(d.frames())
        if pos >= len(stream):
            break
    assert got == payloads


def test_kept_views_survive_chunk_turnover_and_reuse(impl):
    """Bulk traffic goes through many chunks; dropped frames free theirs
    (the compiled twin pools freed 256 KiB chunks and reuses them), kept
    frames keep theirs and never change."""
    fr = impl.framing
    d = fr.FrameDecoder()
    kept = {}
    for rnd in range(40):
        payloads = [bytes([(rnd * 31 + i) % 256]) * 16384 for i in range(40)]
        receive(d, fr.encode_frames(payloads), most=262144)
        for i, f in enumerate(d.frames()):
            if i % 13 == 0:
                kept[(rnd, i)] = f
        for (r, i), f in kept.items():
            assert f == bytes([(r * 31 + i) % 256]) * 16384
    assert d.buffered == 0


def test_after_a_large_frame_little_is_received_before_the_next_prefix(impl):
    """Back-to-back large frames: what lands in the chunk before the next
    prefix is seen (and is then copied into that frame's own buffer) stays
    small; small frames after a large one get full regions again."""
    fr = impl.framing
    big = b"B" * 500000
    d = fr.FrameDecoder()
    receive(d, fr.encode_frame(big)[:1000])
    assert d.frames() == []
    region = d.writable()
    region[:] = fr.encode_frame(big)[1000:]
    d.commit(len(region))
    assert len(d.writable()) <= 16384
    d.commit(0)
    receive(d, fr.encode_frames([big, b"s" * 10, b"t" * 10]))
    assert d.frames() == [big, big, b"s" * 10, b"t" * 10]
    receive(d, fr.encode_frame(b"u" * 10))
    assert d.frames() == [b"u" * 10]
    assert len(d.writable()) > 16384 or d.buffered == 0
    d.commit(0)


def test_a_compiled_frame_reaches_only_its_own_bytes(impl_pair):
    """Compiled twin: a handed-out frame's ``.obj`` exports that frame and
    nothing else (not the chunk with the connection's other frames, nor what
    a pooled chunk held for an earlier connection), and only read-only.
    (The pure twin's frames are slices of a bytearray chunk: see its
    docstring.)"""
    _, compiled = impl_pair
    fr = compiled.framing
    # A pooled chunk that held "another connection's" secret first.
    d1 = fr.FrameDecoder()
    receive(d1, fr.encode_frames([b"SECRET-" * 2000] * 30), most=262144)
    assert len(d1.frames()) == 30
    del d1
    d = fr.FrameDecoder()
    # (frames of COPY_BELOW bytes and up: smaller ones are bytes copies)
    receive(d, fr.encode_frames([b"login-token" * 200, b"x" * 3000] * 40), most=262144)
    frames = d.frames()
    assert len(frames) == 80 and all(type(f) is memoryview for f in frames)
    for f in frames[:4] + frames[-4:]:
        whole = memoryview(f.obj)
        assert bytes(whole) == bytes(f)
        assert whole.readonly
        # A writable export is refused (ctypes asks for one).
        with pytest.raises(TypeError):
            ctypes.c_char.from_buffer(f.obj)


def test_large_frames_reuse_freed_buffers_without_showing_old_bytes(impl):
    # The compiled decoder keeps freed large-frame buffers for reuse (a
    # buffer may serve a frame up to a quarter smaller than itself): every
    # frame must still be exactly its own bytes, whatever size came before,
    # while earlier frames are kept or dropped.
    fr = impl.framing
    sizes = [1 << 20, 1 << 20, 900_000, 800_000, (1 << 20) + 1, 300_000, 2 << 20,
             1_600_000, 1 << 20]
    kept = []
    for i, n in enumerate(sizes):
        d = fr.FrameDecoder()
        payload = bytes([i + 1]) * n
        d.feed(fr.encode_frame(payload)[:4096])
        d.feed(fr.encode_frame(payload)[4096:])
        [frame] = d.frames()
        assert len(frame) == n and bytes(frame) == payload
        if i % 3 == 0:
            kept.append((frame, payload))        # still held: not reusable
    for frame, payload in kept:
        assert bytes(frame) == payload
