# C-level contract of the Cython pattern engine (see engine.pyx).

ctypedef unsigned char u8
ctypedef long long i64

cdef enum:
    MAXC = 16      # components per pattern
    MAXSTACK = 128  # VM value stack depth

cdef struct Env:
    # per component index: its stack's value/kind arrays, row width, the
    # current row (Kleene: last element, or the element under test), and the
    # Kleene elements (local row ids) an aggregate folds over
    double* vals[MAXC]
    u8* kinds[MAXC]
    int width[MAXC]
    i64 row[MAXC]
    i64* klist[MAXC]
    int klen[MAXC]


cdef class Stack:
    cdef public int width
    cdef i64 n, head, cap, base
    cdef i64* ts
    cdef i64* seq
    cdef double* vals
    cdef u8* kinds
    cdef i64 push(self, i64 ts, i64 seq, const double* v, const u8* k) except -1
    cdef void compact(self) noexcept
    cdef void prune(self, i64 bound) noexcept
    cdef void pop(self) noexcept
    cdef i64 first_gt(self, i64 t) noexcept


cdef class PlanRT:
    cdef public object cp
    cdef public str plan_id
    cdef public int slot
    cdef public int strategy
    cdef public i64 within
    cdef public int ncomp, npos, has_end_neg, neq
    cdef public i64 last_sweep
    cdef int[:, ::1] code
    cdef double[::1] cvals
    cdef u8[::1] ckinds
    cdef int[::1] pstart, plen
    cdef int pos[MAXC]
    cdef int rank[MAXC]
    cdef int kleene[MAXC]
    cdef int negated[MAXC]
    cdef int width[MAXC]
    cdef int iterf[MAXC]
    cdef int prevpos[MAXC]
    cdef int nextpos[MAXC]
    cdef int eqcol[MAXC][8]
    cdef int[::1] checks_ids, checks_start, checks_n
    cdef int[::1] negchk_ids, negchk_start, negchk_n
    cdef double* scratch[MAXC]
    cdef u8* scratch_k[MAXC]
    cdef public list outputs
    cdef public str output_type
    # prefix sharing (Cayuga thesis ch. 4): a follower reads the stacks of
    # its first `share` components from its leader's Part of the same key
    cdef public object leader
    cdef public int share
