# C-level contract of distinct_set.pyx: count(DISTINCT) values of one window.
from caesar.services.matcher.key_table cimport i64


cdef class DistinctSet:
    cdef i64* table         # open addressing; EMPTY marks a free place
    cdef Py_ssize_t cap, n  # places (a power of two, or 0), int64 values held
    cdef bint has_empty     # the value EMPTY itself was added
    cdef readonly set others  # values that are not exact int64 (Python equality)

    cdef int add(self, i64 v) except -1
    cdef int _grow(self) except -1
