# Reading and writing a __slots__ class's object slots at their offsets, for
# the compiled twins that fill the producer's own slotted classes in place
# (kchannel._cappender, kchannel._caiosend): a generic attribute access on a
# __slots__ class costs a type lookup and a descriptor call, ~100-150
# instructions each.  The offsets are read from the class's member
# descriptors at import; a class whose member is not a plain object slot any
# more raises ImportError there, so the module fails to import and its pure
# twin is used (kchannel._impl logs why); plain_slot_offset answers -1
# instead, for a caller that reads the attribute then.  slot_get, slot_is and
# slot_put read and write a slot at its offset.
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

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


cdef inline Py_ssize_t plain_slot_offset(cls, str name) except -2:
    """The offset of ``cls``'s own plain __slots__ object member ``name``;
    -1 when it is not one (for a caller that falls back to attribute access
    rather than failing its import: kchannel.producer._csenderloop, whose
    batch class is defined after it is imported)."""
    cdef PyMemberDef *member
    d = cls.__dict__.get(name)
    if d is None or type(d) is not <object>&PyMemberDescr_Type:
        return -1
    member = (<PyMemberDescrObject *><PyObject *>d).d_member
    if member.type != T_OBJECT_EX or member.flags != 0 or member.offset <= 0:
        return -1
    return member.offset


cdef inline Py_ssize_t slot_offset(cls, str name) except -1:
    cdef Py_ssize_t offset = plain_slot_offset(cls, name)
    if offset < 0:
        raise ImportError(f"{cls.__name__}.{name} is not a plain object slot")
    return offset


cdef inline PyObject *slot_get(obj, Py_ssize_t offset) noexcept:
    """The object in a slot (borrowed; NULL when unset)."""
    return (<PyObject **>((<char *><PyObject *>obj) + offset))[0]


cdef inline object slot_value(obj, Py_ssize_t offset):
    """The object in a slot (AttributeError when unset, as the attribute's
    read)."""
    cdef PyObject *value = (<PyObject **>((<char *><PyObject *>obj) + offset))[0]
    if value == NULL:
        raise AttributeError(f"slot at offset {offset} of {type(obj).__name__} is unset")
    return <object>value


cdef inline bint slot_is(obj, Py_ssize_t offset, value) noexcept:
    """Whether the slot holds ``value`` itself (unset: no)."""
    return (<PyObject **>((<char *><PyObject *>obj) + offset))[0] == <PyObject *>value


cdef inline void slot_put(obj, Py_ssize_t offset, value) noexcept:
    """Fill an object slot (a new reference; the old one released last, as
    a generic attribute write does)."""
    cdef PyObject **slot = <PyObject **>((<char *><PyObject *>obj) + offset)
    cdef PyObject *old = slot[0]
    Py_INCREF(value)
    slot[0] = <PyObject *>value
    Py_XDECREF(old)
