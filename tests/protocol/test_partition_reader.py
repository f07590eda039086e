"""PartitionReader (both twins, ``impl.records``): the consumer's walk of one
partition's fetched batches, held to what ``iter_batches`` and the batch
objects say about the same bytes, and the twins to each other on mutated
input."""
import collections
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.errors import CorruptRecordError
from kchannel.protocol import records as R

_FIXTURE_OK = [HealthCheck.function_scoped_fixture]

Rec = collections.namedtuple("Rec", "topic partition offset timestamp timestamp_type key value "
                                    "headers leader_epoch")


def _batch(base, n, **kw):
    recs = [(1_700_000_000_000 + base + i, b"k%d" % (base + i) if i % 2 else None,
             b"v" * ((base + i) % 40), [("h", b"x")] if i % 3 == 0 else [])
            for i in range(n)]
    return R.encode_batch(recs, base_offset=base, **kw)


def _plain_batches(sizes, start=0):
    out, base = [], start
    for n in sizes:
        out.append(_batch(base, n))
        base += n
    return b"".join(out)


def _oracle(buf, position):
    """What the batch objects say the consumer reads from ``position`` on:
    (offset, key, value, timestamp type) of every data record at or past
    it, and the position after the walk (at the end, as Kafka's
    CompletedFetch: at least the last batch's next offset)."""
    out = []
    last = -1
    for batch in R.iter_batches(buf):
        batch.ensure_valid()
        last = batch.next_offset
        if batch.next_offset <= position:
            continue
        if batch.is_control:
            position = max(position, batch.next_offset)
            continue
        for r in batch.records():
            if r.offset >= position:
                out.append((r.offset, r.key, r.value, str(batch.timestamp_type)))
                position = r.offset + 1
    return out, max(position, last)


def _walk(mod, buf, position, sizes, check_crcs=True, read_committed=False, steps=400,
          tuple_headers=False):
    """Every call's outcome until the walk ends: ("ok", records, position,
    special) or ("corrupt", message, position); special batches skipped."""
    reader = mod.records.PartitionReader(buf, Rec, "t", 3, check_crcs, read_committed,
                                         tuple_headers)
    trace = []
    for i in range(steps):
        out = []
        try:
            k = reader.read_into(out, sizes[i % len(sizes)], position)
        except CorruptRecordError as exc:
            mod.records.track_records(out)
            assert out == []
            position = reader.position
            trace.append(("corrupt", str(exc), position))
            continue
        mod.records.track_records(out)
        assert k == len(out) <= sizes[i % len(sizes)]
        position = reader.position
        trace.append(("ok", [tuple(r) for r in out], position, reader.special))
        if not k and reader.special is None:
            break
    return trace


def _records_of(trace):
    return [(r[2], r[5], r[6], r[4]) for step in trace if step[0] == "ok" for r in step[1]]


@pytest.mark.parametrize("position", [0, 1, 7, 13, 29, 30, 31])
@pytest.mark.parametrize("sizes", [[1], [4], [500], [3, 11]])
def test_reads_what_the_batch_objects_read(impl, position, sizes):
    # Batches of 1, 5, 7, 0 (a compacted-away batch still moves offsets)
    # and 17 records; position 7 and 13 fall inside batches (a seek).
    buf = _plain_batches([1, 5, 7]) + _batch(13, 17)
    want, end = _oracle(buf, position)
    trace = _walk(impl, buf, position, sizes)
    assert _records_of(trace) == want
    assert trace[-1][0] == "ok" and trace[-1][2] == end and trace[-1][3] is None
    records = [r for step in trace for r in step[1]]
    assert all(r[0] == "t" and r[1] == 3 and r[8] is None and r[7] in ([], [("h", b"x")])
               for r in records)


def test_records_are_consumer_records_of_each_batch_timestamp_type(impl):
    buf = (_batch(0, 2) + R.encode_batch([(5, None, b"a", [])], base_offset=2,
                                         timestamp_type=R.TimestampType.LOG_APPEND_TIME,
                                         max_timestamp=99))
    out = []
    reader = impl.records.PartitionReader(buf, Rec, "t", 3)
    assert reader.read_into(out, 10, 0) == 3
    impl.records.track_records(out)
    assert all(type(r) is Rec for r in out)
    assert [(r.offset, r.timestamp_type) for r in out] == [
        (0, "CreateTime"), (1, "CreateTime"), (2, "LogAppendTime")]
    assert out[2].timestamp == 99       # LogAppendTime: the batch's max timestamp
    assert out[0].headers == [("h", b"x")] and out[1].key == b"k1"


