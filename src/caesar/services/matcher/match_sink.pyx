# cython: language_level=3, boundscheck=False, wraparound=False
"""One plan's matches as rows of growable C arrays. The engine's columnar
mode writes a match here field by field (no Python object per match) and
`take` hands the rows over as NumPy columns (caesar.plans.matches)."""

import numpy as np

from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from caesar.plans.matches import MatchColumns
from caesar.services.matcher.typedefs cimport K_BOOL, K_FLOAT, K_INT, K_MISSING, K_STR
from caesar.services.matcher.vm cimport pyvalue

cdef u8 K_OBJ = 250  # a Python value kept in `objs` (matches added as DerivedEvents)


cdef void* _grow(void* p, Py_ssize_t size) except NULL:
    cdef void* q = realloc(p, size if size > 0 else 1)
    if q == NULL:
        raise MemoryError("matcher: out of memory for match columns")
    return q


cdef object _i64_array(i64* src, Py_ssize_t n):
    out = np.empty(n, dtype=np.int64)
    cdef i64[::1] view = out
    if n:
        memcpy(&view[0], src, n * sizeof(i64))
    return out


cdef class MatchSink:
    def __cinit__(self, str plan_id, str event_type, tuple names):
        self.plan_id = plan_id
        self.event_type = event_type
        self.names = names
        self.nf = len(names)
        self.n = self.ns = 0
        self.cap = self.scap = 0
        self.objs = {}
        self.soff = <i64*> _grow(NULL, sizeof(i64))
        self.soff[0] = 0

    def __dealloc__(self):
        free(self.order)
        free(self.part)
        free(self.start)
        free(self.end)
        free(self.soff)
        free(self.seqs)
        free(self.vals)
        free(self.kinds)

    def __len__(self):
        return self.n

    cdef Py_ssize_t row(self, i64 order, i64 part, i64 start, i64 end) except -1:
        """A new row with its order, partition and times; the caller then
        writes its nf values (vals/kinds at row * nf) and its seqs (after
        reserve_seqs) and sets soff[row + 1]."""
        cdef Py_ssize_t r = self.n, c
        if r == self.cap:
            c = max(64, 2 * self.cap)
            self.order = <i64*> _grow(self.order, c * sizeof(i64))
            self.part = <i64*> _grow(self.part, c * sizeof(i64))
            self.start = <i64*> _grow(self.start, c * sizeof(i64))
            self.end = <i64*> _grow(self.end, c * sizeof(i64))
            self.soff = <i64*> _grow(self.soff, (c + 1) * sizeof(i64))
            self.vals = <Cell*> _grow(self.vals, c * self.nf * sizeof(Cell))
            self.kinds = <u8*> _grow(self.kinds, c * self.nf * sizeof(u8))
            self.cap = c
        self.order[r] = order
        self.part[r] = part
        self.start[r] = start
        self.end[r] = end
        self.n = r + 1
        return r

    cdef int reserve_seqs(self, Py_ssize_t k) except -1:
        cdef Py_ssize_t c
        if self.ns + k > self.scap:
            c = max(256, 2 * self.scap, self.ns + k)
            self.seqs = <i64*> _grow(self.seqs, c * sizeof(i64))
            self.scap = c
        return 0

    def add_event(self, ev, i64 order):
        """A match the engine made as a DerivedEvent (end negation, after-match
        skip, timeout): its row, values kept as they are."""
        cdef Py_ssize_t r = self.row(order, ev.partition, ev.start_ts, ev.end_ts), j
        seqs = ev.event_seqs
        self.reserve_seqs(len(seqs))
        for s in seqs:
            self.seqs[self.ns] = s
            self.ns += 1
        self.soff[r + 1] = self.ns
        fields = ev.fields
        for j, name in enumerate(self.names):
            self._put_value(r * self.nf + j, fields.get(name))

    cdef _put_value(self, Py_ssize_t at, value):
        # the kind the engine would have tagged it with, so that a column
        # mixing both kinds of rows keeps its NumPy type
        if value is None:
            self.kinds[at] = K_MISSING
        elif type(value) is bool:
            self.kinds[at] = K_BOOL
            self.vals[at].i = 1 if value else 0
        elif type(value) is int and -2**63 <= value < 2**63:
            self.kinds[at] = K_INT
            self.vals[at].i = value
        elif type(value) is float:
            self.kinds[at] = K_FLOAT
            self.vals[at].f = value
        else:
            self.kinds[at] = K_OBJ
            self.objs[at] = value

    cdef void clear(self):
        self.n = self.ns = 0
        if self.objs:
            self.objs = {}

    def take(self, pool):
        """The rows so far as MatchColumns (string codes looked up in `pool`);
        the sink starts empty again."""
        cdef Py_ssize_t n = self.n, i, j, nf = self.nf
        cdef u8 k0
        cdef bint same
        cdef i64[::1] iv
        cdef double[::1] fv
        fields = {}
        for j in range(nf):
            k0 = self.kinds[j] if n else K_INT
            same = k0 in (K_INT, K_FLOAT, K_BOOL)
            for i in range(1, n):
                if self.kinds[i * nf + j] != k0:
                    same = False
                    break
            if same and k0 == K_FLOAT:
                col = np.empty(n, dtype=np.float64)
                fv = col
                for i in range(n):
                    fv[i] = self.vals[i * nf + j].f
            elif same:  # integers, or bools as 0/1
                col = np.empty(n, dtype=np.int64)
                iv = col
                for i in range(n):
                    iv[i] = self.vals[i * nf + j].i
                if k0 == K_BOOL:
                    col = col.astype(np.bool_)
            else:
                col = np.empty(n, dtype=object)
                for i in range(n):
                    if self.kinds[i * nf + j] == K_OBJ:
                        col[i] = self.objs[i * nf + j]
                    else:
                        col[i] = pyvalue(self.kinds[i * nf + j], self.vals[i * nf + j], pool)
            fields[self.names[j]] = col
        out = MatchColumns(self.plan_id, self.event_type, _i64_array(self.order, n),
                           _i64_array(self.part, n), _i64_array(self.start, n),
                           _i64_array(self.end, n), _i64_array(self.soff, n + 1),
                           _i64_array(self.seqs, self.ns), fields)
        self.clear()
        return out
