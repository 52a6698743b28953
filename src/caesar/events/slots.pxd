# C-level contract of slots.pyx: the attributes of a `__slots__` class read
# and written in place, at the byte offsets its member descriptors hold (an
# attribute lookup through the type per field was half of the hot loops that
# read input records or make alerts).
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF


cdef object slot_offsets(type cls, tuple names)


cdef inline PyObject* slot_get(object o, Py_ssize_t at) noexcept:
    """The slot's object, borrowed; NULL when unset."""
    return (<PyObject**> ((<char*> <PyObject*> o) + at))[0]


cdef inline void slot_init(object o, Py_ssize_t at, object v) noexcept:
    """Set a slot that is still unset (NULL: an object tp_new just made)."""
    Py_INCREF(v)
    (<PyObject**> ((<char*> <PyObject*> o) + at))[0] = <PyObject*> v
