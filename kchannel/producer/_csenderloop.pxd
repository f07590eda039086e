# Types for compiling _senderloop_py.py itself as kchannel.producer._csenderloop
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# The pure twin's __slots__ name the same fields: both twins expose the same
# attributes.
cimport cython
# (the network client's node and response types: their fields read as C
# fields per Produce request)
from kchannel.client._cclientloop cimport NodeState, ClientResponse, ClientLoop
# (the producer's sensors: their record a C call per batch and response)
from kchannel._cmetrics cimport Sensor


# The accumulator's lock and the done lock (_thread.lock objects) taken and
# released in C where no thread holds them (kchannel_ext/include/kchannel/
# _pylock.pxd, shared with kchannel._cappender) instead of calls of the
# bound methods (five pairs per Produce request).  A held lock is still
# waited for by the method (blocking, as before); on another CPython
# _c_lock_readable() is 0 and the methods are called.  Pure Python never
# reads these names (see _C_LOCKS).
from kchannel._pylock cimport (kc_lock_readable as _c_lock_readable,
                               kc_lock_try_acquire as _c_lock_try_acquire,
                               kc_lock_release as _c_lock_release)

# A batch's __slots__ slots read and written at their offsets (the member
# descriptors' offsets, read once for the first batch's type by
# _batch_slots), as kchannel_ext/_cappender.pyx and _caiosend.pyx do, with
# the same helpers (kchannel_ext/include/kchannel/_slots.pxd): a generic
# attribute access on a __slots__ class costs a type lookup and a descriptor
# call (~140 instructions); the Sender made ~15 per Produce request.  Not
# slot_offset, which fails the import: ProducerBatch is defined after this
# module is imported (accumulator.py derives it from BatchState), so the
# offsets are read for the first batch met, and a batch type whose members
# are not plain object slots is read by attribute (plain_slot_offset's -1).
from kchannel._slots cimport (plain_slot_offset as _c_slot_offset, slot_is as _c_slot_is,
                              slot_put as _c_slot_put, slot_value as _c_slot_value)

cdef object _slots_type
cdef Py_ssize_t _S_CALLBACKS, _S_DONE_FLAG, _S_BASE_OFFSET, _S_LOG_APPEND_TIME, _S_EXCEPTION
cdef Py_ssize_t _S_TP, _S_CREATED, _S_CLOSED, _S_ESTIMATED, _S_DRAINED, _S_RECORDS, _S_ALLOCATED
cdef bint _C_SLOTS

# (set once at import: whether the C helpers above apply, and the type they
# read)
cdef bint _C_LOCKS
cdef object _LockType


cdef class AccumulatorState:
    cdef dict __dict__
    cdef object __weakref__
    cdef public dict batches
    cdef public object lock
    cdef public object memory
    cdef public set muted
    cdef public object linger_ms
    cdef public object batch_size
    cdef public object delivery_timeout_ms
    cdef public object retry_backoff_ms
    cdef public object retry_backoff_max_ms
    cdef public object flushes_in_progress
    cdef public object _drain_index
    cdef public object _memory_waiters
    cdef public bint expiry_due
    # (the instance's own __dict__: see AccumulatorState)
    cdef public dict _instance_dict
    # (lock.acquire and lock.release, bound once)
    cdef public object _lock_acquire
    cdef public object _lock_release
    # (see leader_scan)
    cdef public list _scan
    cdef public object _scan_leaders
    cdef public Py_ssize_t _scan_size


cdef class BatchState:
    cdef public object encoded
    cdef public object producer_id
    cdef public object producer_epoch
    cdef public object base_sequence
    cdef public object attempts
    cdef public object event
    cdef public object done_callbacks
    cdef public object parent
    cdef public object retry


cdef class SequenceState:
    cdef public object producer_id
    cdef public object producer_epoch
    cdef public dict _next
    cdef public dict _last_acked
    cdef public dict _started
    cdef public object bump_partitions
    cdef public bint first_sequence_checked

    # (C calls from the Sender's _can_drain and _partition_response)
    @cython.locals(started=tuple, seq=cython.longlong)
    cpdef bint assign(self, tp, BatchState batch, in_flight) except -1
    cpdef bint first_unacked(self, tp, in_flight) except -1
    @cython.locals(started=tuple, seq=cython.longlong, last=cython.longlong,
                   acked=cython.longlong)
    cpdef acked(self, BatchState batch)


cdef class SenderLoop


# The module's functions the Sender calls per request: cpdef, so a call from
# this module is a C call (no module-global lookup, no argument parsing of a
# Python call), while RecordAccumulator and the tests keep their Python
# wrappers.
cpdef tuple _one_partition_parts(version, head, partition, records)
cdef tuple _one_partition_records(version, head, records)
@cython.locals(batch=BatchState, in_place=bint, usual=bint)
cpdef accumulator_complete_batch(AccumulatorState acc, batch, base_offset, log_append_time)
@cython.locals(offsets=list)
cdef _batch_slots(cls)
cdef bint _in_place(batch)
cdef _batch_tp(b)
cdef _batch_records(b)
@cython.locals(state=dict, incomplete=set, batch=BatchState, c_lock=bint)
cpdef accumulator_deallocate(AccumulatorState acc, batch)
# (cluster.leaders: a dict, read with the dict C API)
@cython.locals(batches=dict)
cdef list leader_scan(AccumulatorState acc, leaders)
@cython.locals(leaders=dict, batch=BatchState, state=dict, c_lock=bint, muted=set, in_place=bint)
cpdef tuple accumulator_ready(AccumulatorState acc, cluster, now)
@cython.locals(leaders=dict, batch=BatchState, sender=SenderLoop, c_lock=bint, muted=set,
               in_place=bint, entry=tuple, by_node=dict, tps=list)
