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

from cpython.ref cimport PyObject
from libc.stdlib cimport free, malloc
from libc.string cimport memset

import numpy as np

from caesar.services.matcher.distinct_set cimport DistinctSet
from caesar.services.matcher.key_table cimport KeyTable, i64

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


cdef inline i64 _floor_start(i64 ts, i64 slide) noexcept nogil:
    """(ts // slide) * slide with Python's floor division (ts may be < 0)."""
    cdef i64 q = ts / slide
    if (ts % slide != 0) and ((ts < 0) != (slide < 0)):
        q -= 1
    return q * slide


cdef class PaneTable(KeyTable):
    """Pane key (kw ints: partition, group values, the last window start
    holding the pane) -> the slots of the pane's w windows (key_table's
    table, w values a key). Records are only added, and all forgotten
    together (clear) whenever a window closes or state is restored, as the
    executor's _pane_slots cache is."""

    def __init__(self, int kw, int w):
        KeyTable.__init__(self, kw, w)

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
        cdef i64[::1] out
        if kw > 64 or self.w > 64 or keys.shape[0] != kw - 1 or keys.shape[1] != n:
            raise ValueError("pane keys do not fit the table")
        if slide <= 0:
            raise ValueError("the slide must be positive")
        cdef Py_ssize_t last = -1  # the record of the row before, when it was found
        cdef bint same
        cdef i64 v
        entries = np.empty(n, dtype=np.int64)
        out = entries
        missing = None
        for i in range(n):
            start = _floor_start(ts[i], slide)
            if start + size <= ts[i]:
                out[i] = -1
                last = -1
                continue
            # a row with the pane of the row before takes its record without
            # a hash and a probe (key_table.lookup)
            same = last >= 0 and buf[kw - 1] == start
            for k in range(kw - 1):
                v = keys[k, i]
                if v != buf[k]:
                    same = False
                buf[k] = v
            buf[kw - 1] = start
            if same:
                out[i] = last
                continue
            r = self._find(buf)
            if r < 0:
                missing = self._missed(missing, buf, i)
                out[i] = -1
                last = -1
            else:
                out[i] = r
                last = r
        if missing:
            for r, rows in self._add_missed(missing, allocate):
                for i in rows:
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
        distinct[slot][ai] (a distinct_set.DistinctSet)."""
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
                                one = (<list> found)[ai]
                                if type(one) is not DistinctSet:
                                    raise TypeError("distinct values are kept in DistinctSets")
                                sets[s] = <PyObject*> one
                            (<DistinctSet> sets[s]).add(v)
        finally:
            free(sets)
