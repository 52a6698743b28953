# cython: language_level=3
"""Where the `__slots__` attributes of a class live in its objects (slots.pxd
reads and writes them there)."""

import types

cdef extern from "structmember.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset

cdef extern from "Python.h":
    # what a `__slots__` attribute's descriptor holds (descrobject.h)
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member

cdef enum:
    _T_OBJECT_EX = 16  # structmember.h: an object slot (AttributeError when unset)

cdef dict _OFFSETS = {}  # (class, names) -> offsets, or None


cdef object slot_offsets(type cls, tuple names):
    """The byte offsets of attributes `names` in objects of `cls`, as the
    attribute lookup finds them (the first class in the MRO defining one);
    None unless every one is a plain object slot."""
    cdef PyMemberDescrObject* d
    key = (cls, names)
    if key in _OFFSETS:
        return _OFFSETS[key]
    out = []
    for name in names:
        found = None
        for k in cls.__mro__:
            if name in k.__dict__:
                found = k.__dict__[name]
                break
        if type(found) is not types.MemberDescriptorType:
            out = None
            break
        d = <PyMemberDescrObject*> <PyObject*> found
        if d.d_member.type != _T_OBJECT_EX:
            out = None
            break
        out.append(d.d_member.offset)
    found = tuple(out) if out is not None else None
    _OFFSETS[key] = found
    return found
