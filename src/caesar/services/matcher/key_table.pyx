# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Int tuples and their int values, looked up row by row in C.

The stage graph asks where each result row belongs (its context partition,
from its stream partition and key values: stage_graph.context_homes) and
the stream partition of each row (partitions.stream_of). The answer per
distinct key is a Python call; finding the distinct keys of a call with
numpy and mapping them through dicts cost ~0.35 µs per LR report. Here each
row's key is found in a C hash table of the keys seen so far, and only keys
never seen go to Python. pane_table.PaneTable keeps its panes in the same
table (w values: the slots of a pane's windows).
"""

from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

import numpy as np


cdef class KeyTable:
    """kw ints -> w ints, for the keys given so far (all forgotten by
    clear). Records are only added: a table is cleared whole when what it
    remembers may have changed."""

    def __cinit__(self, *args, **kwargs):
        self.n, self.rcap, self.icap = 0, 0, 0
        self.recs = NULL
        self.index = NULL

    def __init__(self, int kw, int w=1):
        if not 1 <= kw <= 64 or not 1 <= w <= 64:
            raise ValueError("a key has 1 to 64 ints, and 1 to 64 values")
        if self.recs != NULL:
            raise TypeError("a KeyTable is set up once")
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

    cdef u64 _hash(self, const i64* key) noexcept nogil:
        cdef u64 h = 0
        cdef int k
        for k in range(self.kw):
            h = mix64(h ^ <u64> key[k])
        return h

    cdef Py_ssize_t _find(self, const i64* key) noexcept nogil:
        """The record of `key`, or -1."""
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

    cdef void _place(self, Py_ssize_t r) noexcept nogil:
        cdef Py_ssize_t mask = self.icap - 1
        cdef Py_ssize_t at = <Py_ssize_t> (
            self._hash(self.recs + r * (self.kw + self.w)) & <u64> mask)
        while self.index[at] >= 0:
            at = (at + 1) & mask
        self.index[at] = r

    cdef Py_ssize_t _insert(self, const i64* key, const i64* values) except -1:
        """A new record (the key must not be in the table); its id."""
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
        memcpy(self.recs + r * width + self.kw, values, self.w * sizeof(i64))
        self.n += 1
        self._place(r)
        return r

    cdef object _missed(self, object missing, const i64* key, Py_ssize_t row):
        """`missing` (a dict, made when None) with `row` noted under the
        tuple of `key`; returned."""
        cdef int k
        if missing is None:
            missing = {}
        found = tuple([key[k] for k in range(self.kw)])
        rows = missing.get(found)
        if rows is None:
            missing[found] = [row]
        else:
            rows.append(row)
        return missing

    cdef list _add_missed(self, dict missing, object make):
        """The keys noted (_missed) added with their values: make(list of
        key tuples) gives per key its w ints (with w = 1, an int);
        [(record id, the rows noted under its key)]."""
        cdef i64 buf[64]
        cdef i64 vals[64]
        cdef int k
        wanted = list(missing)
        given = make(wanted)
        if len(given) != len(wanted):
            raise ValueError(f"{len(wanted)} keys were given, {len(given)} values came back")
        out = []
        for key, v in zip(wanted, given):
            for k in range(self.kw):
                buf[k] = key[k]
            if self.w == 1 and not isinstance(v, (list, tuple)):
                vals[0] = v
            else:
                if len(v) != self.w:
                    raise ValueError(f"a key has {self.w} values, {len(v)} came back")
                for k in range(self.w):
                    vals[k] = v[k]
            out.append((self._insert(buf, vals), missing[key]))
        return out

    def lookup(self, i64[:, ::1] keys, make):
        """The value of each row's key (keys: kw rows of n ints; a table of
        one value per key); keys not in the table yet go to make(list of
        key tuples, each once) -> one int each, and are kept."""
        cdef Py_ssize_t n = keys.shape[1], i, r
        cdef int k, kw = self.kw
        cdef i64 buf[64]
        cdef i64[::1] out
        if keys.shape[0] != kw:
            raise ValueError(f"keys of {keys.shape[0]} ints, the table's have {kw}")
        if self.w != 1:
            raise ValueError("lookup gives one value per key: this table keeps "
                             f"{self.w}")
        cdef Py_ssize_t last = -1  # the record of the row before, when it was found
        cdef bint same
        cdef i64 v
        values = np.empty(n, dtype=np.int64)
        out = values
        missing = None
        for i in range(n):
            # a row with the key of the row before (rows come grouped by
            # partition) takes its record without a hash and a probe
            same = last >= 0
            for k in range(kw):
                v = keys[k, i]
                if v != buf[k]:
                    same = False
                buf[k] = v
            if same:
                out[i] = self.recs[last * (kw + 1) + kw]
                continue
            r = self._find(buf)
            if r >= 0:
                out[i] = self.recs[r * (kw + 1) + kw]
                last = r
            else:
                missing = self._missed(missing, buf, i)
                last = -1
        if missing:
            for r, rows in self._add_missed(missing, make):
                for i in rows:
                    out[i] = self.recs[r * (kw + 1) + kw]
        return values
