# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The distinct values of one count(DISTINCT) window, int64 values in C.

A Python set made an int object per value added (pane_table.accumulate) and,
when the window closed, freed each one: by then the objects were cold, and
the cache misses of freeing Linear Road's distinct cars per segment and
minute were 7 % of the pipeline's (callgrind's cache simulation, session
42); with no set work at all the pipeline ran 4.5 % faster (session 43).
Here int64 values live in an open-addressing table of int64s: adding one
writes eight bytes, closing the window frees one block.

Equality is Python's (a set's): a value equal to an int64 (True, 3.0) counts
as that int (and iterates as it); anything else (a string code is an int
already; NaN, a float with a fraction, an int beyond 64 bits) goes into
`others`, a Python set.
"""

from libc.stdlib cimport free, malloc
from libc.stdint cimport INT64_MAX, INT64_MIN

from caesar.services.matcher.key_table cimport mix64, u64

cdef i64 EMPTY = INT64_MIN  # a free place; the value itself is `has_empty`


cdef inline Py_ssize_t _place(const i64* table, Py_ssize_t cap, i64 v) noexcept nogil:
    """Where v is in the table, else the free place it would take (a table
    of cap places, a power of two, never full)."""
    cdef Py_ssize_t mask = cap - 1
    cdef Py_ssize_t at = <Py_ssize_t> (mix64(<u64> v) & <u64> mask)
    while table[at] != EMPTY and table[at] != v:
        at = (at + 1) & mask
    return at


cdef bint _int64_of(object value, i64* out) except -1:
    """Is value equal (by Python's ==) to an int64? Then that int in out."""
    cdef object iv
    if type(value) is int:
        iv = value
    else:
        try:
            iv = int(value)
        except (TypeError, ValueError, OverflowError):
            return False
        if iv != value:
            return False
    if not INT64_MIN <= iv <= INT64_MAX:
        return False
    out[0] = iv
    return True


cdef class DistinctSet:
    """A set of values (update, add_value, len, iteration, in) keeping
    int64 values in C."""

    def __cinit__(self, *args, **kwargs):
        self.table = NULL
        self.cap = self.n = 0
        self.has_empty = False
        self.others = set()

    def __init__(self, values=()):
        self.update(values)

    def __dealloc__(self):
        free(self.table)

    cdef int add(self, i64 v) except -1:
        """Add an int64 value (the C path of pane_table.accumulate)."""
        cdef Py_ssize_t at
        if v == EMPTY:
            self.has_empty = True
            return 0
        if 2 * (self.n + 1) > self.cap:
            self._grow()
        at = _place(self.table, self.cap, v)
        if self.table[at] == EMPTY:
            self.table[at] = v
            self.n += 1
        return 0

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = 8 if self.cap == 0 else 2 * self.cap, i
        cdef i64* old = self.table
        cdef i64* table = <i64*> malloc(cap * sizeof(i64))
        if table == NULL:
            raise MemoryError()
        for i in range(cap):
            table[i] = EMPTY
        for i in range(self.cap):
            if old[i] != EMPTY:
                table[_place(table, cap, old[i])] = old[i]
        self.table = table
        self.cap = cap
        free(old)
        return 0

    def add_value(self, value):
        """Add one value of any type, with Python's equality."""
        cdef i64 v
        if _int64_of(value, &v):
            self.add(v)
        else:
            self.others.add(value)

    def update(self, values):
        for v in values:
            self.add_value(v)

    def __len__(self):
        return self.n + self.has_empty + len(self.others)

    def __iter__(self):
        cdef Py_ssize_t i
        out = [self.table[i] for i in range(self.cap) if self.table[i] != EMPTY]
        if self.has_empty:
            out.append(EMPTY)
        out.extend(self.others)
        return iter(out)

    def __contains__(self, value):
        cdef i64 v
        if not _int64_of(value, &v):
            return value in self.others
        if v == EMPTY:
            return bool(self.has_empty)
        return self.n > 0 and self.table[_place(self.table, self.cap, v)] == v

    def __reduce__(self):
        return (DistinctSet, (list(self),))

    def __repr__(self):
        return f"DistinctSet({sorted(self, key=repr)!r})"
