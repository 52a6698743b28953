# C-level contract of part.pyx: the run state of one (plan, partition,
# equivalence key).
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
cdef Stack own_stack(Part part, int c)


cdef inline Stack owned(Part part, int c):
    """own_stack without its call when the part owns the stack already
    (every push after a part's first one: LR pushes per event and plan)."""
    cdef Stack s = <Stack> part.stacks[c]
    if not s.shared:
        return s
    return own_stack(part, c)
