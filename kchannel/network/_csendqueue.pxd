# Types for compiling _sendqueue_py.py itself as kchannel.network._csendqueue
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# QueuedSend becomes an extension type (C fields, read without attribute
# lookups here; public, so channel_sends.py reads them as attributes), and
# the queue's functions C functions with typed locals; cpdef keeps their
# Python wrappers, which ChannelSendQueue takes as its methods.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.string cimport memcpy

cdef class QueuedSend:
    cdef public object data
    cdef public object size
    cdef public bint report
    cdef public object head
    cdef public object tail


# (its fields set as C fields)
@cython.locals(e=QueuedSend)
cdef QueuedSend _new_send(data, size, bint report, head, tail=*)

cdef bint _C_JOIN


# b"".join(parts[start:stop]) without the slice nor the join's buffer
# protocol per part: one bytes object, the parts copied into it (parts
# other than bytes: the join itself).  One part is returned as it is.
cdef inline bytes _c_join(tuple parts, Py_ssize_t start, Py_ssize_t stop):
    cdef Py_ssize_t k, size = 0
    cdef object part
    cdef bytes out
    cdef char *pos
    for k in range(start, stop):
        part = <object>PyTuple_GET_ITEM(parts, k)
        if type(part) is not bytes:
            return b"".join(parts[start:stop])
        size += PyBytes_GET_SIZE(part)
    if stop - start == 1:
        return <bytes>PyTuple_GET_ITEM(parts, start)
    if size == 0:
        return b""
    out = PyBytes_FromStringAndSize(NULL, size)
    pos = PyBytes_AS_STRING(out)
    for k in range(start, stop):
        part = <object>PyTuple_GET_ITEM(parts, k)
        memcpy(pos, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part))
        pos += PyBytes_GET_SIZE(part)
    return out


@cython.locals(i=Py_ssize_t, separate=Py_ssize_t, n=Py_ssize_t, head=bytes, tail=bytes)
cdef QueuedSend _parts_send(ch, tuple parts)


@cython.locals(e=QueuedSend, n=Py_ssize_t)
cpdef set_send(ch, payload, already_framed=*)

@cython.locals(entry=QueuedSend, n=Py_ssize_t, total=Py_ssize_t, written=Py_ssize_t,
               count=Py_ssize_t, max_bytes=Py_ssize_t)
cpdef write_sends(ch, max_bytes=*)

@cython.locals(e=QueuedSend, ln=Py_ssize_t, total=Py_ssize_t, count=Py_ssize_t,
               run_bytes=Py_ssize_t, bufs=list, run=list, coalesce_below=Py_ssize_t,
               coalesce_max=Py_ssize_t, gather_max=Py_ssize_t, gather_max_buffers=Py_ssize_t)
cpdef gather(ch)

@cython.locals(e=QueuedSend, n=Py_ssize_t, hl=Py_ssize_t, ln=Py_ssize_t)
cpdef retire(ch, n)
