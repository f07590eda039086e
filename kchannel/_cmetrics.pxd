# Types for compiling _metrics_py.py itself as kchannel._cmetrics (Cython's
# pure-Python mode: this file augments the .py, which stays the one source of
# both twins; see setup.py).  Pure Python never reads it.
#
# Every stat and the sensor become extension types: a window's start, value
# and count, a sum, a count are C doubles / integers (public: read as
# attributes, as the pure twin's __slots__), and record / record_many cpdef
# methods, so Sensor.record calls each stat's record in C (no lookup, no
# argument tuple) and each stat updates its open window in C.
cimport cython


cdef class Sample:
    cdef public double start
    cdef public double value
    cdef public long long count


cdef class Stat:
    cpdef record(self, double value, double now)
    cpdef record_many(self, values, double now)


cdef class _SampledStat(Stat):
    cdef public object config
    cdef public list _samples
    cdef public double _window
    cdef public Py_ssize_t _nsamples
    cdef public double _init

    @cython.locals(samples=list, cur=Sample)
    cdef Sample _open(self, double now)

    cdef Sample _rest_into_current(self, values, double now)


cdef class Rate(_SampledStat):
    cdef public bint count
    cdef public bint per_ns

    @cython.locals(samples=list, cur=Sample)
    cpdef record(self, double value, double now)

    @cython.locals(cur=Sample, n=Py_ssize_t, i=Py_ssize_t, acc=cython.double,
                   ix=cython.longlong, dx=cython.double)
    cpdef record_many(self, values, double now)


cdef class Avg(_SampledStat):
    @cython.locals(samples=list, cur=Sample)
    cpdef record(self, double value, double now)

    @cython.locals(cur=Sample, n=Py_ssize_t, i=Py_ssize_t, acc=cython.double,
                   ix=cython.longlong, dx=cython.double)
    cpdef record_many(self, values, double now)


cdef class Max(_SampledStat):
    @cython.locals(samples=list, cur=Sample)
    cpdef record(self, double value, double now)

    @cython.locals(cur=Sample, n=Py_ssize_t, i=Py_ssize_t, m=cython.double, v=cython.double,
                   ix=cython.longlong)
    cpdef record_many(self, values, double now)


cdef class CumulativeSum(Stat):
    cdef public double total

    cpdef record(self, double value, double now)

    @cython.locals(total=cython.double, ix=cython.longlong, dx=cython.double)
    cpdef record_many(self, values, double now)


cdef class CumulativeSumCount(CumulativeSum):
    cdef public long long count

    cpdef record(self, double value, double now)

    @cython.locals(total=cython.double, ix=cython.longlong, dx=cython.double)
    cpdef record_many(self, values, double now)


cdef class CumulativeCount(CumulativeSum):
    cpdef record(self, double value, double now)
    cpdef record_many(self, values, double now)


cdef class Value(Stat):
    cdef public double value

    cpdef record(self, double value, double now)
    cpdef record_many(self, values, double now)


cdef class Sensor:
    cdef object __weakref__
    cdef public object registry
    cdef public object name
    cdef public list parents
    cdef public list _stats
    cdef public list _recorders
    cdef public list _fast
    cdef public list _other
    cdef public list _other_many

    @cython.locals(stat=Stat, parent=Sensor, fast=list, iv=cython.longlong, it=cython.longlong,
                   v=cython.double, t=cython.double)
    cpdef record(self, value=*, now=*)

    @cython.locals(stat=Stat, parent=Sensor, fast=list, it=cython.longlong, t=cython.double)
    cpdef record_many(self, values, now=*)
