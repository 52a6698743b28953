# cython: language_level=3
"""One component's rows of a Part (SASE active instance stack): timestamp,
arrival seq and the attribute values the plan reads, in timestamp order,
pruned from the front by the window."""

import numpy as np

from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memmove


cdef class Stack:
    """Rows in timestamp order; rows are addressed by absolute id
    (base + local index) so pruning the front keeps ids of live rows."""

    def __cinit__(self, int width):
        self.width = width
        self.n = 0
        self.head = 0
        self.cap = 0
        self.base = 0
        self.ts = NULL
        self.seq = NULL
        self.vals = NULL
        self.kinds = NULL

    def __dealloc__(self):
        free(self.ts)
        free(self.seq)
        free(self.vals)
        free(self.kinds)

    cdef void compact(self) noexcept:
        cdef i64 keep = self.n - self.head
        cdef int w = self.width
        if self.head == 0:
            return
        memmove(self.ts, self.ts + self.head, keep * sizeof(i64))
        memmove(self.seq, self.seq + self.head, keep * sizeof(i64))
        if w > 0:
            memmove(self.vals, self.vals + self.head * w, keep * w * sizeof(double))
            memmove(self.kinds, self.kinds + self.head * w, keep * w * sizeof(u8))
        self.base += self.head
        self.n = keep
        self.head = 0

    cdef i64 push(self, i64 ts, i64 seq, const double* v, const u8* k) except -1:
        cdef i64 cap
        cdef int w = self.width
        if self.n == self.cap:
            if self.head * 2 >= self.n and self.head > 0:
                self.compact()
            else:
                cap = 16 if self.cap == 0 else self.cap * 2
                self.ts = <i64*> realloc(self.ts, cap * sizeof(i64))
                self.seq = <i64*> realloc(self.seq, cap * sizeof(i64))
                self.vals = <double*> realloc(self.vals, cap * (w if w > 0 else 1) * sizeof(double))
                self.kinds = <u8*> realloc(self.kinds, cap * (w if w > 0 else 1) * sizeof(u8))
                if self.ts == NULL or self.seq == NULL or self.vals == NULL or self.kinds == NULL:
                    raise MemoryError()
                self.cap = cap
        self.ts[self.n] = ts
        self.seq[self.n] = seq
        if w > 0:
            memcpy(self.vals + self.n * w, v, w * sizeof(double))
            memcpy(self.kinds + self.n * w, k, w * sizeof(u8))
        self.n += 1
        return self.n - 1

    cdef void pop(self) noexcept:
        if self.n > self.head:
            self.n -= 1

    cdef void prune(self, i64 bound) noexcept:
        while self.head < self.n and self.ts[self.head] <= bound:
            self.head += 1
        if self.head == self.n and self.n > 0:
            self.base += self.n
            self.n = 0
            self.head = 0
        elif self.cap > 64 and self.head * 2 > self.n:
            self.compact()

    cdef i64 first_gt(self, i64 t) noexcept:
        cdef i64 lo = self.head, hi = self.n, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.ts[mid] <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def __len__(self):
        return self.n - self.head

    def state(self):
        cdef i64 h = self.head, m = self.n - self.head
        cdef int w = self.width
        ts = np.empty(m, dtype=np.int64)
        seq = np.empty(m, dtype=np.int64)
        vals = np.empty(m * w, dtype=np.float64)
        kinds = np.empty(m * w, dtype=np.uint8)
        cdef i64 i, j
        for i in range(m):
            ts[i] = self.ts[h + i]
            seq[i] = self.seq[h + i]
            for j in range(w):
                vals[i * w + j] = self.vals[(h + i) * w + j]
                kinds[i * w + j] = self.kinds[(h + i) * w + j]
        return (w, self.base + h, ts.tobytes(), seq.tobytes(), vals.tobytes(), kinds.tobytes())

    @staticmethod
    def from_state(state):
        w, base, tsb, seqb, valsb, kindsb = state
        cdef Stack s = Stack(w)
        ts = np.frombuffer(tsb, dtype=np.int64)
        seq = np.frombuffer(seqb, dtype=np.int64)
        vals = np.frombuffer(valsb, dtype=np.float64)
        kinds = np.frombuffer(kindsb, dtype=np.uint8)
        cdef double[::1] vv
        cdef u8[::1] kv
        cdef i64 i
        for i in range(ts.shape[0]):
            vv = vals[i * w:(i + 1) * w].copy()
            kv = kinds[i * w:(i + 1) * w].copy()
            s.push(ts[i], seq[i], &vv[0] if w > 0 else NULL, &kv[0] if w > 0 else NULL)
        s.base = base
        return s
