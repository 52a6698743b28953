# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Windowed aggregation of integer arguments in one pass in C (aggregate.py).

aggregate.py groups a batch with numpy: a lexsort of the key columns, the
distinct keys as Python tuples, their window slots from a dict, then
reduceat per aggregate. That costs a fixed ~0.3 ms per call whatever the
batch (a step of a few events pays it in full) and ~0.2-0.5 µs per row. Here
each row finds its pane (partition, group values, the last window start
holding it) in a C hash table and is added straight into the slots of the w
windows holding the pane: the same accumulators, the same slots (allocated
by the executor for the panes the table does not know yet), the same exact
integer sums.

A pane's w windows all hold each of its rows when the window size is a
multiple of the slide (and w = 1 when it is at most one slide: a row may
then lie in no window); other shapes stay with numpy.
"""

from cpython.long cimport PyLong_FromLongLong
from cpython.ref cimport PyObject
from cpython.set cimport PySet_Add
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

import numpy as np

ctypedef long long i64
ctypedef unsigned long long u64
ctypedef unsigned char u8

cdef extern from *:
    """
    static inline int caesar_add_overflows(long long a, long long b, long long *r) {
        return __builtin_saddll_overflow(a, b, r);
    }
    """
    int caesar_add_overflows(i64 a, i64 b, i64* r) nogil

cdef extern from "Python.h":
    PyObject* PyDict_GetItem(object d, object key)


cdef inline u64 _mix(u64 x) noexcept nogil:
    # splitmix64's finalizer: consecutive ints (car ids, segments) spread
    x += 0x9E3779B97F4A7C15ULL
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL
    return x ^ (x >> 31)


cdef inline i64 _floor_start(i64 ts, i64 slide) noexcept nogil:
    """(ts // slide) * slide with Python's floor division (ts may be < 0)."""
    cdef i64 q = ts / slide
    if (ts % slide != 0) and ((ts < 0) != (slide < 0)):
        q -= 1
    return q * slide


cdef class PaneTable:
    """Pane key (kw ints) -> record id; a record holds the key and the slots
    of the pane's w windows. Records are only added, and all forgotten
    together (clear) whenever a window closes or state is restored, as the
    executor's _pane_slots cache is."""

    cdef readonly int kw, w
    cdef i64* recs          # n records of kw key ints then w slots
    cdef Py_ssize_t n, rcap
    cdef i64* index         # hash slot -> record id, -1 empty
    cdef Py_ssize_t icap    # a power of two, at least twice n

    def __cinit__(self, *args, **kwargs):
        self.n, self.rcap, self.icap = 0, 0, 0
        self.recs = NULL
        self.index = NULL

    def __init__(self, int kw, int w):
        if kw < 1 or w < 1:
            raise ValueError("a pane key needs at least one int and a pane at least one window")
        if self.recs != NULL:
            raise TypeError("a PaneTable is set up once")
        self.kw, self.w = kw, w

    def __dealloc__(self):
        free(self.recs)
        free(self.index)

    def __len__(self):
        return self.n

    def clear(self):
        self.n = 0
        if self.index != NULL:
            memset(self.index, 0xff, self.icap * sizeof(i64))

    cdef inline u64 _hash(self, const i64* key) noexcept nogil:
        cdef u64 h = 0
        cdef int k
        for k in range(self.kw):
            h = _mix(h ^ <u64> key[k])
        return h

    cdef Py_ssize_t find(self, const i64* key) noexcept nogil:
        cdef Py_ssize_t mask, at, r
        cdef int k
        cdef const i64* rk
        if self.n == 0:
            return -1
        mask = self.icap - 1
        at = <Py_ssize_t> (self._hash(key) & <u64> mask)
        while True:
            r = self.index[at]
            if r < 0:
                return -1
            rk = self.recs + r * (self.kw + self.w)
            for k in range(self.kw):
                if rk[k] != key[k]:
                    break
            else:
                return r
            at = (at + 1) & mask

    cdef int _place(self, Py_ssize_t r) except -1:
        cdef Py_ssize_t mask = self.icap - 1
        cdef Py_ssize_t at = <Py_ssize_t> (self._hash(self.recs + r * (self.kw + self.w)) & <u64> mask)
        while self.index[at] >= 0:
            at = (at + 1) & mask
        self.index[at] = r
        return 0

    cdef Py_ssize_t insert(self, const i64* key, const i64* slots) except -1:
        cdef Py_ssize_t width = self.kw + self.w, r, cap
        cdef i64* grown
        if self.n == self.rcap:
            cap = 64 if self.rcap == 0 else 2 * self.rcap
            grown = <i64*> realloc(self.recs, cap * width * sizeof(i64))
            if grown == NULL:
                raise MemoryError()
            self.recs, self.rcap = grown, cap
        if 2 * (self.n + 1) > self.icap:
            cap = 128 if self.icap == 0 else 2 * self.icap
            free(self.index)
            self.index = <i64*> malloc(cap * sizeof(i64))
            if self.index == NULL:
                self.icap = 0
                raise MemoryError()
            self.icap = cap
            memset(self.index, 0xff, cap * sizeof(i64))
            for r in range(self.n):
                self._place(r)
        r = self.n
        memcpy(self.recs + r * width, key, self.kw * sizeof(i64))
        memcpy(self.recs + r * width + self.kw, slots, self.w * sizeof(i64))
        self.n += 1
        self._place(r)
        return r

    def resolve(self, i64[:, ::1] keys, i64[::1] ts, i64 slide, i64 size, allocate):
        """Per row, the record of its pane, or -1 where the row lies in no
        window (a size below the slide). `keys`: one row of ints per pane
        key column but the last (the partition, the group values); the last
        is the row's last window start. Panes the table does not know are
        passed to allocate(list of key tuples) -> one list of w slots each,
        in the order of the windows' starts from the latest back."""
        cdef Py_ssize_t n = ts.shape[0], i, r
        cdef int k, kw = self.kw
        cdef i64 start
        cdef i64 buf[64]
        cdef i64 sl[64]
        cdef i64[::1] out
        if kw > 64 or self.w > 64 or keys.shape[0] != kw - 1 or keys.shape[1] != n:
            raise ValueError("pane keys do not fit the table")
        if slide <= 0:
            raise ValueError("the slide must be positive")
        entries = np.empty(n, dtype=np.int64)
        out = entries
        missing = None
        for i in range(n):
            start = _floor_start(ts[i], slide)
            if start + size <= ts[i]:
                out[i] = -1
                continue
            for k in range(kw - 1):
                buf[k] = keys[k, i]
            buf[kw - 1] = start
            r = self.find(buf)
            if r < 0:
                if missing is None:
                    missing = {}
                key = tuple([buf[k] for k in range(kw)])
                rows = missing.get(key)
                if rows is None:
                    missing[key] = [i]
                else:
                    rows.append(i)
                out[i] = -1
            else:
                out[i] = r
        if missing:
            wanted = list(missing)
            given = allocate(wanted)
            if len(given) != len(wanted):
                raise ValueError("allocate gave slots for another number of panes")
            for key, slots in zip(wanted, given):
                if len(slots) != self.w:
                    raise ValueError(f"a pane has {self.w} windows, allocate gave {len(slots)}")
                for k in range(kw):
                    buf[k] = key[k]
                for k in range(self.w):
                    sl[k] = slots[k]
                r = self.insert(buf, sl)
                for i in missing[key]:
                    out[i] = r
        return entries

    def accumulate(self, i64[::1] entries, list values, i64[:, ::1] count, i64[:, ::1] itotal,
                   i64[:, ::1] ilow, i64[:, ::1] ihigh, dict big, dict distinct,
                   tuple distinct_aggs):
        """Add each row (entries from resolve) to its pane's windows, per
        aggregate ai: values[ai] is None (count(*)) or (int64 values, uint8
        missing); count, exact sum (a total that leaves int64 goes on as a
        Python int in big[(ai, slot)], as do totals already there), min
        and max; distinct_aggs[ai]: its distinct values go into
        distinct[slot][ai] (a set)."""
        cdef Py_ssize_t n = entries.shape[0], i, r, cap = count.shape[1]
        cdef int w = self.w, width = self.kw + self.w, j, ai, na = count.shape[0]
        cdef i64 v, s, total
        cdef const i64* slots
        cdef const i64[::1] vv
        cdef const u8[::1] mm
        cdef bint has_big, want_distinct
        cdef PyObject** sets = NULL
        cdef PyObject* found
        if len(values) != na or len(distinct_aggs) != na or itotal.shape[1] != cap or \
                ilow.shape[1] != cap or ihigh.shape[1] != cap:
            raise ValueError("accumulators do not fit the aggregates")
        for i in range(n):
            r = entries[i]
            if r >= self.n:
                raise ValueError("an entry is not a record of this table")
            if r >= 0:
                slots = self.recs + r * width + self.kw
                for j in range(w):
                    if not 0 <= slots[j] < cap:
                        raise ValueError("a pane's slot is outside the accumulators")
        try:
            for ai in range(na):
                spec = values[ai]
                if spec is None:  # count(*)
                    for i in range(n):
                        r = entries[i]
                        if r < 0:
                            continue
                        slots = self.recs + r * width + self.kw
                        for j in range(w):
                            count[ai, slots[j]] += 1
                    continue
                vv, mm = spec
                if vv.shape[0] != n or mm.shape[0] != n:
                    raise ValueError("an argument column has another number of rows")
                has_big = len(big) > 0
                want_distinct = distinct_aggs[ai]
                if want_distinct and sets == NULL:
                    sets = <PyObject**> malloc(cap * sizeof(PyObject*))
                    if sets == NULL:
                        raise MemoryError()
                if want_distinct:
                    memset(sets, 0, cap * sizeof(PyObject*))
                for i in range(n):
                    r = entries[i]
                    if r < 0 or mm[i]:
                        continue
                    v = vv[i]
                    slots = self.recs + r * width + self.kw
                    for j in range(w):
                        s = slots[j]
                        count[ai, s] += 1
                        if v < ilow[ai, s]:
                            ilow[ai, s] = v
                        if v > ihigh[ai, s]:
                            ihigh[ai, s] = v
                        if has_big and (ai, s) in big:
                            big[(ai, s)] = big[(ai, s)] + v
                        elif caesar_add_overflows(itotal[ai, s], v, &total):
                            big[(ai, s)] = itotal[ai, s] + <object> v
                            has_big = True
                        else:
                            itotal[ai, s] = total
                        if want_distinct:
                            if sets[s] == NULL:
                                found = PyDict_GetItem(distinct, s)
                                if found == NULL:
                                    raise KeyError(f"no distinct values kept for slot {s}")
                                sets[s] = <PyObject*> (<list> found)[ai]
                            PySet_Add(<object> sets[s], PyLong_FromLongLong(v))
        finally:
            free(sets)
