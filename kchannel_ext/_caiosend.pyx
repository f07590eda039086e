# cython: language_level=3, boundscheck=False, wraparound=False
"""``AIOProducer``'s per-record path, compiled twin of
``kchannel.aio._aiosend_py`` (same names, same results).

What asyncio adds per record on top of the sync producer's appender is an
awaitable and its await, twice: ``await producer.send(...)`` (a coroutine
with an interpreted frame) and ``await future`` (a generator from
``FutureRecordMetadata.__await__``, plus its RecordMetadata).  Here both end
in a :class:`_Ready`: a C awaitable already done, whose await returns its
value through the ``am_send`` slot (no StopIteration made, no frame).

* ``send`` appends at once, as the pure twin's, and returns a _Ready of the
  record's future where the pure twin returns a coroutine holding it.  It
  is a coroutine as far as asyncio goes (``send``/``throw``/``close``/
  ``__await__``, registered as a ``collections.abc.Coroutine``):
  ``asyncio.create_task(p.send(...))`` works.  An error of the append is
  raised where the result is awaited, and a record that must wait (buffer
  memory, a new topic's metadata) gets the pure twin's waiting coroutine.
* ``future_await``: an acknowledged record's RecordMetadata in a _Ready;
  every other case (not acknowledged yet, failed, a split batch) by the
  method's own generator.
"""
from collections.abc import Coroutine as _Coroutine

cimport cython

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF, _Py_REFCNT
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

from kchannel._crecords cimport QueuedRecord
from kchannel._slots cimport slot_offset
# (a slot read at its offset, borrowed; written with a new reference)
from kchannel._slots cimport slot_get as _slot, slot_put as _put

from asyncio import _get_running_loop, get_running_loop as _get_running_loop_or_raise

from kchannel.aio._aiosend_py import _MetadataNeeded, _raise, _send_slow
from kchannel.producer._done_lock import DONE_LOCK as _DONE_LOCK
from kchannel.producer.accumulator import _wake
from kchannel import _impl
from kchannel.producer.accumulator import FutureRecordMetadata, ProducerBatch, RecordMetadata

__all__ = ["SendBase", "send", "send_method", "bind_send", "future_await", "install_await"]

cdef extern from "Python.h":
    ctypedef enum PySendResult:
        PYGEN_RETURN
        PYGEN_ERROR
        PYGEN_NEXT
    ctypedef PySendResult (*sendfunc)(PyObject *, PyObject *, PyObject **)
    ctypedef PyObject *(*iternextfunc)(PyObject *)
    ctypedef PyObject *(*unaryfunc)(PyObject *)
    ctypedef struct PyAsyncMethods:
        unaryfunc am_await
        sendfunc am_send
    ctypedef struct PyTypeObjectSlots "PyTypeObject":
        PyAsyncMethods *tp_as_async
        iternextfunc tp_iternext
        PyObject *tp_dict
    ctypedef struct _MethodDef "PyMethodDef":
        const char *ml_name
        void *ml_meth
        int ml_flags
        const char *ml_doc
    object PyDescr_NewMethod(PyTypeObject *, _MethodDef *)
    int METH_FASTCALL
    int METH_KEYWORDS
    void PyErr_SetObject(object, object)
    void PyErr_SetString(object, const char *)
    void PyType_Modified(PyTypeObject *)
    void PyObject_GC_UnTrack(void *)
    void PyObject_GC_Track(void *)
    int PyObject_GC_IsTracked(object)
    PyObject *PyDict_GetItemWithError(object, object) except? NULL
    Py_ssize_t PyLong_AsSsize_t(object) except? -1
    bint PyTuple_Check(object)
    bint PyList_CheckExact(object)
    PyObject *Py_True
    PyObject *Py_None
    const Py_ssize_t PY_SSIZE_T_MAX