def test_control_and_empty_batches_move_the_position(impl):
    marker = R.encode_batch([(10, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5), [])],
                            base_offset=3, producer_id=7, producer_epoch=0,
                            is_transactional=True, is_control=True)
    data = R.encode_batch([(1, None, b"a", [])] * 3, base_offset=0, producer_id=7,
                          producer_epoch=0, base_sequence=0, is_transactional=True)
    out = []
    reader = impl.records.PartitionReader(data + marker, Rec, "t", 0)
    assert reader.read_into(out, 10, 0) == 3 and reader.position == 4
    assert reader.special is None
    # A batch of no records (all compacted away) with a last offset delta.
    empty = bytearray(_batch(4, 1))
    empty[23:27] = struct.pack(">i", 5)
    header = bytes(empty[:61])
    empty = bytearray(header)
    empty[8:12] = struct.pack(">i", 61 - 12)
    empty[57:61] = struct.pack(">i", 0)
    empty[17:21] = struct.pack(">I", R.crc32c(bytes(empty[21:])))
    reader = impl.records.PartitionReader(bytes(empty) + _batch(10, 2), Rec, "t", 0)
    out = []
    assert reader.read_into(out, 1, 4) == 1 and out[0].offset == 10 and reader.position == 11


def _compacted(base, kept, last_delta, **kw):
    """A v2 batch as Kafka's log cleaner leaves it when it removed the last
    records: the first ``kept`` records, the last offset ``base +
    last_delta`` of the original batch (message format v2 keeps it)."""
    raw = bytearray(_batch(base, kept, **kw))
    raw[23:27] = struct.pack(">i", last_delta)
    raw[17:21] = struct.pack(">I", R.crc32c(bytes(raw[21:])))
    return bytes(raw)


def test_end_of_the_records_is_the_last_batch_next_offset(impl):
    # Kafka's CompletedFetch: when the walk reaches the end, the position
    # is the last batch's next offset, past the records compaction
    # removed from its end; reading the same batch again from there would
    # find nothing new (a consumer stuck on it for good).
    last = _compacted(3, 2, 6)            # records 3, 4; offsets up to 9
    assert next(iter(R.iter_batches(last))).next_offset == 10
    for tail in (b"", _batch(10, 2)[:30]):      # (a partial batch after it)
        reader = impl.records.PartitionReader(_batch(0, 3) + last + tail, Rec, "t", 0)
        out = []
        assert reader.read_into(out, 100, 0) == 5 and reader.position == 10
        # From inside the batch's removed records: nothing, and past it.
        reader = impl.records.PartitionReader(last + tail, Rec, "t", 0)
        assert reader.read_into([], 100, 5) == 0 and reader.position == 10
    # Kafka moves there when the walk reaches the end, not before: a call
    # that stops at its record budget is past its last record only.
    reader = impl.records.PartitionReader(_batch(0, 3) + last, Rec, "t", 0)
    out = []
    assert reader.read_into(out, 5, 0) == 5 and reader.position == 5
    assert reader.read_into(out, 5, 5) == 0 and reader.position == 10
    # Not the last batch: the next batch's records move the position on.
    reader = impl.records.PartitionReader(last + _batch(10, 1), Rec, "t", 0)
    out = []
    assert reader.read_into(out, 2, 0) == 2 and reader.position == 5
    assert reader.read_into(out, 2, 5) == 1 and reader.position == 11
    # A batch left to the caller (here compressed) is the caller's to
    # count (kchannel.consumer.fetcher); the end does not move before it.
    reader = impl.records.PartitionReader(_batch(0, 1) + _compacted(
        1, 1, 4, compression=R.CompressionType.GZIP), Rec, "t", 0)
    assert reader.read_into([], 100, 0) == 1 and reader.special is not None
    assert reader.position == 1
    assert reader.read_into([], 100, 2) == 0 and reader.position == 2
    # A corrupt last batch is not stepped over.
    bad = bytearray(last)
    bad[-1] ^= 1
    reader = impl.records.PartitionReader(_batch(0, 3) + bytes(bad), Rec, "t", 0)
    out = []
    assert reader.read_into(out, 100, 0) == 3
    with pytest.raises(CorruptRecordError):
        reader.read_into(out, 100, 3)
    assert reader.read_into(out, 100, 3) == 0 and reader.position == 3