cpdef dict accumulator_drain(AccumulatorState acc, cluster, nodes, max_size, now, can_drain)
@cython.locals(flight=list)
cdef _add_in_flight(dict in_flight, b)
# (``state``: the network client's node, read as C fields)
cpdef bint _can_send_more(NodeState state, max_in_flight)


cdef class _ProduceCallback
cdef class ProduceResult


cdef class SenderLoop:
    cdef dict __dict__
    cdef object __weakref__
    cdef public object client
    cdef public object accumulator
    cdef public object metadata
    cdef public object time
    cdef public object acks
    cdef public object max_request_size
    cdef public object request_timeout_ms
    cdef public object max_in_flight
    cdef public object idempotent
    cdef public object compression
    cdef public object guarantee_order
    cdef public object running
    cdef public object force_close
    cdef public object fatal_error
    cdef public object sequences
    cdef public dict in_flight
    cdef public object retrying
    cdef public object sensors
    cdef public object txn
    cdef public object transactional_id
    cdef public object _batch_stats
    cdef public object _response_stats
    cdef public object _produce_versions
    cdef public object _produce_version
    cdef public object _head
    cdef public object _head_version
    cdef public object _head_tp

    # The per-request methods: cpdef, a C call from this class's own code
    # (a Python call each otherwise); Sender overrides none of them.
    @cython.locals(batch=BatchState)
    cpdef _encode(self, batch)
    @cython.locals(callback=_ProduceCallback, b=BatchState, state=NodeState, sensor=Sensor,
                   network=ClientLoop)
    cpdef _send_produce_request(self, node, batches, now)
    # (the decoded response's dicts read without a method call per key; the
    # usual response's ProduceResult as C fields)
    @cython.locals(topic=dict, p=dict, resp=ClientResponse, result=ProduceResult, sensor=Sensor)
    cpdef _handle_produce_response(self, resp, dict batches)
    @cython.locals(p=dict, sequences=SequenceState)
    cpdef _partition_response(self, batch, code, base_offset, log_append_time, p, now)
    cpdef _missing(self, dict batches, seen, now)
    cpdef _remove_in_flight(self, batch)
    cpdef _complete(self, batch, base_offset, log_append_time)
    # (called by accumulator_drain per partition drained: a C call)
    @cython.locals(sequences=SequenceState)
    cpdef _can_drain(self, tp, batch)
    @cython.locals(acc=AccumulatorState, head=BatchState, muted=set, batches=dict, full=bint)
    cpdef _queued_behind(self, dict drained, dict nodes, max_in_flight)
    @cython.locals(accumulator=AccumulatorState, nodes=dict, drained=dict, state=NodeState,
                   ready=set, not_ready=list, extra=Py_ssize_t, _more_pass=Py_ssize_t)
    cpdef send_producer_data(self, now)


cdef class ProduceResult:
    # (read by the Sender as C fields, set by ProduceResponseDecoder; the
    # integers as Python ints: the Sender passes them on as objects)
    cdef public int version
    cdef public object name
    cdef public object index
    cdef public object error_code
    cdef public object base_offset
    cdef public object log_append_time_ms
    cdef public object log_start_offset
    cdef public object throttle_time_ms


cdef bint _C_READ

from cpython.bytes cimport PyBytes_AS_STRING as _c_bytes_ptr, PyBytes_GET_SIZE as _c_bytes_len
from libc.string cimport memcmp as _c_memcmp


# Big-endian signed integers at ``pos`` of ``data`` (bounds checked by the
# caller: the response's length is checked against its layout first).
cdef inline int _c_be32(bytes data, Py_ssize_t pos):
    cdef const unsigned char *p = <const unsigned char *>_c_bytes_ptr(data) + pos
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16)
                 | (<unsigned int>p[2] << 8) | <unsigned int>p[3])


cdef inline short _c_be16(bytes data, Py_ssize_t pos):
    cdef const unsigned char *p = <const unsigned char *>_c_bytes_ptr(data) + pos
    return <short>((<unsigned int>p[0] << 8) | <unsigned int>p[1])


cdef inline long long _c_be64(bytes data, Py_ssize_t pos):
    cdef const unsigned char *p = <const unsigned char *>_c_bytes_ptr(data) + pos
    cdef unsigned long long v = 0
    cdef int k
    for k in range(8):
        v = (v << 8) | p[k]
    return <long long>v


# Whether data[start:stop] == name (bytes), without the slice.
cdef inline bint _c_same(bytes data, Py_ssize_t start, Py_ssize_t stop, object name):
    if type(name) is not bytes or _c_bytes_len(name) != stop - start:
        return False
    return _c_memcmp(_c_bytes_ptr(data) + start, _c_bytes_ptr(name), stop - start) == 0


cdef class ProduceResponseDecoder:
    cdef public int version
    cdef public object generic
    cdef object _name_raw
    cdef object _name

    # (the response's bytes read as C values: no object per byte compared)
    @cython.locals(data=bytes, version=int, n=Py_ssize_t, size=Py_ssize_t, pos=Py_ssize_t,
                   fixed=Py_ssize_t, extra=Py_ssize_t, result=ProduceResult)
    cpdef _fast(self, payload)


cdef class _ProduceCallback:
    # (a C call of the sender's cpdef method per response)
    cdef public SenderLoop sender
    cdef public object batches