# A dict's version tag (CPython 3.11's ma_version_tag, new at each change of
# that dict), or 0 where there is none; as kchannel._cappender reads it.
# And an int only its container holds (reference count 1) given a new value
# in place when it fits one digit (kchannel._cappender's kc_int_set, which
# says why; 3.11's int layout, elsewhere 0: a new int is made).
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    #define KC_AIO_DICT_VERSION(d) (((PyDictObject *)(d))->ma_version_tag)
    static inline int kc_aio_int_set(PyObject *o, Py_ssize_t v) {
        if (o != NULL && Py_REFCNT(o) == 1 && PyLong_CheckExact(o) && Py_SIZE(o) == 1
                && v > 0 && v < ((Py_ssize_t)1 << PyLong_SHIFT)) {
            ((PyLongObject *)o)->ob_digit[0] = (digit)v;
            return 1;
        }
        return 0;
    }
    #else
    #define KC_AIO_DICT_VERSION(d) ((unsigned long long)0)
    static inline int kc_aio_int_set(PyObject *o, Py_ssize_t v) { return 0; }
    #endif
    """
    unsigned long long KC_AIO_DICT_VERSION(object d) noexcept
    bint kc_aio_int_set(PyObject *o, Py_ssize_t v) noexcept

# An exact int's value read in a few instructions when it has at most two
# digits (3.11's int layout: every offset below 2**60, every index and
# millisecond timestamp), else 0 (the caller uses PyLong_AsSsize_t).
# And a slot of an object made here given ``value`` unless it holds that
# very object already (a refilled RecordMetadata: the topic, partition,
# size ints and often the timestamp are the last record's).
cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    static inline int kc_aio_small_int(PyObject *o, Py_ssize_t *out) {
        Py_ssize_t n;
        if (!PyLong_CheckExact(o)) return 0;
        n = Py_SIZE(o);
        switch (n) {
        case 0: *out = 0; return 1;
        case 1: *out = (Py_ssize_t)((PyLongObject *)o)->ob_digit[0]; return 1;
        case -1: *out = -(Py_ssize_t)((PyLongObject *)o)->ob_digit[0]; return 1;
        case 2: *out = (Py_ssize_t)(((uint64_t)((PyLongObject *)o)->ob_digit[1] << PyLong_SHIFT)
                                    | ((PyLongObject *)o)->ob_digit[0]); return 1;
        default: return 0;
        }
    }
    #else
    static inline int kc_aio_small_int(PyObject *o, Py_ssize_t *out) { return 0; }
    #endif
    static inline void kc_aio_put(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        PyObject **slot = (PyObject **)((char *)obj + offset);
        PyObject *old = *slot;
        if (old != value) {
            Py_INCREF(value);
            *slot = value;
            Py_XDECREF(old);
        }
    }
    """
    bint kc_aio_small_int(PyObject *o, Py_ssize_t *out) noexcept
    void kc_aio_put(PyObject *obj, Py_ssize_t offset, PyObject *value) noexcept
    # A new reference taken over as an object (no increment).
    object _steal "(PyObject *)" (PyObject *o)


def _gil_enabled():
    """False only on a free-threaded build running without the GIL."""
    import sys
    check = getattr(sys, "_is_gil_enabled", None)
    return True if check is None else bool(check())


# Ints changed in place only where the GIL keeps another thread from reading
# one meanwhile.
cdef bint _in_place = _gil_enabled()

# The compiled appender's send as a C function (its SEND_CAPSULE), and its
# class; None when the appender in use is the pure twin's.
# (Declared returning a PyObject *, a new reference or NULL with the
# exception set, as the C function does: its error is handled by
# _append_failed, not by a try statement around every call, whose set-up
# saves and restores the thread's exception state per record.)
ctypedef PyObject *(*_append_fn)(object, object, object, object, object, object, object,
                                 object) noexcept
cdef _append_fn _append_c = NULL
cdef object _Appender = None


cdef _init_append():
    global _append_c, _Appender
    appender = _impl.load_twin("appender")
    capsule = getattr(appender, "SEND_CAPSULE", None)
    if capsule is not None and PyCapsule_IsValid(capsule, b"kchannel._cappender.send"):
        _append_c = <_append_fn>PyCapsule_GetPointer(capsule, b"kchannel._cappender.send")
        _Appender = appender.Appender


_init_append()

cdef object _await_slow = FutureRecordMetadata.__await__
cdef object _RecordMetadata = RecordMetadata
cdef object _FutureRecordMetadata = FutureRecordMetadata
cdef tuple _EMPTY = ()
# The RecordMetadata the last await gave, refilled by the next one when
# nothing else holds it any more (the await's caller let it go, the usual
# case: ``for f in futures: await f``): no allocation, deallocation and
# garbage collector count per record awaited (as run_callbacks in
# kchannel._cappender).  One still held anywhere is never touched.
cdef object _md_cache = None


