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

ctypedef unsigned long long u64

cdef i64 EMPTY = INT64_MIN  # a free place; the value itself is `has_empty`


cdef inline u64 _mix(u64 x) noexcept nogil:
    # splitmix64's finalizer (as key_table.pyx): consecutive ids spread
    x += 0x9E3779B97F4A7C15ULL
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL
    return x ^ (x >> 31)


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
        cdef Py_ssize_t mask, at
        if v == EMPTY:
            self.has_empty = True
            return 0
        if 2 * (self.n + 1) > self.cap:
            self._grow()
        mask = self.cap - 1
        at = <Py_ssize_t> (_mix(<u64> v) & <u64> mask)
        while self.table[at] != EMPTY:
            if self.table[at] == v:
                return 0
            at = (at + 1) & mask
        self.table[at] = v
        self.n += 1
        return 0

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = 8 if self.cap == 0 else 2 * self.cap, i, at, mask = cap - 1
        cdef i64* old = self.table
        cdef i64* table = <i64*> malloc(cap * sizeof(i64))
        cdef i64 v
        if table == NULL:
            raise MemoryError()
        for i in range(cap):
            table[i] = EMPTY
        for i in range(self.cap):
            v = old[i]
            if v != EMPTY:
                at = <Py_ssize_t> (_mix(<u64> v) & <u64> mask)
                while table[at] != EMPTY:
                    at = (at + 1) & mask
                table[at] = v
        self.table = table
        self.cap = cap
        free(old)
        return 0

    def add_value(self, value):
        """Add one value of any type, with Python's equality."""
        cdef object iv
        if type(value) is int:
            iv = value
        else:
            try:
                iv = int(value)
            except (TypeError, ValueError, OverflowError):
                self.others.add(value)
                return
            if iv != value:
                self.others.add(value)
                return
        if INT64_MIN <= iv <= INT64_MAX:
            self.add(<i64> iv)
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
        cdef Py_ssize_t mask, at
        cdef i64 v
        if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
            probe = DistinctSet()
            probe.add_value(value)
            if probe.others:
                return value in self.others
            value = next(iter(probe))
        v = value
        if v == EMPTY:
            return bool(self.has_empty)
        if self.n == 0:
            return False
        mask = self.cap - 1
        at = <Py_ssize_t> (_mix(<u64> v) & <u64> mask)
        while self.table[at] != EMPTY:
            if self.table[at] == v:
                return True
            at = (at + 1) & mask
        return False

    def __reduce__(self):
        return (DistinctSet, (list(self),))

    def __repr__(self):
        return f"DistinctSet({sorted(self, key=repr)!r})"
