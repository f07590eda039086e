# Types for compiling _netloop_py.py itself as kchannel.network._cnetloop
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# SelectorLoop becomes an extension type: the selector state its hot path
# reads on every poll is held in C fields (typed containers: the compiled
# loop calls the dict/set/list C API on them directly).  Every field is
# public, so Selector's Python code (and its tests) reads and writes them as
# attributes as before; ``__dict__`` keeps every other attribute.
cimport cython


cdef class SelectorLoop:
    cdef dict __dict__
    cdef object __weakref__
    cdef public dict _channels
    cdef public dict _fd_ops
    cdef public set _buffered
    cdef public set _explicitly_muted
    cdef public set _backlogged
    cdef public set _immediately_connected
    cdef public object _writes
    cdef public object _delayed
    cdef public object _idle_expiry
    cdef public object _setup_deadlines
    cdef public object _lingering
    cdef public object _epoll
    cdef public object _fd_to_key
    cdef public object _os
    cdef public object sensors
    cdef public object time
    cdef public bint _closed
    cdef public list completed_receives
    cdef public list completed_sends
    cdef public list connected
    cdef public list newly_ready
    cdef public dict disconnected
    cdef public Py_ssize_t _poll_bytes_read
    cdef public Py_ssize_t _poll_receives
    cdef public list _poll_sent
    cdef public object poll_time_ms
    cdef public object max_receives_per_channel
    cdef public object max_read_per_channel

    # (a C call from the network client's _send, once per request)
    cpdef send(self, id, payload, already_framed=*)

    # The per-channel steps of a poll: C calls from poll, send and
    # write_queued (nothing overrides them; Selector's Python code calls
    # only the public methods).
    cdef _write_now(self, ch, bint only=*, bint record=*)
    cdef _report_deferred(self, now)
    cdef _flush_queued(self, now)
    cdef _poll_channel(self, ch, readable, writable, now)
    cdef _settle_ready(self, ch)
    cdef _attempt_read(self, ch, now)
    cdef _record_sends(self, ch, done, now)