# The future's, its batch's and RecordMetadata's __slots__ read and filled
# at their offsets (as kchannel._cappender does, which says why: a generic
# attribute access costs a type lookup and a descriptor call, and this path
# made a dozen per record -- more than the interpreter's specialized slot
# reads in the method it replaces).  Classes whose slots are not plain
# object slots any more fail this module's import: the pure twin is used.
cdef Py_ssize_t _F_BATCH = slot_offset(FutureRecordMetadata, "_batch")
cdef Py_ssize_t _F_INDEX = slot_offset(FutureRecordMetadata, "_index")
cdef Py_ssize_t _F_FAILED = slot_offset(FutureRecordMetadata, "_failed")
cdef Py_ssize_t _B_RECORDS = slot_offset(ProducerBatch, "records")
cdef Py_ssize_t _B_TP = slot_offset(ProducerBatch, "tp")
cdef Py_ssize_t _B_DONE = slot_offset(ProducerBatch, "done_flag")
cdef Py_ssize_t _B_EXCEPTION = slot_offset(ProducerBatch, "exception")
cdef Py_ssize_t _B_SPLIT = slot_offset(ProducerBatch, "split_results")
cdef Py_ssize_t _B_SIZES = slot_offset(ProducerBatch, "sizes")
cdef Py_ssize_t _B_BASE = slot_offset(ProducerBatch, "base_offset")
cdef Py_ssize_t _B_APPEND_TIME = slot_offset(ProducerBatch, "log_append_time")
cdef Py_ssize_t _M_TOPIC = slot_offset(RecordMetadata, "topic")
cdef Py_ssize_t _M_PARTITION = slot_offset(RecordMetadata, "partition")
cdef Py_ssize_t _M_OFFSET = slot_offset(RecordMetadata, "offset")
cdef Py_ssize_t _M_TIMESTAMP = slot_offset(RecordMetadata, "timestamp")
cdef Py_ssize_t _M_KEY_SIZE = slot_offset(RecordMetadata, "serialized_key_size")
cdef Py_ssize_t _M_VALUE_SIZE = slot_offset(RecordMetadata, "serialized_value_size")


# Not tracked by the garbage collector (no_gc): made and dropped per record,
# and it can close no cycle -- it holds only a record's future or its
# RecordMetadata, neither of which refers back to it.
@cython.final
@cython.freelist(8)
@cython.no_gc
cdef class _Ready:
    """An awaitable already done with ``value`` (awaited once, as a
    coroutine)."""
    cdef object value
    cdef bint used

    def __await__(self):
        return self

    def __iter__(self):
        return self

    def __next__(self):
        # (tp_iternext is _ready_next; this is the Python-visible name.)
        return self.send(None)

    def send(self, _arg):
        if self.used:
            raise RuntimeError("cannot reuse already awaited coroutine")
        self.used = True
        value = self.value
        self.value = None
        raise StopIteration(value)

    def throw(self, typ, val=None, tb=None):
        # As an unstarted coroutine's: the exception raised, the coroutine
        # closed.
        self.used = True
        if isinstance(typ, BaseException):
            raise typ
        if val is None:
            raise typ()
        if isinstance(val, typ):
            raise val
        raise typ(val)

    def close(self):
        self.used = True
        self.value = None


# The _Ready made last, made ready again by the next _ready() when nothing
# but this module holds it any more (the awaiting frame let it go, the
# usual case: ``await p.send(...)``, ``await future``): no allocation and
# deallocation per await, two per record.  One held anywhere else (a task
# made of it, an awaitable kept) is never touched.  An await hands its
# value over and forgets it, so a spare _Ready keeps nothing alive (the
# RecordMetadata it gave is refilled by the next await: _md_cache).
cdef object _spare_ready = None


cdef _Ready _ready(object value):
    global _spare_ready
    cdef PyObject *spare = <PyObject *>_spare_ready
    cdef _Ready r
    if spare != Py_None and _Py_REFCNT(spare) == 1:
        r = <_Ready>spare
        r.used = False
    else:
        r = _Ready.__new__(_Ready)
        _spare_ready = r
    r.value = value
    return r