@pytest.mark.parametrize("kind", ["gzip", "legacy", "transactional"])
def test_stops_at_what_it_leaves_to_the_caller(impl, kind):
    if kind == "gzip":
        odd = R.encode_batch([(1, None, b"z", [])] * 2, base_offset=3,
                             compression=R.CompressionType.GZIP)
    elif kind == "legacy":
        odd = R.encode_legacy_message(3, None, b"z", magic=1)
    else:
        odd = R.encode_batch([(1, None, b"z", [])] * 2, base_offset=3, producer_id=9,
                             producer_epoch=0, base_sequence=0, is_transactional=True)
    before, after = _plain_batches([3]), _batch(5, 2)
    buf = before + odd + after
    reader = impl.records.PartitionReader(buf, Rec, "t", 0, True, True)
    out = []
    assert reader.read_into(out, 100, 0) == 3
    start, end = reader.special
    assert (start, end) == (len(before), len(before) + len(odd))
    batch = R.batch_at(reader.buffer, start, end)
    assert bytes(reader.buffer[start:end]) == odd and batch.ensure_valid() is None
    # The next call goes on after it.
    assert reader.read_into(out, 100, 5) == 2 and reader.special is None
    assert [r.offset for r in out] == [0, 1, 2, 5, 6] and reader.position == 7
    assert reader.read_into(out, 100, 7) == 0 and reader.special is None


def test_corrupt_batch_after_records_is_raised_by_the_next_call(impl):
    good, bad, last = _batch(0, 3), bytearray(_batch(3, 2)), _batch(5, 1)
    bad[-2] ^= 1
    buf = good + bytes(bad) + last
    reader = impl.records.PartitionReader(buf, Rec, "t", 0)
    out = []
    assert reader.read_into(out, 100, 0) == 3 and reader.position == 3
    with pytest.raises(CorruptRecordError, match="stored crc"):
        reader.read_into(out, 100, 3)
    # The walk goes on after the bad batch, as the consumer does.
    assert reader.read_into(out, 100, 3) == 1 and out[-1].offset == 5
    # check.crcs=false reads it.
    reader = impl.records.PartitionReader(buf, Rec, "t", 0, False)
    out = []
    assert reader.read_into(out, 100, 0) == 6


@pytest.mark.parametrize("field,value,match", [
    (slice(8, 12), struct.pack(">i", 13), "minimum record overhead"),
    (slice(8, 12), struct.pack(">i", 30), "size of the batch 42 is less than the minimum 61"),
    (slice(16, 17), b"\x03", "Invalid magic found in record: 3"),
])
def test_framing_errors_end_the_walk_as_iter_batches_does(impl, field, value, match):
    bad = bytearray(_batch(0, 2))
    bad[field] = value
    with pytest.raises(CorruptRecordError, match=match):
        list(R.iter_batches(bytes(bad)))
    reader = impl.records.PartitionReader(bytes(bad) + _batch(2, 1), Rec, "t", 0)
    with pytest.raises(CorruptRecordError, match=match):
        reader.read_into([], 10, 0)
    assert reader.read_into([], 10, 0) == 0 and reader.special is None


def test_partial_trailing_batch_ends_the_walk(impl):
    a, b = _batch(0, 2), _batch(2, 3)
    for cut in (1, 11, 12, 16, 17, 60, len(b) - 1):
        out = []
        reader = impl.records.PartitionReader(memoryview(a + b[:cut]), Rec, "t", 0)
        assert reader.read_into(out, 10, 0) == 2 and reader.position == 2
        assert reader.read_into(out, 10, 2) == 0 and reader.special is None


_batch_spec = st.tuples(st.integers(0, 6), st.sampled_from(["plain", "control", "gzip", "lat"]))


