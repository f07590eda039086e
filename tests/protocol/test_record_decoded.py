"""The decoded record (``DecodedRecord``, what ``decode_records`` and
``RecordBatch.records()`` return one of per record): its interface in both
twins, and the compiled twin's allocation of it (the tuple free list, built
untracked and tracked once handed out) freeing what it allocates."""
import collections
import copy
import gc
import pickle
import sys
import tracemalloc
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kchannel.protocol import records as R
from kchannel.protocol.records.record import DecodedRecord

_FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def _decode(impl, recs, base_offset=7):
    data = impl.records.encode_records(recs, recs[0][0])
    return impl.records.decode_records(data, len(recs), base_offset, recs[0][0], None)


def _sample(n=4):
    return [(1_700_000_000_000 + i, b"k%d" % i if i % 2 else None, b"v" * i,
             [("h", b"x"), ("null", None)] if i % 2 == 0 else []) for i in range(n)]


def test_decoded_record_interface(impl):
    recs = _sample(4)
    got = _decode(impl, recs)
    r = got[2]
    fields = (9, recs[2][0], None, b"vv", [("h", b"x"), ("null", None)])
    assert type(r) is DecodedRecord and isinstance(r, DecodedRecord) and isinstance(r, tuple)
    assert R.DecodedRecord is DecodedRecord
    # names, unpacking, indexing, slicing, len, iteration
    assert (r.offset, r.timestamp, r.key, r.value, r.headers) == fields
    offset, ts, key, value, headers = r
    assert (offset, ts, key, value, headers) == fields
    assert (r[0], r[1], r[2], r[3], r[4], r[-1]) == fields + (fields[4],)
    assert r[1:3] == fields[1:3] and type(r[1:3]) is tuple
    assert len(r) == 5 and list(r) == list(fields)
    # == and ordering with a plain tuple, either side; hash of an equal tuple
    assert r == fields and fields == r and not (r != fields)
    assert r == DecodedRecord(*fields)
    assert got[0] < got[1]
    hashable = got[1]._replace(headers=())
    assert hash(hashable) == hash(tuple(hashable))
    # NamedTuple's own API
    assert DecodedRecord._fields == ("offset", "timestamp", "key", "value", "headers")
    assert r._asdict() == dict(zip(DecodedRecord._fields, fields))
    assert type(r._replace(key=b"k")) is DecodedRecord and r._replace(key=b"k").key == b"k"
    assert repr(r) == ("DecodedRecord(offset=9, timestamp=%d, key=None, value=b'vv', "
                       "headers=[('h', b'x'), ('null', None)])" % recs[2][0])
    # pickling and copying keep the type
    for back in (pickle.loads(pickle.dumps(r)), copy.copy(r), copy.deepcopy(r)):
        assert type(back) is DecodedRecord and back == r
    # the headers list is the record's own (mutable, as before the named type)
    r.headers.append(("more", None))
    assert got[2].headers[-1] == ("more", None)