cdef PySendResult _ready_send(PyObject *o, PyObject *arg, PyObject **result) noexcept:
    cdef _Ready r = <_Ready>o
    if r.used:
        PyErr_SetString(RuntimeError, b"cannot reuse already awaited coroutine")
        return PYGEN_ERROR
    r.used = True
    Py_INCREF(r.value)
    result[0] = <PyObject *>r.value
    r.value = None
    return PYGEN_RETURN


cdef PyObject *_ready_next(PyObject *o) noexcept:
    # StopIteration's value given as is (not a tuple nor an exception: no
    # StopIteration object is made; see _PyGen_FetchStopIterationValue).
    cdef _Ready r = <_Ready>o
    if r.used:
        PyErr_SetString(RuntimeError, b"cannot reuse already awaited coroutine")
        return NULL
    r.used = True
    PyErr_SetObject(StopIteration, r.value)
    r.value = None
    return NULL


if (<PyTypeObjectSlots *>_Ready).tp_as_async == NULL:
    raise ImportError("_Ready has no async slots to set am_send in")
(<PyTypeObjectSlots *>_Ready).tp_as_async.am_send = _ready_send
(<PyTypeObjectSlots *>_Ready).tp_iternext = _ready_next
PyType_Modified(<PyTypeObject *>_Ready)
_Coroutine.register(_Ready)


cdef inline object _appended(future):
    # What send returns for a record appended: its future, awaitable at once.
    if type(future) is _FutureRecordMetadata and _slot(future, _F_FAILED) == Py_None:
        # Left out of the garbage collector's lists: an application holds
        # a future per record (``[await p.send(...) for ...]``, then each
        # awaited), and every gen0/gen1 collection traversed each one held
        # (subtype_traverse, ~700 instructions per 1 KiB record under
        # callgrind).  It can close no cycle that outlives its batch: it
        # holds its batch and an int; the batch refers back to it only
        # through done_callbacks (add_done_callback, an await before the
        # batch is done), which the batch's completion drops -- every batch
        # completes, acknowledged, failed or aborted by close().  An
        # untracked object is an external root to the collector, so what it
        # holds is never freed early.
        PyObject_GC_UnTrack(<PyObject *>future)
    return _ready(future)


def send(producer, topic, value=None, key=None, partition=None, timestamp_ms=None,
         headers=None):
    """See the pure twin (``kchannel.aio._aiosend_py``): there a coroutine
    holding the future, here a _Ready."""
    if producer._driver is None:
        producer._start_driver()
    if producer._acc.used_memory > producer._memory_limit:
        return _send_slow(producer, topic, value, key, partition, timestamp_ms, headers)
    try:
        future = producer._send(topic, value, key, headers, partition, timestamp_ms)
    except _MetadataNeeded:
        return _send_slow(producer, topic, value, key, partition, timestamp_ms, headers)
    except Exception as exc:
        # Raised where the result is awaited, as from the coroutine.
        return _raise(exc)
    return _appended(future)


cdef int _pending_error() except -1:
    # (an exception is set: raised where this is called)
    return -1


cdef object _append_failed(object producer, object topic, object value, object key,
                           object partition, object timestamp_ms, object headers):
    """The compiled appender's call returned NULL: its exception, handled as
    ``send`` handles the append's (a record waiting for its topic's
    metadata, any other error raised where the result is awaited)."""
    try:
        _pending_error()
    except _MetadataNeeded:
        return _send_slow(producer, topic, value, key, partition, timestamp_ms, headers)
    except Exception as exc:
        return _raise(exc)


