# Types for compiling _clientloop_py.py itself as kchannel.client._cclientloop
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# The pure twin's __slots__ name the same fields: both twins expose the same
# attributes.
cimport cython
# (the selector's send, a C call from _send)
from kchannel.network._cnetloop cimport SelectorLoop
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.buffer cimport PyBuffer_IsContiguous

cdef extern from "Python.h":
    bint PyMemoryView_Check(object)
    Py_buffer *PyMemoryView_GET_BUFFER(object)

cdef bint _C_WIRE
cdef long long _CORR_UNREAD


# _SIZE_HEAD_CORR.pack(n, head, corr) (">i4si") in C: the size prefix,
# the header's four head bytes and the correlation id, big-endian; None
# when ``head`` is not 4 bytes (the caller packs it as before).
cdef inline object _c_size_head_corr(long long n, object head, long long corr):
    cdef bytes out
    cdef unsigned char *p
    cdef const unsigned char *h
    cdef unsigned int un = <unsigned int>n, uc = <unsigned int>corr
    if type(head) is not bytes or PyBytes_GET_SIZE(head) != 4:
        return None
    out = PyBytes_FromStringAndSize(NULL, 12)
    p = <unsigned char *>PyBytes_AS_STRING(out)
    h = <const unsigned char *>PyBytes_AS_STRING(head)
    p[0] = (un >> 24) & 0xFF
    p[1] = (un >> 16) & 0xFF
    p[2] = (un >> 8) & 0xFF
    p[3] = un & 0xFF
    p[4] = h[0]
    p[5] = h[1]
    p[6] = h[2]
    p[7] = h[3]
    p[8] = (uc >> 24) & 0xFF
    p[9] = (uc >> 16) & 0xFF
    p[10] = (uc >> 8) & 0xFF
    p[11] = uc & 0xFF
    return out


# _I32.unpack_from(payload)[0] in C for a bytes payload or a C-contiguous
# memoryview (the selector's receives) of at least 4 bytes; else
# _CORR_UNREAD (the caller unpacks it as before).
cdef inline long long _c_corr(object payload):
    cdef const unsigned char *p
    cdef Py_buffer *view
    if type(payload) is bytes:
        if PyBytes_GET_SIZE(payload) < 4:
            return _CORR_UNREAD
        p = <const unsigned char *>PyBytes_AS_STRING(payload)
    elif PyMemoryView_Check(payload):
        view = PyMemoryView_GET_BUFFER(payload)
        if view.len < 4 or view.itemsize != 1 or not PyBuffer_IsContiguous(view, b'C'):
            return _CORR_UNREAD
        p = <const unsigned char *>view.buf
    else:
        return _CORR_UNREAD
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16)
                 | (<unsigned int>p[2] << 8) | <unsigned int>p[3])


cdef class ClientResponse:
    cdef public object node_id
    cdef public object api_key
    cdef public object api_version
    cdef public object correlation_id
    cdef public object body
    cdef public object exception
    cdef public object request_time_ms
    cdef public object receive_time_ms


cdef class InFlight:
    cdef public object api_key
    cdef public object version
    cdef public object sent_ms
    cdef public object internal


cdef class NodeStats:
    # (counted per request and per response: C integers, no int object
    # made per increment)
    cdef public long long tx
    cdef public long long txbytes
    cdef public long long rx
    cdef public long long rxbytes
    cdef public object connects
    cdef public object disconnects
    cdef public object req_timeouts
    cdef public object rtts
    cdef public object state_ms


cdef class NodeState:
    cdef public object id
    cdef public object state
    cdef public object in_flight
    cdef public object api_versions
    cdef public object stats


cdef class ClientLoop:
    cdef dict __dict__
    cdef object __weakref__
    cdef public dict _nodes
    cdef public list _pending
    cdef public object selector
    cdef public bint _sent_without_response
    cdef public dict _request_timeouts
    cdef public dict _request_encoders
    cdef public dict _request_heads
    cdef public dict _response_decoders
    cdef public dict _body_decoders
    cdef public object _next_corr
    cdef public object _next_request_deadline_ms
    cdef public object _next_setup_deadline_ms
    cdef public object request_timeout_ms
    cdef public object time

    # (a C call from the compiled Sender, once per Produce request)
    # (node: a _Node or None, its NodeState fields read as C fields)
    @cython.locals(node=NodeState)
    cpdef send(self, node_id, api_key, body, version=*, expect_response=*, timeout_ms=*)
    # (NetworkClient's ApiVersions exchange calls _send too)
    # (node: a _Node, whose NodeState fields are read as C fields)
    @cython.locals(entry=InFlight, stats=NodeStats, n=Py_ssize_t, node=NodeState,
                   loop=SelectorLoop)
    cpdef _send(self, node, api_key, version, body, internal, expect_response=*)
    @cython.locals(entry=InFlight, resp=ClientResponse, stats=NodeStats, node=NodeState,
                   corr=cython.longlong)
    cdef _handle_response(self, node, payload, now, list out)
    # (cpdef only to type its locals: node, a _Node or None, whose state is
    # read as a C field per response; called through its Python wrapper)
    @cython.locals(node=NodeState)
    cpdef poll(self, timeout_ms)


# (a C call from cluster_poll, once per poll; the responses' fields read as
# C fields)
@cython.locals(resp=ClientResponse, n=Py_ssize_t, i=Py_ssize_t)
cpdef complete_responses(responses, start, dict callbacks, stop_key)
