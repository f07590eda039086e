# Types for compiling _tlspump_py.py itself as kchannel.network._ctlspump (Cython's
# pure-Python mode: this file augments the .py, which stays the one source of
# both twins; see setup.py).  Pure Python never reads it.
cimport cython


cdef class TlsPump:
    cdef object _sock
    cdef object _ssl
    cdef object _raw
    cdef object _in
    cdef object _outbio
    cdef Py_ssize_t _net_size
    cdef Py_ssize_t _app_size
    cdef Py_ssize_t _write_chunk
    cdef object _out
    cdef Py_ssize_t _out_off
    cdef bint _net_eof
    cdef bint _eof
    cdef bint _more
    cdef bint _drained
    cdef bint _hs_done
    cdef bint _close_notify
    cdef bint _hold_flight

    @cython.locals(off=Py_ssize_t, n=Py_ssize_t)
    cpdef bint flush(self) except -1

    @cython.locals(total=Py_ssize_t, chunk=Py_ssize_t, done=Py_ssize_t, n=Py_ssize_t)
    cpdef Py_ssize_t write(self, data) except -1

    @cython.locals(sent=Py_ssize_t)
    cdef Py_ssize_t _want_read(self, bint handshaking) except -3

    @cython.locals(n=Py_ssize_t)
    cpdef Py_ssize_t fill(self) except -2

    @cython.locals(got=Py_ssize_t, n=Py_ssize_t, r=Py_ssize_t, want=Py_ssize_t,
                   rlen=Py_ssize_t, rgot=Py_ssize_t, was_eof=bint, drained=bint)
    cdef Py_ssize_t _read(self, Py_ssize_t limit, object decoder=*) except -1