cdef object _fast_send(SendBase st, object producer, object topic, object value, object key,
                       object partition, object timestamp_ms, object headers):
    """``send`` for ``producer`` with what it reads per record in ``st``'s
    C fields (filled by ``bind_send``): the appender's send called in C
    when it is the compiled Appender's, the accumulator's ``used_memory``
    read from its instance dict only when that dict changed -- not five
    generic attribute lookups on the producer and its accumulator per
    record (~120 instructions each, a type lookup and a dict lookup)."""
    cdef PyObject *used
    cdef unsigned long long version = 0
    cdef bint over
    if not st._sb_started:
        if producer._driver is None:
            producer._start_driver()
        # (_driver stays set once started: close() leaves it.)
        st._sb_started = producer._driver is not None
    # Whether used_memory was over the limit when the accumulator's dict
    # had the version ``_sb_mem_version`` (0: not read yet): the dict
    # changes per batch, not per record, so most records compare a version
    # instead of a dict lookup (~110 instructions).
    if st._sb_acc_dict is not None:
        version = KC_AIO_DICT_VERSION(st._sb_acc_dict)
    if version != 0 and version == st._sb_mem_version:
        over = st._sb_mem_over
    else:
        used = NULL
        if st._sb_acc_dict is not None:
            used = PyDict_GetItemWithError(st._sb_acc_dict, "used_memory")
        if used != NULL and type(<object>used) is int:
            over = PyLong_AsSsize_t(<object>used) > st._sb_limit
            st._sb_mem_over = over
            st._sb_mem_version = version
        else:
            over = st._sb_acc.used_memory > st._sb_limit
            st._sb_mem_version = 0
    if over:
        return _send_slow(producer, topic, value, key, partition, timestamp_ms, headers)
    cdef PyObject *res
    if st._sb_appender is not None:
        res = _append_c(st._sb_appender, topic, value, key, headers, partition, timestamp_ms,
                        None)
        if res == NULL:
            return _append_failed(producer, topic, value, key, partition, timestamp_ms,
                                  headers)
        future = _steal(res)
    else:
        try:
            future = st._sb_append(topic, value, key, headers, partition, timestamp_ms)
        except _MetadataNeeded:
            return _send_slow(producer, topic, value, key, partition, timestamp_ms, headers)
        except Exception as exc:
            return _raise(exc)
    return _appended(future)


@cython.auto_pickle(False)
cdef class SendBase:
    """SendBase()

    AIOProducer's base class: its ``send`` method, with what that reads of
    the producer per record kept in C fields, filled once by
    ``bind_send(producer)`` (``__init__``).  ``send`` is the class's, not
    a bound method in the instance's dict: an instance attribute shadowing
    a class attribute keeps the interpreter from specializing
    ``p.send(...)`` (LOAD_METHOD), which then costs a type lookup, an
    instance dict lookup and a bound method call per record (~180
    instructions); a method of the class is found through the type's
    version tag and called with the instance as its first argument."""
    cdef object _sb_append
    # The Appender whose send ``_sb_append`` is (then called in C), or None.
    cdef object _sb_appender
    cdef object _sb_acc
    cdef object _sb_acc_dict
    cdef Py_ssize_t _sb_limit
    cdef bint _sb_bound
    cdef bint _sb_started
    cdef bint _sb_mem_over
    cdef unsigned long long _sb_mem_version

    def send(self, /, topic, value=None, key=None, partition=None, timestamp_ms=None,
             headers=None):
        """See the pure twin (``kchannel.aio._aiosend_py.SendBase.send``)."""
        if not self._sb_bound:
            return send(self, topic, value, key, partition, timestamp_ms, headers)
        return _fast_send(self, self, topic, value, key, partition, timestamp_ms, headers)


# SendBase.send as a method descriptor of a METH_FASTCALL | METH_KEYWORDS
# C function, in place of the method Cython makes: that one's argument
# parsing takes a reference to each of its seven arguments and their
# defaults and lets them go again (~150 instructions per record); the usual
# call, ``p.send(topic, value)`` (positional, no keywords), is read here
# from the argument array in a few.  Any other call (keywords, a producer
# bind_send never filled) goes to Cython's method (``_send_cy``), which
# parses as before.  The text signature is the method's.
cdef object _send_cy = SendBase.__dict__["send"]
cdef _MethodDef _send_def
cdef bytes _send_doc = (
    b"send($self, /, topic, value=None, key=None, partition=None, timestamp_ms=None, "
    b"headers=None)\n--\n\n"
    # (less the signature line embedsignature put first)
    + ((_send_cy.__doc__ or "").partition("\n\n")[2] or _send_cy.__doc__ or "").encode())


