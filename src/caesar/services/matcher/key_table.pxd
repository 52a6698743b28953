# C-level contract of key_table.pyx: a hash table of int tuples, each with a
# fixed number of int values (the stage graph's memos; pane_table's panes).
ctypedef long long i64
ctypedef unsigned long long u64


cdef inline u64 mix64(u64 x) noexcept nogil:
    # splitmix64's finalizer: consecutive ints (car ids, segments) spread
    # (KeyTable's hash; distinct_set.DistinctSet's places)
    x += 0x9E3779B97F4A7C15ULL
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL
    return x ^ (x >> 31)


cdef class KeyTable:
    cdef readonly int kw, w
    cdef i64* recs          # n records: kw key ints, then w value ints
    cdef Py_ssize_t n, rcap
    cdef i64* index         # hash slot -> record id, -1 empty
    cdef Py_ssize_t icap

    cdef u64 _hash(self, const i64* key) noexcept nogil
    cdef Py_ssize_t _find(self, const i64* key) noexcept nogil
    cdef void _place(self, Py_ssize_t r) noexcept nogil
    cdef Py_ssize_t _insert(self, const i64* key, const i64* values) except -1
    cdef object _missed(self, object missing, const i64* key, Py_ssize_t row)
    cdef list _add_missed(self, dict missing, object make)