@settings(max_examples=150, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(recs=st.lists(st.tuples(
    st.integers(0, 2 ** 40), st.one_of(st.none(), st.binary(max_size=20)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
             max_size=3)), min_size=1, max_size=20),
    base=st.integers(0, 2 ** 40))
def test_decoded_records_round_trip(impl, recs, base):
    got = _decode(impl, recs, base)
    assert all(type(x) is DecodedRecord for x in got)
    assert [(x.offset, x.timestamp, x.key, x.value, x.headers) for x in got] == \
        [(base + i, ts, k, v, list(h)) for i, (ts, k, v, h) in enumerate(recs)]


# -- the compiled twin's allocation --------------------------------------------

class Sub(DecodedRecord):
    """An application's subclass (module level: picklable)."""

    def total(self):
        return self.offset + self.timestamp


def test_decoded_records_and_their_fields_are_freed(impl_pair):
    # The compiled twin hands DecodedRecords back to the tuple free list
    # (DecodedRecord's dealloc, installed on first use): each record's
    # fields and its reference to its type are released, and nothing grows
    # with the records decoded.
    _, compiled = impl_pair
    recs = [(1_700_000_000_000 + i, b"k", b"x" * 100, []) for i in range(2000)]
    data = compiled.records.encode_records(recs, 0)

    def decode():
        return compiled.records.decode_records(data, len(recs), 0, 0, None)

    got = decode()
    headers = got[5].headers
    assert sys.getrefcount(headers) == 3       # got[5], headers, the argument
    del got
    assert sys.getrefcount(headers) == 2, "a freed record did not release its fields"
    del headers
    refs = sys.getrefcount(DecodedRecord)
    for _ in range(5):
        decode()
    assert sys.getrefcount(DecodedRecord) == refs, "records' references to their type leak"
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(3):
            decode()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(30):
            decode()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # 30 x 2000 records kept would be over 10 MB.
    assert grown < 100_000, f"{grown} bytes left behind by 60,000 freed records"


def test_decoded_record_subclasses_and_python_made_records_still_free(impl_pair):
    # What the compiled twin's dealloc meets besides its own records:
    # records made in Python (the pure twin's, the application's) and
    # instances of an application's subclass (with a __dict__, which
    # subtype_dealloc clears before reaching it).
    pure, compiled = impl_pair
    recs = _sample(3)
    _decode(compiled, recs)                   # installs it

    class Marker:
        pass

    marker, noted = Marker(), Marker()
    alive, noted_alive = weakref.ref(marker), weakref.ref(noted)
    sub_refs = sys.getrefcount(Sub)
    s = Sub(1, 2, None, b"v", [("m", marker)])
    s.note = noted
    assert (s.total(), s.note, s == (1, 2, None, b"v", [("m", marker)])) == (3, noted, True)
    plain = Sub(1, 2, None, b"v", [])
    assert type(pickle.loads(pickle.dumps(plain))) is Sub and pickle.loads(pickle.dumps(plain)) == plain
    del s, marker, noted, plain
    assert alive() is None and noted_alive() is None
    assert sys.getrefcount(Sub) == sub_refs

    class Slotted(DecodedRecord):
        __slots__ = ()

    refs = sys.getrefcount(Slotted), sys.getrefcount(DecodedRecord)
    made = [Slotted(i, i, None, None, []) for i in range(100)]
    made += [DecodedRecord(i, i, None, None, []) for i in range(100)]
    made += _decode(pure, recs)
    made += [tuple.__new__(DecodedRecord, ()), tuple.__new__(DecodedRecord, range(7))]
    assert made[150] == (50, 50, None, None, []) and len(made[-1]) == 7
    del made
    assert (sys.getrefcount(Slotted), sys.getrefcount(DecodedRecord)) == refs


def test_a_del_added_to_decoded_record_runs(impl_pair):
    # The compiled twin's dealloc calls a finalizer the class gains later,
    # as subtype_dealloc would.
    _, compiled = impl_pair
    got = _decode(compiled, _sample(3))
    seen = []
    DecodedRecord.__del__ = lambda self: seen.append(self.offset)
    try:
        del got
    finally:
        del DecodedRecord.__del__
    assert sorted(seen) == [7, 8, 9]
    del seen[:]
    _decode(compiled, _sample(3))
    assert seen == []


def test_decoded_records_are_built_untracked_then_tracked(impl_pair):
    # decode_records builds its records (and their headers lists) untracked
    # by the collector and tracks them once all are built: the young
    # collections that a batch's allocations set off then do not find the
    # batch's earlier records alive and promote them (which made full
    # collections of the whole heap every few calls).  Every record is
    # still handed out tracked, in the youngest generation.
    _, compiled = impl_pair
    recs = [(i, None, b"x" * 10, []) for i in range(3000)]
    data = compiled.records.encode_records(recs, 0)
    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(100, 10, 10)
    try:
        got = compiled.records.decode_records(data, len(recs), 0, 0, None)
        young = {id(o) for o in gc.get_objects(generation=0)}
    finally:
        gc.set_threshold(*threshold)
    assert all(gc.is_tracked(r) and gc.is_tracked(r.headers) for r in got)
    promoted = sum(id(r) not in young for r in got)
    if sys.version_info >= (3, 12):
        # 3.12 and later run a due collection at the interpreter's next
        # check (the eval breaker), not inside the allocation that made it
        # due: no collection runs while decode_records builds, so the
        # records are at most promoted together, once all are built.
        assert promoted in (0, len(got)), f"{promoted} of {len(got)} records promoted"
    else:
        assert promoted == 0, f"{promoted} of {len(got)} records promoted while being decoded"


# -- the same allocation for the consumer's record type ------------------------

_Nine = collections.namedtuple(
    "_Nine", "topic partition offset timestamp timestamp_type key value headers leader_epoch")


class NineRecord(_Nine):
    """Shaped as the consumer's ConsumerRecord: a subclass (no slots of its
    own) of a namedtuple of the nine fields."""

    __slots__ = ()


class NineWithDict(_Nine):
    """A ``cls`` whose instances have a __dict__: not the bare tuple layout,
    allocated as before."""


@pytest.mark.parametrize("cls", [NineRecord, _Nine, NineWithDict])
def test_reader_records_of_a_named_type_are_freed(impl_pair, cls):
    # RecordReader / PartitionReader records of a plain named tuple class
    # (the consumer's ConsumerRecord is one) come from and go back to the
    # tuple free list in the compiled twin; other classes are allocated as
    # before.  Either way: right type and fields, nothing left behind.
    pure, compiled = impl_pair
    recs = [(1_700_000_000_000 + i, b"k", b"x" * 50, [("h", b"v")] if i % 2 else [])
            for i in range(500)]
    data = compiled.records.encode_records(recs, 1_700_000_000_000)

    def read(impl, tuple_headers=False):
        r = impl.records.RecordReader(data, len(recs), 10, 1_700_000_000_000, None, cls,
                                      "t", 3, "CreateTime", tuple_headers)
        return r.read(len(recs))

    for tuple_headers in (False, True):
        got = read(compiled, tuple_headers)
        assert all(type(x) is cls for x in got)
        assert got == read(pure, tuple_headers)
        assert got[1] == ("t", 3, 11, recs[1][0], "CreateTime", b"k", b"x" * 50,
                          (("h", b"v"),) if tuple_headers else [("h", b"v")], None)
        assert got[1].offset == 11 and pickle.loads(pickle.dumps(got[1])) == got[1]
    got = read(compiled)
    headers = got[7].headers
    assert sys.getrefcount(headers) == 3       # got[7], headers, the argument
    del got
    assert sys.getrefcount(headers) == 2, "a freed record did not release its fields"
    refs = sys.getrefcount(cls)
    for _ in range(5):
        read(compiled)
        read(compiled, True)
    assert sys.getrefcount(cls) == refs, "records' references to their type leak"
    gc.collect()
    tracemalloc.start()
    try:
        read(compiled)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(40):
            read(compiled)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes left behind by 20,000 freed records"

    class Sub(cls):
        pass

    class Note:
        pass

    # A subclass of an installed class: freed as before, its __dict__ too.
    marker = Sub(*range(9))
    marker.note = Note()
    note = weakref.ref(marker.note)
    sub_refs = sys.getrefcount(Sub)
    made = [Sub(*range(9)) for _ in range(10)]
    del made, marker
    assert note() is None and sys.getrefcount(Sub) == sub_refs - 1


@pytest.mark.skipif(sys.version_info >= (3, 14),
                    reason="up to 3.13 only (kc_bare_tuple_type: 3.14's tuples cache their hash)")
def test_named_records_come_from_the_tuple_free_list(impl_pair):
    # The compiled twin's named records (DecodedRecord, a plain named
    # ``cls`` such as ConsumerRecord) are popped from the tuple free list,
    # which a collection does not count: the young generation's count grows
    # only by the records' headers lists (decode_records), not by the
    # records (it grew by both, each record allocated as its type).
    _, compiled = impl_pair
    recs = [(i, None, b"x", []) for i in range(500)]
    data = compiled.records.encode_records(recs, 0)

    def counted(read):
        read()                       # dropped at once: fills the free list
        gc.disable()
        try:
            before = gc.get_count()[0]
            got = read()
            grown = gc.get_count()[0] - before
        finally:
            gc.enable()
        assert len(got) == 500
        return grown

    assert counted(lambda: compiled.records.RecordReader(
        data, 500, 0, 0, None, NineRecord, "t", 0, "CreateTime", True).read(500)) < 50
    assert counted(lambda: compiled.records.decode_records(data, 500, 0, 0, None)) < 500 + 50