cdef object _send_vc(object self, PyObject **args, Py_ssize_t nargs, PyObject *kwnames):
    cdef Py_ssize_t i
    if kwnames == NULL and nargs == 2 and (<SendBase>self)._sb_bound:
        # (the usual call: ``send(topic, value)``)
        return _fast_send(<SendBase>self, self, <object>args[0], <object>args[1],
                          None, None, None, None)
    if kwnames == NULL and 1 <= nargs <= 6 and (<SendBase>self)._sb_bound:
        return _fast_send(<SendBase>self, self, <object>args[0],
                          <object>(args[1] if nargs > 1 else Py_None),
                          <object>(args[2] if nargs > 2 else Py_None),
                          <object>(args[3] if nargs > 3 else Py_None),
                          <object>(args[4] if nargs > 4 else Py_None),
                          <object>(args[5] if nargs > 5 else Py_None))
    pos = [<object>args[i] for i in range(nargs)]
    kw = {}
    if kwnames != NULL:
        for i in range(PyTuple_GET_SIZE(<object>kwnames)):
            kw[<object>PyTuple_GET_ITEM(<object>kwnames, i)] = <object>args[nargs + i]
    return _send_cy(self, *pos, **kw)


_send_def.ml_name = b"send"
_send_def.ml_meth = <void *>_send_vc
_send_def.ml_flags = METH_FASTCALL | METH_KEYWORDS
_send_def.ml_doc = <const char *>_send_doc
if (<PyTypeObjectSlots *>SendBase).tp_dict == NULL:
    raise ImportError("SendBase has no type dict to set send in")
(<dict><object>(<PyTypeObjectSlots *>SendBase).tp_dict)["send"] = \
    PyDescr_NewMethod(<PyTypeObject *>SendBase, &_send_def)
PyType_Modified(<PyTypeObject *>SendBase)


def send_method(cls):
    """SendBase.send as a method of ``cls`` (a subclass of SendBase), to be
    set as that class's ``send``: the same C function, its descriptor made
    for ``cls`` itself.  The interpreter calls a method descriptor's C
    function straight from the call instruction (3.11's
    PRECALL_METHOD_DESCRIPTOR_FAST_WITH_KEYWORDS) only when the instance's
    type is exactly the descriptor's class; SendBase's own, called on an
    AIOProducer, takes the generic call (a type check through the MRO, a
    deoptimized instruction: ~90 instructions per record)."""
    if not isinstance(cls, type) or not issubclass(cls, SendBase):
        raise TypeError(f"{cls!r} is not a subclass of SendBase")
    return PyDescr_NewMethod(<PyTypeObject *>cls, &_send_def)


cdef _bind(SendBase st, producer):
    # Reads ``_send`` (the appender's send) and ``_memory_limit`` once: both
    # are set for good by AIOProducer.__init__.
    st._sb_append = producer._send
    st._sb_appender = None
    owner = getattr(st._sb_append, "__self__", None)
    if _append_c != NULL and type(owner) is _Appender and st._sb_append == owner.send:
        st._sb_appender = owner
    st._sb_acc = producer._acc
    st._sb_acc_dict = getattr(st._sb_acc, "__dict__", None)
    st._sb_limit = producer._memory_limit
    st._sb_started = False
    st._sb_mem_version = 0
    st._sb_bound = True


@cython.final
@cython.auto_pickle(False)
cdef class _BoundSend(SendBase):
    """``send`` bound to a producer that is no SendBase (a stand-in with
    the same attributes): what ``bind_send`` returns the ``send`` method
    of.  It holds the producer, as a bound method does."""
    cdef object producer

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
             headers=None):
        """See the pure twin (``kchannel.aio._aiosend_py.send``)."""
        return _fast_send(self, self.producer, topic, value, key, partition, timestamp_ms,
                          headers)


def bind_send(producer):
    """Fill a SendBase's (an AIOProducer's) C fields from its ``_send``,
    ``_acc`` and ``_memory_limit`` and return None: its class's ``send``
    then reads them.  Any other producer (a stand-in with those
    attributes): its ``send`` bound once, returned."""
    cdef _BoundSend b
    if isinstance(producer, SendBase):
        _bind(<SendBase>producer, producer)
        return None
    b = _BoundSend.__new__(_BoundSend)
    b.producer = producer
    _bind(b, producer)
    return b.send


