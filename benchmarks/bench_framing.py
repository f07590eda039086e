"""Framing throughput, compiled vs pure twin.

    python -m pytest benchmarks/bench_framing.py --benchmark-group-by=param:size

Decode feeds a stream in 64 KiB socket-sized reads and drains it with
``frames()`` (the batch path the channel uses); ``next_frame`` measures the
one-at-a-time path.  Encode measures ``encode_frame`` per payload and
``encode_frames`` for a batch.
"""
import pytest

SIZES = {"100B": 100, "1KiB": 1024, "16KiB": 16384, "1MiB": 1 << 20}
READ = 65536
# About 4 MiB of payload per round, at least 4 frames.
STREAM_BYTES = 4 << 20


def _frame_count(size):
    return max(4, STREAM_BYTES // size)


def _chunks(fr, size):
    n = _frame_count(size)
    stream = fr.encode_frames([b"\xab" * size] * n)
    return n, [stream[i:i + READ] for i in range(0, len(stream), READ)]


@pytest.fixture(params=list(SIZES), ids=list(SIZES))
def size(request):
    return SIZES[request.param]


def test_decode_frames(benchmark, twin, size):
    fr = twin("framing")
    n, chunks = _chunks(fr, size)

    def run():
        d = fr.FrameDecoder()
        got = 0
        for c in chunks:
            d.feed(c)
            got += len(d.frames())
        return got

    assert benchmark(run) == n
    benchmark.extra_info["frames_per_round"] = n


def test_decode_next_frame(benchmark, twin, size):
    fr = twin("framing")
    n, chunks = _chunks(fr, size)

    def run():
        d = fr.FrameDecoder()
        nxt = d.next_frame
        got = 0
        for c in chunks:
            d.feed(c)
            while nxt() is not None:
                got += 1
        return got

    assert benchmark(run) == n
    benchmark.extra_info["frames_per_round"] = n


def test_encode_frame(benchmark, twin, size):
    fr = twin("framing")
    n = _frame_count(size)
    payloads = [b"\xcd" * size] * n
    enc = fr.encode_frame

    def run():
        for p in payloads:
            enc(p)
        return n

    assert benchmark(run) == n
    benchmark.extra_info["frames_per_round"] = n


def test_encode_frames(benchmark, twin, size):
    fr = twin("framing")
    n = _frame_count(size)
    payloads = [b"\xcd" * size] * n
    out = benchmark(fr.encode_frames, payloads)
    assert len(out) == n * (size + 4)
    benchmark.extra_info["frames_per_round"] = n
