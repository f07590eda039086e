# Types for compiling _sendqueue_py.py itself as kchannel.network._csendqueue
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# QueuedSend becomes an extension type (C fields, read without attribute
# lookups here; public, so channel_sends.py reads them as attributes), and
# the queue's functions C functions with typed locals; cpdef keeps their
# Python wrappers, which ChannelSendQueue takes as its methods.
cimport cython


cdef class QueuedSend:
    cdef public object data
    cdef public object size
    cdef public bint report
    cdef public object head
    cdef public object tail


# (its fields set as C fields)
@cython.locals(e=QueuedSend)
cdef QueuedSend _new_send(data, size, bint report, head, tail=*)

@cython.locals(i=Py_ssize_t, separate=Py_ssize_t)
cdef QueuedSend _parts_send(ch, tuple parts)


@cython.locals(e=QueuedSend, n=Py_ssize_t)
cpdef set_send(ch, payload, already_framed=*)

@cython.locals(entry=QueuedSend, n=Py_ssize_t, total=Py_ssize_t, written=Py_ssize_t,
               count=Py_ssize_t, max_bytes=Py_ssize_t)
cpdef write_sends(ch, max_bytes=*)

@cython.locals(e=QueuedSend, ln=Py_ssize_t, total=Py_ssize_t, count=Py_ssize_t,
               run_bytes=Py_ssize_t, bufs=list, run=list)
cpdef gather(ch)

@cython.locals(e=QueuedSend, n=Py_ssize_t, hl=Py_ssize_t, ln=Py_ssize_t)
cpdef retire(ch, n)