@settings(max_examples=100, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(specs=st.lists(_batch_spec, min_size=1, max_size=5), position=st.integers(0, 25),
       sizes=st.lists(st.integers(1, 9), min_size=1, max_size=3),
       mutate=st.booleans(), pos=st.integers(0, 10 ** 6), byte=st.integers(0, 255),
       cut=st.integers(0, 40), check=st.booleans(), committed=st.booleans(),
       tuple_headers=st.booleans())
def test_twins_agree_on_any_walk(impl_pair, specs, position, sizes, mutate, pos, byte, cut,
                                 check, committed, tuple_headers):
    pure, compiled = impl_pair
    parts, base = [], 0
    for n, kind in specs:
        n = max(n, 1)
        if kind == "control":
            parts.append(R.encode_batch([(1, b"\x00\x00\x00\x01", b"\x00" * 6, [])],
                                        base_offset=base, producer_id=4, producer_epoch=0,
                                        is_transactional=True, is_control=True))
            n = 1
        elif kind == "gzip":
            parts.append(_batch(base, n, compression=R.CompressionType.GZIP))
        elif kind == "lat":
            parts.append(_batch(base, n, timestamp_type=R.TimestampType.LOG_APPEND_TIME))
        else:
            parts.append(_batch(base, n))
        base += n
    buf = bytearray(b"".join(parts))
    if mutate:
        buf[pos % len(buf)] = byte
    buf = bytes(buf[:max(0, len(buf) - cut)])
    a = _walk(pure, buf, position, sizes, check, committed, tuple_headers=tuple_headers)
    b = _walk(compiled, buf, position, sizes, check, committed, tuple_headers=tuple_headers)
    assert a == b
    if tuple_headers:
        assert all(type(r[7]) is tuple for step in a if step[0] == "ok" for r in step[1])
    # (Under read_committed the control batches, which carry a producer id,
    # are the caller's: the oracle is the read_uncommitted walk.)
    if not mutate and not cut and not committed and \
            all(k in ("plain", "lat", "control") for _, k in specs):
        want, end = _oracle(buf, position)
        assert _records_of(a) == want and a[-1][2] == end


def test_records_sharing_a_millisecond_keep_their_own_timestamps(impl):
    # (The compiled decoder reuses the previous record's timestamp int when
    # the delta repeats.)
    stamps = [5, 5, 6, 5, 5, 9, 9]
    buf = R.encode_batch([(t, None, b"v", []) for t in stamps], base_offset=0)
    for n in (1, 2, 7):
        out, reader, position = [], impl.records.PartitionReader(buf, Rec, "t", 0), 0
        while reader.read_into(out, n, position):
            position = reader.position
        impl.records.track_records(out)
        assert [r.timestamp for r in out] == stamps


def test_tuple_headers_are_the_list_headers_as_tuples(impl):
    # (kchannel.aio's records: headers a tuple of pairs, as aiokafka's.)
    buf = _plain_batches([4, 3])
    lists, tuples = [], []
    impl.records.PartitionReader(buf, Rec, "t", 0).read_into(lists, 10, 0)
    impl.records.PartitionReader(buf, Rec, "t", 0, True, False, True).read_into(tuples, 10, 0)
    impl.records.track_records(lists)
    impl.records.track_records(tuples)
    assert [r.headers for r in tuples] == [tuple(r.headers) for r in lists]
    assert [r[:7] for r in tuples] == [r[:7] for r in lists]


# Lengths and deltas on each side of the varint sizes (1 byte up to 63, 2 up
# to 8191, then 3): the compiled decoder reads one- and two-byte varints
# inline and leaves longer ones, and every malformed one, to its general
# decoder.
_EDGE = [0, 1, 63, 64, 65, 127, 128, 8191, 8192, 8193, 70000]


def _edge_batch():
    recs = []
    for i, n in enumerate(_EDGE):
        recs.append((1_700_000_000_000 + [0, -1, 63, -64, 64, 8191, -8192, 8192, 10 ** 9][i % 9],
                     None if i % 3 == 0 else b"k" * _EDGE[-1 - i],
                     None if i % 4 == 1 else b"v" * n,
                     [("h" * (n % 70), b"x" * n), ("e", None)] if i % 2 else []))
    return recs, R.encode_batch(recs, base_offset=8190)


def test_fields_of_every_varint_size_decode_as_encoded(impl):
    recs, buf = _edge_batch()
    for n in (1, 5, 100):
        out, reader, position = [], impl.records.PartitionReader(buf, Rec, "t", 0), 0
        while reader.read_into(out, n, position):
            position = reader.position
        impl.records.track_records(out)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == [
            (8190 + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(recs)]
        assert position == 8190 + len(recs)


def test_twins_agree_on_every_byte_of_a_batch_of_two_byte_varints_mutated(impl_pair):
    # Each byte of the records of a batch whose sizes and lengths take two
    # bytes, set to values that end, continue or overflow a varint: the
    # compiled decoder's inline path and its fallback give what the pure
    # twin gives, records or error alike.
    pure, compiled = impl_pair
    recs = [(1_700_000_000_000 + 70 * i, b"k" * 70 if i else None, b"v" * (100 + i),
             [("hh", b"x" * 65)] if i == 1 else []) for i in range(3)]
    good = R.encode_batch(recs, base_offset=5)
    for pos in range(61, len(good)):
        for byte in (0x00, 0x01, 0x7F, 0x80, 0x81, 0xFF):
            buf = bytearray(good)
            buf[pos] = byte
            buf = bytes(buf)
            a = _walk(pure, buf, 0, [2], check_crcs=False)
            b = _walk(compiled, buf, 0, [2], check_crcs=False)
            assert a == b, (pos, byte)


def test_records_and_their_headers_are_tracked_once_handed_out(impl):
    # (The compiled decoder makes records and headers lists untracked by the
    # garbage collector, in one step each; track_records tracks them.)
    import gc
    buf = _plain_batches([4])
    out = []
    impl.records.PartitionReader(buf, Rec, "t", 0).read_into(out, 10, 0)
    impl.records.track_records(out)
    assert len(out) == 4 and all(type(r) is Rec and len(r) == 9 for r in out)
    assert all(gc.is_tracked(r) and gc.is_tracked(r.headers) for r in out)
    # A cycle through a record's headers list is collected.
    r = out.pop()
    r.headers.append(r)
    del r
    gc.collect()
    assert Rec(*out[0]) == out[0] and hash(out[0][:7]) == hash(tuple(out[0][:7]))
