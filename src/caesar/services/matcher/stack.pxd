# C-level contract of stack.pyx: one component's rows (timestamp order).
from caesar.services.matcher.typedefs cimport Cell, i64, u8


cdef class Stack:
    cdef readonly int width  # readonly: the shared empty stacks must keep theirs
    cdef bint shared          # the shared empty stack of its width (empty_stack)
    cdef i64 n, head, cap, base
    cdef i64* ts
    cdef i64* seq
    cdef Cell* vals
    cdef u8* kinds
    cdef i64 push(self, i64 ts, i64 seq, const Cell* v, const u8* k) except -1
    cdef void compact(self) noexcept
    cdef void prune(self, i64 bound) noexcept
    cdef void pop(self) noexcept
    cdef i64 first_gt(self, i64 t) noexcept
    cdef int _grow(self, i64 cap) except -1


cdef Stack new_stack(int width)
cdef Stack empty_stack(int width)