def future_await(future):
    """``FutureRecordMetadata.__await__`` (installed by ``kchannel.aio``):
    an acknowledged record's metadata (ProducerBatch.metadata's common case)
    with no generator; the other cases by the method's own."""
    return _future_await(future)


def install_await():
    """Make ``future_await`` the await of every FutureRecordMetadata (the
    sync producer's are the same type and await the same way): set as the
    class's ``__await__``, then as its type's ``am_await`` slot itself.
    Set as ``__await__`` alone, the slot is CPython's ``slot_am_await``,
    which looks ``__await__`` up on the type and calls it as a Python
    callable, argument parsing included, per await.  (Assigning
    ``__await__`` on the class again resets the slot, consistently.)"""
    cdef PyTypeObjectSlots *t = <PyTypeObjectSlots *>_FutureRecordMetadata
    _FutureRecordMetadata.__await__ = future_await
    if t.tp_as_async == NULL:
        return
    t.tp_as_async.am_await = <unaryfunc>_future_await


cdef object _future_await(object future):
    cdef PyObject *batch = NULL
    if type(future) is _FutureRecordMetadata:
        batch = _slot(future, _F_BATCH)
    if batch != NULL and <object>batch is not None and _slot(<object>batch, _B_DONE) != Py_True \
            and _slot(<object>batch, _B_DONE) != NULL and _slot(future, _F_FAILED) == Py_None:
        # Not acknowledged yet: the first await of a batch's records, once
        # per Produce request in ``for f in futures: await f``.
        return _await_pending(future, <object>batch)
    md = _acked(future, batch)
    if md is None:
        return _await_slow(future)
    return _ready(md)


class _Wake:
    """The done callback of a record awaited before it was done (as
    ``kchannel.producer.accumulator._await_done``'s ``wake``): wakes the
    awaiting task, at once on the loop's thread, else through the loop."""
    __slots__ = ("loop", "waiter")

    def __init__(self, loop, waiter):
        self.loop = loop
        self.waiter = waiter

    def __call__(self, _future):
        if _get_running_loop() is self.loop:
            _wake(self.waiter)
        else:
            self.loop.call_soon_threadsafe(_wake, self.waiter)


def _await_pending(future, batch):
    """``FutureRecordMetadata.__await__`` for a record not done yet (as
    the method's own path: ``_await_done`` then ``result()``), compiled: no
    interpreted frames, closure and cells per wait, and the acknowledged
    record's metadata as ``_future_await`` builds it."""
    loop = _get_running_loop_or_raise()
    waiter = loop.create_future()
    wake = _Wake(loop, waiter)
    with _DONE_LOCK:
        # (add_done_callback's registration; the batch's completion takes
        # the same lock, then calls each callback.)
        pending = not batch.done_flag
        if pending:
            callbacks = batch.done_callbacks
            if callbacks is None:
                callbacks = batch.done_callbacks = []
            callbacks.append((wake, future))
            # (wake holds the waiting task: back on the collector's lists,
            # see kchannel._cappender's track_batch)
            if not PyObject_GC_IsTracked(batch):
                PyObject_GC_Track(<PyObject *>batch)
    if pending:
        yield from waiter
    md = _acked(future, _slot(future, _F_BATCH))
    if md is None:
        return future.result()
    return md


