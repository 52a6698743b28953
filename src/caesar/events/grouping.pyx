# cython: language_level=3, boundscheck=False, wraparound=False
"""Distinct values and groups of int64 columns in C: what batch.py's
distinct, distinct_inverse and lex_groups compute with NumPy sorts, in one
or two passes. A batch's rows hold few distinct keys (LR: a second's
reports, two partitions per timestamp), so the rows are grouped through a
small hash table and only the distinct keys are sorted; a sort per call
over every row, with its temporaries, was ~5 % of the embedded pipeline.
batch.py keeps the NumPy versions as the reference the tests compare with."""

from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memset

import numpy as np

ctypedef long long i64

cdef enum:
    _MAXKEYS = 8


cdef bint _sorted(const i64* v, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(1, n):
        if v[i] < v[i - 1]:
            return False
    return True


def is_sorted(const i64[::1] values) -> bool:
    """Are the values non-decreasing (so a stable sort leaves them as they are)?"""
    if values.shape[0] < 2:
        return True
    return _sorted(&values[0], values.shape[0])


def lex_sorted(keys) -> bool:
    """Are the rows of `keys` (int64 arrays of one length, np.lexsort's
    order: the last one primary) lexicographically non-decreasing, so
    np.lexsort would give 0..n-1 (it is stable)?"""
    cdef Py_ssize_t n, i, k = len(keys)
    cdef int j
    cdef const i64* cols[_MAXKEYS]
    cdef const i64[::1] mv
    if k == 0:
        return True
    if k > _MAXKEYS:
        raise ValueError(f"lex_sorted: at most {_MAXKEYS} keys, not {k}")
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in keys]
    n = len(arrays[0])
    for j in range(k):
        if len(arrays[j]) != n:
            raise ValueError("lex_sorted: keys of different lengths")
        if n:
            mv = arrays[j]
            cols[j] = &mv[0]
    cdef bint ok = True
    with nogil:
        for i in range(1, n):
            j = k - 1
            while j >= 0 and cols[j][i] == cols[j][i - 1]:
                j -= 1
            if j >= 0 and cols[j][i] < cols[j][i - 1]:
                ok = False
                break
    return ok


cdef struct _Groups:
    Py_ssize_t n          # rows
    int k                 # key columns
    const i64* cols[_MAXKEYS]
    i64* group            # per row: its group, numbered by first appearance
    Py_ssize_t* first     # per group: its first row
    Py_ssize_t ng         # groups
    Py_ssize_t* table     # open addressing: group + 1 (0 = free)
    Py_ssize_t cap        # table slots (a power of two)


cdef inline unsigned long long _hash(_Groups* g, Py_ssize_t r) noexcept nogil:
    cdef unsigned long long h = 0x9E3779B97F4A7C15ULL
    cdef int j
    for j in range(g.k):
        h ^= <unsigned long long> g.cols[j][r]
        h *= 0xBF58476D1CE4E5B9ULL
        h ^= h >> 31
    return h


