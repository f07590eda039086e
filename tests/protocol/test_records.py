"""Record batches: both twins (``impl.records``), byte equality with
kafka-python's encoder, legacy message sets written by kafka-python's legacy
builder, every codec, and hypothesis for "any bytes fail closed"."""
import os
import struct
import subprocess
import sys
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kchannel.protocol import records as R
from kchannel.protocol.records import compression as C

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_FIXTURE_OK = [HealthCheck.function_scoped_fixture]
CODECS = [R.CompressionType.NONE, R.CompressionType.GZIP, R.CompressionType.SNAPPY,
          R.CompressionType.LZ4, R.CompressionType.ZSTD]


def sample_records(n=10, base=1_700_000_000_000):
    return [(base + i * 7, (b"k%d" % i) if i % 2 else None, b"v" * i,
             [("h", b"x"), ("empty", b""), ("null", None)] if i % 3 == 0 else [])
            for i in range(n)]


def expected(records, base_offset=0):
    return [(base_offset + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(records)]


# -- CRC-32C -------------------------------------------------------------------

@pytest.mark.parametrize("data,crc", [
    (b"", 0),
    (b"123456789", 0xE3069283),             # the standard check value
    (b"\x00" * 32, 0x8A9136AA),              # RFC 3720 B.4
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
])
def test_crc32c_vectors(impl, data, crc):
    assert impl.records.crc32c(data) == crc
    # continuing from a previous value gives the CRC of the concatenation
    half = len(data) // 2
    assert impl.records.crc32c(data[half:], impl.records.crc32c(data[:half])) == crc
    assert impl.records.crc32c(bytearray(data)) == crc
    assert impl.records.crc32c(memoryview(data)) == crc


@settings(max_examples=200, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(data=st.binary(max_size=300), start=st.integers(0, 0xFFFFFFFF))
def test_crc32c_twins_agree(impl_pair, data, start):
    pure, compiled = impl_pair
    assert pure.records.crc32c(data, start) == compiled.records.crc32c(data, start)
    # The compiled twin has two loops (the crc32 instruction where the CPU
    # has SSE 4.2, a table otherwise): both agree, at every alignment.
    for off in (0, 1, 5):
        assert compiled.records._crc32c_software(data[off:], start) == \
            pure.records.crc32c(data[off:], start)


def test_crc32c_hardware_loop_is_used_where_the_cpu_has_it(impl_pair):
    _, compiled = impl_pair
    with open("/proc/cpuinfo") as f:
        has = " sse4_2" in f.read()
    assert compiled.records._crc32c_hardware() == has
    big = bytes(range(256)) * 1000 + b"tail"
    assert compiled.records.crc32c(big[3:]) == compiled.records._crc32c_software(big[3:])


@pytest.mark.parametrize("n", [767, 768, 769, 1536 + 5, 6143, 6144, 6145, 6151, 6144 + 768,
                               12288, 12289 + 7, 16323, 100_003])
def test_crc32c_three_streams_join_correctly(impl_pair, n):
    # From 3 blocks of 2 KiB on, the hardware loop runs three CRCs side by
    # side and joins them, and then the rest in blocks of 256 bytes (from
    # 768 bytes on): lengths around the block multiples, every
    # alignment, continuing from a previous value; the table loop is the
    # reference (the pure twin too, on the shortest).
    pure, compiled = impl_pair
    data = os.urandom(n + 8)
    for off in (0, 1, 3, 8):
        chunk = data[off:off + n]
        want = compiled.records._crc32c_software(chunk, 0xDEADBEEF)
        assert compiled.records.crc32c(chunk, 0xDEADBEEF) == want
        assert compiled.records.crc32c(memoryview(chunk)) == \
            compiled.records._crc32c_software(chunk)
    if n < 7000:
        assert pure.records.crc32c(data[:n]) == compiled.records.crc32c(data[:n])


# -- record encode/decode, both twins ------------------------------------------

def test_record_bytes_vector(impl):
    # One record, key "k", value "v", header ("h", "x"), timestamp delta 0:
    # length 12 (zigzag 0x18), attrs 0, ts delta 0, offset delta 0, key len 1 (zigzag 2), ...
    out = impl.records.encode_records([(5, b"k", b"v", [("h", b"x")])], 5)
    assert out == bytes([0x18, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + \
        bytes([2, 2]) + b"h" + bytes([2]) + b"x"
    assert impl.records.decode_records(out, 1, 40, 5, None) == \
        [(40, 5, b"k", b"v", [("h", b"x")])]
    # LogAppendTime: every record takes the batch's max timestamp
    assert impl.records.decode_records(out, 1, 40, 5, 99)[0][1] == 99


def test_null_key_value_and_header_value(impl):
    out = impl.records.encode_records([(0, None, None, [("a", None)])], 0)
    assert impl.records.decode_records(out, 1, 0, 0, None) == [(0, 0, None, None, [("a", None)])]


@pytest.mark.parametrize("bad", [
    [(0, "str key", b"v", [])],
    [(0, b"k", 5, [])],
    [(0, b"k", b"v", [(b"bytes header key", b"x")])],
    [(0, b"k", b"v", ((b"bytes header key", b"x"),))],
    [(0, b"k", b"v", (("h", 5),))],
    [(2 ** 63, b"k", b"v", [])],
])
def test_encode_refuses_unrepresentable(impl, bad):
    with pytest.raises(ValueError):
        impl.records.encode_records(bad, 0)


_record = st.tuples(
    st.integers(-2 ** 40, 2 ** 40),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    # a list, or a tuple of pairs as the producer's appender passes them
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))),
             max_size=3).flatmap(lambda hs: st.sampled_from([hs, tuple(hs)])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(recs=st.lists(_record, min_size=1, max_size=12), base_offset=st.integers(0, 2 ** 40))
def test_twins_encode_identically_and_round_trip(impl_pair, recs, base_offset):
    pure, compiled = impl_pair
    base_ts = recs[0][0]
    a = pure.records.encode_records(recs, base_ts)
    assert compiled.records.encode_records(recs, base_ts) == a
    want = expected(recs, base_offset)
    assert pure.records.decode_records(a, len(recs), base_offset, base_ts, None) == want
    assert compiled.records.decode_records(a, len(recs), base_offset, base_ts, None) == want


@settings(max_examples=150, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(recs=st.lists(_record, min_size=1, max_size=12), attributes=st.sampled_from([0, 8, 16]),
       pid=st.integers(-1, 2 ** 62), epoch=st.integers(-1, 2 ** 15 - 1),
       seq=st.integers(-1, 2 ** 31 - 1), base_offset=st.integers(0, 2 ** 40),
       max_ts=st.one_of(st.none(), st.integers(-2 ** 40, 2 ** 40)),
       hint=st.integers(0, 5000))
def test_twins_encode_whole_plain_batches_identically(impl_pair, recs, attributes, pid, epoch,
                                                       seq, base_offset, max_ts, hint):
    """The producer's one-call batch encoder: the same bytes from both
    twins, and the v2 layout field by field (header, CRC over attributes
    to the end, the records as encode_records writes them)."""
    pure, compiled = impl_pair
    args = (recs, attributes, pid, epoch, seq, base_offset, 7, max_ts, hint)
    raw = pure.records.encode_plain_batch(*args)
    assert compiled.records.encode_plain_batch(*args) == raw
    # The producer's queued records (each twin's QueuedRecord, read by
    # field; the other twin's unpacked as a tuple is): the same bytes.
    for twin in (pure, compiled):
        queued = [twin.records.QueuedRecord(*r) for r in recs]
        assert [tuple(q) for q in queued] == [tuple(r) for r in recs]
        assert pure.records.encode_plain_batch(queued, *args[1:]) == raw
        assert compiled.records.encode_plain_batch(queued, *args[1:]) == raw
    base_ts = recs[0][0]
    payload = pure.records.encode_records(recs, base_ts)
    after = struct.pack(">hiqqqhii", attributes, len(recs) - 1, base_ts,
                        max(r[0] for r in recs) if max_ts is None else max_ts, pid, epoch, seq,
                        len(recs))
    crc = pure.records.crc32c(after + payload)
    assert raw == struct.pack(">qiibI", base_offset, 49 + len(payload), 7, 2, crc) + after + payload


def test_plain_batch_whatever_the_size_hint(impl_pair):
    """The compiled encoder writes the batch in place into the bytes it
    returns, sized by the hint: a hint that is exact, too large (trimmed)
    or too small (the batch moves to a buffer of its own, growing several
    times) gives the same bytes as the pure twin, of the batch's length."""
    pure, compiled = impl_pair
    recs = [(1_700_000_000_000 + i, b"k%d" % i, bytes([i]) * (1000 + i), ()) for i in range(15)]
    want = pure.records.encode_plain_batch(recs, 0, -1, -1, -1, 0, -1, None, 0)
    for hint in (0, 62, 100, len(want) - 1, len(want), len(want) + 1, 16384, 1 << 20):
        got = compiled.records.encode_plain_batch(recs, 0, -1, -1, -1, 0, -1, None, hint)
        assert type(got) is bytes and len(got) == len(want) and got == want, hint


def test_plain_batch_of_queued_records_every_field_form(impl_pair):
    """The compiled encoder's fast path for the producer's QueuedRecord (an
    int timestamp, bytes or None key and value, no headers) and its
    fall-back for any other field form give the pure twin's bytes: None and
    empty headers, a bytearray key, an int subclass timestamp, values whose
    length takes one to three varint bytes, offset deltas past 63 (two
    varint bytes), timestamps before and after the first; and the same
    error for a timestamp delta that does not fit."""
    pure, compiled = impl_pair

    class Ms(int):
        pass

    base = 1_700_000_000_000
    recs = []
    for i in range(200):
        key = (None, b"", b"k%d" % i, bytearray(b"ba"))[i % 4]
        value = (None, b"v" * (i % 70), b"w" * 200, b"x" * 20000)[(i // 4) % 4]
        headers = (None, (), (("h", b"1"),), [])[(i // 16) % 4]
        ts = (base + i, base - 5000 + i, Ms(base + 7))[i % 3]
        recs.append((ts, key, value, headers))
    want = pure.records.encode_plain_batch(recs, 0, 5, 1, 3, 0, -1, None, 0)
    for twin in (pure, compiled):
        queued = [twin.records.QueuedRecord(*r) for r in recs]
        for hint in (0, len(want)):
            assert compiled.records.encode_plain_batch(queued, 0, 5, 1, 3, 0, -1, None,
                                                       hint) == want
    assert [tuple(r)[1:4] for r in R.read_records(want)][:4] == [
        (base, None, None), (base - 4999, b"", None), (base + 7, b"k2", None),
        (base + 3, b"ba", None)]
    far = [compiled.records.QueuedRecord(base, None, b"v", ()),
           compiled.records.QueuedRecord(-2 ** 63 + 5, None, b"v", ())]
    for twin in (pure, compiled):
        with pytest.raises(ValueError, match="does not fit"):
            twin.records.encode_plain_batch([tuple(r) for r in far] if twin is pure else far,
                                            0, -1, -1, -1)


def test_plain_batch_of_queued_records_with_headers_every_form(impl_pair):
    """The compiled encoder writes a QueuedRecord's headers in its fast
    path when each is a (compact ASCII str, bytes or None) tuple, and falls
    back for any other form: both give the pure twin's bytes.  Header keys
    and values whose lengths take one or two varint bytes, a null value,
    64 headers (a two-byte count), an empty key, a non-ASCII key, a str
    and a bytes subclass, a header given as a list, and headers as a list
    beside records with none, in one batch."""
    pure, compiled = impl_pair

    class S(str):
        pass

    class B(bytes):
        pass

    base = 1_700_000_000_000
    forms = [
        (("h", b"value-01"),),
        (("k" * 63, b"v" * 63), ("k" * 64, b"v" * 64), ("", b""), ("n", None)),
        tuple((f"h{i}", bytes([i])) for i in range(64)),
        (("h", b"1"), ("h\u00e9", b"2")),
        (("h", b"1"), (S("s"), b"2")),
        (("h", B(b"b")),),
        (("h", b"1"), ["l", b"2"]),
        [("h", b"1")],
        None,
        (),
    ]
    recs = [(base + i, (None, b"key-0001")[i % 2], b"x" * (i % 3 * 50), forms[i % len(forms)])
            for i in range(3 * len(forms))]
    want = pure.records.encode_plain_batch(recs, 0, -1, -1, -1, 0, -1, None, 0)
    for twin in (pure, compiled):
        queued = [twin.records.QueuedRecord(*r) for r in recs]
        for hint in (0, len(want)):
            assert compiled.records.encode_plain_batch(queued, 0, -1, -1, -1, 0, -1, None,
                                                       hint) == want
    got = [(tuple(r)[2], tuple(r)[4]) for r in R.read_records(want)]
    assert got[0] == (None, [("h", b"value-01")])
    assert got[1][1] == [("k" * 63, b"v" * 63), ("k" * 64, b"v" * 64), ("", b""), ("n", None)]
    assert len(got[2][1]) == 64 and got[3][1] == [("h", b"1"), ("h\u00e9", b"2")]


def test_compressed_batch_of_queued_records():
    """encode_batch's compressed path reads QueuedRecord timestamps by name."""
    recs = [(1_700_000_000_000 + d, b"k%d" % d, b"v" * d, (("h", b"x"),)) for d in (5, 0, 9)]
    want = R.encode_batch(recs, compression=R.CompressionType.GZIP)
    got = R.encode_batch([R.QueuedRecord(*r) for r in recs], compression=R.CompressionType.GZIP)
    assert got == want
    assert [tuple(r)[:4] for r in R.read_records(got)] == [
        (0, recs[0][0], b"k5", b"v" * 5), (1, recs[1][0], b"k0", b""),
        (2, recs[2][0], b"k9", b"v" * 9)]


def test_plain_batch_refuses_what_the_header_cannot_hold(impl):
    with pytest.raises(ValueError, match="at least one record"):
        impl.records.encode_plain_batch([], 0, -1, -1, -1)
    with pytest.raises(ValueError, match="int16"):
        impl.records.encode_plain_batch([(0, None, b"v", ())], 0, -1, 40000, -1)


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except CorruptRecordError:
        return ("corrupt", None)


@settings(max_examples=400, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(data=st.binary(max_size=80), count=st.integers(-2, 12))
def test_any_bytes_fail_closed_identically(impl_pair, data, count):
    pure, compiled = impl_pair
    a = _outcome(pure.records.decode_records, data, count, 0, 0, None)
    b = _outcome(compiled.records.decode_records, data, count, 0, 0, None)
    assert a == b


@settings(max_examples=300, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(recs=st.lists(_record, min_size=1, max_size=4), pos=st.integers(0, 10 ** 6),
       byte=st.integers(0, 255), cut=st.integers(0, 10 ** 6))
def test_mutated_records_fail_closed_identically(impl_pair, recs, pos, byte, cut):
    pure, compiled = impl_pair
    data = bytearray(pure.records.encode_records(recs, 0))
    data[pos % len(data)] = byte
    data = bytes(data[:len(data) - cut % 3])
    a = _outcome(pure.records.decode_records, data, len(recs), 0, 0, None)
    b = _outcome(compiled.records.decode_records, data, len(recs), 0, 0, None)
    assert a == b


def test_hostile_counts_cost_nothing(impl):
    with pytest.raises(CorruptRecordError):
        impl.records.decode_records(b"\x00" * 10, 2 ** 31 - 1, 0, 0, None)
    with pytest.raises(CorruptRecordError):
        impl.records.decode_records(b"", -1, 0, 0, None)
    # a header count far above what the record holds
    rec = bytes([0, 0, 0, 1, 1]) + bytes([0xfe, 0xff, 0xff, 0xff, 0x0f])
    with pytest.raises(CorruptRecordError):
        impl.records.decode_records(bytes([len(rec) * 2]) + rec, 1, 0, 0, None)


def test_trailing_bytes_and_short_record_are_corrupt(impl):
    good = impl.records.encode_records([(0, b"k", b"v", [])], 0)
    with pytest.raises(CorruptRecordError, match="remaining"):
        impl.records.decode_records(good + b"\x00", 1, 0, 0, None)
    with pytest.raises(CorruptRecordError):
        impl.records.decode_records(good[:-1], 1, 0, 0, None)
    with pytest.raises(CorruptRecordError):
        impl.records.decode_records(good, 2, 0, 0, None)


# -- batches -----------------------------------------------------------------------

def kafka_python_batch(records, compression=0, producer_id=-1, epoch=-1, seq=-1,
                       transactional=False):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
        batch_size=10 ** 7)
    for i, (ts, k, v, h) in enumerate(records):
        builder.append(i, ts, k, v, h)
    return bytes(builder.build())


def test_batch_bytes_equal_kafka_python():
    recs = sample_records()
    # kafka-python writes partition leader epoch 0 where Java writes -1 (it
    # is outside the CRC); everything else must be byte-identical.
    assert R.encode_batch(recs, partition_leader_epoch=0) == kafka_python_batch(recs)
    idem = R.encode_batch(recs, partition_leader_epoch=0, producer_id=4711,
                          producer_epoch=3, base_sequence=17, is_transactional=True)
    assert idem == kafka_python_batch(recs, producer_id=4711, epoch=3, seq=17,
                                      transactional=True)


def test_batch_header_fields():
    recs = sample_records(5)
    raw = R.encode_batch(recs, base_offset=1000, producer_id=9, producer_epoch=2,
                         base_sequence=40)
    (batch,) = R.iter_batches(raw)
    assert isinstance(batch, R.RecordBatch)
    assert (batch.base_offset, batch.last_offset, batch.record_count) == (1000, 1004, 5)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 40)
    assert batch.partition_leader_epoch == -1
    assert batch.base_timestamp == recs[0][0] and batch.max_timestamp == recs[-1][0]
    assert batch.timestamp_type == R.TimestampType.CREATE_TIME
    assert str(batch.timestamp_type) == "CreateTime"
    assert not batch.is_control and not batch.is_transactional
    assert batch.is_valid()
    assert batch.records() == expected(recs, 1000)


def test_log_append_time_batch():
    recs = sample_records(3)
    raw = R.encode_batch(recs, timestamp_type=R.TimestampType.LOG_APPEND_TIME,
                         max_timestamp=42)
    (batch,) = R.iter_batches(raw)
    assert batch.timestamp_type == R.TimestampType.LOG_APPEND_TIME
    assert [r[1] for r in batch.records()] == [42, 42, 42]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_every_codec_round_trips_and_kafka_python_agrees(codec):
    recs = sample_records(200)
    raw = R.encode_batch(recs, base_offset=7, compression=codec)
    (batch,) = R.iter_batches(raw)
    assert batch.compression_type == codec
    assert R.read_records(raw) == expected(recs, 7)
    # kafka-python (python-snappy, lz4 and zstandard installed) reads ours
    from kafka.record.memory_records import MemoryRecords
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
           for r in MemoryRecords(raw).next_batch()]
    assert got == expected(recs, 7)
    # and we read its batches in the same codec
    theirs = kafka_python_batch(recs, compression=int(codec))
    assert R.read_records(theirs) == expected(recs)


def test_snappy_is_xerial_framed_as_java_writes():
    data = bytes(range(256)) * 300   # 76800 bytes: three 32 KiB blocks
    out = C.compress(R.CompressionType.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, 0
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        pos += 4 + size
        blocks += 1
    assert pos == len(out) and blocks == 3
    assert C.decompress(R.CompressionType.SNAPPY, out) == data
    # raw (unframed) snappy, as librdkafka writes, is read too
    import cramjam
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert C.decompress(R.CompressionType.SNAPPY, raw) == data


def test_lz4_frame_is_what_kafka_java_writes():
    data = os.urandom(1000) + b"a" * 150000
    out = C.compress(R.CompressionType.LZ4, data)
    # magic, FLG 0x60 (version 1, independent blocks, no checksums), BD 64 KiB,
    # header checksum (second byte of XXH32 of the descriptor)
    assert out[:7] == bytes.fromhex("04224d18604082")
    assert out.endswith(b"\x00\x00\x00\x00")
    assert C.decompress(R.CompressionType.LZ4, out) == data
    # a standard frame from another writer (linked blocks, checksums) reads too
    import cramjam
    assert C.decompress(R.CompressionType.LZ4, bytes(cramjam.lz4.compress(data))) == data


def test_xxh32_vectors():
    assert C.xxh32_small(b"") == 0x02CC5D05
    assert C.xxh32_small(b"a") == 0x550D7456
    assert C.xxh32_small(b"abc") == 0x32D153FF


@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.name.lower())
def test_corrupt_compressed_payload_is_corrupt_record(codec):
    with pytest.raises(CorruptRecordError):
        C.decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09xx"
                     if codec == R.CompressionType.SNAPPY else b"garbage!" * 3)


def test_unknown_codec_id_is_corrupt():
    raw = bytearray(R.encode_batch(sample_records(2)))
    raw[22] |= 0x07   # attributes low byte: compression id 7
    # fix the CRC so only the codec is wrong
    crc = R.crc32c(bytes(raw[21:]))
    raw[17:21] = struct.pack(">I", crc)
    with pytest.raises(CorruptRecordError, match="compression type id"):
        R.read_records(bytes(raw))


def test_missing_codec_says_what_to_install():
    code = (
        "import sys; sys.modules['cramjam'] = None\n"
        "from kchannel.protocol import records as R\n"
        "from kchannel.errors import UnsupportedCompressionTypeError\n"
        "assert R.read_records(R.encode_batch([(0, b'k', b'v', [])], compression=1))\n"
        "for codec in (2, 3, 4):\n"
        "    try:\n"
        "        R.encode_batch([(0, b'k', b'v', [])], compression=codec)\n"
        "    except UnsupportedCompressionTypeError as e:\n"
        "        print(e)\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    assert len(out) == 3
    for line, name in zip(out, ("snappy", "lz4", "zstd")):
        assert f"compression type {name} needs cramjam, a dependency of kchannel" in line
        assert line.endswith("pip install cramjam")


# -- batches in a fetch response: partial, corrupt, control ----------------------

def test_partial_trailing_batch_is_ignored():
    a = R.encode_batch(sample_records(3), base_offset=0)
    b = R.encode_batch(sample_records(4), base_offset=3)
    for cut in range(1, len(b)):
        got = R.read_records(a + b[:cut])
        assert got == expected(sample_records(3))
    assert len(R.read_records(a + b)) == 7


def test_bad_crc_is_corrupt_record():
    raw = bytearray(R.encode_batch(sample_records(3)))
    raw[-2] ^= 0x01   # a byte of the last value (the last byte is its header count)
    with pytest.raises(CorruptRecordError, match="stored crc"):
        R.read_records(bytes(raw))
    # check.crcs=false: the records are decoded without the check
    assert len(R.read_records(bytes(raw), check_crcs=False)) == 3


def test_size_below_minimum_and_bad_magic_are_corrupt():
    raw = bytearray(R.encode_batch(sample_records(1)))
    small = bytearray(raw)
    small[8:12] = struct.pack(">i", 13)
    with pytest.raises(CorruptRecordError, match="minimum"):
        R.read_records(bytes(small))
    v2small = bytearray(raw)
    v2small[8:12] = struct.pack(">i", 30)
    with pytest.raises(CorruptRecordError, match="minimum"):
        R.read_records(bytes(v2small))
    magic = bytearray(raw)
    magic[16] = 3
    with pytest.raises(CorruptRecordError, match="Invalid magic"):
        R.read_records(bytes(magic))


def test_declared_count_must_match_records():
    raw = bytearray(R.encode_batch(sample_records(3)))
    raw[57:61] = struct.pack(">i", 4)
    raw[17:21] = struct.pack(">I", R.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptRecordError):
        R.read_records(bytes(raw))


def test_control_batches_are_skipped():
    # A transaction COMMIT marker: key (version 0, type 1), value
    # (version 0, coordinator epoch 5).
    marker = R.encode_batch([(10, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5), [])],
                            base_offset=2, producer_id=7, producer_epoch=0,
                            is_transactional=True, is_control=True)
    data = R.encode_batch(sample_records(2), producer_id=7, producer_epoch=0,
                          base_sequence=0, is_transactional=True)
    batches = list(R.iter_batches(data + marker))
    assert [b.is_control for b in batches] == [False, True]
    assert batches[0].is_transactional
    assert R.read_records(data + marker) == expected(sample_records(2))
    assert len(R.read_records(data + marker, skip_control=False)) == 3


# -- legacy magic 0/1 ----------------------------------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3], ids=["none", "gzip", "snappy", "lz4"])
def test_legacy_message_sets_from_kafka_python(magic, codec):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec,
                                       batch_size=10 ** 6)
    for i in range(5):
        builder.append(i, timestamp=1000 + i if magic else None,
                       key=b"k%d" % i if i % 2 else None, value=b"v%d" % i)
    raw = bytes(builder.build())
    base = 100
    # kafka-python writes offsets 0..4 (relative inside a v1 wrapper); the
    # broker gives the wrapper the absolute offset of its last message.
    if codec:
        raw = raw[:0] + struct.pack(">q", base + 4) + raw[8:]
    else:
        out = b""
        pos = 0
        while pos < len(raw):
            size = struct.unpack_from(">i", raw, pos + 8)[0]
            off = struct.unpack_from(">q", raw, pos)[0]
            out += struct.pack(">q", base + off) + raw[pos + 8:pos + 12 + size]
            pos += 12 + size
        raw = out
    batches = list(R.iter_batches(raw))
    assert all(b.magic == magic for b in batches)
    got = R.read_records(raw)
    # magic 0 inner offsets are absolute (the broker rewrites them)
    first = 0 if codec and magic == 0 else base
    assert [r[0] for r in got] == [first + i for i in range(5)]
    assert [r[2] for r in got] == [None, b"k1", None, b"k3", None]
    assert [r[3] for r in got] == [b"v%d" % i for i in range(5)]
    assert [r[1] for r in got] == ([1000 + i for i in range(5)] if magic else [-1] * 5)
    assert batches[0].timestamp_type == (R.TimestampType.CREATE_TIME if magic
                                         else R.TimestampType.NO_TIMESTAMP_TYPE)


def test_legacy_bad_crc_and_nested_compression():
    msg = bytearray(R.encode_legacy_message(5, b"k", b"v", magic=1, timestamp=9))
    assert R.read_records(bytes(msg)) == [(5, 9, b"k", b"v", [])]
    msg[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="stored crc"):
        R.read_records(bytes(msg))
    inner = R.encode_legacy_message(0, None, b"x", magic=1, timestamp=1)
    wrapper = R.encode_legacy_message(0, None, C.compress(1, inner), magic=1, attributes=1)
    nested = R.encode_legacy_message(0, None, C.compress(1, wrapper), magic=1, attributes=1)
    assert R.read_records(wrapper) == [(0, 1, None, b"x", [])]
    with pytest.raises(CorruptRecordError, match="nested"):
        R.read_records(nested)


def test_legacy_log_append_time_wrapper():
    inner = b"".join(R.encode_legacy_message(i, None, b"x", magic=1, timestamp=1)
                     for i in range(3))
    wrapper = R.encode_legacy_message(12, None, C.compress(1, inner), magic=1,
                                      timestamp=77, attributes=1 | 0x08)
    assert R.read_records(wrapper) == [(10 + i, 77, None, b"x", []) for i in range(3)]


def test_legacy_lz4_magic0_broken_header_checksum_is_accepted():
    inner = R.encode_legacy_message(0, None, b"x", magic=0)
    frame = bytearray(C.compress(R.CompressionType.LZ4, inner))
    frame[6] = (C.xxh32_small(bytes(frame[:6])) >> 8) & 0xFF  # the pre-0.10 checksum
    wrapper = R.encode_legacy_message(3, None, bytes(frame), magic=0, attributes=3)
    assert R.read_records(wrapper) == [(0, -1, None, b"x", [])]


# -- hypothesis: any bytes fail closed ----------------------------------------------

@settings(max_examples=500, deadline=None)
@given(data=st.binary(max_size=200))
def test_any_fetch_bytes_fail_closed(data):
    try:
        R.read_records(data)
        R.read_records(data, check_crcs=False)
    except CorruptRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(CODECS), pos=st.integers(0, 10 ** 6), byte=st.integers(0, 255),
       check=st.booleans())
def test_mutated_batches_fail_closed(codec, pos, byte, check):
    raw = bytearray(R.encode_batch(sample_records(6), compression=codec))
    raw[pos % len(raw)] = byte
    try:
        got = R.read_records(bytes(raw), check_crcs=check)
    except CorruptRecordError:
        return
    assert isinstance(got, list)


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, 10 ** 6), byte=st.integers(0, 255), magic=st.sampled_from([0, 1]),
       compressed=st.booleans())
def test_mutated_legacy_fail_closed(pos, byte, magic, compressed):
    inner = b"".join(R.encode_legacy_message(i, b"k", b"v" * i, magic=magic, timestamp=i)
                     for i in range(3))
    raw = inner if not compressed else R.encode_legacy_message(
        2, None, C.compress(1, inner), magic=magic, attributes=1)
    raw = bytearray(raw)
    raw[pos % len(raw)] = byte
    try:
        R.read_records(bytes(raw), check_crcs=False)
    except CorruptRecordError:
        pass


def test_make_records_builds_consumer_records(impl):
    from kchannel.consumer.fetcher import ConsumerRecord
    recs = expected(sample_records(20), 100)
    out = impl.records.make_records(ConsumerRecord, recs, 3, 11, "t", 2, "CreateTime")
    assert [type(r) for r in out] == [ConsumerRecord] * 8
    assert out == [ConsumerRecord("t", 2, o, ts, "CreateTime", k, v, h, None)
                   for o, ts, k, v, h in recs[3:11]]
    assert impl.records.make_records(ConsumerRecord, recs, 5, 99, "t", 0, "x")[-1].offset == \
        recs[-1][0]
    assert impl.records.make_records(ConsumerRecord, recs, 7, 7, "t", 0, "x") == []


# -- RecordReader: a batch's records decoded n at a time -----------------------------

def _reader(impl, data, count, base_offset=0, base_ts=0, log_append=None):
    from kchannel.consumer.fetcher import ConsumerRecord
    return impl.records.RecordReader(data, count, base_offset, base_ts, log_append,
                                     ConsumerRecord, "t", 3, "CreateTime")


def test_record_reader_reads_what_decode_records_decodes(impl):
    from kchannel.consumer.fetcher import ConsumerRecord
    recs = sample_records(20)
    data = impl.records.encode_records(recs, recs[0][0])
    want = impl.records.make_records(
        ConsumerRecord, impl.records.decode_records(data, 20, 100, recs[0][0], None), 0, 20,
        "t", 3, "CreateTime")
    for source in (data, memoryview(data), bytearray(data)):
        r = _reader(impl, source, 20, 100, recs[0][0])
        got = []
        for n in (0, 1, 3, 7, 100):
            part = r.read(n)
            assert len(part) == min(n, 20 - len(got))
            got += part
            assert r.remaining == 20 - len(got)
        assert got == want and [type(x) for x in got] == [ConsumerRecord] * 20
        assert r.read(5) == [] and r.remaining == 0
    r = _reader(impl, data, 20, 100, recs[0][0], log_append=42)
    assert {x.timestamp for x in r.read(50)} == {42}
    with pytest.raises(TypeError):
        impl.records.RecordReader(data, 20, 0, 0, None, list, "t", 0, "CreateTime")


def test_record_reader_errors_are_decode_records_errors_and_stick(impl):
    good = impl.records.encode_records([(0, b"k", b"v", []), (1, None, b"w", [])], 0)
    # The trailing bytes are found by the read that reaches the last record.
    r = _reader(impl, good + b"\x00", 2)
    assert [x.value for x in r.read(1)] == [b"v"]
    with pytest.raises(CorruptRecordError, match="remaining"):
        r.read(1)
    assert r.remaining == 0
    with pytest.raises(CorruptRecordError, match="remaining"):
        r.read(1)
    # A batch of no records: its first read checks it holds nothing.
    with pytest.raises(CorruptRecordError, match="remaining"):
        _reader(impl, b"\x00", 0).read(0)
    assert _reader(impl, b"", 0).read(0) == []
    # Counts are refused up front, as decode_records refuses them.
    for count in (-1, 2 ** 31 - 1):
        with pytest.raises(CorruptRecordError):
            _reader(impl, good, count)
    # A corrupt second record: the first one still reads.
    r = _reader(impl, good[:-1], 2)
    assert len(r.read(1)) == 1
    with pytest.raises(CorruptRecordError):
        r.read(1)


def _read_outcomes(impl, data, count, sizes):
    # (The twins' messages may differ in detail, as decode_records' do.)
    try:
        r = _reader(impl, data, count)
    except CorruptRecordError:
        return [("corrupt",)]
    out = []
    for n in sizes:
        try:
            out.append(("ok", r.read(n), r.remaining))
        except CorruptRecordError:
            out.append(("corrupt", r.remaining))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(recs=st.lists(_record, min_size=0, max_size=5), pos=st.integers(0, 10 ** 6),
       byte=st.integers(0, 255), cut=st.integers(0, 10 ** 6), mutate=st.booleans(),
       sizes=st.lists(st.integers(0, 4), min_size=1, max_size=6))
def test_record_reader_twins_agree(impl_pair, recs, pos, byte, cut, mutate, sizes):
    pure, compiled = impl_pair
    data = bytearray(pure.records.encode_records(recs, 0))
    if mutate and data:
        data[pos % len(data)] = byte
        data = data[:len(data) - cut % 3]
    data = bytes(data)
    assert _read_outcomes(pure, data, len(recs), sizes) == \
        _read_outcomes(compiled, data, len(recs), sizes)


def test_compiled_reader_hands_out_gc_tracked_records(impl_pair):
    # The compiled reader builds records untracked by the garbage collector
    # and tracks them before returning them (also when decoding fails).
    import gc
    _, compiled = impl_pair
    recs = sample_records(10)
    data = compiled.records.encode_records(recs, 0)
    got = _reader(compiled, data, 10).read(10)
    assert got and all(gc.is_tracked(x) and gc.is_tracked(x.headers) for x in got)
    got[0].headers.append(("self", got[0]))   # a cycle the collector must see
    del got
    gc.collect()
    r = _reader(compiled, data[:-1], 10)
    with pytest.raises(CorruptRecordError):
        r.read(10)
    gc.collect()


def test_read_into_appends_what_read_returns_and_nothing_when_it_fails(impl):
    recs = sample_records(10)
    data = impl.records.encode_records(recs, recs[0][0])
    want = _reader(impl, data, 10, 100, recs[0][0]).read(10)
    r = _reader(impl, data, 10, 100, recs[0][0])
    out = ["before"]
    assert r.read_into(out, 4) == 4 and r.remaining == 6
    assert r.read_into(out, 100) == 6 and r.remaining == 0
    assert r.read_into(out, 5) == 0
    impl.records.track_records(out, 1)
    assert out == ["before"] + want
    # A truncated last record: the read that reaches it appends nothing (as
    # read returns nothing) and the error sticks.
    bad = data[:-1]
    r = _reader(impl, bad, 10)
    out = []
    assert r.read_into(out, 2) == 2
    with pytest.raises(CorruptRecordError):
        r.read_into(out, 10)
    assert len(out) == 2 and r.remaining == 0
    with pytest.raises(CorruptRecordError):
        r.read_into(out, 1)
    impl.records.track_records(out)
    assert [x.offset for x in out] == [0, 1]


def test_compiled_read_into_leaves_records_untracked_until_track_records(impl_pair):
    import gc
    _, compiled = impl_pair
    recs = sample_records(6)
    data = compiled.records.encode_records(recs, 0)
    out = []
    _reader(compiled, data, 6).read_into(out, 6)
    assert not any(gc.is_tracked(x) or gc.is_tracked(x.headers) for x in out)
    # A record remade by a deserializer holds the same (untracked) headers.
    out[1] = tuple.__new__(type(out[1]), tuple(out[1]))
    compiled.records.track_records(out, 0)
    assert all(gc.is_tracked(x) and gc.is_tracked(x.headers) for x in out)
    out[0].headers.append(("self", out[0]))   # a cycle the collector must see
    del out
    gc.collect()


def test_tuple_headers_are_the_same_pairs_in_a_tuple(impl):
    # kchannel.aio's records (aiokafka's shape): headers a tuple of pairs.
    from kchannel.consumer.fetcher import ConsumerRecord
    recs = sample_records(12)
    data = impl.records.encode_records(recs, recs[0][0])
    want = _reader(impl, data, 12, 100, recs[0][0]).read(12)
    r = impl.records.RecordReader(data, 12, 100, recs[0][0], None, ConsumerRecord, "t", 3,
                                  "CreateTime", True)
    out = []
    assert r.read_into(out, 5) == 5 and r.read_into(out, 50) == 7
    impl.records.track_records(out)
    assert [type(x.headers) for x in out] == [tuple] * 12
    assert [x._replace(headers=list(x.headers)) for x in out] == want
    assert any(x.headers for x in out) and any(not x.headers for x in out)


def test_compiled_tuple_headers_records_stay_untracked_where_no_cycle_can_pass(impl_pair):
    # A record holding only str, bytes, int, None and untracked tuples of
    # those cannot be part of a reference cycle: the compiled reader leaves
    # it untracked for good (CPython's own rule for plain tuples).  What
    # can refer back -- a value a deserializer made -- keeps it tracked, and
    # the collector still collects a cycle through it.
    import gc
    import weakref
    from kchannel.consumer.fetcher import ConsumerRecord
    _, compiled = impl_pair
    recs = sample_records(10)
    data = compiled.records.encode_records(recs, 0)

    def read(n):
        r = compiled.records.RecordReader(data, 10, 0, 0, None, ConsumerRecord, "t", 0,
                                          "CreateTime", True)
        out = []
        r.read_into(out, n)
        return out

    out = read(10)
    compiled.records.track_records(out)
    assert not any(gc.is_tracked(x) or gc.is_tracked(x.headers) for x in out)
    assert not any(gc.is_tracked(h) for x in out for h in x.headers)
    # read() applies the same rule.
    r = compiled.records.RecordReader(data, 10, 0, 0, None, ConsumerRecord, "t", 0,
                                      "CreateTime", True)
    assert not any(gc.is_tracked(x) for x in r.read(10))

    class Value:
        pass

    # Deserializers' keys and values (the fetcher remakes the record around
    # them): records that must stay tracked, whatever track_records does.
    out = read(4)
    value = Value()
    out[2] = out[2]._replace(value=value)
    out[3] = out[3]._replace(key={"k": 1})
    compiled.records.track_records(out)
    assert [gc.is_tracked(x) for x in out] == [False, False, True, True]
    value.record = out[2]          # a cycle: record -> value -> record
    gone = weakref.ref(value)
    del out, value
    gc.collect()
    assert gone() is None


def test_decoded_records_are_named(impl):
    recs = sample_records(3)
    data = impl.records.encode_records(recs, recs[0][0])
    got = impl.records.decode_records(data, 3, 7, recs[0][0], None)
    assert [type(x) for x in got] == [R.DecodedRecord] * 3
    assert [(x.offset, x.timestamp, x.key, x.value, x.headers) for x in got] == \
        [tuple(x) for x in got]
    assert [x.offset for x in got] == [7, 8, 9] and got[0].key == recs[0][1]
    legacy = R.encode_legacy_message(5, b"k", b"v", magic=1, timestamp=42)
    (batch,) = R.iter_batches(legacy)
    assert batch.records() == [R.DecodedRecord(5, 42, b"k", b"v", [])]


def test_decode_records_hands_out_gc_tracked_records(impl_pair):
    # decode_records (RecordBatch.records()) allocates DecodedRecords as
    # PyTuple_New does and tracks each once filled: a record holds its
    # headers list, so a cycle through it must be found by the collector.
    import gc
    import weakref
    _, compiled = impl_pair
    recs = sample_records(10)
    data = compiled.records.encode_records(recs, 0)
    got = compiled.records.decode_records(data, 10, 0, 0, None)
    assert [(r.offset, r.key, r.value) for r in got] == [(i, r[1], r[2]) for i, r in enumerate(recs)]
    assert all(gc.is_tracked(r) and gc.is_tracked(r.headers) for r in got)

    class Marker:
        pass
    marker = Marker()
    alive = weakref.ref(marker)
    first = got[0]
    first.headers.append(("self", first))    # record -> headers -> record
    first.headers.append(("marker", marker))
    del got, first, marker
    gc.collect()
    assert alive() is None, "a cycle through a decoded record's headers was not collected"
