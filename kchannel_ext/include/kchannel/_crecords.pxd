# The C layout of kchannel._crecords' QueuedRecord, for the modules that
# build or read it without attribute lookups (kchannel._cappender).  Found
# by module name on setup.py's include path (kchannel_ext/include), both
# when kchannel_ext/_crecords.pyx compiles and when a module cimports it.
cdef class QueuedRecord:
    cdef readonly object timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly object headers
