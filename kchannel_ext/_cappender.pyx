# cython: language_level=3, boundscheck=False, wraparound=True, cdivision=True
"""The producer's send fast path, compiled twin of
``kchannel.producer._appender_py`` (same class, same behaviour; read that
module's docstring for what takes the fast path and why).

What the compiled twin saves per record: attribute lookups (C fields; a
batch's and a future's slots at their offsets; the accumulator's ``closed``,
the Sender's ``fatal_error`` and the metadata's ``cluster`` read again only
when their object's dict changed), the wall-clock read (``clock_gettime``
instead of ``time.time()``), the murmur2 call (the hash inline in C, from
``kchannel_ext/include/kchannel/_murmur2.pxd``, as ``kchannel._cpartitioner``
computes it), the header walk, and the accumulator's lock when no thread
holds it: the record joins its batch in a section where no Python code runs
and no object the garbage collector tracks is made (the record, its future
and its sizes are made before it), so holding the GIL is holding the lock
there (see ``Appender.send``).  When the Sender (or any thread) holds the
lock, it is taken as before.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItemWithError
from cpython.pycapsule cimport PyCapsule_New
from cpython.list cimport PyList_AsTuple, PyList_GET_ITEM, PyList_GET_SIZE, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsSsize_t
from cpython.tuple cimport PyTuple_GET_SIZE
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF, Py_XDECREF, _Py_REFCNT
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport int64_t, uint64_t
from posix.time cimport clock_gettime, timespec, CLOCK_REALTIME

from kchannel._crecords cimport QueuedRecord
from kchannel._murmur2 cimport murmur2_ptr
from kchannel._slots cimport PyMemberDescr_Type, slot_offset
# (a slot read at its offset, borrowed; written with a new reference)
from kchannel._slots cimport slot_get as _slot, slot_put as _put

from kchannel.client.metadata import TopicPartition
from kchannel.log import get_logger
from kchannel.producer.accumulator import (FutureRecordMetadata, ProducerBatch,
                                          RECORD_OVERHEAD_EXTRA_MAX, RecordMetadata)
from kchannel.protocol.records import RECORD_BATCH_OVERHEAD
from kchannel.utils import now_ms as _now_ms_py

import _thread
_LockType = _thread.LockType

__all__ = ["Appender", "run_callbacks", "track_batch"]

# A record's future is made by its type's tp_new (object_new) directly:
# the class must not define a __new__ of its own.
if FutureRecordMetadata.__new__ is not object.__new__:
    raise ImportError("FutureRecordMetadata defines __new__: the pure appender is used")

cdef extern from "Python.h":
    int PyUnicode_IS_ASCII(object o)
    PyObject *Py_False
    PyObject *Py_None
    # A C-level data descriptor's getter (a getset_descriptor: a compiled
    # class's ``cdef public`` field; a member_descriptor: a __slots__ slot).
    ctypedef struct PyGetSetDef:
        object (*get)(object, void *)
        void *closure
    ctypedef struct PyGetSetDescrObject:
        PyGetSetDef *d_getset
    ctypedef struct PyMemberDef:
        pass
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    object PyMember_GetOne(const char *, PyMemberDef *)
    void PyObject_GC_UnTrack(void *)
    void PyObject_GC_Track(void *)
    int PyObject_GC_IsTracked(object)

_GetSetDescriptor = type(type.__dict__["__name__"])
_MemberDescriptor = type(type.__dict__["__basicsize__"])

# run_callbacks: a RecordMetadata per record, made as object.__new__ makes it
# (the type's tp_new) and its six __slots__ filled in place at their
# offsets, read from the class's member descriptors once here; when they
# are not plain object slots (the class changed), through its constructor.
_log = get_logger("kchannel.producer.accumulator")
_MD_FIELDS = ("topic", "partition", "offset", "timestamp", "serialized_key_size",
              "serialized_value_size")
cdef Py_ssize_t _md_offsets[6]
cdef bint _md_in_place = True
cdef tuple _EMPTY = ()


cdef _init_md_offsets():
    global _md_in_place
    for j, name in enumerate(_MD_FIELDS):
        try:
            _md_offsets[j] = slot_offset(RecordMetadata, name)
        except ImportError:
            _md_in_place = False
            return


_init_md_offsets()


cdef inline void _put_changed(object obj, Py_ssize_t offset, object value) noexcept:
    """_put, unless the slot already holds ``value`` itself."""
    if (<PyObject **>((<char *><PyObject *>obj) + offset))[0] != <PyObject *>value:
        _put(obj, offset, value)


cdef inline void _track(object batch) noexcept:
    if not PyObject_GC_IsTracked(batch):
        PyObject_GC_Track(<PyObject *>batch)


def track_batch(batch):
    """See the pure twin: a batch this module opened with no callback (see
    _open) back on the garbage collector's lists, before a callback or a
    done callback is attached to it."""
    if type(batch) is not _ProducerBatch:
        raise TypeError("track_batch takes a ProducerBatch")
    _track(batch)


def run_callbacks(list callbacks, topic, partition, int64_t base_offset,
                  int64_t log_append_time, list records, list sizes):
    """See the pure twin (``kchannel.producer._appender_py``).

    A callback that did not keep its RecordMetadata (the usual case: only
    this loop still holds it once the callback returned) leaves it to the
    next record, refilled: no allocation, deallocation and garbage
    collector count per record.  One still held anywhere is never touched
    (the class has no __weakref__ slot: nothing else can see it)."""
    cdef Py_ssize_t i = 0
    cdef object md = None, callback, sz, ts, append_ts = log_append_time
    cdef PyTypeObject *md_type = <PyTypeObject *>RecordMetadata
    # (the list's length read at each step: a callback could change it)
    while i < PyList_GET_SIZE(callbacks):
        if PyList_GET_ITEM(callbacks, i) == Py_None:
            i += 1
            continue
        callback = <object>PyList_GET_ITEM(callbacks, i)
        sz = sizes[i]
        if log_append_time >= 0:
            ts = append_ts
        else:
            ts = (<QueuedRecord?>records[i]).timestamp
        if _md_in_place:
            if md is None or _Py_REFCNT(<PyObject *>md) != 1:
                md = md_type.tp_new(RecordMetadata, <PyObject *>_EMPTY, NULL)
                _put(md, _md_offsets[0], topic)
                _put(md, _md_offsets[1], partition)
            # The offset int of the metadata refilled, when only it holds
            # that int (the callback kept neither), given its new value in
            # place (kc_int_set): no int made and freed per record (~150
            # instructions: offsets are past the cached small ints).
            if not (_in_place and base_offset >= 0 and
                    kc_int_set(_slot(md, _md_offsets[2]), base_offset + i)):
                _put(md, _md_offsets[2], base_offset + i if base_offset >= 0 else -1)
            # (the same objects again, often: records sent within one
            # millisecond share their timestamp's int, records of one shape
            # their sizes tuple; see Appender.send)
            _put_changed(md, _md_offsets[3], ts)
            _put_changed(md, _md_offsets[4], (<tuple?>sz)[0])
            _put_changed(md, _md_offsets[5], (<tuple?>sz)[1])
        else:
            md = RecordMetadata(topic, partition, base_offset + i if base_offset >= 0 else -1,
                                ts, sz[0], sz[1])
        try:
            callback(md, None)
        except Exception:
            _log.exception("Error executing user-provided callback on message for "
                           "topic-partition")
        i += 1

cdef Py_ssize_t _OVERHEAD_EXTRA_MAX = RECORD_OVERHEAD_EXTRA_MAX
cdef Py_ssize_t _BATCH_OVERHEAD = RECORD_BATCH_OVERHEAD
cdef tuple _NO_HEADERS = ()


cdef inline Py_ssize_t _varint_size(uint64_t zigzag) noexcept:
    """Bytes of the varint of a zigzag-encoded value (accumulator's)."""
    cdef Py_ssize_t n = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        n += 1
    return n


cdef inline int64_t _now_ms() noexcept:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef Py_ssize_t _headers_size(object headers, bint *convert):
    """The exact encoded size of ``headers`` (a list or tuple), their count
    included, or -1 when a header needs the full path (see the pure twin); ``convert[0]`` is set
    when an item is a pair but not a tuple."""
    cdef Py_ssize_t size = 0, n = 0, ks
    cdef object k, v, h
    for h in headers:
        n += 1
        if type(h) is tuple and len(<tuple>h) == 2:
            k = (<tuple>h)[0]
            v = (<tuple>h)[1]
        else:
            try:
                k, v = h
            except (TypeError, ValueError):
                return -1
            convert[0] = True
        if type(k) is not str:
            return -1
        if v is None:
            size += 1
        elif type(v) is bytes:
            size += _varint_size(<uint64_t>len(<bytes>v) << 1) + len(<bytes>v)
        else:
            return -1
        if PyUnicode_IS_ASCII(k):
            ks = PyUnicode_GET_LENGTH(k)
        else:
            ks = len((<str>k).encode("utf-8"))
        size += _varint_size(<uint64_t>ks << 1) + ks
    return size + _varint_size(<uint64_t>n << 1)


cdef inline bint _same_items(object headers, tuple cached):
    """Whether the list or tuple ``headers`` holds exactly the objects of
    ``cached`` (identity: the items are tuples of str and bytes, immutable,
    so the same objects are the same headers)."""
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(cached)
    if type(headers) is tuple:
        if headers is cached:
            return True
        if PyTuple_GET_SIZE(headers) != n:
            return False
        for i in range(n):
            if (<tuple>headers)[i] is not cached[i]:
                return False
        return True
    if PyList_GET_SIZE(headers) != n:
        return False
    for i in range(n):
        if (<list>headers)[i] is not cached[i]:
            return False
    return True


# ProducerBatch's and FutureRecordMetadata's slots the per-record path reads
# and writes, at their offsets (as RecordMetadata's above): a generic
# attribute read or write on a __slots__ class costs a type lookup and a
# descriptor call, ~100-150 instructions each, and the path made a dozen of
# them per record.  Both classes are the accumulator's own; one whose slots
# are not plain object slots any more fails this module's import, and the
# pure twin is used (kchannel._impl logs why).
cdef Py_ssize_t _B_RECORDS = slot_offset(ProducerBatch, "records")
cdef Py_ssize_t _B_SIZES = slot_offset(ProducerBatch, "sizes")
cdef Py_ssize_t _B_CALLBACKS = slot_offset(ProducerBatch, "callbacks")
cdef Py_ssize_t _B_ESTIMATED = slot_offset(ProducerBatch, "estimated_size")
cdef Py_ssize_t _B_CLOSED = slot_offset(ProducerBatch, "closed")
cdef Py_ssize_t _F_BATCH = slot_offset(FutureRecordMetadata, "_batch")
cdef Py_ssize_t _F_INDEX = slot_offset(FutureRecordMetadata, "_index")
cdef Py_ssize_t _F_FAILED = slot_offset(FutureRecordMetadata, "_failed")
cdef object _ProducerBatch = ProducerBatch
cdef object _BatchState = ProducerBatch.__base__     # (the senderloop twin's BatchState)
cdef object _FutureRecordMetadata = FutureRecordMetadata


# A batch opened here (Appender._open) is made as object.__new__ makes it and
# its slots filled at their offsets, as ProducerBatch.__init__ and a first
# append leave them, without those two Python calls (and the accumulator's
# append, room_for, record_size and the future's __init__ around them: ~15 k
# instructions a batch).  The slots a new batch sets from its record and
# clock are listed here; every other slot takes the value __init__ gives it,
# read from a batch made by __init__ at import, provided that value is
# immutable (None, a bool, an int, a str): a slot added to ProducerBatch with
# such a default needs no change here, one with a mutable default (a list, a
# dict) turns this path off and every batch is opened by the accumulator's
# append as before.
_B_SET_HERE = ("tp", "created_ms", "records", "callbacks", "sizes", "estimated_size",
               "allocated", "last_attempt_ms", "drained_ms")
cdef Py_ssize_t _B_TP = slot_offset(ProducerBatch, "tp")
cdef Py_ssize_t _B_CREATED = slot_offset(ProducerBatch, "created_ms")
cdef Py_ssize_t _B_ALLOCATED = slot_offset(ProducerBatch, "allocated")
cdef Py_ssize_t _B_LAST_ATTEMPT = slot_offset(ProducerBatch, "last_attempt_ms")
cdef Py_ssize_t _B_DRAINED = slot_offset(ProducerBatch, "drained_ms")
# (offset, value) of the other slots, or None when a default is not immutable;
# the same as C arrays (the values kept alive by the list).
cdef list _b_defaults = []
cdef Py_ssize_t _b_ndefaults = 0
cdef Py_ssize_t _b_off[64]
cdef PyObject *_b_val[64]


cdef _init_batch_defaults():
    global _b_defaults, _b_ndefaults
    names = []
    for klass in ProducerBatch.__mro__:
        if klass is _BatchState:
            # The Sender's side's fields (kchannel.producer._csenderloop):
            # C fields whose defaults the type's tp_new gives (its
            # __cinit__), not slots; the pure twin's class (its slots at
            # offsets of its own) is not filled here: this module fails to
            # import and its pure twin is used.
            if type(klass.__dict__.get("encoded")) is <object>&PyMemberDescr_Type:
                raise ImportError("ProducerBatch's base class is not the compiled BatchState")
            continue
        for name in klass.__dict__.get("__slots__", ()):
            names.append(name)
    template = ProducerBatch(None, 0, 0)
    out = []
    for name in names:
        if name in _B_SET_HERE:
            continue
        try:
            value = getattr(template, name)
        except AttributeError:
            continue          # left unset by __init__: left unset here too
        if value is not None and type(value) not in (bool, int, str):
            _b_defaults = None
            return
        out.append((slot_offset(ProducerBatch, name), value))
    if len(out) > 64:
        _b_defaults = None
        return
    _b_defaults = out
    for i, (off, value) in enumerate(out):
        _b_off[i] = off
        _b_val[i] = <PyObject *>value
    _b_ndefaults = len(out)


_init_batch_defaults()


cdef dict _plain_dict(object obj, tuple names):
    """``obj.__dict__`` when each of ``names`` is a plain instance attribute
    of it (set, and no class in its type's MRO defines it: no property or
    descriptor to honour), else None.  A value read from it is what
    ``getattr`` returns, for a dict lookup instead of a generic attribute
    read (type lookup, then the instance's dict)."""
    d = getattr(obj, "__dict__", None)
    if type(d) is not dict:
        return None
    for name in names:
        if name not in <dict>d:
            return None
        for klass in type(obj).__mro__:
            if name in klass.__dict__:
                return None
    return <dict>d


cdef inline object _attr(dict d, object obj, str name):
    cdef PyObject *v
    if d is not None:
        v = PyDict_GetItemWithError(d, name)
        if v is not NULL:
            return <object>v
    return getattr(obj, name)


# A dict's version tag (CPython 3.11's ma_version_tag: a value no other state
# of any dict ever had, taken anew at each change of that dict), or 0 where
# there is none: a value read from a dict whose tag is unchanged is still
# what it was, for a comparison instead of a lookup per record.
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    #define KC_DICT_VERSION(d) (((PyDictObject *)(d))->ma_version_tag)
    #else
    #define KC_DICT_VERSION(d) ((uint64_t)0)
    #endif
    """
    uint64_t KC_DICT_VERSION(object d) noexcept


# An int only its container holds (reference count 1: no one else can see
# it) is given its new value in place when it fits one digit, instead of a
# new int made and the old one freed (~200 instructions a record for each of
# a batch's estimated_size and the sticky partition's byte count).  CPython
# 3.11's int layout; elsewhere (0) the caller makes a new int.
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    static inline int kc_int_set(PyObject *o, Py_ssize_t v) {
        if (o != NULL && Py_REFCNT(o) == 1 && PyLong_CheckExact(o) && Py_SIZE(o) == 1
                && v > 0 && v < ((Py_ssize_t)1 << PyLong_SHIFT)) {
            ((PyLongObject *)o)->ob_digit[0] = (digit)v;
            return 1;
        }
        return 0;
    }
    #else
    static inline int kc_int_set(PyObject *o, Py_ssize_t v) { return 0; }
    #endif
    """
    bint kc_int_set(PyObject *o, Py_ssize_t v) noexcept


# An int's value read inline when it is a non-negative int of at most one
# digit (CPython 3.11's layout; the counts and sizes read per record are),
# else by PyLong_AsSsize_t (a call, ~25 instructions).
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    #define KC_ONE_DIGIT(o) (PyLong_CheckExact(o) && (Py_SIZE(o) == 0 || Py_SIZE(o) == 1))
    #define KC_DIGIT_VALUE(o) (Py_SIZE(o) ? (Py_ssize_t)((PyLongObject *)(o))->ob_digit[0] : 0)
    #else
    #define KC_ONE_DIGIT(o) 0
    #define KC_DIGIT_VALUE(o) 0
    #endif
    """
    bint KC_ONE_DIGIT(object o) noexcept
    Py_ssize_t KC_DIGIT_VALUE(object o) noexcept


# A non-negative int of at most two digits (a millisecond timestamp is two)
# read inline, else 0 and the caller calls PyLong_AsLongLongAndOverflow
# (~50 instructions a record with an explicit timestamp).
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    static inline int kc_two_digits(PyObject *o, int64_t *out) {
        Py_ssize_t n = Py_SIZE(o);
        const digit *d = ((PyLongObject *)o)->ob_digit;
        if (!PyLong_CheckExact(o) || n < 0 || n > 2)
            return 0;
        *out = n == 2 ? ((int64_t)d[1] << PyLong_SHIFT) | (int64_t)d[0] :
               n == 1 ? (int64_t)d[0] : 0;
        return 1;
    }
    #else
    static inline int kc_two_digits(PyObject *o, int64_t *out) { return 0; }
    #endif
    """
    bint kc_two_digits(object o, int64_t *out) noexcept


cdef inline Py_ssize_t _as_ssize(object o) except? -1:
    if KC_ONE_DIGIT(o):
        return KC_DIGIT_VALUE(o)
    return PyLong_AsSsize_t(o)


# Whether a _thread.lock is held, and taking / releasing a free one, in C
# (kchannel_ext/include/kchannel/_pylock.pxd: CPython 3.11's lockobject)
# instead of calls of its methods (locked(): ~110 instructions a record).
from kchannel._pylock cimport (kc_lock_readable, kc_lock_held, kc_lock_try_acquire,
                               kc_lock_release)


cdef extern from "Python.h":
    # (tp_alloc returns a new reference, or NULL with an exception set)
    ctypedef object (*allocfunc)(PyTypeObject *, Py_ssize_t)
    ctypedef PyObject *(*newfunc)(PyTypeObject *, PyObject *, PyObject *)
    ctypedef struct _TypeAlloc "PyTypeObject":
        allocfunc tp_alloc
        newfunc tp_new
    object PyType_GenericAlloc(PyTypeObject *, Py_ssize_t)


# A record's future made by its type's tp_alloc (what object_new calls, with
# no argument checks before: ~25 instructions a record) when the type's
# tp_new is object_new and its tp_alloc the generic one (a plain
# __slots__ class, as now); else by tp_new as before.
cdef bint _future_alloc = False


cdef _init_future_alloc():
    global _future_alloc
    cdef _TypeAlloc *t = <_TypeAlloc *>_FutureRecordMetadata
    cdef _TypeAlloc *o = <_TypeAlloc *>object
    _future_alloc = t.tp_alloc == <allocfunc>PyType_GenericAlloc and t.tp_new == o.tp_new


_init_future_alloc()


cdef inline object _new_future():
    if _future_alloc:
        return (<_TypeAlloc *>_FutureRecordMetadata).tp_alloc(
            <PyTypeObject *>_FutureRecordMetadata, 0)
    return (<PyTypeObject *>_FutureRecordMetadata).tp_new(_FutureRecordMetadata,
                                                          <PyObject *>_EMPTY, NULL)


# A QueuedRecord made by its type's tp_alloc (zeroed memory) and its four
# fields stored at their offsets, found at import by making one record of
# four distinct objects: not through Cython's tp_new (its vectorcall glue,
# each field set to None and then let go for the record's own: ~60
# instructions a record).  Offsets not found (another layout): tp_new and
# the fields set as before.
cdef Py_ssize_t _r_off[4]
cdef bint _record_alloc = False


cdef _init_record_alloc():
    global _record_alloc
    cdef Py_ssize_t i, off, found = 0
    cdef PyObject *p
    probe = (object(), object(), object(), object())
    rec = QueuedRecord(*probe)
    cdef Py_ssize_t size = (<PyTypeObject *>QueuedRecord).tp_basicsize
    for i in range(4):
        _r_off[i] = -1
        off = sizeof(PyObject)
        while off + <Py_ssize_t>sizeof(PyObject *) <= size:
            p = (<PyObject **>((<char *><PyObject *>rec) + off))[0]
            if p == <PyObject *>probe[i]:
                _r_off[i] = off
                found += 1
                break
            off += sizeof(PyObject *)
    _record_alloc = found == 4 and (<PyTypeObject *>QueuedRecord).tp_itemsize == 0 and \
        (<_TypeAlloc *>QueuedRecord).tp_alloc == <allocfunc>PyType_GenericAlloc


_init_record_alloc()


cdef inline void _set_new(object obj, Py_ssize_t offset, object value) noexcept:
    # (a field of an object just allocated, still NULL)
    Py_INCREF(value)
    (<PyObject **>((<char *><PyObject *>obj) + offset))[0] = <PyObject *>value


cdef inline QueuedRecord _new_record(object timestamp, object key, object value,
                                     object headers):
    cdef QueuedRecord record
    if _record_alloc:
        rec = (<_TypeAlloc *>QueuedRecord).tp_alloc(<PyTypeObject *>QueuedRecord, 0)
        _set_new(rec, _r_off[0], timestamp)
        _set_new(rec, _r_off[1], key)
        _set_new(rec, _r_off[2], value)
        _set_new(rec, _r_off[3], headers)
        return <QueuedRecord>rec
    record = <QueuedRecord>(<PyTypeObject *>QueuedRecord).tp_new(
        QueuedRecord, <PyObject *>_EMPTY, NULL)
    record.timestamp = timestamp
    record.key = key
    record.value = value
    record.headers = headers
    return record


# A deque's last item read from the deque itself (CPython 3.11's
# dequeobject: its right block and index; a block holds 64 items), not by
# len() and a generic dq[-1] (~70 instructions a record); NULL when empty.
# Elsewhere kc_deque_readable() is 0 and dq[-1] is read as before.
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    typedef struct kc_block {
        struct kc_block *leftlink;
        PyObject *data[64];
        struct kc_block *rightlink;
    } kc_block;
    typedef struct {
        PyObject_VAR_HEAD
        kc_block *leftblock;
        kc_block *rightblock;
        Py_ssize_t leftindex;
        Py_ssize_t rightindex;
    } kc_dequeobject;
    #define kc_deque_readable() 1
    #define kc_deque_last(o) (Py_SIZE(o) > 0 ? \
        ((kc_dequeobject *)(o))->rightblock->data[((kc_dequeobject *)(o))->rightindex] : NULL)
    #else
    #define kc_deque_readable() 0
    #define kc_deque_last(o) ((PyObject *)NULL)
    #endif
    """
    bint kc_deque_readable() noexcept
    PyObject *kc_deque_last(object o) noexcept


from collections import deque as _deque_type
cdef object _deque = _deque_type


cdef bint _deque_layout_ok():
    """Whether kc_deque_last reads this interpreter's deques (checked on
    deques across a block boundary, after pops at both ends)."""
    cdef PyObject *o
    if not kc_deque_readable():
        return False
    for n in (1, 2, 63, 64, 65, 130):
        d = _deque(range(1000, 1000 + n + 1))
        d.popleft()
        d.append(object())
        o = kc_deque_last(d)
        if o == NULL or <object>o is not d[-1]:
            return False
        d.pop()
        o = kc_deque_last(d)
        if o == NULL or <object>o is not d[-1]:
            return False
    return kc_deque_last(_deque()) == NULL


cdef bint _c_deque = _deque_layout_ok()


@cython.final
cdef class _Attr:
    """One attribute of one object read per record (``closed``,
    ``fatal_error``, ``cluster``): from the object's dict when
    ``_plain_dict`` allows, and only when the dict changed since the last
    read (see KC_DICT_VERSION); else through ``getattr``."""
    cdef object obj
    cdef str name
    cdef dict d
    cdef uint64_t version
    cdef object value
    # Not in the instance's dict but a C field or slot of its class (the
    # compiled Sender's ``fatal_error``): the descriptor's C getter called
    # directly, not a generic getattr (type lookup, descriptor call: ~250
    # instructions) per record.
    cdef object descr
    cdef PyGetSetDef *getset
    cdef PyMemberDef *member

    def __init__(self, obj, str name):
        self.obj = obj
        self.name = name
        self.d = _plain_dict(obj, (name,))
        self.version = 0
        self.value = None
        self.getset = NULL
        self.member = NULL
        if self.d is None and type(obj).__getattribute__ is object.__getattribute__:
            for klass in type(obj).__mro__:
                descr = klass.__dict__.get(name)
                if descr is None:
                    continue
                # (The first class defining it is what getattr finds: a data
                # descriptor goes before the instance's dict.)
                if type(descr) is _GetSetDescriptor and \
                        (<PyGetSetDescrObject *>descr).d_getset.get != NULL:
                    self.descr = descr
                    self.getset = (<PyGetSetDescrObject *>descr).d_getset
                elif type(descr) is _MemberDescriptor:
                    self.descr = descr
                    self.member = (<PyMemberDescrObject *>descr).d_member
                break

    cdef inline object get(self):
        cdef uint64_t v
        if self.d is None:
            if self.getset != NULL:
                return self.getset.get(self.obj, self.getset.closure)
            if self.member != NULL:
                return PyMember_GetOne(<const char *><PyObject *>self.obj, self.member)
            return getattr(self.obj, self.name)
        v = KC_DICT_VERSION(self.d)
        if v == 0 or v != self.version:
            self.value = _attr(self.d, self.obj, self.name)
            self.version = v
        return self.value


cdef inline bint _sticky_on(list sticky, Py_ssize_t p) except -1:
    """Whether the sticky partitioner's count (``[partition, bytes]``) is
    still on partition ``p``."""
    if PyList_GET_SIZE(sticky) != 2:
        return False
    cdef PyObject *o = PyList_GET_ITEM(sticky, 0)
    return type(<object>o) is int and _as_ssize(<object>o) == p


cdef inline bint _sticky_add(list sticky, Py_ssize_t p, Py_ssize_t size,
                             Py_ssize_t limit) except -1:
    """The sticky partitioner's count (``state[topic]``, ``[partition,
    bytes]``) takes ``size`` bytes if ``p`` is still its partition and the
    count stays below ``limit`` (else the caller goes through the
    partitioner's ``update``, which moves on).  At C level: no Python int
    made for ``p`` and ``size``, one for the new count."""
    cdef PyObject *o
    cdef object count
    if not _sticky_on(sticky, p):
        return False
    o = PyList_GET_ITEM(sticky, 1)
    if type(<object>o) is not int:
        return False
    size += _as_ssize(<object>o)
    if size >= limit:
        return False
    if _in_place and kc_int_set(o, size):
        return True
    count = size
    Py_INCREF(count)
    PyList_SET_ITEM(sticky, 1, count)
    Py_DECREF(<object>o)
    return True


cdef inline bint _sticky_move(list sticky, Py_ssize_t p, list available,
                              object choice) except -1:
    """The sticky partitioner's update when a batch's worth went to ``p``
    (its count plus the record's reached batch.size): its _choose, without
    the calls of update, _choose and the available list's making per batch.
    ``available`` is what _choose draws among (the topic's available
    partitions in this cluster, all of them when none is); one partition
    there is taken with no draw, as _choose takes it; else ``choice`` (the
    partitioner's random.choice) draws among them less ``p`` (all of them
    when that leaves none), the same draw as _choose's.  The count starts
    again from 0.  False (nothing changed) if ``p`` is no longer the
    partition."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(available)
    cdef list others
    if not _sticky_on(sticky, p):
        return False
    if n == 1:
        nxt = available[0]
    else:
        others = []
        for i in range(n):
            x = <object>PyList_GET_ITEM(available, i)
            if PyLong_AsSsize_t(x) != p:
                others.append(x)
        nxt = choice(others if others else available)
    sticky[0] = nxt
    sticky[1] = 0
    return True


cdef list _available(cluster, topic, Py_ssize_t count):
    """The partitions the sticky partitioner's _choose draws among for
    ``topic`` in ``cluster`` (which is immutable: kept per cluster)."""
    available = [x.partition for x in cluster.available_partitions_for_topic(topic)]
    if not available:
        available = list(range(count))
    for x in available:
        if type(x) is not int:
            return None
    return available


def _gil_enabled():
    """False only on a free-threaded build running without the GIL."""
    import sys
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


# Ints changed in place (kc_int_set) only where the GIL is what keeps
# another thread from reading one meanwhile.
cdef bint _in_place = _gil_enabled()


cdef class Appender:
    cdef object _acc, _acquire, _release, _locked, _sticky_acquire, _sticky_release, _lock
    cdef object _partitioner, _time, _acc_append, _add_topic
    cdef dict _batches, _sticky
    cdef _Attr _closed, _fatal_error, _cluster_attr
    cdef Py_ssize_t _batch_size, _sticky_size, _size_limit, _count
    cdef object _metadata, _sender, _slow, _cluster, _max_block_ms
    cdef bint _enabled, _ignore_keys, _sticky_shared, _elide
    cdef object _topic
    cdef list _tps, _dqs
    # The sticky partitioner's state list of _topic (see AppendPath).
    cdef list _topic_sticky
    cdef object _sizes
    cdef Py_ssize_t _sizes_ks, _sizes_vs
    # The future returned last; see send.
    cdef object _spare
    # The headers converted last and their size (see the pure twin).
    cdef tuple _headers
    cdef Py_ssize_t _headers_size
    # Opening a batch here (see _open): the accumulator's dict (None: the
    # accumulator's append opens every batch), whether the producer's clock
    # is now_ms (then read in C), the partitions the sticky partitioner
    # draws among for the topic (see _sticky_move), the topic and time
    # add_topic was last called with (see send).
    cdef dict _acc_d
    cdef bint _c_clock
    cdef list _avail
    cdef object _choice
    cdef object _touched_topic
    cdef int64_t _touched_ms
    # The clock's last timestamp (ms) and its int (see send).
    cdef object _stamp
    cdef int64_t _stamp_ms
    # Whether the accumulator's lock is a _thread.lock whose state is read
    # in C (see kc_lock_held).
    cdef bint _c_locked

    def __init__(self, path):
        acc = path.accumulator
        self._acc = acc
        lock = acc.lock
        self._acquire = lock.acquire
        self._release = lock.release
        self._locked = lock.locked
        self._lock = lock
        # See send: the lock is taken only when someone holds it.  That
        # needs the GIL, and a lock of the thread module (whose acquire
        # does not release the GIL when the lock is free).
        self._elide = _gil_enabled() and type(lock) is _LockType
        self._batches = acc.batches
        self._batch_size = acc.batch_size
        self._acc_append = acc.append
        self._metadata = path.metadata
        self._add_topic = path.metadata.add_topic
        self._time = path.time
        partitioner = path.partitioner
        self._partitioner = partitioner
        self._sticky = partitioner.state
        self._sticky_acquire = partitioner.lock.acquire
        self._sticky_release = partitioner.lock.release
        self._sticky_size = partitioner.sticky_batch_size
        # The producer's partitioner shares the accumulator's lock (see
        # AppendPath): the sticky count then goes with the append.
        self._sticky_shared = partitioner.lock is acc.lock
        self._sender = path.sender
        # The three attributes read per record.
        self._closed = _Attr(acc, "closed")
        self._fatal_error = _Attr(path.sender, "fatal_error")
        self._cluster_attr = _Attr(path.metadata, "cluster")
        # Inside the section, ``closed`` must be read without Python code.
        self._elide = self._elide and self._closed.d is not None
        self._slow = path.send_slow
        self._enabled = not path.serializers
        self._ignore_keys = bool(path.ignore_keys)
        self._size_limit = path.size_limit
        self._max_block_ms = path.max_block_ms
        self._topic = None
        self._cluster = None
        self._count = 0
        self._tps = None
        self._dqs = None
        self._topic_sticky = None
        self._sizes = None
        self._sizes_ks = self._sizes_vs = -2
        self._spare = None
        self._headers = None
        self._headers_size = 0
        # What _open reads and writes of the accumulator, plain instance
        # attributes of it (read from its dict: no generic attribute
        # lookups with the lock held).
        self._acc_d = _plain_dict(acc, ("used_memory", "buffer_memory", "waiters",
                                         "on_new_batch", "incomplete", "wakeup_needed",
                                         "closed")) \
            if _b_defaults is not None and type(acc.incomplete) is set else None
        self._c_clock = path.time is _now_ms_py and acc.time is _now_ms_py
        self._avail = None
        # _choose's draw (see _sticky_move); None: update() moves on.
        rng = getattr(partitioner, "random", None)
        self._choice = rng.choice if rng is not None else None
        self._touched_topic = None
        self._touched_ms = 0
        self._stamp = None
        self._stamp_ms = 0
        self._c_locked = self._elide and kc_lock_readable()

    cdef object _open(self, object dq, object last, object tp, QueuedRecord record,
                      Py_ssize_t body, object callback, Py_ssize_t allocation):
        """Open a batch for ``record`` at the end of ``dq`` (after ``last``,
        its last batch, which has no room) as the accumulator's append does
        when buffer.memory has room and no one waits for it: the memory
        taken, ``last`` closed, the batch made (see _B_SET_HERE) with the
        record in it, queued and counted incomplete.  None, with nothing
        changed, in every other case (closed, memory short or waited for, a
        transaction's on_new_batch hook): the caller then goes through the
        accumulator's append (blocking, max.block.ms, errors).  Call with
        the accumulator's lock held."""
        cdef dict d = self._acc_d
        cdef PyObject *o
        cdef Py_ssize_t used, rs, i
        cdef object batch, now
        if d is None:
            return None
        o = PyDict_GetItemWithError(d, "closed")
        if o == NULL or o != Py_False:
            return None
        o = PyDict_GetItemWithError(d, "on_new_batch")
        if o == NULL or o != Py_None:
            return None
        o = PyDict_GetItemWithError(d, "waiters")
        if o == NULL or type(<object>o) is not int or <object>o != 0:
            return None
        o = PyDict_GetItemWithError(d, "used_memory")
        if o == NULL or type(<object>o) is not int:
            return None
        used = PyLong_AsSsize_t(<object>o)
        o = PyDict_GetItemWithError(d, "buffer_memory")
        if o == NULL or type(<object>o) is not int or \
                used + allocation > PyLong_AsSsize_t(<object>o):
            return None
        o = PyDict_GetItemWithError(d, "incomplete")
        if o == NULL or type(<object>o) is not set:
            return None
        incomplete = <object>o
        now = _now_ms() if self._c_clock else self._time()
        d["used_memory"] = used + allocation
        if last is not None:
            _put(last, _B_CLOSED, True)
        # The record's exact size as a batch's first (offset and timestamp
        # deltas 0: a byte each), as record_size(body, 0, 0).
        rs = body + 2
        rs += _varint_size(<uint64_t>rs << 1)
        batch = (<PyTypeObject *>_ProducerBatch).tp_new(_ProducerBatch, <PyObject *>_EMPTY,
                                                        NULL)
        for i in range(_b_ndefaults):
            _put(batch, _b_off[i], <object>_b_val[i])
        _put(batch, _B_TP, tp)
        _put(batch, _B_CREATED, now)
        _put(batch, _B_LAST_ATTEMPT, now)
        _put(batch, _B_DRAINED, now)
        # The records and sizes lists left out of the garbage collector's
        # lists: they hold only QueuedRecords (not tracked: no_gc) and
        # (key size, value size) tuples of ints, so they can close no
        # cycle, and every collection while the batch waits traversed both
        # (list_traverse, ~160 instructions per 1 KiB record in an
        # AIOProducer holding its futures).  Appending keeps a list
        # untracked; what it holds is kept alive as before (an untracked
        # container is an external root to the collector).
        records_list = [record]
        PyObject_GC_UnTrack(<PyObject *>records_list)
        sizes_list = [self._sizes]
        PyObject_GC_UnTrack(<PyObject *>sizes_list)
        _put(batch, _B_RECORDS, records_list)
        _put(batch, _B_SIZES, sizes_list)
        _put(batch, _B_CALLBACKS, [callback] if callback is not None else None)
        _put(batch, _B_ESTIMATED, _BATCH_OVERHEAD + rs)
        _put(batch, _B_ALLOCATED, allocation)
        if callback is None:
            # Left out of the garbage collector's lists, as its records and
            # sizes lists: it holds nothing that can refer back to it (its
            # TopicPartition, ints, bools, None, those lists; later the
            # Sender's encoded bytes and an Event), and every gen0/gen1
            # collection while it waited traversed it (subtype_traverse,
            # ~130 instructions per 1 KiB record in an AIOProducer holding
            # its futures).  Whatever attaches a callback or a done callback
            # to it (a record's callback here or in ProducerBatch.append,
            # FutureRecordMetadata.add_done_callback, kchannel._caiosend's
            # wait) puts it back first (track_batch): a cycle through one is
            # collected as before.
            PyObject_GC_UnTrack(<PyObject *>batch)
        dq.append(batch)
        (<set>incomplete).add(batch)
        return batch

    def send(self, topic, value=None, key=None, headers=None, partition=None,
             timestamp_ms=None, callback=None):
        return self._send(topic, value, key, headers, partition, timestamp_ms, callback)

    cdef object _send(self, object topic, object value, object key, object headers,
                      object partition, object timestamp_ms, object callback):
        # send's body: also called from C by kchannel._caiosend (through
        # SEND_CAPSULE), without the bound method's call and argument
        # parsing.
        cdef Py_ssize_t ks, vs, size, body, hsize, p, index = -1, rs, est
        cdef int64_t ts, td
        cdef list sticky = None
        cdef list records, cbs
        cdef object hs, batch = None, future, dq, stamp
        cdef PyObject *o
        cdef PyObject *callbacks
        cdef QueuedRecord record
        cdef bint full = False, held = False, opened = False, c_held = False
        cdef bint convert
        cdef int overflow
        cdef object last
        # (A closed accumulator is seen where the record would join a
        # batch, and sends it to the full path from there.)
        if (not self._enabled or
                (value is not None and type(value) is not bytes) or
                (key is not None and type(key) is not bytes) or
                (timestamp_ms is not None and type(timestamp_ms) is not int) or
                self._fatal_error.get() is not None):
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        cluster = self._cluster_attr.get()
        if cluster is not self._cluster or (topic is not self._topic and topic != self._topic):
            count = cluster.partition_count(topic)
            if not count:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            self._topic = topic
            self._cluster = cluster
            self._count = count
            self._tps = [TopicPartition(topic, i) for i in range(count)]
            self._dqs = [None] * count
            self._topic_sticky = None
            self._avail = _available(cluster, topic, count) \
                if self._choice is not None else None
        ks = len(<bytes>key) if key is not None else -1
        vs = len(<bytes>value) if value is not None else -1
        # The exact size but for the offset and timestamp deltas and the
        # length (see the pure twin): attributes, key, value, headers.
        body = 1 + (ks + _varint_size(<uint64_t>ks << 1) if ks > 0 else 1) + \
            (vs + _varint_size(<uint64_t>vs << 1) if vs > 0 else 1)
        # (a list's or tuple's truth read in C: no PyObject_IsTrue call)
        if (PyList_GET_SIZE(headers) != 0 if type(headers) is list else
                PyTuple_GET_SIZE(headers) != 0 if type(headers) is tuple else
                headers is not None and bool(headers)):
            if type(headers) is not list and type(headers) is not tuple:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            if self._headers is not None and _same_items(headers, self._headers):
                hs = self._headers
                hsize = self._headers_size
            else:
                convert = False
                hsize = _headers_size(headers, &convert)
                if hsize < 0:
                    return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                      callback)
                # A tuple of (key, value) tuples, as the pure twin says.
                if convert:
                    hs = tuple([(k, v) for k, v in headers])
                else:
                    hs = headers if type(headers) is tuple else PyList_AsTuple(headers)
                    self._headers = hs
                    self._headers_size = hsize
            body += hsize
        else:
            hs = _NO_HEADERS
            body += 1
        # The upper bound: the size limits and the sticky partitioner's count.
        size = body + _OVERHEAD_EXTRA_MAX
        if size + _BATCH_OVERHEAD > self._size_limit:
            return self._slow(topic, value, key, headers, partition, timestamp_ms, callback)
        if partition is not None:
            # Read in C when it is a one-digit int (every real partition):
            # the two comparisons of Python ints cost ~100 instructions.
            if type(partition) is not int:
                p = -1
            elif KC_ONE_DIGIT(partition):
                p = KC_DIGIT_VALUE(partition)
            elif 0 <= partition < self._count:
                p = partition
            else:
                p = -1
            if not 0 <= p < self._count:
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
        elif key is not None and not self._ignore_keys:
            # partition_for_key's murmur2, inline on the bytes in place
            p = (murmur2_ptr(<const unsigned char *>PyBytes_AS_STRING(key),
                             PyBytes_GET_SIZE(key)) & 0x7FFFFFFF) % self._count
        else:
            # A topic's state list, once made, stays the same object
            # (AppendPath): kept, no dict lookup per record.
            sticky = self._topic_sticky
            if sticky is None:
                sticky = self._topic_sticky = self._sticky.get(topic)
            if sticky is None or sticky[0] is None:
                p = self._partitioner.partition(topic, cluster)
                sticky = self._topic_sticky = self._sticky[topic]
            else:
                p = sticky[0]
        if timestamp_ms is None:
            ts = _now_ms()
            # Records sent within one millisecond (most of them, at tens of
            # thousands a second) share their timestamp's int: no int made
            # and freed per record (~150 instructions).  Ints are immutable.
            if ts != self._stamp_ms or self._stamp is None:
                self._stamp = ts
                self._stamp_ms = ts
            stamp = self._stamp
        else:
            # (an int, checked above; in C, not two comparisons of Python ints)
            overflow = 0
            if not kc_two_digits(timestamp_ms, &ts):
                ts = PyLong_AsLongLongAndOverflow(timestamp_ms, &overflow)
            if overflow:
                # Not an int64: the full path's encoder refuses it, as before.
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            stamp = timestamp_ms
        # Made without its __init__ (a Python call): the fields are set
        # here, at C level (see _new_record).
        record = _new_record(stamp, key, value, hs)
        # Records of one shape share their (key, value) sizes tuple
        # (immutable).
        if ks != self._sizes_ks or vs != self._sizes_vs:
            self._sizes = (ks, vs)
            self._sizes_ks = ks
            self._sizes_vs = vs
        # A partition's deque stays the same object once made (AppendPath):
        # kept per partition, no dict lookup (and TopicPartition hash) per
        # record.  Not there yet: the accumulator's append makes it.
        dq = self._dqs[p]
        if dq is None:
            dq = self._batches.get(self._tps[p])
            self._dqs[p] = dq
        # Most callers drop the future send() returns (send without get()).
        # When the one returned last is no longer held by anyone but this
        # appender, it is reused (no weak reference can point at it: no
        # __weakref__ slot), saving an allocation, its deallocation and the
        # garbage collector's count per record; a future still held is
        # never touched.  Made or taken here, before the critical section
        # (see below), and filled after it.
        if self._spare is not None and _Py_REFCNT(<PyObject *>self._spare) == 1:
            future = self._spare
        else:
            # Its type's tp_new called directly (object_new, no __init__,
            # as object.__new__(cls) did): not object.__new__ as a Python
            # callable, whose argument tuple and tp_new_wrapper checks cost
            # ~500 instructions per record an application holds the future
            # of (kchannel.aio: ``[await p.send(...) ...]``).
            future = _new_future()
            self._spare = future
        if dq is not None:
            # The accumulator's lock guards its batches against the
            # Sender's drain on the network thread.  When no thread holds
            # it, it is not taken: this thread holds the GIL, so no other
            # thread can take it until this one lets the GIL go, and from
            # here to the end of the section nothing can make it (no
            # Python code runs: only list, dict and int operations in C,
            # no allocation of an object the garbage collector tracks
            # (whose collection could run finalizers), no reference
            # released but ints' and temporaries').  That is a critical
            # section as the lock makes it, for an attribute read instead
            # of an acquire and a release (~600 instructions a record).
            # A batch's first callback needs a list: the lock is taken
            # then (free, so taken without letting the GIL go).
            if not self._elide or (kc_lock_held(self._lock) if self._c_locked
                                   else self._locked()):
                self._acquire()
                held = True
            try:
                if _c_deque and type(dq) is _deque:
                    o = kc_deque_last(dq)
                    batch = <object>o if o != NULL else None
                else:
                    batch = dq[-1] if len(dq) else None
                last = batch
                if batch is None or type(batch) is not _ProducerBatch or \
                        _slot(batch, _B_CLOSED) != Py_False or \
                        self._closed.get():
                    batch = None
                else:
                    records = <list?><object>_slot(batch, _B_RECORDS)
                    index = PyList_GET_SIZE(records)
                    # The record's exact size in this batch (see the pure
                    # twin): offset delta the records so far, timestamp
                    # delta from the first record's.
                    td = ts - <int64_t>(<QueuedRecord?><object>PyList_GET_ITEM(records, 0)).timestamp \
                        if index else 0
                    rs = body + _varint_size(<uint64_t>index << 1) + \
                        _varint_size((<uint64_t>td << 1) ^ <uint64_t>(td >> 63))
                    rs += _varint_size(<uint64_t>rs << 1)
                    est = _as_ssize(<object>_slot(batch, _B_ESTIMATED)) + rs
                    if est > self._batch_size:
                        batch = None
                    else:
                        callbacks = NULL
                        if callback is not None:
                            callbacks = _slot(batch, _B_CALLBACKS)
                            if callbacks == Py_None:
                                if not held:
                                    self._acquire()
                                    held = True
                                _put(batch, _B_CALLBACKS, [])
                                # (the callback may hold what refers back
                                # to the batch: see _open)
                                _track(batch)
                                callbacks = _slot(batch, _B_CALLBACKS)
                        records.append(record)
                        (<list?><object>_slot(batch, _B_SIZES)).append(self._sizes)
                        if callbacks != NULL:
                            # (by index, None for the records without
                            # one: see ProducerBatch.callbacks)
                            cbs = <list?><object>callbacks
                            while PyList_GET_SIZE(cbs) < index:
                                cbs.append(None)
                            cbs.append(callback)
                        if not (_in_place and kc_int_set(_slot(batch, _B_ESTIMATED), est)):
                            _put(batch, _B_ESTIMATED, est)
                        full = est >= self._batch_size
                        if sticky is not None and self._sticky_shared and \
                                _sticky_add(sticky, p, size, self._sticky_size):
                            sticky = None
                if batch is None and self._acc_d is not None and \
                        (last is None or type(last) is _ProducerBatch):
                    # A new batch, opened here when the accumulator's
                    # append would open it without waiting (see _open),
                    # under the lock itself: a batch is made and queued
                    # (free, so taken without letting the GIL go: what was
                    # read above still holds).
                    if not held:
                        # (in C when the lock is a _thread.lock read in C;
                        # it is free: no one held it above)
                        if not (self._c_locked and
                                kc_lock_try_acquire(self._lock)):
                            self._acquire()
                        held = True
                    batch = self._open(dq, last, self._tps[p], record, body, callback,
                                       max(self._batch_size, size + _BATCH_OVERHEAD))
                    if batch is not None:
                        opened = True
                        index = 0
                        full = True
                        if sticky is not None and self._sticky_shared and \
                                _sticky_add(sticky, p, size, self._sticky_size):
                            sticky = None
            finally:
                if held and not (self._c_locked and kc_lock_release(self._lock)):
                    self._release()
        if batch is None:
            # A new batch (see the pure twin).
            if self._closed.get():
                return self._slow(topic, value, key, headers, partition, timestamp_ms,
                                  callback)
            self._add_topic(topic, self._time())
            self._touched_topic = None
            future, full_, new_batch = self._acc_append(
                self._tps[p], record, body, callback, ks, vs, self._max_block_ms)
            full = full_ or new_batch
        else:
            _put(future, _F_BATCH, batch)
            _put(future, _F_INDEX, index)
            _put(future, _F_FAILED, None)
            if opened:
                # Keeps the topic in the metadata (see the pure twin): at
                # most once a second per topic, not per batch.
                td = _now_ms()
                if (topic is not self._touched_topic and topic != self._touched_topic) or \
                        td - self._touched_ms >= 1000:
                    self._add_topic(topic, self._time())
                    self._touched_topic = topic
                    self._touched_ms = td
        if sticky is not None:
            # (the partitioner's lock, the accumulator's when shared: taken
            # in C when free, as above; once per batch)
            c_held = self._sticky_shared and self._c_locked and \
                kc_lock_try_acquire(self._lock)
            if not c_held:
                self._sticky_acquire()
            try:
                if _sticky_add(sticky, p, size, self._sticky_size) or \
                        (self._avail is not None and
                         _sticky_move(sticky, p, self._avail, self._choice)):
                    sticky = None
            finally:
                if not (c_held and kc_lock_release(self._lock)):
                    self._sticky_release()
            if sticky is not None:
                self._partitioner.update(topic, p, size, cluster)
        if full and self._wakeup_needed():
            self._sender.wakeup()
        return future

    cdef inline bint _wakeup_needed(self):
        """Whether Sender.wakeup would wake the network thread (its
        ``acc.wakeup_needed``, read here: most batches are opened while the
        Sender is awake, and the call would be for nothing)."""
        cdef PyObject *o
        if self._acc_d is None:
            return True
        o = PyDict_GetItemWithError(self._acc_d, "wakeup_needed")
        return o == NULL or o != Py_False


# Appender.send for other compiled twins to call in C (kchannel._caiosend:
# an AIOProducer's send, per record), without a bound method call and its
# argument parsing (~200 instructions): ``appender`` must be an Appender.
cdef object _send_entry(object appender, object topic, object value, object key,
                        object headers, object partition, object timestamp_ms,
                        object callback):
    return (<Appender>appender)._send(topic, value, key, headers, partition, timestamp_ms,
                                      callback)


SEND_CAPSULE = PyCapsule_New(<void *>_send_entry, b"kchannel._cappender.send", NULL)