cdef inline bint _same(_Groups* g, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef int j
    for j in range(g.k):
        if g.cols[j][a] != g.cols[j][b]:
            return False
    return True


cdef int _grow(_Groups* g) except -1 nogil:
    """Double the table and put every group back."""
    cdef Py_ssize_t cap = g.cap * 2, i, s
    cdef Py_ssize_t* table = <Py_ssize_t*> malloc(cap * sizeof(Py_ssize_t))
    if table == NULL:
        with gil:
            raise MemoryError()
    memset(table, 0, cap * sizeof(Py_ssize_t))
    for i in range(g.ng):
        s = <Py_ssize_t> (_hash(g, g.first[i]) & <unsigned long long> (cap - 1))
        while table[s] != 0:
            s = (s + 1) & (cap - 1)
        table[s] = i + 1
    free(g.table)
    g.table = table
    g.cap = cap
    return 0


cdef int _group(_Groups* g) except -1 nogil:
    """Each row's group (by first appearance) and each group's first row."""
    cdef Py_ssize_t r, s, t
    for r in range(g.n):
        s = <Py_ssize_t> (_hash(g, r) & <unsigned long long> (g.cap - 1))
        while True:
            t = g.table[s]
            if t == 0:
                g.first[g.ng] = r
                g.group[r] = g.ng
                g.table[s] = g.ng + 1
                g.ng += 1
                if g.ng * 2 > g.cap:
                    _grow(g)
                break
            if _same(g, g.first[t - 1], r):
                g.group[r] = t - 1
                break
            s = (s + 1) & (g.cap - 1)
    return 0


# qsort has no context argument: the columns the comparison reads (one call
# at a time holds the GIL while sorting, so a module global is safe)
cdef _Groups* _cmp_g = NULL


cdef int _cmp(const void* x, const void* y) noexcept nogil:
    cdef Py_ssize_t a = (<const Py_ssize_t*> x)[0], b = (<const Py_ssize_t*> y)[0]
    cdef int j
    cdef i64 u, v
    for j in range(_cmp_g.k):
        u = _cmp_g.cols[j][_cmp_g.first[a]]
        v = _cmp_g.cols[j][_cmp_g.first[b]]
        if u < v:
            return -1
        if u > v:
            return 1
    return 0


def lex_groups(keys):
    """(rows in lexicographic order of their keys, stable; where each group
    of equal keys starts in that order; the group of each row, groups
    numbered in that order) for int64 key columns of one length: as
    batch.lex_groups_reference (np.lexsort) gives them."""
    cdef Py_ssize_t n, i, r, m
    cdef int k = len(keys), j
    cdef _Groups g
    cdef list held = []
    cdef const i64[::1] col
    if k == 0 or k > _MAXKEYS:
        raise ValueError(f"lex_groups: 1 to {_MAXKEYS} key columns, not {k}")
    n = len(keys[0])
    for j in range(k):
        arr = np.ascontiguousarray(keys[j], dtype=np.int64)
        if len(arr) != n:
            raise ValueError("lex_groups: key columns of different lengths")
        held.append(arr)  # alive while g points into it
    order_a = np.empty(n, dtype=np.int64)
    inverse_a = np.empty(n, dtype=np.int64)
    if n == 0:
        return order_a, np.empty(0, dtype=np.int64), inverse_a
    cdef i64[::1] order = order_a, inverse = inverse_a
    cdef i64[::1] starts
    g.n = n
    g.k = k
    for j in range(k):
        col = held[j]
        g.cols[j] = &col[0]
    g.ng = 0
    g.cap = 16
    g.group = &inverse[0]  # first-appearance groups, renumbered below
    g.first = <Py_ssize_t*> malloc(n * sizeof(Py_ssize_t))
    g.table = <Py_ssize_t*> malloc(g.cap * sizeof(Py_ssize_t))
    cdef Py_ssize_t* by_rank = NULL
    cdef Py_ssize_t* rank = NULL
    cdef Py_ssize_t* start = NULL
    global _cmp_g
    try:
        if g.first == NULL or g.table == NULL:
            raise MemoryError()
        memset(g.table, 0, g.cap * sizeof(Py_ssize_t))
        _group(&g)
        m = g.ng
        by_rank = <Py_ssize_t*> malloc(m * sizeof(Py_ssize_t))
        rank = <Py_ssize_t*> malloc(m * sizeof(Py_ssize_t))
        start = <Py_ssize_t*> malloc((m + 1) * sizeof(Py_ssize_t))
        if by_rank == NULL or rank == NULL or start == NULL:
            raise MemoryError()
        for i in range(m):
            by_rank[i] = i
        _cmp_g = &g
        qsort(by_rank, m, sizeof(Py_ssize_t), _cmp)  # distinct keys: no ties
        _cmp_g = NULL
        for i in range(m):
            rank[by_rank[i]] = i
            start[i] = 0
        start[m] = 0
        for r in range(n):  # counting sort by rank: stable
            inverse[r] = rank[inverse[r]]
            start[inverse[r] + 1] += 1
        for i in range(m):
            start[i + 1] += start[i]
        starts_a = np.empty(m, dtype=np.int64)
        starts = starts_a
        for i in range(m):
            starts[i] = start[i]
        for r in range(n):
            order[start[inverse[r]]] = r
            start[inverse[r]] += 1
    finally:
        _cmp_g = NULL
        free(g.first)
        free(g.table)
        free(by_rank)
        free(rank)
        free(start)
    return order_a, starts_a, inverse_a


def distinct(values) -> np.ndarray:
    """The distinct values of a 1-D int64 array, ascending (np.unique)."""
    cdef const i64[::1] v
    cdef Py_ssize_t n = len(values), i, m = 0
    if n == 0:
        return np.asarray(values, dtype=np.int64).copy()
    arr = np.ascontiguousarray(values, dtype=np.int64)
    v = arr
    if not _sorted(&v[0], n):
        return distinct_inverse(arr)[0]
    out_a = np.empty(n, dtype=np.int64)
    cdef i64[::1] out = out_a
    out[0] = v[0]
    m = 1
    for i in range(1, n):
        if v[i] != v[i - 1]:
            out[m] = v[i]
            m += 1
    return out_a[:m].copy()


def distinct_inverse(values) -> tuple:
    """(the distinct values ascending, each row's place among them) of a
    1-D int64 array: np.unique(values, return_inverse=True)."""
    cdef Py_ssize_t n = len(values)
    if n == 0:
        return np.asarray(values, dtype=np.int64)[:1].copy(), np.zeros(0, dtype=np.int64)
    arr = np.ascontiguousarray(values, dtype=np.int64)
    order, starts, inverse = lex_groups([arr])
    return arr[order[starts]], inverse
