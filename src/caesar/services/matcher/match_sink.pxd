# C-level contract of match_sink.pyx: one plan's matches appended as rows of
# C arrays (the columnar engine's output), taken as NumPy columns per call.
from caesar.services.matcher.typedefs cimport Cell, i64, u8


cdef class MatchSink:
    cdef readonly str plan_id
    cdef readonly str event_type
    cdef readonly tuple names
    cdef int nf
    cdef Py_ssize_t n, cap, ns, scap
    cdef i64* order
    cdef i64* part
    cdef i64* start
    cdef i64* end
    cdef i64* soff      # cap + 1 seq offsets
    cdef i64* seqs
    cdef Cell* vals     # cap * nf field values
    cdef u8* kinds      # their kind tags (typedefs), K_OBJ: in `objs`
    cdef dict objs      # row * nf + field -> a Python value (events added whole)

    cdef Py_ssize_t row(self, i64 order, i64 part, i64 start, i64 end) except -1
    cdef int reserve_seqs(self, Py_ssize_t k) except -1
    cdef _put_value(self, Py_ssize_t at, value)
    cdef void clear(self)
