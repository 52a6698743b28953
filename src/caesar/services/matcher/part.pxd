# C-level contract of part.pyx: the run state of one (plan, partition,
# equivalence key).
from cpython.list cimport PyList_CheckExact
from cpython.object cimport Py_SIZE
from cpython.tuple cimport PyTuple_CheckExact

from caesar.services.matcher.plan_runtime cimport PlanRT
from caesar.services.matcher.stack cimport Stack
from caesar.services.matcher.typedefs cimport i64


cdef class Part:
    cdef public tuple stacks   # Stack per component index
    cdef public object runs    # run = list (per positive component) of lists of absolute row ids
    cdef public object pending  # [deadline, DerivedEvent, rows]
    cdef public object ready   # [deadline, DerivedEvent]
    cdef public object key     # (partition, equivalence key)
    # after-match skip: complete matches waiting for earlier-started runs,
    # [(first seq, seqs), DerivedEvent, prune seq or None]
    cdef public object held
    # ts of the latest event that reached it: an idle sweep passes over a
    # part touched inside the window (the touch pruned it)
    cdef public i64 touched
    cdef bint empty(self)


cdef Part new_part(PlanRT p, object key)


cdef inline bint has_items(object o) except -1:
    """Does a Part's runs, pending, ready or held hold anything? They are
    () or lists: their size, not PyObject_IsTrue's call per test."""
    if PyTuple_CheckExact(o) or PyList_CheckExact(o):
        return Py_SIZE(o) > 0
    return bool(o)
cdef Stack own_stack(Part part, int c)


cdef inline Stack owned(Part part, int c):
    """own_stack without its call when the part owns the stack already
    (every push after a part's first one: LR pushes per event and plan)."""
    cdef Stack s = <Stack> part.stacks[c]
    if not s.shared:
        return s
    return own_stack(part, c)
