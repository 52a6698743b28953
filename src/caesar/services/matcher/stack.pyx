# cython: language_level=3
"""One component's rows of a Part (SASE active instance stack): timestamp,
arrival seq and the attribute values the plan reads, in timestamp order,
pruned from the front by the window."""

from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memmove

cdef i64 _FIRST_CAP = 2  # rows a stack makes room for at its first push


cdef class Stack:
    """Rows in timestamp order; rows are addressed by absolute id
    (base + local index) so pruning the front keeps ids of live rows."""

    # No __cinit__: tp_alloc zeroes the object (n = head = cap = base = 0,
    # NULL rows), and new_stack sets the width without the argument parsing
    # of a constructor call (one Stack per component of every new Part).

    def __init__(self, int width):
        self.width = width

    def __dealloc__(self):
        free(self.ts)  # one block holds ts, seq, vals and kinds (_grow)

    cdef void compact(self) noexcept:
        cdef i64 keep = self.n - self.head
        cdef int w = self.width
        if self.head == 0:
            return
        memmove(self.ts, self.ts + self.head, keep * sizeof(i64))
        memmove(self.seq, self.seq + self.head, keep * sizeof(i64))
        if w > 0:
            memmove(self.vals, self.vals + self.head * w, keep * w * sizeof(Cell))
            memmove(self.kinds, self.kinds + self.head * w, keep * w * sizeof(u8))
        self.base += self.head
        self.n = keep
        self.head = 0

    cdef i64 push(self, i64 ts, i64 seq, const Cell* v, const u8* k) except -1:
        cdef int w = self.width
        if self.n == self.cap:
            if self.shared:  # a bug in the caller: it must own the stack (part.own_stack)
                raise RuntimeError("push into the shared empty stack")
            if self.head * 2 >= self.n and self.head > 0:
                self.compact()
            else:
                # most parts hold a row or two (LR: a car's latest report at
                # one place), and there are millions: start small
                self._grow(_FIRST_CAP if self.cap == 0 else self.cap * 2)
        self.ts[self.n] = ts
        self.seq[self.n] = seq
        if w > 0:
            memcpy(self.vals + self.n * w, v, w * sizeof(Cell))
            memcpy(self.kinds + self.n * w, k, w * sizeof(u8))
        self.n += 1
        return self.n - 1

    cdef int _grow(self, i64 cap) except -1:
        """Room for cap rows: ts, seq, vals and kinds in one block (one
        malloc and one free per growth instead of four), the rows [0, n)
        copied to the same places."""
        cdef int w = self.width if self.width > 0 else 1
        cdef char* block = <char*> malloc(cap * (2 * sizeof(i64) + w * (sizeof(Cell) + sizeof(u8))))
        if block == NULL:
            raise MemoryError()
        cdef i64* ts = <i64*> block
        cdef i64* seq = ts + cap
        cdef Cell* vals = <Cell*> (seq + cap)
        cdef u8* kinds = <u8*> (vals + cap * w)
        if self.n > 0:
            memcpy(ts, self.ts, self.n * sizeof(i64))
            memcpy(seq, self.seq, self.n * sizeof(i64))
            memcpy(vals, self.vals, self.n * w * sizeof(Cell))
            memcpy(kinds, self.kinds, self.n * w * sizeof(u8))
        free(self.ts)
        self.ts, self.seq, self.vals, self.kinds = ts, seq, vals, kinds
        self.cap = cap
        return 0

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
        """(width, first live row id, ts, seq, values, kinds) as bytes: the
        live rows' raw arrays (values are 8-byte cells, typedefs.pxd)."""
        cdef i64 h = self.head, m = self.n - self.head
        cdef int w = self.width
        if m == 0:
            return (w, self.base + h, b"", b"", b"", b"")
        return (w, self.base + h,
                (<char*> (self.ts + h))[:m * sizeof(i64)],
                (<char*> (self.seq + h))[:m * sizeof(i64)],
                (<char*> (self.vals + h * w))[:m * w * sizeof(Cell)] if w > 0 else b"",
                (<char*> (self.kinds + h * w))[:m * w] if w > 0 else b"")

    @staticmethod
    def from_state(state):
        wo, base, tsb, seqb, valsb, kindsb = state
        cdef int w = wo
        cdef Stack s = new_stack(w)
        cdef i64 m = len(tsb) // sizeof(i64), i
        cdef const unsigned char[::1] tsv, seqv, valv, kindv
        cdef const i64* tsp
        cdef const i64* seqp
        cdef const Cell* vp = NULL
        cdef const u8* kp = NULL
        if m == 0:
            s.base = base
            return s
        if len(seqb) != m * sizeof(i64) or len(valsb) != m * w * sizeof(Cell) \
                or len(kindsb) != m * w:
            raise ValueError("stack state: arrays of different lengths")
        tsv, seqv = tsb, seqb
        tsp = <const i64*> &tsv[0]
        seqp = <const i64*> &seqv[0]
        if w > 0:
            valv, kindv = valsb, kindsb
            vp = <const Cell*> &valv[0]
            kp = <const u8*> &kindv[0]
        for i in range(m):
            if w > 0:
                s.push(tsp[i], seqp[i], vp + i * w, kp + i * w)
            else:
                s.push(tsp[i], seqp[i], NULL, NULL)
        s.base = base
        return s


cdef Stack new_stack(int width):
    """Stack(width) without the Python call: Part makes one per component."""
    cdef Stack s = Stack.__new__(Stack)
    s.width = width
    return s


cdef list _EMPTY = []  # by width: the shared empty Stack


cdef Stack empty_stack(int width):
    """The one empty Stack of this width that new Parts share until their
    first push into the component (part.own_stack): most parts get rows in
    one component only (LR: a car's report at a place, in the first of
    StoppedCar's four), and pruning, sweeping and snapshots leave an empty
    stack as it is."""
    cdef Stack s
    while len(_EMPTY) <= width:
        s = new_stack(len(_EMPTY))
        s.shared = True
        _EMPTY.append(s)
    return <Stack> _EMPTY[width]