cdef object _acked(object future, PyObject *batch):
    """The RecordMetadata of an acknowledged record (``_md_cache`` refilled
    when free), or None for every other case (not done, failed, split,
    slots unset, not the accumulator's types): the caller takes the
    method's own path.  Read through borrowed pointers (no reference
    counted per field read: the batch's and future's slots hold them
    meanwhile) and slots refilled only where they change."""
    cdef PyObject *p_index
    cdef PyObject *p_tp
    cdef PyObject *p_sizes
    cdef PyObject *p_base
    cdef PyObject *p_ts
    cdef PyObject *p_records
    cdef PyObject *p_sz
    cdef PyObject *p_rec
    cdef PyObject *md
    cdef Py_ssize_t k, base, ts, off
    if batch == NULL or batch == Py_None or _slot(<object>batch, _B_DONE) != Py_True \
            or _slot(<object>batch, _B_EXCEPTION) != Py_None \
            or _slot(<object>batch, _B_SPLIT) != Py_None:
        return None
    # (Slots left unset -- an object not made by its __init__ -- take the
    # method's own path, which raises AttributeError as before.)
    p_index = _slot(future, _F_INDEX)
    p_tp = _slot(<object>batch, _B_TP)
    p_sizes = _slot(<object>batch, _B_SIZES)
    p_base = _slot(<object>batch, _B_BASE)
    p_ts = _slot(<object>batch, _B_APPEND_TIME)
    if p_index == NULL or p_tp == NULL or p_sizes == NULL or p_base == NULL or p_ts == NULL:
        return None
    if not kc_aio_small_int(p_index, &k):
        if type(<object>p_index) is not int:
            return None
        k = PyLong_AsSsize_t(<object>p_index)
    # The TopicPartition read as the tuple it is: indexing a tuple
    # subclass (a namedtuple) goes through slot_sq_item, a Python-level
    # __getitem__ call with an int made per index (~750 instructions each,
    # two per record); PyTuple_GET_ITEM reads the item.
    if not PyTuple_Check(<object>p_tp) or PyTuple_GET_SIZE(<object>p_tp) != 2 \
            or not PyList_CheckExact(<object>p_sizes) \
            or k < 0 or k >= PyList_GET_SIZE(<object>p_sizes):
        return None
    p_sz = PyList_GET_ITEM(<object>p_sizes, k)
    if not PyTuple_Check(<object>p_sz) or PyTuple_GET_SIZE(<object>p_sz) != 2:
        return None
    if not kc_aio_small_int(p_ts, &ts):
        if type(<object>p_ts) is not int:
            return None
        ts = -1 if <object>p_ts < 0 else 0
    if ts < 0:
        # CreateTime: the record's own timestamp, its C field (no attribute
        # lookup on the batch and the record).
        p_records = _slot(<object>batch, _B_RECORDS)
        if p_records == NULL or not PyList_CheckExact(<object>p_records) \
                or k >= PyList_GET_SIZE(<object>p_records):
            return None
        p_rec = PyList_GET_ITEM(<object>p_records, k)
        if type(<object>p_rec) is not QueuedRecord:
            return None
        p_ts = <PyObject *>(<QueuedRecord>p_rec).timestamp
    global _md_cache
    md = <PyObject *>_md_cache
    if md == Py_None or _Py_REFCNT(md) != 1:
        _md_cache = (<PyTypeObject *>_RecordMetadata).tp_new(_RecordMetadata,
                                                             <PyObject *>_EMPTY, NULL)
        md = <PyObject *>_md_cache
    kc_aio_put(md, _M_TOPIC, PyTuple_GET_ITEM(<object>p_tp, 0))
    kc_aio_put(md, _M_PARTITION, PyTuple_GET_ITEM(<object>p_tp, 1))
    # The offset: in the refilled RecordMetadata's own int when only it
    # holds that int (no int made and freed per record, ~150
    # instructions; see kc_aio_int_set).
    cdef bint fits = kc_aio_small_int(p_base, &base)
    if not fits and type(<object>p_base) is int and \
            -PY_SSIZE_T_MAX <= <object>p_base <= PY_SSIZE_T_MAX:
        base = PyLong_AsSsize_t(<object>p_base)
        fits = True
    if fits:
        if base < 0:
            off = -1
        elif base > PY_SSIZE_T_MAX - k:
            off = -2          # (past int64: the int made as before)
        else:
            off = base + k
        if off == -2:
            _put(<object>md, _M_OFFSET, <object>p_base + <object>p_index)
        elif not (_in_place and kc_aio_int_set(_slot(<object>md, _M_OFFSET), off)):
            _put(<object>md, _M_OFFSET, off)
    else:
        _put(<object>md, _M_OFFSET,
             <object>p_base + <object>p_index if <object>p_base >= 0 else -1)
    kc_aio_put(md, _M_TIMESTAMP, p_ts)
    kc_aio_put(md, _M_KEY_SIZE, PyTuple_GET_ITEM(<object>p_sz, 0))
    kc_aio_put(md, _M_VALUE_SIZE, PyTuple_GET_ITEM(<object>p_sz, 1))
    return <object>md
