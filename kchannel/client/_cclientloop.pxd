# Types for compiling _clientloop_py.py itself as kchannel.client._cclientloop
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# The pure twin's __slots__ name the same fields: both twins expose the same
# attributes.
cimport cython
# (the selector's send, a C call from _send)
from kchannel.network._cnetloop cimport SelectorLoop


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
    cdef public object tx
    cdef public object txbytes
    cdef public object rx
    cdef public object rxbytes
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
    @cython.locals(entry=InFlight, resp=ClientResponse, stats=NodeStats, node=NodeState)
    cdef _handle_response(self, node, payload, now, list out)
    # (cpdef only to type its locals: node, a _Node or None, whose state is
    # read as a C field per response; called through its Python wrapper)
    @cython.locals(node=NodeState)
    cpdef poll(self, timeout_ms)


# (a C call from cluster_poll, once per poll; the responses' fields read as
# C fields)
@cython.locals(resp=ClientResponse, n=Py_ssize_t, i=Py_ssize_t)
cpdef complete_responses(responses, start, dict callbacks, stop_key)
