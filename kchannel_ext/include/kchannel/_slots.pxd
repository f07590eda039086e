# Reading and writing a __slots__ class's object slots at their offsets, for
# the compiled twins that fill the producer's own slotted classes in place
# (kchannel._cappender, kchannel._caiosend): a generic attribute access on a
# __slots__ class costs a type lookup and a descriptor call, ~100-150
# instructions each.  The offsets are read from the class's member
# descriptors at import; a class whose member is not a plain object slot any
# more raises ImportError there, so the module fails to import and its pure
# twin is used (kchannel._impl logs why).
from cpython.object cimport PyObject, PyTypeObject

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        Py_ssize_t offset
        int type
        int flags
    int T_OBJECT_EX

cdef extern from "descrobject.h":
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    PyTypeObject PyMemberDescr_Type


cdef inline Py_ssize_t slot_offset(cls, str name) except -1:
    cdef PyMemberDef *member
    d = cls.__dict__.get(name)
    if d is None or type(d) is not <object>&PyMemberDescr_Type:
        raise ImportError(f"{cls.__name__}.{name} is not a plain __slots__ member")
    member = (<PyMemberDescrObject *><PyObject *>d).d_member
    if member.type != T_OBJECT_EX or member.flags != 0:
        raise ImportError(f"{cls.__name__}.{name} is not a plain object slot")
    return member.offset
